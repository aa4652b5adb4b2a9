"""The stateless era (2026-07-28): one self-contained POST per request, checked in the SDK's order.

No sessions: every request carries its own ``_meta`` envelope and mirrors its routing facts in headers.
A question for the person behind the client ends the request with ``input_required`` and a signed
``requestState``; the retry replays the function with the answers (see ``docs/mcp.md``). Closing the
response stream cancels the call.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import logging
import re
import time
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from starlette.requests import HTTPConnection

from .._bounded import UsedTokens
from .._transport import classify_rpc, stream_sse
from .._types import Receive, Scope, Send
from ..context import InputRequest
from ..errors import AccessRefused
from ..identity import caller_from_headers, resolve_caller
from ..runtime import InputsPending
from ..state import StoreLimits
from . import _state
from ._cancel import CallGuard
from ._host import McpHost
from ._wire import (
    HEADER_MISMATCH,
    INVALID_PARAMS,
    META_CAPABILITIES,
    META_LOG_LEVEL,
    META_SERVER_INFO,
    META_SUBSCRIPTION,
    META_VERSION,
    METHOD_NOT_FOUND,
    STATELESS_VERSIONS,
    UNSUPPORTED_VERSION,
    Exchange,
    JsonRpcError,
    error_body,
    fault_body,
    json_response,
    plain_response,
    sse_frame,
    status_for,
)
from .handshake import server_capabilities
from .methods import INPUT_METHODS, LOG_RANK, Call, dispatch, parse_input_response

if TYPE_CHECKING:
    from .endpoint import Incoming, McpEndpoint

__all__ = ["ListenHub", "UsedStates", "handle"]

logger = logging.getLogger("agentmw")

_REMOVED = frozenset(
    {
        "initialize",
        "ping",
        "logging/setLevel",
        "resources/subscribe",
        "resources/unsubscribe",
        "notifications/initialized",
        "notifications/roots/list_changed",
        "notifications/elicitation/complete",
    }
)
_CACHEABLE = frozenset(
    {
        "tools/list",
        "prompts/list",
        "resources/list",
        "resources/templates/list",
        "resources/read",
        "server/discover",
        # the skills extension: its results extend CacheableResult (SEP-2640); resources/directory/read's not
        "skills/list",
        "skills/get",
    }
)
_NAME_PARAM = {
    "tools/call": "name",
    "prompts/get": "name",
    "resources/read": "uri",
    "tasks/get": "taskId",
    "tasks/update": "taskId",
    "tasks/cancel": "taskId",
}
_ROUTING_HEADERS = ("mcp-protocol-version", "mcp-method", "mcp-name")
_B64 = re.compile(r"^=\?base64\?(.*)\?=$")


def decode_header(value: str | None) -> str | None:
    """A header value with the ``=?base64?…?=`` wrapping undone; None when the wrapping is malformed."""
    if value is None:
        return None
    value = value.strip()
    if not value.startswith("=?"):
        return value
    match = _B64.fullmatch(value)
    if match is None:
        return value
    try:
        decoded = base64.b64decode(match.group(1), validate=True)
        return decoded.decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None


def _render(value: Any) -> str | None:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, int, float)):
        return str(value)
    return None


def _param_headers(schema: Mapping[str, Any]) -> list[tuple[tuple[str, ...], str, str | None]]:
    """(argument path, header token, property type) for each ``x-mcp-header`` property."""
    found: list[tuple[tuple[str, ...], str, str | None]] = []

    def walk(node: Any, path: tuple[str, ...]) -> None:
        if not isinstance(node, dict):
            return
        for name, sub in (node.get("properties") or {}).items():
            if isinstance(sub, dict):
                token = sub.get("x-mcp-header")
                if isinstance(token, str):
                    found.append(((*path, name), token, sub.get("type")))
                walk(sub, (*path, name))

    walk(schema, ())
    return found


def _check_param_headers(
    agent: McpHost,
    params: Mapping[str, Any],
    raw_headers: list[tuple[bytes, bytes]],
    scope: Mapping[str, Any] | None = None,
) -> str | None:
    cap = agent.tools.get(params.get("name"))  # type: ignore[arg-type]
    if cap is None or (agent.access is not None and agent.access.hides(cap, scope)):
        return None  # a hidden tool is unknown: its headers are never read, so no mismatch reveals it
    declared = cap.params.header_params
    if declared is None:
        declared = cap.params.header_params = _param_headers(cap.input_schema)
    if not declared:
        return None
    seen: dict[str, list[str]] = {}
    for raw_name, raw_value in raw_headers:
        name = raw_name.decode("latin-1").lower()
        if name.startswith("mcp-param-"):
            seen.setdefault(name, []).append(raw_value.decode("latin-1"))
    arguments = params.get("arguments") or {}
    for path, token, kind in declared:
        header = f"mcp-param-{token.lower()}"
        values = seen.get(header)
        value: Any = arguments
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        if values is not None and len(values) > 1:
            return f"Mcp-Param-{token} header appears more than once"
        rendered = _render(value) if value is not None else None
        if rendered is None:
            if values is not None:
                return f"Mcp-Param-{token} header is present but the argument {'.'.join(path)!r} is not"
            continue
        if values is None:
            return f"Mcp-Param-{token} header is missing for argument {'.'.join(path)!r}"
        decoded = decode_header(values[0])
        if decoded is None:
            return f"Mcp-Param-{token} header has a malformed base64 value"
        if decoded != rendered:
            if kind == "integer" and isinstance(value, (int, float)) and not isinstance(value, bool):
                try:
                    if float(decoded) == float(value):
                        continue
                except ValueError:
                    pass
            return f"Mcp-Param-{token} header does not match the argument {'.'.join(path)!r}"
    return None


async def handle(
    endpoint: McpEndpoint, incoming: Incoming, scope: Scope, receive: Receive, send: Send
) -> None:
    if scope["method"] != "POST":
        await plain_response(send, 405, [(b"allow", b"POST")])
        return
    if not (incoming.accept_json and incoming.accept_sse):
        await plain_response(
            send, 406, body=b"Not Acceptable: Accept must list application/json and text/event-stream"
        )
        return
    body = await endpoint.read_json(incoming, receive)
    try:
        request = parse_request(endpoint.agent, incoming, body)
    except JsonRpcError as exc:
        await json_response(send, exc.status or status_for(exc.code, True), exc.body(exc.request_id))
        return
    if request is None:
        await plain_response(send, 202)  # an accepted notification
        return
    request_id, method, params = request.id, request.method, request.params
    if method == "subscriptions/listen":
        await endpoint.listeners.listen(endpoint.agent, request_id, params, scope, receive, send)
        return
    headers = incoming.headers
    version_header = request.version
    capabilities, log_level = request.capabilities, request.log_level
    exchange = Exchange(send, stateless=True)
    agent = endpoint.agent
    caller = caller_from_headers(scope, headers.get("authorization"), agent.identify) or await resolve_caller(
        HTTPConnection(scope), agent.identify
    )
    if params.get("requestState") is not None:
        await agent.signing_secret()  # kept in the shared state: read then, and again from time to time
    try:
        try:
            gather = _replay_gather(agent, method, params, caller)
        except JsonRpcError as exc:
            # signed with a secret this replica does not hold yet (the store's changed, after a wipe): read it
            # again, and check once more
            if not isinstance(exc.__cause__, _state.Unverified) or not await agent.refresh_secret(0.0):
                raise
            gather = _replay_gather(agent, method, params, caller)
    except JsonRpcError as exc:
        await exchange.finish(exc.body(request_id))
        return
    state = params.get("requestState") if gather is not _first_round else None
    if state is not None and not await endpoint.used_states.claim(state):
        # claimed before the function starts, so of concurrent retries with one state exactly one runs
        await exchange.finish(
            error_body(
                request_id,
                INVALID_PARAMS,
                "Invalid requestState: it was already used; each requestState works once",
            )
        )
        return
    call = Call(
        agent,
        endpoint.catalog,
        stateless=True,
        version=version_header,
        client_capabilities=capabilities,
        log_level=log_level,
        exchange=exchange,
        scope=scope,
        params=params,
        gather=gather,
        caller=caller,
    )
    payload = await _serve(endpoint, call, method, params, request_id, receive)
    if payload is not None:
        await exchange.finish(payload)


def _ladder(
    agent: McpHost, incoming: Incoming, method: str, params: dict[str, Any], version_header: str
) -> None:
    """The SDK's check order for a stateless request; raises the first failure."""
    if incoming.repeated:
        for name in _ROUTING_HEADERS:
            if name in incoming.repeated:
                raise JsonRpcError(HEADER_MISMATCH, f"{name} header appears more than once")
    meta = params.get("_meta")
    if not isinstance(meta, dict):
        raise JsonRpcError(
            INVALID_PARAMS,
            f"params._meta must be an object carrying {META_VERSION!r} and {META_CAPABILITIES!r}",
        )
    missing = [key for key in (META_VERSION, META_CAPABILITIES) if key not in meta]
    if missing:
        raise JsonRpcError(
            INVALID_PARAMS, f"params._meta is missing the required key(s): {', '.join(missing)}"
        )
    version = meta[META_VERSION]
    headers = incoming.headers
    if version_header != version:
        raise JsonRpcError(
            HEADER_MISMATCH, "MCP-Protocol-Version header does not match _meta's protocol version"
        )
    if (headers.get("mcp-method") or "").strip() != method:
        raise JsonRpcError(HEADER_MISMATCH, "Mcp-Method header does not match the request's method")
    name_key = _NAME_PARAM.get(method)
    if (
        name_key is not None
        and params.get(name_key) is not None
        and decode_header(headers.get("mcp-name")) != params.get(name_key)
    ):
        raise JsonRpcError(HEADER_MISMATCH, f"Mcp-Name header does not match params.{name_key}")
    if version not in STATELESS_VERSIONS:
        raise JsonRpcError(
            UNSUPPORTED_VERSION,
            "Unsupported protocol version",
            {"supported": list(STATELESS_VERSIONS), "requested": version},
        )
    if method == "tools/call":
        problem = _check_param_headers(agent, params, incoming.raw_headers, incoming.scope)
        if problem is not None:
            raise JsonRpcError(HEADER_MISMATCH, problem)


class StatelessRequest:
    """A checked stateless-era request: what the era needs to serve it."""

    __slots__ = ("capabilities", "id", "log_level", "method", "params", "version")

    def __init__(
        self,
        request_id: str | int,
        method: str,
        params: dict[str, Any],
        version: str,
        capabilities: dict[str, Any],
        log_level: str | None,
    ) -> None:
        self.id = request_id
        self.method = method
        self.params = params
        self.version = version
        self.capabilities = capabilities
        self.log_level = log_level


def parse_request(agent: McpHost, incoming: Incoming, body: Any) -> StatelessRequest | None:
    """Check a decoded stateless-era POST without I/O: the request to serve, or None for an accepted
    notification. Raises :class:`JsonRpcError` (its status set where the era's table does not decide)."""
    version = (incoming.headers.get("mcp-protocol-version") or "").strip()
    message = classify_rpc(body)
    if message.kind == "notification":
        if version not in STATELESS_VERSIONS:
            raise JsonRpcError(
                UNSUPPORTED_VERSION,
                "Unsupported protocol version",
                {"supported": list(STATELESS_VERSIONS), "requested": version},
            )
        if message.method in _REMOVED:
            raise JsonRpcError(
                METHOD_NOT_FOUND, f"Method not found: {message.method} is not part of {version}"
            )
        return None
    try:
        return _checked(agent, incoming, message.id, message.method, message.params or {}, version)  # type: ignore[arg-type]
    except JsonRpcError as exc:
        exc.request_id = message.id
        raise


def _checked(
    agent: McpHost,
    incoming: Incoming,
    request_id: str | int,
    method: str,
    params: dict[str, Any],
    version: str,
) -> StatelessRequest:
    _ladder(agent, incoming, method, params, version)
    meta = params["_meta"]
    capabilities = meta.get(META_CAPABILITIES)
    if not isinstance(capabilities, dict):
        raise JsonRpcError(INVALID_PARAMS, f"_meta[{META_CAPABILITIES!r}] must be an object")
    if method in _REMOVED:
        raise JsonRpcError(METHOD_NOT_FOUND, f"Method not found: {method} is not part of {version}")
    log_level = meta.get(META_LOG_LEVEL)
    if log_level is not None and not (isinstance(log_level, str) and log_level in LOG_RANK):
        raise JsonRpcError(INVALID_PARAMS, f"Unknown log level {log_level!r}")
    if method == "subscriptions/listen":
        _check_listen(params)
    return StatelessRequest(request_id, method, params, version, capabilities, log_level)


def _check_listen(params: dict[str, Any]) -> None:
    wanted = params.get("notifications")
    if not isinstance(wanted, dict):
        raise JsonRpcError(INVALID_PARAMS, "subscriptions/listen needs a 'notifications' object")
    uris = wanted.get("resourceSubscriptions") or []
    if not isinstance(uris, list) or not all(isinstance(u, str) for u in uris):
        raise JsonRpcError(INVALID_PARAMS, "resourceSubscriptions must be a list of URIs")


def _replay_gather(agent: McpHost, method: str, params: dict[str, Any], caller: str) -> Any:
    """The channel's ``gather`` for this request: answers come from the retry, never from a wait.

    An answer counts only together with the signed ``requestState`` that asked its question, issued to this
    caller: ``inputResponses`` without their state are ignored, so the questions are asked again.
    """
    responses = params.get("inputResponses")
    state = params.get("requestState")
    if method not in INPUT_METHODS:
        return _first_round
    if responses is not None and not isinstance(responses, dict):
        raise JsonRpcError(INVALID_PARAMS, "inputResponses must be an object keyed by the input request keys")
    if state is None:
        if responses:
            logger.debug("inputResponses without a requestState are ignored; the questions are asked again")
        return _first_round
    try:
        answers = _state.open_round(
            agent, method, params, _target(method, params), caller=caller, responses=responses
        )
    except ValueError as exc:
        raise JsonRpcError(INVALID_PARAMS, f"Invalid requestState: {exc}") from exc
    used: dict[str, Any] = {}

    async def gather(call: Call, requests: Mapping[str, InputRequest], target: str) -> dict[str, Any]:
        result: dict[str, Any] = {}
        missing: dict[str, InputRequest] = {}
        for key, request in requests.items():
            raw = answers.get(key)
            parsed = parse_input_response(request, raw) if raw is not None else None
            if parsed is None:
                missing[key] = request
            else:
                result[key] = parsed
                used[key] = raw
        if missing:
            raise InputsPending(missing, answered=used)
        return result

    return gather


async def _first_round(call: Call, requests: Mapping[str, InputRequest], target: str) -> dict[str, Any]:
    """A request that carries no answers yet: every question goes back to the client."""
    raise InputsPending(requests)


def _target(method: str, params: Mapping[str, Any]) -> str:
    return f"{method}:{params.get(_NAME_PARAM.get(method, 'name'))}"


def server_info(agent: McpHost) -> dict[str, Any]:
    return {"name": agent.name, "version": agent.version}


async def _serve(
    endpoint: McpEndpoint, call: Call, method: str, params: dict[str, Any], request_id: Any, receive: Receive
) -> dict[str, Any] | None:
    """Run the method; a client that closes the stream cancels it (and is owed nothing)."""
    agent = endpoint.agent
    guard = CallGuard(receive, call.exchange.keepalive, endpoint.timing)
    try:
        if method == "server/discover":
            result = _discover(agent)
        else:
            result = await dispatch(call, method, params, request_id)
            result.setdefault("resultType", "complete")
            meta = result.get("_meta")
            info = endpoint.server_info
            result["_meta"] = {**meta, META_SERVER_INFO: info} if meta else {META_SERVER_INFO: info}
            if method in _CACHEABLE and result["resultType"] == "complete":
                result["ttlMs"] = 0
                result["cacheScope"] = "private"
        payload = {"jsonrpc": "2.0", "id": request_id, "result": result}
    except JsonRpcError as exc:
        payload = exc.body(request_id)
    except AccessRefused:
        guard.finish()  # its watcher must not outlive this call: on a reused task it would cancel the next one
        raise  # the identity boundary answers 401/403 at the HTTP level (endpoint.py)
    except Exception as exc:  # noqa: BLE001  (a store fault is retryable; a bug is logged: both with its id)
        payload = fault_body(request_id, exc, method)
    except asyncio.CancelledError:
        if guard.absorb():
            return None
        raise
    guard.finish()
    return payload


def _discover(agent: McpHost) -> dict[str, Any]:
    result: dict[str, Any] = {
        "resultType": "complete",
        "supportedVersions": list(STATELESS_VERSIONS),
        "capabilities": {
            key: value
            for key, value in server_capabilities(agent, stateless=True).items()
            if key != "logging"
        },
        "serverInfo": server_info(agent),
        "ttlMs": 0,
        "cacheScope": "private",
        "_meta": {META_SERVER_INFO: server_info(agent)},
    }
    if agent.instructions:
        result["instructions"] = agent.instructions
    return result


class UsedStates(UsedTokens):
    """``requestState`` values already used, until they would have expired anyway, in every replica.

    :meth:`claim` marks a state used in this process's table first (at most ``max_entries``, failing closed
    past that: see ``agentmw._bounded.UsedTokens``), then in the shared state, where of the replicas that
    claim one state exactly one wins: ``set_if_absent("mcp.used", sha256(state), ..., ttl)``, ``ttl`` being
    what is left of the state's own life. ``state``: a :class:`agentmw.state.State` or a callable returning
    one (opened at the first claim); None keeps the claims in this process only.
    """

    NAMESPACE = "mcp.used"

    def __init__(self, ttl: float, max_entries: int = 100_000, *, state: Any = None) -> None:
        super().__init__(ttl, max_entries, _state.expiry)
        self._source = state
        self._shared: Any = None

    def _store(self) -> Any:
        if self._shared is None:
            source = self._source
            shared = source() if callable(source) and not hasattr(source, "set_if_absent") else source
            shared.limit(self.NAMESPACE, StoreLimits(max_count=self.table.max_items, max_age=self.ttl + 60.0))
            self._shared = shared
        return self._shared

    async def claim(self, token: str) -> bool:  # type: ignore[override]
        """Use ``token`` now: True for the one caller, in any replica sharing the state, that claims it first."""
        if not super().claim(token):
            return False
        if self._source is None:
            return True
        expires = self.expiry_of(token) or time.time() + self.ttl
        key = hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()
        return bool(
            await self._store().set_if_absent(
                self.NAMESPACE, key, {"expires": expires}, max(expires - time.time(), 1.0)
            )
        )


class ListenHub:
    """``subscriptions/listen`` streams: each gets the agent's list changes and resource updates it asked for."""

    _FLAGS: ClassVar[dict[str, str]] = {
        "tools/list_changed": "toolsListChanged",
        "prompts/list_changed": "promptsListChanged",
        "resources/list_changed": "resourcesListChanged",
    }

    def __init__(self, agent: McpHost) -> None:
        self.queues: set[tuple[asyncio.Queue[dict[str, Any]], frozenset[str], frozenset[str]]] = set()
        agent.subscribe(self._on_agent_event)

    def _on_agent_event(self, event: str, data: Mapping[str, Any]) -> None:
        for queue, flags, uris in list(self.queues):
            if event == "resources/updated":
                if data.get("uri") not in uris:
                    continue
            elif self._FLAGS.get(event) not in flags:
                continue
            if queue.full():
                continue  # a listener this far behind gets no more; list changes are idempotent hints
            queue.put_nowait({"jsonrpc": "2.0", "method": f"notifications/{event}", "params": dict(data)})

    async def listen(
        self,
        agent: McpHost,
        request_id: Any,
        params: dict[str, Any],
        scope: Scope,
        receive: Receive,
        send: Send,
    ) -> None:
        wanted = params["notifications"]
        flags = frozenset(f for f in self._FLAGS.values() if wanted.get(f) is True)
        uris_raw = wanted.get("resourceSubscriptions") or []
        honoured: dict[str, Any] = {flag: True for flag in sorted(flags)}
        if uris_raw:
            honoured["resourceSubscriptions"] = list(uris_raw)
        sub_meta = {META_SUBSCRIPTION: request_id}
        queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue(maxsize=1000)
        entry = (queue, flags, frozenset(uris_raw))
        self.queues.add(entry)
        ack = {
            "jsonrpc": "2.0",
            "method": "notifications/subscriptions/acknowledged",
            "params": {"notifications": honoured, "_meta": sub_meta},
        }

        async def frames() -> AsyncIterator[bytes]:
            yield sse_frame(ack)
            while True:
                message = await queue.get()
                message["params"]["_meta"] = sub_meta
                yield sse_frame(message)

        try:
            await stream_sse(scope, receive, send, frames())
        finally:
            self.queues.discard(entry)
