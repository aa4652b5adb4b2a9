"""What an agent's MCP face is configured with (``Agent(mcp=McpSettings(...))``)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["McpSettings"]


@dataclass(frozen=True, slots=True)
class McpSettings:
    """MCP options of an :class:`~agentmw.Agent`.

    Sessions, ``requestState`` values and their lifetimes are the agent's ``Limits`` (``max_sessions``,
    ``max_used_states``) and ``Timing`` (``session_idle_seconds``, ``input_state_ttl_seconds``); the key that
    signs ``requestState`` is ``Agent(secret=...)``.

    Args:
        path: where the MCP endpoint lives, relative to where the agent is mounted.
    """

    path: str = "/mcp"

    def __post_init__(self) -> None:
        object.__setattr__(self, "path", "/" + self.path.strip("/"))
