"""Refusals at the identity boundary beyond plain 401/403: a scope to step up to, and a rate limit."""

from __future__ import annotations

from collections.abc import Iterable

from ..identity import Forbidden

__all__ = ["InsufficientScope", "RateLimited"]


class InsufficientScope(Forbidden):
    """The token is valid but does not grant ``scopes``: HTTP 403 with
    ``WWW-Authenticate: Bearer error="insufficient_scope", scope="..."``, so the client can step up."""

    status = 403

    def __init__(self, message: str, *, scopes: Iterable[str], challenge: str) -> None:
        super().__init__(message)
        self.scopes = tuple(scopes)
        self.challenge = challenge
        self.headers = [(b"www-authenticate", challenge.encode("latin-1", "replace"))]


class RateLimited(Forbidden):
    """The caller used up a rate limit: HTTP 429 with ``Retry-After`` (whole seconds, rounded up)."""

    status = 429

    def __init__(self, message: str, *, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = retry_after
        self.headers = [(b"retry-after", str(max(1, int(-(-retry_after // 1)))).encode())]
