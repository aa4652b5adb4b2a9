"""The A2A endpoint: the card, the JSON-RPC binding (1.0 and 0.3 names) and the HTTP+JSON binding."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any

from starlette.requests import HTTPConnection

from .._http import send_bytes, send_json
from .._types import Receive, Scope, Send
from ..identity import Forbidden, Unauthenticated, caller_from_headers, resolve_caller
from ..middleware import route_path
from ..stores.base import TERMINAL
from .card import base_url, build_card, card_etag, dump
from .operations import Caller, Operations
from .wire import (
    EXTENDED_CARD_NOT_CONFIGURED,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    VERSION_NOT_SUPPORTED,
    A2AError,
    event_to_v03,
    message_from_v03,
    task_to_v03,
)

if TYPE_CHECKING:
    from ..agent import Agent

__all__ = ["A2AEndpoint"]

logger = logging.getLogger("agentmw")
Handler = Callable[[dict[str, Any], Caller], Awaitable[Any]]
_SSE_HEADERS = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache"),
                (b"x-accel-buffering", b"no")]
_CARD_PATHS = ("/.well-known/agent-card.json", "/.well-known/agent.json")


def _authorization(scope: Scope) -> str | None:
    for name, value in scope["headers"]:
        if name == b"authorization":
            return value.decode("latin-1")
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
    def __init__(self, agent: Agent) -> None:
        self.agent = agent
        self.ops = Operations(agent)
        ops = self.ops
        self.methods_v10: dict[str, Handler] = {
            "SendMessage": ops.send_message, "SendStreamingMessage": ops.stream_message,
            "GetTask": ops.get_task, "ListTasks": ops.list_tasks, "CancelTask": ops.cancel_task,
            "SubscribeToTask": ops.subscribe, "CreateTaskPushNotificationConfig": ops.create_push,
            "GetTaskPushNotificationConfig": ops.get_push, "ListTaskPushNotificationConfigs": ops.list_push,
            "DeleteTaskPushNotificationConfig": ops.delete_push, "GetExtendedAgentCard": self._extended_card,
        }
        self.methods_v03 = {
            "message/send", "message/stream", "tasks/get", "tasks/cancel", "tasks/resubscribe",
            "tasks/pushNotificationConfig/set", "tasks/pushNotificationConfig/get",
            "tasks/pushNotificationConfig/list", "tasks/pushNotificationConfig/delete",
            "agent/getAuthenticatedExtendedCard",
        }
        self.streaming = {"SendStreamingMessage", "SubscribeToTask", "message/stream", "tasks/resubscribe"}

    # --- entry -----------------------------------------------------------------------------------
    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = route_path(scope)
        connection = HTTPConnection(scope, receive)
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        try:
            if path in _CARD_PATHS:
                await self._card(scope, connection, headers, send)
            elif path.rstrip("/") == self.agent.a2a_path:
                await self._jsonrpc(scope, receive, send, connection, headers)
            else:
                await self._rest(scope, receive, send, connection, headers, path[len(self.agent.a2a_path):])
        except Unauthenticated as exc:
            await send_json(send, 401, {"error": {"code": 401, "status": "UNAUTHENTICATED", "message": str(exc)}},
                           [(b"www-authenticate", exc.challenge.encode())])
        except Forbidden as exc:
            await send_json(send, 403, {"error": {"code": 403, "status": "PERMISSION_DENIED",
                                                 "message": str(exc) or "Forbidden"}})

    async def _caller(self, connection: HTTPConnection) -> Caller:
        quick = caller_from_headers(connection.scope, _authorization(connection.scope), self.agent.identify)
        return Caller(quick or await resolve_caller(connection, self.agent.identify), connection)

    # --- card ------------------------------------------------------------------------------------
    async def _card(self, scope: Scope, connection: HTTPConnection, headers: dict[str, str], send: Send) -> None:
        if scope["method"] not in ("GET", "HEAD"):
            await send_json(send, 405, {"error": {"code": 405, "message": "Method not allowed"}},
                           [(b"allow", b"GET, HEAD")])
            return
        extended = None
        if "authorization" in headers and self.agent.a2a.extended_card is not None:
            try:  # invalid credentials are 401 here too; valid ones that may not see more get the public card
                extended = await self._extended_fields(connection)
            except Forbidden:
                extended = None
        card = build_card(self.agent, base_url(scope, headers), extended=extended)
        body = dump(card)
        etag = card_etag(body)
        cache = b"private, max-age=60" if extended else b"public, max-age=300"
        extra = [(b"etag", etag.encode()), (b"cache-control", cache), (b"vary", b"Authorization")]
        if headers.get("if-none-match") == etag:
            await send_bytes(send, 304, b"", extra)
            return
        await send_bytes(send, 200, b"" if scope["method"] == "HEAD" else body,
                   [(b"content-type", b"application/json"), *extra])

    async def _extended_fields(self, connection: HTTPConnection) -> dict[str, Any]:
        identity = await resolve_caller(connection, self.agent.identify) if self.agent.identify else None
        if identity is None or identity == "anonymous":
            raise Unauthenticated("Valid credentials are required for the extended agent card")
        fields = self.agent.a2a.extended_card(identity)  # type: ignore[misc]
        if fields is None:
            raise Forbidden("This caller may not see the extended agent card")
        return dict(fields)

    async def _extended_card(self, params: dict[str, Any], caller: Caller) -> dict[str, Any]:
        if self.agent.a2a.extended_card is None:
            raise A2AError(EXTENDED_CARD_NOT_CONFIGURED, "This agent has no extended card")
        extended = await self._extended_fields(caller.connection)
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in caller.connection.scope["headers"]}
        return build_card(self.agent, base_url(caller.connection.scope, headers), extended=extended)

    # --- JSON-RPC --------------------------------------------------------------------------------
    async def _jsonrpc(self, scope: Scope, receive: Receive, send: Send, connection: HTTPConnection,
                       headers: dict[str, str]) -> None:
        if scope["method"] != "POST":
            await send_json(send, 405, {"error": {"code": 405, "message": "JSON-RPC takes POST"}}, [(b"allow", b"POST")])
            return
        body = await _read(receive, self.agent.max_body_bytes)
        if body is None:
            await send_json(send, 413, _rpc_error(None, A2AError(INVALID_REQUEST, "Request body too large")))
            return
        try:
            request = json.loads(body)
        except (ValueError, RecursionError):
            await send_json(send, 200, _rpc_error(None, A2AError(PARSE_ERROR, "Parse error: the body is not JSON")))
            return
        request_id = request.get("id") if isinstance(request, dict) else None
        if isinstance(request_id, bool) or not isinstance(request_id, (str, int, type(None))):
            request_id = None
        try:
            if isinstance(request, list):
                raise A2AError(INVALID_REQUEST, "Batches are not supported")
            if not isinstance(request, dict) or request.get("jsonrpc") != "2.0" or \
                    not isinstance(request.get("method"), str) or "id" not in request:
                raise A2AError(INVALID_REQUEST, "Expected one JSON-RPC 2.0 request with an id")
            params = request.get("params") or {}
            if not isinstance(params, dict):
                raise A2AError(INVALID_PARAMS, "params must be an object")
            method = request["method"]
            version = _version(headers, scope.get("query_string", b"").decode("latin-1"))
            caller = await self._caller(connection)
            if method in self.methods_v10:
                if version != "1.0":
                    raise A2AError(VERSION_NOT_SUPPORTED, f"{method} needs A2A-Version: 1.0 (got {version!r})",
                                   {"supported": "1.0, 0.3"})
                result = await self.methods_v10[method](params, caller)
                if method in self.streaming:
                    await _sse(send, request_id, result, v03=False)
                    return
            elif method in self.methods_v03:
                if version != "0.3":
                    raise A2AError(VERSION_NOT_SUPPORTED, f"{method} is a 0.3 method (got A2A-Version {version!r})",
                                   {"supported": "1.0, 0.3"})
                result = await self._v03(method, params, caller)
                if method in self.streaming:
                    await _sse(send, request_id, result, v03=True)
                    return
            else:
                raise A2AError(METHOD_NOT_FOUND, f"Method not found: {method}")
            await send_json(send, 200, {"jsonrpc": "2.0", "id": request_id, "result": result})
        except A2AError as exc:
            await send_json(send, 200, exc.jsonrpc(request_id))
        except (Unauthenticated, Forbidden):
            raise
        except Exception:
            logger.exception("A2A JSON-RPC request failed")
            await send_json(send, 200, _rpc_error(request_id, A2AError(INTERNAL_ERROR, "Internal error")))

    async def _v03(self, method: str, params: dict[str, Any], caller: Caller) -> Any:
        ops = self.ops
        if method in ("message/send", "message/stream"):
            configuration = params.get("configuration") or {}
            converted = {"message": message_from_v03(params.get("message")), "metadata": params.get("metadata"),
                         "configuration": {
                             "returnImmediately": configuration.get("blocking") is False,
                             "historyLength": configuration.get("historyLength"),
                             "taskPushNotificationConfig": _push_from_v03(configuration.get("pushNotificationConfig")),
                         }}
            if method == "message/stream":
                return await ops.stream_message(converted, caller)
            return task_to_v03((await ops.send_message(converted, caller))["task"])
        if method == "tasks/get":
            return task_to_v03(await ops.get_task(params, caller))
        if method == "tasks/cancel":
            return task_to_v03(await ops.cancel_task(params, caller))
        if method == "tasks/resubscribe":
            return await ops.subscribe(params, caller)
        if method == "agent/getAuthenticatedExtendedCard":
            return await self._extended_card(params, caller)
        if method == "tasks/pushNotificationConfig/set":
            nested = params.get("pushNotificationConfig") or {}
            config = await ops.create_push({"taskId": params.get("taskId"), **(_push_from_v03(nested) or {})}, caller)
            return _push_to_v03(config)
        task_id = params.get("id")
        if method == "tasks/pushNotificationConfig/list":
            return [_push_to_v03(c) for c in (await ops.list_push({"taskId": task_id}, caller))["configs"]]
        config_id = params.get("pushNotificationConfigId") or task_id
        if method == "tasks/pushNotificationConfig/get":
            return _push_to_v03(await ops.get_push({"taskId": task_id, "id": config_id}, caller))
        await ops.delete_push({"taskId": task_id, "id": config_id}, caller)
        return None

    # --- HTTP+JSON -------------------------------------------------------------------------------
    async def _rest(self, scope: Scope, receive: Receive, send: Send, connection: HTTPConnection,
                    headers: dict[str, str], path: str) -> None:
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
                raw = await _read(receive, self.agent.max_body_bytes)
                if raw is None:
                    raise A2AError(INVALID_REQUEST, "Request body too large")
                if raw.strip():
                    try:
                        params = json.loads(raw)
                    except (ValueError, RecursionError) as exc:
                        raise A2AError(PARSE_ERROR, "The body is not JSON") from exc
                    if not isinstance(params, dict):
                        raise A2AError(INVALID_PARAMS, "The body must be a JSON object")
            else:
                params = {k: (v == "true" if v in ("true", "false") and k == "includeArtifacts" else v)
                          for k, v in query.items()}
            params.update(args)
            caller = await self._caller(connection)
            handler = {"send": self.ops.send_message, "stream": self.ops.stream_message,
                       "get": self.ops.get_task, "list": self.ops.list_tasks, "cancel": self.ops.cancel_task,
                       "subscribe": self.ops.subscribe, "push_create": self.ops.create_push,
                       "push_get": self.ops.get_push, "push_list": self.ops.list_push,
                       "push_delete": self.ops.delete_push, "card": self._extended_card}[name]
            result = await handler(params, caller)
            if name in ("stream", "subscribe"):
                await _sse(send, None, result, v03=False)
                return
            await send_json(send, 200, result)
        except A2AError as exc:
            await send_json(send, exc.http_status, exc.rest())
        except (Unauthenticated, Forbidden):
            raise
        except Exception:
            logger.exception("A2A HTTP+JSON request failed")
            await send_json(send, 500, A2AError(INTERNAL_ERROR, "Internal error").rest())


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
        out["authentication"] = {"scheme": schemes[0] if schemes else "Bearer",
                                 **({"credentials": auth["credentials"]} if "credentials" in auth else {})}
    return out


def _push_to_v03(config: dict[str, Any]) -> dict[str, Any]:
    nested = {k: config[k] for k in ("id", "url", "token") if k in config}
    if "authentication" in config:
        auth = config["authentication"]
        nested["authentication"] = {"schemes": [auth["scheme"]],
                                    **({"credentials": auth["credentials"]} if "credentials" in auth else {})}
    return {"taskId": config.get("taskId"), "pushNotificationConfig": nested}


def _rpc_error(request_id: Any, error: A2AError) -> dict[str, Any]:
    return error.jsonrpc(request_id)


async def _read(receive: Receive, limit: int) -> bytes | None:
    chunks, size = [], 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return b""
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


async def _sse(send: Send, request_id: Any, events: AsyncIterator[dict[str, Any]], *, v03: bool) -> None:
    """Stream events; JSON-RPC wraps each in a response (request_id given), HTTP+JSON sends them bare."""
    await send({"type": "http.response.start", "status": 200, "headers": _SSE_HEADERS})
    try:
        async for event in events:
            payload = event_to_v03(event, TERMINAL) if v03 else event
            if request_id is not None or v03:
                payload = {"jsonrpc": "2.0", "id": request_id, "result": payload}
            data = json.dumps(payload, separators=(",", ":"), ensure_ascii=False, default=str)
            await send({"type": "http.response.body", "body": f"data: {data}\n\n".encode(), "more_body": True})
    except A2AError as exc:
        data = json.dumps(exc.jsonrpc(request_id))
        await send({"type": "http.response.body", "body": f"event: error\ndata: {data}\n\n".encode(),
                    "more_body": True})
    except OSError:
        return
    await send({"type": "http.response.body", "body": b"", "more_body": False})


