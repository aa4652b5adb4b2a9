"""Append-only event logs in the shared state, and the followers of a piece of work.

- :class:`EventLog`: one log per piece of work (``<face>.events/<id>``). A record carries the id of the
  last event it reflects, so a follower on another replica reads the record, then the log after that id,
  and misses nothing and repeats nothing (:meth:`EventLog.follow`).
- :class:`LogWriter`: one piece of work's log written behind its stream, in entries of numbered payloads
  (``{"first": <seq>, "frames": [...], "end": True?}``), the last of which says the work ended.
- :class:`Followers`: the followers in this process, each a queue; they get each event at once, and
  ``None`` at the end of their stream.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from typing import Any

from ..state import Json, State
from .records import retry
from .writer import WriteBehind

__all__ = ["EventLog", "Followers", "LogWriter", "Numbered", "Queue"]

logger = logging.getLogger("agentmw")

Numbered = tuple[int, str | bytes]
"""One payload of a log and its sequence number (bytes are written as UTF-8 text)."""

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


class LogWriter:
    """One piece of work's log, written behind its stream by a writer task of its own (no batching delay: the
    stream never waits for it). Entries hold at most ``batch`` payloads; a backlog longer than ``keep`` payloads
    keeps only the newest (the log would drop the older ones anyway). A failed append is logged, and the
    writer goes on."""

    def __init__(self, log: EventLog, key: str, *, batch: int, keep: int, name: str, label: str) -> None:
        self.log = log
        self.key = key
        self.batch = batch
        self.keep = keep
        self.label = label
        self._writer: WriteBehind[Sequence[Numbered]] = WriteBehind(self._write, _no_delay, name)

    def add(self, items: Sequence[Numbered]) -> None:
        """Queue ``items`` for the log (the writer task starts if it is not running)."""
        self._writer.add(items)

    async def _write(self, batches: list[Sequence[Numbered]]) -> None:
        try:
            await self._append([item for items in batches for item in items], end=False, next_seq=0)
        except Exception:
            logger.exception("%s: events of %s could not be logged", self.label, self.key)
        finally:
            self._writer.done(len(batches))

    async def close(
        self, last: Sequence[Numbered] = (), *, end: bool, next_seq: int, retry_for: float = 0.0
    ) -> None:
        """Stop the writer once its batch is in, then append what is still queued and ``last``; with ``end``
        the last entry says so (written even with nothing in it, as ``{"first": next_seq, "frames": []}``).
        ``retry_for``: a refused append is tried again (backoff up to a second) for that many seconds before
        the failure is raised (the entries a try appended may be appended again: readers skip repeated
        sequence numbers)."""
        writer = self._writer
        writer.close()
        if writer.task is not None:
            await asyncio.gather(writer.task, return_exceptions=True)
        rest = [item for items in writer.queue for item in items]
        writer.queue.clear()
        items = [*rest, *last]
        loop = asyncio.get_running_loop()
        deadline = loop.time() + retry_for
        delay = 0.05
        while True:
            try:
                await self._append(list(items), end=end, next_seq=next_seq)
                return
            except Exception:
                if loop.time() + delay > deadline:
                    raise
                logger.warning(
                    "%s: the last events of %s could not be logged yet; retrying", self.label, self.key
                )
                await asyncio.sleep(delay)
                delay = min(delay * 2, 1.0)

    async def _append(self, items: list[Numbered], *, end: bool, next_seq: int) -> None:
        if len(items) > self.keep:
            del items[: len(items) - self.keep]
        size = self.batch
        for start in range(0, max(len(items), 1 if end else 0), size):
            chunk = items[start : start + size]
            entry: dict[str, Any] = {
                "first": chunk[0][0] if chunk else next_seq,
                "frames": [p.decode("utf-8") if isinstance(p, bytes) else p for _, p in chunk],
            }
            if end and start + size >= len(items):
                entry["end"] = True
            await self.log.state.append(self.log.ns, self.key, entry)


def _no_delay() -> float:
    return 0.0


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
