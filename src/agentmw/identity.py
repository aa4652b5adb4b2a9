"""Who is calling: the identity that scopes tasks and sessions, taken from the host app's own auth.

``Agent(identify=...)`` is either a hook, ``identify(connection) -> str | None``, or the app's own FastAPI
dependency for the current user (``get_current_user``), solved with the request's headers as FastAPI solves
it for a route; the user it returns becomes a string by :func:`identity_of` (``docs/auth.md``).
"""

from __future__ import annotations

import hashlib
import inspect
import sys
import typing
import uuid
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AsyncExitStack
from typing import Any

from starlette.requests import HTTPConnection

from .errors import Forbidden, Unauthenticated

__all__ = [
    "IDENTITY_KEYS",
    "UNVERIFIED_PREFIX",
    "DependencyIdentity",
    "Forbidden",
    "IdentifyFn",
    "Unauthenticated",
    "as_identify",
    "authenticated_identity",
    "caller_from_headers",
    "from_dependency",
    "has_identity_source",
    "identity_of",
    "resolve_caller",
]

IdentifyFn = Callable[[HTTPConnection], "str | None | Awaitable[str | None]"]

UNVERIFIED_PREFIX = "credential:"
"""How an identity nobody vouches for begins: the hashed ``Authorization`` value (it only keeps callers apart)."""


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


# --- the app's own dependency as the identity ----------------------------------------------------------------

IDENTITY_KEYS = ("id", "sub", "username", "email")
"""Where :func:`identity_of` looks, in order, in the user a dependency returns (attributes, or mapping keys)."""

IdentityKey = str | Callable[[Any], Any]
_SOLVED = "agentmw.identified"  # scope key: this request's identity, per dependency, solved once


def identity_of(user: Any, key: IdentityKey | None = None) -> str | None:
    """The identity string of what an identity dependency returned; None when it says "nobody".

    A string is the identity itself; a number or UUID its ``str()``. Another value gives ``key`` (an
    attribute or mapping key, or a function of the user), by default the first of :data:`IDENTITY_KEYS`
    (``id``, ``sub``, ``username``, ``email``) it has, not None. TypeError when it has none of them: say
    which one with ``from_dependency(get_current_user, key=...)``.
    """
    if user is None or isinstance(user, str) and not user:
        return None
    if callable(key):
        return identity_of(key(user))
    if isinstance(user, bool):
        raise TypeError("the identity dependency returned a bool: return the user, or its id")
    if isinstance(user, str):
        return user
    if isinstance(user, int | uuid.UUID):
        return str(user)
    for name in (key,) if key else IDENTITY_KEYS:
        value = user.get(name) if isinstance(user, Mapping) else getattr(user, name, None)
        if value is not None and not (isinstance(value, str) and not value):
            return identity_of(value)
    wanted = repr(key) if key else ", ".join(IDENTITY_KEYS)
    raise TypeError(
        f"the identity dependency returned a {type(user).__name__} with no {wanted}: name its identity "
        "with Agent(identify=from_dependency(get_current_user, key=...)) (agentmw.identity)"
    )


class DependencyIdentity:
    """An ``identify`` hook that solves a FastAPI dependency (``get_current_user``) against the request, with
    its sub-dependencies, ``yield`` cleanups and the app's ``dependency_overrides``, as FastAPI does for a
    route; what it returns becomes the identity by :func:`identity_of`.

    An ``HTTPException`` with a 4xx status (401 or 403 from an OAuth2 scheme or a "could not validate
    credentials"), or a header or cookie it needs that is missing, means "not authenticated": the hook returns
    None, as a hand-written one would. Any other error is the app's, and propagates.
    """

    def __init__(self, dependency: Any, *, key: IdentityKey | None = None) -> None:
        from fastapi import params
        from fastapi.dependencies.utils import get_dependant

        marker = dependency if isinstance(dependency, params.Depends) else params.Depends(dependency)
        if not callable(marker.dependency):
            raise TypeError(f"identify: a FastAPI dependency is a callable, not {marker.dependency!r}")
        self.dependency = marker.dependency
        self.key = key

        def user(value: Any = marker) -> None: ...

        self._dependant = get_dependant(path="", call=user)

    def __repr__(self) -> str:
        return f"DependencyIdentity({getattr(self.dependency, '__qualname__', self.dependency)!r})"

    async def __call__(self, connection: HTTPConnection) -> str | None:
        solved: dict[int, str | None] = connection.scope.setdefault(_SOLVED, {})
        if id(self) not in solved:
            solved[id(self)] = await self._solve(connection)
        return solved[id(self)]

    async def _solve(self, connection: HTTPConnection) -> str | None:
        from fastapi.dependencies.utils import solve_dependencies
        from starlette.exceptions import HTTPException
        from starlette.requests import Request

        try:
            async with (
                AsyncExitStack() as stack
            ):  # closed before returning: the db session of get_db ends here
                scope = dict(connection.scope)
                scope["fastapi_inner_astack"] = stack
                scope["fastapi_function_astack"] = stack
                scope.setdefault("query_string", b"")
                app = scope.get("app")
                found = await solve_dependencies(
                    request=Request(scope),
                    dependant=self._dependant,
                    async_exit_stack=stack,
                    embed_body_fields=False,
                    dependency_overrides_provider=app if hasattr(app, "dependency_overrides") else None,
                )
                if found.errors:  # a header, cookie or query value it reads is missing or invalid
                    return None
                return identity_of(found.values["value"], self.key)
        except HTTPException as exc:
            if 400 <= exc.status_code < 500:
                return None
            raise


def from_dependency(dependency: Any, *, key: IdentityKey | None = None) -> DependencyIdentity:
    """``Agent(identify=from_dependency(get_current_user, key="email"))``: the app's dependency as the identity,
    with ``key`` choosing what of the user it returns names them (:func:`identity_of`)."""
    return DependencyIdentity(dependency, key=key)


def as_identify(identify: Any) -> IdentifyFn | None:
    """What ``Agent(identify=...)`` keeps: a FastAPI dependency made a :class:`DependencyIdentity`, a hook as
    it is.

    A dependency is a ``Depends(...)``, or a callable that declares one (``Depends``, ``Security``,
    ``Header``, ``Cookie``... as a default or in ``Annotated``), or one that cannot be called with the
    connection alone. A callable of one plain parameter is a hook, called as ``identify(connection)``.
    """
    if identify is None or isinstance(identify, DependencyIdentity):
        return identify
    security = sys.modules.get("fastapi.security.base")
    if security is not None and isinstance(identify, security.SecurityBase):
        raise TypeError(
            f"identify={type(identify).__name__}(...) would make the credential itself the identity: "
            "pass the dependency that turns it into a user (identify=get_current_user)"
        )
    if _is_dependency(identify):
        return DependencyIdentity(identify)
    if not callable(identify):
        raise TypeError(f"identify is a function of the connection or a FastAPI dependency, not {identify!r}")
    return typing.cast(IdentifyFn, identify)


def _is_dependency(fn: Any) -> bool:
    params = sys.modules.get(
        "fastapi.params"
    )  # nothing declares a FastAPI dependency before fastapi is imported
    if params is not None and isinstance(fn, params.Depends):
        return True
    if not callable(fn):
        return False
    try:
        signature = inspect.signature(fn, eval_str=True)
    except Exception:  # noqa: BLE001  # an annotation that does not resolve here: read them as written
        try:
            signature = inspect.signature(fn)
        except (TypeError, ValueError):
            return False
    if params is not None:
        markers = (params.Depends, params.Param, params.Body)
        for parameter in signature.parameters.values():
            metadata = getattr(parameter.annotation, "__metadata__", ())
            if isinstance(parameter.default, markers) or any(isinstance(m, markers) for m in metadata):
                return True
    try:
        signature.bind(None)
    except TypeError:
        return True  # identify(connection) cannot call it: only FastAPI can (no parameter, or several)
    return False
