"""The older store interface (deprecated: A2A tasks live in ``agentmw.state``; to be removed before the
first release). ``TaskRecord`` moved to ``agentmw.lifecycle`` and is only re-exported here.

``TaskStore`` and its two implementations (``MemoryStore``, ``SQLiteStore``) are kept for code that passes
them to ``A2ASettings(store=...)``: the face then uses a state derived from them (``legacy_state``), in
single-process mode (docs/a2a.md, "Stores, restarts and replicas").
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass
from typing import Any, Protocol

from ..lifecycle import INTERRUPTED, TERMINAL, TaskRecord

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

    async def list_push(self, task_id: str) -> builtins.list[dict[str, Any]]: ...

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
