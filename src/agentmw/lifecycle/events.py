"""Append-only event logs in the shared state, and the followers of a piece of work.

- :class:`EventLog`: one log per piece of work (``<face>.events/<id>``). A record carries the id of the
  last event it reflects, so a follower on another replica reads the record, then the log after that id,
  and misses nothing and repeats nothing (:meth:`EventLog.follow`).
- :class:`Followers`: the followers in this process, each a queue; they get each event at once, and
  ``None`` at the end of their stream.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import Any

from ..state import Json, State
from .records import retry

__all__ = ["EventLog", "Followers", "Queue"]

Queue = asyncio.Queue[dict[str, Any] | None]
FOLLOW_BLOCK_SECONDS = 1.0
PAGE = 100


class EventLog:
    """The logs of one namespace."""

    __slots__ = ("ns", "state")

    def __init__(self, state: State, ns: str) -> None:
        self.state = state
        self.ns = ns

    async def append(self, key: str, event: Json, *, stop: Callable[[], bool] = lambda: False) -> int:
        """Append ``event`` (retried on a passing failure); its id."""
        return await retry(lambda: self.state.append(self.ns, key, event), stop=stop)

    async def read(
        self, key: str, after: int, *, block: float | None = None, limit: int = PAGE
    ) -> list[tuple[int, Any]]:
        """The events after ``after`` (waiting up to ``block`` seconds for one when there is none yet)."""
        return list(await self.state.read(self.ns, key, after, limit, block=block))

    async def follow(
        self,
        key: str,
        after: int,
        *,
        is_final: Callable[[Any], bool],
        when_quiet: Callable[[], Awaitable[Iterable[Any] | None]],
        block: float = FOLLOW_BLOCK_SECONDS,
    ) -> AsyncIterator[Any]:
        """The events after ``after`` until a final one (``is_final``). When the log stays quiet for
        ``block`` seconds, ``when_quiet()`` says whether the work is still going (None: keep following) or
        has ended: then the events it returns close the stream, after what the log holds meanwhile (none
        returned: the work is gone, the stream ends at once)."""
        while True:
            entries = await self.read(key, after, block=block)
            for event_id, event in entries:
                after = event_id
                yield event
                if is_final(event):
                    return
            if entries:
                continue
            ending = await when_quiet()
            if ending is None:
                continue
            last = list(ending)
            if not last:
                return
            for _, event in await self.read(key, after):
                yield event
                if is_final(event):
                    return
            for event in last:
                yield event
            return

    async def wait_final(
        self,
        key: str,
        after: int,
        *,
        is_final: Callable[[Any], bool],
        timeout: float,
        when_quiet: Callable[[], Awaitable[bool]],
    ) -> Any | None:
        """The first final event after ``after`` within ``timeout`` seconds; None when there was none, or
        ``when_quiet()`` (asked each quiet second) says to stop looking."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while (remaining := deadline - loop.time()) > 0:
            entries = await self.read(key, after, block=min(remaining, FOLLOW_BLOCK_SECONDS))
            for event_id, event in entries:
                after = event_id
                if is_final(event):
                    return event
            if not entries and await when_quiet():
                return None
        return None


class Followers:
    """The followers of one piece of work in this process."""

    __slots__ = ("queues",)

    def __init__(self) -> None:
        self.queues: set[Queue] = set()

    def __bool__(self) -> bool:
        return bool(self.queues)

    def __len__(self) -> int:
        return len(self.queues)

    def __iter__(self) -> Any:
        return iter(self.queues)

    def __contains__(self, queue: object) -> bool:
        return queue in self.queues

    def add(self, queue: Queue | None = None) -> Queue:
        """A new follower (or ``queue``, which follows from now on)."""
        queue = queue if queue is not None else asyncio.Queue()
        self.queues.add(queue)
        return queue

    def discard(self, queue: Queue) -> None:
        self.queues.discard(queue)

    def send(self, event: dict[str, Any]) -> None:
        """``event`` to every follower."""
        for queue in self.queues:
            queue.put_nowait(event)

    def end(self, last: dict[str, Any] | None = None) -> None:
        """Every follower gets ``last`` (if any), then the end of its stream; none follows any more."""
        for queue in list(self.queues):
            if last is not None:
                queue.put_nowait(last)
            queue.put_nowait(None)
        self.queues.clear()

    def take(self) -> list[Queue]:
        """The followers, handed to someone else (their streams go on from elsewhere)."""
        queues = list(self.queues)
        self.queues.clear()
        return queues

    def clear(self) -> None:
        self.queues.clear()
