"""Idempotency keys: a repeated side-effecting call returns the first outcome instead of running again.

Records are keyed by caller, capability and key, bound to a hash of the arguments (a key reused with
other arguments is rejected), and expire. A duplicate that arrives while the first call still runs
waits for it. Only settled outcomes are kept: a retryable failure or a pending question runs again.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from .._bounded import BoundedTable

__all__ = ["IdempotencyCache", "KeyReused"]


class KeyReused(ValueError):
    """The key was first used with other arguments."""


@dataclass(slots=True)
class _Entry:
    arguments: str
    expires: float
    done: asyncio.Future[Any]


class IdempotencyCache:
    def __init__(self, ttl_seconds: float = 24 * 3600.0, max_entries: int = 100_000) -> None:
        self.ttl = ttl_seconds
        self.max_entries = max_entries
        # bounded: at most max_entries settled records, each for ttl seconds; pruned oldest first on insert.
        # A call still running is never dropped (its duplicates wait for it).
        self.entries: BoundedTable[tuple[str, str, str], _Entry] = BoundedTable(
            max_entries, ttl_seconds, pinned=lambda entry: not entry.done.done())
        self.hits = 0
        self.misses = 0

    @property
    def hit_rate(self) -> float:
        total = self.hits + self.misses
        return self.hits / total if total else 0.0

    async def run(self, key: tuple[str, str, str], arguments: str, produce: Callable[[], Awaitable[Any]],
                  keep: Callable[[Any], bool]) -> Any:
        now = time.monotonic()
        entry = self.entries.get(key)  # None once expired
        if entry is not None:
            if entry.arguments != arguments:
                raise KeyReused("this idempotency key was already used with different arguments")
            self.hits += 1
            return await asyncio.shield(entry.done)
        self.misses += 1
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.entries[key] = _Entry(arguments, now + self.ttl, future)
        try:
            outcome = await produce()
        except BaseException as exc:
            self.entries.pop(key, None)
            if not future.done():
                future.set_exception(exc)
                future.exception()  # retrieved: a waiter re-raises it, nobody else must log it
            raise
        if not keep(outcome):
            self.entries.pop(key, None)
        future.set_result(outcome)
        return outcome
