"""Token verification, pluggable: JWT access tokens through the issuer's JWKS, RFC 7662 introspection, or a
function of your own.

Every verifier answers ``await verifier.verify(token, resource)`` with a :class:`~agentmw.auth.Principal`, or
raises :class:`InvalidToken` saying why. ``resource`` is this server's resource URI (RFC 8707): the audience
the token must name. JWTs are checked with PyJWT (the ``auth`` extra); JWKS and introspection are fetched
with httpx. Both are imported when the first token is verified.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from .metadata import AuthorizationServerMetadata, get_json
from .principal import Principal

__all__ = [
    "CallableVerifier",
    "IntrospectionVerifier",
    "InvalidToken",
    "JWTVerifier",
    "TokenVerifier",
    "VerifierUnavailable",
    "as_verifier",
]

logger = logging.getLogger("agentmw")

_ASYMMETRIC = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA")


class InvalidToken(Exception):
    """The token is missing something, malformed, expired, for another audience, or not active: HTTP 401
    with ``error="invalid_token"`` and this message as its description."""


class VerifierUnavailable(Exception):
    """The token could not be checked at all: the issuer's keys or its introspection endpoint cannot be reached.
    Not the caller's fault, so not a 401 (which makes a client drop a good token and log in again): HTTP 503
    with ``Retry-After: retry_after``."""

    def __init__(self, message: str, *, retry_after: float = 5.0) -> None:
        super().__init__(message)
        self.retry_after = retry_after


@runtime_checkable
class TokenVerifier(Protocol):
    async def verify(self, token: str, resource: str) -> Principal: ...


def _audiences(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, (list, tuple)):
        return [v for v in value if isinstance(v, str)]
    return []


def _same_resource(a: str, b: str) -> bool:
    """RFC 8707 resource URIs compare as strings; a trailing slash is not a different resource."""
    return a.rstrip("/") == b.rstrip("/")


def audience_matches(claimed: Any, expected: Sequence[str]) -> bool:
    return any(_same_resource(aud, want) for aud in _audiences(claimed) for want in expected)


class JWKSCache:
    """The issuer's signing keys, fetched from its JWKS URL and kept for ``ttl`` seconds.

    Fetches are bounded: at most one attempt per ``refetch_seconds``, whatever the outcome.
    - Key rotation: a token signed with a key id this cache does not hold fetches the set again, within that
      bound (an attacker sending made-up key ids cannot turn every request into a fetch).
    - An outage: a fetch that fails, or a set with no usable key, is remembered for ``refetch_seconds``;
      meanwhile tokens the cache cannot check answer :class:`VerifierUnavailable` (503) with the seconds left
      as ``retry_after``, without a fetch. A failed refresh keeps the keys it had (and logs).
    - Requests waiting for a fetch in progress take its outcome instead of fetching again.
    At most ``max_keys`` keys are kept from a set.
    """

    def __init__(
        self,
        url: str | Callable[[], Awaitable[str]],
        *,
        ttl: float = 300.0,
        refetch_seconds: float = 30.0,
        max_keys: int = 16,
        timeout: float = 5.0,
        http: Any = None,
    ) -> None:
        self._url = url
        self.ttl = ttl
        self.refetch_seconds = refetch_seconds
        self.max_keys = max_keys
        self.timeout = timeout
        self._http = http
        self._keys: dict[str, tuple[Any, str | None]] = {}  # kid ("" for none) -> (jwt.PyJWK, its "alg")
        self._fetched = 0.0  # when a set with keys was last fetched (monotonic)
        self._attempted = float("-inf")  # when a fetch was last tried, whatever came of it
        self._attempts = 0  # fetches tried: a request that waited for the lock sees one happened meanwhile
        self._failing = False  # the last fetch failed: an unknown key id may be a rotation we cannot see
        self._lock = asyncio.Lock()
        self.fetches = 0

    async def key(self, kid: str | None) -> tuple[Any, str | None]:
        """The key with this id and the algorithm its JWK names (None when it names none)."""
        if (not self._keys or time.monotonic() - self._fetched > self.ttl) and self._may_fetch():
            await self._refresh()
        found = self._find(kid)
        if found is None and self._may_fetch():
            await self._refresh()  # a new key id: the issuer may have rotated its keys
            found = self._find(kid)
        if found is None:
            if self._failing:
                raise VerifierUnavailable(
                    "The issuer's signing keys cannot be fetched now", retry_after=self._retry_after()
                )
            raise InvalidToken("The token is signed with a key the issuer does not publish")
        return found

    def _may_fetch(self) -> bool:
        return time.monotonic() - self._attempted > self.refetch_seconds

    def _retry_after(self) -> float:
        """Seconds until the next fetch may be tried (at least 1)."""
        return max(1.0, self.refetch_seconds - (time.monotonic() - self._attempted))

    def _find(self, kid: str | None) -> tuple[Any, str | None] | None:
        if kid is not None:
            return self._keys.get(kid)
        return next(iter(self._keys.values())) if len(self._keys) == 1 else None

    async def _refresh(self) -> None:
        attempt = self._attempts
        async with self._lock:
            if self._attempts != attempt:  # another request fetched (or failed to) while this one waited
                return
            try:
                keys = await self._fetch()
            except Exception as exc:  # noqa: BLE001  (any failure is an outage: remembered, answered 503)
                self._failed(f"could not fetch the JWKS ({exc})")
                return
            if not keys:
                self._failed("the JWKS has no usable signing key")
                return
            self._attempted_now()
            self._keys = keys
            self._fetched = time.monotonic()
            self._failing = False

    def _attempted_now(self) -> None:
        """A fetch had an outcome. Counted then, not when it starts: requests arriving meanwhile wait for it
        (and take its outcome) rather than find no key and no failure yet; a cancelled fetch is no outcome."""
        self._attempts += 1
        self._attempted = time.monotonic()

    def _failed(self, why: str) -> None:
        self._attempted_now()
        self._failing = True
        logger.warning(
            "%s; %s; next attempt in %g s",
            why,
            "keeping the keys fetched before" if self._keys else "no key is known",
            self.refetch_seconds,
        )

    async def _fetch(self) -> dict[str, tuple[Any, str | None]]:
        import jwt

        url = self._url if isinstance(self._url, str) else await self._url()
        data = await get_json(self._http, url, self.timeout)
        self.fetches += 1
        keys: dict[str, tuple[Any, str | None]] = {}
        for entry in data.get("keys", []) if isinstance(data, dict) else []:
            if not isinstance(entry, dict) or entry.get("use", "sig") != "sig":
                continue
            try:
                key = jwt.PyJWK(entry)
            except (jwt.PyJWTError, ValueError, TypeError):
                continue  # a key type this environment cannot use: skipped, the others still work
            keys[str(entry.get("kid", ""))] = (key, entry.get("alg"))
            if len(keys) >= self.max_keys:
                break
        return keys


def _media_type(typ: str) -> str:
    """A ``typ`` as compared (RFC 7515 section 4.1.9): lower case, without the optional ``application/``."""
    typ = typ.strip().lower()
    return typ.removeprefix("application/")


class JWTVerifier:
    """JWT access tokens (RFC 9068) checked against the issuer's published keys.

    Args:
        issuer: the ``iss`` every token must carry (the authorization server's issuer identifier).
        jwks_url: where the issuer publishes its keys; default: the ``jwks_uri`` of its RFC 8414 metadata
            (:func:`~agentmw.auth.metadata.metadata_urls`: the RFC 8414 address, ``<issuer>/.well-known/
            oauth-authorization-server``, then ``openid-configuration``).
        audience: the ``aud`` a token must name; default: this server's resource URI (RFC 8707).
        algorithms: accepted signature algorithms; asymmetric only by default (never ``none``, never HMAC
            with a public key).
        leeway: seconds of clock skew allowed on ``exp``, ``nbf`` and ``iat``.
        jwks_ttl, refetch_seconds, max_keys: the key cache (:class:`JWKSCache`).
        required: claims a token must have; ``sub`` among them (RFC 9068 requires it), since the subject is who
            the caller is.
        roles_claim: where roles are (a dotted path); None for none.
        typ: the JOSE header ``typ`` a token must carry (RFC 9068 section 4: ``at+jwt``, also written
            ``application/at+jwt``, compared case-insensitively), so an ID token or another JWT the same issuer
            signs is never taken for an access token. None accepts any ``typ`` (or none): for issuers that
            write ``JWT`` (Keycloak, Microsoft Entra ID) or a type of their own.
        http: an ``httpx.AsyncClient`` to fetch with (tests, proxies); default: a fresh one per fetch.
    """

    def __init__(
        self,
        *,
        issuer: str,
        jwks_url: str | None = None,
        audience: str | Sequence[str] | None = None,
        algorithms: Sequence[str] = _ASYMMETRIC,
        leeway: float = 30.0,
        jwks_ttl: float = 300.0,
        refetch_seconds: float = 30.0,
        max_keys: int = 16,
        required: Sequence[str] = ("exp", "iss", "aud", "sub"),
        roles_claim: str | None = "roles",
        typ: str | None = "at+jwt",
        http: Any = None,
        timeout: float = 5.0,
    ) -> None:
        self.issuer = issuer
        self.typ = _media_type(typ) if typ is not None else None
        self.audience = [audience] if isinstance(audience, str) else list(audience) if audience else None
        self.algorithms = list(algorithms)
        self.leeway = leeway
        self.required = list(required)
        self.roles_claim = roles_claim
        self.http = http
        self.timeout = timeout
        self.jwks = JWKSCache(
            jwks_url or self._discover_jwks_url,
            ttl=jwks_ttl,
            refetch_seconds=refetch_seconds,
            max_keys=max_keys,
            timeout=timeout,
            http=http,
        )
        # kept: the metadata is not fetched again per key fetch (the A2A card's flows read the same document)
        self.metadata = AuthorizationServerMetadata(
            issuer, http=http, timeout=timeout, retry_seconds=refetch_seconds
        )

    async def _discover_jwks_url(self) -> str:
        found = (await self.metadata.document()).get("jwks_uri")
        if not isinstance(found, str):
            raise RuntimeError(f"the issuer {self.issuer} publishes no jwks_uri")  # noqa: TRY004  # a document's gap
        return found

    async def verify(self, token: str, resource: str) -> Principal:
        import jwt

        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError as exc:
            raise InvalidToken("The token is not a well-formed JWT") from exc
        algorithm = header.get("alg")
        if algorithm not in self.algorithms:
            raise InvalidToken(f"The token's signature algorithm {algorithm!r} is not accepted")
        if self.typ is not None:
            found = header.get("typ")
            if not isinstance(found, str) or _media_type(found) != self.typ:
                shown = repr(found[:40]) if isinstance(found, str) else "missing"
                raise InvalidToken(f"The token is not an access token (typ {shown}, not {self.typ!r})")
        key, key_algorithm = await self.jwks.key(header.get("kid"))
        if key_algorithm is not None and key_algorithm != algorithm:
            raise InvalidToken("The token's algorithm does not match its key's")
        expected = self.audience or [resource]
        try:
            claims = jwt.decode(
                token,
                key.key,
                algorithms=[algorithm],
                audience=expected,
                issuer=self.issuer,
                leeway=self.leeway,
                options={"require": self.required},
            )
        except jwt.ExpiredSignatureError as exc:
            raise InvalidToken("The token has expired") from exc
        except jwt.InvalidAudienceError as exc:
            raise InvalidToken(
                "The token was not issued for this resource (its audience is another)"
            ) from exc
        except jwt.InvalidIssuerError as exc:
            raise InvalidToken("The token was issued by another authorization server") from exc
        except jwt.MissingRequiredClaimError as exc:
            raise InvalidToken(f"The token has no {exc.claim!r} claim") from exc
        except jwt.ImmatureSignatureError as exc:
            raise InvalidToken("The token is not valid yet") from exc
        except jwt.PyJWTError as exc:
            raise InvalidToken("The token's signature or claims are invalid") from exc
        return Principal.from_claims(claims, roles_claim=self.roles_claim)


class IntrospectionVerifier:
    """Opaque (or any) tokens checked by the authorization server's RFC 7662 introspection endpoint.

    Args:
        url: the introspection endpoint.
        client_id, client_secret: this resource server's credentials there (HTTP Basic), if it needs them.
        audience: the ``aud`` an active token must name; default: this server's resource URI. A response
            without ``aud`` is refused unless ``require_audience=False`` (RFC 8707: a token for another
            resource must not work here).
        issuer: when given, the ``iss`` an active token must carry.
        roles_claim: where roles are in the response; None for none.
        http: an ``httpx.AsyncClient`` to use; default: one kept by this verifier.
    Answers are cached by the resource server (``ProtectedResource(cache_seconds=...)``), never past ``exp``.
    """

    def __init__(
        self,
        url: str,
        *,
        client_id: str | None = None,
        client_secret: str | None = None,
        audience: str | Sequence[str] | None = None,
        require_audience: bool = True,
        issuer: str | None = None,
        roles_claim: str | None = "roles",
        http: Any = None,
        timeout: float = 5.0,
    ) -> None:
        self.url = url
        self.client_id = client_id
        self.client_secret = client_secret
        self.audience = [audience] if isinstance(audience, str) else list(audience) if audience else None
        self.require_audience = require_audience
        self.issuer = issuer
        self.roles_claim = roles_claim
        self.timeout = timeout
        self._http = http

    async def verify(self, token: str, resource: str) -> Principal:
        import httpx

        if self._http is None:
            self._http = httpx.AsyncClient(timeout=self.timeout, follow_redirects=False)
        auth = (self.client_id, self.client_secret or "") if self.client_id else None
        try:
            response = await self._http.post(
                self.url,
                data={"token": token, "token_type_hint": "access_token"},
                auth=auth,
                headers={"accept": "application/json"},
            )
            response.raise_for_status()
            claims = response.json()
        except (httpx.HTTPError, ValueError) as exc:  # no verdict on the token: the server is down or broken
            logger.warning("token introspection at %s failed: %s", self.url, exc)
            raise VerifierUnavailable("The token could not be checked (introspection failed)") from exc
        if not isinstance(claims, dict) or claims.get("active") is not True:
            raise InvalidToken("The token is not active")
        exp = claims.get("exp")
        if isinstance(exp, (int, float)) and exp < time.time():
            raise InvalidToken("The token has expired")
        if self.issuer is not None and claims.get("iss") != self.issuer:
            raise InvalidToken("The token was issued by another authorization server")
        if ("aud" in claims or self.require_audience) and not audience_matches(
            claims.get("aud"), self.audience or [resource]
        ):
            raise InvalidToken("The token was not issued for this resource (its audience is another)")
        return Principal.from_claims(claims, roles_claim=self.roles_claim)


VerifyFn = Callable[
    [str, str], "Principal | Mapping[str, Any] | None | Awaitable[Principal | Mapping[str, Any] | None]"
]


class CallableVerifier:
    """A function of your own: ``(token, resource) -> Principal | claims | None`` (sync or async). A mapping is
    read as token claims; None (or raising :class:`InvalidToken`) refuses the token."""

    def __init__(self, fn: VerifyFn, *, roles_claim: str | None = "roles") -> None:
        self.fn = fn
        self.roles_claim = roles_claim

    async def verify(self, token: str, resource: str) -> Principal:
        found: Any = self.fn(token, resource)
        if inspect.isawaitable(found):
            found = await found
        if isinstance(found, Principal):
            return found
        if isinstance(found, Mapping):
            return Principal.from_claims(found, roles_claim=self.roles_claim)
        raise InvalidToken("The token is not valid")


def as_verifier(value: Any) -> TokenVerifier:
    """A verifier as given, or a function wrapped in :class:`CallableVerifier`."""
    if hasattr(value, "verify") and inspect.iscoroutinefunction(value.verify):
        return value  # type: ignore[no-any-return]
    if callable(value):
        return CallableVerifier(value)
    raise TypeError(
        f"a token verifier has an async verify(token, resource) method, or is a function: {value!r}"
    )
