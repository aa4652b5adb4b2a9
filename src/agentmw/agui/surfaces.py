"""A2UI surfaces on AG-UI: each one an ``ACTIVITY_SNAPSHOT`` of type ``a2ui-surface`` (docs/a2ui.md).

The shape is the one ``@ag-ui/a2ui-middleware`` emits and CopilotKit's A2UI renderer draws: ``messageId``
``a2ui-surface-<surfaceId>``, ``content`` ``{"a2ui_operations": [<A2UI v0.9 messages>]}``, ``replace: true``.
Each snapshot holds everything that draws the surface from nothing (its ``createSurface``, its components, its
data: the event's ``drawn``), because a snapshot replaces the activity's content: a front end that joins late,
reconnects, or sees the next run of the thread draws the surface from the last one alone. A deleted surface's
snapshot holds its ``deleteSurface``.
"""

from __future__ import annotations

from typing import Any

from ..a2ui import AGUI_ACTIVITY_TYPE, AGUI_OPERATIONS_KEY
from ..events import SurfaceUpdate

__all__ = ["surface_snapshot"]


def surface_snapshot(event: SurfaceUpdate) -> dict[str, Any]:
    """The activity snapshot showing ``event``'s surface as it now is."""
    return {
        "type": "ACTIVITY_SNAPSHOT",
        "messageId": f"a2ui-surface-{event.surface_id}",
        "activityType": AGUI_ACTIVITY_TYPE,
        "content": {AGUI_OPERATIONS_KEY: list(event.drawn or event.messages)},
        "replace": True,
    }
