"""The names in the shared state under which one client of the lifecycle (a face's tasks) keeps its
records, logs, leases and bus channel; two clients never share them."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Spaces"]


@dataclass(frozen=True, slots=True)
class Spaces:
    """The state's names one face keeps its tasks under."""

    tasks: str  # records: one per task
    events: str  # logs: one per published task, its events
    push: str  # records: a task's push configs and the id of the last event pushed (A2A)
    lease: str  # keys: "push:<task id>", the one sender of a task's pushes (A2A)
    replicas: str  # keys: one heartbeat per process that holds a coroutine
    cancel: str  # bus channel: {"task": id} to the process that holds it

    @classmethod
    def of(cls, face: str) -> Spaces:
        return cls(
            f"{face}.tasks",
            f"{face}.events",
            f"{face}.push",
            f"{face}.lease",
            f"{face}.replicas",
            f"{face}.cancel",
        )
