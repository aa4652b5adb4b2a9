"""Redis state, for agents served by several machines: the ``agentmw[redis]`` extra (redis-py's asyncio
client, imported when a :class:`RedisState` is made, never on ``import agentmw``).

- **Records** are hashes (value, version, write time) with a sorted set per namespace ordered by write
  time, for ``scan`` and the count bound. Compare-and-set, its index update and the trim are one Lua script
  (``EVALSHA``), atomic on the server.
- **Keys** are strings written with ``SET NX PX`` (or ``SET PX``) inside a script that also keeps a sorted
  set by expiry, for the count bound; ``renew`` and ``release`` are scripts that compare the ``owner`` field
  first.
- **Logs** are Streams: ``XADD ... MAXLEN n`` then ``XTRIM MINID``, ``XRANGE`` to read and ``XREAD BLOCK`` to
  wait. An event id is the stream id ``ms-seq`` as one integer, ``ms * 1_000_000 + seq`` (above 2**53: send
  it as a string to JavaScript).
- **Batches** (``put_many``, ``append_many``): one script per namespace over its items, in order, and the
  scripts in one pipeline: one round trip.
- **The bus** is pub/sub: one connection per store subscribes to the channels that local subscribers want.
- **Time.** Write times, expiries and ages are the Redis server's clock (``TIME`` in scripts, ``PX``), so
  replicas' clocks do not matter; only ``read`` compares entry times with this machine's clock to hide
  entries past their age before the next append trims them.

**Faults.** Every call that meets a transient fault of the server raises
:class:`agentmw.errors.StoreUnavailable` (a ``Retryable``), translated in one place (:func:`_fault`): a
connection refused or reset, a timeout (``socket_timeout`` and ``socket_connect_timeout`` are 2 s unless the
URL sets them, so a paused Redis fails a call within about 2 s instead of hanging it), a server still loading
its data (``LOADING``), out of memory under ``maxmemory`` with ``noeviction`` (``OOM``), a read-only replica
(``READONLY``), ``MASTERDOWN``, ``TRYAGAIN``, ``BUSY``. A dropped connection is retried once at once (a pooled
connection that died with a restarted server); nothing else is retried here, so a call fails fast and the
caller is told when to retry. The pool reconnects by itself once the server is back.

Every key starts with ``{prefix:namespace}``: two agents with different prefixes share one Redis, and the
keys of one namespace share a Redis Cluster hash slot (the scripts touch only one namespace).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar, cast

from .._transport import loads
from ..errors import StoreUnavailable
from . import base
from ._fanout import Hub
from .base import ANY, Conflict, Item, Json, Page, State, StoreLimits, Versioned
from .urls import PREFIX_PATTERN as _PREFIX

if TYPE_CHECKING:
    import redis.asyncio

__all__ = ["RedisState"]

logger = logging.getLogger("agentmw.state")

_SEQ = 1_000_000
_MAX_SEQ = 18446744073709551615
_SCAN_BATCH = 200

# Lua numbers are doubles and redis.call() would print big ones as 1.7e+15: times go through fmt().
_LUA_COMMON = """
local function fmt(x) return string.format('%.0f', x) end
local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local function trim(index, cutoff, max_count, key_prefix)
  redis.call('ZREMRANGEBYSCORE', index, '-inf', cutoff)
  local excess = redis.call('ZCARD', index) - tonumber(max_count)
  if excess > 0 then
    local gone = redis.call('ZPOPMIN', index, excess)
    for i = 1, #gone, 2 do redis.call('DEL', key_prefix .. gone[i]) end
  end
end
"""

# KEYS: record, index. ARGV: expected, body, max_age_ms, max_count, member, record key prefix.
_PUT = (
    _LUA_COMMON
    + """
local cur = tonumber(redis.call('HGET', KEYS[1], 'n') or '0')
local want = tonumber(ARGV[1])
if want >= 0 and cur ~= want then return {-1, cur} end
local now = now_us()
local n = cur + 1
redis.call('HSET', KEYS[1], 'v', ARGV[2], 'n', n, 't', fmt(now))
redis.call('PEXPIRE', KEYS[1], ARGV[3])
redis.call('ZADD', KEYS[2], fmt(now), ARGV[5])
trim(KEYS[2], '(' .. fmt(now - tonumber(ARGV[3]) * 1000), ARGV[4], ARGV[6])
redis.call('PEXPIRE', KEYS[2], ARGV[3])
return {n, fmt(now)}
"""
)

# KEYS: index, then one record per item. ARGV: max_age_ms, max_count, record key prefix, then per item:
# expected, body, member. The items in order, each a compare-and-set; the trim once at the end.
_PUT_MANY = (
    _LUA_COMMON
    + """
local now = now_us()
local out = {}
for i = 2, #KEYS do
  local j = 4 + (i - 2) * 3
  local cur = tonumber(redis.call('HGET', KEYS[i], 'n') or '0')
  local want = tonumber(ARGV[j])
  if want >= 0 and cur ~= want then
    out[#out + 1] = {-1, cur}
  else
    local n = cur + 1
    redis.call('HSET', KEYS[i], 'v', ARGV[j + 1], 'n', n, 't', fmt(now))
    redis.call('PEXPIRE', KEYS[i], ARGV[1])
    redis.call('ZADD', KEYS[1], fmt(now), ARGV[j + 2])
    out[#out + 1] = {n, 0}
  end
end
trim(KEYS[1], '(' .. fmt(now - tonumber(ARGV[1]) * 1000), ARGV[2], ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return out
"""
)

# KEYS: record, index. ARGV: expected, member.
_DELETE = """
local cur = tonumber(redis.call('HGET', KEYS[1], 'n') or '0')
if cur == 0 then return 0 end
local want = tonumber(ARGV[1])
if want >= 0 and cur ~= want then return -cur end
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[2])
return 1
"""

# KEYS: key, index. ARGV: body, ttl_ms, max_count, member, key prefix, only_if_absent, max_age_ms.
_SET = (
    _LUA_COMMON
    + """
local ok
if ARGV[6] == '1' then
  ok = redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2])
else
  ok = redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
end
if not ok then return 0 end
local now = now_us()
redis.call('ZADD', KEYS[2], fmt(now + tonumber(ARGV[2]) * 1000), ARGV[4])
trim(KEYS[2], fmt(now), ARGV[3], ARGV[5])
redis.call('PEXPIRE', KEYS[2], ARGV[7])
return 1
"""
)

# KEYS: key, index. ARGV: member.
_DELETE_KEY = """
local n = redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[1])
return n
"""

# KEYS: key, index. ARGV: owner, ttl_ms (empty: release), member.
_LEASE = (
    _LUA_COMMON
    + """
local v = redis.call('GET', KEYS[1])
if not v then return 0 end
local ok, obj = pcall(cjson.decode, v)
if not ok or type(obj) ~= 'table' or obj['owner'] ~= ARGV[1] then return 0 end
if ARGV[2] == '' then
  redis.call('DEL', KEYS[1])
  redis.call('ZREM', KEYS[2], ARGV[3])
else
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  redis.call('ZADD', KEYS[2], fmt(now_us() + tonumber(ARGV[2]) * 1000), ARGV[3])
end
return 1
"""
)

# KEYS: stream, index. ARGV: body, max_len, max_age_ms, max_count, member, stream key prefix.
_APPEND = (
    _LUA_COMMON
    + """
local id = redis.call('XADD', KEYS[1], 'MAXLEN', ARGV[2], '*', 'e', ARGV[1])
local now = now_us()
local cutoff_ms = math.floor(now / 1000) - tonumber(ARGV[3])
redis.call('XTRIM', KEYS[1], 'MINID', fmt(cutoff_ms))
redis.call('PEXPIRE', KEYS[1], ARGV[3])
redis.call('ZADD', KEYS[2], fmt(now), ARGV[5])
trim(KEYS[2], '(' .. fmt(cutoff_ms * 1000), ARGV[4], ARGV[6])
redis.call('PEXPIRE', KEYS[2], ARGV[3])
return id
"""
)


# KEYS: index, then one stream per item. ARGV: max_len, max_age_ms, max_count, stream key prefix, then per
# item: body, member.
_APPEND_MANY = (
    _LUA_COMMON
    + """
local ids = {}
for i = 2, #KEYS do
  local j = 5 + (i - 2) * 2
  ids[#ids + 1] = redis.call('XADD', KEYS[i], 'MAXLEN', ARGV[1], '*', 'e', ARGV[j])
end
local now = now_us()
local cutoff_ms = math.floor(now / 1000) - tonumber(ARGV[2])
local seen = {}
for i = 2, #KEYS do
  if not seen[KEYS[i]] then
    seen[KEYS[i]] = true
    redis.call('XTRIM', KEYS[i], 'MINID', fmt(cutoff_ms))
    redis.call('PEXPIRE', KEYS[i], ARGV[2])
    redis.call('ZADD', KEYS[1], fmt(now), ARGV[5 + (i - 2) * 2 + 1])
  end
end
trim(KEYS[1], '(' .. fmt(cutoff_ms * 1000), ARGV[3], ARGV[4])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return ids
"""
)


P = ParamSpec("P")
T = TypeVar("T")

SOCKET_TIMEOUT = 2.0
"""Seconds a call waits for Redis to answer (and to accept a connection) before it fails as unavailable, unless
the URL sets ``socket_timeout`` / ``socket_connect_timeout``: above the 1 s slices of a blocked ``read``."""

# Error replies that mean "not now" rather than "not this": the server is loading, full, a replica, failing over.
_TRANSIENT_REPLIES = (
    ("LOADING", "Redis is loading its data"),
    ("OOM ", "Redis is out of memory (maxmemory)"),
    ("READONLY", "Redis is a read-only replica"),
    ("MASTERDOWN", "Redis lost its primary"),
    ("TRYAGAIN", "Redis asked to try again"),
    ("CLUSTERDOWN", "the Redis cluster is down"),
    ("BUSY ", "Redis is busy running a script"),
    ("NOREPLICAS", "Redis has too few replicas"),
)


def _fault(exc: BaseException) -> StoreUnavailable | None:
    """The :class:`StoreUnavailable` a redis-py exception means, or None for one that is not a fault of the
    server (a bad reply, a programming error: raised as it is)."""
    from redis import exceptions as rx

    if isinstance(exc, StoreUnavailable):
        return exc
    why: str | None
    if isinstance(exc, rx.BusyLoadingError):
        why = "Redis is loading its data"
    elif isinstance(exc, (rx.TimeoutError, TimeoutError)):
        why = "Redis did not answer in time"
    elif isinstance(exc, (rx.ConnectionError, OSError)):
        why = "Redis cannot be reached"
    elif isinstance(exc, RuntimeError) and "another coroutine is already waiting" in str(exc):
        # redis-py reconnecting the bus's connection for a subscribe while its reader waits on it (asyncio's
        # StreamReader allows one reader): the subscription is made again with the reconnection
        why = "Redis is reconnecting"
    elif isinstance(exc, rx.OutOfMemoryError):
        why = "Redis is out of memory (maxmemory)"
    elif isinstance(exc, rx.ReadOnlyError):
        why = "Redis is a read-only replica"
    elif isinstance(exc, rx.ClusterDownError):
        why = "Redis lost its primary"
    elif isinstance(exc, rx.TryAgainError):
        why = "Redis asked to try again"
    elif isinstance(exc, rx.ResponseError):
        text = str(exc)
        why = next(
            (w for marker, w in _TRANSIENT_REPLIES if text.startswith(marker) or f": {marker}" in text), None
        )
        if why is None:
            return None
    else:
        return None
    return StoreUnavailable(f"the agent's store is unavailable ({why}); try again shortly")


def _guarded(method: Callable[P, Awaitable[T]]) -> Callable[P, Awaitable[T]]:
    """``method`` with the server's transient faults raised as :class:`StoreUnavailable` (module doc)."""

    @functools.wraps(method)
    async def call(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return await method(*args, **kwargs)
        except (StoreUnavailable, asyncio.CancelledError):
            raise
        except Exception as exc:
            fault = _fault(exc)
            if fault is None:
                raise
            raise fault from exc

    return call


def _ms(seconds: float) -> int:
    return max(1, int(seconds * 1000))


# What redis-py returns, with decode_responses=False: its annotations are a union of every answer shape, so
# the calls below say which one they get.
_Scored = list[tuple[bytes, float]]
"""ZRANGEBYSCORE ... WITHSCORES: (member, score) pairs."""
_Entries = list[tuple[bytes, dict[bytes, bytes]]]
"""XRANGE, and each stream of XREAD: (entry id, fields)."""


def _event_id(stream_id: bytes | str) -> int:
    text = stream_id.decode() if isinstance(stream_id, bytes) else stream_id
    ms, _, seq = text.partition("-")
    if int(seq) >= _SEQ:
        raise OverflowError(f"stream id {text}: more than {_SEQ} events in one millisecond")
    return int(ms) * _SEQ + int(seq)


def _connect(url: str) -> redis.asyncio.Redis:
    """A client for ``url`` that fails fast: timeouts of :data:`SOCKET_TIMEOUT` (the URL's own win), and one
    immediate retry of a dropped connection only (redis-py's default retries with backoff would hold a call for
    many seconds while Redis is down)."""
    import redis.asyncio as aioredis
    from redis.asyncio.retry import Retry
    from redis.backoff import NoBackoff
    from redis.exceptions import ConnectionError as RedisConnectionError

    return aioredis.Redis.from_url(
        url,
        socket_timeout=SOCKET_TIMEOUT,
        socket_connect_timeout=SOCKET_TIMEOUT,
        retry=Retry(NoBackoff(), 1, supported_errors=(RedisConnectionError,)),
        retry_on_timeout=False,
    )


class RedisState(State):
    """All four kinds of state in one Redis (6.2 or later), shared by every process and machine using it.

    Args:
        url: ``redis://[user:password@]host:port/db`` (or ``rediss://``, ``unix://``), for redis-py.
        prefix: starts every key and channel; agents sharing one Redis need different ones.
        client: an existing ``redis.asyncio.Redis`` (``decode_responses=False``) instead of ``url``; the
            store does not close it.
    """

    accepts_encoded = True

    def __init__(
        self,
        url: str = "redis://localhost:6379/0",
        *,
        prefix: str = "agentmw",
        client: redis.asyncio.Redis | None = None,
        limits: Mapping[str, StoreLimits] | None = None,
        default: StoreLimits = base.DEFAULT_LIMITS,
    ) -> None:
        super().__init__(limits=limits, default=default)
        if not _PREFIX.fullmatch(prefix):
            raise ValueError(f"a prefix is 1-64 letters, digits, '_', '.' or '-': {prefix!r}")
        try:
            import redis.asyncio  # noqa: F401  (the extra is installed)
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise ImportError(
                "the Redis state store needs the redis package: pip install 'agentmw[redis]'"
            ) from exc
        self.prefix = prefix
        self._owns_client = client is None
        self._client: redis.asyncio.Redis = client if client is not None else _connect(url)
        register = self._client.register_script
        self._put, self._delete, self._set = register(_PUT), register(_DELETE), register(_SET)
        self._delete_key, self._lease, self._append = (
            register(_DELETE_KEY),
            register(_LEASE),
            register(_APPEND),
        )
        self._put_many, self._append_many = register(_PUT_MANY), register(_APPEND_MANY)
        self._hub = Hub(on_first=self._listen, on_last=self._unlisten)
        self._pubsub: Any = None
        self._reader: asyncio.Task[None] | None = None
        self._confirm: dict[bytes, asyncio.Future[None]] = {}
        self._closed = False

    @property
    def client(self) -> redis.asyncio.Redis:
        return self._client

    def _key(self, ns: str, kind: str, name: str = "") -> str:
        return f"{{{self.prefix}:{ns}}}:{kind}:{name}"

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._hub.close()
        if self._reader is not None:
            self._reader.cancel()
            await asyncio.gather(self._reader, return_exceptions=True)
        if self._pubsub is not None:
            await self._pubsub.aclose()
        if self._owns_client:
            await self._client.aclose()

    def _bus_hub(self) -> Hub:
        return self._hub

    # -- records -------------------------------------------------------------------------------------------

    async def get(self, ns: str, key: str) -> Versioned | None:
        body, version = await self._client.hmget(
            self._key(base.check_ns(ns), "r", base.check_key(key)), "v", "n"
        )
        if body is None or version is None:
            return None
        return Versioned(loads(body), int(version))

    async def put(self, ns: str, key: str, value: Json, *, expected_version: int | None) -> int:
        want = base.expected(expected_version)
        body = base.encode(value)
        limits = self.limits(base.check_ns(ns))
        base.check_key(key)
        version, _ = await self._put(
            keys=[self._key(ns, "r", key), self._key(ns, "ri")],
            args=[want, body, _ms(limits.max_age), limits.max_count, key, self._key(ns, "r")],
        )
        if version < 0:
            raise Conflict(ns, key, want, int(_))
        return int(version)

    async def put_many(self, items: Sequence[tuple[str, str, Json, int | None]]) -> list[int | Conflict]:
        checked = base.check_puts(items)
        groups: dict[str, list[int]] = {}
        for i, (ns, _, _, _) in enumerate(checked):
            groups.setdefault(ns, []).append(i)
        calls = []
        for ns, members in groups.items():
            limits = self.limits(ns)
            keys = [self._key(ns, "ri")]
            args: list[Any] = [_ms(limits.max_age), limits.max_count, self._key(ns, "r")]
            for i in members:
                _, key, body, want = checked[i]
                keys.append(self._key(ns, "r", key))
                args += [want, body, key]
            calls.append((keys, args))
        out: list[int | Conflict] = [0] * len(checked)
        for members, answers in zip(groups.values(), await self._scripts(self._put_many, calls), strict=True):
            for i, (version, actual) in zip(members, answers, strict=True):
                ns, key, _, want = checked[i]
                out[i] = Conflict(ns, key, want, int(actual)) if version < 0 else int(version)
        return out

    async def _scripts(self, script: Any, calls: list[tuple[list[str], list[Any]]]) -> list[Any]:
        """Run one script several times in one round trip (a pipeline when there are several), in order."""
        if not calls:
            return []
        if len(calls) == 1:
            keys, args = calls[0]
            return [await script(keys=keys, args=args)]
        from redis.exceptions import NoScriptError

        results: list[Any] = [None] * len(calls)
        todo = list(range(len(calls)))
        for attempt in range(2):
            async with self._client.pipeline(transaction=False) as pipe:
                for i in todo:
                    keys, args = calls[i]
                    pipe.evalsha(script.sha, len(keys), *keys, *args)
                answers = await pipe.execute(raise_on_error=False)
            missing = []
            for i, answer in zip(todo, answers, strict=True):
                if isinstance(answer, NoScriptError) and attempt == 0:
                    missing.append(i)  # not run: the server does not know the script yet
                elif isinstance(answer, Exception):
                    raise answer
                else:
                    results[i] = answer
            if not missing:
                break
            script.sha = await self._client.script_load(script.script)
            todo = missing
        return results

    async def delete(self, ns: str, key: str, *, expected_version: int = ANY) -> bool:
        base.check_ns(ns)
        base.check_key(key)
        outcome = int(
            await self._delete(
                keys=[self._key(ns, "r", key), self._key(ns, "ri")], args=[expected_version, key]
            )
        )
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
        base.check_ns(ns)
        where = base.check_where(where)
        limit = base.check_limit(limit)
        after = base.decode_cursor(cursor) if cursor else None
        after_us = (round(after[0] * 1e6), after[1]) if after else None
        index = self._key(ns, "ri")
        low = f"({round(since * 1e6)}" if since is not None else "-inf"
        high = "+inf"
        if after_us is not None:  # from the cursor's time, inclusive: its ties are skipped by key below
            if newest_first:
                high = str(after_us[0])
            else:
                low = str(after_us[0])
        found: list[Item] = []
        offset = 0
        while len(found) <= limit:
            if newest_first:
                found_batch = await self._client.zrevrangebyscore(
                    index, high, low, start=offset, num=_SCAN_BATCH, withscores=True
                )
            else:
                found_batch = await self._client.zrangebyscore(
                    index, low, high, start=offset, num=_SCAN_BATCH, withscores=True
                )
            batch = cast(_Scored, found_batch)
            if not batch:
                break
            offset += len(batch)
            members = []
            for member, score in batch:
                name = member.decode()
                if after_us is None or (
                    (int(score), name) < after_us if newest_first else (int(score), name) > after_us
                ):
                    members.append(name)
            for item in await self._items(ns, members):
                if base.matches(item.value, where) and len(found) <= limit:
                    found.append(item)
        items = found[:limit]
        nxt = base.encode_cursor(items[-1].updated_at, items[-1].key) if len(found) > limit else None
        count = await self._count(ns, where, since) if total else None
        return Page(items, nxt, count)

    async def _items(self, ns: str, keys: list[str]) -> list[Item]:
        if not keys:
            return []
        async with self._client.pipeline(transaction=False) as pipe:
            for key in keys:
                pipe.hmget(self._key(ns, "r", key), "v", "n", "t")
            rows = await pipe.execute()
        return [
            Item(key, loads(v), int(n), int(t) / 1e6)
            for key, (v, n, t) in zip(keys, rows, strict=True)
            if v is not None
        ]

    async def _count(self, ns: str, where: dict[str, Any], since: float | None) -> int:
        index = self._key(ns, "ri")
        low = round(max(since if since is not None else 0.0, time.time() - self.limits(ns).max_age) * 1e6)
        if not where:
            return int(await self._client.zcount(index, f"({low}", "+inf"))
        count = 0
        offset = 0
        while True:
            members = cast(
                list[bytes],
                await self._client.zrangebyscore(index, f"({low}", "+inf", start=offset, num=_SCAN_BATCH),
            )
            if not members:
                return count
            offset += len(members)
            items = await self._items(ns, [m.decode() for m in members])
            count += sum(1 for item in items if base.matches(item.value, where))

    # -- keys ----------------------------------------------------------------------------------------------

    async def _write_key(self, ns: str, key: str, value: Json, ttl: float, only_if_absent: bool) -> bool:
        body = base.encode(value)
        limits = self.limits(base.check_ns(ns))
        ttl = base.check_ttl(ttl, limits)
        base.check_key(key)
        done = await self._set(
            keys=[self._key(ns, "k", key), self._key(ns, "ki")],
            args=[
                body,
                _ms(ttl),
                limits.max_count,
                key,
                self._key(ns, "k"),
                "1" if only_if_absent else "0",
                _ms(limits.max_age),
            ],
        )
        return bool(done)

    async def set_if_absent(self, ns: str, key: str, value: Json, ttl: float) -> bool:
        return await self._write_key(ns, key, value, ttl, True)

    async def get_key(self, ns: str, key: str) -> Json | None:
        body = await self._client.get(self._key(base.check_ns(ns), "k", base.check_key(key)))
        return loads(body) if body is not None else None

    async def set_key(self, ns: str, key: str, value: Json, ttl: float) -> None:
        await self._write_key(ns, key, value, ttl, False)

    async def delete_key(self, ns: str, key: str) -> bool:
        base.check_ns(ns)
        base.check_key(key)
        return bool(await self._delete_key(keys=[self._key(ns, "k", key), self._key(ns, "ki")], args=[key]))

    async def renew(self, ns: str, key: str, owner: str, ttl: float) -> bool:
        ttl = base.check_ttl(ttl, self.limits(base.check_ns(ns)))
        base.check_key(key)
        return bool(
            await self._lease(
                keys=[self._key(ns, "k", key), self._key(ns, "ki")], args=[owner, _ms(ttl), key]
            )
        )

    async def release(self, ns: str, key: str, owner: str) -> bool:
        base.check_ns(ns)
        base.check_key(key)
        return bool(
            await self._lease(keys=[self._key(ns, "k", key), self._key(ns, "ki")], args=[owner, "", key])
        )

    # -- logs ----------------------------------------------------------------------------------------------

    async def append(self, ns: str, log: str, event: Json) -> int:
        body = base.encode(event)
        limits = self.limits(base.check_ns(ns))
        base.check_key(log, "log name")
        stream_id = await self._append(
            keys=[self._key(ns, "l", log), self._key(ns, "li")],
            args=[body, limits.max_len, _ms(limits.max_age), limits.max_count, log, self._key(ns, "l")],
        )
        return _event_id(stream_id)

    async def append_many(self, items: Sequence[tuple[str, str, Json]]) -> list[int]:
        checked = base.check_appends(items)
        groups: dict[str, list[int]] = {}
        for i, (ns, _, _) in enumerate(checked):
            groups.setdefault(ns, []).append(i)
        calls = []
        for ns, members in groups.items():
            limits = self.limits(ns)
            keys = [self._key(ns, "li")]
            args: list[Any] = [limits.max_len, _ms(limits.max_age), limits.max_count, self._key(ns, "l")]
            for i in members:
                _, log, body = checked[i]
                keys.append(self._key(ns, "l", log))
                args += [body, log]
            calls.append((keys, args))
        out = [0] * len(checked)
        for members, ids in zip(groups.values(), await self._scripts(self._append_many, calls), strict=True):
            for i, stream_id in zip(members, ids, strict=True):
                out[i] = _event_id(stream_id)
        return out

    async def read(
        self, ns: str, log: str, after_id: int = 0, limit: int = 100, *, block: float | None = None
    ) -> list[tuple[int, Json]]:
        base.check_ns(ns)
        base.check_key(log, "log name")
        limit = base.check_limit(limit)
        stream = self._key(ns, "l", log)
        cutoff_ms = int((time.time() - self.limits(ns).max_age) * 1000)
        after_ms, after_seq = divmod(max(after_id, 0), _SEQ)
        if cutoff_ms > after_ms:  # everything up to the cutoff is past its age
            after_ms, after_seq = cutoff_ms - 1, _MAX_SEQ
        last = f"{after_ms}-{after_seq}"
        rows = cast(_Entries, await self._client.xrange(stream, f"({last}", "+", count=limit))
        if not rows and block:
            # XREAD BLOCK in slices of at most a second: redis-py's socket timeout (5 s) must not cut one.
            loop = asyncio.get_running_loop()
            deadline = loop.time() + block
            while not rows and (remaining := deadline - loop.time()) > 0:
                answer = cast(
                    list[tuple[bytes, _Entries]],
                    await self._client.xread({stream: last}, count=limit, block=_ms(min(remaining, 1.0))),
                )
                rows = answer[0][1] if answer else []
        return [(_event_id(i), loads(fields[b"e"])) for i, fields in rows]

    # -- bus -----------------------------------------------------------------------------------------------

    def _channel(self, channel: str) -> bytes:
        return f"{self.prefix}:bus:{channel}".encode()

    async def publish(self, channel: str, message: Json) -> None:
        await self._client.publish(self._channel(base.check_key(channel, "channel")), base.encode(message))

    @_guarded
    async def _listen(self, channels: list[str]) -> None:
        """The first local subscribers of these channels: subscribe, and wait until Redis confirms (within
        :data:`SOCKET_TIMEOUT` and a second: StoreUnavailable past it)."""
        if self._pubsub is None:
            self._pubsub = self._client.pubsub()
        loop = asyncio.get_running_loop()
        names = [self._channel(c) for c in channels]
        waits = [self._confirm.setdefault(name, loop.create_future()) for name in names]
        await self._pubsub.subscribe(*names)
        if self._reader is None or self._reader.done():
            self._reader = loop.create_task(self._read_bus(), name="agentmw-redis-bus")
        try:
            await asyncio.wait_for(asyncio.gather(*waits), SOCKET_TIMEOUT + 1)
        except TimeoutError:
            raise StoreUnavailable(
                "the agent's store is unavailable (Redis did not confirm a subscription); try again shortly"
            ) from None

    async def _unlisten(self, channels: list[str]) -> None:
        if self._pubsub is not None and not self._closed:
            await self._pubsub.unsubscribe(*[self._channel(c) for c in channels])

    async def _read_bus(self) -> None:
        skip = len(self._channel(""))
        pause = 0.0  # seconds between attempts while the bus connection fails: 0.1 s, doubling up to 1 s
        while not self._closed:
            try:
                message = await self._pubsub.get_message(timeout=1.0)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a dropped connection: redis-py reconnects and subscribes again
                if not pause:  # once per outage, not once per attempt
                    if _fault(exc) is not None:
                        logger.warning("agentmw state: the Redis bus is unavailable (%s); reconnecting", exc)
                    else:
                        logger.exception("agentmw state: reading the Redis bus failed")
                pause = min(1.0, pause * 2 or 0.1)
                await asyncio.sleep(pause)
                continue
            if pause:
                logger.warning("agentmw state: the Redis bus is back")
                pause = 0.0
            if message is None:
                continue
            kind = message["type"]
            if kind == "message":
                self._hub.dispatch(message["channel"][skip:].decode(), message["data"])
            elif kind == "subscribe":
                waiter = self._confirm.pop(message["channel"], None)
                if waiter is not None and not waiter.done():
                    waiter.set_result(None)


for _name in (
    "get",
    "put",
    "put_many",
    "delete",
    "scan",
    "set_if_absent",
    "get_key",
    "set_key",
    "delete_key",
    "renew",
    "release",
    "append",
    "append_many",
    "read",
    "publish",
):  # the one boundary where redis-py's faults become StoreUnavailable
    setattr(RedisState, _name, _guarded(getattr(RedisState, _name)))
del _name
