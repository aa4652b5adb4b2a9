"""Refusals at the identity boundary beyond plain 401/403: a scope to step up to, and a rate limit."""

from __future__ import annotations

from collections.abc import Iterable

from ..identity import Forbidden

__all__ = ["AuthUnavailable", "InsufficientScope", "InvalidRequest", "MisdirectedRequest", "RateLimited"]


class InsufficientScope(Forbidden):
    """The token is valid but does not grant ``scopes``: HTTP 403 with
    ``WWW-Authenticate: Bearer error="insufficient_scope", scope="..."``, so the client can step up."""

    status = 403

    def __init__(self, message: str, *, scopes: Iterable[str], challenge: str) -> None:
        super().__init__(message)
        self.scopes = tuple(scopes)
        self.challenge = challenge
        self.headers = [(b"www-authenticate", challenge.encode("latin-1", "replace"))]


class InvalidRequest(Forbidden):
    """The request carries its credentials in a way no token can be read from (RFC 6750 section 3.1,
    ``invalid_request``; e.g. two ``Authorization`` headers): HTTP 400 with the challenge, so a client sees why."""

    status = 400

    def __init__(self, message: str, *, challenge: str) -> None:
        super().__init__(message)
        self.challenge = challenge
        self.headers = [(b"www-authenticate", challenge.encode("latin-1", "replace"))]


class RateLimited(Forbidden):
    """The caller used up a rate limit: HTTP 429 with ``Retry-After`` (whole seconds, rounded up)."""

    status = 429

    def __init__(self, message: str, *, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = retry_after
        self.headers = [(b"retry-after", str(max(1, int(-(-retry_after // 1)))).encode())]


class AuthUnavailable(Forbidden):
    """Tokens cannot be checked now (the issuer's JWKS or introspection is down): HTTP 503 with ``Retry-After``,
    not 401, so a client keeps its token and tries again."""

    status = 503

    def __init__(self, message: str, *, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = retry_after
        self.headers = [(b"retry-after", str(max(1, int(-(-retry_after // 1)))).encode())]


class MisdirectedRequest(Forbidden):
    """The request names a ``Host`` this agent does not serve (``Agent(allowed_hosts=...)``): HTTP 421, as the MCP
    face answers it. With no ``resource=``, the audience a token must name is built from ``Host``, so a foreign
    one would let a token issued for another resource server be replayed here (RFC 8707)."""

    status = 421

    def __init__(self, message: str = "Invalid Host header") -> None:
        super().__init__(message)
