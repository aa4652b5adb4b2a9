"""SQLite store (deprecated; ``Agent(store="sqlite:///path")`` replaces it): one file, survives restarts.

Given to ``A2ASettings(store=...)``, the A2A face keeps its tasks in a ``SQLiteState`` on the same file
(``.state``: the ``state_`` tables beside this store's ``tasks`` table), in single-process mode: on first use
after a restart, tasks the previous process was running or had parked are failed, as before. The methods
below still work on the ``tasks`` table for code that calls them directly.

Queries run in a worker thread so the event loop never waits on the disk. On open, tasks that a
previous process left running (or parked on a question) are failed with a clear reason: their
coroutines died with that process, and a caller must never wait on them forever.

Retention is bounded (``docs/limits.md``): tasks not updated for ``retention_seconds`` are deleted, and
past ``max_tasks`` the oldest go, finished ones first, with their push configurations. The pruning runs
in the same worker call as a ``put``, once every ``max_tasks // 20`` puts, so it costs little per write and
the table never grows past ``max_tasks`` plus one batch. Reads skip expired tasks at once.
"""

from __future__ import annotations

import asyncio
import builtins
import json
import sqlite3
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import anyio.to_thread

from ..lifecycle import RESTART_REASON
from .base import DEFAULT_MAX_TASKS, DEFAULT_RETENTION_SECONDS, TERMINAL, ListQuery, TaskRecord

__all__ = ["RESTART_REASON", "SQLiteStore"]

T = TypeVar("T")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS tasks (
    id TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    context_id TEXT NOT NULL,
    state TEXT NOT NULL,
    updated_at REAL NOT NULL,
    body TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS tasks_owner ON tasks (owner, updated_at);
CREATE INDEX IF NOT EXISTS tasks_updated ON tasks (updated_at);
CREATE TABLE IF NOT EXISTS push_configs (
    task_id TEXT NOT NULL,
    id TEXT NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (task_id, id)
);
"""


_closing: set[asyncio.Task[None]] = set()
_TERMINAL_LIST = ",".join(f"'{state}'" for state in sorted(TERMINAL))


class SQLiteStore:
    """Tasks in one SQLite file: at most about ``max_tasks`` (10,000), each kept ``retention_seconds`` (7
    days) after its last update. Limits left unset take the agent's ``a2a_max_tasks`` and
    ``a2a_task_retention_seconds``."""

    def __init__(
        self, path: str | Path, max_tasks: int | None = None, retention_seconds: float | None = None
    ) -> None:
        self.path = str(path)
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None
        self._explicit = (max_tasks is not None, retention_seconds is not None)
        self.max_tasks = max_tasks if max_tasks is not None else DEFAULT_MAX_TASKS
        self.retention_seconds = (
            retention_seconds if retention_seconds is not None else DEFAULT_RETENTION_SECONDS
        )
        self._puts = 0
        self._state: Any = None

    @property
    def state(self) -> Any:
        """The ``SQLiteState`` on this store's file that the A2A face keeps its tasks in (opened on first use)."""
        if self._state is None:
            from ..state import SQLiteState

            self._state = SQLiteState(self.path)
        return self._state

    def limit(self, max_tasks: int, retention_seconds: float) -> None:
        """The agent's limits, for those not given to the constructor."""
        if not self._explicit[0]:
            self.max_tasks = max_tasks
        if not self._explicit[1]:
            self.retention_seconds = retention_seconds

    def _prune_now(self, db: sqlite3.Connection) -> int:
        """Delete expired tasks, then the oldest past ``max_tasks`` (finished first); returns how many."""
        cutoff = time.time() - self.retention_seconds
        removed = db.execute("DELETE FROM tasks WHERE updated_at < ?", (cutoff,)).rowcount
        excess = db.execute("SELECT COUNT(*) FROM tasks").fetchone()[0] - self.max_tasks
        if excess > 0:
            removed += db.execute(
                f"DELETE FROM tasks WHERE id IN (SELECT id FROM tasks ORDER BY state IN ({_TERMINAL_LIST}) DESC, "
                "updated_at LIMIT ?)",
                (excess,),
            ).rowcount
        if removed:
            db.execute("DELETE FROM push_configs WHERE task_id NOT IN (SELECT id FROM tasks)")
        return removed

    async def prune(self) -> int:
        """Apply the retention limits now (puts do it on their own, in batches); returns how many went."""
        return await self._run(self._prune_now)

    def _connect(self) -> sqlite3.Connection:
        if self._db is None:
            db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            db.executescript(_SCHEMA)
            self._db = db
        return self._db

    async def _run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        def locked() -> T:
            with self._lock:
                return fn(self._connect())

        return await anyio.to_thread.run_sync(locked)

    def close(self) -> None:
        """Close the file; the state on it too (at once when no event loop runs, else as a task of the loop)."""
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None
        state, self._state = self._state, None
        if state is not None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                asyncio.run(state.close())
            else:
                task = loop.create_task(state.close())
                _closing.add(task)
                task.add_done_callback(_closing.discard)

    async def get(self, task_id: str) -> TaskRecord | None:
        cutoff = time.time() - self.retention_seconds
        row = await self._run(
            lambda db: db.execute(
                "SELECT body FROM tasks WHERE id = ? AND updated_at >= ?", (task_id, cutoff)
            ).fetchone()
        )
        return TaskRecord.from_dict(json.loads(row[0])) if row else None

    async def put(self, record: TaskRecord) -> None:
        body = json.dumps(record.to_dict(), separators=(",", ":"), default=str)
        self._puts += 1
        prune = self._puts % max(1, self.max_tasks // 20) == 0

        def write(db: sqlite3.Connection) -> None:
            db.execute(
                "INSERT INTO tasks (id, owner, context_id, state, updated_at, body) VALUES (?, ?, ?, ?, ?, ?) "
                "ON CONFLICT(id) DO UPDATE SET state=excluded.state, updated_at=excluded.updated_at, "
                "body=excluded.body",
                (record.id, record.owner, record.context_id, record.state, record.updated_at, body),
            )
            if prune:
                self._prune_now(db)

        await self._run(write)

    async def list(self, query: ListQuery) -> tuple[list[TaskRecord], int]:
        where = ["owner = ?", "updated_at >= ?"]
        args: list[Any] = [query.owner, time.time() - self.retention_seconds]
        if query.context_id is not None:
            where.append("context_id = ?")
            args.append(query.context_id)
        if query.state is not None:
            where.append("state = ?")
            args.append(query.state)
        if query.updated_after is not None:
            where.append("updated_at > ?")
            args.append(query.updated_after)
        clause = " AND ".join(where)

        def read(db: sqlite3.Connection) -> tuple[list[Any], int]:
            total = db.execute(f"SELECT COUNT(*) FROM tasks WHERE {clause}", args).fetchone()[0]
            rows = db.execute(
                f"SELECT body FROM tasks WHERE {clause} ORDER BY updated_at DESC, id DESC LIMIT ? OFFSET ?",
                [*args, query.page_size, query.offset],
            ).fetchall()
            return rows, total

        rows, total = await self._run(read)
        return [TaskRecord.from_dict(json.loads(r[0])) for r in rows], total

    async def put_push(self, task_id: str, config: dict[str, Any]) -> None:
        body = json.dumps(config)
        await self._run(
            lambda db: db.execute(
                "INSERT OR REPLACE INTO push_configs (task_id, id, body) VALUES (?, ?, ?)",
                (task_id, config["id"], body),
            )
        )

    async def get_push(self, task_id: str, config_id: str) -> dict[str, Any] | None:
        row = await self._run(
            lambda db: db.execute(
                "SELECT body FROM push_configs WHERE task_id = ? AND id = ?", (task_id, config_id)
            ).fetchone()
        )
        return json.loads(row[0]) if row else None

    async def list_push(self, task_id: str) -> builtins.list[dict[str, Any]]:
        rows = await self._run(
            lambda db: db.execute(
                "SELECT body FROM push_configs WHERE task_id = ? ORDER BY rowid", (task_id,)
            ).fetchall()
        )
        return [json.loads(r[0]) for r in rows]

    async def delete_push(self, task_id: str, config_id: str) -> None:
        await self._run(
            lambda db: db.execute(
                "DELETE FROM push_configs WHERE task_id = ? AND id = ?", (task_id, config_id)
            )
        )

    async def recover(self) -> int:
        def fail_unfinished(db: sqlite3.Connection) -> int:
            rows = db.execute(
                f"SELECT body FROM tasks WHERE state NOT IN ({','.join('?' * len(TERMINAL))})",
                tuple(TERMINAL),
            ).fetchall()
            now = time.time()
            stamp = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
            failed = 0
            for (body,) in rows:
                record = TaskRecord.from_dict(json.loads(body))
                if record.state == "TASK_STATE_INPUT_REQUIRED" and not record.parked:
                    continue  # waiting for arguments, not for a coroutine: a follow-up can still start it
                record.state = "TASK_STATE_FAILED"
                record.parked = False
                record.status_message = {
                    "messageId": f"restart-{record.id}",
                    "role": "ROLE_AGENT",
                    "taskId": record.id,
                    "contextId": record.context_id,
                    "parts": [{"text": RESTART_REASON}],
                }
                record.status_timestamp = stamp
                record.updated_at = now
                db.execute(
                    "UPDATE tasks SET state = ?, updated_at = ?, body = ? WHERE id = ?",
                    (record.state, now, json.dumps(record.to_dict()), record.id),
                )
                failed += 1
            return failed

        return await self._run(fail_unfinished)
