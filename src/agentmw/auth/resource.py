"""The agent as an OAuth 2.1 protected resource (RFC 9728 metadata, RFC 6750 challenges, RFC 8707 audience).

``Agent(auth=ProtectedResource(...))`` makes every face ask for a bearer token, verifies it once per request,
and keeps the verified :class:`~agentmw.auth.Principal` in the request's scope, where every face, the pipeline
and the approvals endpoint find the same one.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from ..identity import Unauthenticated
from .errors import AuthUnavailable, MisdirectedRequest
from .principal import PRINCIPAL_KEY, Principal
from .verifiers import InvalidToken, TokenVerifier, VerifierUnavailable, as_verifier

if TYPE_CHECKING:
    from ..agent import Agent

__all__ = ["WELL_KNOWN_PRM", "ProtectedResource"]

WELL_KNOWN_PRM = "/.well-known/oauth-protected-resource"
_FACES = frozenset({"mcp", "a2a", "agui"})


def _header(scope: Mapping[str, Any], name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key == name:
            return value.decode("latin-1")  # type: ignore[no-any-return]
    return None


def _quoted(value: str) -> str:
    """An auth-param value (RFC 9110 quoted-string): quotes and backslashes escaped, controls dropped."""
    clean = "".join(c for c in value if c >= " " and c != "\x7f")
    return '"' + clean.replace("\\", "\\\\").replace('"', '\\"') + '"'


class ProtectedResource:
    """How the agent checks bearer tokens, and what it tells clients about it.

    Args:
        authorization_servers: issuer URLs of the authorization servers whose tokens are accepted (listed in
            the protected resource metadata; clients log in there).
        verifier: a :class:`~agentmw.auth.JWTVerifier`, an :class:`~agentmw.auth.IntrospectionVerifier`, any
            object with ``async verify(token, resource)``, or a function ``(token, resource) -> claims``.
        resource: this server's canonical resource URI (the MCP endpoint's URL, RFC 8707), which tokens must
            name as their audience. Default: the URL the request reached, from its scheme, ``Host`` (checked
            against ``allowed_hosts`` on every face: 421 otherwise) and mount path; forwarded headers are not
            trusted for it. Behind a proxy that terminates TLS, or with ``allowed_hosts=["*"]``, give it.
        scopes: scopes every request needs (a token without them gets 403); they are also the ``scope=`` of
            the 401 challenge, so a client asks for them when it logs in.
        scopes_supported: listed in the metadata; default: ``scopes`` and every capability's ``scopes``.
        anonymous: serve callers without a token (they see and call only what needs no scope and no role);
            a call that needs a scope then gets 401 with the challenge, so the client logs in.
        faces: which faces require a token (``"mcp"``, ``"a2a"``, ``"agui"``); the A2A card is always public.
        roles_claim: where a JWT's (or introspection answer's) roles are, a dotted path; used by
            ``@tool(roles=...)``. Overrides the verifier's.
        identity: ``principal -> str``: the identity every face uses for the caller (task and session owner,
            approval requester); default: the token's subject.
        hide_missing_scopes: also hide capabilities whose scopes the token lacks (by default they are listed,
            and a call gets 403 ``insufficient_scope`` naming them, so the client can step up).
        visible: ``(principal | None, capability) -> bool``: a rule of your own, after roles and scopes.
        resource_name, resource_documentation: optional metadata fields.
        cache_seconds, cache_size: verified tokens are remembered this long (never past their ``exp``), at most
            this many; a token is then checked once per ``cache_seconds``, not once per request.
    """

    def __init__(self, *, authorization_servers: Sequence[str], verifier: TokenVerifier | Callable[..., Any],
                 resource: str | None = None, scopes: Sequence[str] = (), scopes_supported: Sequence[str] | None = None,
                 anonymous: bool = False, faces: Iterable[str] = ("mcp", "a2a", "agui"),
                 roles_claim: str | None = None, identity: Callable[[Principal], str] | None = None,
                 hide_missing_scopes: bool = False, visible: Callable[[Principal | None, Any], bool] | None = None,
                 resource_name: str | None = None, resource_documentation: str | None = None,
                 cache_seconds: float = 60.0, cache_size: int = 1024) -> None:
        if not authorization_servers:
            raise ValueError("ProtectedResource needs at least one authorization server")
        unknown = set(faces) - _FACES
        if unknown:
            raise ValueError(f"unknown faces {sorted(unknown)}: choose from {sorted(_FACES)}")
        self.authorization_servers = [str(s) for s in authorization_servers]
        self.verifier = as_verifier(verifier)
        self.resource = resource.rstrip("/") if resource else None
        self.scopes = tuple(scopes)
        self.required = frozenset(scopes)
        self._scopes_supported = tuple(scopes_supported) if scopes_supported is not None else None
        self.anonymous = anonymous
        self.faces = frozenset(faces)
        self.roles_claim = roles_claim
        self.identity = identity
        self.hide_missing_scopes = hide_missing_scopes
        self.visible = visible
        self.resource_name = resource_name
        self.resource_documentation = resource_documentation
        self.cache_seconds = cache_seconds
        self.cache_size = cache_size
        self._cache: OrderedDict[tuple[str, str], tuple[Principal, float]] = OrderedDict()
        self.agent: Agent | None = None

    def bind(self, agent: Agent) -> None:
        if self.agent is not None and self.agent is not agent:
            raise ValueError("a ProtectedResource serves one agent; make one per agent")
        self.agent = agent

    # --- where things are ----------------------------------------------------------------------------
    def check_host(self, scope: Mapping[str, Any]) -> None:
        """Raise :class:`~agentmw.auth.errors.MisdirectedRequest` (421) for a ``Host`` the agent does not serve
        (``Agent(allowed_hosts=...)``), on every face, as the MCP face does."""
        host = _header(scope, b"host")
        if host is not None and self.agent is not None and not self.agent.host_allowed(host):
            raise MisdirectedRequest("Invalid Host header")

    def resource_url(self, scope: Mapping[str, Any]) -> str:
        """The resource URI tokens must name: the configured one, else the MCP endpoint's URL as reached. A
        ``Host`` outside ``allowed_hosts`` is refused (421) before it can become the audience: otherwise a token
        issued for another resource server would be accepted here by naming that server in ``Host``."""
        if self.resource is not None:
            return self.resource
        self.check_host(scope)
        host = _header(scope, b"host")
        if not host:
            server = scope.get("server") or ("localhost", None)
            host = f"{server[0]}:{server[1]}" if server[1] else str(server[0])
        mcp_path = self.agent.mcp_path if self.agent is not None else "/mcp"
        return f"{scope.get('scheme', 'http')}://{host}{scope.get('root_path', '').rstrip('/')}{mcp_path}"

    def metadata_url(self, scope: Mapping[str, Any]) -> str:
        """Where the metadata of this resource is (RFC 9728 section 3.1: the well-known path, then the
        resource's own path), e.g. ``https://host/.well-known/oauth-protected-resource/mcp``."""
        parts = urlsplit(self.resource_url(scope))
        path = parts.path.rstrip("/")
        return f"{parts.scheme}://{parts.netloc}{WELL_KNOWN_PRM}{path}"

    def scopes_supported(self) -> list[str]:
        if self._scopes_supported is not None:
            return list(self._scopes_supported)
        found = set(self.scopes)
        agent = self.agent
        if agent is not None:
            for table in (agent.tools, agent.resources, agent.templates, agent.prompts, agent.skills):
                for cap in table.values():
                    policy = getattr(cap, "policy", None)
                    if policy is not None:
                        found.update(policy.scopes)
        return sorted(found)

    def metadata(self, scope: Mapping[str, Any]) -> dict[str, Any]:
        """The RFC 9728 protected resource metadata document."""
        document: dict[str, Any] = {
            "resource": self.resource_url(scope),
            "authorization_servers": list(self.authorization_servers),
            "scopes_supported": self.scopes_supported(),
            "bearer_methods_supported": ["header"],
        }
        if self.resource_name:
            document["resource_name"] = self.resource_name
        if self.resource_documentation:
            document["resource_documentation"] = self.resource_documentation
        return document

    def challenge(self, scope: Mapping[str, Any], *, error: str | None = None, description: str | None = None,
                  scopes: Iterable[str] | None = None) -> str:
        """The ``WWW-Authenticate`` value: ``Bearer resource_metadata="...", scope="..."`` (plus ``error`` and
        ``error_description`` when a token was refused)."""
        wanted = " ".join(dict.fromkeys([*self.scopes, *(scopes or ())]))
        params = [f"resource_metadata={_quoted(self.metadata_url(scope))}"]
        if wanted:
            params.append(f"scope={_quoted(wanted)}")
        if error:
            params.append(f"error={_quoted(error)}")
        if description:
            params.append(f"error_description={_quoted(description)}")
        return "Bearer " + ", ".join(params)

    # --- who is calling ----------------------------------------------------------------------------------
    async def authenticate(self, scope: dict[str, Any]) -> Principal | None:
        """The verified caller of this request (None without a token), verified once per request and kept
        in its scope. Raises :class:`~agentmw.identity.Unauthenticated` (401, with the challenge) for a
        malformed, invalid, expired or wrong-audience token, and :class:`~agentmw.auth.errors.AuthUnavailable`
        (503) when the verifier cannot reach the issuer."""
        if PRINCIPAL_KEY in scope:
            return scope[PRINCIPAL_KEY]  # type: ignore[no-any-return]
        header = _header(scope, b"authorization")
        principal = None
        if header is not None:
            kind, _, token = header.strip().partition(" ")
            token = token.strip()
            if kind.lower() != "bearer" or not token:
                raise Unauthenticated("A bearer token is required (Authorization: Bearer <token>)",
                                      challenge=self.challenge(scope, error="invalid_request"))
            try:
                principal = await self._verified(token, self.resource_url(scope))
            except InvalidToken as exc:
                raise Unauthenticated(str(exc), challenge=self.challenge(
                    scope, error="invalid_token", description=str(exc))) from None
            except VerifierUnavailable as exc:
                raise AuthUnavailable(str(exc), retry_after=exc.retry_after) from None
        scope[PRINCIPAL_KEY] = principal
        if principal is not None and scope.get("user") is None:  # Starlette's request.user and request.auth
            from starlette.authentication import AuthCredentials

            scope["user"] = principal
            scope["auth"] = AuthCredentials(sorted(principal.scopes))
        return principal

    async def _verified(self, token: str, resource: str) -> Principal:
        key = (token, resource)
        now = time.monotonic()
        cached = self._cache.get(key)
        if cached is not None:
            principal, until = cached
            if now < until and (principal.expires_at is None or principal.expires_at > time.time()):
                self._cache.move_to_end(key)
                return principal
            del self._cache[key]
        principal = await self.verifier.verify(token, resource)
        if self.roles_claim is not None:
            principal = Principal.from_claims(principal.claims, roles_claim=self.roles_claim)
        if self.identity is not None:
            principal._identity = str(self.identity(principal) or "")
        if not principal.identity:  # every such token would share one caller: sessions, tasks, rate limits
            raise InvalidToken("The token names no subject (no 'sub' or 'client_id' claim)")
        if self.cache_seconds > 0:
            ttl = self.cache_seconds
            if principal.expires_at is not None:
                ttl = min(ttl, principal.expires_at - time.time())
            if ttl > 0:
                self._cache[key] = (principal, now + ttl)
                while len(self._cache) > self.cache_size:
                    self._cache.popitem(last=False)
        return principal

    async def identify(self, connection: Any) -> str | None:
        """The ``Agent(identify=...)`` hook this resource installs: the verified caller's identity, None for an
        anonymous caller where ``anonymous=True``, else 401 with the challenge."""
        principal = await self.authenticate(connection.scope)
        if principal is not None:
            return principal.identity
        if self.anonymous:
            return None
        raise Unauthenticated("Authentication required: send a bearer token", challenge=self.challenge(connection.scope))
