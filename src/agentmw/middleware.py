"""``AgentMiddleware``: serves the agent's paths and hands every other request to the host app untouched."""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING

from ._edge import cors_policy
from ._scope import HOST_APP_KEY, route_path
from ._types import ASGIApp, Message, Receive, Scope, Send
from .auth.wellknown import WellKnown, serves

if TYPE_CHECKING:
    from .agent import Agent

__all__ = ["HOST_APP_KEY", "AgentMiddleware", "route_path"]  # the scope's two, defined in _scope.py

_CARD_PATHS = frozenset({"/.well-known/agent-card.json", "/.well-known/agent.json"})


async def _not_found(scope: Scope, receive: Receive, send: Send) -> None:
    if scope["type"] == "http":
        await send(
            {
                "type": "http.response.start",
                "status": 404,
                "headers": [(b"content-type", b"text/plain"), (b"content-length", b"9")],
            }
        )
        await send({"type": "http.response.body", "body": b"Not Found"})


class AgentMiddleware:
    """``app.add_middleware(AgentMiddleware, agent=agent)``.

    Needs no lifespan: everything it keeps (sessions, streams) lives in the agent's endpoints and is
    created on first use. Without a wrapped ``app`` it is a standalone app that answers 404 elsewhere,
    which is what ``agent.asgi()`` mounts. It may be added before or after the app's ``CORSMiddleware``: the
    app's CORS policy covers the agent's paths either way (docs/fastapi-migration.md).
    """

    def __init__(self, app: ASGIApp | None, agent: Agent) -> None:
        self.app = app or _not_found
        self.agent = agent
        self.mcp_path = agent.mcp_path
        self.a2a_path = agent.a2a_path
        self.a2a_prefix = agent.a2a_path + "/"
        self.agui_prefix = agent.agui_path + "/"
        self.approvals_prefix = agent.approvals_path + "/"
        self._bound: object = None
        self._wraps = app is not None  # agent.asgi() wraps nothing: a route call then goes to the route's app
        self.well_known: WellKnown | None = None
        if agent.access is not None or getattr(agent.a2a.push, "signer", None) is not None:
            self.well_known = WellKnown(agent)
        # The app's CORSMiddleware added before this one sits below it, where the agent's paths never reach: a
        # copy of it serves them (preflights answered, headers on every answer), so either order works.
        self.cors: ASGIApp | None = None
        cors = cors_policy(self.app)
        if cors is not None:
            adopted = copy.copy(cors)
            adopted.app = self._behind_cors
            self.cors = adopted

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            # a route exposed as a capability is called through the app below this middleware (_dispatch.py)
            if self._wraps:
                scope[HOST_APP_KEY] = self.app
            host = scope.get("app")
            if (
                host is not self._bound and host is not None
            ):  # the app's first request: the agent starts for it
                self._bound = host
                self.agent.bind_host(host)
            face = self._face(route_path(scope))
            if face is not None:  # each face is behind the one HTTP edge (_edge.py): Host, Origin, body
                await (face if self.cors is None else self.cors)(scope, receive, send)
                return
        elif scope["type"] == "lifespan":  # not needed, but when the server sends one: hand work over first
            await self.app(scope, self._closing(receive), send)
            return
        await self.app(scope, receive, send)

    def _closing(self, receive: Receive) -> Receive:
        """``receive``, closing the agent's face work (``Agent.aclose``) when the server shuts down, before the
        host app hears of it: AG-UI runs are handed to another replica at once rather than when a lease lapses."""

        async def closing_receive() -> Message:
            message = await receive()
            if message.get("type") == "lifespan.shutdown":
                await self.agent.aclose()
            return message

        return closing_receive

    def _face(self, path: str) -> ASGIApp | None:
        """The agent's app serving ``path``, or None for a host route."""
        if path.rstrip("/") == self.mcp_path:
            return self.agent.mcp
        if path == self.a2a_path or path.startswith(self.a2a_prefix) or path in _CARD_PATHS:
            return self.agent.a2a_app
        if path.startswith(self.agui_prefix):
            return self.agent.agui_app
        if path.startswith(self.approvals_prefix):
            return self.agent.approvals_app
        if path.startswith("/.well-known/") and self.well_known is not None and serves(self.agent, path):
            return self.well_known  # docs/auth.md: resource metadata, push JWKS
        return None

    async def _behind_cors(self, scope: Scope, receive: Receive, send: Send) -> None:
        """What the adopted CORS policy wraps: the face of the request's path (it only ever sees the agent's)."""
        face = self._face(route_path(scope))
        assert face is not None
        await face(scope, receive, send)
