"""What the MCP face reads of its agent (``agent.py`` passes the agent itself, seen through this Protocol)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from .._wiring import FaceHost

if TYPE_CHECKING:
    from ..capability import Capability
    from ..settings import Timing

__all__ = ["McpHost"]


class McpHost(FaceHost, Protocol):
    """The shared face host, plus the ``requestState`` key, resource lookup and the approvals' path."""

    approvals_path: str
    timing: Timing

    @property
    def secret(self) -> bytes: ...

    @property
    def secret_known(self) -> bool: ...

    async def signing_secret(self) -> bytes: ...

    def find_resource(self, uri: str) -> tuple[Capability, dict[str, str]] | None: ...
