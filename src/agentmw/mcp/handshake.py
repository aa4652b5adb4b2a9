"""The handshake era (2024-11-05 … 2025-11-25): ``initialize``, sessions, server-to-client requests.

Sessions live in this process's memory (run one worker, use sticky routing, or prefer the stateless
era across replicas). Each is bound to the credential that opened it: a request carrying another
``Authorization`` gets 404, exactly as an unknown session does.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import logging
import secrets
import time
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any

from .._bounded import BoundedTable
from .._transport import classify_rpc, sse_comment, stream_sse, wait_for_exit
from .._types import Receive, Scope, Send
from ..context import InputRequest
from ..errors import Permanent
from ..identity import Forbidden, Unauthenticated, caller_from_headers
from ._cancel import CallGuard
from ._wire import (
    HANDSHAKE_VERSIONS,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    LATEST_HANDSHAKE,
    SESSION_NOT_FOUND,
    Exchange,
    JsonRpcError,
    error_body,
    json_response,
    plain_response,
    sse_frame,
)
from .convert import input_request
from .methods import LOG_RANK, Call, dispatch, parse_input_response

if TYPE_CHECKING:
    from .endpoint import Incoming, McpEndpoint

__all__ = ["Session", "SessionStore", "handle"]

logger = logging.getLogger("agentmw")
_SESSION_HEADER = b"mcp-session-id"
_CLIENT_ANSWER_TIMEOUT = 600.0


def _fingerprint(headers: Mapping[str, str]) -> str:
    return hashlib.sha256(headers.get("authorization", "").encode()).hexdigest()


class Session:
    __slots__ = ("id", "version", "client_capabilities", "client_info", "log_level", "credential", "last_seen",
                 "pending", "inflight", "stream", "subscriptions", "_ids", "caller")

    def __init__(self, version: str, client_capabilities: dict[str, Any], client_info: Any, credential: str) -> None:
        self.id = secrets.token_hex(16)
        self.version = version
        self.client_capabilities = client_capabilities
        self.client_info = client_info
        self.log_level: str | None = "debug"
        self.credential = credential
        self.last_seen = time.monotonic()
        self.pending: dict[Any, asyncio.Future[dict[str, Any]]] = {}
        self.inflight: dict[Any, CallGuard] = {}
        self.stream: asyncio.Queue[dict[str, Any]] | None = None
        self.subscriptions: set[str] = set()
        self._ids = itertools.count(1)
        self.caller: str | None = None  # resolved on the first call; bound, like the session, to its credential

    def next_request_id(self) -> str:
        return f"agentmw-{next(self._ids)}"

    def close(self) -> None:
        for scope in self.inflight.values():
            scope.cancel()
        for future in self.pending.values():
            if not future.done():
                future.cancel()
        self.pending.clear()


class SessionStore:
    def __init__(self, agent: Any) -> None:
        self.agent = agent
        # bounded: max_sessions, each dropped session_idle_seconds after its last use unless a call runs
        self.sessions: BoundedTable[str, Session] = BoundedTable(
            agent.max_sessions, agent.session_idle_seconds, pinned=lambda s: bool(s.inflight),
            on_evict=lambda _key, s, _early: s.close())
        agent.subscribe(self._on_agent_event)

    def _on_agent_event(self, event: str, data: Mapping[str, Any]) -> None:
        message = {"jsonrpc": "2.0", "method": f"notifications/{event}"}
        if data:
            message["params"] = dict(data)
        for session in self.sessions.values():
            if session.stream is None:
                continue
            if event == "resources/updated" and data.get("uri") not in session.subscriptions:
                continue
            session.stream.put_nowait(message)

    def open(self, session: Session) -> bool:
        if len(self.sessions) >= self.sessions.max_items:
            self.sessions.prune()  # the idle ones; a full table of live sessions refuses (503), evicts none
        if len(self.sessions) >= self.sessions.max_items:
            return False
        self.sessions[session.id] = session
        return True

    def find(self, session_id: str, credential: str) -> Session | None:
        session = self.sessions.get(session_id)  # None once idle too long (and closed)
        if session is None or session.credential != credential:
            return None
        session.last_seen = time.monotonic()
        self.sessions.put(session_id, session)  # used now: renewed, and the newest
        return session

    def close(self, session_id: str) -> None:
        session = self.sessions.pop(session_id, None)
        if session is not None:
            session.close()


async def _session_or_error(endpoint: McpEndpoint, incoming: Incoming, send: Send) -> Session | None:
    session_id = incoming.headers.get("mcp-session-id")
    if not session_id:
        await json_response(send, 400, error_body(None, INVALID_REQUEST, "Bad Request: Mcp-Session-Id header is required"))
        return None
    session = endpoint.sessions.find(session_id, _fingerprint(incoming.headers))
    if session is None:
        await json_response(send, 404, error_body(None, SESSION_NOT_FOUND, "Session not found"))
        return None
    return session


async def handle(endpoint: McpEndpoint, incoming: Incoming, scope: Scope, receive: Receive, send: Send) -> None:
    verb = scope["method"]
    if verb == "POST":
        await _post(endpoint, incoming, scope, receive, send)
    elif verb == "GET":
        if not incoming.accept_sse:
            await plain_response(send, 406, body=b"Not Acceptable: GET needs Accept: text/event-stream")
            return
        session = await _session_or_error(endpoint, incoming, send)
        if session is not None:
            await _listen(session, scope, receive, send)
    elif verb == "DELETE":
        session = await _session_or_error(endpoint, incoming, send)
        if session is not None:
            endpoint.sessions.close(session.id)
            await plain_response(send, 200)
    else:
        await plain_response(send, 405, [(b"allow", b"GET, POST, DELETE")])


async def _post(endpoint: McpEndpoint, incoming: Incoming, scope: Scope, receive: Receive, send: Send) -> None:
    if not (incoming.accept_json and incoming.accept_sse):
        await json_response(send, 406, error_body(
            None, INVALID_REQUEST, "Not Acceptable: Accept must list application/json and text/event-stream"))
        return
    body = await endpoint.read_json(incoming, receive)
    message = classify_rpc(body, responses=True)
    what, request_id = message.kind, message.id
    if what == "request" and message.method == "initialize":
        await _initialize(endpoint, incoming, body, send)
        return
    session = await _session_or_error(endpoint, incoming, send)
    if session is None:
        return
    if what == "notification":
        _notification(session, body)
        await plain_response(send, 202)
        return
    if what == "response":
        future = session.pending.pop(request_id, None)
        if future is not None and not future.done():
            future.set_result(body)
        await plain_response(send, 202)
        return
    if session.caller is None:
        session.caller = caller_from_headers(scope, incoming.headers.get("authorization"), endpoint.agent.identify)
    await _request(endpoint, session, scope, receive, send, body, request_id)


async def _initialize(endpoint: McpEndpoint, incoming: Incoming, body: dict[str, Any], send: Send) -> None:
    params = body.get("params") or {}
    request_id = body["id"]
    offered = params.get("protocolVersion")
    capabilities = params.get("capabilities")
    if not isinstance(offered, str) or not isinstance(capabilities, dict):
        await json_response(send, 200, error_body(
            request_id, INVALID_PARAMS, "initialize needs 'protocolVersion' (string) and 'capabilities' (object)"))
        return
    version = offered if offered in HANDSHAKE_VERSIONS else LATEST_HANDSHAKE
    session = Session(version, capabilities, params.get("clientInfo"), _fingerprint(incoming.headers))
    if not endpoint.sessions.open(session):
        await json_response(send, 503, error_body(request_id, INVALID_REQUEST, "Too many sessions; try again later"))
        return
    agent = endpoint.agent
    result: dict[str, Any] = {
        "protocolVersion": version,
        "capabilities": server_capabilities(),
        "serverInfo": {"name": agent.name, "version": agent.version},
    }
    if agent.instructions:
        result["instructions"] = agent.instructions
    await json_response(send, 200, {"jsonrpc": "2.0", "id": request_id, "result": result},
                        [(_SESSION_HEADER, session.id.encode())])


def server_capabilities() -> dict[str, Any]:
    return {
        "tools": {"listChanged": True},
        "resources": {"subscribe": True, "listChanged": True},
        "prompts": {"listChanged": True},
        "logging": {},
        "completions": {},
    }


def _notification(session: Session, body: dict[str, Any]) -> None:
    method = body["method"]
    params = body.get("params") or {}
    request_id = params.get("requestId")
    if method == "notifications/cancelled" and isinstance(request_id, (str, int)):
        scope = session.inflight.get(request_id)
        if scope is not None:
            scope.cancel()


async def _request(endpoint: McpEndpoint, session: Session, scope: Scope, receive: Receive, send: Send,
                   body: dict[str, Any], request_id: Any) -> None:
    method = body["method"]
    params = body.get("params")
    exchange = Exchange(send, [(_SESSION_HEADER, session.id.encode())], stateless=False)
    if method in _SESSION_METHODS:
        try:
            result = _SESSION_METHODS[method](session, params or {})
            await exchange.finish({"jsonrpc": "2.0", "id": request_id, "result": result})
        except JsonRpcError as exc:
            await exchange.finish(exc.body(request_id))
        return

    async def gather(call: Call, requests: Mapping[str, InputRequest], target: str) -> dict[str, Any]:
        answers: dict[str, Any] = {}
        for key, request in requests.items():
            answers[key] = await _ask_client(session, call.exchange, request, receive)
        return answers

    call = Call(endpoint.agent, endpoint.catalog, stateless=False, version=session.version,
                client_capabilities=session.client_capabilities, log_level=session.log_level,
                exchange=exchange, scope=scope, params=params or {}, gather=gather, caller=session.caller)
    guard = CallGuard()  # a dropped connection does not cancel in this era; notifications/cancelled does
    session.inflight[request_id] = guard
    payload: dict[str, Any] | None = None
    try:
        payload = {"jsonrpc": "2.0", "id": request_id, "result": await dispatch(call, method, params)}
    except JsonRpcError as exc:
        payload = exc.body(request_id)
    except (Unauthenticated, Forbidden):
        raise  # the identity boundary answers 401/403 at the HTTP level (endpoint.py)
    except Exception:  # a bug of ours: the answer still carries the request's id
        logger.exception("agentmw MCP %s failed", method)
        payload = error_body(request_id, INTERNAL_ERROR, "Internal error")
    except asyncio.CancelledError:
        if not guard.absorb():
            raise
    finally:
        guard.finish()
        session.inflight.pop(request_id, None)
    if payload is None:  # cancelled by the client: no response is owed, but the HTTP exchange must end
        await exchange.start_stream()
        exchange.closed = True
        await send({"type": "http.response.body", "body": b"", "more_body": False})
        return
    await exchange.finish(payload)


async def _ask_client(session: Session, exchange: Exchange, request: InputRequest, receive: Receive) -> Any:
    """Send a server-to-client request on the call's stream and wait for the answer, which the client POSTs.

    The wait ends without an answer when the client closes this stream (it can no longer see the question),
    when the server shuts down, or after ``_CLIENT_ANSWER_TIMEOUT``: each is a failed call, never a hang.
    """
    request_id = session.next_request_id()
    future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
    session.pending[request_id] = future
    wire = input_request(request)
    gone = asyncio.ensure_future(_client_gone(receive))
    try:
        await exchange.message({"jsonrpc": "2.0", "id": request_id, **wire})
        await asyncio.wait({future, gone}, timeout=_CLIENT_ANSWER_TIMEOUT, return_when=asyncio.FIRST_COMPLETED)
        if not future.done():
            why = gone.result() if gone.done() else "did not answer in time"
            raise Permanent(f"the client {why} before answering {wire['method']}")
        reply = future.result()
    finally:
        gone.cancel()
        session.pending.pop(request_id, None)
    if "error" in reply:
        error = reply["error"] if isinstance(reply["error"], dict) else {}
        raise Permanent(f"the client refused {wire['method']}: {error.get('message', 'error')}")
    parsed = parse_input_response(request, reply.get("result"))
    if parsed is None:
        raise Permanent(f"the client answered {wire['method']} with an invalid result")
    return parsed


async def _client_gone(receive: Receive) -> str:
    """Why this request's client can no longer answer: it closed the stream, or the server is stopping."""
    exiting = asyncio.ensure_future(wait_for_exit())
    try:
        while True:
            message = asyncio.ensure_future(receive())
            await asyncio.wait({message, exiting}, return_when=asyncio.FIRST_COMPLETED)
            if exiting.done():
                message.cancel()
                return "was cut off by the server shutting down"
            if message.result()["type"] == "http.disconnect":
                return "closed the stream"
    finally:
        exiting.cancel()


def _set_level(session: Session, params: dict[str, Any]) -> dict[str, Any]:
    level = params.get("level")
    if level not in LOG_RANK:
        raise JsonRpcError(INVALID_PARAMS, f"Unknown log level {level!r}")
    session.log_level = level
    return {}


def _subscription(subscribe: bool) -> Any:
    def change(session: Session, params: dict[str, Any]) -> dict[str, Any]:
        uri = params.get("uri")
        if not isinstance(uri, str):
            raise JsonRpcError(INVALID_PARAMS, "resources/(un)subscribe needs a string 'uri'")
        (session.subscriptions.add if subscribe else session.subscriptions.discard)(uri)
        return {}

    return change


_SESSION_METHODS = {
    "ping": lambda session, params: {},
    "logging/setLevel": _set_level,
    "resources/subscribe": _subscription(True),
    "resources/unsubscribe": _subscription(False),
}


async def _listen(session: Session, scope: Scope, receive: Receive, send: Send) -> None:
    """The GET stream: list changes and resource updates for this session, until the client leaves."""
    if session.stream is not None:
        await plain_response(send, 409, body=b"Conflict: this session already has a GET stream")
        return
    queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue(maxsize=1000)
    session.stream = queue

    async def frames() -> AsyncIterator[bytes]:
        yield sse_comment("stream open")
        while True:
            yield sse_frame(await queue.get())

    try:
        await stream_sse(scope, receive, send, frames(), headers=[(_SESSION_HEADER, session.id.encode())])
    finally:
        if session.stream is queue:
            session.stream = None
