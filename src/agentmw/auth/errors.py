"""Refusals at the identity boundary beyond plain 401/403: a malformed credential, a scope to step up to, a
foreign ``Host``, a rate limit, and a token that cannot be checked now.

Each is an :class:`~agentmw.errors.AccessRefused` carrying the HTTP ``status`` and ``headers`` every face answers
with. Only :class:`InsufficientScope` is a :class:`~agentmw.errors.Forbidden` (403): the others are not "not
allowed" but "asked wrongly" (400, 421), "too often" (429) or "cannot tell now" (503).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar

from ..errors import AccessRefused, Forbidden, retry_after_header

__all__ = ["AuthUnavailable", "InsufficientScope", "InvalidRequest", "MisdirectedRequest", "RateLimited"]


def _challenge_headers(challenge: str) -> list[tuple[bytes, bytes]]:
    return [(b"www-authenticate", challenge.encode("latin-1", "replace"))]


class InsufficientScope(Forbidden):
    """The token is valid but does not grant ``scopes``: HTTP 403 with
    ``WWW-Authenticate: Bearer error="insufficient_scope", scope="..."``, so the client can step up."""

    status: ClassVar[int] = 403

    def __init__(self, message: str, *, scopes: Iterable[str], challenge: str) -> None:
        super().__init__(message)
        self.scopes = tuple(scopes)
        self.challenge = challenge
        self.headers = _challenge_headers(challenge)


class InvalidRequest(AccessRefused):
    """The request carries its credentials in a way no token can be read from (RFC 6750 section 3.1,
    ``invalid_request``; e.g. two ``Authorization`` headers): HTTP 400 with the challenge, so a client sees why."""

    status: ClassVar[int] = 400

    def __init__(self, message: str, *, challenge: str) -> None:
        super().__init__(message)
        self.challenge = challenge
        self.headers = _challenge_headers(challenge)


class RateLimited(AccessRefused):
    """The caller used up a rate limit: HTTP 429 with ``Retry-After`` (whole seconds, rounded up)."""

    status: ClassVar[int] = 429

    def __init__(self, message: str, *, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = retry_after
        self.headers = [retry_after_header(retry_after)]


class AuthUnavailable(AccessRefused):
    """Tokens cannot be checked now (the issuer's JWKS or introspection is down): HTTP 503 with ``Retry-After``,
    not 401, so a client keeps its token and tries again."""

    status: ClassVar[int] = 503

    def __init__(self, message: str, *, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = retry_after
        self.headers = [retry_after_header(retry_after)]


class MisdirectedRequest(AccessRefused):
    """The request names a ``Host`` this agent does not serve (``Agent(allowed_hosts=...)``): HTTP 421, as the MCP
    face answers it. With no ``resource=``, the audience a token must name is built from ``Host``, so a foreign
    one would let a token issued for another resource server be replayed here (RFC 8707)."""

    status: ClassVar[int] = 421

    def __init__(self, message: str = "Invalid Host header") -> None:
        super().__init__(message)
