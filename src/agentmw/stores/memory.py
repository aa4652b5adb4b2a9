"""In-memory store: for tests and single-process development; nothing survives the process."""

from __future__ import annotations

from typing import Any

from .base import ListQuery, TaskRecord

__all__ = ["MemoryStore"]


class MemoryStore:
    """Tasks in a dict. Past ``max_tasks`` the oldest finished tasks are forgotten, so memory stays bounded."""

    def __init__(self, max_tasks: int = 10_000) -> None:
        self.max_tasks = max_tasks
        self.tasks: dict[str, TaskRecord] = {}
        self.push: dict[str, dict[str, dict[str, Any]]] = {}

    async def get(self, task_id: str) -> TaskRecord | None:
        record = self.tasks.get(task_id)
        return record.snapshot() if record is not None else None

    async def put(self, record: TaskRecord) -> None:
        # Kept by reference: the task manager is its only writer, and reads hand out snapshots.
        self.tasks[record.id] = record
        if len(self.tasks) > self.max_tasks + self.max_tasks // 10:  # evict in batches: amortized O(1)
            excess = len(self.tasks) - self.max_tasks + self.max_tasks // 10
            for task_id in [t for t, r in self.tasks.items() if r.terminal][:excess]:
                del self.tasks[task_id]
                self.push.pop(task_id, None)

    async def list(self, query: ListQuery) -> tuple[list[TaskRecord], int]:
        found = [
            r for r in self.tasks.values()
            if r.owner == query.owner
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

    async def list_push(self, task_id: str) -> list[dict[str, Any]]:
        return list(self.push.get(task_id, {}).values())

    async def delete_push(self, task_id: str, config_id: str) -> None:
        self.push.get(task_id, {}).pop(config_id, None)

    async def recover(self) -> int:
        return 0
