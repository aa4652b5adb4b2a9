"""Bridges: a remote A2A agent or MCP server as capabilities of the agent (docs/bridges.md).

``agent.bridge(A2APeer(url, version="1.0"))`` or ``agent.bridge(McpPeer(url, revision="2026-07-28"))``: each
remote skill, tool, resource and prompt becomes a :class:`~agentmw.capability.Capability` of the same registry,
so the whole pipeline applies and every face serves it. Nothing is imported or connected until it is used.
"""

from __future__ import annotations

from typing import Any

from ..egress import Egress, EgressRefused
from ._peer import Breaker, BridgeError, Peer, ServiceAccount, TokenExchange, VersionMismatch

__all__ = [
    "A2A_VERSION",
    "HANDSHAKE_REVISION",
    "MCP_REVISIONS",
    "STATELESS_REVISION",
    "A2APeer",
    "Breaker",
    "BridgeError",
    "Egress",
    "EgressRefused",
    "McpPeer",
    "Peer",
    "ServiceAccount",
    "TokenExchange",
    "VersionMismatch",
]

_LAZY = {
    "A2A_VERSION": "a2a",
    "A2APeer": "a2a",
    "McpPeer": "mcp",
    "MCP_REVISIONS": "mcp",
    "HANDSHAKE_REVISION": "mcp",
    "STATELESS_REVISION": "mcp",
}


def __getattr__(name: str) -> Any:  # each peer's module (and its client) is imported on use
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'agentmw.bridges' has no attribute {name!r}")
    from importlib import import_module

    return getattr(import_module(f"{__name__}.{module}"), name)
