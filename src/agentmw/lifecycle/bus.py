"""The bus between replicas: one listener per channel that keeps listening, and publishes that never raise.

A message is a JSON object; a listener skips its own replica's (``"r"``, when it is given one) and hands each
other to ``on_message`` (a plain function or a coroutine function), logging a message that failed and going
on. A listener whose subscription failed subscribes again after ``restart_seconds`` (None: it stops, and
the client starts another when it next needs one).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Callable
from typing import Any

from ..state import Json, State

__all__ = ["BusListener", "publish"]

logger = logging.getLogger("agentmw")


async def publish(state: State, channel: str, message: Json, *, label: str = "agentmw") -> bool:
    """Publish ``message``; a failure is logged, not raised (the bus is at most once anyway)."""
    try:
        await state.publish(channel, message)
    except Exception:
        logger.warning("%s: could not publish on %s", label, channel, exc_info=True)
        return False
    return True


class BusListener:
    """Listens on ``channel`` and hands each message to ``on_message``.

    :meth:`run` is the listening loop, given a future it completes once it listens (so a client writes that
    it holds something only once the cancels for it can reach it)."""

    def __init__(
        self,
        state: State,
        channel: str,
        on_message: Callable[[dict[str, Any]], Any],
        *,
        label: str,
        replica: str | None = None,
        max_queue: int = 1000,
        restart_seconds: float | None = 0.5,
    ) -> None:
        self.state = state
        self.channel = channel
        self.on_message = on_message
        self.label = label
        self.replica = replica
        self.max_queue = max_queue
        self.restart_seconds = restart_seconds
        self.closed = False

    async def run(self, started: asyncio.Future[None]) -> None:
        try:
            while not self.closed:
                try:
                    async with self.state.subscribe(self.channel, max_queue=self.max_queue) as sub:
                        if not started.done():
                            started.set_result(None)
                        async for _, message in sub:
                            await self._handle(message)
                except asyncio.CancelledError:
                    raise
                except Exception:
                    logger.exception("%s listener on %s failed", self.label, self.channel)
                    if self.restart_seconds is None:
                        return
                    await asyncio.sleep(self.restart_seconds)
        finally:
            if not started.done():
                started.set_result(None)

    async def _handle(self, message: Any) -> None:
        if not isinstance(message, dict):
            return
        if self.replica is not None and message.get("r") == self.replica:
            return
        try:
            done = self.on_message(message)
            if inspect.isawaitable(done):
                await done
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.exception("%s: a message on %s failed", self.label, self.channel)
