"""In-process state: for tests and for an agent served by one process.

Nothing here is shared with another process, and nothing survives it. Every operation is atomic because
none awaits between its check and its write. Values are kept encoded (strict JSON), exactly as the other
backends keep them, so a value that would not survive SQLite or Redis fails here too, and no caller can
change a stored value through a reference it kept.
"""

from __future__ import annotations

import asyncio
import collections
import heapq
import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._transport import loads
from . import base
from ._fanout import Hub
from .base import ANY, Conflict, Item, Json, Page, State, StoreLimits, Versioned

__all__ = ["MemoryState"]


@dataclass(slots=True)
class _Record:
    raw: bytes
    version: int
    updated_at: float


@dataclass(slots=True)
class _Keys:
    """Live keys of one namespace and a heap of (expiry, key) to find the soonest to expire."""

    entries: dict[str, tuple[bytes, float]] = field(default_factory=dict)
    heap: list[tuple[float, str]] = field(default_factory=list)


@dataclass(slots=True)
class _Log:
    entries: collections.deque[tuple[int, float, bytes]]


@dataclass(slots=True)
class _Waiters:
    """Readers blocked on one log; the event is set (and dropped) by the next append."""

    event: asyncio.Event
    count: int = 0


class MemoryState(State):
    """All four kinds of state in this process's memory."""

    accepts_encoded = True

    def __init__(
        self, *, limits: Mapping[str, StoreLimits] | None = None, default: StoreLimits = base.DEFAULT_LIMITS
    ) -> None:
        super().__init__(limits=limits, default=default)
        self._records: dict[str, collections.OrderedDict[str, _Record]] = {}
        self._keys: dict[str, _Keys] = {}
        self._logs: dict[str, collections.OrderedDict[str, _Log]] = {}
        self._ids = itertools.count(1)
        self._waiters: dict[tuple[str, str], _Waiters] = {}
        self._hub = Hub()

    async def close(self) -> None:
        self._hub.close()

    def _bus_hub(self) -> Hub:
        return self._hub

    # -- records -----------------------------------------------------------------------------------------

    def _record(self, ns: str, key: str) -> _Record | None:
        table = self._records.get(ns)
        record = table.get(key) if table else None
        if record is not None and record.updated_at < base.now() - self.limits(ns).max_age:
            del table[key]  # type: ignore[union-attr]
            return None
        return record

    async def get(self, ns: str, key: str) -> Versioned | None:
        record = self._record(base.check_ns(ns), base.check_key(key))
        return Versioned(loads(record.raw), record.version) if record else None

    async def put(self, ns: str, key: str, value: Json, *, expected_version: int | None) -> int:
        want = base.expected(expected_version)
        raw = base.encode(value)
        outcome = self._put(base.check_ns(ns), base.check_key(key), raw, want)
        if isinstance(outcome, Conflict):
            raise outcome
        return outcome

    async def put_many(self, items: Sequence[tuple[str, str, Json, int | None]]) -> list[int | Conflict]:
        checked = base.check_puts(items)
        if not checked:
            return []
        # one namespace (the usual batch): its table and limits looked up once; each put as put() does it
        ns = checked[0][0]
        if any(item[0] != ns for item in checked):
            return [self._put(ns, key, raw, want) for ns, key, raw, want in checked]
        table = self._records.setdefault(ns, collections.OrderedDict())
        limits = self.limits(ns)
        return [self._put_in(table, limits, ns, key, raw, want) for _, key, raw, want in checked]

    def _put(self, ns: str, key: str, raw: bytes, want: int) -> int | Conflict:
        return self._put_in(
            self._records.setdefault(ns, collections.OrderedDict()), self.limits(ns), ns, key, raw, want
        )

    @staticmethod
    def _put_in(
        table: collections.OrderedDict[str, _Record],
        limits: StoreLimits,
        ns: str,
        key: str,
        raw: bytes,
        want: int,
    ) -> int | Conflict:
        now = base.now()
        record = table.get(key)
        if record is not None and record.updated_at < now - limits.max_age:
            del table[key]  # past its age: gone, as _record() has it
            record = None
        actual = record.version if record is not None else 0
        if want != ANY and want != actual:
            return Conflict(ns, key, want, actual)
        if record is not None:
            table.move_to_end(key)
        table[key] = _Record(raw, actual + 1, now)
        MemoryState._prune_table(table, limits, now)
        return actual + 1

    def _prune_records(self, ns: str, table: collections.OrderedDict[str, _Record]) -> None:
        self._prune_table(table, self.limits(ns), base.now())

    @staticmethod
    def _prune_table(table: collections.OrderedDict[str, _Record], limits: StoreLimits, now: float) -> None:
        cutoff = now - limits.max_age
        while table:
            oldest = next(iter(table.values()))
            if len(table) <= limits.max_count and oldest.updated_at >= cutoff:
                break
            table.popitem(last=False)

    async def delete(self, ns: str, key: str, *, expected_version: int = ANY) -> bool:
        record = self._record(base.check_ns(ns), base.check_key(key))
        if record is None:
            return False
        if expected_version != ANY and expected_version != record.version:
            raise Conflict(ns, key, expected_version, record.version)
        del self._records[ns][key]
        return True

    async def scan(
        self,
        ns: str,
        *,
        where: Mapping[str, Any] | None = None,
        since: float | None = None,
        newest_first: bool = True,
        limit: int = 50,
        cursor: str | None = None,
        total: bool = False,
    ) -> Page:
        base.check_ns(ns)
        where = base.check_where(where)
        limit = base.check_limit(limit)
        after = base.decode_cursor(cursor) if cursor else None
        table = self._records.get(ns)
        if not table:
            return Page([], None, 0 if total else None)
        self._prune_records(ns, table)
        floor = since if since is not None else float("-inf")
        found: list[Item] = []
        matched = 0
        ordered = sorted(table.items(), key=lambda kv: (kv[1].updated_at, kv[0]), reverse=newest_first)
        for key, record in ordered:
            if record.updated_at <= floor:
                continue
            value = loads(record.raw) if where else None
            if value is not None and not base.matches(value, where):
                continue
            matched += 1
            if len(found) <= limit and base.after_cursor(record.updated_at, key, after, newest_first):
                found.append(
                    Item(
                        key,
                        value if value is not None else loads(record.raw),
                        record.version,
                        record.updated_at,
                    )
                )
            elif len(found) > limit and not total:
                break
        more = len(found) > limit
        items = found[:limit]
        nxt = base.encode_cursor(items[-1].updated_at, items[-1].key) if more else None
        return Page(items, nxt, matched if total else None)

    # -- keys --------------------------------------------------------------------------------------------

    def _live(self, ns: str, key: str) -> tuple[bytes, float] | None:
        keys = self._keys.get(ns)
        entry = keys.entries.get(key) if keys else None
        if entry is not None and entry[1] <= base.now():
            del keys.entries[key]  # type: ignore[union-attr]
            return None
        return entry

    def _set(self, ns: str, key: str, raw: bytes, ttl: float) -> None:
        limits = self.limits(ns)
        expires = base.now() + base.check_ttl(ttl, limits)
        keys = self._keys.setdefault(ns, _Keys())
        keys.entries[key] = (raw, expires)
        heapq.heappush(keys.heap, (expires, key))
        self._prune_keys(keys, limits)

    def _prune_keys(self, keys: _Keys, limits: StoreLimits) -> None:
        """Drop expired keys, then the soonest to expire past the count; stale heap entries are skipped."""
        now = base.now()
        while keys.heap:
            expires, key = keys.heap[0]
            entry = keys.entries.get(key)
            if (
                entry is not None
                and entry[1] == expires
                and expires > now
                and len(keys.entries) <= limits.max_count
            ):
                break
            heapq.heappop(keys.heap)
            if entry is not None and entry[1] == expires:
                del keys.entries[key]
        if len(keys.heap) > 2 * len(keys.entries) + 64:
            keys.heap = [(exp, k) for k, (_, exp) in keys.entries.items()]
            heapq.heapify(keys.heap)

    async def set_if_absent(self, ns: str, key: str, value: Json, ttl: float) -> bool:
        raw = base.encode(value)
        if self._live(base.check_ns(ns), base.check_key(key)) is not None:
            return False
        self._set(ns, key, raw, ttl)
        return True

    async def get_key(self, ns: str, key: str) -> Json | None:
        entry = self._live(base.check_ns(ns), base.check_key(key))
        return loads(entry[0]) if entry else None

    async def set_key(self, ns: str, key: str, value: Json, ttl: float) -> None:
        raw = base.encode(value)
        self._set(base.check_ns(ns), base.check_key(key), raw, ttl)

    async def delete_key(self, ns: str, key: str) -> bool:
        if self._live(base.check_ns(ns), base.check_key(key)) is None:
            return False
        del self._keys[ns].entries[key]
        return True

    def _owned(self, ns: str, key: str, owner: str) -> tuple[bytes, float] | None:
        entry = self._live(base.check_ns(ns), base.check_key(key))
        return entry if entry is not None and loads(entry[0]).get("owner") == owner else None

    async def renew(self, ns: str, key: str, owner: str, ttl: float) -> bool:
        entry = self._owned(ns, key, owner)
        if entry is None:
            return False
        self._set(ns, key, entry[0], ttl)
        return True

    async def release(self, ns: str, key: str, owner: str) -> bool:
        if self._owned(ns, key, owner) is None:
            return False
        del self._keys[ns].entries[key]
        return True

    # -- logs --------------------------------------------------------------------------------------------

    async def append(self, ns: str, log: str, event: Json) -> int:
        raw = base.encode(event)
        return self._append(base.check_ns(ns), base.check_key(log, "log name"), raw)

    async def append_many(self, items: Sequence[tuple[str, str, Json]]) -> list[int]:
        return [self._append(ns, log, raw) for ns, log, raw in base.check_appends(items)]

    def _append(self, ns: str, log: str, raw: bytes) -> int:
        limits = self.limits(ns)
        logs = self._logs.setdefault(ns, collections.OrderedDict())
        entry = logs.get(log)
        if entry is None or entry.entries.maxlen != limits.max_len:
            entry = logs[log] = _Log(collections.deque(entry.entries if entry else (), maxlen=limits.max_len))
        logs.move_to_end(log)
        now = base.now()
        event_id = next(self._ids)
        entry.entries.append((event_id, now, raw))
        cutoff = now - limits.max_age
        while entry.entries and entry.entries[0][1] < cutoff:
            entry.entries.popleft()
        while len(logs) > limits.max_count:
            logs.popitem(last=False)
        waiters = self._waiters.pop((ns, log), None)
        if waiters is not None:
            waiters.event.set()
        return event_id

    def _read(self, ns: str, log: str, after_id: int, limit: int) -> list[tuple[int, Json]]:
        logs = self._logs.get(ns)
        entry = logs.get(log) if logs is not None else None
        if entry is None:
            return []
        cutoff = base.now() - self.limits(ns).max_age
        newer: list[tuple[int, float, bytes]] = []
        for item in reversed(entry.entries):
            if item[0] <= after_id or item[1] < cutoff:
                break
            newer.append(item)
        return [(event_id, loads(raw)) for event_id, _, raw in reversed(newer[-limit:])]

    async def read(
        self, ns: str, log: str, after_id: int = 0, limit: int = 100, *, block: float | None = None
    ) -> list[tuple[int, Json]]:
        base.check_ns(ns)
        base.check_key(log, "log name")
        limit = base.check_limit(limit)
        found = self._read(ns, log, after_id, limit)
        if found or not block:
            return found
        loop = asyncio.get_running_loop()
        deadline = loop.time() + block
        while not found:
            remaining = deadline - loop.time()
            if remaining <= 0 or not await self._wait(ns, log, remaining):
                break
            found = self._read(ns, log, after_id, limit)
        return found

    async def _wait(self, ns: str, log: str, timeout: float) -> bool:
        """Wait for the next append to the log; False on timeout. The event goes with its last waiter."""
        slot = self._waiters.get((ns, log))
        if slot is None:
            slot = self._waiters[(ns, log)] = _Waiters(asyncio.Event())
        slot.count += 1
        try:
            await asyncio.wait_for(slot.event.wait(), timeout)
            return True
        except TimeoutError:
            return False
        finally:
            slot.count -= 1
            if slot.count == 0 and self._waiters.get((ns, log)) is slot:
                del self._waiters[(ns, log)]

    # -- bus ---------------------------------------------------------------------------------------------

    async def publish(self, channel: str, message: Json) -> None:
        self._hub.dispatch(base.check_key(channel, "channel"), base.encode(message))
