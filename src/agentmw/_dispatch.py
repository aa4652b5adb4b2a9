"""An agent's call of a host route, made through the host app in-process, and its response as an outcome.

Nothing of FastAPI is re-implemented: the call is an HTTP request for the route (its path parameters in the
URL, its query parameters in the query string, its body parameters as the body, the agent request's own
headers), sent to the app below ``AgentMiddleware``. So the app's middleware, every dependency of the route,
its routers and the app, ``response_model`` with its options, ``BackgroundTasks``, exception handlers and
``dependency_overrides`` all apply exactly as they do for HTTP, and no second network hop is made.

The response becomes the outcome: a 2xx JSON body is the result, as FastAPI serialised it; 401/403 refuse the
caller with the app's challenge; 404 is not found; 400/409/422 are invalid arguments with the detail; 408, 425,
429, 502-504 are retryable (``Retry-After`` kept); a redirect is refused; an exception no handler of the app
turns into a response is a permanent failure that reveals nothing.
"""

from __future__ import annotations

import asyncio
import copy
import json
import logging
import re
from collections.abc import Mapping
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlencode

from pydantic import BaseModel
from pydantic_core import to_jsonable_python
from starlette.requests import Request

from ._routes import HostRoute, host_route_of, reaches
from ._scope import HOST_APP_KEY
from .content import EmbeddedResource, Image, Text
from .outcomes import Code, Outcome, Status, unexpected

if TYPE_CHECKING:
    from ._types import Message as ASGIMessage
    from .capability import Capability
    from .context import Context

__all__ = ["CONTEXT_KEY", "MAX_ROUTE_RESPONSE_BYTES", "RouteCallRefused", "call_route", "response_outcome"]

logger = logging.getLogger("agentmw")

CONTEXT_KEY = "agentmw.context"
"""Scope key of a dispatched request: the live context, which ``agentmw.fastapi.RouteContext`` hands the handler."""

MAX_ROUTE_RESPONSE_BYTES = 32 * 1024 * 1024
"""A route's response body beyond this is not kept: the call fails, saying so."""

# Headers of the agent's own request that describe that request's body or protocol, not the caller.
_DROPPED_HEADERS = frozenset(
    {
        b"content-length",
        b"content-type",
        b"content-encoding",
        b"transfer-encoding",
        b"accept",
        b"accept-encoding",
        b"mcp-session-id",
        b"mcp-protocol-version",
        b"last-event-id",
        b"expect",
        b"connection",
        b"upgrade",
        b"te",
        b"trailer",
    }
)
# Scope keys a request keeps from the agent request: what outer middleware established about the caller.
_KEPT_SCOPE_KEYS = (
    "app",
    "http_version",
    "scheme",
    "server",
    "client",
    "root_path",
    "user",
    "auth",
    "session",
    "extensions",
)
_RETRYABLE = frozenset({408, 425, 429, 502, 503, 504})
_background: set[asyncio.Task[None]] = set()


class RouteCallRefused(Exception):
    """The arguments cannot be sent to the route as HTTP could (a ``/`` in a path segment), or would reach
    another route than the capability's own."""


class _TooLarge(Exception):
    """Raised into the app when its response outgrows :data:`MAX_ROUTE_RESPONSE_BYTES`: a stream that never ends
    is stopped, not read on."""


def _check_reaches(route: HostRoute, scope: Mapping[str, Any]) -> None:
    """Refuse arguments that would make the app's routing pick another route than the capability's (a path value
    that is the fixed segment of an earlier route, a ``{path}`` value that names a more specific route): the
    capability's gate and policy are for its own route only."""
    if not reaches(route.app, dict(scope), route.route):
        raise RouteCallRefused(
            f"these path parameters would reach another route of the app than {route.label}; nothing was sent"
        )


def wire_values(values: Mapping[str, Any]) -> dict[str, Any]:
    """The arguments as an HTTP client would send them: a model only with the fields its caller set, under their
    aliases, so that FastAPI's own validation (and a handler's ``exclude_unset``) sees what was sent."""
    return {
        k: v.model_dump(mode="json", by_alias=True, exclude_unset=True)
        if isinstance(v, BaseModel)
        else to_jsonable_python(v)
        for k, v in values.items()
    }


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


def _query_pairs(route: HostRoute, values: Mapping[str, Any]) -> list[tuple[str, str]]:
    pairs: list[tuple[str, str]] = []
    for name, param in route.params.items():
        if param.location != "query" or name not in values:
            continue
        value = values[name]
        if value is None:
            continue
        if param.model_query and isinstance(value, dict):
            for key, item in value.items():
                items = item if isinstance(item, list) else [item]
                pairs.extend((key, _text(i)) for i in items if i is not None)
        elif isinstance(value, list):
            pairs.extend((param.alias, _text(item)) for item in value if item is not None)
        else:
            pairs.append((param.alias, _text(value)))
    return pairs


_PLACEHOLDER = re.compile(r"\{([^{}]+)\}")


def _path(route: HostRoute, values: Mapping[str, Any]) -> str:
    """The route's path with its parameters filled in one pass (a value that looks like ``{other}`` stays text)."""
    by_alias = {p.alias: (n, p) for n, p in route.params.items() if p.location == "path"}

    def fill(match: re.Match[str]) -> str:
        found = by_alias.get(match.group(1))
        if found is None:
            return match.group(0)
        name, param = found
        value = _text(values.get(name, ""))
        if not param.path_convertor and ("/" in value or value in ("", ".", "..")):
            raise RouteCallRefused(
                f"path parameter {name!r} cannot be {value!r}: it must be one path segment"
            )
        return value

    return route.mount_prefix + _PLACEHOLDER.sub(fill, route.path_format)


def _body(route: HostRoute, values: Mapping[str, Any]) -> tuple[bytes, bytes | None]:
    body = {p.alias: values[n] for n, p in route.params.items() if p.location == "body" and n in values}
    if not body:
        return b"", None
    if route.form_body:
        flat = body if route.embed_body or len(body) != 1 else next(iter(body.values()))
        pairs = [
            (k, _text(i))
            for k, v in (flat or {}).items()
            for i in (v if isinstance(v, list) else [v])
            if i is not None
        ]
        return urlencode(pairs).encode(), b"application/x-www-form-urlencoded"
    payload = body if route.embed_body else next(iter(body.values()))
    return json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode(), b"application/json"


def _scope(
    route: HostRoute, values: Mapping[str, Any], ctx: Context, origin: Mapping[str, Any]
) -> tuple[dict[str, Any], bytes]:
    path = _path(route, values)
    body, content_type = _body(route, values)
    headers = [(k, v) for k, v in origin.get("headers", ()) if k.lower() not in _DROPPED_HEADERS]
    headers.append((b"accept", b"application/json"))
    if content_type is not None:
        headers.append((b"content-type", content_type))
        headers.append((b"content-length", str(len(body)).encode()))
    root = origin.get("root_path", "") or ""
    scope: dict[str, Any] = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.4"},
        "http_version": "1.1",
        "scheme": "http",
        "root_path": root,
    }
    for key in _KEPT_SCOPE_KEYS:
        if key in origin:
            scope[key] = origin[key]
    full = root + path  # the route's path is relative to the app, and the app strips its root path
    scope.update(
        {
            "method": route.method,
            "path": full,
            "raw_path": quote(full).encode(),
            "query_string": urlencode(_query_pairs(route, values)).encode(),
            "headers": headers,
            # what outer middleware put on request.state stays visible; what this request's own stack adds stays here
            "state": dict(origin.get("state") or {}),
            CONTEXT_KEY: ctx,
        }
    )
    return scope, body


def route_here(capability: Capability, origin: Mapping[str, Any]) -> HostRoute:
    """The capability's route as the app serving this request has it. A handler found on a router (or a mounted
    app) is called as the app that includes it routes it: with that app's prefixes and include-time
    dependencies, never around them."""
    route = capability.route
    assert route is not None
    app = origin.get("app")
    if app is not None and app is not route.app:
        return host_route_of(app, capability.fn) or route
    return route


def _target(route: HostRoute, origin: Mapping[str, Any]) -> Any:
    below = origin.get(HOST_APP_KEY)
    if below is not None and origin.get("app") is route.app:
        return (
            below  # the app's own stack below AgentMiddleware: outer middleware already ran for this request
        )
    return route.app


class _Response:
    __slots__ = ("body", "done", "headers", "limit_hit", "status")

    def __init__(self) -> None:
        self.status = 0
        self.headers: list[tuple[bytes, bytes]] = []
        self.body = bytearray()
        self.done = asyncio.Event()
        self.limit_hit = False

    def header(self, name: bytes) -> str | None:
        for key, value in self.headers:
            if key.lower() == name:
                return value.decode("latin-1")
        return None


async def call_route(capability: Capability, values: Mapping[str, Any], ctx: Context) -> _Response:
    """Send one agent call to its route through the host app; the response, as HTTP would have had it.

    The response is returned as soon as its body is complete; the app's background tasks then go on, once, as
    they do after an HTTP response. An exception that no handler of the app turned into a response is raised.
    """
    connection = ctx.request
    origin: Mapping[str, Any] = connection.scope if connection is not None else {}
    route = route_here(capability, origin)
    scope, body = _scope(route, wire_values(values), ctx, origin)
    _check_reaches(route, scope)
    response = _Response()
    sent = False
    disconnected = asyncio.Event()

    async def receive() -> ASGIMessage:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await disconnected.wait()
        return {"type": "http.disconnect"}

    async def send(message: ASGIMessage) -> None:
        kind = message["type"]
        if kind == "http.response.start":
            response.status = message["status"]
            response.headers = list(message.get("headers", ()))
        elif kind == "http.response.body" and not response.done.is_set():
            chunk = message.get("body", b"")
            if len(response.body) + len(chunk) > MAX_ROUTE_RESPONSE_BYTES:
                response.limit_hit = True
                response.done.set()
                raise _TooLarge()
            response.body += chunk
            if capability.is_async_gen and chunk and response.status < 300:
                await ctx.say(chunk.decode("utf-8", "replace"))
            if not message.get("more_body", False):
                response.done.set()

    app = _target(route, origin)
    if not route.background:  # nothing runs after its response: called in this task, as a server would
        try:
            await app(scope, receive, send)
        except _TooLarge:
            pass
        except BaseException:
            if not response.limit_hit:
                raise
        finally:
            disconnected.set()
        return response
    call = asyncio.ensure_future(app(scope, receive, send))
    done = asyncio.ensure_future(response.done.wait())
    try:
        await asyncio.wait((call, done), return_when=asyncio.FIRST_COMPLETED)
    except BaseException:
        disconnected.set()
        call.cancel()
        done.cancel()
        await asyncio.gather(call, return_exceptions=True)
        raise
    done.cancel()
    if call.done():
        if not response.limit_hit:
            call.result()  # an exception of the app, raised here
    else:  # the body is complete; the app goes on with its background tasks
        _background.add(call)
        call.add_done_callback(_background_done)
    return response


def _background_done(task: asyncio.Future[Any]) -> None:
    _background.discard(task)
    if not task.cancelled() and task.exception() is not None:
        logger.error("a host route's background work raised", exc_info=task.exception())


def _detail(response: _Response) -> tuple[str, Any]:
    text = response.body.decode("utf-8", "replace")
    try:
        data = json.loads(text)
    except ValueError:
        return text.strip(), None
    detail = data.get("detail", data) if isinstance(data, dict) else data
    return (detail if isinstance(detail, str) else json.dumps(detail, ensure_ascii=False)), data


def _retry_after(response: _Response) -> float | None:
    raw = response.header(b"retry-after")
    try:
        return float(raw) if raw is not None else None
    except ValueError:
        return None


def response_outcome(capability: Capability, response: _Response) -> Outcome:
    """The outcome of a route's HTTP response (see the module docstring)."""
    status = response.status
    route = capability.route
    assert route is not None
    if response.limit_hit:
        message = (
            f"{capability.name}: the route's response is larger than {MAX_ROUTE_RESPONSE_BYTES} bytes, "
            f"which agentmw does not relay."
        )
        return Outcome(status=Status.FAILED, content=[Text(message)], message=message, code=Code.PERMANENT)
    if 200 <= status < 300:
        return _completed(capability, response)
    if 300 <= status < 400:
        where = response.header(b"location") or "another URL"
        message = (
            f"{route.label} answered with a redirect ({status}) to {where}; an agent call does not follow "
            f"redirects. Nothing else was done."
        )
        return Outcome(
            status=Status.FAILED,
            content=[Text(message)],
            message=message,
            code=Code.PERMANENT,
            data={"status": status, "location": where},
        )
    detail, data = _detail(response)
    text = f"HTTP {status}: {detail}".rstrip(": ")
    info = {"status": status, "detail": detail}
    if status in (401, 403):
        challenge = response.header(b"www-authenticate")
        return Outcome(
            status=Status.REJECTED,
            content=[Text(text)],
            message=text,
            code=Code.UNAUTHENTICATED if status == 401 else Code.FORBIDDEN,
            data={**info, "challenge": challenge},
        )
    if status == 404:
        return Outcome(
            status=Status.REJECTED, content=[Text(text)], message=text, code=Code.NOT_FOUND, data=info
        )
    if status in _RETRYABLE:
        after = _retry_after(response)
        when = f" Retry after {after:g} seconds." if after is not None else " Retry later."
        return Outcome(
            status=Status.FAILED,
            content=[Text(text + when)],
            message=text,
            retryable=True,
            retry_after=after,
            code=Code.RETRYABLE,
            data=info,
        )
    if 400 <= status < 500:
        return Outcome(
            status=Status.REJECTED,
            content=[Text(text)],
            message=f"Invalid arguments: {text}",
            code=Code.INVALID_ARGUMENTS,
            data={**info, "body": data},
        )
    return Outcome(
        status=Status.FAILED,
        content=[Text(f"{text} This failure is permanent.")],
        message=text,
        code=Code.PERMANENT,
        data=info,
    )


def _completed(capability: Capability, response: _Response) -> Outcome:
    media = (response.header(b"content-type") or "").split(";")[0].strip().lower()
    body = bytes(response.body)
    if media == "application/json" or media.endswith("+json"):
        try:
            value = json.loads(body) if body else None
        except ValueError:
            value = None
            media = "text/plain"
        else:
            return _json_outcome(capability, value, body)
    if media.startswith("text/") or not media:
        text = body.decode("utf-8", "replace")
        return Outcome(status=Status.COMPLETED, content=[Text(text)] if text else [], value=text)
    route = capability.route
    assert route is not None
    part: Any
    if media.startswith("image/"):
        part = Image(body, media)
    else:
        part = EmbeddedResource(uri=f"route:{route.path}", blob=body, mime_type=media)
    return Outcome(status=Status.COMPLETED, content=[part], value=body)


def _json_outcome(capability: Capability, value: Any, body: bytes) -> Outcome:
    if capability.kind in ("resource", "prompt"):
        return Outcome(status=Status.COMPLETED, value=value)
    output = capability.output
    text = body.decode("utf-8")
    # the body as served: an object is the structured content, anything else is its "result"
    if output.mode == "content":
        structured = value if isinstance(value, dict) else {"result": value}
        return Outcome(status=Status.COMPLETED, content=[Text(text)], structured=structured, value=value)
    structured = {"result": value} if output.mode == "wrapped" else value
    return Outcome(
        status=Status.COMPLETED, content=[Text(text)], structured=structured, value=_typed(output, value)
    )


def _typed(output: Any, value: Any) -> Any:
    """The value as the route's response model types it (for ``ctx.call``), else as JSON: a body that an
    ``exclude`` option thinned may no longer fill the model, and is then handed over as served."""
    adapter = output.adapter
    if adapter is None:
        return value
    try:
        return adapter.validate_python(value)
    except ValueError:
        return value


async def authorize_route(capability: Capability, values: Mapping[str, Any], ctx: Context) -> Outcome | None:
    """What the app would answer before its endpoint runs, or None when the call may go on to its gate: the
    request goes through the app's middleware below ``AgentMiddleware`` (a copy of that chain, ending in a probe
    instead of the router) and the route's dependencies, with the app's exception handlers. They all run again
    when the call is made.

    Only gated routes need this: a person must never be asked to approve what the app would refuse anyway.
    """
    connection = ctx.request
    origin: Mapping[str, Any] = connection.scope if connection is not None else {}
    route = route_here(capability, origin)
    try:
        scope, body = _scope(route, wire_values(values), ctx, origin)
        _check_reaches(route, scope)
    except RouteCallRefused:
        return None  # the call itself refuses it, with the message
    scope.setdefault("app", route.app)
    path_params: dict[str, Any] = {}
    for name, param in route.params.items():
        if param.location == "path":
            convertor = route.convertors.get(param.alias)
            raw = _text(to_jsonable_python(values.get(name, "")))
            path_params[param.alias] = convertor.convert(raw) if convertor is not None else raw
    scope["path_params"] = path_params
    scope[_PROBE_KEY] = route
    delivered = False

    async def receive() -> ASGIMessage:
        nonlocal delivered
        if delivered:
            return {"type": "http.disconnect"}
        delivered = True
        return {"type": "http.request", "body": body, "more_body": False}

    response = _Response()

    async def send(message: ASGIMessage) -> None:
        if message["type"] == "http.response.start":
            response.status = message["status"]
            response.headers = list(message.get("headers", ()))
        elif message["type"] == "http.response.body":
            response.body += message.get("body", b"")

    chain = _probe_chain(_target(route, origin))
    try:
        await (chain or _probe)(scope, receive, send)
    except Exception as exc:  # noqa: BLE001 (any failure of the probe is the app's answer, or unexpected)
        refusal = _validation_refusal(exc) if chain is None else None
        if refusal is None and chain is None:
            refusal = await _handled(route, Request(scope, receive), exc)
        if refusal is None:
            return unexpected(capability, exc)
        response = refusal
    if response.status == _PROBE_PASSED:
        return None
    return response_outcome(capability, response)


_PROBE_KEY = "agentmw.probe"
_PROBE_PASSED = 299  # no status an app sends: the probe's own "the endpoint would run now"
_PROBES: dict[int, tuple[Any, Any]] = {}


def _probe_chain(top: Any) -> Any:
    """A copy of the middleware chain from ``top`` down to the app's ``ExceptionMiddleware``, whose ``app`` is the
    probe; None when the chain cannot be followed (a wrapper that does not say what it wraps)."""
    cached = _PROBES.get(id(top))
    if cached is not None and cached[0] is top:
        return cached[1]
    if getattr(top, "routes", None) is not None and hasattr(
        top, "build_middleware_stack"
    ):  # an app, not a chain
        top = getattr(top, "middleware_stack", None) or top.build_middleware_stack()
    layers: list[Any] = []
    node = top
    while node is not None and type(node).__name__ != "ExceptionMiddleware":
        layers.append(node)
        node = getattr(node, "app", None)
        if (
            node is not None and getattr(node, "routes", None) is not None
        ):  # reached a router: no handlers below
            node = None
    chain: Any = None
    if node is not None:
        chain = _probe
        for layer in reversed([*layers, node]):
            clone = copy.copy(layer)
            clone.app = chain
            chain = clone
    _PROBES[id(top)] = (top, chain)
    return chain


async def _probe(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """The bottom of the probe chain: the route's dependencies, solved as FastAPI solves them; a refusal is
    raised for the app's exception handlers, a pass is answered with :data:`_PROBE_PASSED`."""
    from fastapi.dependencies.utils import solve_dependencies
    from fastapi.exceptions import RequestValidationError

    route: HostRoute = scope[_PROBE_KEY]
    request = Request(scope, receive)
    parsed: Any = None
    body = await request.body()
    if body:
        parsed = await request.form() if route.form_body else json.loads(body)
    async with AsyncExitStack() as stack:
        scope["fastapi_astack"] = scope["fastapi_inner_astack"] = scope["fastapi_function_astack"] = stack
        solved = await solve_dependencies(
            request=request,
            dependant=route.route.dependant,
            body=parsed,
            async_exit_stack=stack,
            embed_body_fields=route.embed_body,
            dependency_overrides_provider=getattr(route.route, "dependency_overrides_provider", None)
            or route.app,
        )
    if solved.errors:
        raise RequestValidationError(solved.errors)
    await send({"type": "http.response.start", "status": _PROBE_PASSED, "headers": []})
    await send({"type": "http.response.body", "body": b""})


def _validation_refusal(exc: Exception) -> _Response | None:
    if type(exc).__name__ != "RequestValidationError":
        return None
    response = _Response()
    response.status = 422
    response.headers = [(b"content-type", b"application/json")]
    response.body += json.dumps({"detail": to_jsonable_python(exc.errors())}).encode()  # type: ignore[attr-defined]
    return response


async def _handled(route: HostRoute, request: Any, exc: Exception) -> _Response | None:
    """The response the app's exception handlers make of ``exc`` (``HTTPException`` and the app's own), or None."""
    handlers = getattr(route.app, "exception_handlers", None) or {}
    handler = None
    for cls in type(exc).__mro__:
        if cls in handlers:
            handler = handlers[cls]
            break
    if handler is None or cls is Exception:
        return None
    made = handler(request, exc)
    if hasattr(made, "__await__"):
        made = await made
    response = _Response()
    response.status = made.status_code
    response.headers = list(made.raw_headers)
    response.body += made.body
    return response
