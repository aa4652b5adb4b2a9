"""Local fan-out of bus messages: the subscriptions of one process, per channel.

Every backend delivers through a :class:`Hub`: memory straight from ``publish``, SQLite from the poller
that reads the shared table, Redis from the one pub/sub connection it keeps. The hub tells its backend
when a channel gets its first local subscriber and loses its last, so a backend listens only to channels
someone in this process wants. Messages stay encoded until a subscriber takes them, so each subscriber
decodes its own copy and none can change another's.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any, Self

from .._transport import loads

__all__ = ["Hub", "Subscription"]

Listen = Callable[[list[str]], Awaitable[None]]


class Hub:
    """The local subscriptions of one store, by channel."""

    def __init__(self, on_first: Listen | None = None, on_last: Listen | None = None) -> None:
        self._channels: dict[str, set[Subscription]] = {}
        self._pending: dict[str, asyncio.Future[None]] = {}
        self._on_first = on_first
        self._on_last = on_last

    @property
    def channels(self) -> list[str]:
        return list(self._channels)

    def __bool__(self) -> bool:
        return bool(self._channels)

    async def add(self, sub: Subscription) -> None:
        """Register a subscription; returns once the backend listens to all its channels."""
        new = [c for c in dict.fromkeys(sub.channels) if c not in self._channels]
        pending = {id(f): f for c in sub.channels if (f := self._pending.get(c)) is not None}
        for channel in sub.channels:
            self._channels.setdefault(channel, set()).add(sub)
        try:
            if new and self._on_first is not None:
                started = asyncio.get_running_loop().create_future()
                for channel in new:
                    self._pending[channel] = started
                try:
                    await self._on_first(new)
                finally:
                    started.set_result(None)  # later subscribers of these channels stop waiting either way
                    for channel in new:
                        if self._pending.get(channel) is started:
                            del self._pending[channel]
            if pending:  # channels another subscriber is still starting to listen to
                await asyncio.gather(*(asyncio.shield(f) for f in pending.values()))
        except BaseException:
            with contextlib.suppress(Exception):
                await self.remove(sub)
            raise

    async def remove(self, sub: Subscription, *, notify: bool = True) -> None:
        gone = []
        for channel in dict.fromkeys(sub.channels):
            subs = self._channels.get(channel)
            if subs is None:
                continue
            subs.discard(sub)
            if not subs:
                del self._channels[channel]
                gone.append(channel)
        if gone and notify and self._on_last is not None:
            await self._on_last(gone)

    def dispatch(self, channel: str, raw: bytes) -> None:
        for sub in self._channels.get(channel, ()):
            sub._deliver(channel, raw)

    def close(self) -> None:
        """End every subscription (their iterators stop)."""
        for subs in list(self._channels.values()):
            for sub in list(subs):
                sub._end()
        self._channels.clear()


class Subscription:
    """Messages of some channels, from entering ``async with`` until leaving it; see ``State.subscribe``."""

    def __init__(self, hub: Hub, channels: tuple[str, ...], max_queue: int = 1000) -> None:
        self.channels = channels
        self.max_queue = max_queue
        self.dropped = 0
        self._hub = hub
        self._queue: collections.deque[tuple[str, bytes]] = collections.deque()
        self._ready = asyncio.Event()
        self._state = "new"

    async def __aenter__(self) -> Self:
        if self._state != "new":
            raise RuntimeError("a subscription is entered once")
        self._state = "open"
        try:
            await self._hub.add(self)
        except BaseException:
            self._state = "closed"
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._state == "open":
            self._end()
            await self._hub.remove(self)

    def _end(self) -> None:
        self._state = "closed"
        self._ready.set()

    def _deliver(self, channel: str, raw: bytes) -> None:
        if self._state != "open":
            return
        if len(self._queue) >= self.max_queue:
            self.dropped += 1
            return
        self._queue.append((channel, raw))
        self._ready.set()

    async def get(self, timeout: float | None = None) -> tuple[str, dict[str, Any]] | None:
        """The next message, or None after ``timeout`` seconds (or once closed)."""
        if self._state == "new":
            raise RuntimeError("enter the subscription (async with) before reading it")
        while not self._queue:
            if self._state == "closed":
                return None
            self._ready.clear()
            try:
                await asyncio.wait_for(self._ready.wait(), timeout)
            except TimeoutError:
                return None
        channel, raw = self._queue.popleft()
        return channel, loads(raw)

    def __aiter__(self) -> Subscription:
        return self

    async def __anext__(self) -> tuple[str, dict[str, Any]]:
        item = await self.get()
        if item is None:
            raise StopAsyncIteration
        return item
