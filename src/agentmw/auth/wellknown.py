"""The well-known documents of an agent with auth: RFC 9728 protected resource metadata and the push JWKS."""

from __future__ import annotations

from typing import Any, Protocol
from urllib.parse import urlsplit

from .._scope import route_path
from .._transport import send_json
from .._types import Receive, Scope, Send
from .errors import MisdirectedRequest
from .resource import WELL_KNOWN_PRM, ProtectedResource

__all__ = ["JWKS_PATH", "Documented", "WellKnown", "serves"]

JWKS_PATH = "/.well-known/jwks.json"
"""Where the agent publishes the public key its A2A push notifications are signed with (``PushSigner``)."""


class _Guarded(Protocol):
    @property
    def resource(self) -> ProtectedResource | None: ...


class _Pushes(Protocol):
    @property
    def push(self) -> object | None: ...


class _Signs(Protocol):
    async def jwks(self, state: Any) -> dict[str, Any]: ...


class Documented(Protocol):
    """What the documents read from the agent (``agent.py`` passes itself): read on every request, so an
    access or push policy set after the middleware was made is served."""

    @property
    def access(self) -> _Guarded | None: ...
    @property
    def a2a(self) -> _Pushes: ...
    @property
    def state(self) -> Any: ...
    @property
    def mcp_path(self) -> str: ...


def serves(agent: Documented, path: str) -> bool:
    """Whether ``path`` (relative to where the agent is mounted) is one of these documents."""
    if path.startswith(WELL_KNOWN_PRM):
        return agent.access is not None and agent.access.resource is not None
    return path == JWKS_PATH and _signer(agent) is not None


def _signer(agent: Documented) -> _Signs | None:
    push = agent.a2a.push
    found: _Signs | None = getattr(push, "signer", None) if push is not None else None
    return found


class WellKnown:
    """``GET /.well-known/oauth-protected-resource[<resource path>]`` and ``GET /.well-known/jwks.json``."""

    def __init__(self, agent: Documented) -> None:
        self.agent = agent

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["method"] not in ("GET", "HEAD"):
            await send_json(send, 405, {"error": "method_not_allowed"}, [(b"allow", b"GET, HEAD")])
            return
        path = route_path(scope)
        if not serves(self.agent, path):
            await send_json(send, 404, {"error": "not_found"})
            return
        cors = [(b"access-control-allow-origin", b"*")]  # public documents a browser client may read
        if path == JWKS_PATH:
            signer = _signer(self.agent)
            assert signer is not None  # serves() said so
            await send_json(
                send,
                200,
                await signer.jwks(self.agent.state),
                [(b"cache-control", b"public, max-age=300"), *cors],
            )
            return
        access = self.agent.access
        resource = access.resource if access is not None else None
        assert resource is not None
        try:  # a foreign Host, or another port, must not become the published resource
            resource.check_host(scope)
            served = urlsplit(resource.resource_url(scope)).path.rstrip(
                "/"
            )  # a configured resource's own path
        except MisdirectedRequest as exc:
            await send_json(send, 421, {"error": "misdirected_request", "error_description": str(exc)})
            return
        suffix = path[len(WELL_KNOWN_PRM) :].rstrip("/")
        root = scope.get("root_path", "").rstrip("/")
        if suffix not in ("", served, root + self.agent.mcp_path, self.agent.mcp_path):
            await send_json(send, 404, {"error": "not_found"})
            return
        # A configured resource is the same document for every Host: a shared cache may keep it. One derived from
        # the request names the Host it came with, and a cache (a CDN keyed on its own origin name, one that drops
        # the port) may not key on exactly that: it is never stored.
        cache = b"no-store" if resource.derived else b"public, max-age=3600"
        await send_json(send, 200, resource.metadata(scope), [(b"cache-control", cache), *cors])
