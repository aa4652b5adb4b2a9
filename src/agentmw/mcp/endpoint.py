"""The MCP endpoint: transport security, then the era each request asks for.

A request whose ``MCP-Protocol-Version`` names a version outside the handshake era is served by the
stateless (2026-07-28) path, so an unknown version is told which ones exist; anything else is the
handshake era, with ``initialize`` and ``Mcp-Session-Id``.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from .._types import Receive, Scope, Send
from . import legacy, modern
from ._wire import HANDSHAKE_VERSIONS, INVALID_REQUEST, PARSE_ERROR, error_body, header_map, json_response, \
    plain_response, read_body
from .methods import Catalog

if TYPE_CHECKING:
    from ..agent import Agent

__all__ = ["McpEndpoint", "Incoming"]

_MAX_DEPTH_ERRORS = (ValueError, RecursionError)


class Incoming:
    """A parsed POST: its headers and decoded body, or the error response already sent."""

    __slots__ = ("headers", "raw_headers", "body", "accept_json", "accept_sse")

    def __init__(self, scope: Scope) -> None:
        self.raw_headers = scope["headers"]
        self.headers = header_map(scope)
        accept = self.headers.get("accept", "")
        wildcard = "*/*" in accept
        self.accept_json = wildcard or "application/json" in accept or "application/*" in accept
        self.accept_sse = wildcard or "text/event-stream" in accept or "text/*" in accept
        self.body: Any = None


class McpEndpoint:
    """ASGI app serving one agent's MCP endpoint in both protocol eras."""

    def __init__(self, agent: Agent) -> None:
        self.agent = agent
        self.catalog = Catalog(agent)
        self.sessions = legacy.SessionStore(agent)
        self.listeners = modern.ListenHub(agent)
        self.server_info = {"name": agent.name, "version": agent.version}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        incoming = Incoming(scope)
        headers = incoming.headers
        agent = self.agent
        if not agent.host_allowed(headers.get("host", "")):
            await json_response(send, 421, error_body(None, INVALID_REQUEST, "Invalid Host header"))
            return
        origin = headers.get("origin")
        if origin is not None and not agent.origin_allowed(origin):
            await json_response(send, 403, error_body(None, INVALID_REQUEST, "Origin not allowed"))
            return
        method = scope["method"]
        if method == "POST" and "application/json" not in headers.get("content-type", "").lower():
            await json_response(send, 400, error_body(None, INVALID_REQUEST,
                                                      "Content-Type must be application/json"))
            return
        version = headers.get("mcp-protocol-version")
        if version is not None and version.strip() not in HANDSHAKE_VERSIONS:
            await modern.handle(self, incoming, scope, receive, send)
        else:
            await legacy.handle(self, incoming, scope, receive, send)

    async def read_json(self, incoming: Incoming, receive: Receive, send: Send, *, modern_era: bool) -> bool:
        """Read and decode the body into ``incoming.body``; on failure answer and return False."""
        try:
            raw = await read_body(receive, self.agent.max_body_bytes)
        except ConnectionAbortedError:
            return False
        if raw is None:
            await json_response(send, 413, error_body(None, INVALID_REQUEST, "Request body too large"))
            return False
        try:
            incoming.body = json.loads(raw)
        except _MAX_DEPTH_ERRORS:
            await json_response(send, 400, error_body(None, PARSE_ERROR, "Parse error: the body is not valid JSON"))
            return False
        return True


async def method_not_allowed(send: Send, allow: str) -> None:
    await plain_response(send, 405, [(b"allow", allow.encode())])
