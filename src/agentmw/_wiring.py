"""What every face reads of the agent that builds it: a narrow Protocol, so no face imports ``Agent``.

The agent builds each face once, passing it this host, its own settings object (``McpSettings``,
``A2ASettings``, ``AguiSettings``), the shared ``Limits`` and ``Timing``, and the lifecycle service it
serves (MCP sessions, A2A operations, AG-UI runs). A face's own Protocol adds what only it reads.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from .auth.access import Access
    from .capability import Capability
    from .identity import IdentifyFn
    from .observability.telemetry import Telemetry
    from .state import State

__all__ = ["FaceHost", "Listener"]

Listener = Callable[[str, Mapping[str, Any]], None]
"""``listener(event, data)``: list changes and resource updates (``Agent.subscribe``)."""


class FaceHost(Protocol):
    """The registry, the caller's identity and access, telemetry and the shared state, as a face sees them
    (read only: a face changes none of them)."""

    @property
    def name(self) -> str: ...
    @property
    def version(self) -> str: ...
    @property
    def instructions(self) -> str | None: ...
    @property
    def tools(self) -> Mapping[str, Capability]: ...
    @property
    def resources(self) -> Mapping[str, Capability]: ...
    @property
    def templates(self) -> Mapping[str, Capability]: ...
    @property
    def prompts(self) -> Mapping[str, Capability]: ...
    @property
    def skills(self) -> Mapping[str, Capability]: ...
    @property
    def revision(self) -> int: ...
    @property
    def access(self) -> Access | None: ...
    @property
    def identify(self) -> IdentifyFn | None: ...
    @property
    def telemetry(self) -> Telemetry | None: ...
    @property
    def state(self) -> State: ...

    def subscribe(self, listener: Listener) -> Callable[[], None]: ...

    def shown(
        self, kind: str, protocol: str, items: list[Any], scope: Any, caller: str | None
    ) -> list[Any]: ...
