"""What a running capability tells the world as it goes, protocol-neutral.

A function produces these through its :class:`~agentmw.Context` (``say``, ``step``, ``reason``,
``call``, ``state``, ``surface``); each face renders the ones its protocol can carry (AG-UI all of them) and drops
the rest.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = [
    "ArtifactUpdate",
    "CoreEvent",
    "Progress",
    "ReasoningDelta",
    "StateChanged",
    "StepFinished",
    "StepStarted",
    "SurfaceUpdate",
    "TextDelta",
    "ToolCallFinished",
    "ToolCallStarted",
]


@dataclass(frozen=True, slots=True)
class TextDelta:
    """More text of the assistant's current message."""

    text: str


@dataclass(frozen=True, slots=True)
class StepStarted:
    name: str


@dataclass(frozen=True, slots=True)
class StepFinished:
    name: str


@dataclass(frozen=True, slots=True)
class ReasoningDelta:
    """More of the function's visible reasoning."""

    text: str


@dataclass(frozen=True, slots=True)
class ToolCallStarted:
    call_id: str
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ToolCallFinished:
    call_id: str
    name: str
    content: str
    is_error: bool


@dataclass(frozen=True, slots=True)
class StateChanged:
    """The shared state changed: ``patch`` is RFC 6902 from the previous state to ``state``."""

    patch: list[dict[str, Any]]
    state: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Progress:
    progress: float
    total: float | None
    message: str | None


@dataclass(frozen=True, slots=True)
class ArtifactUpdate:
    """An artifact, or one chunk of one (``ctx.artifact``, or yielded by a generator): an ``agentmw.Artifact``."""

    artifact: Any


@dataclass(frozen=True, slots=True)
class SurfaceUpdate:
    """A2UI messages for one surface (``ctx.surface``, docs/a2ui.md), checked, in the order a client applies
    them; ``drawn`` holds the ones that draw the surface from nothing as it now is (for a face whose events
    replace what was shown, as AG-UI's activity snapshots do); empty after a ``deleteSurface``."""

    surface_id: str
    messages: tuple[dict[str, Any], ...]
    drawn: tuple[dict[str, Any], ...] = ()


CoreEvent = (
    TextDelta
    | StepStarted
    | StepFinished
    | ReasoningDelta
    | ToolCallStarted
    | ToolCallFinished
    | StateChanged
    | Progress
    | ArtifactUpdate
    | SurfaceUpdate
)
