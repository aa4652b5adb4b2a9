"""The registry of capabilities and the agent's settings; it builds the middleware, router and app."""

from __future__ import annotations

import logging
import os
import secrets
import time
import types
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from starlette.routing import Route

from . import decorators
from ._edge import Edge, HostGuard, detail_refusal, host_allowed, origin_allowed
from ._routes import IdentityCache, host_route_of, iter_host_routes, route_table
from ._shape import BodyShape
from ._types import ASGIApp
from ._wiring import Listener
from .a2a.refusals import edge_refusal
from .a2a.settings import A2ASettings
from .agui.settings import AguiSettings
from .approvals import MAX_DECISION_BYTES, ApprovalsEndpoint
from .auth.access import Access, follow
from .auth.wellknown import JWKS_PATH, WellKnown
from .capability import Capability, CapabilityKind, _where, build_capability
from .decorators import CapabilitySpec, specs_of
from .errors import RegistrationError, StoreUnavailable
from .identity import IdentifyFn, as_identify
from .mcp.settings import McpSettings
from .middleware import AgentMiddleware
from .safety import Approvals, Budgets, IdempotencyCache, InFlightLimits
from .selection import include_routes, log_served
from .settings import Limits, Timing
from .skill_packages import ServedSkill, SkillFile, SkillPackage, SkillPackageError, serve_package
from .state import DEFAULT_STORE, State, StoreLimits, check_store, open_state

if TYPE_CHECKING:
    from .a2a.operations import Operations
    from .a2a.push import PushSender
    from .auth import ProtectedResource, RateLimit
    from .bridges._peer import Bridges, Peer
    from .observability.hooks import HookChain
    from .observability.metrics import MetricsApp
    from .observability.telemetry import Telemetry

# Imported inside the methods that need them, each kept off ``import agentmw`` (about 250 ms together; each
# import says what it costs, measured after ``import agentmw`` on the 2-core dev machine): the three faces with
# their lifecycle clients, the bridges, the hooks and telemetry. An agent serving one face pays for that one.

__all__ = ["Agent"]

F = TypeVar("F", bound=Callable[..., Any])

logger = logging.getLogger("agentmw")

_SECRET_NS = "agent.secret"
_SECRET_TTL = 10 * 365 * 24 * 3600.0  # kept for good (a wipe is repaired by the replicas holding it)
_SECRET_RECHECK = 10.0  # seconds between two reads of the state's secret by a replica that signs
_PREVIOUS_SECRETS = 2  # secrets replaced lately that still check a requestState
_MCP, _AGUI, _LIMITS, _TIMING = McpSettings(), AguiSettings(), Limits(), Timing()


def _skill_reader(file: SkillFile) -> Callable[[], Any]:
    """The resource function of one skill file: its bytes as read and hashed at registration, as text when it is
    text (so a host re-hashing ``text`` gets the manifest's digest), else bytes (a base64 blob)."""
    value: str | bytes = file.text if file.text is not None else file.data

    async def skill_file() -> str | bytes:
        return value

    skill_file.__qualname__ = f"skill_file[{file.path}]"
    return skill_file


def _qualname(fn: Any) -> str:
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"


class Agent:
    """A set of capabilities served as one agent over MCP, A2A and AG-UI.

    Args:
        name, version: reported as the server's identity.
        instructions: optional text for MCP clients on how to use the server (and the A2A card's description
            when ``A2ASettings.description`` is empty).
        include: functions, modules, and FastAPI/Starlette apps or routers whose marked functions are served.
        routes: also serve the undecorated routes of the included apps that it selects, as tools
            (:class:`agentmw.selection.RouteSelection`; ``RouteSelection()`` picks the GET routes).
        mcp, a2a, agui: each face's own settings (:class:`~agentmw.mcp.settings.McpSettings`,
            :class:`~agentmw.a2a.settings.A2ASettings`, :class:`~agentmw.agui.settings.AguiSettings`): its path
            and what is particular to its protocol.
        limits: how much the agent accepts per request and keeps at once, on every face
            (:class:`~agentmw.settings.Limits`: body size and shape, calls in flight, sessions, runs, threads,
            tasks, ...).
        timing: for how long it keeps what it remembers and waits for answers
            (:class:`~agentmw.settings.Timing`).
        budgets: a :class:`agentmw.safety.Budgets`: the byte budgets of the tables kept per client id, the caps
            per entry, and the cap on parked calls (which hold no ``max_in_flight`` slot while they wait).
        store: the shared state, the one place everything the agent keeps lives (sessions, tasks, runs,
            approvals, idempotency records, the signing secret): a :class:`agentmw.state.State` or a URL
            (``memory://``, ``sqlite:///path``, ``redis://host:port/db``); default ``$AGENTMW_STORE``, else
            ``sqlite://agentmw.db``. The one used is checked here, opening nothing
            (:class:`agentmw.errors.ConfigurationError`). See ``docs/state.md``.
        auth: an :class:`agentmw.auth.ProtectedResource`: every face asks for a bearer token, verified once per
            request; the verified caller is the identity every face and the approvals use (docs/auth.md).
        rate_limits: :class:`agentmw.auth.RateLimit` values applied per caller to every request (HTTP 429).
        identify: who the caller is: ``identify(connection) -> str | None``, or the app's own FastAPI
            dependency for the current user (``identify=get_current_user``), solved with the request's
            headers (``docs/auth.md``).
        telemetry: an :class:`agentmw.observability.Telemetry` (or True for one with the defaults): OpenTelemetry
            traces and metrics, the Prometheus text of :attr:`metrics_app`, one log record per invocation
            (docs/observability.md). Default: off, at no cost.
        roots: directories path parameters (``RootedPath``) may name; none means no path is allowed.
        case_insensitive_paths: compare rooted paths without case (a case-insensitive file system).
        allowed_hosts: ``Host`` values accepted on every face (DNS-rebinding protection). Local names are always
            accepted, at any port; ``"api.example.com"`` is that name at the default port (none, 80 or 443),
            ``"api.example.com:8443"`` at that port, ``"api.example.com:*"`` at any; ``"*"`` accepts any host.
        allowed_origins: browser origins accepted besides those whose host is allowed and those the host app's
            ``CORSMiddleware`` lists (docs/fastapi-migration.md, "CORS, Origin and middleware order").
        secret: key that signs the MCP ``requestState``. Without one, the agent takes the one random secret
            kept in its state (made by whichever replica needs it first), so replicas sharing a store agree
            with no configuration; one given here wins.
        approver: ``(identity, approval) -> bool``: who may decide (and so read) out-of-band approvals
            (default: any authenticated caller other than the one who asked). Identities come only from
            ``identify`` or the host's authenticated ``scope["user"]``; with neither, out-of-band approval
            is off ("no approver configured").
        approvals_path: where out-of-band approvals are decided (``<approvals_path>/<id>``).
        code_version: this deploy's version stamp (a release tag, a git commit, an image digest): the journal
            records it on each execution it starts, so an execution parked on version N replays on N's path
            and a changed or removed parked function can be told apart from a lost one. Default
            ``$AGENTMW_CODE_VERSION``, else None (no stamp).
        See ``docs/limits.md`` for every limit and its default.
    """

    def __init__(
        self,
        name: str = "agentmw",
        version: str = "0.1.0",
        *,
        instructions: str | None = None,
        include: Iterable[Any] = (),
        routes: Callable[..., bool] | None = None,
        mcp: McpSettings = _MCP,
        a2a: A2ASettings | None = None,
        agui: AguiSettings = _AGUI,
        limits: Limits = _LIMITS,
        timing: Timing = _TIMING,
        budgets: Budgets | None = None,
        store: State | str | None = None,
        auth: ProtectedResource | None = None,
        rate_limits: Sequence[RateLimit] = (),
        identify: IdentifyFn | None = None,
        telemetry: Telemetry | bool | None = None,
        roots: Sequence[str] = (),
        case_insensitive_paths: bool = False,
        allowed_hosts: Sequence[str] = (),
        allowed_origins: Sequence[str] = (),
        secret: bytes | str | None = None,
        approver: Callable[[str, Any], bool] | None = None,
        approvals_path: str = "/approvals",
        code_version: str | None = None,
    ) -> None:
        self.name = name
        self.version = version
        # the deploy's version stamp, recorded on each execution by the journal (None: not stamped)
        self.code_version: str | None = code_version or os.environ.get("AGENTMW_CODE_VERSION") or None
        self.instructions = instructions
        self.mcp_settings = mcp
        self.a2a = a2a or A2ASettings()
        self.agui = agui
        self.limits = limits  # the settings; ``self.in_flight`` is the gate that counts calls against them
        self.timing = timing
        self.allowed_hosts = tuple(h.lower() for h in allowed_hosts)
        self.allowed_origins = tuple(o.rstrip("/").lower() for o in allowed_origins)
        if isinstance(secret, str):
            secret = secret.encode()
        self._secret: bytes | None = secret or None
        self._secret_given = self._secret is not None  # given: never read from the state
        self._secret_read = 0.0  # when the state's secret was last read (time.monotonic)
        self._previous_secrets: tuple[bytes, ...] = ()  # replaced lately, still accepted for checks
        self._store_spec = store
        self._state: State | None = None
        self._check_store()
        # checked here: a bad setting fails at once
        BodyShape(limits.max_body_values, limits.max_body_depth)
        # a hook, or the app's own FastAPI dependency (get_current_user)
        self.identify: IdentifyFn | None = as_identify(identify)
        self.roots = tuple(roots)
        self.case_insensitive_paths = case_insensitive_paths
        self.approver = approver
        self.approvals_path = "/" + approvals_path.strip("/")
        self.budgets: Budgets = budgets or Budgets()
        self.in_flight = InFlightLimits(
            limits.max_in_flight, self.budgets.max_parked, self.budgets.parked_bytes
        )
        # their records live in the shared state, opened on first use (never by a call that needs neither)
        self.idempotency = IdempotencyCache(
            timing.idempotency_ttl_seconds, limits.max_idempotency_keys, state=lambda: self.state
        )
        self.approvals = Approvals(limits.max_approvals, state=lambda: self.state)
        self.access: Access | None = None  # made only when auth, rate limits or a policy ask for it
        if auth is not None or rate_limits:
            self._guard(auth, rate_limits)
        self.tools: dict[str, Capability] = {}
        self.resources: dict[str, Capability] = {}
        self.templates: dict[str, Capability] = {}
        self.prompts: dict[str, Capability] = {}
        self.skills: dict[str, Capability] = {}
        # MCP skill packages (docs/skill-packages.md) by the uri of their SKILL.md; their SKILL.md is a resource
        # (listed), their other files are resources read by uri only (``_skill_files``), none of them listed
        self.skill_packages: dict[str, ServedSkill] = {}
        self._skill_files: dict[str, Capability] = {}
        self.revision = 0
        self._included_apps: list[tuple[Any, Callable[..., bool] | None]] = []
        self._bound_apps = (
            IdentityCache()
        )  # the host apps the agent has started for (an APIRouter is unhashable)
        self._listeners: set[Listener] = set()
        self._mcp: ASGIApp | None = None
        self._a2a: ASGIApp | None = None
        self._a2a_ops: Operations | None = None  # the A2A operations, once the endpoint is built
        self._agui: ASGIApp | None = None
        self._approvals_app: ASGIApp | None = None
        self._edge_guard: HostGuard | None = None  # the Host/Origin verdicts every face shares
        self._bridges: Bridges | None = None  # made by the first agent.bridge()
        self._hooks: HookChain | None = None  # made by the first agent.use()
        self.telemetry: Telemetry | None = None  # when traces, metrics and logs are on
        self._metrics_app: MetricsApp | None = None
        if telemetry:
            # 30 ms (agentmw.observability), only for an agent that asks for telemetry
            from .observability.telemetry import Telemetry

            self.use(Telemetry() if telemetry is True else telemetry)
        for item in include:
            self.include(item, routes=routes)

    # where each face lives (read by the middleware, the CLI and the auth documents) -------------------------
    @property
    def mcp_path(self) -> str:
        return self.mcp_settings.path

    @property
    def a2a_path(self) -> str:
        return self.a2a.path

    @property
    def agui_path(self) -> str:
        return self.agui.path

    # registration -----------------------------------------------------------------------------
    def add(self, kind: CapabilityKind, fn: Callable[..., Any], **options: Any) -> Capability:
        return self.register(
            build_capability(kind, fn, **{k: v for k, v in options.items() if v is not None})
        )

    def register(self, cap: Capability) -> Capability:
        """Register a capability that is already built (bridges build theirs from a peer's description)."""
        kind = cap.kind
        if kind == "tool":
            table, key = self.tools, cap.name
        elif kind == "prompt":
            table, key = self.prompts, cap.name
        elif kind == "skill":
            table, key = self.skills, cap.name
        elif cap.uri_template is not None:
            table, key = self.templates, cap.uri_template
        else:
            table, key = self.resources, cap.uri or ""
        if key in table:
            raise RegistrationError(
                f"duplicate {kind} {key!r}: {_qualname(cap.fn)} ({_where(cap.fn)}) and {_qualname(table[key].fn)} "
                f"({_where(table[key].fn)}) both have it; give one of them another name (name=...)"
            )
        table[key] = cap
        try:
            decorators.SERVED.add(cap.fn)
        except TypeError:
            pass
        if cap.policy is not None and self.access is None:
            self._guard(None, ())
        self._changed(kind)
        return cap

    def current(self, cap: Capability) -> Capability:
        """The capability registered now under ``cap``'s kind and key (one that was bound to its route since)."""
        if cap.kind == "tool":
            found = self.tools.get(cap.name)
        elif cap.kind == "prompt":
            found = self.prompts.get(cap.name)
        elif cap.kind == "skill":
            found = self.skills.get(cap.name)
        elif cap.uri_template is not None:
            found = self.templates.get(cap.uri_template)
        else:
            found = self.resources.get(cap.uri or "")
        return found if found is not None and found.fn is cap.fn else cap

    def remove(self, kind: CapabilityKind, key: str) -> None:
        table = {"tool": self.tools, "prompt": self.prompts, "skill": self.skills}.get(kind)
        if table is None:
            table = self.templates if key in self.templates else self.resources
        if table.pop(key, None) is not None:
            self._changed(kind)

    def include(self, target: Any, *, routes: Callable[..., bool] | None = None) -> None:
        """Register marked functions: one function, a module, a FastAPI/Starlette app or router.

        ``routes`` (a :class:`~agentmw.selection.RouteSelection`, or any predicate of a ``RouteInfo``) also
        serves the app's undecorated routes it selects as tools (bulk exposure, ``docs/fastapi-migration.md``).
        """
        if callable(target) and specs_of(target):
            for spec in specs_of(target):
                self._add_spec(target, spec)
            return
        if isinstance(target, types.ModuleType):
            for value in list(vars(target).values()):
                if (
                    callable(value)
                    and specs_of(value)
                    and getattr(value, "__module__", None) == target.__name__
                ):
                    self.include(value)
            return
        if getattr(target, "routes", None) is not None:
            self._included_apps.append((target, routes))
            self._include_app(target)  # the decorated handlers, with their own options, bound to their routes
            if routes is not None:
                include_routes(self, target, routes)
            return
        if isinstance(target, SkillPackage):
            self.add_skill_package(target)
            return
        raise TypeError(
            f"agent.include() takes marked functions, modules, apps or skill packages, not {target!r}"
        )

    def add_skill_package(
        self,
        package: SkillPackage,
        *,
        prefix: str = "",
        scopes: Sequence[str] | None = None,
        roles: Sequence[str] | None = None,
        rate_limit: RateLimit | None = None,
    ) -> ServedSkill:
        """Serve ``package`` as an MCP skill (SEP-2640) at ``skill://[<prefix>/]<name>/SKILL.md``.

        Its files become resources (``SKILL.md`` listed, the others read by uri). The package is one access
        decision: its ``SKILL.md`` capability carries ``scopes``, ``roles`` and ``rate_limit``, and every other
        file follows it (:attr:`agentmw.auth.Policy.follows`), so ``ProtectedResource(visible=...)`` sees the
        package (``cap.name`` is its name) whichever file is read, and the reads of all its files share one
        rate-limit budget per caller. A caller without one of ``roles`` never sees it (not in ``skills/list``
        nor ``resources/list``; ``skills/get`` and reads answer as for an unknown uri); without ``scopes``, it
        is listed but its files are refused (401/403), as a tool's call is (docs/auth.md).
        ``agent.include(package)`` is this with no options. Returns what is served (its uri and its SEP-2640
        entry).
        """
        if not isinstance(package, SkillPackage):
            raise TypeError(f"add_skill_package() takes a SkillPackage, not {package!r}")
        served = serve_package(package, prefix)
        taken = [u for u in served.files if u in self.resources or u in self._skill_files]
        if taken:
            raise SkillPackageError(
                f"skill package {package.name!r}: {taken[0]} is served already (a package of the same name "
                "and prefix, or a resource); give it another prefix= or name"
            )
        for other in self.skill_packages.values():
            # a package may live under another's path (skill://outer/inner/), not in one of its folders: a
            # folder uri then belongs to one package, so directory/read has one answer
            if served.root in other.directories or other.root in served.directories:
                inside, around = (served, other) if served.root in other.directories else (other, served)
                raise SkillPackageError(
                    f"skill package {package.name!r}: {inside.root}/ would be a folder of the package at "
                    f"{around.uri} as well; give it another prefix= or name"
                )
        options: dict[str, Any] = {"scopes": scopes, "roles": roles, "rate_limit": rate_limit}
        options = {k: v for k, v in options.items() if v is not None}
        main_file = served.files[served.uri]
        main = build_capability(
            "resource",
            _skill_reader(main_file),
            name=package.name,
            contract=package.description,
            uri=served.uri,
            mime_type=main_file.mime_type,
            **options,
        )
        files: dict[str, Capability] = {}
        for uri, file in served.files.items():
            if uri == served.uri:
                continue
            cap = build_capability(
                "resource",
                _skill_reader(file),
                name=file.path,
                contract="",
                uri=uri,
                mime_type=file.mime_type,
            )
            cap.policy = follow(main)  # the package's decision, not one of its own
            files[uri] = cap
        self.skill_packages[served.uri] = served
        self._skill_files.update(files)
        if options and self.access is None:
            self._guard(None, ())
        self.register(main)  # listed in resources/list, as the SEP asks; one list change
        return served

    def _include_app(self, app: Any) -> None:
        """The marked handlers of an app or router. A FastAPI route's handler is bound to its route, so an agent
        call goes through the app as HTTP would (``_dispatch.py``)."""

        done: set[int] = set()
        for route, _prefix in iter_host_routes(app):
            endpoint = route.endpoint
            if id(endpoint) in done or not specs_of(endpoint):
                continue
            done.add(id(endpoint))
            host = host_route_of(app, endpoint)
            for spec in specs_of(endpoint):
                self._add_spec(endpoint, spec, route=host)
        self._include_plain(app, done)

    def _include_plain(self, app: Any, done: set[int]) -> None:
        """Marked plain Starlette endpoints (mounted apps' included), served as functions."""
        for route in getattr(app, "routes", None) or ():
            endpoint = getattr(route, "endpoint", None)
            nested = getattr(route, "app", None)
            if (
                endpoint is None
                and nested is not None
                and nested is not app
                and getattr(nested, "routes", None) is not None
            ):
                self._include_plain(nested, done)
            elif (
                endpoint is not None
                and getattr(route, "dependant", None) is None
                and specs_of(endpoint)
                and id(endpoint) not in done
            ):
                done.add(id(endpoint))
                self.include(endpoint)

    def bound_to(self, app: Any) -> bool:
        """Whether the agent has started serving for the host ``app`` (:meth:`bind_host` ran for it)."""
        return app in self._bound_apps

    def bind_host(self, app: Any) -> None:
        """Start serving for the host ``app`` (its first request): find the marked handlers of routes included
        after the agent was built, bind handlers included as functions to their routes, and log what each face
        serves. Done once per app."""
        if app in self._bound_apps:
            return
        self._bound_apps.set(app, True)
        if getattr(app, "routes", None) is None:
            return

        route_table(app, fresh=True)
        for included, selection in list(self._included_apps):
            if selection is not None:
                self._include_app(included)
                include_routes(self, included, selection)
        self._include_app(app)

        log_served(self, app)

    def _add_spec(self, fn: Callable[..., Any], spec: CapabilitySpec, route: Any = None) -> None:
        options = dict(spec.options)
        if spec.kind == "tool":
            name = str(options.get("name") or getattr(fn, "__name__", ""))
            existing = self.tools.get(name)
            if existing is not None and existing.fn is fn:
                if route is None or existing.route is not None:
                    return
                self.tools.pop(name)  # included as a function first: now bound to its route
        elif route is not None:
            for table in (self.prompts, self.skills, self.resources, self.templates):
                for key, cap in list(table.items()):
                    if cap.fn is fn and cap.kind == spec.kind:
                        if cap.route is not None:
                            return
                        table.pop(key)
        if route is not None:
            options["route"] = route
        self.add(spec.kind, fn, **options)

    def _registering(
        self, mark: Callable[..., Any], fn: Any, args: tuple[Any, ...], options: dict[str, Any]
    ) -> Any:
        """Apply the module-level decorator ``mark``, then register what it marked with this agent."""

        def register(f: F) -> F:
            mark(*args, **options)(f)
            self._add_spec(f, specs_of(f)[-1])
            return f

        return register(fn) if fn is not None else register

    def tool(self, fn: Any = None, /, **options: Any) -> Any:
        """``@agent.tool``: like :func:`agentmw.tool`, registered with this agent at once."""
        return self._registering(decorators.tool, fn, (), options)

    def resource(self, uri: str, **options: Any) -> Callable[[F], F]:
        """``@agent.resource(uri)``: like :func:`agentmw.resource`, registered at once."""
        register: Callable[[F], F] = self._registering(decorators.resource, None, (uri,), options)
        return register

    def prompt(self, fn: Any = None, /, **options: Any) -> Any:
        """``@agent.prompt``: like :func:`agentmw.prompt`, registered at once."""
        return self._registering(decorators.prompt, fn, (), options)

    def skill(self, fn: Any = None, /, **options: Any) -> Any:
        """``@agent.skill``: like :func:`agentmw.skill`, registered at once."""
        return self._registering(decorators.skill, fn, (), options)

    def _guard(self, auth: Any, rate_limits: Sequence[Any]) -> None:
        """Make ``self.access`` (docs/auth.md); a protected resource's verified caller is then the identity."""

        if auth is not None:
            if self.identify is not None:
                raise ValueError(
                    "Agent(auth=...) decides who the caller is: drop identify=, or map the verified "
                    "caller with ProtectedResource(identity=...)"
                )
            auth.bind(self)
            self.identify = auth.identify
        self.access = Access(self, auth, rate_limits)

    # hooks ------------------------------------------------------------------------------------------
    def use(self, hook: Any) -> Any:
        """Run ``hook`` around every invocation, on every face: ``before`` (may deny), ``after`` (sees the
        outcome), ``listing`` (may filter what a caller is shown) and ``stage`` (docs/observability.md).
        An :class:`agentmw.observability.Telemetry` becomes the agent's telemetry and runs outermost.
        Returns the hook."""

        # 30 ms (agentmw.observability, hooks and telemetry together): an agent without hooks never loads it
        from .observability.hooks import HookChain
        from .observability.telemetry import Telemetry

        if self._hooks is None:
            self._hooks = HookChain()
        if isinstance(hook, Telemetry):
            if self.telemetry is not None and self.telemetry is not hook:
                raise ValueError("this agent already has a Telemetry")
            self.telemetry = hook
            hook.bind(self)
            self._hooks.add(hook, first=True)
        else:
            self._hooks.add(hook)
        return hook

    @property
    def hooks(self) -> HookChain | None:
        """The hooks :meth:`use` added, outermost first (None until the first one: the pipeline then has no
        hooks stage)."""
        return self._hooks

    def shown(self, kind: str, protocol: str, items: list[Any], scope: Any, caller: str | None) -> list[Any]:
        """A list as the listing hooks leave it (``items`` itself when no hook filters)."""
        hooks = self._hooks
        if hooks is None or not hooks.filters:
            return items
        return hooks.listing(kind, protocol, items, scope, caller)

    @property
    def metrics_app(self) -> ASGIApp:
        """The Prometheus text of the agent's metrics (``GET``), as a bare ASGI app to mount where you choose,
        e.g. ``app.mount("/metrics", agent.metrics_app)``; needs ``Agent(telemetry=...)``."""
        if self.telemetry is None:
            raise RuntimeError(
                "agent.metrics_app needs telemetry: Agent(telemetry=True) or agent.use(Telemetry())"
            )
        if self._metrics_app is None:
            from .observability.metrics import MetricsApp  # loaded with the telemetry that must exist here

            self._metrics_app = MetricsApp(self.telemetry)
        return self._metrics_app

    # bridges ----------------------------------------------------------------------------------------
    def bridge(self, peer: Any) -> Any:
        """Serve a remote A2A agent or MCP server as capabilities of this agent (docs/bridges.md).

        ``agent.bridge(A2APeer(url, version="1.0"))``, ``agent.bridge(McpPeer(url, revision="2026-07-28"))``.
        Nothing is connected here: the first request to a face (or :meth:`start_bridges`) connects the peer,
        checks the protocol version it offers, and registers its capabilities. Returns the peer.
        """
        if self._bridges is None:
            from .bridges._peer import Bridges  # 8 ms, for an agent that bridges a peer

            self._bridges = Bridges(self)
            # endpoints made before the first bridge start the bridges too
            self._mcp, self._a2a, self._agui = (
                self._bridges.gate(app) if app is not None else None
                for app in (self._mcp, self._a2a, self._agui)
            )
        return self._bridges.add(peer)

    async def start_bridges(self) -> None:
        """Connect every bridged peer not connected yet and register its capabilities; raises the first failure
        (:class:`agentmw.bridges.VersionMismatch` names both versions). Optional: the first request does it."""
        if self._bridges is not None:
            await self._bridges.start()

    @property
    def bridged_peers(self) -> Sequence[Peer]:
        """The peers :meth:`bridge` added (their breakers are what telemetry's gauge reads)."""
        return self._bridges.peers if self._bridges is not None else ()

    def _gated(self, app: Any) -> Any:
        return app if self._bridges is None else self._bridges.gate(app)

    # change notifications -------------------------------------------------------------------------
    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call ``listener(event, data)`` on list changes and resource updates; returns an unsubscriber."""
        self._listeners.add(listener)
        return lambda: self._listeners.discard(listener)

    def _emit(self, event: str, data: Mapping[str, Any]) -> None:
        for listener in list(self._listeners):
            listener(event, data)

    def _changed(self, kind: str) -> None:
        self.revision += 1
        plural = {"tool": "tools", "prompt": "prompts", "resource": "resources", "skill": "skills"}[kind]
        self._emit(f"{plural}/list_changed", {})

    def resource_updated(self, uri: str) -> None:
        """Tell subscribed clients that the resource at ``uri`` changed."""
        self._emit("resources/updated", {"uri": uri})

    def find_resource(self, uri: str) -> tuple[Capability, dict[str, str]] | None:
        cap = self.resources.get(uri) or self._skill_files.get(uri)
        if cap is not None:
            return cap, {}
        for template in self.templates.values():
            variables = template.match_uri(uri)
            if variables is not None:
                return template, variables
        return None

    # serving --------------------------------------------------------------------------------
    @property
    def state(self) -> State:
        """The shared state (``agentmw.state``), opened on first use, never at import or start-up.

        ``Agent(store=...)`` takes a :class:`agentmw.state.State` or a URL (``memory://``,
        ``sqlite:///path``, ``redis://host:port/db``); without one, ``$AGENTMW_STORE``, else
        ``sqlite://agentmw.db``: the embedded default, shared by the worker processes of one machine.
        """
        if self._state is None:
            self._state = open_state(self.store_spec)
        return self._state

    @property
    def store_spec(self) -> State | str:
        """The store :attr:`state` opens (or opened): the one given as ``Agent(store=...)``, else
        ``$AGENTMW_STORE``, else the default (``sqlite://agentmw.db``)."""
        return self._store_spec or os.environ.get("AGENTMW_STORE") or DEFAULT_STORE

    def _check_store(self) -> None:
        """Refuse, now, a store that cannot be opened (its URL's form, a SQLite folder that does not exist or
        is not writable, a missing extra), naming where it came from; nothing is created or opened here."""

        if self._store_spec:
            check_store(self._store_spec, label="Agent(store=...)")
        elif os.environ.get("AGENTMW_STORE"):
            check_store(os.environ["AGENTMW_STORE"], label="$AGENTMW_STORE")
        else:
            check_store(
                DEFAULT_STORE, label="the default store (give Agent(store=...) or set $AGENTMW_STORE)"
            )

    @property
    def secret(self) -> bytes:
        """The key that signs MCP ``requestState``: the one given, else the state's (read by
        :meth:`signing_secret`, which must have run once; RuntimeError before)."""
        if self._secret is None:
            raise RuntimeError("the agent's secret is kept in its state: await agent.signing_secret() first")
        return self._secret

    @secret.setter
    def secret(self, value: bytes | str) -> None:
        self._secret = value.encode() if isinstance(value, str) else value
        self._secret_given = True
        self._previous_secrets = ()

    @property
    def secret_known(self) -> bool:
        """Whether :attr:`secret` can be read without the state."""
        return self._secret is not None

    @property
    def verification_secrets(self) -> tuple[bytes, ...]:
        """The keys a ``requestState`` may be signed with: :attr:`secret`, then the ones it replaced lately (the
        state's secret changed after a store wipe: what was signed before still checks, for a while)."""
        return (self.secret, *self._previous_secrets)

    async def signing_secret(self) -> bytes:
        """The secret, reading it from the state the first time when none was given: one random secret per
        store, made by whichever process asks first (``set_if_absent``), so every replica sharing the store
        signs and checks with the same one.

        Read again every ``_SECRET_RECHECK`` seconds (and by :meth:`refresh_secret`), so replicas converge on
        one secret after the store lost it (a Redis ``FLUSHALL``, a new file): a replica that finds the key gone
        writes the secret it holds back (``set_if_absent``; every replica holding the same one, whichever wins
        changes nothing), and one that finds another adopts it, still accepting its old one for checks. A store
        that cannot be read then keeps the secret held."""
        if self._secret is None or (
            not self._secret_given and time.monotonic() - self._secret_read > _SECRET_RECHECK
        ):
            try:
                await self._agree_secret()
            except StoreUnavailable:
                if self._secret is None:
                    raise
                logger.debug(
                    "agentmw: the requestState secret could not be checked now; the one held is kept"
                )
        assert self._secret is not None
        return self._secret

    async def refresh_secret(self, min_age: float = 1.0) -> bool:
        """Read the state's secret again now (unless it was read less than ``min_age`` seconds ago), as
        :meth:`signing_secret` does from time to time; True when it changed (a ``requestState`` that failed its
        check may pass now)."""
        if self._secret_given or time.monotonic() - self._secret_read < min_age:
            return False
        held = self._secret
        try:
            await self._agree_secret()
        except StoreUnavailable:
            if held is None:
                raise
            return False  # the store cannot be read now: the secret held stays
        return self._secret != held

    async def _agree_secret(self) -> None:
        state = self.state
        state.limit(_SECRET_NS, StoreLimits(max_count=16, max_age=_SECRET_TTL))
        held = self._secret
        while True:
            found = await state.get_key(_SECRET_NS, "requestState")
            if found is None:
                made = {"secret": held.hex() if held is not None else secrets.token_hex(32)}
                if await state.set_if_absent(_SECRET_NS, "requestState", made, _SECRET_TTL):
                    found = made
                    if held is not None:
                        logger.warning(
                            "agentmw: the requestState secret was gone from the store (wiped?); "
                            "this replica wrote back the one it holds"
                        )
                else:
                    continue  # another process made it first: read theirs
            break
        current = bytes.fromhex(found["secret"])
        self._secret_read = time.monotonic()
        if held is not None and current != held:
            logger.warning("agentmw: the requestState secret in the store changed; this replica adopts it")
            self._previous_secrets = (held, *self._previous_secrets)[:_PREVIOUS_SECRETS]
        self._secret = current

    async def aclose(self) -> None:
        """Stop this process's face work, as a replica that shuts down: its AG-UI runs are handed over (their
        leases given up, the runs not ended, so another replica goes on at once) and its A2A tasks' background
        work stops. Each failure is logged; the state store stays open (it may be the app's)."""
        lifecycle = getattr(self._agui, "lifecycle", None) if self._agui is not None else None
        tasks = getattr(self._a2a_ops, "tasks", None) if self._a2a_ops is not None else None
        for part in (lifecycle, tasks):
            close = getattr(part, "close", None)
            if close is None:
                continue
            try:
                await close()
            except Exception:
                logger.exception("agentmw: closing %s failed", type(part).__name__)

    def host_allowed(self, host: str) -> bool:
        """Whether a ``Host`` value is served here (the port compared as ``_edge.py`` documents)."""

        return host_allowed(host, self.allowed_hosts)

    def origin_allowed(self, origin: str) -> bool:
        """Whether an ``Origin`` passes on the agent's own settings (the host app's CORS list is the edge's)."""

        return origin_allowed(origin, self.allowed_hosts, self.allowed_origins)

    def _edged(self, app: Any, render: Any, *, body_limit: int | None = None, **rules: Any) -> Any:
        """``app`` behind the one HTTP edge every face shares (``_edge.py``): Host, Origin, Content-Type, size."""

        if self._edge_guard is None:
            self._edge_guard = HostGuard(self)
        return Edge(
            app,
            self._edge_guard,
            render,
            body_limit=body_limit or self.limits.max_body_bytes,
            **rules,
        )

    @property
    def mcp(self) -> ASGIApp:
        """The MCP endpoint as a bare ASGI app (serves only the MCP path)."""
        if self._mcp is None:
            # 110 ms (the MCP face, its sessions and their lifecycle), when the MCP face is first served
            from .mcp.endpoint import McpEndpoint, refuse
            from .mcp.handshake import SessionStore

            endpoint = McpEndpoint(
                self, self.mcp_settings, self.limits, self.timing, sessions=SessionStore(self)
            )
            self._mcp = self._gated(self._edged(endpoint, refuse, json_posts=True, content_type_status=400))
        return self._mcp

    @property
    def a2a_app(self) -> ASGIApp:
        """The A2A endpoint as a bare ASGI app (the card, JSON-RPC and HTTP+JSON bindings)."""
        if self._a2a is None:
            # 90 ms (the A2A face, its tasks and their lifecycle), when the A2A face is first served
            from .a2a.endpoint import A2AEndpoint
            from .a2a.operations import Operations

            self._a2a_ops = Operations(self)
            endpoint = A2AEndpoint(self, self.a2a, self.limits, ops=self._a2a_ops)
            self._a2a = self._gated(self._edged(endpoint, edge_refusal(self.a2a.path)))
        return self._a2a

    @property
    def push_sender(self) -> PushSender | None:
        """The A2A push sender of this process (its delivery counts are telemetry's gauges): None until the A2A
        endpoint is built, and with ``A2ASettings(push=None)``."""
        return self._a2a_ops.push if self._a2a_ops is not None else None

    @property
    def agui_app(self) -> ASGIApp:
        """The AG-UI endpoint as a bare ASGI app (one agent per skill under ``agui_path``)."""
        if self._agui is None:
            # 85 ms (the AG-UI face, its runs and their lifecycle), when the AG-UI face is first served
            from .agui.endpoint import AguiEndpoint
            from .agui.runs import Runs

            endpoint = AguiEndpoint(self, self.agui, self.limits, lifecycle=Runs(self))
            self._agui = self._gated(self._edged(endpoint, detail_refusal))
        return self._agui

    @property
    def approvals_app(self) -> ASGIApp:
        """The out-of-band approvals endpoint as a bare ASGI app."""
        if self._approvals_app is None:
            self._approvals_app = self._edged(
                ApprovalsEndpoint(self), detail_refusal, body_limit=MAX_DECISION_BYTES
            )
        return self._approvals_app

    def asgi(self) -> ASGIApp:
        """An ASGI app that serves only the agent's paths; mount it with ``app.mount(prefix, ...)``."""

        return AgentMiddleware(None, agent=self)

    def routes(self) -> list[Any]:
        """Starlette routes for the agent's paths, for ``Router(routes=...)`` or a Starlette app."""

        # Routes, not Mounts, under a prefix: a Mount moves the prefix into root_path, and each face reads its
        # paths (/agui/<skill>, /a2a/message:send) relative to where the agent itself is mounted.
        return [
            Route(self.mcp_path, endpoint=self.mcp, methods=None, name="agentmw-mcp"),
            Route("/.well-known/agent-card.json", endpoint=self.a2a_app, methods=None, name="agentmw-card"),
            Route("/.well-known/agent.json", endpoint=self.a2a_app, methods=None, name="agentmw-card-v02"),
            Route(self.a2a_path, endpoint=self.a2a_app, methods=None, name="agentmw-a2a"),
            Route(
                self.a2a_path + "/{rest:path}", endpoint=self.a2a_app, methods=None, name="agentmw-a2a-rest"
            ),
            Route(self.agui_path + "/{rest:path}", endpoint=self.agui_app, methods=None, name="agentmw-agui"),
            Route(
                self.approvals_path + "/{rest:path}",
                endpoint=self.approvals_app,
                methods=None,
                name="agentmw-approvals",
            ),
            *self._well_known_routes(),
        ]

    def _well_known_routes(self) -> list[Any]:
        """The auth documents (docs/auth.md): protected resource metadata and the push JWKS."""

        app = WellKnown(self)
        return [
            Route("/.well-known/oauth-protected-resource", endpoint=app, methods=None, name="agentmw-prm"),
            Route(
                "/.well-known/oauth-protected-resource/{path:path}",
                endpoint=app,
                methods=None,
                name="agentmw-prm-path",
            ),
            Route(JWKS_PATH, endpoint=app, methods=None, name="agentmw-jwks"),
        ]

    def router(self) -> Any:
        """A FastAPI ``APIRouter`` with the agent's paths, for ``app.include_router(agent.router())``."""
        from fastapi import APIRouter

        router = APIRouter()
        router.routes.extend(self.routes())
        return router
