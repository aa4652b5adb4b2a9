"""Waiting for another task to reach a point: poll a condition with a bound, never sleep a guessed time."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


async def eventually(
    condition: Callable[[], T], what: str, *, timeout: float = 5.0, interval: float = 0.005
) -> T:
    """The first truthy value of ``condition()``, polled every ``interval`` seconds; AssertionError after
    ``timeout`` seconds (generous: a loaded 2-core machine is slow, but a missed condition must still fail)."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up after {timeout} s waiting for {what}")
        await asyncio.sleep(interval)
