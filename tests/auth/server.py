"""A real OAuth 2.1 authorization server for the tests, built on Authlib's server components.

- RFC 8414 metadata at ``/.well-known/oauth-authorization-server``;
- RFC 7591 dynamic client registration at ``/register`` (open, as MCP clients expect);
- authorization code with PKCE (RFC 7636, S256 required) at ``/authorize`` and ``/token``, with refresh tokens;
- JWT access tokens (RFC 9068, RS256, signed with joserfc) whose ``aud`` is the RFC 8707 ``resource`` the
  client asked for (Authlib leaves that to the server: done here), and whose ``roles`` come from the user;
- RFC 7662 introspection at ``/introspect`` (Authlib's JWT introspection endpoint), for a registered
  confidential client;
- its JWKS at ``/jwks``, with key rotation (``rotate()``).

Nobody types a password: ``/authorize`` consents as ``AuthServer.user`` (a test sets who is logged in), and
grants the requested scopes that this user may have.
"""

from __future__ import annotations

import contextvars
import secrets
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from authlib.common.security import generate_token
from authlib.oauth2 import AuthorizationServer
from authlib.oauth2.rfc6749 import ClientMixin, JsonPayload, JsonRequest, OAuth2Payload, OAuth2Request, grants
from authlib.oauth2.rfc6749.models import AuthorizationCodeMixin
from authlib.oauth2.rfc7591 import ClientRegistrationEndpoint
from authlib.oauth2.rfc7636 import CodeChallenge
from authlib.oauth2.rfc9068 import JWTBearerTokenGenerator, JWTIntrospectionEndpoint
from joserfc import jwt as jose_jwt
from joserfc.jwk import KeySet, RSAKey
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route

__all__ = ["AuthServer", "User"]

_resource: contextvars.ContextVar[str | None] = contextvars.ContextVar("resource", default=None)


@dataclass
class User:
    name: str
    scopes: frozenset[str]
    roles: tuple[str, ...] = ()

    def get_user_id(self) -> str:
        return self.name


@dataclass
class Client(ClientMixin):
    client_id: str
    client_secret: str | None
    metadata: dict[str, Any]

    def get_client_id(self) -> str:
        return self.client_id

    def get_default_redirect_uri(self) -> str | None:
        uris = self.metadata.get("redirect_uris") or []
        return uris[0] if uris else None

    def get_allowed_scope(self, scope: str | None) -> str:
        return scope or ""

    def check_redirect_uri(self, redirect_uri: str) -> bool:
        return redirect_uri in (self.metadata.get("redirect_uris") or [])

    def check_client_secret(self, client_secret: str) -> bool:
        return self.client_secret is not None and secrets.compare_digest(self.client_secret, client_secret)

    def check_endpoint_auth_method(self, method: str, endpoint: str) -> bool:
        if endpoint == "token":
            return method == self.metadata.get("token_endpoint_auth_method", "client_secret_basic")
        return True

    def check_response_type(self, response_type: str) -> bool:
        return response_type in (self.metadata.get("response_types") or ["code"])

    def check_grant_type(self, grant_type: str) -> bool:
        return grant_type in (self.metadata.get("grant_types") or ["authorization_code"])


@dataclass
class Code(AuthorizationCodeMixin):
    code: str
    client_id: str
    redirect_uri: str
    scope: str
    user: User
    resource: str | None
    code_challenge: str | None
    code_challenge_method: str | None
    created: float = field(default_factory=time.time)

    def get_redirect_uri(self) -> str:
        return self.redirect_uri

    def get_scope(self) -> str:
        return self.scope


class _Payload(OAuth2Payload):
    def __init__(self, data: dict[str, str]) -> None:
        self._data = data

    @property
    def data(self) -> dict[str, str]:
        return self._data

    @property
    def datalist(self) -> dict[str, list[str]]:
        return {k: [v] for k, v in self._data.items()}


class _Request(OAuth2Request):
    def __init__(
        self, method: str, url: str, headers: dict[str, str], query: dict[str, str], form: dict[str, str]
    ) -> None:
        super().__init__(method, url, headers=headers)
        self._query = query
        self._form = form
        self.payload = _Payload({**query, **form})

    @property
    def args(self) -> dict[str, str]:
        return self._query

    @property
    def form(self) -> dict[str, str]:
        return self._form


class _JsonPayload(JsonPayload):
    def __init__(self, data: dict[str, Any]) -> None:
        self._data = data

    @property
    def data(self) -> dict[str, Any]:
        return self._data


class AuthServer:
    """The authorization server: ``app`` is its Starlette app, ``issuer`` its URL (set ``issuer`` before use)."""

    def __init__(self, issuer: str = "http://127.0.0.1") -> None:  # set_issuer() once it is served
        self.issuer = issuer
        self.keys = [RSAKey.generate_key(2048, parameters={"kid": "key-1", "use": "sig", "alg": "RS256"})]
        self.clients: dict[str, Client] = {}
        self.codes: dict[str, Code] = {}
        self.refresh: dict[str, tuple[str, User, str, str | None]] = {}
        self.users = {
            "alice": User("alice", frozenset({"mcp", "assets:read", "purchases:write"}), ("buyer",)),
            "bob": User("bob", frozenset({"mcp", "assets:read"}), ()),
            "admin": User(
                "admin",
                frozenset({"mcp", "assets:read", "purchases:write", "budget:admin"}),
                ("admin", "buyer"),
            ),
        }
        self.user = self.users["alice"]
        self.lifetime = 3600
        self.authorize_requests: list[dict[str, str]] = []
        self.token_requests: list[dict[str, str]] = []
        self.registrations = 0
        self.jwks_fetches = 0
        self.server = self._authorization_server()
        self.app = Starlette(
            routes=[
                Route("/.well-known/oauth-authorization-server", self._metadata),
                Route("/jwks", self._jwks),
                Route("/register", self._register, methods=["POST"]),
                Route("/authorize", self._authorize),
                Route("/token", self._token, methods=["POST"]),
                Route("/introspect", self._introspect, methods=["POST"]),
            ]
        )
        self.add_client(
            "resource-server",
            "rs-secret",
            {"token_endpoint_auth_method": "client_secret_basic", "grant_types": ["client_credentials"]},
        )

    # --- test controls -------------------------------------------------------------------------------
    def add_client(self, client_id: str, secret: str | None, metadata: dict[str, Any]) -> Client:
        client = self.clients[client_id] = Client(client_id, secret, metadata)
        return client

    def set_issuer(self, issuer: str) -> None:
        """The URL the server is reached at (known once it is served): its tokens' ``iss``."""
        self.issuer = issuer
        self.server = self._authorization_server()

    def login(self, name: str) -> None:
        self.user = self.users[name]

    def rotate(self) -> None:
        """A new signing key; the old one stays published (tokens it signed stay valid until they expire)."""
        kid = f"key-{len(self.keys) + 1}"
        self.keys.insert(0, RSAKey.generate_key(2048, parameters={"kid": kid, "use": "sig", "alg": "RS256"}))

    def issue(
        self,
        *,
        subject: str = "alice",
        scope: str = "mcp",
        audience: str | list[str] | None = None,
        expires_in: int = 3600,
        issuer: str | None = None,
        roles: tuple[str, ...] = (),
        **extra: Any,
    ) -> str:
        """A token minted directly (wrong audience, expired, other issuer...), signed with the current key."""
        now = int(time.time())
        claims = {
            "iss": issuer or self.issuer,
            "sub": subject,
            "aud": audience,
            "iat": now - 5,
            "exp": now + expires_in,
            "scope": scope,
            "client_id": "direct",
            "jti": generate_token(16),
            **extra,
        }
        if roles:
            claims["roles"] = list(roles)
        if audience is None:
            del claims["aud"]
        key = self.keys[0]
        return jose_jwt.encode({"alg": "RS256", "kid": key.kid, "typ": "at+jwt"}, claims, key)

    # --- Authlib wiring ---------------------------------------------------------------------------------
    def _authorization_server(self) -> AuthorizationServer:
        outer = self

        class Server(AuthorizationServer):
            def query_client(self, client_id: str) -> Client | None:
                return outer.clients.get(client_id)

            def save_token(self, token: dict[str, Any], request: Any) -> None:
                if token.get("refresh_token"):
                    user = (
                        request.user
                        or outer.refresh.get(request.payload.data.get("refresh_token", ""), (0, None))[1]
                    )
                    outer.refresh[token["refresh_token"]] = (
                        request.client.client_id,
                        user,
                        token.get("scope", ""),
                        _resource.get(),
                    )

            def create_oauth2_request(self, request: Any) -> OAuth2Request:
                return request

            def create_json_request(self, request: Any) -> JsonRequest:
                return request

            def handle_response(self, status: int, body: Any, headers: Any) -> Response:
                headers = dict(headers)
                if isinstance(body, dict):
                    headers.pop("Content-Type", None)
                    return JSONResponse(body, status_code=status, headers=headers)
                location = headers.pop("Location", None)
                if location is not None:
                    return RedirectResponse(location, status_code=302, headers=headers)
                return Response(body or b"", status_code=status, headers=headers)

            def send_signal(self, name: str, *args: Any, **kwargs: Any) -> None:
                pass

        class Generator(JWTBearerTokenGenerator):
            def get_jwks(self) -> KeySet:
                return KeySet([outer.keys[0]])

            def get_audiences(self, client: Client, user: Any, scope: str) -> str | list[str]:
                return _resource.get() or client.get_client_id()  # RFC 8707: the resource asked for

            def get_extra_claims(
                self, client: Client, grant_type: str, user: Any, scope: str
            ) -> dict[str, Any]:
                return {"roles": list(user.roles)} if user is not None and user.roles else {}

            def _get_expires_in(self, client: Client, grant_type: str) -> int:
                return outer.lifetime

        class CodeGrant(grants.AuthorizationCodeGrant):
            TOKEN_ENDPOINT_AUTH_METHODS = ("none", "client_secret_basic", "client_secret_post")

            def save_authorization_code(self, code: str, request: Any) -> None:
                data = request.payload.data
                outer.codes[code] = Code(
                    code,
                    request.client.client_id,
                    data.get("redirect_uri", ""),
                    request.scope or "",
                    request.user,
                    data.get("resource"),
                    data.get("code_challenge"),
                    data.get("code_challenge_method"),
                )

            def query_authorization_code(self, code: str, client: Client) -> Code | None:
                found = outer.codes.get(code)
                if (
                    found is not None
                    and found.client_id == client.client_id
                    and time.time() - found.created < 300
                ):
                    return found
                return None

            def delete_authorization_code(self, authorization_code: Code) -> None:
                outer.codes.pop(authorization_code.code, None)

            def authenticate_user(self, authorization_code: Code) -> User:
                _resource.set(authorization_code.resource)
                return authorization_code.user

        class RefreshGrant(grants.RefreshTokenGrant):
            TOKEN_ENDPOINT_AUTH_METHODS = ("none", "client_secret_basic", "client_secret_post")
            INCLUDE_NEW_REFRESH_TOKEN = True

            def authenticate_refresh_token(self, refresh_token: str) -> Any:
                found = outer.refresh.get(refresh_token)
                if found is None:
                    return None
                _resource.set(self.request.payload.data.get("resource") or found[3])
                return _Refresh(found[0], found[1], found[2])

            def authenticate_user(self, refresh_token: Any) -> User:
                return refresh_token.user

            def revoke_old_credential(self, refresh_token: Any) -> None:
                pass

        class Registration(ClientRegistrationEndpoint):
            def authenticate_token(self, request: Any) -> bool:
                return True  # open registration, as MCP clients expect

            def save_client(
                self, client_info: dict[str, Any], client_metadata: dict[str, Any], request: Any
            ) -> Client:
                outer.registrations += 1
                return outer.add_client(
                    client_info["client_id"],
                    client_info.get("client_secret"),
                    {**client_metadata, **client_info},
                )

            def get_server_metadata(self) -> dict[str, Any]:
                return outer.metadata()

        class Introspection(JWTIntrospectionEndpoint):
            CLIENT_AUTH_METHODS = ("client_secret_basic",)

            def get_jwks(self) -> KeySet:
                return KeySet(list(outer.keys))

            def check_permission(self, token: Any, client: Client, request: Any) -> bool:
                return client.client_id == "resource-server"

        server = Server(scopes_supported=["mcp", "assets:read", "purchases:write", "budget:admin"])
        server.register_token_generator("default", Generator(issuer=self.issuer))
        server.register_grant(CodeGrant, [CodeChallenge(required=True)])
        server.register_grant(RefreshGrant)
        server.register_endpoint(Registration(claims_classes=[_client_claims()]))
        self._introspection = Introspection(issuer=self.issuer)
        server.register_endpoint(self._introspection)
        return server

    def metadata(self) -> dict[str, Any]:
        base = self.issuer
        return {
            "issuer": base,
            "authorization_endpoint": f"{base}/authorize",
            "token_endpoint": f"{base}/token",
            "registration_endpoint": f"{base}/register",
            "jwks_uri": f"{base}/jwks",
            "introspection_endpoint": f"{base}/introspect",
            "scopes_supported": ["mcp", "assets:read", "purchases:write", "budget:admin"],
            "response_types_supported": ["code"],
            "grant_types_supported": ["authorization_code", "refresh_token"],
            "token_endpoint_auth_methods_supported": ["none", "client_secret_basic", "client_secret_post"],
            "code_challenge_methods_supported": ["S256"],
        }

    async def _request(self, request: Request) -> _Request:
        form = {k: str(v) for k, v in (await request.form()).items()} if request.method == "POST" else {}
        return _Request(request.method, str(request.url), request.headers, dict(request.query_params), form)  # type: ignore[arg-type]

    async def _metadata(self, request: Request) -> Response:
        return JSONResponse(self.metadata())

    async def _jwks(self, request: Request) -> Response:
        self.jwks_fetches += 1
        return JSONResponse(KeySet(list(self.keys)).as_dict(private=False))

    async def _register(self, request: Request) -> Response:
        json_request = JsonRequest(request.method, str(request.url), request.headers)
        json_request.payload = _JsonPayload(await request.json())
        return self.server.create_endpoint_response("client_registration", json_request)

    async def _authorize(self, request: Request) -> Response:
        oauth_request = await self._request(request)
        self.authorize_requests.append(dict(oauth_request.args))
        wanted = (oauth_request.args.get("scope") or "").split()
        granted = " ".join(s for s in wanted if s in self.user.scopes)
        if wanted and not granted:
            query = urlencode({"error": "invalid_scope", "state": oauth_request.args.get("state", "")})
            return RedirectResponse(f"{oauth_request.args.get('redirect_uri')}?{query}", status_code=302)
        oauth_request.payload.data["scope"] = granted
        oauth_request._query = {**oauth_request.args, "scope": granted}
        grant = self.server.get_consent_grant(oauth_request, end_user=self.user)
        return self.server.create_authorization_response(oauth_request, grant_user=self.user, grant=grant)

    async def _token(self, request: Request) -> Response:
        oauth_request = await self._request(request)
        self.token_requests.append(dict(oauth_request.form))
        token = _resource.set(None)
        try:
            return self.server.create_token_response(oauth_request)
        finally:
            _resource.reset(token)

    async def _introspect(self, request: Request) -> Response:
        return self.server.create_endpoint_response("introspection", await self._request(request))


@dataclass
class _Refresh:
    client_id: str
    user: User
    scope: str

    def get_scope(self) -> str:
        return self.scope

    def check_client(self, client: Client) -> bool:
        return client.client_id == self.client_id

    def is_expired(self) -> bool:
        return False

    def is_revoked(self) -> bool:
        return False


def _client_claims() -> type:
    from authlib.oauth2.rfc7591 import ClientMetadataClaims

    return ClientMetadataClaims
