"""Bulk exposure: serve a host app's routes as tools, chosen by method, tag or path, without a decorator on each.

``Agent(include=[app], routes=RouteSelection())`` (or ``agent.include(app, routes=...)``) walks the app's
routes. A decorated handler is included as always, with its own options. An undecorated handler that the
selection picks becomes a tool whose name, descriptions and hints are derived from the route:

- name: the route's ``operation_id``, else its ``name`` (FastAPI: the function's name);
- contract: the handler's docstring, else the route's ``description``/``summary``, else its name, with the
  route it serves (``GET /assets``);
- hints: ``read_only`` when every method of the route is safe (GET, HEAD, OPTIONS), ``destructive`` for DELETE.

The default selection is the suggested start: read-only ``GET`` routes. Routes are never exposed in bulk when
agentmw could not serve them as the app does: plain Starlette endpoints (they read the request themselves),
routes hidden from the schema (``include_in_schema=False``), and routes that take a file upload (logged as a
warning). A route exposed in bulk is called through the app like a decorated one (``_dispatch.py``): its
dependencies, the route's, its routers' and the app's, all run. ``agentmw lint`` warns
about every tool exposed in bulk (AMW011): a derived description is a starting point, not a contract.
"""

from __future__ import annotations

import fnmatch
import inspect
import logging
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from ._docstrings import parse_docstring
from ._routes import host_route_of
from .decorators import MARKED, SERVED, specs_of
from .errors import RegistrationError

if TYPE_CHECKING:
    from .capability import Capability, CapabilityKind

__all__ = [
    "ROUTE_META",
    "Registry",
    "RouteInfo",
    "RouteSelection",
    "derived_options",
    "include_routes",
    "iter_routes",
    "log_served",
    "refusal",
    "route_of",
]

logger = logging.getLogger("agentmw")

ROUTE_META = "agentmw/route"
"""Key of ``Capability.meta`` holding ``{"methods": [...], "path": ...}`` for a tool exposed in bulk."""

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


class Registry(Protocol):
    """What bulk exposure reads from the agent and adds to it (``agent.py`` passes itself)."""

    @property
    def name(self) -> str: ...
    @property
    def agui_path(self) -> str: ...
    @property
    def tools(self) -> Mapping[str, Capability]: ...
    @property
    def resources(self) -> Mapping[str, Capability]: ...
    @property
    def templates(self) -> Mapping[str, Capability]: ...
    @property
    def prompts(self) -> Mapping[str, Capability]: ...
    @property
    def skills(self) -> Mapping[str, Capability]: ...
    def add(self, kind: CapabilityKind, fn: Callable[..., Any], **options: Any) -> Capability: ...


@dataclass(frozen=True, slots=True)
class RouteInfo:
    """One endpoint of a host app, with what its routers and mounts add (path prefix, tags, dependencies)."""

    path: str
    methods: frozenset[str]
    endpoint: Callable[..., Any]
    name: str
    tags: tuple[str, ...] = ()
    dependencies: int = 0
    """How many ``dependencies=[...]`` of the route, its routers and its app apply (they never run for agents)."""
    include_in_schema: bool = True
    fastapi: bool = False
    summary: str | None = None
    description: str | None = None
    operation_id: str | None = None

    @property
    def method_text(self) -> str:
        return ",".join(sorted(self.methods)) or "ANY"


def _methods(route: Any) -> frozenset[str]:
    methods = frozenset(m.upper() for m in (getattr(route, "methods", None) or ()))
    return methods - {"HEAD"} if "GET" in methods else methods  # Starlette adds HEAD to every GET route


def iter_routes(
    app: Any,
    prefix: str = "",
    tags: tuple[str, ...] = (),
    dependencies: int | None = None,
    in_schema: bool = True,
) -> Iterator[RouteInfo]:
    """Every endpoint of a FastAPI/Starlette app or router: included routers and mounts are walked."""
    if dependencies is None:  # the app's own dependencies (FastAPI(dependencies=[...]))
        dependencies = len(getattr(getattr(app, "router", app), "dependencies", None) or ())
    for route in getattr(app, "routes", None) or ():
        included = getattr(route, "original_router", None)  # FastAPI >= 0.120 keeps included routers whole
        if included is not None:
            context = getattr(route, "include_context", None)
            yield from iter_routes(
                included,
                prefix + (getattr(context, "prefix", "") or ""),
                tags + tuple(getattr(context, "tags", None) or ()),
                dependencies + len(getattr(context, "dependencies", None) or ()),
                in_schema and getattr(context, "include_in_schema", True) is not False,
            )
            continue
        endpoint = getattr(route, "endpoint", None)
        if endpoint is None:
            nested = getattr(route, "app", None)
            if nested is not None and nested is not app and getattr(nested, "routes", None) is not None:
                inner = getattr(getattr(nested, "router", nested), "dependencies", None) or ()
                yield from iter_routes(
                    nested,
                    prefix + (getattr(route, "path", "") or ""),
                    tags,
                    dependencies + len(inner),
                    in_schema,
                )
            continue
        yield RouteInfo(
            path=prefix + (getattr(route, "path", "") or ""),
            methods=_methods(route),
            endpoint=endpoint,
            name=getattr(route, "name", "") or getattr(endpoint, "__name__", ""),
            tags=tags + tuple(str(t) for t in getattr(route, "tags", None) or ()),
            dependencies=dependencies + len(getattr(route, "dependencies", None) or ()),
            include_in_schema=in_schema and getattr(route, "include_in_schema", True) is not False,
            fastapi=hasattr(route, "dependant"),
            summary=getattr(route, "summary", None),
            description=getattr(route, "description", None) or None,
            operation_id=getattr(route, "operation_id", None),
        )


def _tuple(value: str | Iterable[str]) -> tuple[str, ...]:
    return (value,) if isinstance(value, str) else tuple(value)


class RouteSelection:
    """Which undecorated routes an agent serves as tools.

    Args:
        methods: a route is selected when every one of its methods is listed (default: ``GET`` only, the
            suggested start; a route that serves GET and POST is then left out).
        tags: when given, a route needs at least one of these tags (its own, or its router's).
        paths: when given, a route's full path template must match one of these ``fnmatch`` patterns
            (``"/assets*"``, ``"/budgets/{department}"``).
        exclude: ``fnmatch`` patterns on the path or the route name that are never selected.
    """

    __slots__ = ("exclude", "methods", "paths", "tags")

    def __init__(
        self,
        *,
        methods: str | Iterable[str] = ("GET",),
        tags: str | Iterable[str] = (),
        paths: str | Iterable[str] = (),
        exclude: str | Iterable[str] = (),
    ) -> None:
        self.methods = frozenset(m.upper() for m in _tuple(methods))
        self.tags = frozenset(_tuple(tags))
        self.paths = _tuple(paths)
        self.exclude = _tuple(exclude)

    def __repr__(self) -> str:
        return (
            f"RouteSelection(methods={sorted(self.methods)}, tags={sorted(self.tags)}, paths={list(self.paths)}, "
            f"exclude={list(self.exclude)})"
        )

    def __call__(self, route: RouteInfo) -> bool:
        if not route.methods or not route.methods <= self.methods:
            return False
        if self.tags and not self.tags & set(route.tags):
            return False
        if self.paths and not any(fnmatch.fnmatchcase(route.path, p) for p in self.paths):
            return False
        return not any(
            fnmatch.fnmatchcase(route.path, p) or fnmatch.fnmatchcase(route.name, p) for p in self.exclude
        )


def refusal(route: RouteInfo) -> str | None:
    """Why ``route`` cannot be exposed in bulk, or None when it can."""
    if not route.fastapi:
        return "a plain Starlette endpoint reads its request itself; decorate a function with declared parameters"
    if not route.include_in_schema:
        return "the route is hidden from the schema (include_in_schema=False)"
    return None


def _sentence(text: str) -> str:
    text = text.strip()
    return text if text.endswith((".", "!", "?")) else text + "."


def derived_options(route: RouteInfo) -> dict[str, Any]:
    """The tool options of an undecorated route: name, contract, hints, tags, and where it came from."""
    name = route.operation_id or route.name
    options: dict[str, Any] = {
        "name": name,
        "tags": route.tags,
        "meta": {ROUTE_META: {"methods": sorted(route.methods), "path": route.path}},
    }
    if not parse_docstring(inspect.getdoc(inspect.unwrap(route.endpoint))).contract:
        lead = route.description or route.summary or re.sub(r"[_\W]+", " ", name).strip().capitalize()
        options["contract"] = f"{_sentence(lead)} Serves the app's {route.method_text} {route.path} route."
    if route.summary:
        options["title"] = route.summary
    annotations: dict[str, Any] = {}
    if route.methods <= SAFE_METHODS:
        annotations["readOnlyHint"] = True
    else:
        annotations["readOnlyHint"] = False
        annotations["destructiveHint"] = "DELETE" in route.methods
    options["annotations"] = annotations
    return options


def include_routes(agent: Registry, app: Any, selection: Callable[[RouteInfo], bool]) -> list[Capability]:
    """Serve the undecorated routes of ``app`` that ``selection`` picks as tools (the agent includes the
    decorated handlers first, each with its own options).

    Returns the tools exposed in bulk. A route that is selected but cannot be served as the app serves it
    (:func:`refusal`) is skipped, with a warning on the ``agentmw`` logger.
    """
    exposed: list[Capability] = []
    for route in iter_routes(app):
        endpoint = route.endpoint
        if specs_of(endpoint):
            continue
        if not selection(route) or any(c.fn is endpoint for c in agent.tools.values()):
            continue
        reason = refusal(route)
        if reason is not None:
            logger.debug("agentmw: not exposing %s %s in bulk: %s", route.method_text, route.path, reason)
            continue
        try:
            host = host_route_of(app, endpoint, path=route.path)
            exposed.append(agent.add("tool", endpoint, route=host, **derived_options(route)))
        except RegistrationError as exc:  # a route no agent call can fill (a file upload): said, and left out
            logger.warning("agentmw: not exposing %s %s in bulk: %s", route.method_text, route.path, exc)
    return exposed


def log_served(agent: Registry, app: Any) -> None:
    """At the first request: one line per face naming what it serves, and a warning for each marked function
    that no agent serves."""
    tools = sorted(agent.tools)
    resources = sorted([*agent.resources, *agent.templates])
    served_fns = {
        id(c.fn)
        for table in (agent.tools, agent.resources, agent.templates, agent.prompts, agent.skills)
        for c in table.values()
    }
    hidden = sorted(
        f"{r.method_text} {r.path}"
        for r in iter_routes(app)
        if r.include_in_schema and id(r.endpoint) not in served_fns
    )
    logger.info(
        "agentmw %s: MCP serves %d tools %s, %d resources %s, %d prompts %s; %d routes of the app are not "
        "served %s",
        agent.name,
        len(tools),
        tools,
        len(resources),
        resources,
        len(agent.prompts),
        sorted(agent.prompts),
        len(hidden),
        hidden,
    )
    logger.info(
        "agentmw %s: A2A serves %d skills %s; AG-UI serves %s",
        agent.name,
        len(agent.skills),
        sorted(agent.skills),
        [f"{agent.agui_path}/{s}" for s in sorted(agent.skills)],
    )
    for fn in list(MARKED):
        if fn not in SERVED:
            logger.warning(
                "agentmw: %s.%s is marked (%s) but no agent serves it; include it (Agent(include=[...])) "
                "or remove the decorator",
                getattr(fn, "__module__", "?"),
                getattr(fn, "__qualname__", fn),
                ", ".join(spec.kind for spec in specs_of(fn)),
            )


def route_of(capability: Capability) -> dict[str, Any] | None:
    """``{"methods", "path"}`` of a tool exposed in bulk, else None."""
    return capability.meta.get(ROUTE_META)
