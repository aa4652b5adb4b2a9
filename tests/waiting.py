"""Waiting for another task, thread or process to reach a point: poll a condition with a bound, never sleep a
guessed time.

- ``eventually(condition, what)``: the first truthy value of ``condition()`` (a plain or an async callable),
  as soon as it comes; an AssertionError naming ``what`` after ``timeout`` seconds (``what`` may be a callable,
  asked only then, to show the state the wait gave up in).
- ``wait_until(condition, what)``: the same for code that is not async (a test driving a thread or a process).
- ``stays(condition, what, seconds=...)``: the one wait that must take time, a check that something does NOT
  happen (a duplicate, a second push, an early answer): polls ``condition()`` for ``seconds`` and fails at the
  first moment it is false, naming ``what``.
- ``exits(process, bound)``: seconds until a subprocess exited, or None when it still runs after ``bound``.

The bounds are generous (a loaded 2-core machine is slow), and cost nothing when the condition holds early.
"""

from __future__ import annotations

import asyncio
import inspect
import subprocess
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar, cast, overload

T = TypeVar("T")


What = str | Callable[[], str]  # a callable is asked at the failure, to name the state the wait gave up in


def _named(what: What) -> str:
    return what if isinstance(what, str) else what()


async def _value(condition: Callable[[], T | Awaitable[T]]) -> T:
    value = condition()
    if inspect.isawaitable(value):
        return await cast("Awaitable[T]", value)
    return value


@overload
async def eventually(
    condition: Callable[[], Awaitable[T]], what: What, *, timeout: float = 5.0, interval: float = 0.005
) -> T: ...


@overload
async def eventually(
    condition: Callable[[], T], what: What, *, timeout: float = 5.0, interval: float = 0.005
) -> T: ...


async def eventually(
    condition: Callable[[], T | Awaitable[T]], what: What, *, timeout: float = 5.0, interval: float = 0.005
) -> T:
    """The first truthy value of ``condition()``, polled every ``interval`` seconds; AssertionError after
    ``timeout`` seconds (generous: a loaded 2-core machine is slow, but a missed condition must still fail).
    ``condition`` may be async (a store read, an HTTP request): each poll awaits it."""
    deadline = time.monotonic() + timeout
    while True:
        value = await _value(condition)
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up after {timeout} s waiting for {_named(what)}")
        await asyncio.sleep(interval)


def wait_until(condition: Callable[[], T], what: What, *, timeout: float = 10.0, interval: float = 0.01) -> T:
    """``eventually`` for code outside an event loop (a thread, a subprocess): blocks the caller."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up after {timeout} s waiting for {_named(what)}")
        time.sleep(interval)


async def stays(
    condition: Callable[[], object | Awaitable[object]], what: What, *, seconds: float, interval: float = 0.01
) -> None:
    """Check that ``condition()`` holds for ``seconds`` (something that must not happen does not happen in that
    time); AssertionError naming ``what`` at the first poll where it does not hold."""
    deadline = time.monotonic() + seconds
    while True:
        if not await _value(condition):
            raise AssertionError(f"not so: {_named(what)}")
        if time.monotonic() > deadline:
            return
        await asyncio.sleep(interval)


async def exits(process: subprocess.Popen[bytes] | subprocess.Popen[str], bound: float) -> float | None:
    """Seconds until ``process`` exited, or None if it is still running after ``bound`` seconds."""
    start = time.monotonic()
    while process.poll() is None:
        if time.monotonic() - start > bound:
            return None
        await asyncio.sleep(0.01)
    return time.monotonic() - start
