"""Who may see and call what: per-capability scopes and roles, per-caller visibility, and rate limits.

:class:`Access` is the agent's gatekeeper (``agent.access``), made only when the agent has a
:class:`~agentmw.auth.ProtectedResource`, rate limits, or a capability with a :class:`Policy`; without any,
``agent.access`` is None and no face or pipeline step does any work for it.

The rule, the same on every face:

- a capability whose ``roles`` the caller has none of, or that ``ProtectedResource(visible=...)`` refuses, is
  **hidden**: absent from every list (``tools/list``, resources, prompts, the A2A card, AG-UI) and answered
  exactly like an unknown one;
- a capability whose ``scopes`` the token does not grant is listed (so a client can learn it needs more and
  step up; ``hide_missing_scopes=True`` hides it instead); calling it is refused before anything else runs
  (before roots and gates): 401 without a token, 403 ``insufficient_scope`` naming the scopes with one.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from starlette.requests import HTTPConnection

from ..content import Text
from ..errors import AccessRefused
from ..identity import UNVERIFIED_PREFIX, Forbidden, IdentifyFn, Unauthenticated, resolve_caller
from ..outcomes import Code, Outcome, Status
from .errors import InsufficientScope, RateLimited
from .principal import PRINCIPAL_KEY, Principal, principal_of
from .ratelimit import Limiter, RateLimit
from .resource import FACE_KEY, Protects

if TYPE_CHECKING:
    from ..capability import Capability
    from .resource import ProtectedResource

__all__ = ["DENIALS", "Access", "AccessAgent", "Policy", "authorize", "denial", "follow", "policy_of"]

DENIALS = frozenset({Code.UNAUTHENTICATED, Code.INSUFFICIENT_SCOPE, Code.FORBIDDEN})
"""Outcome codes of a refused caller: on MCP they are HTTP 401/403, not tool results."""


class AccessAgent(Protects, Protocol):
    """What :class:`Access` reads of the agent: its capabilities (as a protected resource reads them), their
    revision, the caller's identity hook, the shared state (for rate limits), the A2A card settings, and its
    gatekeeper."""

    @property
    def state(self) -> Any: ...
    @property
    def identify(self) -> IdentifyFn | None: ...
    @property
    def revision(self) -> int: ...
    @property
    def access(self) -> Access | None: ...


class _Call(Protocol):
    """What :func:`authorize` reads of the call's context."""

    @property
    def request(self) -> HTTPConnection | None: ...
    @property
    def agent(self) -> AccessAgent | None: ...
    @property
    def caller(self) -> str | None: ...


@dataclass(frozen=True, slots=True)
class Policy:
    """What a capability asks of its caller: every one of ``scopes``, any one of ``roles``, and a rate limit."""

    scopes: frozenset[str]
    scope_list: tuple[str, ...]
    roles: frozenset[str]
    rate_limit: RateLimit | None
    follows: Capability | None = None
    """The capability whose access decision this one takes instead of its own (its roles, scopes, visibility
    rule and rate-limit budget): a skill package's files follow its ``SKILL.md``, so the package is one
    decision wherever a file of it is read (docs/skill-packages.md)."""


def follow(capability: Capability) -> Policy:
    """The policy of a capability decided as ``capability`` is (:attr:`Policy.follows`)."""
    return Policy(frozenset(), (), frozenset(), None, capability)


def _decider(capability: Capability) -> Capability:
    """The capability whose rules decide for ``capability``: itself, or the one it follows."""
    policy = capability.policy
    if policy is not None and policy.follows is not None:
        return policy.follows
    return capability


def policy_of(
    scopes: Sequence[str] | None = None,
    roles: Sequence[str] | None = None,
    rate_limit: RateLimit | None = None,
) -> Policy | None:
    """The policy of ``@tool(scopes=..., roles=..., rate_limit=...)``; None when it asks nothing."""
    if isinstance(scopes, str) or isinstance(roles, str):
        raise TypeError("scopes and roles are lists of strings, e.g. scopes=['orders:write']")
    scope_list = tuple(dict.fromkeys(scopes or ()))
    if not scope_list and not roles and rate_limit is None:
        return None
    if rate_limit is not None and not isinstance(rate_limit, RateLimit):
        raise TypeError(f"rate_limit takes an agentmw.auth.RateLimit, not {rate_limit!r}")
    return Policy(frozenset(scope_list), scope_list, frozenset(roles or ()), rate_limit)


def _kind(capability: Capability) -> str:
    return capability.kind


def _unknown(capability: Capability) -> str:
    """The words a face uses for a name it does not serve."""
    name = capability.uri or capability.uri_template or capability.name
    return f"Unknown {_kind(capability)}: {name}"


class Access:
    """The agent's gatekeeper: the face entries, visibility, and the pipeline's check."""

    def __init__(
        self,
        agent: AccessAgent,
        resource: ProtectedResource | None = None,
        rate_limits: Iterable[RateLimit] = (),
    ) -> None:
        self.agent = agent
        self.resource = resource
        self.rate_limits = tuple(rate_limits)
        self.limiter = Limiter(lambda: agent.state)
        self._lists: OrderedDict[tuple[Any, ...], list[Any]] = OrderedDict()

    # --- the face entry -------------------------------------------------------------------------------
    async def admit(self, scope: MutableMapping[str, Any], face: str) -> Principal | None:
        """Let a request into a face, or raise: 401 (no or a bad token), 403 (without the resource's scopes),
        429 (a rate limit). Returns the caller."""
        resource = self.resource
        principal = None
        if resource is not None:
            scope[FACE_KEY] = (
                face  # the identify hook reads it: a face not in ``faces`` serves anonymous callers
            )
            principal = await resource.authenticate(scope)
            if face in resource.faces:
                if principal is None:
                    if not resource.anonymous:
                        raise Unauthenticated(
                            "Authentication required: send a bearer token",
                            challenge=resource.challenge(scope),
                        )
                elif resource.required:
                    missing = principal.missing(resource.required)
                    if missing:
                        raise self._insufficient(
                            scope, f"This server needs the scope(s) {_names(missing)}", missing
                        )
        else:
            principal = principal_of(scope)
        if self.rate_limits:
            caller = await self._caller(scope, principal)
            for limit in self.rate_limits:
                wait = await self.limiter.take(limit, "requests" if limit.shared else f"requests|{caller}")
                if wait is not None:
                    raise RateLimited(
                        f"Rate limit of {limit.describe()} reached; retry after {wait:.0f} s",
                        retry_after=wait,
                    )
        return principal

    async def _caller(self, scope: MutableMapping[str, Any], principal: Principal | None) -> str:
        if principal is not None:
            return principal.identity
        return rate_key(await resolve_caller(HTTPConnection(scope), self.agent.identify), scope)

    def _insufficient(
        self, scope: Mapping[str, Any], message: str, scopes: Iterable[str]
    ) -> InsufficientScope:
        scopes = sorted(scopes)
        resource = self.resource
        challenge = (
            resource.challenge(scope, error="insufficient_scope", description=message, scopes=scopes)
            if resource is not None
            else f'Bearer error="insufficient_scope", scope="{" ".join(scopes)}"'
        )
        return InsufficientScope(message, scopes=scopes, challenge=challenge)

    def _unauthenticated(
        self, scope: Mapping[str, Any], message: str, scopes: Iterable[str] = ()
    ) -> Unauthenticated:
        resource = self.resource
        challenge = resource.challenge(scope, scopes=scopes) if resource is not None else "Bearer"
        return Unauthenticated(message, challenge=challenge)

    # --- visibility ---------------------------------------------------------------------------------------
    def hides(self, capability: Capability, scope: Mapping[str, Any] | None) -> bool:
        """Whether ``capability`` is hidden from this request's caller (answered as unknown)."""
        capability = _decider(capability)
        policy = capability.policy
        resource = self.resource
        if policy is None and (resource is None or resource.visible is None):
            return False
        principal = principal_of(scope)
        return not self._visible(capability, principal)

    def _visible(self, capability: Capability, principal: Principal | None) -> bool:
        capability = _decider(capability)
        policy = capability.policy
        resource = self.resource
        if policy is not None:
            if policy.roles and (principal is None or not policy.roles & principal.roles):
                return False
            if (
                policy.scopes
                and resource is not None
                and resource.hide_missing_scopes
                and (principal is None or principal.missing(policy.scopes))
            ):
                return False
        if resource is not None and resource.visible is not None:
            return bool(resource.visible(principal, capability))
        return True

    def visible_list(
        self, kind: str, items: list[dict[str, Any]], scope: Mapping[str, Any]
    ) -> list[dict[str, Any]]:
        """One of the lists (``tools``, ``resources``, ``templates``, ``prompts``, ``skills``) as this caller
        may see it; cached per registry revision and per caller's roles and scopes (bounded)."""
        principal = principal_of(scope)
        resource = self.resource
        if principal is None:
            who: Any = None
        elif resource is not None and resource.visible is not None:
            who = principal.identity  # a rule of the app's own may read anything about the caller
        else:
            who = (principal.roles, principal.scopes)
        key = (kind, self.agent.revision, who)
        found = self._lists.get(key)
        if found is not None and found[0] is items:
            self._lists.move_to_end(key)
            return found[1]  # type: ignore[no-any-return]
        table, field = _TABLES[kind]
        caps = getattr(self.agent, table)
        shown = [
            item for item in items if (cap := caps.get(item[field])) is None or self._visible(cap, principal)
        ]
        self._lists[key] = [items, shown]
        while len(self._lists) > 256:
            self._lists.popitem(last=False)
        return shown

    # --- A2A and AG-UI ---------------------------------------------------------------------------------
    def check_call(self, capability: Capability, scope: Mapping[str, Any] | None) -> None:
        """Before a face starts a run of ``capability``: raise as the face should answer (hidden: the caller's
        LookupError, named by the face; a missing scope: 401 or 403 with the challenge)."""
        if scope is None:
            return
        capability = _decider(capability)
        principal = principal_of(scope)
        policy = capability.policy
        if policy is None or not policy.scopes:
            return
        missing = policy.scopes if principal is None else principal.missing(policy.scopes)
        if not missing:
            return
        if principal is None:
            raise self._unauthenticated(
                scope,
                f"Authentication required: {_kind(capability)} {capability.name} "
                f"needs the scope(s) {_names(missing)}",
                missing,
            )
        raise self._insufficient(
            scope,
            f"Insufficient scope: {_kind(capability)} {capability.name} needs the scope(s) {_names(missing)}",
            missing,
        )

    async def admit_skill(
        self, scope: MutableMapping[str, Any], skill: Capability | None, *, run: bool
    ) -> Capability | None:
        """AG-UI: let the request in (:meth:`admit`); the skill, or None when this caller may not see it; before a
        run, a missing scope raises 401 or 403."""
        await self.admit(scope, "agui")
        if skill is None or self.hides(skill, scope):
            return None
        if run:
            self.check_call(skill, scope)
        return skill

    async def identify_softly(self, scope: MutableMapping[str, Any]) -> None:
        """Tell who calls a listing anyone may read (the A2A card) without refusing anyone: a bad, doubled or
        uncheckable token or a foreign Host is not an error here, such a caller sees what anonymous callers
        see. Then :meth:`visible_list` filters for the caller."""
        if self.resource is not None and PRINCIPAL_KEY not in scope:
            try:
                await self.resource.authenticate(scope)
            except AccessRefused:
                scope[PRINCIPAL_KEY] = None


def rate_key(caller: str | None, scope: Mapping[str, Any]) -> str:
    """Who a rate limit counts: a verified or host-authenticated caller by identity; an anonymous one, or one
    whose credential nobody verified (the hashed ``Authorization`` of :func:`~agentmw.identity.resolve_caller`,
    which a client can make up anew per request), by client address (so every caller behind one proxy counts
    as one)."""
    if caller and caller != "anonymous" and not caller.startswith(UNVERIFIED_PREFIX):
        return caller
    client = scope.get("client") or ("", 0)
    return f"anonymous@{client[0]}"


_TABLES = {
    "tools": ("tools", "name"),
    "resources": ("resources", "uri"),
    "templates": ("templates", "uriTemplate"),
    "prompts": ("prompts", "name"),
    "skills": ("skills", "id"),
}


def _names(scopes: Iterable[str]) -> str:
    return ", ".join(sorted(scopes))


# --- the pipeline's step ---------------------------------------------------------------------------------
async def authorize(capability: Capability, ctx: _Call) -> Outcome | None:
    """The pipeline's authorization (after validation, before idempotency, roots and the gate): None when the
    call may go on, else the outcome that refuses it. A call with no HTTP request (in-process, or a replica
    replaying a task it took over) was authorized when it started, and is not checked again."""
    request = ctx.request
    agent = ctx.agent
    if request is None or agent is None:
        return None
    access = agent.access
    scope = request.scope
    principal = await _principal(access, scope)
    capability = _decider(capability)  # one decision, and one rate-limit budget, for all that follow it
    policy = capability.policy
    if policy is None:
        if access is not None and access.hides(capability, scope):
            return Outcome(status=Status.REJECTED, code=Code.NOT_FOUND, message=_unknown(capability))
        return None
    if access is not None and not access._visible(capability, principal):
        return Outcome(status=Status.REJECTED, code=Code.NOT_FOUND, message=_unknown(capability))
    if policy.scopes:
        missing = policy.scopes if principal is None else principal.missing(policy.scopes)
        if missing:
            what = f"{_kind(capability)} {capability.name} needs the scope(s) {_names(missing)}"
            if principal is None:
                return Outcome(
                    status=Status.REJECTED,
                    code=Code.UNAUTHENTICATED,
                    message=f"Authentication required: {what}",
                    data={"scopes": sorted(missing)},
                )
            return Outcome(
                status=Status.REJECTED,
                code=Code.INSUFFICIENT_SCOPE,
                message=f"Insufficient scope: {what}",
                data={"scopes": sorted(missing)},
            )
    limit = policy.rate_limit
    if limit is not None:
        limiter = access.limiter if access is not None else Limiter(lambda: agent.state)
        who = (
            "*"
            if limit.shared
            else rate_key(principal.identity if principal is not None else ctx.caller, scope)
        )
        wait = await limiter.take(limit, f"{capability.kind}:{capability.name}|{who}")
        if wait is not None:
            message = f"Rate limit of {limit.describe()} for {capability.name} reached"
            return Outcome(
                status=Status.FAILED,
                content=[Text(f"{message}. Retry after {wait:.0f} seconds.")],
                message=message,
                retryable=True,
                retry_after=round(wait, 3),
                code=Code.RATE_LIMITED,
            )
    return None


async def _principal(access: Access | None, scope: MutableMapping[str, Any]) -> Principal | None:
    if access is not None and access.resource is not None and PRINCIPAL_KEY not in scope:
        try:
            return await access.resource.authenticate(scope)
        except Unauthenticated:
            return None
    return principal_of(scope)


def denial(agent: AccessAgent, outcome: Outcome, scope: Mapping[str, Any]) -> Exception:
    """The HTTP-level refusal (401 or 403, with its challenge) for an outcome whose code is in ``DENIALS``:
    raised by MCP, where a refused caller is an HTTP answer, not a tool result."""
    data = outcome.data if isinstance(outcome.data, dict) else {}
    scopes = data.get("scopes") or ()
    access = agent.access
    if outcome.code == Code.UNAUTHENTICATED:
        if access is not None and access.resource is not None:
            return access._unauthenticated(scope, outcome.message, scopes)
        return Unauthenticated(outcome.message, challenge=data.get("challenge") or "Bearer")
    if outcome.code == Code.INSUFFICIENT_SCOPE and scopes:
        if access is None:
            access = Access(agent)
        return access._insufficient(scope, outcome.message, scopes)
    return Forbidden(outcome.message)


def host_denial(exc: BaseException) -> Outcome | None:
    """A host dependency's ``HTTPException(401 | 403)`` (FastAPI ``Security(...)``) as a refusal of the caller,
    keeping its text and its own ``WWW-Authenticate``; None for anything else."""
    status = getattr(exc, "status_code", None)
    if status not in (401, 403) or type(exc).__name__ != "HTTPException":
        return None
    detail = getattr(exc, "detail", "") or ""
    text = f"HTTP {status}: {detail}".rstrip(": ")
    headers = getattr(exc, "headers", None) or {}
    challenge = next((v for k, v in headers.items() if k.lower() == "www-authenticate"), None)
    return Outcome(
        status=Status.REJECTED,
        content=[Text(text)],
        message=text,
        code=Code.UNAUTHENTICATED if status == 401 else Code.FORBIDDEN,
        data={"status": status, "detail": str(detail), "challenge": challenge},
    )
