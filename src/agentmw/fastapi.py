"""FastAPI helpers. Importing this module imports FastAPI (the ``fastapi`` extra).

A route handler that is also a capability and wants a :class:`~agentmw.Context` declares
``ctx: RouteContext``: over MCP agentmw injects the live context, and over plain HTTP FastAPI
injects a context whose progress and logs go nowhere and which cannot ask questions.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends
from starlette.requests import Request

from ._dispatch import CONTEXT_KEY
from .context import Context

__all__ = ["RouteContext", "http_context"]


def http_context(request: Request) -> Context:
    """The live context of an agent's call (which agentmw sends through the route), else the context of a plain
    HTTP call to the route handler."""
    live = request.scope.get(CONTEXT_KEY)
    if isinstance(live, Context):
        return live
    return Context(request=request)


RouteContext = Annotated[Context, Depends(http_context)]
