"""In-memory store (deprecated): for tests and single-process development; nothing survives the process.

Given to ``A2ASettings(store=...)``, the A2A face keeps its tasks in this store's own ``MemoryState``
(``.state``) with the store's limits; the methods below still work on their own table for code that calls
them directly. New code passes ``Agent(store="memory://")`` instead.
"""

from __future__ import annotations

import builtins
import collections
import time
from typing import Any

from .base import DEFAULT_MAX_TASKS, DEFAULT_RETENTION_SECONDS, ListQuery, TaskRecord

__all__ = ["MemoryStore"]


class MemoryStore:
    """Tasks in a dict, bounded: at most about ``max_tasks`` (10,000), each forgotten ``retention_seconds``
    (7 days) after its last update. Past ``max_tasks`` the oldest finished tasks go first, then the oldest
    of any state (the task manager keeps its own handle on a task that runs or waits). Pruning runs in
    batches of a tenth of ``max_tasks``, so a ``put`` stays O(1) amortised. Limits left unset here take the
    agent's ``a2a_max_tasks`` and ``a2a_task_retention_seconds`` (see ``docs/limits.md``)."""

    def __init__(self, max_tasks: int | None = None, retention_seconds: float | None = None) -> None:
        self._explicit = (max_tasks is not None, retention_seconds is not None)
        self.max_tasks = max_tasks if max_tasks is not None else DEFAULT_MAX_TASKS
        self.retention_seconds = (
            retention_seconds if retention_seconds is not None else DEFAULT_RETENTION_SECONDS
        )
        self.tasks: collections.OrderedDict[str, TaskRecord] = (
            collections.OrderedDict()
        )  # oldest update first
        self.push: dict[str, dict[str, dict[str, Any]]] = {}
        self._state: Any = None

    @property
    def state(self) -> Any:
        """The ``MemoryState`` the A2A face keeps this store's tasks in (made on first use)."""
        if self._state is None:
            from ..state import MemoryState

            self._state = MemoryState()
        return self._state

    def limit(self, max_tasks: int, retention_seconds: float) -> None:
        """The agent's limits, for those not given to the constructor."""
        if not self._explicit[0]:
            self.max_tasks = max_tasks
        if not self._explicit[1]:
            self.retention_seconds = retention_seconds

    async def get(self, task_id: str) -> TaskRecord | None:
        record = self.tasks.get(task_id)
        if record is None:
            return None
        if record.updated_at < time.time() - self.retention_seconds:
            self._drop(task_id)
            return None
        return record.snapshot()

    async def put(self, record: TaskRecord) -> None:
        # Kept by reference: the task manager is its only writer, and reads hand out snapshots.
        tasks = self.tasks
        tasks[record.id] = record
        tasks.move_to_end(record.id)
        over = len(tasks) > self.max_tasks + max(1, self.max_tasks // 10)
        if over or next(iter(tasks.values())).updated_at < time.time() - self.retention_seconds:
            self.prune()

    def prune(self) -> int:
        """Forget expired tasks, then the oldest past ``max_tasks`` (finished ones first); returns how many."""
        tasks = self.tasks
        before = len(tasks)
        cutoff = time.time() - self.retention_seconds
        while tasks:
            task_id, record = next(iter(tasks.items()))
            if record.updated_at >= cutoff:
                break
            self._drop(task_id)
        excess = len(tasks) - self.max_tasks
        if excess > 0:
            for task_id in [t for t, r in tasks.items() if r.terminal][:excess]:
                self._drop(task_id)
            excess = len(tasks) - self.max_tasks
            while excess > 0:
                self._drop(next(iter(tasks)))
                excess -= 1
        return before - len(tasks)

    def _drop(self, task_id: str) -> None:
        self.tasks.pop(task_id, None)
        self.push.pop(task_id, None)

    async def list(self, query: ListQuery) -> tuple[list[TaskRecord], int]:
        cutoff = time.time() - self.retention_seconds
        found = [
            r
            for r in self.tasks.values()
            if r.owner == query.owner
            and r.updated_at >= cutoff
            and (query.context_id is None or r.context_id == query.context_id)
            and (query.state is None or r.state == query.state)
            and (query.updated_after is None or r.updated_at > query.updated_after)
        ]
        found.sort(key=lambda r: (r.updated_at, r.id), reverse=True)
        page = found[query.offset : query.offset + query.page_size]
        return [r.snapshot() for r in page], len(found)

    async def put_push(self, task_id: str, config: dict[str, Any]) -> None:
        self.push.setdefault(task_id, {})[config["id"]] = dict(config)

    async def get_push(self, task_id: str, config_id: str) -> dict[str, Any] | None:
        return self.push.get(task_id, {}).get(config_id)

    async def list_push(self, task_id: str) -> builtins.list[dict[str, Any]]:
        return list(self.push.get(task_id, {}).values())

    async def delete_push(self, task_id: str, config_id: str) -> None:
        self.push.get(task_id, {}).pop(config_id, None)

    async def recover(self) -> int:
        return 0
