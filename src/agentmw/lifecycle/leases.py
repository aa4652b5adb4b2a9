"""Leases with a heartbeat, and the orphan sweep that finds work whose holder is gone.

- :class:`Heartbeat`: one key per process (``<face>.replicas/<replica>``), renewed every third of its life;
  :meth:`Heartbeat.alive` tells whether another process's key is still there (cached briefly). A record
  names its holder; a holder without a heartbeat is gone, and its work is taken over or failed.
- :class:`Leases`: keys one process holds (an MCP GET stream, an A2A push sender), renewed on a period and
  taken again when the store forgot one; released at the end.
- :class:`Sweeper`: a sweep for orphans, started by a request (never at import or start-up) at most every
  ``every`` seconds, and a take-over of one id not tried again on this process for ``retry`` seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Sequence
from typing import Any

from ..state import State
from .background import Background

__all__ = ["Heartbeat", "Leases", "Sweeper", "every", "keep"]

logger = logging.getLogger("agentmw")

ALIVE_CACHE_SECONDS = 1.0
START_WAIT_SECONDS = 5.0


async def keep(state: State, ns: str, key: str, owner: str, ttl: float) -> bool:
    """Renew ``owner``'s lease on ``key``, or take it again if the store forgot it; False: another holds it."""
    if await state.renew(ns, key, owner, ttl):
        return True
    return await state.set_if_absent(ns, key, {"owner": owner}, ttl)


async def every(
    seconds: float | Callable[[], float], tick: Callable[[], Awaitable[object]], *, label: str
) -> None:
    """Call ``tick`` every ``seconds`` (a number, or read before each wait) until cancelled; a tick that fails
    is logged, and the next one comes as planned (a heartbeat, a lease renewal, a stream sweep)."""
    while True:
        await asyncio.sleep(seconds() if callable(seconds) else seconds)
        try:
            await tick()
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.warning("%s: a periodic tick failed; the next one comes as planned", label, exc_info=True)


class Heartbeat:
    """This process's heartbeat key, and what it knows of the others'.

    :meth:`start` (awaited before this process first writes that it holds something) sets the key, starts
    the renewal and whatever must run with it (``with_it``: a bus listener, which says when it listens), and
    returns once all are up; concurrent callers wait for the first."""

    def __init__(
        self, state: State, ns: str, replica: str, seconds: float, *, label: str, background: Background
    ) -> None:
        self.state = state
        self.ns = ns
        self.replica = replica
        self.seconds = seconds
        self.label = label
        self.background = background
        self.closed = False
        self._started: asyncio.Future[None] | None = None
        self._alive: dict[str, float] = {}  # replica -> until when it is known to be alive

    @property
    def started(self) -> bool:
        return self._started is not None

    async def start(self, *with_it: Callable[[asyncio.Future[None]], Coroutine[Any, Any, None]]) -> None:
        if self._started is None:
            loop = asyncio.get_running_loop()
            self._started = loop.create_future()
            up: list[asyncio.Future[None]] = []
            self.background.spawn(self._beat(), f"{self.label.lower()}-heartbeat")
            for run in with_it:
                ready = loop.create_future()
                up.append(ready)
                self.background.spawn(run(ready), f"{self.label.lower()}-with-heartbeat")
            try:
                await self.state.set_key(self.ns, self.replica, {"owner": self.replica}, self.seconds)
                for ready in up:
                    await asyncio.wait_for(asyncio.shield(ready), START_WAIT_SECONDS)
            finally:
                self._started.set_result(None)
        elif not self._started.done():
            await asyncio.shield(self._started)

    async def _beat(self) -> None:
        while not self.closed:
            await asyncio.sleep(self.seconds / 3)
            try:
                if not await self.state.renew(self.ns, self.replica, self.replica, self.seconds):
                    await self.state.set_key(self.ns, self.replica, {"owner": self.replica}, self.seconds)
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.exception("%s heartbeat of replica %s failed; retrying", self.label, self.replica)

    async def alive(self, holder: str) -> bool:
        """Whether ``holder``'s heartbeat key is there (a positive answer is kept for a moment)."""
        now = time.monotonic()
        if self._alive.get(holder, 0.0) > now:
            return True
        if await self.state.get_key(self.ns, holder) is None:
            return False
        if len(self._alive) > 1000:
            self._alive.clear()
        self._alive[holder] = now + min(ALIVE_CACHE_SECONDS, self.seconds / 10)
        return True

    async def stop(self) -> None:
        """Stop renewing (the background set cancels the renewal) and give the key up."""
        self.closed = True
        if self._started is not None:
            with contextlib.suppress(Exception):
                await self.state.release(self.ns, self.replica, self.replica)


class Leases:
    """Keys this process holds in ``ns``, each for ``ttl`` seconds, kept by :meth:`renew_all` (call it on a
    period shorter than ``ttl``: a heartbeat's tick)."""

    def __init__(self, state: State, ns: str, owner: str, ttl: float) -> None:
        self.state = state
        self.ns = ns
        self.owner = owner
        self.ttl = ttl
        self.held: set[str] = set()

    async def acquire(self, key: str) -> bool:
        """Take ``key`` if nobody holds it (or this process already does)."""
        if await keep(self.state, self.ns, key, self.owner, self.ttl):
            self.held.add(key)
            return True
        return False

    async def release(self, key: str) -> None:
        self.held.discard(key)
        await self.state.release(self.ns, key, self.owner)

    async def renew_all(self, keys: Iterable[str] | None = None) -> list[str]:
        """Renew the held keys (or ``keys``), taking back any the store forgot; returns those another holds
        now (no longer held here). A failure is logged and the key kept for the next tick."""
        lost: list[str] = []
        for key in list(self.held if keys is None else keys):
            try:
                if not await keep(self.state, self.ns, key, self.owner, self.ttl):
                    self.held.discard(key)
                    lost.append(key)
            except Exception:
                logger.warning("the lease %s/%s could not be renewed", self.ns, key, exc_info=True)
        return lost


class Sweeper:
    """When to sweep for orphans, and which take-overs to try.

    Args:
        every: seconds between two sweeps at most; each request calls :meth:`due` (one clock read).
        retry: seconds before a take-over of the same id is tried again on this process.
    """

    def __init__(self, every: float, retry: float) -> None:
        self.every = every
        self.retry = retry
        self._next = 0.0  # when the next sweep may run (monotonic)
        self._attempts: dict[str, float] = {}  # id -> when a take-over may be tried again

    def due(self) -> bool:
        """Whether a sweep should run now (then the next is ``every`` seconds away)."""
        now = time.monotonic()
        if now < self._next:
            return False
        self._next = now + self.every
        return True

    def may_try(self, key: str) -> bool:
        """Whether to try taking ``key`` over now; True marks it tried for ``retry`` seconds."""
        now = time.monotonic()
        attempts = self._attempts
        if attempts.get(key, 0.0) > now:
            return False
        if len(attempts) > 1000:
            for old in [k for k, until in attempts.items() if until <= now]:
                del attempts[old]
        attempts[key] = now + self.retry
        return True

    async def sweep(
        self,
        find: Callable[[], Awaitable[Sequence[str]]],
        take_over: Callable[[str], object],
        *,
        label: str,
    ) -> None:
        """Call ``take_over`` with each orphan ``find`` returns (awaited when it returns an awaitable); a
        failure is logged, and the sweep runs again on a later request."""
        try:
            for key in await find():
                done = take_over(key)
                if asyncio.iscoroutine(done) or isinstance(done, asyncio.Future):
                    await done
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.exception("the %s orphan sweep failed; it runs again on a later request", label)
