"""The state interface: what every face and rule keeps outside one process, behind one small API.

Four kinds of state, each in namespaces (``ns``) that the library chooses (``"tasks"``, ``"idem"``...),
under keys that clients may choose (task ids, idempotency keys). Every namespace is bounded in count and in
age (:class:`StoreLimits`), so no client can grow the store without end.

1. **Records** with a version, for compare-and-set: :meth:`State.get`, :meth:`State.put`,
   :meth:`State.delete`, and :meth:`State.scan` (newest update first, equality filters, keyset pages).
2. **Keys** with an expiry: :meth:`State.set_if_absent`, :meth:`State.get_key`, :meth:`State.set_key`,
   :meth:`State.delete_key`, and the lease pair :meth:`State.renew` / :meth:`State.release`, which compare
   the value's ``"owner"`` field first.
3. **Logs**, append-only, with ids strictly increasing within a log and never reused: :meth:`State.append`,
   :meth:`State.read` (optionally blocking), :meth:`State.tail`. Trimmed to ``max_len`` entries per log and
   ``max_age`` seconds per entry; at most ``max_count`` logs per namespace.
4. **A bus**, live only and at most once: :meth:`State.publish`, :meth:`State.subscribe`.

Values are JSON objects (``dict``), written with the strict encoder of ``agentmw._transport``: a value that
is not JSON (NaN, a set, an object) is refused with ``ValueError``/``TypeError`` at the call, by every
backend alike. Backends: ``memory.py`` (one process), ``sqlite.py`` (processes on one machine), ``redis.py``
(several machines). ``docs/state.md`` says what is atomic where.
"""

from __future__ import annotations

import abc
import base64
import re
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Final, NamedTuple, Self

from .._transport import compact_encoder, dumps, loads
from ._fanout import Subscription

__all__ = [
    "ANY",
    "DEFAULT_LIMITS",
    "MAX_BATCH",
    "MAX_KEY_LENGTH",
    "MAX_PAGE",
    "Conflict",
    "Encoded",
    "Item",
    "Json",
    "Page",
    "State",
    "StoreLimits",
    "Subscription",
    "Versioned",
    "encode",
    "encoded",
    "encoded_bytes",
]

Json = dict[str, Any]

ANY: Final = -1
"""``put(..., expected_version=ANY)`` writes whatever version is there (or none)."""

MAX_KEY_LENGTH: Final = 1024
"""Keys, log names and channels are at most this many characters (they may come from clients)."""

MAX_PAGE: Final = 1000
"""``scan`` and ``read`` return at most this many items per call."""

MAX_BATCH: Final = 1000
"""``put_many`` and ``append_many`` take at most this many items per call."""

_NAMESPACE = re.compile(r"[A-Za-z0-9_.\-]{1,64}")
_FIELD = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")


class Conflict(Exception):
    """A compare-and-set found another version than the one expected (0: the record exists)."""

    def __init__(self, ns: str, key: str, expected: int, actual: int) -> None:
        super().__init__(
            f"{ns}/{key}: expected version {expected}, found {actual}" + (" (absent)" if actual == 0 else "")
        )
        self.ns = ns
        self.key = key
        self.expected = expected
        self.actual = actual


@dataclass(frozen=True, slots=True)
class StoreLimits:
    """Bounds of one namespace.

    Records: at most ``max_count``, each kept ``max_age`` seconds after its last write; past the count the
    least recently written go. Keys: at most ``max_count`` live, a ``ttl`` is capped at ``max_age``; past the
    count the soonest to expire go. Logs: at most ``max_count`` logs (the least recently appended go), each
    of at most ``max_len`` entries, each entry kept ``max_age`` seconds.
    """

    max_count: int = 10_000
    max_age: float = 7 * 24 * 3600.0
    max_len: int = 1_000

    def __post_init__(self) -> None:
        if self.max_count < 1 or self.max_len < 1 or not self.max_age > 0:
            raise ValueError(f"limits must be positive: {self}")


DEFAULT_LIMITS: Final = StoreLimits()


class Versioned(NamedTuple):
    """What :meth:`State.get` returns; unpacks as ``value, version = ...``."""

    value: Json
    version: int


@dataclass(frozen=True, slots=True)
class Item:
    """One record in a :class:`Page`."""

    key: str
    value: Json
    version: int
    updated_at: float  # seconds since the epoch, the writer's clock


@dataclass(frozen=True, slots=True)
class Page:
    """One page of :meth:`State.scan`. ``next`` is the cursor of the following page (None: the last page);
    ``total`` counts every match, when it was asked for."""

    items: list[Item]
    next: str | None
    total: int | None = None


def encode_cursor(updated_at: float, key: str) -> str:
    return base64.urlsafe_b64encode(dumps([updated_at, key])).decode("ascii")


def decode_cursor(cursor: str) -> tuple[float, str]:
    try:
        decoded = loads(base64.urlsafe_b64decode(cursor.encode("ascii")))
    except Exception as exc:  # any malformed cursor is the same error
        raise ValueError("invalid page cursor") from exc
    if (
        isinstance(decoded, list)
        and len(decoded) == 2
        and isinstance(decoded[0], (int, float))
        and isinstance(decoded[1], str)
    ):
        return float(decoded[0]), decoded[1]
    raise ValueError("invalid page cursor")


def after_cursor(updated_at: float, key: str, cursor: tuple[float, str] | None, newest_first: bool) -> bool:
    """Whether an item comes after the cursor in the scan order (updated time, then key)."""
    if cursor is None:
        return True
    if newest_first:
        return (updated_at, key) < cursor
    return (updated_at, key) > cursor


def matches(value: Json, where: Mapping[str, Any] | None) -> bool:
    """Equality on top-level fields; a missing field equals None."""
    return not where or all(value.get(name) == want for name, want in where.items())


class State(abc.ABC):
    """The interface every backend implements; the checks and the generic parts live here.

    Args:
        limits: the bounds of given namespaces; others get ``default``. :meth:`limit` sets one later.
        default: the bounds of any other namespace.
    """

    accepts_encoded: ClassVar[bool] = False
    """True when ``put`` and ``put_many`` also take a value encoded already, as :func:`encoded` made it (the
    built-in backends, which store its bytes as they are). Whoever holds a value until a later write can then
    keep that, which the garbage collector never walks, instead of the objects the value was made of. Not
    inherited: a subclass (which may read the values it is given) says so again in its own body."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "accepts_encoded" not in cls.__dict__:
            cls.accepts_encoded = False

    def __init__(
        self, *, limits: Mapping[str, StoreLimits] | None = None, default: StoreLimits = DEFAULT_LIMITS
    ) -> None:
        self._limits: dict[str, StoreLimits] = {}
        self.default_limits = default
        for ns, value in (limits or {}).items():
            self.limit(ns, value)

    # -- configuration --------------------------------------------------------------------------------

    def limit(self, ns: str, limits: StoreLimits) -> None:
        """Set the bounds of a namespace (every process sharing the store should set the same)."""
        self._limits[check_ns(ns)] = limits

    def limits(self, ns: str) -> StoreLimits:
        return self._limits.get(ns, self.default_limits)

    async def close(self) -> None:
        """Release connections and background tasks; the store is not used afterwards."""

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- 1. versioned records ---------------------------------------------------------------------------

    @abc.abstractmethod
    async def get(self, ns: str, key: str) -> Versioned | None:
        """The record's value and version (1 for a new record, +1 per write), or None."""

    @abc.abstractmethod
    async def put(self, ns: str, key: str, value: Json, *, expected_version: int | None) -> int:
        """Write the record if its version is ``expected_version``; returns the new version.

        ``None`` or ``0``: only if absent. ``ANY``: whatever is there. Raises :class:`Conflict` otherwise.
        """

    @abc.abstractmethod
    async def delete(self, ns: str, key: str, *, expected_version: int = ANY) -> bool:
        """Delete the record; False if it was absent. With a version, raises :class:`Conflict` when the
        record has another one."""

    @abc.abstractmethod
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
        """One page of the namespace's records, ordered by last write (then key).

        Args:
            where: equality on top-level fields of the value (str, int, float, bool or None; a missing field
                equals None).
            since: only records written after this time (seconds since the epoch).
            newest_first: the order; False for oldest first.
            limit: the page size, 1 to ``MAX_PAGE``.
            cursor: ``Page.next`` of the previous page.
            total: also count every match (costs a pass over the namespace in some backends).
        """

    async def put_many(self, items: Sequence[tuple[str, str, Json, int | None]]) -> list[int | Conflict]:
        """Several compare-and-set writes ``(ns, key, value, expected_version)`` in one call, in order.

        Each item is checked and written as :meth:`put` would, but a conflict is returned in its place (a
        :class:`Conflict`, not raised) and the other items are still written. An item sees the items before it
        (the same key twice: the second expects the version the first made). Every item is checked before any
        is written: a bad namespace, key, value or version raises and writes nothing. At most ``MAX_BATCH``
        items. One transaction on SQLite (readers see all of it or none), one round trip on Redis (one script
        per namespace, each atomic), and no await between the items in memory.
        """
        checked = check_puts(items)
        out: list[int | Conflict] = []
        for (ns, key, _, want), (_, _, value, _) in zip(checked, items, strict=True):
            try:
                out.append(await self.put(ns, key, value, expected_version=want))
            except Conflict as conflict:
                out.append(conflict)
        return out

    # -- 2. expiring keys -------------------------------------------------------------------------------

    @abc.abstractmethod
    async def set_if_absent(self, ns: str, key: str, value: Json, ttl: float) -> bool:
        """Set the key for ``ttl`` seconds if it is absent (or expired); True if this call set it."""

    @abc.abstractmethod
    async def get_key(self, ns: str, key: str) -> Json | None:
        """The key's value, or None when absent or expired."""

    @abc.abstractmethod
    async def set_key(self, ns: str, key: str, value: Json, ttl: float) -> None:
        """Set the key for ``ttl`` seconds, whatever was there."""

    @abc.abstractmethod
    async def delete_key(self, ns: str, key: str) -> bool:
        """Delete the key; True if it was live. Of racing deleters exactly one gets True (a single use)."""

    @abc.abstractmethod
    async def renew(self, ns: str, key: str, owner: str, ttl: float) -> bool:
        """Extend a lease: if the key is live and its value's ``"owner"`` is ``owner``, it expires ``ttl``
        seconds from now; False otherwise (expired, or taken by another). Take a lease with
        ``set_if_absent(ns, key, {"owner": owner, ...}, ttl)``."""

    @abc.abstractmethod
    async def release(self, ns: str, key: str, owner: str) -> bool:
        """Delete the key if its value's ``"owner"`` is ``owner``; True if it did."""

    # -- 3. append-only logs ------------------------------------------------------------------------------

    @abc.abstractmethod
    async def append(self, ns: str, log: str, event: Json) -> int:
        """Append an event; returns its id, greater than every id before it in this log."""

    async def append_many(self, items: Sequence[tuple[str, str, Json]]) -> list[int]:
        """Several appends ``(ns, log, event)`` in one call, in order; returns their ids (within a log, each
        greater than the one before). Every item is checked before any is written. At most ``MAX_BATCH``
        items; one transaction on SQLite, one round trip on Redis."""
        check_appends(items)
        return [await self.append(ns, log, event) for ns, log, event in items]

    @abc.abstractmethod
    async def read(
        self, ns: str, log: str, after_id: int = 0, limit: int = 100, *, block: float | None = None
    ) -> list[tuple[int, Json]]:
        """Up to ``limit`` events with ids above ``after_id``, in order. With ``block`` (seconds), waits that
        long for at least one when there are none yet. Entries trimmed away are skipped silently: compare
        the first id with what you expected to see gaps."""

    async def tail(
        self, ns: str, log: str, after_id: int = 0, *, batch: int = 100, wait: float = 15.0
    ) -> AsyncIterator[tuple[int, Json]]:
        """Every event after ``after_id``, then each new one as it is appended; never ends on its own."""
        while True:
            for entry in await self.read(ns, log, after_id, batch, block=wait):
                after_id = entry[0]
                yield entry

    # -- 4. the bus ------------------------------------------------------------------------------------------

    @abc.abstractmethod
    async def publish(self, channel: str, message: Json) -> None:
        """Send a message to the current subscribers of the channel, in every process; at most once."""

    def subscribe(self, *channels: str, max_queue: int = 1000) -> Subscription:
        """A subscription to the channels, live once entered::

            async with state.subscribe("tasks", "cancel") as sub:
                async for channel, message in sub: ...

        Messages published after ``async with`` has entered are delivered, each at most once; past
        ``max_queue`` undelivered ones, new messages are dropped (``sub.dropped`` counts them).
        """
        if not channels:
            raise ValueError("subscribe needs at least one channel")
        return Subscription(self._bus_hub(), tuple(check_key(c, "channel") for c in channels), max_queue)

    @abc.abstractmethod
    def _bus_hub(self) -> Any:
        """The backend's fan-out (``_fanout.Hub``) that subscriptions register with."""


def check_ns(ns: str) -> str:
    if not isinstance(ns, str) or not _NAMESPACE.fullmatch(ns):
        raise ValueError(f"a namespace is 1-64 letters, digits, '_', '.' or '-': {ns!r}")
    return ns


def check_key(key: str, what: str = "key") -> str:
    if not isinstance(key, str) or not key or len(key) > MAX_KEY_LENGTH:
        raise ValueError(f"a {what} is a non-empty string of at most {MAX_KEY_LENGTH} characters")
    return key


def check_batch(items: Sequence[Any], width: int) -> None:
    if isinstance(items, (str, bytes, Mapping)) or not isinstance(items, Sequence):
        raise TypeError("a batch is a sequence (list or tuple) of tuples")
    if len(items) > MAX_BATCH:
        raise ValueError(f"a batch has at most {MAX_BATCH} items, not {len(items)}")
    for item in items:
        if not isinstance(item, (tuple, list)) or len(item) != width:
            raise TypeError(f"each item of the batch is a tuple of {width}: {item!r:.80}")


def check_puts(items: Sequence[tuple[str, str, Json, int | None]]) -> list[tuple[str, str, bytes, int]]:
    """The items of ``put_many`` checked before any write: ``(ns, key, encoded value, expected version)``."""
    check_batch(items, 4)
    known: set[str] = set()  # a batch is usually of one namespace: checked once
    out = []
    for ns, key, value, version in items:
        if type(ns) is not str or ns not in known:
            known.add(check_ns(ns))
        out.append((ns, check_key(key), encode(value), expected(version)))
    return out


def check_appends(items: Sequence[tuple[str, str, Json]]) -> list[tuple[str, str, bytes]]:
    """The items of ``append_many`` checked before any write: ``(ns, log, encoded event)``."""
    check_batch(items, 3)
    return [(check_ns(ns), check_key(log, "log name"), encode(event)) for ns, log, event in items]


def check_ttl(ttl: float, limits: StoreLimits) -> float:
    if not ttl > 0:
        raise ValueError("ttl must be positive")
    return min(float(ttl), limits.max_age)


def check_limit(limit: int) -> int:
    if not isinstance(limit, int) or limit < 1:
        raise ValueError("limit must be a positive integer")
    return min(limit, MAX_PAGE)


def check_where(where: Mapping[str, Any] | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, want in (where or {}).items():
        if not isinstance(name, str) or not _FIELD.fullmatch(name):
            raise ValueError(f"a filter names a top-level field: {name!r}")
        if want is not None and not isinstance(want, (str, int, float, bool)):
            raise ValueError(f"a filter compares with a str, int, float, bool or None: {name}={want!r}")
        out[name] = want
    return out


_strict = compact_encoder(ensure_ascii=False, default=None)


_ENCODED = object()  # marks what encoded() made; no other code holds it, so nothing else passes for one

Encoded = tuple[object, bytes]
"""A value encoded already: made by :func:`encoded` only, its bytes read with :func:`encoded_bytes`."""


def encoded(value: Json) -> Encoded:
    """``value`` checked and encoded now (as :func:`encode` does, with its errors), for a state whose
    ``accepts_encoded`` is True. A tuple of an untracked marker and bytes: the garbage collector stops
    tracking it the first time it sees it."""
    return (_ENCODED, encode(value))


def encoded_bytes(value: Any) -> bytes | None:
    """The bytes of a value :func:`encoded` made; None for anything else."""
    return value[1] if type(value) is tuple and len(value) == 2 and value[0] is _ENCODED else None


def encode(value: Json | Encoded) -> bytes:
    """The stored form of a value: strict JSON of a dict. Unlike ``_transport.dumps`` (made for answers,
    where any object becomes its ``str``), a value JSON cannot hold is refused: TypeError (a set, an object),
    ValueError (NaN, infinities), so what is read back is always what was written. A value :func:`encoded`
    made was checked then: its bytes are returned as they are."""
    if type(value) is tuple and len(value) == 2 and value[0] is _ENCODED:
        return value[1]
    if not isinstance(value, dict):
        raise TypeError(f"a stored value is a JSON object (dict), not {type(value).__name__}")
    text = _strict(value)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: written as its escape, as _transport.dumps does
        return dumps(value)


def expected(version: int | None) -> int:
    if version is None:
        return 0
    if not isinstance(version, int) or version < ANY:
        raise ValueError("expected_version is None, 0, ANY or a version")
    return version


now = time.time
