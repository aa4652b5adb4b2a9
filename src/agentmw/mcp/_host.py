"""What the MCP face reads of its agent (``agent.py`` passes the agent itself, seen through this Protocol)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from .._wiring import FaceHost
from ..context import Services

if TYPE_CHECKING:
    from ..capability import Capability
    from ..settings import Timing

__all__ = ["McpHost"]


class McpHost(FaceHost, Services, Protocol):
    """The shared face host, plus the ``requestState`` key, resource lookup and the approvals' path; and, since
    the MCP face hands its agent to every call's context, what the core reads of it (``context.Services``)."""

    @property
    def approvals_path(self) -> str: ...
    @property
    def timing(self) -> Timing: ...

    @property
    def secret(self) -> bytes: ...

    @property
    def secret_known(self) -> bool: ...

    @property
    def verification_secrets(self) -> tuple[bytes, ...]: ...

    async def signing_secret(self) -> bytes: ...

    async def refresh_secret(self, min_age: float = 1.0) -> bool: ...

    def find_resource(self, uri: str) -> tuple[Capability, dict[str, str]] | None: ...
