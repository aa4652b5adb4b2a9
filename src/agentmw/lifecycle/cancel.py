"""Cancellation over the bus: a request reaches the process that runs the work, wherever it is.

Two shapes, one per kind of client:

- **Told** (tasks): one channel per face (``Spaces.cancel``); a message names the task (``{"task": id}``,
  with ``"moved"`` or ``"settled"`` for the other things a holder is told), the holder's
  :class:`~agentmw.lifecycle.bus.BusListener` acts on it, and the requester watches the task's record and
  log for the outcome. :func:`tell` sends one.
- **Asked and answered** (:class:`Canceller`, AG-UI runs): one channel per piece of work; the holder
  subscribes before it says it runs the work (:meth:`Canceller.watch`), cancels it on a request and answers
  with whether it did; the requester (:meth:`Canceller.request`) waits for that answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Awaitable, Callable
from typing import Any

from ..state import Json, State, Subscription
from .background import Background
from .bus import publish

__all__ = ["LEFT_FOR_ANOTHER", "Canceller", "Watch", "left_for_another", "tell"]

# The message of a cancel that stops this process's coroutine but not the work: a shutdown, or an execution
# answered in another replica. What the coroutine started elsewhere (a remote A2A task, an MCP peer's call)
# is left running for whoever carries the work on; every other cancel passes on to it.
LEFT_FOR_ANOTHER = "agentmw: left for another process"


def left_for_another(exc: BaseException) -> bool:
    """Whether a CancelledError is :data:`LEFT_FOR_ANOTHER` (not a caller's cancel)."""
    return isinstance(exc, asyncio.CancelledError) and LEFT_FOR_ANOTHER in exc.args


async def tell(state: State, channel: str, message: Json, *, label: str = "agentmw") -> bool:
    """Send a cancel (or a moved/settled notice) to whichever process holds the work; never raises."""
    return await publish(state, channel, message, label=label)


class Watch:
    """The holder's side of one piece of work's cancel channel; :meth:`close` when the work ended."""

    def __init__(self, task: asyncio.Task[None]) -> None:
        self.task = task

    def close(self) -> None:
        self.task.cancel()


class Canceller:
    """Cancel requests and their answers on ``<ask><key>`` and ``<answer><key>``."""

    def __init__(self, state: State, ask: str, answer: str, background: Background) -> None:
        self.state = state
        self.ask = ask
        self.answer = answer
        self.background = background

    async def watch(self, key: str, on_cancel: Callable[[], Awaitable[bool]]) -> Watch:
        """Subscribe (returns once subscribed) and, on each request, call ``on_cancel`` (cancel the work and
        wait for its end: True when it was cancelled, False when it was not running) and answer with it."""
        subscription = self.state.subscribe(self.ask + key)
        await subscription.__aenter__()
        return Watch(self.background.spawn(self._watch(key, subscription, on_cancel), f"cancel-watch-{key}"))

    async def _watch(
        self, key: str, subscription: Subscription, on_cancel: Callable[[], Awaitable[bool]]
    ) -> None:
        try:
            while (message := await subscription.get()) is not None:
                reply = message[1].get("reply")
                self.background.spawn(self._answer(key, on_cancel, reply), f"cancel-answer-{key}")
        finally:
            with contextlib.suppress(Exception):
                await asyncio.shield(subscription.aclose())

    async def _answer(self, key: str, on_cancel: Callable[[], Awaitable[bool]], reply: Any) -> None:
        cancelled = await on_cancel()
        if isinstance(reply, str):
            await self.state.publish(self.answer + key, {"cancelled": cancelled, "reply": reply})

    async def request(self, key: str, timeout: float) -> bool | None:
        """Ask the holder of ``key`` to cancel it: True: cancelled; False: it was not running; None: nobody
        answered within ``timeout`` seconds."""
        reply = os.urandom(8).hex()
        loop = asyncio.get_running_loop()
        async with self.state.subscribe(self.answer + key) as answers:
            await self.state.publish(self.ask + key, {"reply": reply})
            deadline = loop.time() + timeout
            while (left := deadline - loop.time()) > 0:
                message = await answers.get(left)
                if message is None:
                    return None
                body = message[1]
                if body.get("reply") == reply:
                    return bool(body.get("cancelled"))
        return None
