"""Cancel one request's work from outside it, cheaply.

A request is cancelled by ``notifications/cancelled`` (handshake era) or by the client closing the
stream (stateless era). Watching for the disconnect needs a task, but only while the call is actually
waiting: the watcher is scheduled with ``call_soon``, so a call that completes without suspending
never creates it, and the hot path pays for no task group. The same watcher sends the keep-alive of a
call that stays silent, so proxies do not cut a long call's stream. A call waiting on a sync function's
thread starts it only after ``Timing.sync_watch_delay_seconds``: a thread cannot be interrupted, so watching a
fast one would only cost (``_executor.py``). The keep-alive comes every ``Timing.keepalive_seconds``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from .._executor import running_sync
from .._types import Receive
from ..settings import Timing

__all__ = ["CallGuard"]

_TIMING = Timing()


class CallGuard:
    __slots__ = (
        "_deferred",
        "_handle",
        "_keepalive",
        "_receive",
        "_timing",
        "_watcher",
        "done",
        "requested",
        "task",
    )

    def __init__(
        self,
        receive: Receive | None = None,
        keepalive: Callable[[], Awaitable[None]] | None = None,
        timing: Timing = _TIMING,
    ) -> None:
        task = asyncio.current_task()
        assert task is not None
        self.task = task
        self.requested = False
        self.done = False
        self._receive = receive
        self._keepalive = keepalive
        self._timing = timing
        self._watcher: asyncio.Task[Any] | None = None
        self._deferred = False
        self._handle = asyncio.get_running_loop().call_soon(self._start) if receive is not None else None

    def cancel(self) -> None:
        """Cancel the call's work; a no-op once it has finished."""
        if not self.done and not self.requested:
            self.requested = True
            self.task.cancel()

    def _start(self) -> None:
        if self.done:
            return
        loop = asyncio.get_running_loop()
        if not self._deferred and running_sync(self.task):
            self._deferred = True
            self._handle = loop.call_later(self._timing.sync_watch_delay_seconds, self._start)
            return
        self._watcher = loop.create_task(self._watch())

    async def _watch(self) -> None:
        assert self._receive is not None
        while True:
            message = asyncio.ensure_future(self._receive())
            try:
                while not message.done():
                    await asyncio.wait({message}, timeout=self._timing.keepalive_seconds)
                    if not message.done() and self._keepalive is not None and not self.done:
                        await self._keepalive()
            finally:
                message.cancel()
            if message.result()["type"] == "http.disconnect":
                self.cancel()
                return

    def finish(self) -> None:
        """Mark the work done: from here on nothing can cancel it. Call before any further await."""
        self.done = True
        if self._handle is not None:
            self._handle.cancel()
        if self._watcher is not None:
            self._watcher.cancel()

    def absorb(self) -> bool:
        """After a CancelledError: True when this guard caused it (and the task is un-cancelled)."""
        self.finish()
        if self.requested:
            self.task.uncancel()
            return True
        return False
