"""Versioned records in the shared state: every write a compare-and-set on the version last read or
written, so a change another process made first is never overwritten (it is read again and the change
re-applied, or the caller gives way). And the record of a task, as every face keeps it.

:class:`TaskRecord` is one task (A2A 1.0 field names, so that rendering an A2A task is a copy, not a
mapping). :class:`Records` is a namespace of versioned records with :meth:`Records.commit`, the
read-modify-write loop; :func:`retry` retries a write that failed for a passing reason.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ..state import Conflict, Json, State, Versioned
from .states import TERMINAL, TaskState

__all__ = ["RESTART_REASON", "Records", "TaskRecord", "retry"]

T = TypeVar("T")

RESTART_REASON = (
    "The agent restarted while this task was in progress; it was stopped and nothing more will run."
)
"""The status text of a task failed because the process that held it is gone and nothing can replay it."""

WRITE_ATTEMPTS = 3


@dataclass(slots=True)
class TaskRecord:
    """One task, protocol-shaped (A2A 1.0 field names) so that rendering it is a copy, not a mapping."""

    id: str
    context_id: str
    owner: str
    state: str = TaskState.SUBMITTED
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


async def retry(
    call: Callable[[], Awaitable[T]],
    *,
    attempts: int = WRITE_ATTEMPTS,
    stop: Callable[[], bool] = lambda: False,
) -> T:
    """``call()``, tried again (after 50 ms, then 100 ms, ...) when it fails for any reason but a
    :class:`~agentmw.state.Conflict` (which is an answer, not a failure), up to ``attempts`` times or
    until ``stop()`` says the caller is closing."""
    for attempt in range(attempts):
        try:
            return await call()
        except Conflict:
            raise
        except Exception:
            if attempt == attempts - 1 or stop():
                raise
            await asyncio.sleep(0.05 * (attempt + 1))
    raise AssertionError("unreachable")


class Records:
    """One namespace of versioned records. The version a caller read lives with the caller: a write names
    it (``expected``) and fails with :class:`~agentmw.state.Conflict` when another writer came first."""

    __slots__ = ("ns", "state")

    def __init__(self, state: State, ns: str) -> None:
        self.state = state
        self.ns = ns

    async def get(self, key: str) -> Versioned | None:
        return await self.state.get(self.ns, key)

    async def put(self, key: str, value: Json, expected: int | None) -> int:
        """Write ``value`` if the record is at version ``expected`` (0 or None: absent; ``agentmw.state.ANY``:
        any); its new version."""
        return await self.state.put(self.ns, key, value, expected_version=expected)

    async def save(
        self,
        key: str,
        value: Json,
        version: int,
        merge: Callable[[Versioned | None], Json | None],
        *,
        attempts: int | None = None,
    ) -> int | None:
        """Write ``value`` at the ``version`` the caller holds (0: absent), without reading first; on a
        conflict, ``merge`` gets the record as stored now (None: gone) and returns the value to write at its
        version (0 when gone), or None to stop. Returns the version written, or None when ``merge`` stopped.
        ``attempts`` None: until it lands; otherwise the last conflict is raised."""
        tried = 0
        while True:
            try:
                return await self.state.put(self.ns, key, value, expected_version=version)
            except Conflict:
                tried += 1
                if attempts is not None and tried >= attempts:
                    raise
                found = await self.state.get(self.ns, key)
                merged = merge(found)
                if merged is None:
                    return None
                value, version = merged, (found.version if found is not None else 0)

    async def commit(
        self,
        key: str,
        make: Callable[[Versioned | None], Json | None],
        *,
        attempts: int | None = None,
    ) -> tuple[Json, int] | None:
        """Read-modify-write: ``make`` gets the record as stored now (None: there is none) and returns the
        value to write, or None to leave it; on a conflict it is called again with the newer record. Returns
        the value written and its version, or None when ``make`` left it. ``attempts`` None: until it lands;
        otherwise the last conflict is raised."""
        tried = 0
        while True:
            found = await self.state.get(self.ns, key)
            value = make(found)
            if value is None:
                return None
            try:
                version = await self.state.put(
                    self.ns, key, value, expected_version=found.version if found else 0
                )
                return value, version
            except Conflict:
                tried += 1
                if attempts is not None and tried >= attempts:
                    raise
