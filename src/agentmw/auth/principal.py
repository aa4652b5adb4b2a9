"""The verified caller: who a token names, what it grants, and where every face finds it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from starlette.authentication import BaseUser

__all__ = ["PRINCIPAL_KEY", "Principal", "principal_of", "scopes_of_claims", "split_spaced"]

PRINCIPAL_KEY = "agentmw.principal"
"""Where the verified :class:`Principal` (or None, for an anonymous caller) is kept in the ASGI scope."""


class Principal(BaseUser):
    """A caller whose token was verified: its subject, the scopes it grants, its roles and every claim.

    It is a Starlette user (``request.user``), so ``request.user.is_authenticated`` and Starlette's
    ``requires(...)`` work in host code; ``identity`` is what agentmw uses to tell callers apart (task and
    session owners, approval requesters).
    """

    __slots__ = ("_identity", "claims", "client_id", "expires_at", "roles", "scopes", "subject")

    def __init__(
        self,
        subject: str,
        *,
        scopes: frozenset[str] | set[str] | tuple[str, ...] = (),
        roles: frozenset[str] | set[str] | tuple[str, ...] = (),
        claims: Mapping[str, Any] | None = None,
        client_id: str | None = None,
        expires_at: float | None = None,
        identity: str | None = None,
    ) -> None:
        self.subject = subject
        self.scopes = frozenset(scopes)
        self.roles = frozenset(roles)
        self.claims: Mapping[str, Any] = dict(claims or {})
        self.client_id = client_id
        self.expires_at = expires_at
        self._identity = identity or subject

    @classmethod
    def from_claims(cls, claims: Mapping[str, Any], *, roles_claim: str | None = "roles") -> Principal:
        """A principal from token claims (JWT or introspection): ``sub``, ``scope``/``scp``, ``client_id``,
        ``exp``, and the roles found at ``roles_claim`` (a dotted path, e.g. ``realm_access.roles``)."""
        subject = claims.get("sub") or claims.get("client_id") or ""
        roles: Any = claims
        for part in (roles_claim or "").split("."):
            roles = roles.get(part) if isinstance(roles, Mapping) and part else None
        if isinstance(roles, str):
            roles = split_spaced(roles)
        exp = claims.get("exp")
        return cls(
            str(subject),
            scopes=scopes_of_claims(claims),
            roles=frozenset(str(r) for r in roles) if isinstance(roles, (list, tuple)) else frozenset(),
            claims=claims,
            client_id=claims.get("client_id") or claims.get("azp"),
            expires_at=float(exp) if isinstance(exp, (int, float)) else None,
        )

    @property
    def is_authenticated(self) -> bool:
        return True

    @property
    def display_name(self) -> str:
        return self.subject

    @property
    def identity(self) -> str:
        return self._identity

    def missing(self, scopes: frozenset[str]) -> frozenset[str]:
        """The scopes of ``scopes`` this principal's token does not grant."""
        return scopes - self.scopes

    def __repr__(self) -> str:
        return f"Principal({self.subject!r}, scopes={sorted(self.scopes)}, roles={sorted(self.roles)})"


def split_spaced(value: str) -> list[str]:
    """A space-delimited list (RFC 6749 section 3.3): split on the space character only, empty entries dropped.
    Not ``str.split()``, which also splits on tabs, ``\x1f`` and Unicode spaces, so one odd scope an
    authorization server grants would become several."""
    return [part for part in value.split(" ") if part]


def scopes_of_claims(claims: Mapping[str, Any]) -> frozenset[str]:
    """``scope`` (RFC 9068 and 7662: one space-separated string) or ``scp`` (a list, as some servers send)."""
    raw = claims.get("scope", claims.get("scp"))
    if isinstance(raw, str):
        return frozenset(split_spaced(raw))
    if isinstance(raw, (list, tuple)):
        return frozenset(str(s) for s in raw if s not in ("", None))
    return frozenset()


def principal_of(source: Any) -> Principal | None:
    """The verified caller of a request: from a ``Context`` (``ctx``), a Starlette ``Request`` or
    ``HTTPConnection``, or an ASGI scope. None for an anonymous caller.

    Without ``Agent(auth=...)``, a host authentication middleware's ``scope["user"]`` and ``scope["auth"]``
    (Starlette's ``AuthenticationMiddleware``) stand in: its user's identity, with the scopes of its
    ``AuthCredentials``.
    """
    scope = _scope_of(source)
    if scope is None:
        return None
    if PRINCIPAL_KEY in scope:
        return scope[PRINCIPAL_KEY]  # type: ignore[no-any-return]
    user = scope.get("user")
    if isinstance(user, Principal):
        return user
    if user is None or not getattr(user, "is_authenticated", False):
        return None
    credentials = scope.get("auth")
    scopes = frozenset(getattr(credentials, "scopes", ()) or ())
    name = str(getattr(user, "identity", None) or getattr(user, "display_name", ""))
    return Principal(name, scopes=scopes, identity=f"user:{name}")


def _scope_of(source: Any) -> Mapping[str, Any] | None:
    if source is None:
        return None
    if isinstance(source, Mapping):
        return source
    request = getattr(source, "request", None)  # a Context
    if request is not None and not hasattr(source, "scope"):
        source = request
    scope = getattr(source, "scope", None)
    return scope if isinstance(scope, Mapping) else None
