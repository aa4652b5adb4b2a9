"""Bounded in-memory tables: every table keyed by a client-chosen id is capped in count, in age and in bytes.

:class:`BoundedTable` is a mapping ordered by insertion (or by last use, with ``touch``). Each entry has
a deadline; an entry past it reads as absent. Inserting prunes from the oldest end: expired entries in
one batch, then the oldest ones while the table is over its count. Both stop at the first entry that is
neither, so an insert costs O(1) amortised and a lookup O(1). An entry the table's ``pinned`` predicate
holds (a run in progress, a parked question) is never dropped: it counts as used now and moves to the
newest end. A table given ``max_bytes`` and a ``size`` function also drops its oldest unpinned entries while
the sizes of all its entries add up to more than ``max_bytes``. A size is what the code already measured
(the length of a frame or record it encoded), read by ``size`` when the entry is put or resized (:meth:`resize`),
never a walk of the value. See ``docs/limits.md`` for every table, its limits and their defaults.
"""

from __future__ import annotations

import collections
import time
from collections.abc import Callable, Iterator, MutableMapping
from typing import Any, Generic, TypeVar

from ._memory import LARGE, note

__all__ = ["BoundedTable", "UsedTokens"]

K = TypeVar("K")
V = TypeVar("V")
_MISSING: Any = object()


class BoundedTable(MutableMapping[K, V], Generic[K, V]):
    """A mapping of at most ``max_items`` entries, each forgotten ``max_age`` seconds after its insertion
    (or its last use, with ``touch=True``). Pinned entries count, but are never dropped: only they can
    take the table past ``max_items``.

    Args:
        max_items: the count cap; the oldest unpinned entries go first.
        max_age: seconds an entry lives; ``put(..., ttl=...)`` gives one entry a shorter or longer life.
        pinned: ``value -> bool``; a pinned entry is never dropped, and its age restarts.
        on_evict: ``(key, value, early)`` after an entry is dropped by the table (not by ``pop`` or
            ``del``); ``early`` is True when the count cap dropped it before its deadline.
        touch: a lookup (``get``, ``[]``, ``in``) renews the entry's age and makes it the newest.
        clock: seconds, monotonic (tests pass a fake one).
        max_bytes: the byte budget: past it the oldest unpinned entries go (pinned ones count towards it).
        size: ``(key, value) -> bytes``, read at ``put`` and ``resize``; required with ``max_bytes``.
    """

    __slots__ = (
        "_entries",
        "_sizes",
        "bytes",
        "clock",
        "max_age",
        "max_bytes",
        "max_items",
        "on_evict",
        "pinned",
        "size",
        "touch",
    )

    def __init__(
        self,
        max_items: int,
        max_age: float,
        *,
        pinned: Callable[[V], bool] | None = None,
        on_evict: Callable[[K, V, bool], None] | None = None,
        touch: bool = False,
        clock: Callable[[], float] = time.monotonic,
        max_bytes: int | None = None,
        size: Callable[[K, V], int] | None = None,
    ) -> None:
        if max_items < 1:
            raise ValueError("max_items must be at least 1")
        if max_age <= 0:
            raise ValueError("max_age must be positive")
        if (max_bytes is None) != (size is None) or (max_bytes is not None and max_bytes < 1):
            raise ValueError("max_bytes (at least 1) and size go together")
        self.max_bytes = max_bytes
        self.size = size
        self.bytes = 0  # the sizes of the entries, as last measured
        self._sizes: dict[K, int] = {}
        self.max_items = max_items
        self.max_age = max_age
        self.pinned = pinned
        self.on_evict = on_evict
        self.touch = touch
        self.clock = clock
        # key -> (deadline, value): a tuple, which the garbage collector stops tracking once it sees that it
        # holds no container (a table of plain values costs the collector nothing however long it lives)
        self._entries: collections.OrderedDict[K, tuple[float, V]] = collections.OrderedDict()

    # --- reading ---------------------------------------------------------------------------------------
    def get(self, key: K, default: Any = None) -> Any:
        slot = self._entries.get(key)
        if slot is None:
            return default
        now = self.clock()
        if slot[0] <= now:
            if self.pinned is None or not self.pinned(slot[1]):
                del self._entries[key]
                self._unsized(key)
                self._evicted(key, slot[1], False)
                return default
            self._entries[key] = (now + self.max_age, slot[1])
            self._entries.move_to_end(key)
        elif self.touch:
            self._entries[key] = (now + self.max_age, slot[1])
            self._entries.move_to_end(key)
        return slot[1]

    def __getitem__(self, key: K) -> V:
        value = self.get(key, _MISSING)
        if value is _MISSING:
            raise KeyError(key)
        return value  # type: ignore[no-any-return]

    def __contains__(self, key: object) -> bool:
        return self.get(key, _MISSING) is not _MISSING  # type: ignore[arg-type]

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self) -> Iterator[K]:
        return iter(list(self._entries))

    def values(self) -> list[V]:  # type: ignore[override]
        return [slot[1] for slot in self._entries.values()]

    def items(self) -> list[tuple[K, V]]:  # type: ignore[override]
        return [(key, slot[1]) for key, slot in self._entries.items()]

    # --- writing ---------------------------------------------------------------------------------------
    def __setitem__(self, key: K, value: V) -> None:
        self.put(key, value)

    def put(self, key: K, value: V, ttl: float | None = None) -> None:
        """Insert or replace ``key`` as the newest entry, living ``ttl`` (default ``max_age``) seconds."""
        now = self.clock()
        entries = self._entries
        if key in entries:
            entries[key] = (now + (self.max_age if ttl is None else ttl), value)
            entries.move_to_end(key)
            if self.size is not None:
                self.resize(key)
            return
        entries[key] = (now + (self.max_age if ttl is None else ttl), value)
        if self.size is not None:
            measured = self._sizes[key] = self.size(key, value)
            self.bytes += measured
            if measured >= LARGE:
                note(measured)
        if len(entries) > self.max_items or next(iter(entries.values()))[0] <= now or self._over():
            self._prune(now, key)

    def resize(self, key: K) -> None:
        """Measure ``key``'s entry again (its value grew or shrank), then drop the oldest past the budget."""
        if self.size is None or key not in self._entries:
            return
        measured = self.size(key, self._entries[key][1])
        self.bytes += measured - self._sizes.get(key, 0)
        self._sizes[key] = measured
        if measured >= LARGE:
            note(measured)
        if self._over():
            self._prune(self.clock(), key)

    def _over(self) -> bool:
        return self.max_bytes is not None and self.bytes > self.max_bytes

    def _unsized(self, key: K) -> None:
        if self.size is not None:
            measured = self._sizes.pop(key, 0)
            self.bytes -= measured
            if measured >= LARGE:
                note(measured)  # its memory is free once the value goes: give it back when traffic stops

    def put_if_absent(self, key: K, value: V, ttl: float | None = None) -> bool:
        """Set-if-absent with an expiry, the claim primitive: True when ``key`` was absent (or expired) and is
        now set; False when a live entry holds it. Atomic on the event loop (no await inside)."""
        if key in self:
            return False
        self.put(key, value, ttl)
        return True

    def __delitem__(self, key: K) -> None:
        del self._entries[key]
        self._unsized(key)

    def pop(self, key: K, default: Any = _MISSING) -> Any:
        slot = self._entries.pop(key, None)
        if slot is None:
            if default is _MISSING:
                raise KeyError(key)
            return default
        self._unsized(key)
        return slot[1]

    def clear(self) -> None:
        self._entries.clear()
        self._sizes.clear()
        self.bytes = 0

    def prune(self) -> int:
        """Drop what is expired or over the count now (inserts do this on their own); returns how many."""
        before = len(self._entries)
        self._prune(self.clock(), _MISSING)
        return before - len(self._entries)

    def _prune(self, now: float, keep: Any) -> None:
        entries = self._entries
        pinned = self.pinned
        budget = len(entries)  # each entry is looked at once at most, so pinned entries cannot loop
        while entries and budget:
            key, slot = next(iter(entries.items()))
            expired = slot[0] <= now
            if not expired and len(entries) <= self.max_items and not self._over():
                return
            if key is keep or key == keep:
                return  # only the entry being inserted is left to look at
            budget -= 1
            if pinned is not None and pinned(slot[1]):
                entries[key] = (max(slot[0], now + self.max_age), slot[1])
                entries.move_to_end(key)
                continue
            del entries[key]
            self._unsized(key)
            self._evicted(key, slot[1], not expired)

    def _evicted(self, key: K, value: V, early: bool) -> None:
        if self.on_evict is not None:
            self.on_evict(key, value, early)


class UsedTokens:
    """Single-use tokens (each valid until its own expiry), remembered once used, in bounded memory.

    Past ``max_items`` the oldest used tokens are forgotten before they expire. So that a forgotten token
    can still never be used twice, the table then fails closed: it remembers the latest expiry among the
    tokens it dropped early, and any token that expires no later than that (read with ``expiry_of``,
    wall-clock seconds) counts as used. Only a flood of ``max_items`` completed uses inside one ``ttl``
    gets there, and then a client at worst starts its request again.
    """

    __slots__ = ("expiry_of", "floor", "table", "ttl")

    def __init__(self, ttl: float, max_items: int, expiry_of: Callable[[str], float | None]) -> None:
        self.ttl = ttl
        self.expiry_of = expiry_of
        self.floor = 0.0
        self.table: BoundedTable[str, float] = BoundedTable(max_items, ttl, on_evict=self._evicted)

    def _evicted(self, key: str, expires: float, early: bool) -> None:
        if early:
            self.floor = max(self.floor, expires)

    def seen(self, token: Any) -> bool:
        if not isinstance(token, str):
            return False
        if token in self.table:
            return True
        if self.floor:
            expires = self.expiry_of(token)
            return expires is not None and expires <= self.floor
        return False

    def claim(self, token: str) -> bool:
        """Use ``token`` now: True for the one caller that claims it first, False for every later one."""
        if self.seen(token):
            return False
        return self.table.put_if_absent(token, self.expiry_of(token) or time.time() + self.ttl)

    def add(self, token: str) -> None:
        # the token's own expiry, else an upper bound of it: it was issued before now, for at most ttl
        self.table.put(token, self.expiry_of(token) or time.time() + self.ttl)

    def __len__(self) -> int:
        return len(self.table)
