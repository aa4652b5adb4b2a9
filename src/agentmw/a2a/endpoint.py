"""The A2A endpoint: the card, the JSON-RPC binding (1.0 and 0.3 names) and the HTTP+JSON binding."""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import nullcontext
from typing import TYPE_CHECKING, Any

from starlette.requests import HTTPConnection

from .._scope import route_path
from .._shape import BodyShape, ShapeError, check_shape
from .._transport import (
    ClientDisconnected,
    ProtocolError,
    classify_rpc,
    dumps,
    loads,
    read_body,
    send_bytes,
    send_json,
    sse_data,
    store_fault,
    stream_sse,
)
from .._types import Message, Receive, Scope, Send
from ..a2ui import EXTENSION_URI
from ..auth.refusals import PEEK_LIMIT, peek_request_id, send_a2a_refusal
from ..errors import AccessRefused
from ..identity import Forbidden, Unauthenticated, authenticated_identity, caller_from_headers, resolve_caller
from ..lifecycle import TERMINAL
from ..settings import Limits
from .auth import secured_card
from .card import (
    CardClock,
    base_url,
    build_card,
    card_etag,
    dump,
    etag_matches,
    not_modified_since,
    wants_v03,
    with_v03_fields,
)
from .operations import Caller, Operations
from .params import OPERATION_OF_METHOD, normalise
from .settings import A2ASettings
from .surfaces import declares_a2ui, requested
from .wire import (
    EXTENDED_CARD_NOT_CONFIGURED,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    VERSION_NOT_SUPPORTED,
    A2AError,
    StoreUnavailableError,
    event_to_v03,
    limit_parts,
    message_from_v03,
    message_to_v03,
    task_to_v03,
)

if TYPE_CHECKING:
    from .._wiring import FaceHost

__all__ = ["A2AEndpoint"]

logger = logging.getLogger("agentmw")
Handler = Callable[[dict[str, Any], Caller], Awaitable[Any]]
_CARD_PATHS = ("/.well-known/agent-card.json", "/.well-known/agent.json")
_QUERY_EXTRA = frozenset({"A2A-Version"})  # a query-string key of the binding's own, never an unknown filter


class _HttpJson:
    """Where a JSON-RPC request id would go, on the HTTP+JSON binding: answers and events go out bare. Not None,
    which is a JSON-RPC id a request may carry (``"id": null``), and whose answers are still JSON-RPC."""

    def __repr__(self) -> str:
        return "HTTP+JSON"


HTTP_JSON = _HttpJson()


def _authorization(scope: Scope) -> str | None:
    for name, value in scope["headers"]:
        if name == b"authorization":
            return bytes(value).decode("latin-1")
    return None


def _version(headers: dict[str, str], query: str) -> str:
    """'1.0', '0.3' or the unsupported value; a missing or empty header means 0.3."""
    raw = headers.get("a2a-version")
    if raw is None:
        match = re.search(r"(?:^|&)A2A-Version=([^&]*)", query)
        raw = match.group(1) if match else ""
    raw = raw.strip()
    if not raw:
        return "0.3"
    major, _, rest = raw.partition(".")
    minor = rest.split(".")[0] if rest else "0"
    if major == "1":
        return "1.0"
    if major == "0" and minor == "3":
        return "0.3"
    return raw


class A2AEndpoint:
    """ASGI app serving one agent's A2A card and its JSON-RPC and HTTP+JSON bindings.

    Built once by the agent with its settings, the shared limits, and the task operations (``operations.py``,
    a client of the lifecycle) it serves."""

    def __init__(self, agent: FaceHost, settings: A2ASettings, limits: Limits, ops: Operations) -> None:
        self.agent = agent
        self.settings = settings
        self.max_body_bytes = limits.max_body_bytes
        self.body_shape = BodyShape(limits.max_body_values, limits.max_body_depth)
        self.ops = ops
        self._card_clock = CardClock()
        ops = self.ops
        self.methods_v10: dict[str, Handler] = {
            "SendMessage": ops.send_message,
            "SendStreamingMessage": ops.stream_message,
            "GetTask": ops.get_task,
            "ListTasks": ops.list_tasks,
            "CancelTask": ops.cancel_task,
            "SubscribeToTask": ops.subscribe,
            "CreateTaskPushNotificationConfig": ops.create_push,
            "GetTaskPushNotificationConfig": ops.get_push,
            "ListTaskPushNotificationConfigs": ops.list_push,
            "DeleteTaskPushNotificationConfig": ops.delete_push,
            "GetExtendedAgentCard": self._extended_card,
        }
        self.methods_v03 = {
            "message/send",
            "message/stream",
            "tasks/get",
            "tasks/cancel",
            "tasks/resubscribe",
            "tasks/pushNotificationConfig/set",
            "tasks/pushNotificationConfig/get",
            "tasks/pushNotificationConfig/list",
            "tasks/pushNotificationConfig/delete",
            "agent/getAuthenticatedExtendedCard",
        }
        self.streaming = {"SendStreamingMessage", "SubscribeToTask", "message/stream", "tasks/resubscribe"}

    # --- entry -----------------------------------------------------------------------------------
    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if requested(scope) and declares_a2ui(self.agent):
            send = _echoing(send)
        path = route_path(scope)
        connection = HTTPConnection(scope, receive)
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        try:
            if self.agent.access is not None and path not in _CARD_PATHS:  # 401/403/429 (docs/auth.md)
                await self.agent.access.admit(scope, "a2a")
            if path in _CARD_PATHS:
                await self._card(scope, connection, headers, send)
            elif path.rstrip("/") == self.settings.path:
                await self._jsonrpc(scope, receive, send, connection, headers)
            else:
                await self._rest(scope, receive, send, connection, headers, path[len(self.settings.path) :])
        except ClientDisconnected:
            return
        except AccessRefused as exc:  # refused at admission, before any body was read (docs/auth.md)
            jsonrpc = path not in _CARD_PATHS and path.rstrip("/") == self.settings.path
            request_id = (
                await peek_request_id(scope, receive, min(PEEK_LIMIT, self.max_body_bytes))
                if jsonrpc
                else None
            )
            await send_a2a_refusal(send, exc, jsonrpc=jsonrpc, request_id=request_id)

    async def _caller(self, connection: HTTPConnection) -> Caller:
        quick = caller_from_headers(connection.scope, _authorization(connection.scope), self.agent.identify)
        return Caller(quick or await resolve_caller(connection, self.agent.identify), connection)

    # --- card ------------------------------------------------------------------------------------
    async def _card(
        self, scope: Scope, connection: HTTPConnection, headers: dict[str, str], send: Send
    ) -> None:
        if scope["method"] not in ("GET", "HEAD"):
            await send_json(
                send,
                405,
                {"error": {"code": 405, "message": "Method not allowed"}},
                [(b"allow", b"GET, HEAD")],
            )
            return
        extended = None
        if "authorization" in headers and self.settings.extended_card is not None:
            try:  # invalid credentials are 401 here too; valid ones that may not see more get the public card
                extended = await self._extended_fields(connection)
            except Unauthenticated:
                raise
            except AccessRefused:  # not allowed more, or cannot tell now (429, 503): the public card
                extended = None
        card = build_card(self.agent, self.settings, base_url(scope, headers), extended=extended)
        if self.agent.access is not None:  # the skills this caller may see, the schemes of Agent(auth=...)
            card = await secured_card(self.agent.access, self.settings, self.agent.skills, card, scope)
        skills = card.get("skills") or []
        shown = self.agent.shown(
            "skills", "a2a", skills, scope, None
        )  # listing hooks (docs/observability.md)
        if shown is not skills:
            card = {**card, "skills": shown}
        query = scope.get("query_string", b"").decode("latin-1")
        if self.settings.card_v03 or wants_v03(route_path(scope), headers, query):  # docs/a2a.md, "The card"
            card = with_v03_fields(card)
        body = dump(card)
        etag = card_etag(body)
        modified = self._card_clock.last_modified(etag)
        cache = b"private, max-age=60" if extended else b"public, max-age=300"
        extra = [
            (b"etag", etag.encode()),
            (b"last-modified", CardClock.http_date(modified).encode()),
            (b"cache-control", cache),
            (b"vary", b"Authorization, A2A-Version"),
        ]
        if_none_match = headers.get("if-none-match")
        if (
            etag_matches(if_none_match, etag)
            if if_none_match is not None  # RFC 9110 13.1.3: ETag wins
            else not_modified_since(headers.get("if-modified-since", ""), modified)
        ):
            await send_bytes(send, 304, b"", extra)
            return
        await send_bytes(
            send,
            200,
            b"" if scope["method"] == "HEAD" else body,
            [(b"content-type", b"application/json"), *extra],
        )

    async def _extended_fields(self, connection: HTTPConnection) -> dict[str, Any]:
        identity = await authenticated_identity(connection, self.agent.identify)  # never a bare credential
        if identity is None:
            raise Unauthenticated("Valid credentials are required for the extended agent card")
        fields = self.settings.extended_card(identity)  # type: ignore[misc]
        if fields is None:
            raise Forbidden("This caller may not see the extended agent card")
        return dict(fields)

    async def _extended_card(self, params: dict[str, Any], caller: Caller) -> dict[str, Any]:
        if self.settings.extended_card is None:
            raise A2AError(EXTENDED_CARD_NOT_CONFIGURED, "This agent has no extended card")
        extended = await self._extended_fields(caller.connection)
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in caller.connection.scope["headers"]}
        card = build_card(
            self.agent, self.settings, base_url(caller.connection.scope, headers), extended=extended
        )
        if self.agent.access is not None:
            card = await secured_card(
                self.agent.access, self.settings, self.agent.skills, card, caller.connection.scope
            )
        return card

    def _decode(self, raw: bytes) -> Any:
        """The body, strictly decoded once its shape is within ``Agent(max_body_values=, max_body_depth=)``
        (docs/limits.md): past them, invalid params (with the request's id, when a scan found it)."""
        try:
            check_shape(raw, self.body_shape)
        except ShapeError as exc:
            error = A2AError(INVALID_PARAMS, exc.message, {"limit": exc.limit})
            error.request_id = exc.request_id
            raise error from None
        return loads(raw)

    # --- JSON-RPC --------------------------------------------------------------------------------
    async def _jsonrpc(
        self, scope: Scope, receive: Receive, send: Send, connection: HTTPConnection, headers: dict[str, str]
    ) -> None:
        if scope["method"] != "POST":
            await send_json(
                send, 405, {"error": {"code": 405, "message": "JSON-RPC takes POST"}}, [(b"allow", b"POST")]
            )
            return
        request_id: Any = None
        try:
            body = self._decode(await read_body(receive, self.max_body_bytes))
            message = classify_rpc(body, notifications=False, null_id=True)
            request_id = message.id
            params = message.params or {}
            method: str = message.method  # type: ignore[assignment]
            version = _version(headers, scope.get("query_string", b"").decode("latin-1"))
            caller = await self._caller(connection)
            telemetry = self.agent.telemetry
            if telemetry is not None:  # its server span (docs/observability.md)
                with telemetry.serving_a2a(scope, method, request_id, params):
                    await self._rpc(scope, receive, send, request_id, method, params, version, caller)
            else:
                await self._rpc(scope, receive, send, request_id, method, params, version, caller)
        except ProtocolError as exc:  # A2AError included; a body over the limit is the one non-200 answer
            logger.debug("A2A JSON-RPC request refused: %s", exc.message)
            if self.agent.telemetry is not None:
                self.agent.telemetry.protocol_error("a2a", exc.code)
            if request_id is None:  # refused before the envelope was read: the id a scan of the body found
                request_id = exc.request_id
            await send_json(send, 413 if exc.status == 413 else 200, A2AError.of(exc).jsonrpc(request_id))
        except AccessRefused as exc:  # after the body was read: the envelope carries its id
            await send_a2a_refusal(send, exc, jsonrpc=True, request_id=request_id)
        except ClientDisconnected:
            raise
        except Exception as exc:
            fault = store_fault(exc)
            if fault is None:
                logger.exception("A2A JSON-RPC request failed")
                await send_json(send, 200, A2AError(INTERNAL_ERROR, "Internal error").jsonrpc(request_id))
                return
            # 200 as every JSON-RPC error here (the SDK client reads no error body at another status), with the
            # request's id, the retryable details and Retry-After
            logger.warning("A2A JSON-RPC request: %s", fault.message)
            error = StoreUnavailableError(fault)
            await send_json(send, 200, error.jsonrpc(request_id), error.headers)

    async def _rpc(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        request_id: Any,
        method: str,
        params: dict[str, Any],
        version: str,
        caller: Caller,
    ) -> None:
        """One JSON-RPC method, answered; raises ProtocolError for the caller to answer."""
        if method in self.methods_v10:
            if version != "1.0":
                raise A2AError(
                    VERSION_NOT_SUPPORTED,
                    f"{method} needs A2A-Version: 1.0 (got {version!r})",
                    {"supported": "1.0, 0.3"},
                )
            params = normalise(OPERATION_OF_METHOD[method], params)  # snake_case spellings, once, here
            if method in ("SendMessage", "SendStreamingMessage"):
                limit_parts(params.get("message"), self.settings.max_parts)
            result = await self.methods_v10[method](params, caller)
            if method in self.streaming:
                await _sse(scope, receive, send, request_id, result, v03=False)
                return
        elif method in self.methods_v03:
            if version != "0.3":
                raise A2AError(
                    VERSION_NOT_SUPPORTED,
                    f"{method} is a 0.3 method (got A2A-Version {version!r})",
                    {"supported": "1.0, 0.3"},
                )
            result = await self._v03(method, params, caller)
            if method in self.streaming:
                await _sse(scope, receive, send, request_id, result, v03=True)
                return
        else:
            raise A2AError(METHOD_NOT_FOUND, f"Method not found: {method}")
        body = _encode_result({"jsonrpc": "2.0", "id": request_id, "result": result}, request_id)
        await send_bytes(send, 200, body, [(b"content-type", b"application/json")])

    async def _v03(self, method: str, params: dict[str, Any], caller: Caller) -> Any:
        ops = self.ops
        if method in ("message/send", "message/stream"):
            limit_parts(params.get("message"), self.settings.max_parts)
            configuration = _object(params.get("configuration"), "configuration")
            converted = {
                "message": message_from_v03(params.get("message")),
                "metadata": params.get("metadata"),
                "configuration": {
                    "returnImmediately": configuration.get("blocking") is False,
                    "historyLength": configuration.get("historyLength"),
                    "taskPushNotificationConfig": _push_from_v03(configuration.get("pushNotificationConfig")),
                },
            }
            if method == "message/stream":
                return await ops.stream_message(converted, caller)
            sent = await ops.send_message(converted, caller)
            return task_to_v03(sent["task"]) if "task" in sent else message_to_v03(sent["message"])
        if method == "tasks/get":
            return task_to_v03(await ops.get_task(params, caller))
        if method == "tasks/cancel":
            return task_to_v03(await ops.cancel_task(params, caller))
        if method == "tasks/resubscribe":
            return await ops.subscribe(params, caller)
        if method == "agent/getAuthenticatedExtendedCard":
            return with_v03_fields(await self._extended_card(params, caller))
        if method == "tasks/pushNotificationConfig/set":
            nested = _object(params.get("pushNotificationConfig"), "pushNotificationConfig")
            config = await ops.create_push(
                {"taskId": params.get("taskId"), **(_push_from_v03(nested) or {})}, caller
            )
            return _push_to_v03(config)
        task_id = params.get("id")  # 0.3 names the task `id` in these three; say so when it is missing
        if not isinstance(task_id, str) or not task_id:
            raise A2AError(INVALID_PARAMS, "id is required: the id of the task", {"field": "id"})
        if method == "tasks/pushNotificationConfig/list":
            return [_push_to_v03(c) for c in (await ops.list_push({"taskId": task_id}, caller))["configs"]]
        config_id = params.get("pushNotificationConfigId") or task_id
        if method == "tasks/pushNotificationConfig/get":
            return _push_to_v03(await ops.get_push({"taskId": task_id, "id": config_id}, caller))
        await ops.delete_push({"taskId": task_id, "id": config_id}, caller)
        return None

    # --- HTTP+JSON -------------------------------------------------------------------------------
    async def _rest(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        connection: HTTPConnection,
        headers: dict[str, str],
        path: str,
    ) -> None:
        verb = scope["method"]
        query = dict(connection.query_params)
        try:
            version = _version(headers, scope.get("query_string", b"").decode("latin-1"))
            if version not in ("1.0", "0.3"):
                raise A2AError(VERSION_NOT_SUPPORTED, f"A2A-Version {version!r} is not served; use 1.0")
            route = _match(verb, path)
            if route is None:
                raise A2AError(METHOD_NOT_FOUND, f"No A2A operation at {verb} {path or '/'}")
            name, args = route
            params: dict[str, Any] = {}
            if verb in ("POST", "PUT"):
                raw = await read_body(receive, self.max_body_bytes)
                if raw.strip():
                    params = self._decode(raw)
                    if not isinstance(params, dict):
                        raise A2AError(INVALID_PARAMS, "The body must be a JSON object")
                params = normalise(name, params)  # snake_case spellings, once, here
                if name in ("send", "stream"):
                    limit_parts(params.get("message"), self.settings.max_parts)
            else:
                params = normalise(name, query, extra=_QUERY_EXTRA)
                if params.get("includeArtifacts") in ("true", "false"):
                    params["includeArtifacts"] = params["includeArtifacts"] == "true"
            params.update(args)
            caller = await self._caller(connection)
            handler: Handler = {
                "send": self.ops.send_message,
                "stream": self.ops.stream_message,
                "get": self.ops.get_task,
                "list": self.ops.list_tasks,
                "cancel": self.ops.cancel_task,
                "subscribe": self.ops.subscribe,
                "push_create": self.ops.create_push,
                "push_get": self.ops.get_push,
                "push_list": self.ops.list_push,
                "push_delete": self.ops.delete_push,
                "card": self._extended_card,
            }[name]
            telemetry = self.agent.telemetry
            with telemetry.serving_a2a(scope, name, None, params) if telemetry is not None else nullcontext():
                result = await handler(params, caller)
                if name in ("stream", "subscribe"):
                    await _sse(scope, receive, send, HTTP_JSON, result, v03=False)
                    return
                await send_bytes(
                    send, 200, _encode_result(result, HTTP_JSON), [(b"content-type", b"application/json")]
                )
        except ProtocolError as exc:
            logger.debug("A2A HTTP+JSON request refused: %s", exc.message)
            error = A2AError.of(exc)
            if self.agent.telemetry is not None:
                self.agent.telemetry.protocol_error("a2a", error.code)
            await send_json(send, error.http_status, error.rest())
        except (AccessRefused, ClientDisconnected):
            raise
        except Exception as exc:
            fault = store_fault(exc)
            if fault is None:
                logger.exception("A2A HTTP+JSON request failed")
                await send_json(send, 500, A2AError(INTERNAL_ERROR, "Internal error").rest())
                return
            logger.warning("A2A HTTP+JSON request: %s", fault.message)
            error = StoreUnavailableError(fault)
            await send_json(send, 503, error.rest(), error.headers)


_ROUTES: list[tuple[str, re.Pattern[str], str]] = [
    ("POST", re.compile(r"/message:send"), "send"),
    ("POST", re.compile(r"/message:stream"), "stream"),
    ("GET", re.compile(r"/tasks"), "list"),
    ("GET", re.compile(r"/tasks/(?P<id>[^/:]+)"), "get"),
    ("POST", re.compile(r"/tasks/(?P<id>[^/:]+):cancel"), "cancel"),
    ("GET", re.compile(r"/tasks/(?P<id>[^/:]+):subscribe"), "subscribe"),
    ("POST", re.compile(r"/tasks/(?P<id>[^/:]+):subscribe"), "subscribe"),
    ("POST", re.compile(r"/tasks/(?P<taskId>[^/:]+)/pushNotificationConfigs"), "push_create"),
    ("GET", re.compile(r"/tasks/(?P<taskId>[^/:]+)/pushNotificationConfigs"), "push_list"),
    ("GET", re.compile(r"/tasks/(?P<taskId>[^/:]+)/pushNotificationConfigs/(?P<id>[^/]+)"), "push_get"),
    ("DELETE", re.compile(r"/tasks/(?P<taskId>[^/:]+)/pushNotificationConfigs/(?P<id>[^/]+)"), "push_delete"),
    ("GET", re.compile(r"/extendedAgentCard"), "card"),
]


def _match(verb: str, path: str) -> tuple[str, dict[str, str]] | None:
    path = path.rstrip("/") or "/"
    for route_verb, pattern, name in _ROUTES:
        match = pattern.fullmatch(path)
        if match and route_verb == verb:
            return name, match.groupdict()
    return None


def _push_from_v03(config: Any) -> dict[str, Any] | None:
    if config is None:
        return None
    if not isinstance(config, dict):
        raise A2AError(INVALID_PARAMS, "pushNotificationConfig must be an object")
    out = {k: config[k] for k in ("id", "url", "token") if k in config}
    auth = config.get("authentication")
    if isinstance(auth, dict):
        schemes = auth.get("schemes") or []
        if not isinstance(schemes, list) or not all(isinstance(scheme, str) for scheme in schemes):
            raise A2AError(INVALID_PARAMS, "authentication.schemes must be a list of strings")
        out["authentication"] = {
            "scheme": schemes[0] if schemes else "Bearer",
            **({"credentials": auth["credentials"]} if "credentials" in auth else {}),
        }
    return out


def _push_to_v03(config: dict[str, Any]) -> dict[str, Any]:
    nested: dict[str, Any] = {k: config[k] for k in ("id", "url", "token") if k in config}
    if "authentication" in config:
        auth = config["authentication"]
        nested["authentication"] = {
            "schemes": [auth["scheme"]],
            **({"credentials": auth["credentials"]} if "credentials" in auth else {}),
        }
    return {"taskId": config.get("taskId"), "pushNotificationConfig": nested}


def _object(value: Any, name: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise A2AError(INVALID_PARAMS, f"{name} must be an object")
    return value


def _encode_result(payload: Any, request_id: Any) -> bytes:
    """The answer's JSON; one that cannot be written (a NaN in a skill's result) is an internal error that keeps
    the request's id (``HTTP_JSON``: the binding's own error shape)."""
    try:
        return dumps(payload)
    except (ValueError, TypeError):
        logger.warning("A2A result for request %r could not be written as JSON", request_id)
        error = A2AError(INTERNAL_ERROR, "Internal error: the result could not be written as JSON")
        return dumps(error.rest() if request_id is HTTP_JSON else error.jsonrpc(request_id))


def _echoing(send: Send) -> Send:
    """``send`` with the activated A2UI extension named in the response's ``A2A-Extensions`` (and the 0.3
    ``X-A2A-Extensions``), as the A2A extensions spec asks of a server that applied one."""

    async def echo(message: Message) -> None:
        if message["type"] == "http.response.start":
            uri = EXTENSION_URI.encode()
            message = {
                **message,
                "headers": [
                    *message.get("headers", ()),
                    (b"a2a-extensions", uri),
                    (b"x-a2a-extensions", uri),
                ],
            }
        await send(message)

    return echo


async def _sse(
    scope: Scope,
    receive: Receive,
    send: Send,
    request_id: Any,
    events: AsyncIterator[dict[str, Any]],
    *,
    v03: bool,
) -> None:
    """Stream events; JSON-RPC wraps each in a response with ``request_id`` (which may be None), HTTP+JSON
    (``request_id`` is ``HTTP_JSON``) sends them bare.

    The stream ends with the task, when the client leaves, or when the server shuts down.
    """

    async def frames() -> AsyncIterator[bytes]:
        try:
            async for event in events:
                payload = event_to_v03(event, TERMINAL) if v03 else event
                if request_id is not HTTP_JSON or v03:
                    payload = {"jsonrpc": "2.0", "id": request_id, "result": payload}
                try:
                    frame = sse_data(payload)
                except (ValueError, TypeError):
                    logger.warning("A2A stream event could not be written as JSON")
                    raise A2AError(
                        INTERNAL_ERROR, "Internal error: an event could not be written as JSON"
                    ) from None
                yield frame
        except A2AError as exc:
            yield sse_data(exc.rest() if request_id is HTTP_JSON else exc.jsonrpc(request_id), event="error")
        except Exception as exc:  # the store failing mid-stream: a retryable error event, then the end
            fault = store_fault(exc)
            if fault is None:
                raise
            logger.warning("A2A stream: %s", fault.message)
            error = StoreUnavailableError(fault)
            yield sse_data(
                error.rest() if request_id is HTTP_JSON else error.jsonrpc(request_id), event="error"
            )
        finally:
            await events.aclose()  # type: ignore[attr-defined]

    await stream_sse(scope, receive, send, frames())
