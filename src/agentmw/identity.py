"""Who is calling: the identity that scopes tasks and sessions, taken from the host app's own auth."""

from __future__ import annotations

import hashlib
import inspect
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import HTTPConnection

__all__ = ["Unauthenticated", "Forbidden", "resolve_caller", "caller_from_headers", "IdentifyFn",
           "authenticated_identity", "has_identity_source", "UNVERIFIED_PREFIX"]

IdentifyFn = Callable[[HTTPConnection], "str | None | Awaitable[str | None]"]

UNVERIFIED_PREFIX = "credential:"
"""How an identity nobody vouches for begins: the hashed ``Authorization`` value (it only keeps callers apart)."""


class Unauthenticated(Exception):
    """Raised by an ``identify`` function for missing or invalid credentials: the face answers 401."""

    def __init__(self, message: str = "Authentication required", *, challenge: str = "Bearer") -> None:
        super().__init__(message)
        self.challenge = challenge


class Forbidden(Exception):
    """The caller is known but not allowed: the face answers 403."""


def caller_from_headers(scope: Any, authorization: str | None, identify: IdentifyFn | None) -> str | None:
    """The identity without awaiting anything, when no ``identify`` hook or host user decides it."""
    if identify is not None or scope.get("user") is not None:
        return None
    if authorization:
        return UNVERIFIED_PREFIX + hashlib.sha256(authorization.encode()).hexdigest()[:24]
    return "anonymous"


def has_identity_source(scope: Any, identify: IdentifyFn | None) -> bool:
    """Whether the app authenticates callers: an ``identify`` hook, or host auth that sets ``scope["user"]``."""
    return identify is not None or scope.get("user") is not None


async def authenticated_identity(connection: HTTPConnection, identify: IdentifyFn | None) -> str | None:
    """The identity the app's own authentication vouches for: ``identify(connection)``, else the host's
    authenticated user; None when neither does. Never a header's value: what decides who a person is
    (out-of-band approvals) trusts only this. ``identify`` may raise :class:`Unauthenticated`."""
    if identify is not None:
        found: Any = identify(connection)
        if inspect.isawaitable(found):
            found = await found
        if found:
            return str(found)
    user = connection.scope.get("user")
    if user is not None and getattr(user, "is_authenticated", False):
        return f"user:{getattr(user, 'identity', None) or getattr(user, 'display_name', '')}"
    return None


async def resolve_caller(connection: HTTPConnection, identify: IdentifyFn | None) -> str:
    """The caller's identity: ``identify(connection)``, else the host's authenticated user, else the
    credential itself (hashed), else ``"anonymous"``. The hashed credential only keeps one caller's tasks
    and sessions apart; it proves nothing about who the caller is."""
    found = await authenticated_identity(connection, identify)
    if found is not None:
        return found
    authorization = connection.headers.get("authorization")
    if authorization:
        return UNVERIFIED_PREFIX + hashlib.sha256(authorization.encode()).hexdigest()[:24]
    return "anonymous"
