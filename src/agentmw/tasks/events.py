"""A task's events as its followers, its log and A2A's stream see them (A2A 1.0 shapes: a status update,
an artifact update), and when a stream of them ends."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..lifecycle import INTERRUPTED, TERMINAL, TaskRecord

__all__ = ["is_final", "status_event", "status_of"]


def status_of(record: TaskRecord) -> dict[str, Any]:
    status: dict[str, Any] = {"state": record.state, "timestamp": record.status_timestamp}
    if record.status_message is not None:
        status["message"] = record.status_message
    return status


def status_event(record: TaskRecord, metadata: Mapping[str, Any] | None = None) -> dict[str, Any]:
    update: dict[str, Any] = {
        "taskId": record.id,
        "contextId": record.context_id,
        "status": status_of(record),
    }
    if metadata:
        update["metadata"] = dict(metadata)
    return {"statusUpdate": update}


def is_final(event: Mapping[str, Any], stop_on_interrupt: bool = False) -> bool:
    """Whether a stream of the task ends with this event."""
    update = event.get("statusUpdate")
    if update is None:
        return False
    state = update["status"]["state"]
    return state in TERMINAL or (stop_on_interrupt and state in INTERRUPTED)
