"""Run a plain ``def`` function on a worker thread, with as little as possible between loop and thread.

A sync capability must not block the event loop, so every call hops to a thread. ``anyio.to_thread`` pays for
a cancel scope, a capacity limiter and a per-call worker hand-off on each hop; here a call is one queue put on
the loop's side and one ``call_soon_threadsafe`` on the worker's, which is what a sync tool's throughput
depends on (docs/performance.md).

- **Bounded.** At most :data:`MAX_WORKERS` threads in the process (anyio's default, so the bound is what it
  was); past it, calls wait in the queue, first come first served, for a worker to finish. Workers are
  started when a call finds none idle and end after :data:`IDLE_SECONDS` without work. They are daemon
  threads: a function that never returns cannot hold up the interpreter's exit.
- **Context.** The function runs in a copy of the caller's ``contextvars`` context, as with anyio.
- **Cancellation.** A thread cannot be interrupted. A call cancelled (or past its deadline) before a worker
  took it never starts. One cancelled while its function runs is answered at once (the cancellation
  propagates as usual); the function runs on to its end on its worker, which stays busy (and counted
  against the bound) until then, and whatever it returns or raises is discarded: no answer, no
  idempotency record, no journal entry is made from it (docs/limits.md).
- **No watcher while it runs.** :func:`running_sync` tells the MCP face's disconnect watcher that the task is
  waiting on a thread, so a fast sync call never starts one (``mcp/_cancel.py``).
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import threading
from collections.abc import Callable
from queue import Empty, SimpleQueue
from typing import Any

__all__ = ["IDLE_SECONDS", "MAX_WORKERS", "run_step", "run_sync", "running_sync"]

MAX_WORKERS = 40
IDLE_SECONDS = 10.0

logger = logging.getLogger("agentmw")

_WorkItem = tuple[
    asyncio.AbstractEventLoop, "asyncio.Future[Any]", contextvars.Context, Callable[..., Any], dict[str, Any]
]
_running: set[asyncio.Task[Any]] = set()


def running_sync(task: asyncio.Task[Any]) -> bool:
    """Whether ``task`` is waiting, right now, for a sync function on a worker thread."""
    return task in _running


class _Workers:
    """The process's worker threads and their one queue.

    The counts change only under ``_lock``, and every ``put`` happens under it. Each item put is either
    *reserved*, for an idle worker or for the worker started for it (which take one in ``get``, without the
    lock), or *backlog*, put when every worker was busy and the bound was reached (a worker that finishes
    takes one before it goes idle). So the queue holds the reserved items not yet taken plus ``_backlog``,
    every worker blocked in ``get`` is owed an item or counted in ``_idle``, and no item waits while a
    worker is idle.
    """

    def __init__(self, max_workers: int, idle_seconds: float) -> None:
        self.max_workers = max_workers
        self.idle_seconds = idle_seconds
        self._queue: SimpleQueue[_WorkItem] = SimpleQueue()
        self._lock = threading.Lock()
        self._threads = 0
        self._idle = 0  # blocked in get() with nothing reserved for them
        self._backlog = 0

    async def run(self, fn: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
        """``fn(**kwargs)`` on a worker thread, in a copy of this context; the caller's task waits for it."""
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self.submit((loop, future, contextvars.copy_context(), fn, kwargs))
        task = asyncio.current_task()
        assert task is not None
        _running.add(task)
        try:
            return await future
        finally:
            _running.discard(task)

    def submit(self, item: _WorkItem) -> None:
        with self._lock:
            self._queue.put(item)
            if self._idle:
                self._idle -= 1
                return
            if self._threads >= self.max_workers:
                self._backlog += 1
                return
            self._threads += 1
        threading.Thread(target=self._work, name="agentmw sync worker", daemon=True).start()

    def _work(self) -> None:
        item = self._wait()  # a worker starts as an idle one that an item was reserved for
        while item is not None:
            self._run(*item)
            del item  # hold no reference to the call while idle
            item = self._next()

    def _next(self) -> _WorkItem | None:
        """The next item for this worker, or None when it has been idle long enough to end."""
        with self._lock:
            if self._backlog:  # every worker was busy when it came: the first to finish takes it
                self._backlog -= 1
                return self._queue.get_nowait()
            self._idle += 1
        return self._wait()

    def _wait(self) -> _WorkItem | None:
        queue = self._queue
        try:
            return queue.get(timeout=self.idle_seconds)
        except Empty:
            pass
        with self._lock:
            if queue.qsize() > self._backlog:  # one was reserved for an idle worker just now: take it
                try:
                    return queue.get_nowait()
                except Empty:  # another idle worker took it first
                    pass
            self._idle -= 1
            self._threads -= 1
            return None

    @staticmethod
    def _run(
        loop: asyncio.AbstractEventLoop,
        future: asyncio.Future[Any],
        context: contextvars.Context,
        fn: Callable[..., Any],
        kwargs: dict[str, Any],
    ) -> None:
        if future.cancelled():  # cancelled while it waited for a worker: it never starts
            return
        try:
            value, error = context.run(fn, **kwargs), None
        except BaseException as exc:  # noqa: BLE001 (handed to the caller, whatever it is)
            value, error = None, exc
        try:
            loop.call_soon_threadsafe(_settle, future, value, error)
        except RuntimeError:  # the loop is closed: nobody is waiting any more
            pass


def _settle(future: asyncio.Future[Any], value: Any, error: BaseException | None) -> None:
    if future.cancelled():  # its call was cancelled while it ran: the result is discarded
        if error is not None:
            logger.debug("a sync function raised after its call was cancelled", exc_info=error)
        return
    if error is None:
        future.set_result(value)
    elif isinstance(error, StopIteration) or not isinstance(error, Exception):
        # A future cannot carry StopIteration; and SystemExit or KeyboardInterrupt (sys.exit() in the function,
        # or in a library it calls, such as argparse) re-raised in the caller's task would stop the whole event
        # loop, so the server. Raised on a worker thread they are the function's failure, nothing more.
        wrapped = RuntimeError(f"the function raised {error!r}")
        wrapped.__cause__ = error
        future.set_exception(wrapped)
    else:
        future.set_exception(error)


_workers = _Workers(MAX_WORKERS, IDLE_SECONDS)
run_sync = _workers.run


async def run_step(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``fn(*args, **kwargs)`` for ``ctx.once``: awaited when it is a coroutine function, else on one of
    anyio's worker threads (a one-time step's own code, which may block); an awaitable it returns is awaited."""
    if asyncio.iscoroutinefunction(fn):
        return await fn(*args, **kwargs)
    from functools import partial

    import anyio.to_thread

    value = await anyio.to_thread.run_sync(partial(fn, *args, **kwargs))
    if hasattr(value, "__await__"):
        value = await value
    return value
