"""What the entry middleware puts in an ASGI scope and how every face reads the path it serves.

A foundation module: the middleware (entry), the faces and the well-known documents (auth) all read these,
so none of them has to import the middleware to find out where a request is going.
"""

from __future__ import annotations

from ._types import Scope

__all__ = ["HOST_APP_KEY", "route_path"]

HOST_APP_KEY = "agentmw.host_app"
"""Scope key: the ASGI app the middleware wraps, so an agent call of a host route runs what HTTP would."""


def route_path(scope: Scope) -> str:
    """The path relative to where this app is mounted (Starlette keeps the full path in ``path``)."""
    path: str = scope["path"]
    root: str = scope.get("root_path", "")
    if root and path.startswith(root):
        return path[len(root) :] or "/"
    return path
