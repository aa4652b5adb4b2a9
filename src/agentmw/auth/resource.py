"""The agent as an OAuth 2.1 protected resource (RFC 9728 metadata, RFC 6750 challenges, RFC 8707 audience).

``Agent(auth=ProtectedResource(...))`` makes every face ask for a bearer token, verifies it once per request,
and keeps the verified :class:`~agentmw.auth.Principal` in the request's scope, where every face, the pipeline
and the approvals endpoint find the same one.
"""

from __future__ import annotations

import re
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, MutableMapping, Sequence
from typing import TYPE_CHECKING, Any, Final, NoReturn, Protocol
from urllib.parse import urlsplit

from starlette.authentication import AuthCredentials

from ..identity import Unauthenticated
from .errors import AuthUnavailable, InvalidRequest, MisdirectedRequest
from .metadata import AuthorizationServerMetadata
from .principal import PRINCIPAL_KEY, Principal
from .verifiers import InvalidToken, TokenVerifier, VerifierUnavailable, as_verifier

if TYPE_CHECKING:
    from ..capability import Capability

__all__ = ["FACE_KEY", "WELL_KNOWN_PRM", "ProtectedResource", "Protects", "audience_authority"]

WELL_KNOWN_PRM = "/.well-known/oauth-protected-resource"
FACE_KEY = "agentmw.auth.face"
"""Scope key: the face (``"mcp"``, ``"a2a"``, ``"agui"``) that admitted the request (``Access.admit``)."""

_FACES = frozenset({"mcp", "a2a", "agui"})
_LOCAL_NAMES: Final = frozenset({"localhost", "127.0.0.1", "[::1]"})
_DEFAULT_PORT: Final = {"http": 80, "https": 443, "ws": 80, "wss": 443}
_NAME: Final = re.compile(r"[a-z0-9](?:[a-z0-9.-]{0,251}[a-z0-9])?|\[[0-9a-f:.]{2,45}\]")
_PORT: Final = re.compile(r"[1-9][0-9]{0,4}")


class Protects(Protocol):
    """What a protected resource reads from the agent it is bound to (``agent.py`` binds itself): where the
    agent is reached, and the policies of what it serves (for ``scopes_supported``)."""

    @property
    def allowed_hosts(self) -> tuple[str, ...]: ...
    @property
    def mcp_path(self) -> str: ...
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
    def host_allowed(self, host: str) -> bool: ...


def _header(scope: Mapping[str, Any], name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key == name:
            return value.decode("latin-1")  # type: ignore[no-any-return]
    return None


def _headers(scope: Mapping[str, Any], name: bytes) -> list[str]:
    return [value.decode("latin-1") for key, value in scope.get("headers", ()) if key == name]


def _authority(host: str) -> tuple[str, int | None] | None:
    """``Host`` as (lower-case name, port or None), or None when it is not exactly ``name[:port]`` (a path, a
    user, a sign or a leading zero in the port: nothing that could make one audience string look like another)."""
    host = host.strip().lower()
    name, port = host, None
    if not host.endswith("]") and ":" in host:
        name, _, digits = host.rpartition(":")
        if not _PORT.fullmatch(digits) or int(digits) > 65535:
            return None
        port = int(digits)
    if not _NAME.fullmatch(name) or (not name.startswith("[") and ":" in name):
        return None
    return name, port


def audience_authority(scope: Mapping[str, Any], allowed_hosts: Sequence[str]) -> str:
    """The ``host[:port]`` of the resource URI derived from a request (RFC 8707: the audience is bound to scheme,
    host and port), or :class:`~agentmw.auth.errors.MisdirectedRequest` (421) when ``Host`` does not name this
    server at this port. The Host check of every face admits local names at any port, and a name may be allowed
    at several; an audience takes the port only where this server is known to be reached:

    - the port the server listens on (``scope["server"]``), for any name the Host check admitted;
    - no port, or the scheme's default port, for a name listed in ``allowed_hosts`` (a proxy in front); a local
      name only when the server listens on that default port itself;
    - a ``name:port`` listed exactly in ``allowed_hosts`` (a port mapping or a proxy on another port).

    Anything else (another port of a local name, a port an ``allowed_hosts`` entry does not name) would let a
    token issued for another server on the same machine or name be replayed here. ``allowed_hosts=["*"]``
    accepts every Host, as documented: give ``ProtectedResource(resource=...)`` there.
    """
    hosts = _headers(scope, b"host")
    server = scope.get("server") or ("localhost", None)
    own = server[1] if len(server) > 1 and isinstance(server[1], int) else None
    scheme = str(scope.get("scheme", "http"))
    default = _DEFAULT_PORT.get(scheme)
    if not hosts:  # HTTP/1.0 without Host: the address the server listens on
        name = str(server[0])
        return name if own is None or own == default else f"{name}:{own}"
    parsed = _authority(hosts[0]) if len(hosts) == 1 else None
    if parsed is None:
        raise MisdirectedRequest("Invalid Host header")
    name, port = parsed
    if port == default:
        port = None
    authority = name if port is None else f"{name}:{port}"
    if "*" in allowed_hosts:
        return authority
    if port is None:
        if name in _LOCAL_NAMES and own != default:  # another local server: the one on the default port
            _refuse_port()
        return authority
    if port != own and authority not in (h.lower() for h in allowed_hosts):
        _refuse_port()
    return authority


def _refuse_port() -> NoReturn:
    raise MisdirectedRequest(
        "The Host names a port this server is not known to be reached at (list it in "
        "Agent(allowed_hosts=...) as name:port, or give ProtectedResource(resource=...))"
    )


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


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
        faces: which faces require a token (``"mcp"``, ``"a2a"``, ``"agui"``); the A2A card is always public. On
            a face not named, a caller without a token is served as with ``anonymous=True`` (a token that is sent
            is still verified, and a capability's own scopes and roles still apply).
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
        authorization_endpoint, token_endpoint: the first authorization server's endpoints, for the A2A card's
            ``oauth2`` scheme (its authorization code ``flows``); default: read from that server's RFC 8414
            metadata when the card is first asked for (the same document a ``JWTVerifier`` of that issuer reads).
    """

    def __init__(
        self,
        *,
        authorization_servers: Sequence[str],
        verifier: TokenVerifier | Callable[..., Any],
        resource: str | None = None,
        scopes: Sequence[str] = (),
        scopes_supported: Sequence[str] | None = None,
        anonymous: bool = False,
        faces: Iterable[str] = ("mcp", "a2a", "agui"),
        roles_claim: str | None = None,
        identity: Callable[[Principal], str] | None = None,
        hide_missing_scopes: bool = False,
        visible: Callable[[Principal | None, Any], bool] | None = None,
        resource_name: str | None = None,
        resource_documentation: str | None = None,
        cache_seconds: float = 60.0,
        cache_size: int = 1024,
        authorization_endpoint: str | None = None,
        token_endpoint: str | None = None,
    ) -> None:
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
        self.authorization_endpoint = authorization_endpoint
        self.token_endpoint = token_endpoint
        issuer = self.authorization_servers[0]
        shared = getattr(self.verifier, "metadata", None)  # a JWTVerifier of the same issuer: one document
        self.server_metadata: AuthorizationServerMetadata = (
            shared
            if isinstance(shared, AuthorizationServerMetadata) and shared.issuer == issuer
            else AuthorizationServerMetadata(issuer)
        )
        self.agent: Protects | None = None

    def bind(self, agent: Protects) -> None:
        if self.agent is not None and self.agent is not agent:
            raise ValueError("a ProtectedResource serves one agent; make one per agent")
        self.agent = agent

    @property
    def derived(self) -> bool:
        """Whether the resource URI is derived from each request (no ``resource=``)."""
        return self.resource is None

    def protects(self, scope: Mapping[str, Any]) -> bool:
        """Whether this request needs a token: its face is one of ``faces``. A request no face admitted (the
        approvals endpoint) always does: it decides between verified identities."""
        face = scope.get(FACE_KEY)
        return face is None or face in self.faces

    # --- where things are ----------------------------------------------------------------------------
    def check_host(self, scope: Mapping[str, Any]) -> None:
        """Raise :class:`~agentmw.auth.errors.MisdirectedRequest` (421) for a ``Host`` the agent does not serve
        (``Agent(allowed_hosts=...)``), on every face, as the MCP face does."""
        host = _header(scope, b"host")
        if host is not None and self.agent is not None and not self.agent.host_allowed(host):
            raise MisdirectedRequest("Invalid Host header")

    def resource_url(self, scope: Mapping[str, Any]) -> str:
        """The resource URI tokens must name: the configured one, else the MCP endpoint's URL as reached. A
        ``Host`` outside ``allowed_hosts``, or naming a port this server is not known to be reached at, is refused
        (421) before it can become the audience (:func:`audience_authority`): otherwise a token issued for another
        resource server would be accepted here by naming that server, or its port, in ``Host``."""
        if self.resource is not None:
            return self.resource
        self.check_host(scope)
        agent = self.agent
        host = audience_authority(scope, agent.allowed_hosts if agent is not None else ())
        mcp_path = agent.mcp_path if agent is not None else "/mcp"
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

    async def oauth_flows(self) -> dict[str, Any] | None:
        """The A2A ``OAuthFlows`` of this resource (authorization code with PKCE, every supported scope), from the
        settings or the authorization server's metadata; None while its endpoints cannot be known."""
        authorize, token = self.authorization_endpoint, self.token_endpoint
        if authorize is None or token is None:
            try:
                document = await self.server_metadata.document()
            except LookupError:
                document = {}
            authorize = authorize or _text(document.get("authorization_endpoint"))
            token = token or _text(document.get("token_endpoint"))
        if not authorize or not token:
            return None
        return {
            "authorizationCode": {
                "authorizationUrl": authorize,
                "tokenUrl": token,
                "scopes": {name: "" for name in self.scopes_supported()},
                "pkceRequired": True,
            }
        }

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

    def challenge(
        self,
        scope: Mapping[str, Any],
        *,
        error: str | None = None,
        description: str | None = None,
        scopes: Iterable[str] | None = None,
    ) -> str:
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
    async def authenticate(self, scope: MutableMapping[str, Any]) -> Principal | None:
        """The verified caller of this request (None without a token), verified once per request and kept
        in its scope. Raises :class:`~agentmw.identity.Unauthenticated` (401, with the challenge) for a
        malformed, invalid, expired or wrong-audience token, and :class:`~agentmw.auth.errors.AuthUnavailable`
        (503) when the verifier cannot reach the issuer."""
        if PRINCIPAL_KEY in scope:
            return scope[PRINCIPAL_KEY]  # type: ignore[no-any-return]
        headers = _headers(scope, b"authorization")
        if (
            len(headers) > 1
        ):  # which one counts is the server's guess, and a proxy's may differ: refuse (RFC 6750)
            message = "Send one Authorization header: this request has several"
            raise InvalidRequest(
                message, challenge=self.challenge(scope, error="invalid_request", description=message)
            )
        header = headers[0] if headers else None
        principal = None
        if header is not None:
            kind, _, token = header.strip().partition(" ")
            token = token.strip()
            if kind.lower() != "bearer" or not token:
                raise Unauthenticated(
                    "A bearer token is required (Authorization: Bearer <token>)",
                    challenge=self.challenge(scope, error="invalid_request"),
                )
            try:
                principal = await self._verified(token, self.resource_url(scope))
            except InvalidToken as exc:
                raise Unauthenticated(
                    str(exc), challenge=self.challenge(scope, error="invalid_token", description=str(exc))
                ) from None
            except VerifierUnavailable as exc:
                raise AuthUnavailable(str(exc), retry_after=exc.retry_after) from None
        scope[PRINCIPAL_KEY] = principal
        if principal is not None and scope.get("user") is None:  # Starlette's request.user and request.auth
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
        if self.anonymous or not self.protects(connection.scope):
            return None
        raise Unauthenticated(
            "Authentication required: send a bearer token", challenge=self.challenge(connection.scope)
        )
