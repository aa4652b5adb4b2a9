"""MCP Apps (SEP-1865, the ``io.modelcontextprotocol/ui`` extension) on the MCP face."""

from __future__ import annotations

from typing import Any

__all__ = ["apps_extension"]


def apps_extension(agent: Any) -> dict[str, Any]:
    """The extension entry the server declares in its capabilities: none until a tool has a UI."""
    return {}
