"""Background work a lifecycle client starts: held until it ends, cancelled together at the close."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

__all__ = ["Background"]


class Background:
    """A set of background tasks, each held (so it is not collected) until it ends."""

    __slots__ = ("tasks",)

    def __init__(self) -> None:
        self.tasks: set[asyncio.Task[Any]] = set()

    def spawn(self, coroutine: Coroutine[Any, Any, Any], name: str) -> asyncio.Task[Any]:
        """Run ``coroutine`` on the running loop, held until it ends."""
        task = asyncio.get_running_loop().create_task(coroutine, name=name)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return task

    async def close(self, *also: asyncio.Task[Any] | None) -> None:
        """Cancel every held task (and ``also``), and wait until they ended."""
        tasks = list(self.tasks) + [task for task in also if task is not None]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
