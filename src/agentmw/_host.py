"""Resolve a FastAPI route handler's own dependencies for a call that did not come through its route.

FastAPI is imported here, lazily, and only for capabilities whose parameters use ``Depends``,
``Security``, ``Header`` or ``Cookie``. The dependencies see a request built from the agent request's
own scope (its headers, including ``Authorization``), so no second HTTP round trip is made.
"""

from __future__ import annotations

import inspect
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING, Any, Protocol

from .errors import AgentmwError

if TYPE_CHECKING:
    from starlette.requests import HTTPConnection

__all__ = ["HostDependencyError", "resolve_host_dependencies"]


class HostDependencyError(AgentmwError):
    """A dependency's parameters (a header, a cookie) were missing or invalid."""


class _HostParams(Protocol):
    host_params: tuple[inspect.Parameter, ...]
    host_dependant: Any  # FastAPI's Dependant for host_params, made on first use


class HostCapability(Protocol):
    """What this module reads of a capability: the parameters it takes from the host app."""

    @property
    def params(self) -> _HostParams: ...


def _dependant_for(capability: HostCapability) -> Any:
    dependant = capability.params.host_dependant
    if dependant is None:
        from fastapi.dependencies.utils import get_dependant

        def host_params(**kwargs: Any) -> None: ...

        # a function may carry __signature__ (inspect reads it), which its stub does not declare
        host_params.__signature__ = inspect.Signature(list(capability.params.host_params))  # type: ignore[attr-defined]
        dependant = get_dependant(path="", call=host_params)
        capability.params.host_dependant = dependant
    return dependant


async def resolve_host_dependencies(
    capability: HostCapability, connection: HTTPConnection | None, stack: AsyncExitStack
) -> dict[str, Any]:
    from fastapi.dependencies.utils import solve_dependencies
    from starlette.requests import Request

    if connection is None:
        raise HostDependencyError(
            "this capability needs the host app's dependencies, but the call has no request"
        )
    scope = dict(connection.scope)
    scope["fastapi_inner_astack"] = stack
    scope["fastapi_function_astack"] = stack
    scope.setdefault("query_string", b"")
    request = Request(scope)
    app = scope.get("app")
    solved = await solve_dependencies(
        request=request,
        dependant=_dependant_for(capability),
        async_exit_stack=stack,
        embed_body_fields=False,
        dependency_overrides_provider=app if hasattr(app, "dependency_overrides") else None,
    )
    if solved.errors:
        details = "; ".join(
            f"{'.'.join(str(p) for p in err.get('loc', ()))}: {err.get('msg', '')}" for err in solved.errors
        )
        raise HostDependencyError(details)
    return solved.values
