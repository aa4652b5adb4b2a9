"""MCP Skills (SEP-2640, the ``io.modelcontextprotocol/skills`` extension) on the MCP face."""

from __future__ import annotations

from typing import Any

__all__ = ["skills_extension"]


def skills_extension(agent: Any) -> dict[str, Any]:
    """The extension entry the server declares in its capabilities: none until a skill package is served."""
    return {}
