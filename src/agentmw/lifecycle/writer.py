"""Write-behind: changes are written by one writer task off the request path, in batches.

A client queues what has changed (:meth:`WriteBehind.add`); the writer takes the whole queue at once and
hands it to the client's ``write`` (which writes each item with a compare-and-set, and calls
:meth:`WriteBehind.done` for every item it is finished with). An item that is not urgent waits up to
``delay()`` seconds so that the changes made meanwhile are written with it (one hand-off to the store for
many writes); an urgent one, or a :meth:`WriteBehind.flush`, writes at once.

With no delay it is a *group commit*: the writer writes what is queued as soon as it is idle, and whatever is
queued while that batch is on its way goes in the next one, so concurrent writers share one hand-off to the
store (one transaction, one ``fsync``) without waiting for company. A batch whose write failed is queued
again (:meth:`WriteBehind.again`), never dropped by the writer.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

__all__ = ["WriteBehind"]

T = TypeVar("T")


class WriteBehind(Generic[T]):
    """One writer task and its queue.

    Args:
        write: writes one batch (the items queued since the last); must call :meth:`done` once per item
            it finished (written, failed and logged, or found to be another's to write).
        delay: the seconds a batch waits for company (read at each batch, so a test may change it).
        name: the writer task's name.
    """

    def __init__(
        self, write: Callable[[list[T]], Awaitable[None]], delay: Callable[[], float], name: str
    ) -> None:
        self._write = write
        self._delay = delay
        self.name = name
        self.queue: deque[T] = deque()
        self.pending = 0  # queued or being written
        self.closed = False
        self.task: asyncio.Task[None] | None = None
        self._wake: asyncio.Event | None = None
        self._idle: asyncio.Event | None = None
        self._urgent: asyncio.Event | None = None
        self._flushes = 0  # flushes waiting: no batch waits for company meanwhile (nor a batch tried again)

    def stopped(self) -> bool:
        """Whether no writer may start any more: closed, or the event loop is ending (it cancelled the
        writer, which only a close does otherwise). A writer started then would never run: asyncio.run and
        the test runners cancel the loop's tasks once, then close it. A writer cancelled by another loop's end
        is not a stop: the app is served again by a new loop (a test client per test, each with its own loop,
        on one module-level app), and the next item starts a writer there."""
        task = self.task
        if task is not None and not task.done():
            return False
        if self.closed:
            return True
        return task is not None and task.cancelled() and task.get_loop() is _running_loop()

    def add(self, item: T, *, urgent: bool = False) -> None:
        """Queue ``item`` (the caller checked :meth:`stopped`); ``urgent``: write without waiting."""
        self.queue.append(item)
        self.pending += 1
        if self.task is None or self.task.done():
            self._wake = asyncio.Event()
            self._idle = asyncio.Event()
            self._urgent = asyncio.Event()
            self.task = asyncio.get_running_loop().create_task(self._run(), name=self.name)
        assert self._idle is not None and self._wake is not None and self._urgent is not None
        self._idle.clear()
        self._wake.set()
        if urgent:
            self._urgent.set()

    def done(self, count: int = 1) -> None:
        """``count`` items are finished with."""
        self.pending -= count

    def again(self, items: list[T]) -> None:
        """Queue ``items`` of the batch being written once more (their write failed: they are still pending,
        and the next batch writes them); nothing is counted twice."""
        self.queue.extend(items)
        if self._wake is not None:
            self._wake.set()

    async def flush(self) -> None:
        """Wait until everything queued so far is written (at once: no batching delay)."""
        if self.pending and self._idle is not None:
            if self._urgent is not None:
                self._urgent.set()
            self._flushes += 1
            try:
                await self._idle.wait()
            finally:
                self._flushes -= 1

    def close(self) -> None:
        """No more batches: the writer ends (its task is the caller's to cancel or await)."""
        self.closed = True
        if self._wake is not None:
            self._wake.set()

    async def _run(self) -> None:
        wake, idle, urgent = self._wake, self._idle, self._urgent
        assert wake is not None and idle is not None and urgent is not None
        queue = self.queue
        while not self.closed:
            if not queue:
                idle.set()
                wake.clear()
                await wake.wait()
                continue
            delay = self._delay()
            if not urgent.is_set() and delay > 0 and not self._flushes:
                # asyncio.timeout, not wait_for: no inner task to cancel, so a cancellation (close, or the loop
                # ending) reaches this task at once; with 3.11's wait_for, one that landed as the wait ended
                # could leave the writer waiting on a future nobody completes, and the loop's end hanging
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(delay):
                        await urgent.wait()
            urgent.clear()
            batch = list(queue)
            queue.clear()
            await self._write(batch)


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
