"""A2UI surfaces on AG-UI: each one an ``ACTIVITY_SNAPSHOT`` of type ``a2ui-surface`` (docs/a2ui.md).

The shape is the one ``@ag-ui/a2ui-middleware`` emits and CopilotKit's A2UI renderer draws: ``messageId``
``a2ui-surface-<surfaceId>``, ``content`` ``{"a2ui_operations": [<A2UI v0.9 messages>]}``, ``replace: true``.
Each snapshot holds everything needed to draw the surface from nothing (its ``createSurface``, its components,
its data), because a snapshot replaces the activity's content: a front end that joins late, or reconnects,
draws the surface from the last one alone.
"""

from __future__ import annotations

from typing import Any

from ..a2ui import AGUI_ACTIVITY_TYPE, AGUI_OPERATIONS_KEY
from ..events import SurfaceUpdate

__all__ = ["SurfaceActivities", "activity_id"]


def activity_id(surface_id: str) -> str:
    return f"a2ui-surface-{surface_id}"


class SurfaceActivities:
    """The A2UI messages each surface's activity holds in one run."""

    __slots__ = ("held",)

    def __init__(self) -> None:
        self.held: dict[str, list[dict[str, Any]]] = {}

    def restore(self, event: dict[str, Any]) -> None:
        """A logged snapshot (a run resumed on another replica goes on from it)."""
        content = event.get("content")
        operations = content.get(AGUI_OPERATIONS_KEY) if isinstance(content, dict) else None
        message_id = event.get("messageId")
        if isinstance(operations, list) and isinstance(message_id, str):
            surface = message_id.removeprefix("a2ui-surface-")
            if any("deleteSurface" in op for op in operations if isinstance(op, dict)):
                self.held.pop(surface, None)
            else:
                self.held[surface] = [op for op in operations if isinstance(op, dict)]

    def apply(self, event: SurfaceUpdate) -> dict[str, Any]:
        """The snapshot showing ``event``'s surface after it."""
        surface = event.surface_id
        if any("deleteSurface" in message for message in event.messages):
            self.held.pop(surface, None)
            operations = list(event.messages)
        else:
            held = [] if event.created else self.held.get(surface, [])
            for message in event.messages:
                _merge(held, message)
            self.held[surface] = operations = held
        return {
            "type": "ACTIVITY_SNAPSHOT",
            "messageId": activity_id(surface),
            "activityType": AGUI_ACTIVITY_TYPE,
            "content": {AGUI_OPERATIONS_KEY: operations},
            "replace": True,
        }


def _merge(held: list[dict[str, Any]], message: dict[str, Any]) -> None:
    """``message`` folded into the messages that draw the surface: components by id into the one
    ``updateComponents``; a whole-model data update replaces the earlier ones, a path's follows them."""
    if "updateComponents" in message:
        for index, earlier in enumerate(held):
            if "updateComponents" in earlier:
                components = {c["id"]: c for c in earlier["updateComponents"]["components"]}
                components.update((c["id"], c) for c in message["updateComponents"]["components"])
                body = dict(earlier["updateComponents"], components=list(components.values()))
                held[index] = dict(earlier, updateComponents=body)
                return
    elif "updateDataModel" in message and message["updateDataModel"].get("path", "/") == "/":
        held[:] = [m for m in held if "updateDataModel" not in m]
    held.append(message)
