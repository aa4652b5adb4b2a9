"""The task record, and the older store interface (deprecated: A2A tasks now live in ``agentmw.state``).

``TaskRecord`` is what the A2A face keeps per task, as a versioned record in the state (``a2a.tasks``).
``TaskStore`` and its two implementations (``MemoryStore``, ``SQLiteStore``) are kept for code that passes
them to ``A2ASettings(store=...)``: the face then uses a state derived from them (``legacy_state``), in
single-process mode (docs/a2a.md, "Stores, restarts and replicas").
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Protocol

__all__ = [
    "DEFAULT_MAX_TASKS",
    "DEFAULT_RETENTION_SECONDS",
    "INTERRUPTED",
    "TERMINAL",
    "ListQuery",
    "TaskRecord",
    "TaskStore",
    "legacy_state",
]

# A store keeps at most about this many tasks, each for this long after its last update (docs/limits.md);
# ``Agent(a2a_max_tasks=..., a2a_task_retention_seconds=...)`` or the store's constructor change them.
DEFAULT_MAX_TASKS = 10_000
DEFAULT_RETENTION_SECONDS = 7 * 24 * 3600.0

TERMINAL = frozenset(
    {"TASK_STATE_COMPLETED", "TASK_STATE_CANCELED", "TASK_STATE_FAILED", "TASK_STATE_REJECTED"}
)
INTERRUPTED = frozenset({"TASK_STATE_INPUT_REQUIRED", "TASK_STATE_AUTH_REQUIRED"})


@dataclass(slots=True)
class TaskRecord:
    """One task, protocol-shaped (A2A 1.0 field names) so that rendering it is a copy, not a mapping."""

    id: str
    context_id: str
    owner: str
    state: str = "TASK_STATE_SUBMITTED"
    status_message: dict[str, Any] | None = None
    status_timestamp: str = ""
    history: list[dict[str, Any]] = field(default_factory=list)
    artifacts: list[dict[str, Any]] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    skill: str | None = None
    tool: str | None = None
    arguments: dict[str, Any] = field(default_factory=dict)
    parked: bool = False
    created_at: float = field(default_factory=time.time)
    updated_at: float = field(default_factory=time.time)
    replica: str | None = (
        None  # the process whose coroutine runs (or is parked on) this task; None: none does
    )
    log_id: int = 0  # the id of the last event of the task's log that this record reflects

    @property
    def terminal(self) -> bool:
        return self.state in TERMINAL

    def snapshot(self) -> TaskRecord:
        """A copy later changes cannot reach: new containers; the messages and artifacts inside them are
        never mutated once appended, so they are shared."""
        return TaskRecord(
            self.id,
            self.context_id,
            self.owner,
            self.state,
            self.status_message,
            self.status_timestamp,
            list(self.history),
            list(self.artifacts),
            dict(self.metadata),
            self.skill,
            self.tool,
            dict(self.arguments),
            self.parked,
            self.created_at,
            self.updated_at,
            self.replica,
            self.log_id,
        )

    def to_dict(self) -> dict[str, Any]:
        """A plain dict of the record, its containers copied (what they hold is never mutated once added)."""
        return {
            "id": self.id,
            "context_id": self.context_id,
            "owner": self.owner,
            "state": self.state,
            "status_message": self.status_message,
            "status_timestamp": self.status_timestamp,
            "history": list(self.history),
            "artifacts": list(self.artifacts),
            "metadata": dict(self.metadata),
            "skill": self.skill,
            "tool": self.tool,
            "arguments": dict(self.arguments),
            "parked": self.parked,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "replica": self.replica,
            "log_id": self.log_id,
        }

    def to_stored(self, replica: str | None) -> dict[str, Any]:
        """What a task registry writes: ``to_dict`` with ``replica``, and without the fields that are empty (None,
        False, 0, {}), which ``from_dict`` gives back as their defaults: a smaller row, quicker to encode. Every
        field a scan filters on (owner, context_id, state, parked: True) stays where it is looked for."""
        out: dict[str, Any] = {
            "id": self.id,
            "context_id": self.context_id,
            "owner": self.owner,
            "state": self.state,
            "status_timestamp": self.status_timestamp,
            "history": list(self.history),
            "artifacts": list(self.artifacts),
            "created_at": self.created_at,
            "updated_at": self.updated_at,
        }
        if self.status_message is not None:
            out["status_message"] = self.status_message
        if self.metadata:
            out["metadata"] = dict(self.metadata)
        if self.skill is not None:
            out["skill"] = self.skill
        if self.tool is not None:
            out["tool"] = self.tool
        if self.arguments:
            out["arguments"] = dict(self.arguments)
        if self.parked:
            out["parked"] = True
        if replica is not None:
            out["replica"] = replica
        if self.log_id:
            out["log_id"] = self.log_id
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TaskRecord:
        """The record from ``to_dict`` (fields it does not know, from a later version, are ignored)."""
        return cls(**{k: v for k, v in data.items() if k in _RECORD_FIELDS})


_RECORD_FIELDS = frozenset(f for f in TaskRecord.__dataclass_fields__)


@dataclass(slots=True)
class ListQuery:
    owner: str
    context_id: str | None = None
    state: str | None = None
    updated_after: float | None = None
    page_size: int = 50
    offset: int = 0


class TaskStore(Protocol):
    async def get(self, task_id: str) -> TaskRecord | None: ...

    async def put(self, record: TaskRecord) -> None: ...

    async def list(self, query: ListQuery) -> tuple[list[TaskRecord], int]:
        """One page of the owner's tasks, newest update first, and the total that match."""
        ...

    async def put_push(self, task_id: str, config: dict[str, Any]) -> None: ...

    async def get_push(self, task_id: str, config_id: str) -> dict[str, Any] | None: ...

    async def list_push(self, task_id: str) -> list[dict[str, Any]]: ...

    async def delete_push(self, task_id: str, config_id: str) -> None: ...

    async def recover(self) -> int:
        """Fail the tasks a previous process left running or parked; returns how many."""
        ...

    # Optional: ``limit(max_tasks, retention_seconds)`` gives the store the agent's task limits, for those
    # its constructor was not given. The built-in stores have it; a store without it keeps its own.


def legacy_state(store: Any) -> Any:
    """The :class:`agentmw.state.State` the A2A face uses for an older store given to ``A2ASettings(store=)``:
    ``MemoryStore`` -> its own ``MemoryState``; ``SQLiteStore(path)`` -> a ``SQLiteState`` on the same file
    (its ``state_`` tables beside the old ``tasks`` table). Any other object with a ``state`` attribute gives
    that. Raises TypeError for a store that cannot be adapted."""
    state = getattr(store, "state", None)
    if state is None:
        raise TypeError(
            f"{type(store).__name__} is not supported by A2ASettings(store=...) any more: A2A tasks "
            "live in agentmw.state; pass Agent(store=...) a State or a URL instead (docs/state.md)"
        )
    return state
