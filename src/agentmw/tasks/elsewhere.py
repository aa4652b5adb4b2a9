"""What a process does about the tasks another process holds: it follows them from their log, cancels or
fails them over the bus, lets go of those another process resumed or took over, and yields when told to
(docs/durability.md; docs/scale-out.md). The registry (``registry.py``) keeps the records and handles."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from ..journal import JOURNAL_NS
from ..lifecycle import TaskRecord, TaskState
from ..state import Json
from .events import is_final, status_event
from .live import LiveTask, ResumedElsewhere, release_waiters

if TYPE_CHECKING:
    from .registry import TaskRegistry

__all__ = ["Elsewhere"]

logger = logging.getLogger("agentmw")


class Elsewhere:
    """One face's dealings with the tasks other processes hold."""

    def __init__(self, registry: TaskRegistry) -> None:
        self.registry = registry

    def on_bus(self, message: dict[str, Any]) -> None:
        """A message on the face's cancel channel, for a task this process holds."""
        live = self.registry._held(str(message.get("task")))
        if live is None or live.superseded:
            return
        if message.get("moved"):  # resumed elsewhere: the coroutine parked here yields
            self.registry.background.spawn(self._yield_if_moved(live), f"{self.registry._name}-yield")
        elif message.get("settled"):  # settled elsewhere already: that record stands
            self.registry.background.spawn(self.registry._adopt(live), f"{self.registry._name}-adopt")
        elif live.runner is not None and not live.runner.done():
            live.runner.cancel()

    async def _tell(self, message: Json) -> None:
        with contextlib.suppress(Exception):
            await self.registry.state.publish(self.registry.spaces.cancel, message)

    def follow(self, record: TaskRecord) -> AsyncIterator[dict[str, Any]]:
        """The task's events after ``record`` (from its log), until it is terminal. Ends too when the task's
        holder is gone (the task is failed, and that is the last event)."""

        async def when_quiet() -> list[dict[str, Any]] | None:
            loaded = await self.registry.load(record.id)
            if loaded is None:
                return []
            return [status_event(loaded[0])] if loaded[0].terminal else None

        return self.registry.log.follow(record.id, record.log_id, is_final=is_final, when_quiet=when_quiet)

    async def cancel(self, record: TaskRecord, version: int) -> TaskRecord | None:
        """Cancel a task this process does not hold. None: the record changed meanwhile (read it again)."""
        if record.replica is None or await self.registry._lost(record):
            settled = await self.registry.settle_stored(
                record, version, TaskState.CANCELED, "The task was canceled."
            )
            return settled[0] if settled else None
        await self.registry.state.publish(self.registry.spaces.cancel, {"task": record.id})
        ended: list[TaskRecord | None] = []

        async def settled_meanwhile() -> bool:
            loaded = await self.registry.load(record.id)
            if loaded is None or loaded[0].terminal:
                ended.append(loaded[0] if loaded else record)
                return True
            return False

        final = await self.registry.log.wait_final(
            record.id,
            record.log_id,
            is_final=is_final,
            timeout=self.registry.timing.cancel_wait_seconds,
            when_quiet=settled_meanwhile,
        )
        if final is not None:
            return await self._settled_record(record, final)
        if ended:
            return ended[0]
        loaded = await self.registry.load(record.id)
        return loaded[0] if loaded else record

    async def _settled_record(self, record: TaskRecord, final: dict[str, Any]) -> TaskRecord:
        """The record as of its final event: its holder appends the event, then writes the record, so the
        record may lag a moment behind; without it after a short wait, the event's status is applied."""
        for _ in range(20):
            loaded = await self.registry.load(record.id)
            if loaded is not None and loaded[0].terminal:
                return loaded[0]
            await asyncio.sleep(0.01)
        status = final["statusUpdate"]["status"]
        record.state = status["state"]
        record.status_timestamp = status.get("timestamp", record.status_timestamp)
        record.status_message = status.get("message")
        return record

    async def fail(self, record: TaskRecord, version: int, text: str) -> bool:
        """Fail a task whose coroutine another process holds, and tell that process to stop it."""
        holder = record.replica
        settled = await self.registry.settle_stored(record, version, TaskState.FAILED, text)
        if settled is not None and holder not in (None, self.registry.replica):
            await self._tell({"task": record.id, "settled": True})
        return settled is not None

    async def moved(self, live: LiveTask, holder: str | None) -> None:
        """This process resumed a task another process had parked: that process's coroutine yields (it finds
        the journal moved on and stops with ``taken_over``, writing nothing)."""
        if holder not in (None, self.registry.replica):
            await self._tell({"task": live.record.id, "moved": True})

    async def _yield_if_moved(self, live: LiveTask) -> None:
        """The coroutine parked here stops once the journal shows the answer recorded elsewhere (the
        resuming replica says so before it writes the answer, so this looks until it sees it, or gives up)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.registry.timing.cancel_wait_seconds
        while live.answer is not None and not live.answer.done() and loop.time() < deadline:
            found = await self.registry.journal.get(JOURNAL_NS, live.record.id)
            if found is None or found.value.get("status") != "parked":
                if live.answer is not None and not live.answer.done():
                    live.answer.set_exception(ResumedElsewhere(live.record.id))
                return
            await asyncio.sleep(0.02)

    def let_go(self, live: LiveTask) -> None:
        """This process stops holding the task, which goes on in another one (it resumed or took it over):
        nothing more is written from here; a blocking send here answers with the task as it is, and the
        followers here go on from the task's log."""
        live.superseded = True
        record = live.record
        if self.registry.live.get(record.id) is live:
            self.registry.live.pop(record.id, None)
        release_waiters(live)
        for queue in live.subscribers.take():
            self.registry.background.spawn(
                self._hand_over(record, queue), f"{self.registry._name}-follow-{record.id}"
            )

    async def _hand_over(self, record: TaskRecord, queue: asyncio.Queue[dict[str, Any] | None]) -> None:
        try:
            async for event in self.follow(record):
                queue.put_nowait(event)
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.exception("following %s task %s from its log failed", self.registry.label, record.id)
        finally:
            queue.put_nowait(None)
