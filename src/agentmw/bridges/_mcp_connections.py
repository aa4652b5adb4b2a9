"""The connections of an MCP peer, kept open between calls, and the routing that keeps each call's traffic its own.

Opening an ``mcp`` client connection for every call costs, at 2025-11-25, a handshake (``initialize``, the
``initialized`` notification, the GET stream, and a ``DELETE`` at the end), and at 2026-07-28 the client's own
set-up. So a peer keeps its connections (docs/bridges.md, "Connections"):

- **2026-07-28** (stateless: every request stands alone): one client per peer serves every call at once.
- **2025-11-25** (sessions): a small pool of initialized sessions, keyed by the credential that opened them
  (a session belongs to the credential that created it). A session serves **one call at a time**, so whatever
  the peer sends on it belongs to that call. Idle sessions expire; at most ``size`` are kept; a session that saw
  any error is closed, never reused.

**Routing.** The ``mcp`` client runs the handler of a server-to-client message (a question, a log line) in the
context of the request whose response stream carried it, so every call sets :data:`_RELAY` to its own
:class:`Relay` and the connection's callbacks deliver there. A message on no call's stream (a 2025 session's GET
stream) goes to the call that holds the session, or nowhere when it is idle. A relay closes with its call: what
arrives late is dropped (a question is cancelled), never handed to the next call.

Each connection is held open by a task of its own (the ``mcp`` client's task groups must end in the task that
opened them), started in an empty context: nothing of the call that happened to open it (its relay, its trace,
its headers) reaches the connection's own traffic.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections.abc import Callable, Mapping
from contextlib import AbstractAsyncContextManager
from typing import Any

__all__ = ["OUTBOUND", "Connection", "Connections", "Relay"]

logger = logging.getLogger("agentmw.bridges")

OUTBOUND: contextvars.ContextVar[Mapping[str, str]] = contextvars.ContextVar("agentmw_bridge_outbound")
"""The headers of the request being sent (read by the peer's httpx auth): each call's own, or, in a connection's
own task, the credential that opened it."""
_RELAY: contextvars.ContextVar[Relay | None] = contextvars.ContextVar("agentmw_bridge_relay", default=None)

Opener = Callable[[Mapping[str, str], dict[str, Any]], AbstractAsyncContextManager[Any]]
"""``(headers, callbacks) -> async context manager of an entered mcp Client``."""


class Relay:
    """The server-to-client traffic of one call (progress, log messages, questions), queued for the call's task."""

    __slots__ = ("closed", "events", "loop")

    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.events: asyncio.Queue[tuple[Any, ...]] = asyncio.Queue()
        self.closed = False

    async def progress(self, progress: float, total: float | None, message: str | None) -> None:
        if not self.closed:
            self.events.put_nowait(("progress", progress, total, message))

    async def log(self, params: Any) -> None:
        if not self.closed:
            self.events.put_nowait(("log", params))

    async def ask(self, params: Any) -> Any:
        if self.closed:
            return _cancelled()
        answered: asyncio.Future[Any] = self.loop.create_future()
        self.events.put_nowait(("ask", params, answered))
        return await answered

    def close(self) -> None:
        """The call ended: from now on its traffic is dropped, and questions still queued are cancelled."""
        self.closed = True
        while not self.events.empty():
            event = self.events.get_nowait()
            if event[0] == "ask" and not event[2].done():
                event[2].cancel()


def _cancelled() -> Any:
    import mcp_types

    return mcp_types.ElicitResult(action="cancel")


class Connection:
    """One open ``mcp`` client connection, held open by its own task until it is closed or breaks."""

    def __init__(self, pool: Connections, key: Any, headers: Mapping[str, str]) -> None:
        loop = asyncio.get_running_loop()
        self.pool = pool
        self.key = key
        self.client: Any = None
        self.holder: Relay | None = None  # the call a session serves now (2025-11-25)
        self.users = 0
        self.served = 0
        self.retired = False
        self._closing = asyncio.Event()
        self._ready: asyncio.Future[None] = loop.create_future()
        self._expiry: asyncio.TimerHandle | None = None
        context = contextvars.Context()  # empty: nothing of the call that opened it
        context.run(OUTBOUND.set, dict(headers))
        self.task = loop.create_task(self._keep(headers), context=context)

    @property
    def alive(self) -> bool:
        return self.client is not None and not self._closing.is_set() and not self.task.done()

    async def ready(self) -> None:
        await asyncio.shield(self._ready)

    async def _keep(self, headers: Mapping[str, str]) -> None:
        callbacks = {"elicitation_callback": self._elicit, "logging_callback": self._log}
        try:
            async with self.pool.opener(headers, callbacks) as client:
                self.client = client
                self._ready.set_result(None)
                await self._closing.wait()
        except asyncio.CancelledError:
            self._failed(ConnectionError("the MCP connection was closed before it opened"))
            raise
        except Exception as exc:  # noqa: BLE001 - opening failed: the caller's error; later: the connection broke
            if not self._failed(exc):
                logger.debug("an MCP connection ended: %s: %s", type(exc).__name__, exc)
        finally:
            self.client = None
            self.pool._forget(self)

    def _failed(self, exc: BaseException) -> bool:
        """Hand an error that came before the connection opened to its callers; False when it had opened."""
        if self._ready.done():
            return False
        self._ready.set_exception(exc)
        self._ready.exception()  # marked read: a caller that went away must not leave it unread
        return True

    def _route(self) -> Relay | None:
        relay = _RELAY.get()
        return relay if relay is not None else self.holder

    async def _elicit(self, context: Any, params: Any) -> Any:
        relay = self._route()
        return await relay.ask(params) if relay is not None else _cancelled()

    async def _log(self, params: Any) -> None:
        relay = self._route()
        if relay is not None:
            await relay.log(params)

    def expire_in(self, seconds: float) -> None:
        self._expiry = asyncio.get_running_loop().call_later(seconds, self.pool._expire, self)

    def keep(self) -> None:
        if self._expiry is not None:
            self._expiry.cancel()
            self._expiry = None

    def close(self) -> None:
        """End it (in its own task: a 2025 session's ``DELETE`` does not hold the call that ends it)."""
        self.keep()
        self._closing.set()


class Lease:
    """``async with pool.lease(...) as connection``: one call's use of a connection (see :class:`Connections`)."""

    def __init__(
        self,
        pool: Connections,
        key: Any,
        headers: Mapping[str, str],
        request_headers: Mapping[str, str],
        relay: Relay | None,
        fresh: bool,
    ) -> None:
        self.pool = pool
        self.key = key
        self.headers = headers
        self.request_headers = request_headers
        self.relay = relay
        self.fresh = fresh
        self.connection: Connection | None = None
        self.reused = False
        self._tokens: tuple[Any, Any] | None = None

    async def __aenter__(self) -> Connection:
        connection = await self.pool._take(self.key, self.headers, self.fresh)
        self.connection = connection
        self.reused = connection.served > 0
        connection.served += 1
        if not self.pool.shared:
            connection.holder = self.relay
        self._tokens = (_RELAY.set(self.relay), OUTBOUND.set(dict(self.request_headers)))
        return connection

    async def __aexit__(self, kind: object, exc: BaseException | None, tb: object) -> None:
        assert self.connection is not None and self._tokens is not None
        _RELAY.reset(self._tokens[0])
        OUTBOUND.reset(self._tokens[1])
        self.connection.holder = None
        self.pool._give_back(self.connection, exc is None or not self.pool.spoils(exc))


class Connections:
    """The kept connections of one peer (module docstring). ``shared``: one connection serves concurrent calls
    (2026-07-28); else each serves one call at a time (2025-11-25 sessions). ``size`` 0 keeps none: every call
    opens its own connection and closes it after. ``spoils(exc)``: whether an error ends a shared connection
    (a session is ended by any error)."""

    def __init__(
        self,
        opener: Opener,
        *,
        shared: bool,
        size: int,
        idle_seconds: float,
        spoils: Callable[[BaseException], bool],
    ) -> None:
        self.opener = opener
        self.shared = shared
        self.size = size
        self.idle_seconds = idle_seconds
        self._spoils = spoils
        self._idle: dict[Any, list[Connection]] = {}
        self._current: dict[Any, Connection] = {}  # shared: the connection new calls use
        self._open: set[Connection] = set()
        self._loop: Any = None

    def spoils(self, exc: BaseException) -> bool:
        return not self.shared or self.size == 0 or self._spoils(exc)

    def lease(
        self,
        key: Any,
        headers: Mapping[str, str],
        request_headers: Mapping[str, str],
        relay: Relay | None,
        *,
        fresh: bool = False,
    ) -> Lease:
        """A connection for one call: ``headers`` open it (the credential), ``request_headers`` go with the
        call's own requests; ``fresh`` skips kept ones (a kept session the peer has forgotten)."""
        return Lease(self, key, headers, request_headers, relay, fresh)

    @property
    def open_count(self) -> int:
        return len(self._open)

    def _here(self) -> None:
        loop = asyncio.get_running_loop()
        if self._loop is not loop:  # connections of a loop that is gone cannot be used (nor closed) from here
            self._idle, self._current, self._open, self._loop = {}, {}, set(), loop

    async def _take(self, key: Any, headers: Mapping[str, str], fresh: bool) -> Connection:
        self._here()
        if self.shared and self.size > 0:
            connection = self._current.get(key)
            if connection is None or fresh or not (connection.alive or not connection._ready.done()):
                if connection is not None:
                    self._retire(connection)
                connection = self._current[key] = self._start(key, headers)
            connection.users += 1
            connection.keep()
            try:
                await connection.ready()
            except BaseException:
                connection.users -= 1
                if self._current.get(key) is connection and connection._ready.done():
                    del self._current[key]
                raise
            return connection
        idle = self._idle.get(key) or []
        while idle and not fresh:
            connection = idle.pop()
            connection.keep()
            if connection.alive:
                connection.users += 1
                return connection
            connection.close()
        connection = self._start(key, headers)
        connection.users += 1
        try:
            await connection.ready()
        except BaseException:
            connection.users -= 1
            connection.close()
            raise
        return connection

    def _start(self, key: Any, headers: Mapping[str, str]) -> Connection:
        connection = Connection(self, key, headers)
        self._open.add(connection)
        return connection

    def _give_back(self, connection: Connection, reusable: bool) -> None:
        connection.users -= 1
        if self.shared and self.size > 0:
            if not reusable:
                self._retire(connection)
            elif connection.users == 0:
                if connection.retired:
                    connection.close()
                else:
                    connection.expire_in(self.idle_seconds)
            return
        idle = sum(len(v) for v in self._idle.values())
        if not reusable or not connection.alive or idle >= self.size:
            connection.close()
            return
        self._idle.setdefault(connection.key, []).append(connection)
        connection.expire_in(self.idle_seconds)

    def _retire(self, connection: Connection) -> None:
        """A shared connection new calls no longer use; it ends when its last call does."""
        connection.retired = True
        if self._current.get(connection.key) is connection:
            del self._current[connection.key]
        if connection.users == 0:
            connection.close()

    def _expire(self, connection: Connection) -> None:
        if connection.users:
            return
        idle = self._idle.get(connection.key)
        if idle is not None and connection in idle:
            idle.remove(connection)
        if self._current.get(connection.key) is connection:
            del self._current[connection.key]
        connection.close()

    def _forget(self, connection: Connection) -> None:
        self._open.discard(connection)
        idle = self._idle.get(connection.key)
        if idle is not None and connection in idle:
            idle.remove(connection)
        if self._current.get(connection.key) is connection:
            del self._current[connection.key]

    async def aclose(self) -> None:
        """Close every kept connection of this event loop and wait for them to end (calls still running keep
        theirs until they end)."""
        if self._loop is not asyncio.get_running_loop():
            return
        for idle in self._idle.values():
            for connection in idle:
                connection.close()
        self._idle.clear()
        for connection in list(self._current.values()):
            self._retire(connection)
        waiting = [c.task for c in self._open if c.users == 0]
        if waiting:
            await asyncio.gather(*waiting, return_exceptions=True)
