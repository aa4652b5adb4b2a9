"""A2A tasks in the shared task model: its names in the state, its timings, and the task as A2A shows it.

The records, their writer, the followers, heartbeats, cancels over the bus and take-overs are the lifecycle
engine's (``agentmw.lifecycle``, through ``agentmw.tasks.registry``, which MCP tasks use too); this module says how the A2A face configures them.
The timings are module constants, read when the face's task manager is made (tests shorten them).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from .._wiring import FaceHost
from ..lifecycle import TaskRecord
from ..state import State
from ..tasks.host import TaskHost
from ..tasks.manager import registry_for
from ..tasks.registry import (
    MAX_BACKLOG,
    SETTLED,
    Cadence,
    LiveTask,
    ResumedElsewhere,
    Spaces,
    TaskRegistry,
    is_final,
    status_event,
    status_of,
)
from . import wire

if TYPE_CHECKING:
    from .settings import A2ASettings

__all__ = [
    "CANCEL",
    "EVENTS",
    "LEASES",
    "MAX_BACKLOG",
    "PUSH",
    "REPLICAS",
    "SETTLED",
    "TASKS",
    "A2AHost",
    "LiveTask",
    "ResumedElsewhere",
    "TaskRegistry",
    "a2a_registry",
    "is_final",
    "status_event",
    "status_of",
    "task_dict",
]


class A2AHost(FaceHost, TaskHost, Protocol):
    """What the A2A face's tasks read of the agent: the face host, the task model's, and its A2A settings."""

    @property
    def a2a(self) -> A2ASettings: ...


SPACES = Spaces.of("a2a")
TASKS = SPACES.tasks  # records: one per task
EVENTS = SPACES.events  # logs: one per published task, its StreamResponse events
PUSH = SPACES.push  # records: a task's push configs and the id of the last event pushed
LEASES = SPACES.lease  # keys: "push:<task id>", the one sender of a task's pushes
REPLICAS = SPACES.replicas  # keys: one heartbeat per process that holds a coroutine
CANCEL = SPACES.cancel  # bus channel: {"task": id} to the process that holds it

PUBLISH_AFTER_SECONDS = 0.25  # a task still running this long is written, for other replicas to see
HEARTBEAT_SECONDS = 10.0  # a process's heartbeat key lives this long, renewed every third of it
LEASE_SECONDS = 10.0  # a running task's journal lease (docs/durability.md), renewed every third of it
SWEEP_SECONDS = 5.0  # a process looks for orphaned tasks on first use, then at most this often (on use)
RETRY_TAKE_OVER_SECONDS = 2.0  # a take-over that found the task busy is not tried again sooner
CANCEL_WAIT_SECONDS = 5.0  # how long CancelTask waits for the holder to confirm
COMMIT_WAIT_SECONDS = 5.0  # how long an answer waits for its record's commit before it is a retryable error


def timing() -> Cadence:
    """The A2A timings as the module says now."""
    return Cadence(
        publish_after_seconds=PUBLISH_AFTER_SECONDS,
        heartbeat_seconds=HEARTBEAT_SECONDS,
        lease_seconds=LEASE_SECONDS,
        sweep_seconds=SWEEP_SECONDS,
        retry_take_over_seconds=RETRY_TAKE_OVER_SECONDS,
        cancel_wait_seconds=CANCEL_WAIT_SECONDS,
        commit_wait_seconds=COMMIT_WAIT_SECONDS,
    )


class _Shapes:
    """How A2A keeps messages and artifacts in a record: its 1.0 wire shapes."""

    now_iso = staticmethod(wire.now_iso)
    agent_message = staticmethod(wire.agent_message)
    message_to_wire = staticmethod(wire.message_to_wire)
    artifact_to_wire = staticmethod(wire.artifact_to_wire)


SHAPES = _Shapes()


def a2a_registry(agent: A2AHost, state: State, *, write_behind: bool = False) -> TaskRegistry:
    """The core registry, configured for A2A tasks."""
    return registry_for(
        agent, state, spaces=SPACES, shapes=SHAPES, timing=timing(), label="A2A", write_behind=write_behind
    )


def task_dict(
    record: TaskRecord, history_length: int | None = None, include_artifacts: bool = True
) -> dict[str, Any]:
    task: dict[str, Any] = {"id": record.id, "contextId": record.context_id, "status": status_of(record)}
    if history_length != 0:
        history = record.history if history_length is None else record.history[-history_length:]
        task["history"] = history
    if include_artifacts and record.artifacts:
        task["artifacts"] = record.artifacts
    if record.metadata:
        task["metadata"] = record.metadata
    return task
