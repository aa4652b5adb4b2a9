"""SQLite state, the embedded default: one file, durable, shared by the worker processes of one machine.

- **Concurrency.** The file is in WAL mode, so readers never wait for the writer; writers queue on SQLite's
  lock with a ``busy_timeout``. Every operation is one short transaction: a single statement (``INSERT ...
  ON CONFLICT ... RETURNING``, ``UPDATE ... WHERE version = ? RETURNING``), or ``BEGIN IMMEDIATE`` for the
  few that take several (an append and its trim, a batch), so no transaction ever has to upgrade a read lock. That
  makes every compare-and-set, set-if-absent, renew and append atomic across processes.
- **On the event loop where it cannot block, on a thread otherwise.** Each process keeps two connections.
  One is used directly on the event loop, with ``busy_timeout=0``: every read (WAL readers never wait for a
  writer), and every short write (one statement, or one ``BEGIN IMMEDIATE`` transaction of a few). If the
  file's write lock is taken (``SQLITE_BUSY``, at once: nothing waits), the transaction is rolled back, so
  nothing of it happened, and the whole operation runs again on the other connection, owned by one
  dedicated thread, which waits up to ``busy_timeout`` for the lock. The thread also runs what may take
  long: opening the file, the prunes, scans with a filter or a count, reads of more than 100 events, batches
  of more than 64 items, and the WAL checkpoints (the loop's connection never checkpoints; every 256 of its
  writes, the thread runs a passive one). With ``synchronous="FULL"`` (a commit waits for the disk) every
  write runs on the thread. ``executor="anyio"`` uses anyio's worker threads and a lock instead of the
  dedicated thread. ``bench/state_ops.py`` measures them.
- **Across processes.** The bus is a table; a watcher in each process that has subscribers, or readers
  blocked on a log, checks ``PRAGMA data_version`` (which changes only when another connection commits)
  every ``poll`` seconds (50 ms), and only then reads the new bus rows and wakes the blocked readers. Inside
  one process, publishes and appends wake their subscribers and readers at once.
- **Bounds.** Reads skip what is past its age at once. Deleting it, and what is past a namespace's count, is
  done by the writes: a full prune of a namespace every ``max_count // 20`` writes to it in this process,
  or after a second, whichever comes first; so a table can exceed its count by that batch, per process.
- **Durability.** ``synchronous=FULL`` by default: a commit returns once the WAL is on the disk, so whatever
  was acknowledged survives a crash of the process, of the OS, or a power loss. ``synchronous="NORMAL"``
  (``sqlite://x.db?synchronous=normal``) skips that wait: it survives a crash of the process, not a power loss.
  When the file is first opened and a ``-wal`` file is there (the last process did not close cleanly), it is
  walked before SQLite recovers it (``_wal.py``): a damaged frame, which makes SQLite drop every transaction
  after it, is logged as a WARNING saying how many committed transactions are lost and from when.
- **Faults.** A transient fault of the file or the disk (locked past ``busy_timeout``, full, read-only, an I/O
  error, a file that cannot be opened) raises :class:`agentmw.errors.StoreUnavailable`, translated where an
  operation runs (``_read``, ``_write``, ``_run``); a transaction that failed is rolled back (its COMMIT
  included), so the same connections serve again once the fault is gone.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import functools
import logging
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar

import anyio.to_thread

from .._transport import loads
from ..errors import StoreUnavailable
from . import base
from ._fanout import Hub
from ._wal import check_wal
from .base import ANY, Conflict, Item, Json, Page, State, StoreLimits, Versioned

__all__ = ["SQLiteState"]

T = TypeVar("T")
logger = logging.getLogger("agentmw.state")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS state_records (
    ns TEXT NOT NULL, key TEXT NOT NULL, version INTEGER NOT NULL, updated REAL NOT NULL, body TEXT NOT NULL,
    PRIMARY KEY (ns, key)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS state_records_by_time ON state_records (ns, updated, key);
CREATE TABLE IF NOT EXISTS state_keys (
    ns TEXT NOT NULL, key TEXT NOT NULL, expires REAL NOT NULL, body TEXT NOT NULL,
    PRIMARY KEY (ns, key)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS state_keys_by_expiry ON state_keys (ns, expires);
CREATE TABLE IF NOT EXISTS state_logs (
    ns TEXT NOT NULL, log TEXT NOT NULL, n INTEGER NOT NULL, updated REAL NOT NULL,
    PRIMARY KEY (ns, log)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS state_logs_by_time ON state_logs (ns, updated);
CREATE TABLE IF NOT EXISTS state_entries (
    id INTEGER PRIMARY KEY AUTOINCREMENT, ns TEXT NOT NULL, log TEXT NOT NULL, t REAL NOT NULL,
    body TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS state_entries_by_log ON state_entries (ns, log, id);
CREATE INDEX IF NOT EXISTS state_entries_by_time ON state_entries (ns, t);
CREATE TABLE IF NOT EXISTS state_bus (
    id INTEGER PRIMARY KEY AUTOINCREMENT, channel TEXT NOT NULL, t REAL NOT NULL, origin TEXT NOT NULL,
    body TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS state_bus_by_time ON state_bus (t);
"""

_PRUNE_SECONDS = 1.0
_BUS_BATCH = 1000
_LOOP_BATCH = 64  # put_many / append_many with more items run on the thread
_LOOP_READ = 100  # reads of more events run on the thread
_CHECKPOINT_WRITES = 256  # rows written on the loop's connection between two passive checkpoints
_SQLITE_BUSY = 5
_SQLITE_LOCKED = 6
# Result codes (primary, the low byte) that mean "not now" rather than "not this": the file is locked beyond the
# busy timeout, the disk or the database is full, the file or its folder is read-only, the disk failed a read or
# a write, the file cannot be opened. Anything else (a constraint, a malformed file, a closed store) is raised as
# it is.
_TRANSIENT = {
    _SQLITE_BUSY: "SQLite is locked by another connection",
    _SQLITE_LOCKED: "SQLite is locked by another connection",
    7: "SQLite is out of memory",
    8: "SQLite is read-only",
    10: "SQLite met a disk I/O error",
    13: "SQLite's disk or database is full",
    14: "SQLite cannot open its file",
    15: "SQLite's file lock failed",
}
_TRANSIENT_TEXT = (  # Python < 3.11 has no sqlite_errorcode: the messages SQLite gives these codes
    ("locked", "SQLite is locked by another connection"),
    ("busy", "SQLite is locked by another connection"),
    ("readonly", "SQLite is read-only"),
    ("disk i/o error", "SQLite met a disk I/O error"),
    ("full", "SQLite's disk or database is full"),
    ("unable to open", "SQLite cannot open its file"),
)


def _busy(exc: BaseException) -> bool:
    """SQLITE_BUSY (or LOCKED, any extended code): the statement did not run for a lock; nothing changed."""
    if not isinstance(exc, sqlite3.OperationalError):
        return False
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (_SQLITE_BUSY, _SQLITE_LOCKED)
    return "locked" in str(exc) or "busy" in str(exc)  # pragma: no cover - Python < 3.11


def _fault(exc: BaseException) -> StoreUnavailable | None:
    """The :class:`StoreUnavailable` a sqlite3 error means, or None when it is not a fault of the file or disk."""
    if isinstance(exc, StoreUnavailable):
        return exc
    if not isinstance(exc, sqlite3.OperationalError):
        return None
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        why = _TRANSIENT.get(code & 0xFF)
    else:  # pragma: no cover - Python < 3.11
        text = str(exc).lower()
        why = next((w for marker, w in _TRANSIENT_TEXT if marker in text), None)
    if why is None:
        return None
    return StoreUnavailable(f"the agent's store is unavailable ({why}); try again shortly")


def _raise_fault(exc: BaseException) -> None:
    """Raise ``exc`` as StoreUnavailable when it is a transient fault; return otherwise (the caller re-raises)."""
    fault = _fault(exc)
    if fault is not None and fault is not exc:
        raise fault from exc


@dataclass(slots=True)
class _Due:
    """When a namespace of one kind was last pruned by this process, and the writes since."""

    writes: int = 0
    at: float = 0.0


def _tx(db: sqlite3.Connection, fn: Callable[[], T]) -> T:
    db.execute("BEGIN IMMEDIATE")
    try:
        result = fn()
        db.execute("COMMIT")
    except BaseException:
        # A COMMIT that failed (the disk full, busy) leaves the transaction open: rolled back here, or the
        # connection's next BEGIN would fail for good ("cannot start a transaction within a transaction").
        if db.in_transaction:
            try:
                db.execute("ROLLBACK")
            except sqlite3.Error:
                logger.debug("agentmw state: a rollback failed", exc_info=True)
        raise
    return result


def _where_sql(where: dict[str, Any]) -> tuple[str, list[Any]]:
    clauses: list[str] = []
    args: list[Any] = []
    for name, want in where.items():
        if want is None:
            clauses.append(f"json_extract(body, '$.{name}') IS NULL")
        else:
            clauses.append(f"json_extract(body, '$.{name}') = ?")
            args.append(want)
    return "".join(f" AND {c}" for c in clauses), args


class SQLiteState(State):
    """All four kinds of state in one SQLite file, shared by every process that opens it.

    Args:
        path: the database file (created if absent). Other agentmw tables may live in the same file.
        poll: seconds between two checks for other processes' publishes and appends.
        busy_timeout: seconds a write waits for another process's transaction before failing.
        synchronous: ``"FULL"`` (the default: a commit, and so an acknowledged answer, waits for the disk and
            survives a power loss) or ``"NORMAL"`` (a commit survives a crash of the process, but a power loss or
            an OS crash may undo the last ones); either case.
        executor: ``"thread"``, one dedicated thread and connection; or ``"anyio"``, anyio's threads.
        bus_retention: seconds a bus message stays in the table for slow watchers.
    """

    accepts_encoded = True

    def __init__(
        self,
        path: str | Path,
        *,
        limits: Mapping[str, StoreLimits] | None = None,
        default: StoreLimits = base.DEFAULT_LIMITS,
        poll: float = 0.05,
        busy_timeout: float = 10.0,
        synchronous: Literal["NORMAL", "FULL", "normal", "full"] = "FULL",
        executor: Literal["thread", "anyio"] = "thread",
        bus_retention: float = 30.0,
    ) -> None:
        super().__init__(limits=limits, default=default)
        level = synchronous.upper() if isinstance(synchronous, str) else synchronous
        if level not in ("NORMAL", "FULL") or executor not in ("thread", "anyio"):
            raise ValueError("synchronous is FULL or NORMAL; executor is thread or anyio")
        self.path = str(path)
        self.poll = poll
        self.busy_timeout = busy_timeout
        self.synchronous: Literal["NORMAL", "FULL"] = "FULL" if level == "FULL" else "NORMAL"
        self.wal_report: Any = None  # what the WAL check found when this store first opened the file
        self.executor = executor
        self.bus_retention = bus_retention
        self.fallbacks = 0  # on-loop attempts that found the write lock taken and went to the thread
        self._db: sqlite3.Connection | None = None
        self._ldb: sqlite3.Connection | None = None  # the loop's connection, made by the thread
        self._ldb_thread: int | None = None  # the thread of the event loop that uses it
        self._loop_writes = self.synchronous == "NORMAL"
        self._wal_checked = False
        self._loop_rows = 0
        self._checkpointer: asyncio.Task[None] | None = None
        self._closing = False
        self._lock = threading.Lock()
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None
        self._due: dict[tuple[str, str], _Due] = {}
        self._origin = uuid.uuid4().hex
        self._hub = Hub(on_first=self._listen)
        self._bus_after: int | None = None
        self._bus_pruned = 0.0
        self._log_waiters: dict[tuple[str, str], list[asyncio.Event]] = {}
        self._watcher: asyncio.Task[None] | None = None
        self._closed = False

    # -- the connection and its thread --------------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        if self._db is None:
            if not self._wal_checked:  # before SQLite's recovery replays the -wal file (_wal.py)
                self._wal_checked = True
                self.wal_report = check_wal(self.path)
            db = sqlite3.connect(
                self.path, timeout=self.busy_timeout, isolation_level=None, check_same_thread=False
            )
            db.execute(f"PRAGMA busy_timeout={int(self.busy_timeout * 1000)}")
            deadline = time.monotonic() + self.busy_timeout
            while (
                True
            ):  # another process opening the new file at the same time: SQLITE_BUSY, busy handler or not
                try:
                    db.execute("PRAGMA journal_mode=WAL")
                    break
                except sqlite3.OperationalError as exc:
                    if not _busy(exc) or time.monotonic() > deadline:
                        raise
                    time.sleep(0.01)
            db.execute(f"PRAGMA synchronous={self.synchronous}")
            _tx(db, lambda: [db.execute(s) for s in _SCHEMA.split(";") if s.strip()])
            self._db = db
            if self._ldb is None and not self._closing:
                ldb = sqlite3.connect(self.path, timeout=0, isolation_level=None, check_same_thread=False)
                ldb.execute("PRAGMA busy_timeout=0")
                ldb.execute(f"PRAGMA synchronous={self.synchronous}")
                ldb.execute("PRAGMA wal_autocheckpoint=0")  # checkpoints run on the thread
                self._ldb = ldb
        return self._db

    def _call(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        return fn(self._connect())

    def _locked(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        with self._lock:
            return fn(self._connect())

    async def _run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        if self._closed:
            raise RuntimeError("the state store is closed")
        if self._ldb_thread is None:
            self._ldb_thread = threading.get_ident()  # the loop's connection is for this loop's thread only
        try:
            if self.executor == "anyio":
                return await anyio.to_thread.run_sync(self._locked, fn)
            if self._pool is None:
                self._pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="agentmw-sqlite")
            return await asyncio.get_running_loop().run_in_executor(self._pool, self._call, fn)
        except sqlite3.OperationalError as exc:  # the one boundary of the thread: faults are StoreUnavailable
            _raise_fault(exc)
            raise

    def _loop_db(self) -> sqlite3.Connection | None:
        """The loop's connection, when there is one and this is the thread of the loop that uses it."""
        db = self._ldb
        if db is None or self._closing:
            return None
        ident = threading.get_ident()
        if self._ldb_thread != ident:
            if self._ldb_thread is not None:
                return None  # another event loop, on another thread: it goes through the thread
            self._ldb_thread = ident
        return db

    async def _read(self, fn: Callable[[sqlite3.Connection], T], *, short: bool = True) -> T:
        """A read: on the loop's connection (a WAL reader does not wait for writers), else on the thread."""
        db = self._loop_db() if short else None
        if db is not None:
            try:
                return fn(db)
            except sqlite3.OperationalError as exc:
                if not _busy(exc):
                    _raise_fault(exc)
                    raise
                self.fallbacks += 1
        return await self._run(fn)

    async def _write(self, fn: Callable[[sqlite3.Connection], T], *, short: bool = True, rows: int = 1) -> T:
        """A write: on the loop's connection when short and the lock is free at once, else on the thread.

        ``fn`` is one statement, or one transaction (``_tx``): when the lock is taken it fails before changing
        anything, or is rolled back, so running it again on the thread does it once.
        """
        db = self._loop_db() if short and self._loop_writes else None
        if db is not None:
            try:
                result = fn(db)
            except BaseException as exc:
                if db.in_transaction:
                    try:
                        db.execute("ROLLBACK")
                    except sqlite3.Error:
                        logger.debug("agentmw state: a rollback failed", exc_info=True)
                if not _busy(exc):
                    _raise_fault(exc)
                    raise
                self.fallbacks += 1
            else:
                self._loop_rows += rows
                if self._loop_rows >= _CHECKPOINT_WRITES:
                    self._checkpoint()
                return result
        return await self._run(fn)

    def _checkpoint(self) -> None:
        """A passive checkpoint of the WAL on the thread (never on the loop); one at a time."""
        self._loop_rows = 0
        if self._checkpointer is None or self._checkpointer.done():
            self._checkpointer = asyncio.get_running_loop().create_task(
                self._run_checkpoint(), name="agentmw-sqlite-checkpoint"
            )

    async def _run_checkpoint(self) -> None:
        try:
            await self._run(lambda db: db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall())
        except Exception:  # the next one will try again; a checkpoint that fails loses nothing
            if not self._closed:
                logger.exception("agentmw state: checkpointing %s failed", self.path)

    async def close(self) -> None:
        if self._closed or self._closing:
            return
        self._closing = True  # from here on, every call goes to the thread
        if self._checkpointer is not None:
            await asyncio.gather(self._checkpointer, return_exceptions=True)
        self._hub.close()
        if self._watcher is not None:
            self._watcher.cancel()
            await asyncio.gather(self._watcher, return_exceptions=True)
        for events in self._log_waiters.values():
            for event in events:
                event.set()

        def shut() -> None:
            if self._ldb is not None:  # not in use: the loop is here, and calls go to the thread now
                self._ldb.close()
                self._ldb = None
            if self._db is not None:
                self._db.close()
                self._db = None

        if self._pool is not None:
            await asyncio.get_running_loop().run_in_executor(self._pool, shut)
            self._pool.shutdown(wait=True)
        else:
            with self._lock:
                shut()
        self._closed = True

    def _bus_hub(self) -> Hub:
        return self._hub

    def _prune_due(self, kind: str, ns: str, limits: StoreLimits, writes: int = 1) -> bool:
        """Count writes; True when the namespace should be pruned with them."""
        due = self._due.setdefault((kind, ns), _Due())
        due.writes += writes
        now = time.monotonic()
        if due.writes >= max(1, limits.max_count // 20) or now - due.at >= _PRUNE_SECONDS:
            due.writes = 0
            due.at = now
            return True
        return False

    # -- records -------------------------------------------------------------------------------------------

    async def get(self, ns: str, key: str) -> Versioned | None:
        cutoff = base.now() - self.limits(base.check_ns(ns)).max_age
        base.check_key(key)
        row = await self._read(
            lambda db: db.execute(
                "SELECT body, version FROM state_records WHERE ns = ? AND key = ? AND updated >= ?",
                (ns, key, cutoff),
            ).fetchone()
        )
        return Versioned(loads(row[0]), row[1]) if row else None

    async def put(self, ns: str, key: str, value: Json, *, expected_version: int | None) -> int:
        want = base.expected(expected_version)
        body = base.encode(value).decode()
        limits = self.limits(base.check_ns(ns))
        base.check_key(key)
        prune = self._prune_due("records", ns, limits)

        def write(db: sqlite3.Connection) -> int:
            now = base.now()
            version = _put_row(db, ns, key, body, want, now, now - limits.max_age)
            if version > 0 and prune:
                self._prune_records(db, ns, limits)
            return version

        # One statement (the SELECT after it only when it changed nothing); with the prune, several: the thread.
        version = await self._write(write, short=not prune)
        if version < 0:
            raise Conflict(ns, key, want, -version - 1)
        return version

    async def put_many(self, items: Sequence[tuple[str, str, Json, int | None]]) -> list[int | Conflict]:
        checked = base.check_puts(items)
        if not checked:
            return []
        counts = collections.Counter(ns for ns, _, _, _ in checked)
        limits = {ns: self.limits(ns) for ns in counts}
        prune = [ns for ns in limits if self._prune_due("records", ns, limits[ns], counts[ns])]

        # New records only (every expected version 0) under distinct keys: a few multi-row INSERTs, no row's
        # order mattering, instead of a statement and a fetch each; any conflict undoes them for the row by row
        # path.
        fresh = (
            len(checked) > 2
            and all(want == 0 for _, _, _, want in checked)
            and len({(ns, key) for ns, key, _, _ in checked}) == len(checked)
        )

        def write(db: sqlite3.Connection) -> list[int]:
            def run() -> list[int]:
                now = base.now()
                if fresh and _insert_new(
                    db,
                    now,
                    {ns: now - limits[ns].max_age for ns in limits},
                    [(ns, key, raw.decode()) for ns, key, raw, _ in checked],
                ):
                    out = [1] * len(checked)
                else:
                    out = [
                        _put_row(db, ns, key, raw.decode(), want, now, now - limits[ns].max_age)
                        for ns, key, raw, want in checked
                    ]
                for ns in prune:
                    self._prune_records(db, ns, limits[ns])
                return out

            return _tx(db, run)

        versions = await self._write(
            write, short=not prune and len(checked) <= _LOOP_BATCH, rows=len(checked)
        )
        if min(versions) > 0:
            return versions  # type: ignore[return-value]  # no conflict: the versions as they are
        return [
            Conflict(ns, key, want, -version - 1) if version < 0 else version
            for (ns, key, _, want), version in zip(checked, versions, strict=True)
        ]

    @staticmethod
    def _prune_records(db: sqlite3.Connection, ns: str, limits: StoreLimits) -> None:
        db.execute(
            "DELETE FROM state_records WHERE ns = ? AND updated < ?", (ns, base.now() - limits.max_age)
        )
        excess = (
            db.execute("SELECT COUNT(*) FROM state_records WHERE ns = ?", (ns,)).fetchone()[0]
            - limits.max_count
        )
        if excess > 0:
            db.execute(
                "DELETE FROM state_records WHERE ns = ? AND key IN (SELECT key FROM state_records "
                "WHERE ns = ? ORDER BY updated, key LIMIT ?)",
                (ns, ns, excess),
            )

    async def delete(self, ns: str, key: str, *, expected_version: int = ANY) -> bool:
        cutoff = base.now() - self.limits(base.check_ns(ns)).max_age
        base.check_key(key)

        def remove(db: sqlite3.Connection) -> int:
            if expected_version == ANY:
                row = db.execute(
                    "DELETE FROM state_records WHERE ns = ? AND key = ? AND updated >= ? RETURNING version",
                    (ns, key, cutoff),
                ).fetchone()
                return 1 if row else 0
            row = db.execute(
                "DELETE FROM state_records WHERE ns = ? AND key = ? AND updated >= ? AND version = ? "
                "RETURNING version",
                (ns, key, cutoff, expected_version),
            ).fetchone()
            if row:
                return 1
            found = db.execute(
                "SELECT version FROM state_records WHERE ns = ? AND key = ? AND updated >= ?",
                (ns, key, cutoff),
            ).fetchone()
            return -found[0] if found else 0

        outcome = await self._write(remove)
        if outcome < 0:
            raise Conflict(ns, key, expected_version, -outcome)
        return outcome == 1

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
        limits = self.limits(base.check_ns(ns))
        filters, args = _where_sql(base.check_where(where))
        limit = base.check_limit(limit)
        after = base.decode_cursor(cursor) if cursor else None
        matching = f"FROM state_records WHERE ns = ? AND updated >= ?{filters}"
        margs = [ns, base.now() - limits.max_age, *args]
        if since is not None:
            matching += " AND updated > ?"
            margs.append(since)
        order = "DESC" if newest_first else "ASC"
        page_sql = f"SELECT key, version, updated, body {matching}"
        page_args = list(margs)
        if after is not None:
            page_sql += f" AND (updated, key) {'<' if newest_first else '>'} (?, ?)"
            page_args += [after[0], after[1]]
        page_sql += f" ORDER BY updated {order}, key {order} LIMIT ?"
        page_args.append(limit + 1)

        def read(db: sqlite3.Connection) -> tuple[list[Any], int | None]:
            rows = db.execute(page_sql, page_args).fetchall()
            count = db.execute(f"SELECT COUNT(*) {matching}", margs).fetchone()[0] if total else None
            return rows, count

        rows, count = await self._read(read, short=not filters and not total and limit <= _LOOP_READ)
        items = [Item(k, loads(b), v, u) for k, v, u, b in rows[:limit]]
        nxt = base.encode_cursor(items[-1].updated_at, items[-1].key) if len(rows) > limit else None
        return Page(items, nxt, count)

    # -- keys ----------------------------------------------------------------------------------------------

    async def _write_key(self, ns: str, key: str, sql: str, args: Callable[[float], tuple[Any, ...]]) -> bool:
        limits = self.limits(base.check_ns(ns))
        base.check_key(key)
        prune = self._prune_due("keys", ns, limits)

        def write(db: sqlite3.Connection) -> bool:
            now = base.now()
            row = db.execute(sql, args(now)).fetchone()
            if prune:
                db.execute("DELETE FROM state_keys WHERE ns = ? AND expires <= ?", (ns, now))
                excess = db.execute("SELECT COUNT(*) FROM state_keys WHERE ns = ?", (ns,)).fetchone()[0]
                if excess > limits.max_count:
                    db.execute(
                        "DELETE FROM state_keys WHERE ns = ? AND key IN (SELECT key FROM state_keys "
                        "WHERE ns = ? ORDER BY expires LIMIT ?)",
                        (ns, ns, excess - limits.max_count),
                    )
            return row is not None

        return await self._write(write, short=not prune)

    async def set_if_absent(self, ns: str, key: str, value: Json, ttl: float) -> bool:
        body = base.encode(value).decode()
        ttl = base.check_ttl(ttl, self.limits(base.check_ns(ns)))
        return await self._write_key(
            ns,
            key,
            "INSERT INTO state_keys (ns, key, expires, body) VALUES (?, ?, ?, ?) ON CONFLICT (ns, key) "
            "DO UPDATE SET expires = excluded.expires, body = excluded.body WHERE state_keys.expires <= ? "
            "RETURNING 1",
            lambda now: (ns, key, now + ttl, body, now),
        )

    async def get_key(self, ns: str, key: str) -> Json | None:
        base.check_ns(ns)
        base.check_key(key)
        now = base.now()
        row = await self._read(
            lambda db: db.execute(
                "SELECT body FROM state_keys WHERE ns = ? AND key = ? AND expires > ?", (ns, key, now)
            ).fetchone()
        )
        return loads(row[0]) if row else None

    async def set_key(self, ns: str, key: str, value: Json, ttl: float) -> None:
        body = base.encode(value).decode()
        ttl = base.check_ttl(ttl, self.limits(base.check_ns(ns)))
        await self._write_key(
            ns,
            key,
            "INSERT INTO state_keys (ns, key, expires, body) VALUES (?, ?, ?, ?) ON CONFLICT (ns, key) "
            "DO UPDATE SET expires = excluded.expires, body = excluded.body RETURNING 1",
            lambda now: (ns, key, now + ttl, body),
        )

    async def delete_key(self, ns: str, key: str) -> bool:
        base.check_ns(ns)
        base.check_key(key)
        row = await self._write(
            lambda db: db.execute(
                "DELETE FROM state_keys WHERE ns = ? AND key = ? RETURNING expires", (ns, key)
            ).fetchone()
        )
        return row is not None and row[0] > base.now()

    async def renew(self, ns: str, key: str, owner: str, ttl: float) -> bool:
        ttl = base.check_ttl(ttl, self.limits(base.check_ns(ns)))
        return await self._write_key(
            ns,
            key,
            "UPDATE state_keys SET expires = ? WHERE ns = ? AND key = ? AND expires > ? "
            "AND json_extract(body, '$.owner') = ? RETURNING 1",
            lambda now: (now + ttl, ns, key, now, owner),
        )

    async def release(self, ns: str, key: str, owner: str) -> bool:
        base.check_ns(ns)
        base.check_key(key)
        return await self._write(
            lambda db: (
                db.execute(
                    "DELETE FROM state_keys WHERE ns = ? AND key = ? AND expires > ? AND json_extract(body, '$.owner') = ? "
                    "RETURNING 1",
                    (ns, key, base.now(), owner),
                ).fetchone()
                is not None
            )
        )

    # -- logs ----------------------------------------------------------------------------------------------

    async def append(self, ns: str, log: str, event: Json) -> int:
        body = base.encode(event).decode()
        limits = self.limits(base.check_ns(ns))
        base.check_key(log, "log name")
        prune = self._prune_due("logs", ns, limits)

        def write(db: sqlite3.Connection) -> int:
            def add() -> int:
                now = base.now()
                event_id = _append_row(db, ns, log, body, limits, now)
                if prune:
                    self._prune_logs(db, ns, limits, now)
                return event_id

            return _tx(db, add)

        event_id = await self._write(write, short=not prune)
        self._wake(ns, log)
        return event_id

    async def append_many(self, items: Sequence[tuple[str, str, Json]]) -> list[int]:
        checked = base.check_appends(items)
        if not checked:
            return []
        limits: dict[str, StoreLimits] = {}
        for ns, _, _ in checked:
            limits.setdefault(ns, self.limits(ns))
        counts = collections.Counter(ns for ns, _, _ in checked)
        prune = [ns for ns in limits if self._prune_due("logs", ns, limits[ns], counts[ns])]

        def write(db: sqlite3.Connection) -> list[int]:
            def add() -> list[int]:
                now = base.now()
                ids = [_append_row(db, ns, log, raw.decode(), limits[ns], now) for ns, log, raw in checked]
                for ns in prune:
                    self._prune_logs(db, ns, limits[ns], now)
                return ids

            return _tx(db, add)

        ids = await self._write(write, short=not prune and len(checked) <= _LOOP_BATCH, rows=len(checked))
        for ns, log in dict.fromkeys((ns, log) for ns, log, _ in checked):
            self._wake(ns, log)
        return ids

    @staticmethod
    def _prune_logs(db: sqlite3.Connection, ns: str, limits: StoreLimits, now: float) -> None:
        cutoff = now - limits.max_age
        aged: dict[str, int] = {}
        for (log,) in db.execute(
            "DELETE FROM state_entries WHERE ns = ? AND t < ? RETURNING log", (ns, cutoff)
        ).fetchall():
            aged[log] = aged.get(log, 0) + 1
        db.executemany(
            "UPDATE state_logs SET n = n - ? WHERE ns = ? AND log = ?",
            [(count, ns, log) for log, count in aged.items()],
        )
        db.execute("DELETE FROM state_logs WHERE ns = ? AND (updated < ? OR n <= 0)", (ns, cutoff))
        excess = (
            db.execute("SELECT COUNT(*) FROM state_logs WHERE ns = ?", (ns,)).fetchone()[0] - limits.max_count
        )
        if excess > 0:
            gone = db.execute(
                "DELETE FROM state_logs WHERE ns = ? AND log IN (SELECT log FROM state_logs "
                "WHERE ns = ? ORDER BY updated LIMIT ?) RETURNING log",
                (ns, ns, excess),
            ).fetchall()
            db.executemany(
                "DELETE FROM state_entries WHERE ns = ? AND log = ?", [(ns, log) for (log,) in gone]
            )

    def _select(
        self, ns: str, log: str, after_id: int, limit: int
    ) -> Callable[[sqlite3.Connection], list[Any]]:
        cutoff = base.now() - self.limits(ns).max_age
        return lambda db: db.execute(
            "SELECT id, body FROM state_entries WHERE ns = ? AND log = ? AND id > ? AND t >= ? ORDER BY id LIMIT ?",
            (ns, log, after_id, cutoff, limit),
        ).fetchall()

    async def read(
        self, ns: str, log: str, after_id: int = 0, limit: int = 100, *, block: float | None = None
    ) -> list[tuple[int, Json]]:
        base.check_ns(ns)
        base.check_key(log, "log name")
        limit = base.check_limit(limit)
        short = limit <= _LOOP_READ
        if not block:
            rows = await self._read(self._select(ns, log, after_id, limit), short=short)
            return [(i, loads(b)) for i, b in rows]
        loop = asyncio.get_running_loop()
        deadline = loop.time() + block
        event = asyncio.Event()
        waiters = self._log_waiters.setdefault((ns, log), [])
        waiters.append(event)
        self._start_watcher()
        try:
            while not self._closed:
                event.clear()  # cleared before reading: an append after the read sets it again
                rows = await self._read(self._select(ns, log, after_id, limit), short=short)
                remaining = deadline - loop.time()
                if rows or remaining <= 0:
                    return [(i, loads(b)) for i, b in rows]
                try:
                    await asyncio.wait_for(event.wait(), remaining)
                except TimeoutError:
                    pass
            return []
        finally:
            waiters.remove(event)
            if not waiters and self._log_waiters.get((ns, log)) is waiters:
                del self._log_waiters[(ns, log)]

    def _wake(self, ns: str, log: str) -> None:
        for event in self._log_waiters.get((ns, log), ()):
            event.set()

    # -- bus -----------------------------------------------------------------------------------------------

    async def publish(self, channel: str, message: Json) -> None:
        raw = base.encode(message)
        base.check_key(channel, "channel")
        now = base.now()
        prune = now - self._bus_pruned >= _PRUNE_SECONDS
        if prune:
            self._bus_pruned = now

        def write(db: sqlite3.Connection) -> None:
            db.execute(
                "INSERT INTO state_bus (channel, t, origin, body) VALUES (?, ?, ?, ?)",
                (channel, now, self._origin, raw.decode()),
            )
            if prune:
                db.execute("DELETE FROM state_bus WHERE t < ?", (now - self.bus_retention,))

        await self._write(write, short=not prune)
        self._hub.dispatch(channel, raw)

    async def _listen(self, channels: list[str]) -> None:
        """The hub's first local subscriber: mark where the bus is now, and watch it from there."""
        if self._bus_after is None:
            self._bus_after = await self._read(
                lambda db: db.execute("SELECT COALESCE(MAX(id), 0) FROM state_bus").fetchone()[0]
            )
        self._start_watcher()

    def _start_watcher(self) -> None:
        if self._watcher is None or self._watcher.done():
            self._watcher = asyncio.get_running_loop().create_task(self._watch(), name="agentmw-sqlite-watch")

    async def _watch(self) -> None:
        """Notice other processes' commits: new bus rows go to local subscribers; blocked readers re-read."""
        version = -1  # the first poll reads the bus and wakes the readers: whatever came before is seen
        while (self._hub or self._log_waiters) and not self._closed:
            await asyncio.sleep(self.poll)
            try:
                changed = await self._read(_data_version)
                if changed == version:
                    continue
                version = changed
                while self._hub and self._bus_after is not None:
                    rows = await self._read(functools.partial(_bus_rows, after=self._bus_after))
                    for event_id, channel, origin, body in rows:
                        if origin != self._origin:
                            self._hub.dispatch(channel, body.encode())
                        if self._bus_after is not None:
                            self._bus_after = event_id
                    if len(rows) < _BUS_BATCH:
                        break
            except Exception:  # a failing poll is retried at the next one; subscribers must not hang
                if self._closed:
                    return
                logger.exception("agentmw state: polling %s failed", self.path)
            for events in list(self._log_waiters.values()):
                for event in events:
                    event.set()
        if not self._hub:
            self._bus_after = None


_INSERT_NEW = (
    "INSERT INTO state_records (ns, key, version, updated, body) VALUES (?, ?, 1, ?, ?) "
    "ON CONFLICT (ns, key) DO UPDATE SET version = 1, updated = excluded.updated, body = excluded.body "
    "WHERE state_records.updated < ?"
)


def _put_row(
    db: sqlite3.Connection, ns: str, key: str, body: str, want: int, now: float, cutoff: float
) -> int:
    """One compare-and-set: the new version, or ``-actual - 1`` on a conflict (nothing written then)."""
    if want == ANY:
        row = db.execute(
            "INSERT INTO state_records (ns, key, version, updated, body) VALUES (?, ?, 1, ?, ?) "
            "ON CONFLICT (ns, key) DO UPDATE SET version = CASE WHEN updated >= ? THEN version + 1 "
            "ELSE 1 END, updated = excluded.updated, body = excluded.body RETURNING version",
            (ns, key, now, body, cutoff),
        ).fetchone()
    elif want == 0:
        row = db.execute(_INSERT_NEW + " RETURNING version", (ns, key, now, body, cutoff)).fetchone()
    else:
        row = db.execute(
            "UPDATE state_records SET version = version + 1, updated = ?, body = ? "
            "WHERE ns = ? AND key = ? AND version = ? AND updated >= ? RETURNING version",
            (now, body, ns, key, want, cutoff),
        ).fetchone()
    if row is None:
        found = db.execute(
            "SELECT version FROM state_records WHERE ns = ? AND key = ? AND updated >= ?", (ns, key, cutoff)
        ).fetchone()
        return -(found[0] if found else 0) - 1
    return int(row[0])


_INSERT_SIZES = (
    64,
    16,
    4,
    1,
)  # rows per multi-row INSERT: a batch of any size takes a few of these statements


@functools.cache
def _insert_values(rows: int) -> str:
    """``_INSERT_NEW`` for ``rows`` rows at once: one statement to prepare, bind and step instead of one per row
    (about a microsecond a row less than executemany)."""
    values, _, upsert = _INSERT_NEW.partition("(?, ?, 1, ?, ?) ")
    return values + ", ".join(["(?, ?, 1, ?, ?)"] * rows) + " " + upsert


def _insert_new(
    db: sqlite3.Connection, now: float, cutoffs: Mapping[str, float], rows: list[tuple[str, str, str]]
) -> bool:
    """Write ``(ns, key, body)`` rows that expect no live record (``_put_row``'s version 0; a record updated
    before its namespace's cutoff is expired), all at once; inside a transaction. False when a row found a live
    record: then nothing of it stays."""
    db.execute("SAVEPOINT agentmw_new")
    before = db.total_changes
    by_ns: dict[str, list[Any]] = {}
    for ns, key, body in rows:
        by_ns.setdefault(ns, []).append((key, body))
    for ns, entries in by_ns.items():
        at = 0
        while at < len(entries):
            size = next(size for size in _INSERT_SIZES if size <= len(entries) - at)
            args: list[Any] = []
            for key, body in entries[at : at + size]:
                args += (ns, key, now, body)
            args.append(cutoffs[ns])
            db.execute(_insert_values(size), args)
            at += size
    if db.total_changes - before == len(rows):
        db.execute("RELEASE agentmw_new")
        return True
    db.execute("ROLLBACK TO agentmw_new")
    db.execute("RELEASE agentmw_new")
    return False


def _append_row(db: sqlite3.Connection, ns: str, log: str, body: str, limits: StoreLimits, now: float) -> int:
    """One event appended, and its log trimmed to ``max_len``; inside a transaction."""
    event_id = db.execute(
        "INSERT INTO state_entries (ns, log, t, body) VALUES (?, ?, ?, ?)", (ns, log, now, body)
    ).lastrowid
    n = db.execute(
        "INSERT INTO state_logs (ns, log, n, updated) VALUES (?, ?, 1, ?) "
        "ON CONFLICT (ns, log) DO UPDATE SET n = n + 1, updated = excluded.updated "
        "RETURNING n",
        (ns, log, now),
    ).fetchone()[0]
    if n > limits.max_len:
        db.execute(
            "DELETE FROM state_entries WHERE id IN (SELECT id FROM state_entries "
            "WHERE ns = ? AND log = ? ORDER BY id LIMIT ?)",
            (ns, log, n - limits.max_len),
        )
        db.execute("UPDATE state_logs SET n = ? WHERE ns = ? AND log = ?", (limits.max_len, ns, log))
    return int(event_id or 0)


def _data_version(db: sqlite3.Connection) -> int:
    """A number that changes when another connection (another process) commits to the file."""
    return int(db.execute("PRAGMA data_version").fetchone()[0])


def _bus_rows(db: sqlite3.Connection, *, after: int) -> list[Any]:
    return db.execute(
        "SELECT id, channel, origin, body FROM state_bus WHERE id > ? ORDER BY id LIMIT ?",
        (after, _BUS_BATCH),
    ).fetchall()
