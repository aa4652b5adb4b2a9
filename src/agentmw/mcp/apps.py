"""MCP Apps (SEP-1865, the ``io.modelcontextprotocol/ui`` extension) on the MCP face.

The server declares the extension, in both eras, once one of its tools has a UI or it serves a ``ui://``
resource; the descriptors and the resource contents carry ``_meta.ui`` (``convert.py``). Nothing else of the
extension runs on the server: the host renders the UI and relays its requests as ordinary MCP calls.
"""

from __future__ import annotations

from typing import Any

from ..apps import EXTENSION_ID

__all__ = ["apps_extension"]


def apps_extension(agent: Any) -> dict[str, Any]:
    """The extension entry the server declares in its capabilities: none until a tool has a UI or a ``ui://``
    resource is served. The settings object is empty: the server has nothing to choose (the official SDKs'
    servers declare it so); the client's entry lists the ``mimeTypes`` it renders."""
    if any(
        cap.ui is not None
        for table in (agent.tools, agent.resources, agent.templates)
        for cap in table.values()
    ):
        return {EXTENSION_ID: {}}
    return {}
