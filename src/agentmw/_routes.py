"""The host app's routes as FastAPI resolves them, so a route served to agents is called as HTTP would call it.

A capability whose function is a FastAPI route's endpoint is bound to that route (:class:`HostRoute`). The
binding says which of the route's inputs are the tool's arguments (the path, query and body parameters of the
endpoint *and* of every dependency, the route's, its routers' and the app's ``dependencies=[...]`` included) and
what the result looks like (the route's ``response_model``, with its include/exclude options). The call itself
is made through the app (``_dispatch.py``), so FastAPI runs everything it would run for HTTP.

Nothing here imports FastAPI at module level: a route is recognised by its ``dependant``.
"""

from __future__ import annotations

import copy
import gc
import inspect
import typing
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel
from starlette.routing import Match

from .errors import RegistrationError

__all__ = ["HostRoute", "RouteParam", "host_route_of", "iter_host_routes", "route_table"]

Location = Literal["path", "query", "body"]


@dataclass(frozen=True, slots=True)
class RouteParam:
    """One input of a route that an agent's arguments fill."""

    name: str
    """The argument's name (the Python name FastAPI gives the field)."""
    alias: str
    """The name on the wire (a query key, a body field)."""
    location: Location
    annotation: Any
    field_info: Any
    path_convertor: bool = False
    """A ``{name:path}`` parameter, whose value may hold ``/``."""
    model_query: bool = False
    """A ``Query()`` parameter whose type is a model: its fields are the query keys."""


@dataclass(frozen=True, slots=True, eq=False)
class HostRoute:
    """A FastAPI route, as an agent call reaches it."""

    app: Any
    """The app the route was found in: a call that did not come through that app's own middleware goes to it."""
    route: Any
    path: str
    """The full path template, with every router prefix and mount path."""
    mount_prefix: str
    path_format: str
    convertors: dict[str, Any]
    method: str
    params: dict[str, RouteParam]
    embed_body: bool
    form_body: bool
    response_model: Any
    """The type FastAPI serialises the result with (``response_model``, else the return annotation), or None."""
    include: Any
    exclude: Any
    by_alias: bool
    exclude_unset: bool
    exclude_defaults: bool
    exclude_none: bool
    status_code: int | None
    background: bool = False
    """It takes ``BackgroundTasks`` (the handler or a dependency): its response comes before its background work."""

    @property
    def label(self) -> str:
        return f"{self.method} {self.path}"

    @property
    def endpoint(self) -> Callable[..., Any]:
        endpoint: Callable[..., Any] = self.route.endpoint
        return endpoint


def _is_api_route(route: Any) -> bool:
    return getattr(route, "dependant", None) is not None and getattr(route, "endpoint", None) is not None


def _contexts(routes: Any) -> Iterator[Any]:
    """The routes FastAPI matches, with what included routers add (FastAPI >= 0.120 composes them lazily)."""
    try:
        from fastapi.routing import iter_route_contexts
    except ImportError:
        yield from routes
        return
    yield from iter_route_contexts(list(routes))


_FLAT: Any = None  # an IdentityCache, made below: app -> its routes in routing order


def flat_routes(app: Any, *, fresh: bool = False) -> list[Any]:
    """``app``'s routes in the order its routing tries them, included routers' in their places; walked once per
    app (``fresh``: again), so that the same route objects stand for the same routes everywhere."""
    found = None if fresh else _FLAT.get(app)
    if found is None:
        found = list(_contexts(getattr(app, "routes", None) or ()))
        _FLAT.set(app, found)
    return found


def iter_host_routes(app: Any, prefix: str = "") -> Iterator[tuple[Any, str]]:
    """``(route, mount prefix)`` for every HTTP route of a FastAPI app or router, mounted apps included."""
    for route in flat_routes(app):
        if _is_api_route(route):
            if getattr(route, "methods", None):
                yield route, prefix
            continue
        nested = getattr(route, "app", None)
        if (
            getattr(route, "endpoint", None) is None
            and nested is not None
            and nested is not app
            and getattr(nested, "routes", None) is not None
        ):
            yield from iter_host_routes(nested, prefix + (getattr(route, "path", "") or ""))


def _walk(dependant: Any) -> Iterator[Any]:
    seen: set[int] = set()
    stack = [dependant]
    while stack:
        current = stack.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        stack.extend(reversed(getattr(current, "dependencies", None) or ()))


def _is_file(field: Any) -> bool:
    info = field.field_info
    if type(info).__name__ == "File":
        return True
    annotation = info.annotation
    names = {getattr(a, "__name__", "") for a in (annotation, *typing.get_args(annotation))}
    return "UploadFile" in names or any(
        "UploadFile" in {getattr(b, "__name__", "") for b in typing.get_args(a)}
        for a in typing.get_args(annotation)
    )


def _model_type(annotation: Any) -> Any:
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if (
        typing.get_origin(annotation) in (typing.Union, getattr(__import__("types"), "UnionType", None))
        and len(args) == 1
    ):
        annotation = args[0]
    return annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None


def _params(route: Any, label: str) -> tuple[dict[str, RouteParam], bool]:
    params: dict[str, RouteParam] = {}
    form = False
    convertors = getattr(route, "param_convertors", None) or {}
    for dependant in _walk(route.dependant):
        scheme = _query_key_scheme(dependant.call)
        if (
            scheme is not None and scheme not in params
        ):  # APIKeyQuery reads the query itself: its key is an argument
            from fastapi import Query

            info = Query(None, description=f"The API key, sent as the {scheme!r} query parameter.")
            params[scheme] = RouteParam(
                name=scheme, alias=scheme, location="query", annotation=str | None, field_info=info
            )
        for location, fields in (
            ("path", dependant.path_params),
            ("query", dependant.query_params),
            ("body", dependant.body_params),
        ):
            for field in fields:
                if field.name in params:
                    continue
                if location == "body" and _is_file(field):
                    raise RegistrationError(
                        f"{label}: parameter {field.name!r} is a file upload, which an agent call cannot send; "
                        f"serve a route that takes the file's content (bytes or a URL) instead, or leave this "
                        f"route out (exclude it from the selection, or remove its decorator)"
                    )
                if location == "body" and type(field.field_info).__name__ == "Form":
                    form = True
                params[field.name] = RouteParam(
                    name=field.name,
                    alias=field.alias,
                    location=location,  # type: ignore[arg-type]
                    annotation=field.field_info.annotation,
                    field_info=field.field_info,
                    path_convertor=location == "path"
                    and type(convertors.get(field.alias)).__name__ == "PathConvertor",
                    model_query=location == "query" and _model_type(field.field_info.annotation) is not None,
                )
    return params, form


def _query_key_scheme(call: Any) -> str | None:
    """The query parameter an ``APIKeyQuery`` security scheme reads, else None."""
    if type(call).__name__ != "APIKeyQuery" or not type(call).__module__.startswith("fastapi"):
        return None
    name = getattr(getattr(call, "model", None), "name", None)
    return name if isinstance(name, str) else None


def _embed(route: Any, params: dict[str, RouteParam]) -> bool:
    embed = getattr(route, "_embed_body_fields", None)
    if embed is not None:
        return bool(embed)
    body = [p for p in params.values() if p.location == "body"]
    return len(body) > 1 or any(getattr(p.field_info, "embed", False) for p in body)


def _method(methods: Any) -> str:
    names: list[str] = sorted(m.upper() for m in methods or ())
    for preferred in ("GET", "POST", "PUT", "PATCH", "DELETE"):
        if preferred in names:
            return preferred
    return names[0]


def _response_model(route: Any) -> Any:
    if getattr(route, "response_field", None) is None:
        return None
    return getattr(route, "response_model", None)


def build_host_route(app: Any, route: Any, prefix: str) -> HostRoute:
    label = f"{_method(route.methods)} {prefix}{route.path}"
    params, form = _params(route, f"route {label}")
    return HostRoute(
        app=app,
        route=route,
        path=prefix + route.path,
        mount_prefix=prefix,
        path_format=getattr(route, "path_format", route.path),
        convertors=dict(route.param_convertors or {}),
        method=_method(route.methods),
        params=params,
        embed_body=_embed(route, params),
        form_body=form,
        response_model=_response_model(route),
        include=getattr(route, "response_model_include", None),
        exclude=getattr(route, "response_model_exclude", None),
        by_alias=getattr(route, "response_model_by_alias", True) is not False,
        exclude_unset=bool(getattr(route, "response_model_exclude_unset", False)),
        exclude_defaults=bool(getattr(route, "response_model_exclude_defaults", False)),
        exclude_none=bool(getattr(route, "response_model_exclude_none", False)),
        status_code=getattr(route, "status_code", None),
        background=any(getattr(d, "background_tasks_param_name", None) for d in _walk(route.dependant)),
    )


def _kept(owner: Any) -> Callable[[], Any]:
    """A strong stand-in for a weak reference: what an object that cannot be weakly referenced is kept by."""
    return lambda: owner


class IdentityCache:
    """Values kept per object, by identity, for as long as the object lives: an ``APIRouter`` is unhashable, so a
    ``WeakKeyDictionary`` cannot hold it."""

    __slots__ = ("_entries",)

    def __init__(self) -> None:
        self._entries: dict[int, tuple[weakref.ref[Any], Any]] = {}

    def get(self, owner: Any) -> Any:
        entry = self._entries.get(id(owner))
        return entry[1] if entry is not None and entry[0]() is owner else None

    def set(self, owner: Any, value: Any) -> None:
        key = id(owner)
        try:
            ref: Any = weakref.ref(owner, lambda _, key=key: self._entries.pop(key, None))  # type: ignore[misc]
        except TypeError:  # not weakly referenceable: kept, with the object, so its id is never another's
            ref = _kept(owner)
        self._entries[key] = (ref, value)

    def pop(self, owner: Any) -> None:
        if self.get(owner) is not None:
            del self._entries[id(owner)]

    def __contains__(self, owner: Any) -> bool:
        return self.get(owner) is not None


_TABLES = IdentityCache()
_FLAT = IdentityCache()


def route_table(app: Any, *, fresh: bool = False) -> dict[Any, list[tuple[Any, str]]]:
    """Endpoint -> its ``(route, mount prefix)`` pairs in ``app``, walked once per app (``fresh``: again)."""
    table = None if fresh else _TABLES.get(app)
    if table is None:
        table = {}
        if fresh:
            _refresh_flat(app)
        for route, prefix in iter_host_routes(app):
            table.setdefault(_unwrapped(route.endpoint), []).append((route, prefix))
        _TABLES.set(app, table)
        _BUILT.pop(app)
    return table


def _refresh_flat(app: Any) -> None:
    for route in flat_routes(app, fresh=True):
        nested = getattr(route, "app", None)
        if (
            getattr(route, "endpoint", None) is None
            and nested is not None
            and nested is not app
            and getattr(nested, "routes", None) is not None
        ):
            _refresh_flat(nested)


def _unwrapped(fn: Any) -> Any:
    try:
        return inspect.unwrap(fn)
    except ValueError:
        return fn


_BUILT = IdentityCache()


def host_route_of(
    app: Any, fn: Callable[..., Any], *, fresh: bool = False, path: str | None = None
) -> HostRoute | None:
    """The route of ``app`` whose endpoint is ``fn`` (at ``path``, when the caller knows which), or None. A
    function served by several routes, none named, is refused: whose dependencies and response model apply
    would be a guess."""
    if path is not None:
        for route, prefix in route_table(app, fresh=fresh).get(_unwrapped(fn), ()):
            if prefix + route.path == path:
                return build_host_route(app, route, prefix)
        return None
    built = None if fresh else _BUILT.get(app)
    key = _unwrapped(fn)
    if built is not None and key in built:
        cached: HostRoute | None = built[key]
        return cached
    host = _find(app, fn, fresh)
    if built is None:
        built = {}
        _BUILT.set(app, built)
    built[key] = host
    return host


def _find(app: Any, fn: Callable[..., Any], fresh: bool) -> HostRoute | None:
    found = route_table(app, fresh=fresh).get(_unwrapped(fn))
    if not found:
        return None
    if len(found) > 1:
        labels = ", ".join(f"{_method(r.methods)} {p}{r.path}" for r, p in found)
        raise RegistrationError(
            f"{getattr(fn, '__qualname__', fn)!r} is the endpoint of several routes ({labels}); an agent call "
            f"would have to guess whose dependencies and response model apply. Decorate one function per route "
            f"(a thin wrapper for each route that calls the shared code)."
        )
    route, prefix = found[0]
    return build_host_route(app, route, prefix)


def argument_fields(host: HostRoute, signature_names: set[str]) -> dict[str, tuple[Any, Any]]:
    """Pydantic field definitions for the route inputs that the endpoint's own signature does not declare (the
    inputs of its dependencies)."""
    fields: dict[str, tuple[Any, Any]] = {}
    for name, param in host.params.items():
        if name in signature_names:
            continue
        info = copy.copy(param.field_info)
        fields[name] = (param.annotation, info)
    return fields


def routes_holding(fn: Callable[..., Any]) -> list[Any]:
    """The FastAPI routes, in any app or router, whose endpoint is ``fn``: found through the objects that refer to
    it, so a handler an agent serves with no app of its own is still known to be one. Slow (the garbage collector
    is asked): called once per capability, at its first call."""
    target = _unwrapped(fn)
    found: list[Any] = []
    for referrer in gc.get_referrers(fn, target):
        if not isinstance(referrer, dict):
            continue
        for owner in gc.get_referrers(referrer):
            if (
                getattr(owner, "__dict__", None) is referrer
                and _is_api_route(owner)
                and _unwrapped(owner.endpoint) is target
                and owner not in found
            ):
                found.append(owner)
    return found


def _route_key(route: Any) -> tuple[int, str]:
    """What stays the same of a route across walks: FastAPI rebuilds an included router's route objects when its
    routes change, but the route it was made from and the full path it serves stay."""
    return id(getattr(route, "original_route", route)), str(getattr(route, "path", ""))


def reaches(app: Any, scope: dict[str, Any], target: Any) -> bool:
    """Whether ``app``'s routing sends ``scope`` to the route ``target`` (mounted apps followed): no route tried
    before it takes the request. Only the routes before it are matched, so the check costs what routing does."""
    key = _route_key(target)
    for route in flat_routes(app):
        if _route_key(route) == key:
            return True
        match, child = route.matches(scope)
        if match is Match.FULL:
            nested = child.get("endpoint") or getattr(route, "app", None)
            return (  # a mount: the target is reached only through it
                getattr(route, "endpoint", None) is None
                and getattr(nested, "routes", None) is not None
                and reaches(nested, {**scope, **child}, target)
            )
    return False
