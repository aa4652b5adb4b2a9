"""MCP over stdio: newline-delimited JSON-RPC on stdin/stdout, bridged to the app's own MCP endpoint in-process.

Each message read from stdin becomes an HTTP request to the ASGI app the user serves (no socket): the same
``POST /mcp`` a Streamable HTTP client would send, with the headers its era needs, so the host app's middleware,
``request.state``, its dependencies, ``AgentMiddleware`` and the agent's auth all run as they do over HTTP. What
the endpoint streams back (progress, logs, the handshake era's elicitation, sampling and roots requests) is
written to stdout as it arrives, one message a line; nothing else ever reaches stdout.

- **Handshake era** (``initialize``): the bridge holds the ``Mcp-Session-Id`` the endpoint issues and sends it,
  with the negotiated ``MCP-Protocol-Version``, on every later message; the client's answers to the server's
  requests are POSTed back on the session; after ``notifications/initialized`` the session's GET stream (list
  changes, resource updates) is forwarded too. ``notifications/cancelled`` is forwarded (this era cancels by
  notification).
- **Stateless era** (2026-07-28, a request carrying the ``_meta`` envelope): each request is posted on its own
  with the routing headers derived from its body (``MCP-Protocol-Version``, ``Mcp-Method``, ``Mcp-Name``,
  ``Mcp-Param-*``, base64-wrapped where a value is not plain ASCII), as the stateless HTTP rules require.
  ``notifications/cancelled`` closes the request's stream, which is this era's cancellation over HTTP.

Each message is routed by what it carries, so one process serves a client of either era (the era is the
client's choice; see ``docs/stdio.md``). Several requests run at once; a cancelled request's late answer is
not written (the spec: no response to a cancelled request).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import os
import queue
import signal
import sys
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final
from urllib.parse import urlsplit

from .._types import ASGIApp, Message
from ._wire import META_VERSION, STATELESS_VERSIONS
from .stateless import _NAME_PARAM, _param_headers, _render

__all__ = [
    "DRAIN_SECONDS",
    "MAX_LINE_BYTES",
    "Lifespan",
    "StdioBridge",
    "StdioWire",
    "check_header",
    "serve_stdio",
]

logger = logging.getLogger("agentmw.stdio")

MAX_LINE_BYTES: Final = 16 * 1024 * 1024
"""A longer line is refused (``-32600``) without being held; the endpoint's own body limit applies below it."""
DRAIN_SECONDS: Final = 10.0
"""After stdin ends, requests still running get this long to answer before they are cancelled."""
_CANCEL_GRACE_SECONDS: Final = (
    2.0  # a request whose stream was closed gets this long to notice, then is cancelled
)
_LISTEN_RETRY_SECONDS: Final = 1.0  # the handshake era's GET stream is reopened this long after it ends
_TEXT_LIMIT: Final = 300  # of a non-JSON-RPC answer's body, quoted in the error that stands for it
_MODERN: Final = STATELESS_VERSIONS[-1]
_TOO_LONG: Final = (
    b"\x00too-long"  # the reader's mark for a line past MAX_LINE_BYTES (never a real line: NUL)
)

PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600
INTERNAL_ERROR: Final = -32603
NO_SESSION: Final = (
    "No session: send initialize first (protocol 2025-11-25 and earlier), or give every request the "
    "2026-07-28 envelope (params._meta with io.modelcontextprotocol/protocolVersion and clientCapabilities)"
)


def _error(request_id: Any, code: int, message: str, data: Any = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": request_id, "error": error}


def _valid_id(value: Any, *, answer: bool) -> bool:
    """A request's id is a string or a number (MCP: never null); a response's may be null (an error)."""
    if value is None:
        return answer
    return isinstance(value, (str, int, float)) and not isinstance(value, bool)


_TCHAR: Final = frozenset("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")


def check_header(name: str, value: str) -> None:
    """Refuse (ValueError) a header HTTP cannot carry: a name that is not a token, a value with a character
    outside Latin-1 or a control character (CR or LF would end the header; a tab is allowed). The message
    names the header, never its value (it is often a credential)."""
    if not name or not set(name) <= _TCHAR:
        raise ValueError(f"{name!r} is not a header name (letters, digits and !#$%&'*+-.^_`|~ only)")
    try:
        value.encode("latin-1")
    except UnicodeEncodeError:
        raise ValueError(f"the header {name!r} holds characters HTTP headers cannot carry") from None
    if any((ord(c) < 0x20 and c != "\t") or ord(c) == 0x7F for c in value):
        raise ValueError(f"the header {name!r} holds a control character (a line break ends a header)")


def header_value(value: str) -> str:
    """A routing header's value: as is when it is plain visible ASCII, else ``=?base64?…?=`` (the 2026 rule)."""
    if value and value == value.strip() and value.isascii() and value.isprintable():
        return value
    return "=?base64?" + base64.b64encode(value.encode("utf-8")).decode("ascii") + "?="


class _SseReader:
    """Incremental ``text/event-stream``: bytes in, the JSON ``data`` of each complete event out."""

    def __init__(self) -> None:
        self._pending = b""

    def feed(self, chunk: bytes) -> list[Any]:
        self._pending += chunk.replace(b"\r\n", b"\n")
        out: list[Any] = []
        while (end := self._pending.find(b"\n\n")) >= 0:
            block, self._pending = self._pending[:end], self._pending[end + 2 :]
            data = b"\n".join(
                line[5:].removeprefix(b" ") for line in block.split(b"\n") if line.startswith(b"data:")
            )
            if data:  # comments (keep-alives) and id-only events carry none
                try:
                    out.append(json.loads(data))
                except ValueError:
                    logger.warning("the endpoint sent an SSE event that is not JSON; it was dropped")
        return out


class _Exchange:
    """One in-process HTTP exchange with the app: ``events()`` yields what it sends; ``leave()`` is the client
    closing the connection (``http.disconnect``)."""

    def __init__(self, app: ASGIApp, scope: dict[str, Any], body: bytes) -> None:
        self.app = app
        self.scope = scope
        self.body = body
        self.left = asyncio.Event()
        self.sent: asyncio.Queue[Message | None] = asyncio.Queue()
        self._delivered = False
        self.task: asyncio.Task[None] | None = None

    async def _receive(self) -> Message:
        if not self._delivered:
            self._delivered = True
            return {"type": "http.request", "body": self.body, "more_body": False}
        await self.left.wait()
        return {"type": "http.disconnect"}

    async def _send(self, message: Message) -> None:
        if not self.left.is_set():
            self.sent.put_nowait(message)

    async def _run(self) -> None:
        try:
            await self.app(self.scope, self._receive, self._send)
        except asyncio.CancelledError:
            raise
        except Exception:  # the app's own failure: logged on stderr (as a server would), answered as -32603
            if not self.left.is_set():
                logger.exception("the app failed on %s %s", self.scope["method"], self.scope["path"])
        finally:
            self.sent.put_nowait(None)

    def start(self) -> None:
        self.task = asyncio.get_running_loop().create_task(self._run())

    async def leave(self, grace: float | None = _CANCEL_GRACE_SECONDS) -> None:
        """The client closes the connection; the app gets ``grace`` seconds to end, then is cancelled (None: it
        ends on its own, as after a complete response: a background task of the route's still runs)."""
        self.left.set()
        self.sent.put_nowait(None)  # the reader stops now
        task = self.task
        if grace is not None and task is not None and not task.done():
            done, _ = await asyncio.wait({task}, timeout=grace)
            if not done:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)


@dataclass
class _Flight:
    """A request of the client's that is running: its era, its exchange, and whether it was cancelled."""

    era: str
    endless: bool = False  # subscriptions/listen: it answers only when the client ends it
    exchange: _Exchange | None = None
    cancelled: bool = False
    done: asyncio.Event = field(default_factory=asyncio.Event)


class StdioBridge:
    """Turns stdin's JSON-RPC messages into requests to ``app``'s MCP endpoint and writes the answers out.

    Args:
        app: the ASGI app (the host app with ``AgentMiddleware``, or ``agent.asgi()``).
        write: called with each outgoing message (a JSON-RPC object), in order.
        path: where the MCP endpoint is inside ``app``.
        headers: sent on every request: the caller's identity (``Authorization``) and anything the app reads.
        base_url: the scheme and ``Host`` the requests carry (what a token's audience is checked against).
        tool_schema: a tool's input schema by name, for the 2026 ``Mcp-Param-*`` headers.
        state: the lifespan state, copied into each request's ``scope["state"]`` (as uvicorn does).
    """

    def __init__(
        self,
        app: ASGIApp,
        write: Callable[[dict[str, Any]], None],
        *,
        path: str = "/mcp",
        headers: Mapping[str, str] | None = None,
        base_url: str = "http://127.0.0.1:8000",
        tool_schema: Callable[[str], Mapping[str, Any] | None] | None = None,
        state: Mapping[str, Any] | None = None,
    ) -> None:
        self.app = app
        self.write = write
        self.path = path
        parts = urlsplit(base_url)
        self._scheme = parts.scheme or "http"
        self._host = parts.netloc or "127.0.0.1:8000"
        self._root = parts.path.rstrip("/")
        self.headers = {k.lower(): v for k, v in (headers or {}).items()}
        for name, value in (("host", self._host), *self.headers.items()):
            check_header(name, value)  # here, not as a -32603 for every request
        self.tool_schema = tool_schema
        self.state = dict(state or {})
        self.session_id: str | None = None
        self.version: str | None = None  # the handshake era's negotiated version
        self.modern_version = _MODERN  # the last 2026-era version a request carried (for its notifications)
        self._flights: dict[Any, _Flight] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._listener: asyncio.Task[None] | None = None
        self._param_cache: dict[str, list[tuple[tuple[str, ...], str, str | None]]] = {}
        self._warned_auth = False
        self._opening: asyncio.Event | None = None  # set once the latest initialize is answered
        self.closing = False

    # --- in -------------------------------------------------------------------------------------------------

    def receive(self, line: bytes) -> None:
        """One line from stdin: answered at once when it is not a JSON-RPC message, else sent on its way."""
        if line == _TOO_LONG:
            self.write(_error(None, INVALID_REQUEST, f"message exceeds {MAX_LINE_BYTES} bytes"))
            return
        if not line.strip():
            return  # a blank line carries nothing (some clients end with one)
        try:
            message = json.loads(line)
        except ValueError as exc:
            self.write(_error(None, PARSE_ERROR, f"Parse error: {exc}"))
            return
        if not isinstance(message, dict):
            self.write(_error(None, INVALID_REQUEST, "a message is one JSON-RPC object (no batches)"))
            return
        request_id = message.get("id")
        method = message.get("method")
        if "id" in message and not _valid_id(request_id, answer="method" not in message):
            self.write(_error(None, INVALID_REQUEST, "an id is a string or a number"))
            return
        if isinstance(method, str) and "id" in message:
            if request_id in self._flights:
                self.write(
                    _error(request_id, INVALID_REQUEST, f"request id {request_id!r} is already in use")
                )
                return
            modern = self._modern(method, message.get("params"))
            flight = self._flights[request_id] = _Flight(
                "modern" if modern else "handshake", endless=method == "subscriptions/listen"
            )
            waits = None if modern else self._opening  # this era's messages follow the initialize before them
            if method == "initialize":
                self._opening = flight.done  # what follows waits for the session it opens
            self._spawn(self._request(message, method, request_id, flight, waits))
        elif isinstance(method, str):
            self._spawn(self._notification(message, method, self._opening))
        elif "id" in message and ("result" in message or "error" in message):
            self._spawn(self._respond(message, self._opening))
        else:
            self.write(
                _error(request_id, INVALID_REQUEST, "not a JSON-RPC request, notification or response")
            )

    def _spawn(self, work: Any) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    # --- headers ------------------------------------------------------------------------------------------

    def _session_headers(self) -> dict[str, str]:
        headers: dict[str, str] = {}
        if self.session_id is not None:
            headers["mcp-session-id"] = self.session_id
        if self.version is not None:
            headers["mcp-protocol-version"] = self.version
        return headers

    def _modern_headers(self, method: str, params: Mapping[str, Any], version: str) -> dict[str, str]:
        headers = {"mcp-protocol-version": version, "mcp-method": method}
        key = _NAME_PARAM.get(method)
        name = params.get(key) if key is not None else None
        if isinstance(name, (str, int)) and not isinstance(name, bool):
            headers["mcp-name"] = header_value(str(name))
        if method == "tools/call" and isinstance(name, str):
            headers.update(self._param_headers(name, params.get("arguments")))
        return headers

    def _param_headers(self, tool: str, arguments: Any) -> dict[str, str]:
        declared = self._param_cache.get(tool)
        if declared is None:
            schema = self.tool_schema(tool) if self.tool_schema is not None else None
            if not isinstance(schema, Mapping):
                return {}  # an unknown tool: the endpoint says so (and a client's made-up names are not kept)
            declared = self._param_cache[tool] = _param_headers(schema)
        headers: dict[str, str] = {}
        for path, token, _kind in declared:
            value: Any = arguments
            for key in path:
                value = value.get(key) if isinstance(value, dict) else None
            rendered = _render(value) if value is not None else None
            if rendered is not None:
                headers[f"mcp-param-{token.lower()}"] = header_value(rendered)
        return headers

    def _era_of(self, method: str, params: Any) -> tuple[str, dict[str, str]]:
        """``("modern", headers)`` for a request with the 2026 envelope, else ``("handshake", headers)``."""
        if self._modern(method, params):
            version = params["_meta"][META_VERSION]
            version = version if isinstance(version, str) else json.dumps(version)
            self.modern_version = version if version in STATELESS_VERSIONS else self.modern_version
            return "modern", self._modern_headers(method, params, version)
        if method == "initialize":
            return "handshake", {}
        return "handshake", self._session_headers()

    # --- out ----------------------------------------------------------------------------------------------

    def _scope(self, verb: str, headers: Mapping[str, str], body: bytes) -> dict[str, Any]:
        merged = {**self.headers, **headers}
        raw = [(b"host", self._host.encode("latin-1"))]
        raw += [(k.encode("latin-1"), v.encode("latin-1")) for k, v in merged.items() if k != "host"]
        if body:
            raw.append((b"content-length", str(len(body)).encode()))
        hostname, _, port = self._host.rpartition(":") if ":" in self._host else (self._host, "", "")
        path = self._root + self.path
        return {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.4"},
            "http_version": "1.1",
            "method": verb,
            "scheme": self._scheme,
            "path": path,
            "raw_path": path.encode(),
            "query_string": b"",
            "root_path": "",
            "headers": raw,
            "client": ("127.0.0.1", 0),
            "server": (hostname or self._host, int(port) if port.isdigit() else 80),
            "extensions": {},
            "state": dict(self.state),
        }

    def _exchange(self, verb: str, headers: Mapping[str, str], message: Any = None) -> _Exchange:
        body = b"" if message is None else json.dumps(message, ensure_ascii=False).encode()
        base = {"accept": "application/json, text/event-stream"}
        if message is not None:
            base["content-type"] = "application/json"
        exchange = _Exchange(self.app, self._scope(verb, {**base, **headers}, body), body)
        exchange.start()
        return exchange

    @staticmethod
    def _modern(method: str, params: Any) -> bool:
        meta = params.get("_meta") if isinstance(params, dict) else None
        return method != "initialize" and isinstance(meta, dict) and META_VERSION in meta

    async def _request(
        self,
        message: dict[str, Any],
        method: str,
        request_id: Any,
        flight: _Flight,
        opening: asyncio.Event | None,
    ) -> None:
        try:
            if opening is not None:  # a handshake-era message sent before initialize was answered
                await opening.wait()
            if not flight.cancelled:
                await self._forward(message, method, request_id, flight)
        except Exception:  # a bug of the bridge's: this request still gets an answer, the others go on
            logger.exception("serving %s over stdio failed", method)
            if not flight.cancelled and not self.closing:
                self.write(_error(request_id, INTERNAL_ERROR, "Internal error"))
        finally:
            if self._flights.get(request_id) is flight:
                del self._flights[request_id]
            flight.done.set()

    async def _forward(self, message: dict[str, Any], method: str, request_id: Any, flight: _Flight) -> None:
        era, headers = self._era_of(method, message.get("params"))
        logger.debug("%s (id %r): %s era", method, request_id, era)
        if era == "handshake" and method != "initialize" and self.session_id is None:
            # over HTTP this is "Mcp-Session-Id header is required"; a stdio client cannot send one
            if method == "ping":  # allowed before initialize (the lifecycle's one exception)
                self.write({"jsonrpc": "2.0", "id": request_id, "result": {}})
            else:
                self.write(_error(request_id, INVALID_REQUEST, NO_SESSION))
            return
        flight.exchange = exchange = self._exchange("POST", headers, message)
        try:
            answered = False
            status, response_headers, body = 0, {}, bytearray()
            stream: _SseReader | None = None
            while (sent := await exchange.sent.get()) is not None:
                if sent["type"] == "http.response.start":
                    status = sent["status"]
                    response_headers = {
                        k.decode("latin-1").lower(): v.decode("latin-1") for k, v in sent.get("headers", [])
                    }
                    if response_headers.get("content-type", "").startswith("text/event-stream"):
                        stream = _SseReader()
                elif sent["type"] == "http.response.body":
                    chunk = sent.get("body", b"")
                    if stream is None:
                        body += chunk
                    else:
                        for event in stream.feed(chunk):
                            answered = self._relay(event, request_id, flight.cancelled) or answered
                    if not sent.get("more_body", False):
                        break
            if method == "initialize":
                self._opened(response_headers, bytes(body))
            if stream is None and not flight.cancelled:
                answered = self._answer_json(request_id, status, response_headers, bytes(body))
            if not answered and not flight.cancelled and not self.closing:
                self.write(
                    _error(request_id, INTERNAL_ERROR, "the server ended the request without an answer")
                )
        finally:
            if not exchange.left.is_set():
                await exchange.leave(None)

    def _relay(self, event: Any, request_id: Any, cancelled: bool) -> bool:
        """One message of a request's stream; True when it is the request's answer."""
        if not isinstance(event, dict):
            return False
        is_answer = "method" not in event and ("result" in event or "error" in event)
        if cancelled:
            return is_answer  # nothing more is sent for a cancelled request
        if is_answer and event.get("id") is None:
            event = {**event, "id": request_id}  # over stdio the id is the only pairing: restore it
        self.write(event)
        return is_answer

    def _answer_json(self, request_id: Any, status: int, headers: Mapping[str, str], body: bytes) -> bool:
        reply: Any = None
        if headers.get("content-type", "").startswith("application/json"):
            try:
                reply = json.loads(body)
            except ValueError:
                reply = None
        if status == 401:
            self._auth_hint()
        if isinstance(reply, dict) and ("result" in reply or "error" in reply):
            return self._relay(reply, request_id, False)
        if status == 202 or (not body and 200 <= status < 300):
            return False
        text = body.decode("utf-8", "replace").strip()[:_TEXT_LIMIT] or "no body"
        code = INTERNAL_ERROR if status >= 500 or status == 0 else INVALID_REQUEST
        self.write(_error(request_id, code, f"HTTP {status or 500}: {text}"))
        return True

    def _auth_hint(self) -> None:
        if not self._warned_auth:
            self._warned_auth = True
            given = "authorization" in self.headers
            logger.warning(
                "the app refused a request as unauthenticated (401)%s",
                "; the credential given was not accepted"
                if given
                else ": give a credential with --token, $AGENTMW_STDIO_TOKEN or --header 'Authorization: ...'",
            )

    def _opened(self, headers: Mapping[str, str], body: bytes) -> None:
        """An ``initialize`` answered: the session (and version) every later handshake message carries."""
        session = headers.get("mcp-session-id")
        try:
            result = json.loads(body).get("result") if body else None
        except (ValueError, AttributeError):
            result = None
        if session is None or not isinstance(result, dict):
            return
        previous = self.session_id
        if previous is not None and previous != session:
            self._stop_listening()
            self._spawn(self._delete(previous))
        self.session_id = session
        version = result.get("protocolVersion")
        self.version = version if isinstance(version, str) else None

    async def _respond(self, message: dict[str, Any], opening: asyncio.Event | None) -> None:
        """The client's answer to a server's request (the handshake era's elicitation, sampling, roots)."""
        if opening is not None:
            await opening.wait()
        await self._post_quietly(message, "a response", self._session_headers())

    async def _notification(
        self, message: dict[str, Any], method: str, opening: asyncio.Event | None
    ) -> None:
        given = message.get("params")
        params: dict[str, Any] = given if isinstance(given, dict) else {}
        if opening is not None and method != "notifications/cancelled":
            await opening.wait()
        if method == "notifications/cancelled":
            flight = self._flights.get(params.get("requestId"))
            if flight is not None:
                flight.cancelled = True
                if flight.era == "modern":  # this era's cancellation is closing the request's stream
                    if flight.exchange is not None:
                        self._spawn(flight.exchange.leave())
                    return
        if self.session_id is not None:
            await self._post_quietly(message, method, self._session_headers())
        else:  # no session: a 2026 client's (that era has few notifications, and refuses the handshake's)
            headers = {"mcp-protocol-version": self.modern_version, "mcp-method": method}
            await self._post_quietly(message, method, headers, level=logging.DEBUG)
        if method == "notifications/initialized" and self.session_id is not None:
            self._stop_listening()
            self._listener = self._spawn(self._listen(self.session_id))

    async def _post_quietly(
        self, message: dict[str, Any], what: str, headers: Mapping[str, str], level: int = logging.WARNING
    ) -> None:
        """POST a notification or a response: nothing is written back (202); a refusal is logged."""
        exchange = self._exchange("POST", headers, message)
        status, body = 0, b""
        while (sent := await exchange.sent.get()) is not None:
            if sent["type"] == "http.response.start":
                status = sent["status"]
            elif sent["type"] == "http.response.body":
                body += sent.get("body", b"")
                if not sent.get("more_body", False):
                    break
        if not 200 <= status < 300:
            logger.log(
                level,
                "the endpoint refused %s (HTTP %s): %s",
                what,
                status,
                body.decode("utf-8", "replace")[:_TEXT_LIMIT],
            )

    async def _listen(self, session: str) -> None:
        """The handshake era's GET stream (list changes, resource updates), relayed while the session lasts."""
        while not self.closing and self.session_id == session:
            exchange = self._exchange("GET", self._session_headers())
            stream: _SseReader | None = None
            try:
                while (sent := await exchange.sent.get()) is not None:
                    if sent["type"] == "http.response.start":
                        if sent["status"] != 200:
                            return  # no GET stream here (405), or one already open (409): nothing to relay
                        stream = _SseReader()
                    elif sent["type"] == "http.response.body" and stream is not None:
                        for event in stream.feed(sent.get("body", b"")):
                            if isinstance(event, dict):
                                self.write(event)
                        if not sent.get("more_body", False):
                            break
            finally:
                await exchange.leave(0.5)
            await asyncio.sleep(_LISTEN_RETRY_SECONDS)

    def _stop_listening(self) -> None:
        if self._listener is not None:
            self._listener.cancel()
            self._listener = None

    async def _delete(self, session: str) -> None:
        exchange = self._exchange("DELETE", {"mcp-session-id": session})
        while await exchange.sent.get() is not None:
            pass

    # --- the end --------------------------------------------------------------------------------------------

    @property
    def running(self) -> int:
        return len(self._flights)

    async def drain(self, timeout: float) -> None:
        """Wait up to ``timeout`` for the requests still running to answer (a subscription never does)."""
        waits = [asyncio.ensure_future(f.done.wait()) for f in self._flights.values() if not f.endless]
        if waits:
            _, pending = await asyncio.wait(waits, timeout=timeout)
            for wait in pending:
                wait.cancel()

    async def aclose(self) -> None:
        """Cancel what still runs (its stream closed, as a client leaving), end the session."""
        self.closing = True
        self._stop_listening()
        flights = list(self._flights.values())
        for flight in flights:
            flight.cancelled = True
        await asyncio.gather(
            *(f.exchange.leave() for f in flights if f.exchange is not None), return_exceptions=True
        )
        if self.session_id is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._delete(self.session_id), 2.0)
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)


class Lifespan:
    """The app's ASGI lifespan, run once around the process (``startup`` before the first message)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.state: dict[str, Any] = {}
        self._inbox: asyncio.Queue[Message] = asyncio.Queue()
        self._outbox: asyncio.Queue[Message | None] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None
        self.supported = True

    async def _run(self) -> None:
        scope = {"type": "lifespan", "asgi": {"version": "3.0", "spec_version": "2.0"}, "state": self.state}
        try:
            await self.app(scope, self._inbox.get, self._send)
        except Exception as exc:  # noqa: BLE001  (an app without lifespan support raises on the scope: served without)
            logger.debug("the app's lifespan ended: %r", exc)
            self._outbox.put_nowait({"type": "lifespan.unsupported", "message": str(exc)})
        finally:
            self._outbox.put_nowait(None)

    async def _send(self, message: Message) -> None:
        self._outbox.put_nowait(message)

    async def startup(self) -> str | None:
        """None once started (or when the app has no lifespan); the app's message when its startup failed."""
        self._task = asyncio.get_running_loop().create_task(self._run())
        self._inbox.put_nowait({"type": "lifespan.startup"})
        reply = await self._outbox.get()
        if reply is None or reply["type"] == "lifespan.unsupported":
            self.supported = False
            return None
        if reply["type"] == "lifespan.startup.failed":
            self.supported = False
            return str(reply.get("message") or "the app's startup failed")
        return None

    async def shutdown(self, timeout: float = 10.0) -> None:
        if self._task is None:
            return
        if self.supported and not self._task.done():
            self._inbox.put_nowait({"type": "lifespan.shutdown"})
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._until_shut(), timeout)
        if not self._task.done():
            self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)

    async def _until_shut(self) -> None:
        while (reply := await self._outbox.get()) is not None:
            if reply["type"] == "lifespan.shutdown.failed":
                logger.warning("the app's shutdown failed: %s", reply.get("message", ""))


class StdioWire:
    """The process's stdin and stdout, claimed for the protocol: the wire is kept on private descriptors, and
    fd 1 then points at stderr and fd 0 at the null device, so a ``print`` anywhere in the app (or a library
    writing to stdout, a child process) lands on stderr and never corrupts the stream."""

    def __init__(self, read_fd: int, write_fd: int, restore: Callable[[], None] | None = None) -> None:
        self.read_fd = read_fd
        self.write_fd = write_fd
        self._restore = restore

    @classmethod
    def claim(cls) -> StdioWire:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
        read_fd, write_fd = os.dup(0), os.dup(1)  # non-inheritable: children never get the wire
        saved_in, saved_out = os.dup(0), os.dup(1)
        os.dup2(2, 1)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)

        def restore() -> None:
            with contextlib.suppress(Exception):
                sys.stdout.flush()
            for saved, fd in ((saved_in, 0), (saved_out, 1)):
                with contextlib.suppress(OSError):
                    os.dup2(saved, fd)
                    os.close(saved)

        return cls(read_fd, write_fd, restore)

    def restore(self) -> None:
        if self._restore is not None:
            self._restore()
            self._restore = None


def _read_lines(fd: int, deliver: Callable[[bytes | None], None]) -> None:
    """The reader thread: stdin's lines as they come (``None`` at end of file)."""
    pending = b""
    skipping = False
    try:
        while chunk := os.read(fd, 65536):
            pending += chunk
            while (end := pending.find(b"\n")) >= 0:
                line, pending = pending[:end], pending[end + 1 :]
                if skipping:
                    skipping = False  # the end of the line that was too long
                else:
                    deliver(line)
            if len(pending) > MAX_LINE_BYTES:
                if not skipping:
                    deliver(_TOO_LONG)
                skipping, pending = True, b""
    except OSError as exc:
        logger.debug("stdin failed: %r", exc)
    if pending.strip() and not skipping:
        deliver(pending)  # a last line without its newline
    deliver(None)


class _Writer:
    """The writer thread: one message a line on the wire, in order; ``broken`` once the client stopped reading."""

    def __init__(self, fd: int, on_broken: Callable[[], None] = lambda: None) -> None:
        self.fd = fd
        self.on_broken = on_broken  # called from the writer thread
        self.broken = threading.Event()
        self._queue: queue.Queue[bytes | None] = queue.Queue()
        self._thread = threading.Thread(target=self._run, name="agentmw-stdio-writer", daemon=True)
        self._thread.start()

    def __call__(self, message: dict[str, Any]) -> None:
        if self.broken.is_set():
            return  # the client stopped reading: nothing is kept for it
        try:
            line = json.dumps(message, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        except ValueError:  # a NaN or an infinity has no JSON form: the message is refused, not corrupted
            if "id" not in message:
                logger.warning("a notification held a number JSON cannot carry; it was dropped")
                return
            line = json.dumps(
                _error(message.get("id"), INTERNAL_ERROR, "the answer held a number JSON cannot carry"),
                separators=(",", ":"),
            )
        self._queue.put((line + "\n").encode("utf-8"))

    def _run(self) -> None:
        while (data := self._queue.get()) is not None:
            view = memoryview(data)
            try:
                while view:
                    view = view[os.write(self.fd, view) :]
            except OSError:  # the client closed its end: nobody reads what this process would say
                self.broken.set()
                self.on_broken()
                return

    def close(self, timeout: float = 2.0) -> None:
        self._queue.put(None)
        self._thread.join(timeout)


async def serve_stdio(
    app: ASGIApp,
    wire: StdioWire,
    *,
    path: str = "/mcp",
    headers: Mapping[str, str] | None = None,
    base_url: str = "http://127.0.0.1:8000",
    tool_schema: Callable[[str], Mapping[str, Any] | None] | None = None,
    drain_seconds: float = DRAIN_SECONDS,
) -> int:
    """Serve ``app``'s MCP endpoint on ``wire`` until stdin ends or SIGTERM/SIGINT; returns the exit status
    (0; 1 when the app's startup failed; 130 on SIGINT)."""
    lifespan = Lifespan(app)
    failed = await lifespan.startup()
    if failed is not None:
        logger.error("the app's startup failed: %s", failed)
        await lifespan.shutdown()
        return 1
    loop = asyncio.get_running_loop()
    lines: asyncio.Queue[bytes | None] = asyncio.Queue()
    stopped: asyncio.Future[int] = loop.create_future()

    def stop(code: int) -> None:
        if not stopped.done():
            stopped.set_result(code)

    def stop_soon() -> None:  # from the writer thread: the client closed stdout
        with contextlib.suppress(RuntimeError):  # the loop already closed
            loop.call_soon_threadsafe(stop, 0)

    writer = _Writer(wire.write_fd, stop_soon)
    bridge = StdioBridge(
        app,
        writer,
        path=path,
        headers=headers,
        base_url=base_url,
        tool_schema=tool_schema,
        state=lifespan.state,
    )

    signals = {signal.SIGTERM: 0, signal.SIGINT: 130}
    for number, code in signals.items():
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(number, stop, code)

    def deliver(line: bytes | None) -> None:
        with contextlib.suppress(RuntimeError):  # the loop closed (the process is exiting): nobody reads it
            loop.call_soon_threadsafe(lines.put_nowait, line)

    reader = threading.Thread(
        target=_read_lines,
        args=(wire.read_fd, deliver),
        name="agentmw-stdio-reader",
        daemon=True,  # blocked in a read at exit: never waited for
    )
    reader.start()
    code = 0
    try:
        while True:
            line_task = asyncio.ensure_future(lines.get())
            either: set[asyncio.Future[Any]] = {line_task, stopped}
            await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
            if stopped.done() or writer.broken.is_set():
                line_task.cancel()
                code = stopped.result() if stopped.done() else 0
                break
            line = line_task.result()
            if line is None:  # stdin ended: the client is done; what runs may still answer
                drain = asyncio.ensure_future(bridge.drain(drain_seconds))
                until: set[asyncio.Future[Any]] = {drain, stopped}
                await asyncio.wait(until, return_when=asyncio.FIRST_COMPLETED)
                drain.cancel()
                code = stopped.result() if stopped.done() else 0
                break
            try:
                bridge.receive(line)
            except Exception:  # a bug of the bridge's on one line: logged, and the next line is read
                logger.exception("a line from stdin could not be handled")
    finally:
        _shutting_down()
        await bridge.aclose()
        await lifespan.shutdown()
        for number in signals:
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.remove_signal_handler(number)
        writer.close()
    return code


def _shutting_down() -> None:
    """Tell the app's waiting streams the server stops (what uvicorn's exit does, seen through sse-starlette)."""
    try:
        from sse_starlette.sse import AppStatus
    except ImportError:  # pragma: no cover  (a core dependency)
        return
    AppStatus.should_exit = True
