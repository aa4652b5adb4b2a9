"""Postgres state, for agents served by several machines that share the database the application already has:
the ``agentmw[postgres]`` extra (asyncpg, imported when a :class:`PostgresState` is made, never on ``import
agentmw``).

- **Tables** live in a schema of their own (``agentmw`` unless ``?schema=`` names another), made on first use
  under an advisory lock, so that several processes starting at once create it once; a row in its ``meta``
  table records the layout's version, and a store that finds it current runs no DDL at all.
- **Records** are rows ``(ns, key, version, updated, body)``. A write is one call of a PL/pgSQL function that
  does the compare-and-set and, when it changed nothing, reads the version found, in one round trip; every
  statement in it takes a fresh snapshot (READ COMMITTED), so of racing writers exactly one wins.
- **Keys** are rows with an expiry and the value's ``"owner"`` (when it is a string) in a column of its own, for
  ``renew`` and ``release``.
- **Logs**: an append locks its log's row (an upsert that counts the entries), takes the next value of one
  sequence, inserts the entry, trims the log to ``max_len`` and sends a ``NOTIFY``, in one function call.
  Appends to one log are serialised by that row lock, so their ids increase in commit order: a reader that has
  seen an id never meets a smaller one committed later. A sequence never gives a value twice.
- **Batches** (``put_many``, ``append_many``): one function call over arrays, one transaction. Two batches that
  lock the same rows in different orders may deadlock; the server then rolls one back whole, and it is run
  again (so is a serialization failure).
- **Waiting and the bus** ride on ``LISTEN``/``NOTIFY`` over one connection per store, outside the pool: a
  channel per bus channel and per log that someone in this process waits on (their names hashed into
  Postgres's 63 bytes). A blocked ``read`` holds no pooled connection. A bus message goes in the notification's
  payload; one too large for it (8,000 bytes) is written to the ``bus`` table and its id sent instead, read
  back by each receiver, in order.
- **Bounds**, as on SQLite: a write prunes its namespace (age, then count) in a second statement every
  ``max_count // 20`` writes of this process to it, or after a second.
- **Time** is the server's clock (``clock_timestamp()``): write times, expiries and ages do not depend on the
  replicas' clocks.
- **Faults.** Connection loss, a server shutting down or starting, too many connections, a full disk, a
  read-only server and a timeout (``command_timeout``, 5 s; connecting ``connect_timeout``, 5 s) raise
  :class:`agentmw.errors.StoreUnavailable`. The pool replaces broken connections by itself (the idle ones are
  dropped after a connection loss, so one call pays for it, not one per pooled connection); a read that meets a
  dropped connection is tried once more on a fresh one. The listening connection reconnects in the background
  and listens again; blocked readers then read again (bus messages sent meanwhile are lost: at most once).
"""

from __future__ import annotations

import asyncio
import collections
import functools
import hashlib
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from .._transport import loads
from ..errors import StoreUnavailable
from . import base
from ._fanout import Hub
from .base import ANY, Conflict, Item, Json, Page, State, StoreLimits, Versioned
from .urls import SCHEMA_PATTERN

if TYPE_CHECKING:
    import asyncpg

__all__ = ["PostgresState"]

T = TypeVar("T")
logger = logging.getLogger("agentmw.state")

_LAYOUT = "1"  # the tables' and functions' version, in the meta table
_PRUNE_SECONDS = 1.0
_SCAN_BATCH = 200
_PAYLOAD = 7999  # the largest NOTIFY payload, in bytes (the server's limit is 8000 with its terminator)
_RETRIES = 3  # deadlocks and serialization failures: the transaction was rolled back whole, run it again
_UNLISTEN_AFTER = 5.0  # seconds a log channel stays listened after its last waiter left

_NOW = "extract(epoch FROM clock_timestamp())::float8"

_DDL = """
CREATE SCHEMA IF NOT EXISTS {s};
CREATE TABLE IF NOT EXISTS {s}.meta (name text PRIMARY KEY, value text NOT NULL);
CREATE TABLE IF NOT EXISTS {s}.records (
    ns text COLLATE "C" NOT NULL, key text COLLATE "C" NOT NULL, version bigint NOT NULL,
    updated float8 NOT NULL, body bytea NOT NULL, PRIMARY KEY (ns, key));
CREATE INDEX IF NOT EXISTS records_by_time ON {s}.records (ns, updated, key);
CREATE TABLE IF NOT EXISTS {s}.keys (
    ns text COLLATE "C" NOT NULL, key text COLLATE "C" NOT NULL, expires float8 NOT NULL, owner text,
    body bytea NOT NULL, PRIMARY KEY (ns, key));
CREATE INDEX IF NOT EXISTS keys_by_expiry ON {s}.keys (ns, expires, key);
CREATE TABLE IF NOT EXISTS {s}.logs (
    ns text COLLATE "C" NOT NULL, log text COLLATE "C" NOT NULL, n bigint NOT NULL, updated float8 NOT NULL,
    PRIMARY KEY (ns, log));
CREATE INDEX IF NOT EXISTS logs_by_time ON {s}.logs (ns, updated, log);
CREATE SEQUENCE IF NOT EXISTS {s}.entry_ids;
CREATE TABLE IF NOT EXISTS {s}.entries (
    ns text COLLATE "C" NOT NULL, log text COLLATE "C" NOT NULL, id bigint NOT NULL, t float8 NOT NULL,
    body bytea NOT NULL, PRIMARY KEY (ns, log, id));
CREATE INDEX IF NOT EXISTS entries_by_time ON {s}.entries (ns, t);
CREATE TABLE IF NOT EXISTS {s}.bus (
    id bigserial PRIMARY KEY, t float8 NOT NULL, channel text NOT NULL, body bytea NOT NULL);
CREATE INDEX IF NOT EXISTS bus_by_time ON {s}.bus (t);

-- one compare-and-set: the new version, or -(the version found) - 1 when nothing was written
CREATE OR REPLACE FUNCTION {s}.put(p_ns text, p_key text, p_body bytea, p_want bigint, p_age float8)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
  v_now float8 := extract(epoch FROM clock_timestamp());
  v_version bigint;
BEGIN
  IF p_want < 0 THEN
    INSERT INTO {s}.records AS r (ns, key, version, updated, body) VALUES (p_ns, p_key, 1, v_now, p_body)
    ON CONFLICT (ns, key) DO UPDATE SET
      version = CASE WHEN r.updated >= v_now - p_age THEN r.version + 1 ELSE 1 END,
      updated = v_now, body = p_body
    RETURNING r.version INTO v_version;
    RETURN v_version;
  ELSIF p_want = 0 THEN
    INSERT INTO {s}.records AS r (ns, key, version, updated, body) VALUES (p_ns, p_key, 1, v_now, p_body)
    ON CONFLICT (ns, key) DO UPDATE SET version = 1, updated = v_now, body = p_body
      WHERE r.updated < v_now - p_age
    RETURNING r.version INTO v_version;
  ELSE
    UPDATE {s}.records AS r SET version = r.version + 1, updated = v_now, body = p_body
    WHERE r.ns = p_ns AND r.key = p_key AND r.version = p_want AND r.updated >= v_now - p_age
    RETURNING r.version INTO v_version;
  END IF;
  IF v_version IS NULL THEN
    SELECT r.version INTO v_version FROM {s}.records AS r
    WHERE r.ns = p_ns AND r.key = p_key AND r.updated >= v_now - p_age;
    RETURN -coalesce(v_version, 0) - 1;
  END IF;
  RETURN v_version;
END $$;

CREATE OR REPLACE FUNCTION {s}.put_many(
  p_ns text[], p_keys text[], p_bodies bytea[], p_wants bigint[], p_ages float8[])
RETURNS bigint[] LANGUAGE plpgsql AS $$
DECLARE
  v_out bigint[] := '{{}}';
BEGIN
  FOR i IN 1 .. coalesce(array_length(p_keys, 1), 0) LOOP
    v_out := v_out || {s}.put(p_ns[i], p_keys[i], p_bodies[i], p_wants[i], p_ages[i]);
  END LOOP;
  RETURN v_out;
END $$;

-- one key written: only when absent or expired (p_absent), or whatever was there
CREATE OR REPLACE FUNCTION {s}.set_key(
  p_ns text, p_key text, p_body bytea, p_owner text, p_ttl float8, p_absent boolean)
RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
  v_now float8 := extract(epoch FROM clock_timestamp());
  v_done boolean;
BEGIN
  IF p_absent THEN
    INSERT INTO {s}.keys AS k (ns, key, expires, owner, body) VALUES (p_ns, p_key, v_now + p_ttl, p_owner, p_body)
    ON CONFLICT (ns, key) DO UPDATE SET expires = v_now + p_ttl, owner = p_owner, body = p_body
      WHERE k.expires <= v_now
    RETURNING true INTO v_done;
    RETURN coalesce(v_done, false);
  END IF;
  INSERT INTO {s}.keys AS k (ns, key, expires, owner, body) VALUES (p_ns, p_key, v_now + p_ttl, p_owner, p_body)
  ON CONFLICT (ns, key) DO UPDATE SET expires = v_now + p_ttl, owner = p_owner, body = p_body;
  RETURN true;
END $$;

-- one event appended under its log's row lock (ids increase in commit order), the log trimmed to p_len, and
-- the log's channel notified (at commit)
CREATE OR REPLACE FUNCTION {s}.append(
  p_ns text, p_log text, p_body bytea, p_len bigint, p_channel text)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
  v_now float8 := extract(epoch FROM clock_timestamp());
  v_n bigint;
  v_id bigint;
  v_gone bigint;
BEGIN
  INSERT INTO {s}.logs AS l (ns, log, n, updated) VALUES (p_ns, p_log, 1, v_now)
  ON CONFLICT (ns, log) DO UPDATE SET n = l.n + 1, updated = v_now
  RETURNING l.n INTO v_n;
  v_id := nextval('{s}.entry_ids');
  INSERT INTO {s}.entries (ns, log, id, t, body) VALUES (p_ns, p_log, v_id, v_now, p_body);
  IF v_n > p_len THEN
    DELETE FROM {s}.entries AS e WHERE e.ns = p_ns AND e.log = p_log AND e.id < (
      SELECT x.id FROM {s}.entries AS x WHERE x.ns = p_ns AND x.log = p_log
      ORDER BY x.id DESC OFFSET p_len - 1 LIMIT 1);
    GET DIAGNOSTICS v_gone = ROW_COUNT;
    UPDATE {s}.logs AS l SET n = l.n - v_gone WHERE l.ns = p_ns AND l.log = p_log;
  END IF;
  IF p_channel IS NOT NULL THEN
    PERFORM pg_notify(p_channel, '');
  END IF;
  RETURN v_id;
END $$;

CREATE OR REPLACE FUNCTION {s}.append_many(
  p_ns text[], p_logs text[], p_bodies bytea[], p_lens bigint[], p_channels text[])
RETURNS bigint[] LANGUAGE plpgsql AS $$
DECLARE
  v_out bigint[] := '{{}}';
BEGIN
  FOR i IN 1 .. coalesce(array_length(p_logs, 1), 0) LOOP
    v_out := v_out || {s}.append(p_ns[i], p_logs[i], p_bodies[i], p_lens[i], p_channels[i]);
  END LOOP;
  RETURN v_out;
END $$;

-- a namespace's bounds: what is past its age, then what is past its count (the oldest); one pruner at a time
CREATE OR REPLACE FUNCTION {s}.prune(p_kind text, p_ns text, p_age float8, p_count bigint)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  v_now float8 := extract(epoch FROM clock_timestamp());
BEGIN
  IF NOT pg_try_advisory_xact_lock(hashtext('agentmw.prune'), hashtext('{s}:' || p_kind || ':' || p_ns)) THEN
    RETURN;  -- another process prunes this namespace now
  END IF;
  IF p_kind = 'records' THEN
    DELETE FROM {s}.records AS r WHERE r.ns = p_ns AND r.updated < v_now - p_age;
    DELETE FROM {s}.records AS r WHERE r.ns = p_ns AND (r.updated, r.key) <= (
      SELECT x.updated, x.key FROM {s}.records AS x WHERE x.ns = p_ns
      ORDER BY x.updated DESC, x.key DESC OFFSET p_count LIMIT 1);
  ELSIF p_kind = 'keys' THEN
    DELETE FROM {s}.keys AS k WHERE k.ns = p_ns AND k.expires <= v_now;
    DELETE FROM {s}.keys AS k WHERE k.ns = p_ns AND (k.expires, k.key) <= (
      SELECT x.expires, x.key FROM {s}.keys AS x WHERE x.ns = p_ns
      ORDER BY x.expires DESC, x.key DESC OFFSET p_count LIMIT 1);
  ELSE
    WITH gone AS (
      DELETE FROM {s}.entries AS e WHERE e.ns = p_ns AND e.t < v_now - p_age RETURNING e.log
    )
    UPDATE {s}.logs AS l SET n = l.n - g.c
    FROM (SELECT gone.log, count(*) AS c FROM gone GROUP BY gone.log) AS g
    WHERE l.ns = p_ns AND l.log = g.log;
    DELETE FROM {s}.logs AS l WHERE l.ns = p_ns AND (l.updated < v_now - p_age OR l.n <= 0);
    WITH gone AS (
      DELETE FROM {s}.logs AS l WHERE l.ns = p_ns AND (l.updated, l.log) <= (
        SELECT x.updated, x.log FROM {s}.logs AS x WHERE x.ns = p_ns
        ORDER BY x.updated DESC, x.log DESC OFFSET p_count LIMIT 1)
      RETURNING l.log
    )
    DELETE FROM {s}.entries AS e USING gone WHERE e.ns = p_ns AND e.log = gone.log;
  END IF;
END $$;

-- a bus message too large for a notification's payload: kept in the table, its id sent instead
CREATE OR REPLACE FUNCTION {s}.publish(p_pg text, p_channel text, p_body bytea, p_retention float8)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  v_now float8 := extract(epoch FROM clock_timestamp());
  v_id bigint;
BEGIN
  INSERT INTO {s}.bus (t, channel, body) VALUES (v_now, p_channel, p_body) RETURNING id INTO v_id;
  DELETE FROM {s}.bus AS b WHERE b.t < v_now - p_retention;
  PERFORM pg_notify(p_pg, 'r' || v_id);
END $$;

INSERT INTO {s}.meta (name, value) VALUES ('layout', '{layout}')
ON CONFLICT (name) DO UPDATE SET value = excluded.value;
"""


async def _keep(conn: asyncpg.Connection) -> None:
    """The pool's reset between two uses of a connection: none. asyncpg's default (``RESET ALL``, ``UNLISTEN *``,
    ...) costs a round trip per call, and this store leaves no session state behind: it listens on a connection
    of its own, takes transaction-scoped locks only, and closes a connection that failed mid-statement."""


async def _execute(sql: str, args: tuple[Any, ...], conn: asyncpg.Connection) -> None:
    await conn.execute(sql, *args)


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _digest(*parts: str) -> str:
    return hashlib.blake2b("\0".join(parts).encode("utf-8", "surrogatepass"), digest_size=12).hexdigest()


def _owner(value: Any) -> str | None:
    """The lease owner a key's value names: its ``"owner"`` when that is a string (as Redis's script compares)."""
    raw = base.encoded_bytes(value)
    if raw is not None:
        value = loads(raw)
    owner = value.get("owner") if isinstance(value, dict) else None
    return owner if isinstance(owner, str) else None


_REASONS = {
    "08": "Postgres cannot be reached",
    "53": "Postgres is out of resources (disk, memory or connections)",
    "57": "Postgres is shutting down, starting, or cancelled the statement",
    "58": "Postgres had a system error (I/O)",
    "57014": "Postgres did not answer in time (the statement timed out)",
    "25006": "Postgres is read-only",
    "40001": "Postgres could not serialize the transaction",
    "40P01": "Postgres found a deadlock",
    "55P03": "Postgres could not take a lock",
}
_RETRYABLE = ("40001", "40P01")  # rolled back whole: safe to run again
_LOST = ("08", "57P01", "57P02", "57P03")  # the connection is gone (or the server is going)


def _sqlstate(exc: BaseException) -> str:
    return str(getattr(exc, "sqlstate", "") or "")


def _fault(exc: BaseException) -> StoreUnavailable | None:
    """The :class:`StoreUnavailable` an asyncpg (or socket) exception means, or None for one that is not a fault
    of the server (a programming error: raised as it is)."""
    import asyncpg

    if isinstance(exc, StoreUnavailable):
        return exc
    why: str | None = None
    if isinstance(exc, asyncpg.PostgresError):
        state = _sqlstate(exc)
        why = _REASONS.get(state) or _REASONS.get(state[:2])
    elif isinstance(exc, TimeoutError):
        why = "Postgres did not answer in time"
    elif isinstance(exc, OSError):
        why = "Postgres cannot be reached"
    elif (isinstance(exc, asyncpg.InterfaceError) and "closed" in str(exc)) or _unused(exc):
        why = "the connection to Postgres was lost"
    if why is None:
        return None
    return StoreUnavailable(f"the agent's store is unavailable ({why}); try again shortly")


def _unused(exc: BaseException) -> bool:
    """A pooled connection whose protocol was left mid-operation (by a fault during its last use): asyncpg
    refuses it before sending anything, so the call is run again on another."""
    import asyncpg

    return isinstance(exc, asyncpg.InternalClientError) and "another operation" in str(exc)


def _lost(exc: BaseException) -> bool:
    """Whether the connection the call used is gone (it may be stale from before a server restart)."""
    import asyncpg

    state = _sqlstate(exc)
    return (
        isinstance(exc, (OSError, ConnectionError))
        or (isinstance(exc, asyncpg.InterfaceError) and "closed" in str(exc))
        or state.startswith("08")
        or state in _LOST
    )


@dataclass(slots=True)
class _Due:
    writes: int = 0
    at: float = 0.0


class PostgresState(State):
    """All four kinds of state in one Postgres database (10 or later), shared by every process that uses it.

    Args:
        url: ``postgresql://user:password@host:port/database`` (also ``postgres://``), as asyncpg reads it:
            query parameters such as ``?sslmode=require`` go to asyncpg.
        schema: the schema that holds agentmw's tables (created if absent); agents sharing one database need
            different ones.
        pool_size: the most connections this store keeps open (one more listens for notifications).
        command_timeout: seconds a statement may take before it fails as :class:`StoreUnavailable`.
        connect_timeout: seconds to connect (or to wait for a pooled connection).
        bus_retention: seconds a bus message too large for a notification stays in the ``bus`` table.
        connect: other keyword arguments for ``asyncpg.create_pool`` / ``asyncpg.connect`` (``ssl=``,
            ``server_settings=``...).
    """

    accepts_encoded = True

    def __init__(
        self,
        url: str = "postgresql://localhost/postgres",
        *,
        schema: str = "agentmw",
        pool_size: int = 10,
        command_timeout: float = 5.0,
        connect_timeout: float = 5.0,
        bus_retention: float = 30.0,
        connect: Mapping[str, Any] | None = None,
        limits: Mapping[str, StoreLimits] | None = None,
        default: StoreLimits = base.DEFAULT_LIMITS,
    ) -> None:
        super().__init__(limits=limits, default=default)
        if not SCHEMA_PATTERN.fullmatch(schema):
            raise ValueError(
                f"a schema is 1-32 lower-case letters, digits or '_' (not a digit first): {schema!r}"
            )
        if pool_size < 1 or not command_timeout > 0 or not connect_timeout > 0:
            raise ValueError("pool_size, command_timeout and connect_timeout must be positive")
        try:
            import asyncpg  # noqa: F401
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise ImportError(
                "the Postgres state store needs the asyncpg package: pip install 'agentmw[postgres]'"
            ) from exc
        self.url = url
        self.schema = schema
        self.pool_size = pool_size
        self.command_timeout = command_timeout
        self.connect_timeout = connect_timeout
        self.bus_retention = bus_retention
        self._connect_options = dict(connect or {})
        self._s = _quote(schema)
        self._pool: asyncpg.Pool | None = None
        self._opening: asyncio.Lock | None = None
        self._due: dict[tuple[str, str], _Due] = {}
        self._hub = Hub(on_first=self._listen, on_last=self._unlisten)
        self._listener: asyncpg.Connection | None = None
        self._listener_lock: asyncio.Lock | None = None
        self._listen_ops: asyncio.Lock | None = (
            None  # one LISTEN/UNLISTEN at a time on the listening connection
        )
        self._listened: set[str] = set()  # Postgres channels the listener has LISTENed to
        self._bus_names: dict[str, str] = {}  # Postgres channel -> bus channel, for the hub's channels
        self._log_waiters: dict[str, list[asyncio.Event]] = {}  # Postgres channel -> blocked readers
        self._log_idle: dict[str, asyncio.TimerHandle] = {}
        self._reconnecting: asyncio.Task[None] | None = None
        self._bus_queue: collections.deque[str] = collections.deque()
        self._bus_worker: asyncio.Task[None] | None = None
        self._chores: set[asyncio.Task[None]] = set()  # UNLISTENs of idle log channels, in the background
        self._closed = False
        s = self._s
        self._sql_get = (
            f"SELECT body, version FROM {s}.records WHERE ns = $1 AND key = $2 AND updated >= {_NOW} - $3"
        )
        self._sql_put = f"SELECT {s}.put($1, $2, $3, $4, $5)"
        self._sql_put_many = f"SELECT {s}.put_many($1, $2, $3, $4, $5)"
        self._sql_delete = (
            f"DELETE FROM {s}.records WHERE ns = $1 AND key = $2 AND updated >= {_NOW} - $3 "
            "AND ($4 < 0 OR version = $4) RETURNING version"
        )
        self._sql_version = (
            f"SELECT version FROM {s}.records WHERE ns = $1 AND key = $2 AND updated >= {_NOW} - $3"
        )
        self._sql_set_key = f"SELECT {s}.set_key($1, $2, $3, $4, $5, $6)"
        self._sql_get_key = f"SELECT body FROM {s}.keys WHERE ns = $1 AND key = $2 AND expires > {_NOW}"
        self._sql_delete_key = f"DELETE FROM {s}.keys WHERE ns = $1 AND key = $2 RETURNING expires > {_NOW}"
        self._sql_renew = (
            f"UPDATE {s}.keys SET expires = {_NOW} + $4 WHERE ns = $1 AND key = $2 AND expires > {_NOW} "
            "AND owner = $3 RETURNING 1"
        )
        self._sql_release = (
            f"DELETE FROM {s}.keys WHERE ns = $1 AND key = $2 AND expires > {_NOW} AND owner = $3 RETURNING 1"
        )
        self._sql_append = f"SELECT {s}.append($1, $2, $3, $4, $5)"
        self._sql_append_many = f"SELECT {s}.append_many($1, $2, $3, $4, $5)"
        self._sql_read = (
            f"SELECT id, body FROM {s}.entries WHERE ns = $1 AND log = $2 AND id > $3 "
            f"AND t >= {_NOW} - $4 ORDER BY id LIMIT $5"
        )
        self._sql_prune = f"SELECT {s}.prune($1, $2, $3, $4)"
        self._sql_publish = f"SELECT {s}.publish($1, $2, $3, $4)"
        self._sql_bus_row = f"SELECT channel, body FROM {s}.bus WHERE id = $1"

    def __repr__(self) -> str:
        return f"PostgresState(schema={self.schema!r})"

    # -- the pool --------------------------------------------------------------------------------------------

    async def _ready(self) -> asyncpg.Pool:
        if self._closed:
            raise RuntimeError("the state store is closed")
        pool = self._pool
        if pool is not None:
            return pool
        if self._opening is None:
            self._opening = asyncio.Lock()
        async with self._opening:
            if self._pool is None:
                self._pool = await self._open()
            return self._pool

    async def _open(self) -> asyncpg.Pool:
        import asyncpg

        options = dict(self._connect_options)
        # The server ends a statement past command_timeout itself (rolled back: nothing of it happens later);
        # the client's own timeout, a second on, is for a server that does not answer at all.
        options["server_settings"] = {
            "statement_timeout": str(int(self.command_timeout * 1000)),
            **options.get("server_settings", {}),
        }
        try:
            pool = await asyncpg.create_pool(
                self.url,
                min_size=1,
                max_size=self.pool_size,
                command_timeout=self.command_timeout + 1.0,
                timeout=self.connect_timeout,
                max_inactive_connection_lifetime=300.0,
                **{"reset": _keep, **options},
            )
        except Exception as exc:
            fault = _fault(exc)
            if fault is None:
                raise
            raise fault from exc
        try:
            async with pool.acquire(timeout=self.connect_timeout) as conn:
                await self._create_schema(conn)
        except BaseException as exc:
            pool.terminate()
            fault = _fault(exc) if isinstance(exc, Exception) else None
            if fault is None:
                raise
            raise fault from exc
        return pool

    async def _create_schema(self, conn: asyncpg.Connection) -> None:
        """The tables and functions, unless the meta table says they are current; under an advisory lock, so
        that processes starting at once make them once."""
        if await self._current(conn):
            return
        async with conn.transaction():
            await conn.execute("SET LOCAL statement_timeout = '60s'")  # waiting for another process's DDL
            await conn.execute(
                "SELECT pg_advisory_xact_lock(hashtext('agentmw.schema'), hashtext($1))", self.schema
            )
            if not await self._current(conn):  # another process made it while this one waited for the lock
                await conn.execute(_DDL.format(s=self._s, layout=_LAYOUT), timeout=60.0)

    async def _current(self, conn: asyncpg.Connection) -> bool:
        if not await conn.fetchval("SELECT to_regclass($1) IS NOT NULL", f"{self._s}.meta"):
            return False
        return bool(await conn.fetchval(f"SELECT value FROM {self._s}.meta WHERE name = 'layout'") == _LAYOUT)

    async def _run(self, fn: Callable[[asyncpg.Connection], Awaitable[T]], *, read: bool = False) -> T:
        """``fn`` on a pooled connection, with the server's faults raised as :class:`StoreUnavailable`; a
        rolled-back deadlock is run again, and so is a read that met a dropped connection."""
        pool = await self._ready()
        attempt = 0
        while True:
            attempt += 1
            try:
                return await self._on_connection(pool, fn)
            except (StoreUnavailable, asyncio.CancelledError):
                raise
            except Exception as exc:
                state = _sqlstate(exc)
                if (state in _RETRYABLE or _unused(exc)) and attempt < _RETRIES:
                    continue
                fault = _fault(exc)
                if fault is None:
                    raise
                if _lost(exc):
                    await (
                        pool.expire_connections()
                    )  # the other idle ones are as stale: replaced on their next use
                    if read and attempt == 1:
                        continue
                raise fault from exc

    async def _on_connection(self, pool: asyncpg.Pool, fn: Callable[[asyncpg.Connection], Awaitable[T]]) -> T:
        """``fn`` on a connection of the pool. One that fails other than with the server's own error (a lost
        connection, a timeout, a cancellation mid-statement) is closed rather than given back: its protocol
        may be mid-message, and the pool makes a fresh one."""
        import asyncpg

        conn = await pool.acquire(timeout=self.connect_timeout)
        try:
            result = await fn(conn)
        except BaseException as exc:
            if not isinstance(exc, asyncpg.PostgresError) or _lost(exc):
                try:
                    conn.terminate()
                except asyncpg.InterfaceError:  # the pool took it back already, as its connection closed
                    raise exc from None
            await self._release(pool, conn)
            raise
        await self._release(pool, conn)
        return result

    @staticmethod
    async def _release(pool: asyncpg.Pool, conn: asyncpg.Connection) -> None:
        try:
            await pool.release(conn, timeout=1.0)
        except Exception:
            logger.debug("agentmw state: a broken Postgres connection could not be reset", exc_info=True)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._hub.close()
        for events in self._log_waiters.values():
            for event in events:
                event.set()
        for handle in self._log_idle.values():
            handle.cancel()
        for task in (self._reconnecting, self._bus_worker, *self._chores):
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        if self._listener is not None:
            listener, self._listener = self._listener, None
            try:
                await asyncio.wait_for(listener.close(), self.command_timeout)
            except Exception:  # noqa: BLE001 - a dead server: drop the connection
                listener.terminate()
        if self._pool is not None:
            pool, self._pool = self._pool, None
            try:
                await asyncio.wait_for(pool.close(), self.command_timeout)
            except Exception:  # noqa: BLE001 - connections stuck on a dead server
                pool.terminate()

    def _bus_hub(self) -> Hub:
        return self._hub

    def _prune_due(self, kind: str, ns: str, limits: StoreLimits, writes: int = 1) -> bool:
        due = self._due.setdefault((kind, ns), _Due())
        due.writes += writes
        now = time.monotonic()
        if due.writes >= max(1, limits.max_count // 20) or now - due.at >= _PRUNE_SECONDS:
            due.writes = 0
            due.at = now
            return True
        return False

    async def _prune(self, kind: str, namespaces: Mapping[str, StoreLimits]) -> None:
        """Prune namespaces after a write that was due it, in a transaction of its own: the write is committed
        whatever happens here, and a prune that fails is left to the next one."""
        for ns, limits in namespaces.items():
            args = (kind, ns, limits.max_age, limits.max_count)
            try:
                await self._run(functools.partial(_execute, self._sql_prune, args))
            except StoreUnavailable:
                logger.warning(
                    "agentmw state: pruning %s %r in Postgres failed; the next write tries again", kind, ns
                )

    # -- records ---------------------------------------------------------------------------------------------

    async def get(self, ns: str, key: str) -> Versioned | None:
        age = self.limits(base.check_ns(ns)).max_age
        base.check_key(key)
        row = await self._run(lambda conn: conn.fetchrow(self._sql_get, ns, key, age), read=True)
        return Versioned(loads(row[0]), row[1]) if row is not None else None

    async def put(self, ns: str, key: str, value: Json, *, expected_version: int | None) -> int:
        want = base.expected(expected_version)
        body = base.encode(value)
        limits = self.limits(base.check_ns(ns))
        base.check_key(key)
        prune = self._prune_due("records", ns, limits)

        version = int(
            await self._run(lambda conn: conn.fetchval(self._sql_put, ns, key, body, want, limits.max_age))
        )
        if prune:
            await self._prune("records", {ns: limits})
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
        args = (
            [ns for ns, _, _, _ in checked],
            [key for _, key, _, _ in checked],
            [body for _, _, body, _ in checked],
            [want for _, _, _, want in checked],
            [limits[ns].max_age for ns, _, _, _ in checked],
        )

        versions = list(await self._run(lambda conn: conn.fetchval(self._sql_put_many, *args)))
        if prune:
            await self._prune("records", {ns: limits[ns] for ns in prune})
        return [
            Conflict(ns, key, want, -version - 1) if version < 0 else version
            for (ns, key, _, want), version in zip(checked, versions, strict=True)
        ]

    async def delete(self, ns: str, key: str, *, expected_version: int = ANY) -> bool:
        age = self.limits(base.check_ns(ns)).max_age
        base.check_key(key)

        async def remove(conn: asyncpg.Connection) -> int:
            if await conn.fetchval(self._sql_delete, ns, key, age, expected_version) is not None:
                return 1
            if expected_version == ANY:
                return 0
            found = await conn.fetchval(self._sql_version, ns, key, age)
            return -int(found) if found is not None else 0

        outcome = await self._run(remove)
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
        age = self.limits(base.check_ns(ns)).max_age
        where = base.check_where(where)
        limit = base.check_limit(limit)
        after = base.decode_cursor(cursor) if cursor else None
        order = "DESC" if newest_first else "ASC"
        matching = f"FROM {self._s}.records WHERE ns = $1 AND updated >= {_NOW} - $2"
        margs: list[Any] = [ns, age]
        if since is not None:
            matching += " AND updated > $3"
            margs.append(float(since))
        n = len(margs)
        page_sql = (
            f"SELECT key, version, updated, body {matching} "
            f'AND ($%d::float8 IS NULL OR (updated, key) {"<" if newest_first else ">"} ($%d, $%d COLLATE "C")) '
            f"ORDER BY updated {order}, key {order} LIMIT $%d"
        ) % (n + 1, n + 1, n + 2, n + 3)
        want = limit + 1

        async def read(conn: asyncpg.Connection) -> tuple[list[Item], int | None]:
            found: list[Item] = []
            position = after
            while len(found) < want:
                batch = want if not where else max(want, _SCAN_BATCH)
                rows = await conn.fetch(
                    page_sql,
                    *margs,
                    position[0] if position else None,
                    position[1] if position else "",
                    batch,
                )
                for key, version, updated, body in rows:
                    value = loads(body)
                    if base.matches(value, where) and len(found) < want:
                        found.append(Item(key, value, version, updated))
                if len(rows) < batch:
                    break
                position = (rows[-1][2], rows[-1][0])
            count: int | None = None
            if total and not where:
                count = int(await conn.fetchval(f"SELECT count(*) {matching}", *margs))
            elif total:
                count = 0
                async with conn.transaction(readonly=True):
                    async for row in conn.cursor(f"SELECT body {matching}", *margs, prefetch=500):
                        count += base.matches(loads(row[0]), where)
            return found, count

        found, count = await self._run(read, read=True)
        items = found[:limit]
        nxt = base.encode_cursor(items[-1].updated_at, items[-1].key) if len(found) > limit else None
        return Page(items, nxt, count)

    # -- keys ------------------------------------------------------------------------------------------------

    async def _write_key(self, ns: str, key: str, value: Json, ttl: float, absent: bool) -> bool:
        body = base.encode(value)
        limits = self.limits(base.check_ns(ns))
        ttl = base.check_ttl(ttl, limits)
        base.check_key(key)
        owner = _owner(value)
        prune = self._prune_due("keys", ns, limits)

        done = bool(
            await self._run(lambda conn: conn.fetchval(self._sql_set_key, ns, key, body, owner, ttl, absent))
        )
        if prune:
            await self._prune("keys", {ns: limits})
        return done

    async def set_if_absent(self, ns: str, key: str, value: Json, ttl: float) -> bool:
        return await self._write_key(ns, key, value, ttl, True)

    async def get_key(self, ns: str, key: str) -> Json | None:
        base.check_ns(ns)
        base.check_key(key)
        body = await self._run(lambda conn: conn.fetchval(self._sql_get_key, ns, key), read=True)
        return loads(body) if body is not None else None

    async def set_key(self, ns: str, key: str, value: Json, ttl: float) -> None:
        await self._write_key(ns, key, value, ttl, False)

    async def delete_key(self, ns: str, key: str) -> bool:
        base.check_ns(ns)
        base.check_key(key)
        return bool(await self._run(lambda conn: conn.fetchval(self._sql_delete_key, ns, key)))

    async def renew(self, ns: str, key: str, owner: str, ttl: float) -> bool:
        ttl = base.check_ttl(ttl, self.limits(base.check_ns(ns)))
        base.check_key(key)
        if not isinstance(owner, str):
            return False
        return await self._run(lambda conn: conn.fetchval(self._sql_renew, ns, key, owner, ttl)) is not None

    async def release(self, ns: str, key: str, owner: str) -> bool:
        base.check_ns(ns)
        base.check_key(key)
        if not isinstance(owner, str):
            return False
        return await self._run(lambda conn: conn.fetchval(self._sql_release, ns, key, owner)) is not None

    # -- logs ------------------------------------------------------------------------------------------------

    def _log_channel(self, ns: str, log: str) -> str:
        return f"{self.schema}.l.{_digest(ns, log)}"

    async def append(self, ns: str, log: str, event: Json) -> int:
        body = base.encode(event)
        limits = self.limits(base.check_ns(ns))
        base.check_key(log, "log name")
        channel = self._log_channel(ns, log)
        prune = self._prune_due("logs", ns, limits)

        event_id = int(
            await self._run(
                lambda conn: conn.fetchval(self._sql_append, ns, log, body, limits.max_len, channel)
            )
        )
        self._wake(channel)
        if prune:
            await self._prune("logs", {ns: limits})
        return event_id

    async def append_many(self, items: Sequence[tuple[str, str, Json]]) -> list[int]:
        checked = base.check_appends(items)
        if not checked:
            return []
        counts = collections.Counter(ns for ns, _, _ in checked)
        limits = {ns: self.limits(ns) for ns in counts}
        prune = [ns for ns in limits if self._prune_due("logs", ns, limits[ns], counts[ns])]
        channels = [self._log_channel(ns, log) for ns, log, _ in checked]
        args = (
            [ns for ns, _, _ in checked],
            [log for _, log, _ in checked],
            [body for _, _, body in checked],
            [limits[ns].max_len for ns, _, _ in checked],
            channels,
        )

        ids = list(await self._run(lambda conn: conn.fetchval(self._sql_append_many, *args)))
        for channel in dict.fromkeys(channels):
            self._wake(channel)
        if prune:
            await self._prune("logs", {ns: limits[ns] for ns in prune})
        return ids

    async def read(
        self, ns: str, log: str, after_id: int = 0, limit: int = 100, *, block: float | None = None
    ) -> list[tuple[int, Json]]:
        age = self.limits(base.check_ns(ns)).max_age
        base.check_key(log, "log name")
        limit = base.check_limit(limit)
        after_id = max(int(after_id), 0)

        async def select() -> list[tuple[int, Json]]:
            rows = await self._run(
                lambda conn: conn.fetch(self._sql_read, ns, log, after_id, age, limit), read=True
            )
            return [(int(i), loads(b)) for i, b in rows]

        entries = await select()
        if entries or not block:
            return entries
        loop = asyncio.get_running_loop()
        deadline = loop.time() + block
        channel = self._log_channel(ns, log)
        event = asyncio.Event()
        waiters = self._log_waiters.setdefault(channel, [])
        waiters.append(event)
        idle = self._log_idle.pop(channel, None)
        if idle is not None:
            idle.cancel()
        try:
            await self._listen_channels([channel])  # from here on, an append anywhere wakes this reader
            while not self._closed:
                event.clear()  # cleared before reading: an append after the read sets it again
                entries = await select()
                remaining = deadline - loop.time()
                if entries or remaining <= 0:
                    return entries
                try:
                    await asyncio.wait_for(event.wait(), remaining)
                except TimeoutError:
                    pass
            return []
        finally:
            waiters.remove(event)
            if not waiters and self._log_waiters.get(channel) is waiters:
                del self._log_waiters[channel]
                if not self._closed:
                    self._log_idle[channel] = loop.call_later(_UNLISTEN_AFTER, self._forget_log, channel)

    def _wake(self, channel: str) -> None:
        for event in self._log_waiters.get(channel, ()):
            event.set()

    def _forget_log(self, channel: str) -> None:
        """A log channel nobody here has waited on for a while: stop listening to it."""
        self._log_idle.pop(channel, None)
        if channel not in self._log_waiters and not self._closed:
            task = asyncio.get_running_loop().create_task(self._unlisten_channels([channel]))
            self._chores.add(task)
            task.add_done_callback(self._chores.discard)

    # -- LISTEN / NOTIFY -------------------------------------------------------------------------------------

    def _bus_channel(self, channel: str) -> str:
        return f"{self.schema}.b.{_digest(channel)}"

    def _wanted(self) -> list[str]:
        return [*self._bus_names, *self._log_waiters, *self._log_idle]

    async def _connection(self) -> asyncpg.Connection:
        """The listening connection, connected (and listening again to what is wanted) if it is not."""
        if self._closed:
            raise RuntimeError("the state store is closed")
        if self._listener is not None and not self._listener.is_closed():
            return self._listener
        if self._listener_lock is None:
            self._listener_lock = asyncio.Lock()
        async with self._listener_lock:
            if self._listener is not None and not self._listener.is_closed():
                return self._listener
            import asyncpg

            options = {k: v for k, v in self._connect_options.items() if k not in ("init", "setup", "reset")}
            try:
                conn = await asyncpg.connect(self.url, timeout=self.connect_timeout, **options)
                self._listened = set()
                for channel in self._wanted():
                    await conn.add_listener(channel, self._notified)
                    self._listened.add(channel)
            except Exception as exc:
                fault = _fault(exc)
                if fault is None:
                    raise
                raise fault from exc
            conn.add_termination_listener(self._listener_lost)
            self._listener = conn
            return conn

    def _ops(self) -> asyncio.Lock:
        if self._listen_ops is None:
            self._listen_ops = asyncio.Lock()
        return self._listen_ops

    async def _listen_channels(self, channels: list[str]) -> None:
        async with self._ops():
            conn = await self._connection()
            for channel in channels:
                if channel not in self._listened:
                    try:
                        await asyncio.wait_for(
                            conn.add_listener(channel, self._notified), self.command_timeout
                        )
                    except Exception as exc:
                        if isinstance(exc, TimeoutError):  # the connection is mid-statement: start afresh
                            conn.terminate()
                        fault = _fault(exc)
                        if fault is None:
                            raise
                        raise fault from exc
                    self._listened.add(channel)

    async def _unlisten_channels(self, channels: list[str]) -> None:
        async with self._ops():
            conn = self._listener
            for channel in channels:
                if channel in self._listened and channel not in self._wanted():
                    self._listened.discard(channel)
                    if conn is not None and not conn.is_closed():
                        try:
                            await asyncio.wait_for(
                                conn.remove_listener(channel, self._notified), self.command_timeout
                            )
                        except Exception:  # a lost connection listens to nothing anyway
                            if not conn.is_closed():
                                conn.terminate()  # mid-statement: the listener reconnects and listens again
                            logger.debug("agentmw state: UNLISTEN %s failed", channel, exc_info=True)

    async def _listen(self, channels: list[str]) -> None:
        """The hub's first local subscribers of these channels: LISTEN (live once the server has run it)."""
        names = {self._bus_channel(c): c for c in channels}
        self._bus_names.update(names)
        try:
            await self._listen_channels(list(names))
        except BaseException:
            for name in names:
                self._bus_names.pop(name, None)
            raise

    async def _unlisten(self, channels: list[str]) -> None:
        names = [self._bus_channel(c) for c in channels]
        for name in names:
            self._bus_names.pop(name, None)
        if not self._closed:
            await self._unlisten_channels(names)

    def _listener_lost(self, conn: Any) -> None:
        """The listening connection closed (the server restarted, the network dropped): reconnect in the
        background while anything is wanted."""
        if self._listener is conn:
            self._listener = None
        self._listened = set()
        if self._closed or (self._reconnecting is not None and not self._reconnecting.done()):
            return
        logger.warning("agentmw state: the Postgres listening connection was lost; reconnecting")
        self._reconnecting = asyncio.get_running_loop().create_task(
            self._reconnect(), name="agentmw-postgres-listen"
        )

    async def _reconnect(self) -> None:
        pause = 0.1
        while not self._closed and self._wanted():
            try:
                await self._connection()
            except (StoreUnavailable, OSError):
                await asyncio.sleep(pause)
                pause = min(2.0, pause * 2)
                continue
            logger.warning("agentmw state: the Postgres listening connection is back")
            for events in list(self._log_waiters.values()):  # appends meanwhile were not notified: read again
                for event in events:
                    event.set()
            return

    def _notified(self, conn: Any, pid: int, channel: str, payload: str) -> None:
        if channel in self._log_waiters:
            self._wake(channel)
            return
        if channel not in self._bus_names:
            return
        if not self._bus_queue and payload.startswith("m"):
            self._deliver(payload)
            return
        self._bus_queue.append(payload)  # behind a message still being read from the table: in order
        if self._bus_worker is None or self._bus_worker.done():
            self._bus_worker = asyncio.get_running_loop().create_task(
                self._drain_bus(), name="agentmw-postgres-bus"
            )

    def _deliver(self, payload: str) -> None:
        size, _, rest = payload[1:].partition(":")
        length = int(size)
        self._hub.dispatch(rest[:length], rest[length:].encode("utf-8", "surrogatepass"))

    async def _drain_bus(self) -> None:
        while self._bus_queue:
            payload = self._bus_queue[0]
            try:
                if payload.startswith("m"):
                    self._deliver(payload)
                else:
                    row_id = int(payload[1:])
                    row = await self._run(
                        lambda conn: conn.fetchrow(self._sql_bus_row, row_id),  # noqa: B023 - awaited here
                        read=True,
                    )
                    if row is not None:
                        self._hub.dispatch(row[0], bytes(row[1]))
            except asyncio.CancelledError:
                raise
            except Exception:  # a message that cannot be read is lost (at most once), not the ones after it
                logger.warning("agentmw state: a large Postgres bus message could not be read", exc_info=True)
            self._bus_queue.popleft()

    async def publish(self, channel: str, message: Json) -> None:
        body = base.encode(message)
        base.check_key(channel, "channel")
        name = self._bus_channel(channel)
        header = f"m{len(channel)}:{channel}"
        if len(header.encode("utf-8", "surrogatepass")) + len(body) <= _PAYLOAD:
            payload = header + body.decode("utf-8")
            await self._run(lambda conn: conn.execute("SELECT pg_notify($1, $2)", name, payload))
            return
        await self._run(lambda conn: conn.execute(self._sql_publish, name, channel, body, self.bus_retention))
