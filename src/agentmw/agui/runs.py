"""AG-UI threads and runs over the core.

A *thread* holds the shared state (with a version the server arbitrates), the messages, and at most
one *execution*: the capability's coroutine, in its own asyncio task. A *run* is one HTTP exchange on
the thread: its events are numbered, kept in a bounded buffer for reconnects, and fanned out to
consumers with bounded queues. When the function asks something (``ctx.ask``, ``ctx.confirm``) the run
ends with an ``interrupt`` outcome while the execution stays parked in memory; a new run with
``resume`` hands it the answers and carries its events from there.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

from .._bounded import BoundedTable
from ..context import Ask, InputRequest, answer_from
from ..errors import Permanent
from ..events import ArtifactUpdate, CoreEvent, Progress, StateChanged, TextDelta
from .sequence import Sequencer

if TYPE_CHECKING:
    from ..agent import Agent

__all__ = ["Thread", "Run", "Execution", "Consumer", "AguiChannel", "PendingInterrupt", "thread_table", "run_table",
           "thread_busy"]

logger = logging.getLogger("agentmw")


class Consumer:
    """One reader of a run's frames, with a bounded backlog: one that falls too far behind is cut off."""

    __slots__ = ("frames", "ready", "limit", "overflowed", "closed", "owns_run")

    def __init__(self, limit: int, *, owns_run: bool = False) -> None:
        self.frames: collections.deque[bytes] = collections.deque()
        self.ready = asyncio.Event()
        self.limit = limit
        self.overflowed = False
        self.closed = False
        self.owns_run = owns_run  # the request that started the run: losing it cancels an attached run

    def push(self, frames: list[bytes]) -> bool:
        if self.closed:
            return False
        if len(self.frames) + len(frames) > self.limit:
            self.overflowed = True
            self.close()
            return False
        self.frames.extend(frames)
        self.ready.set()
        return True

    def close(self) -> None:
        self.closed = True
        self.ready.set()

    @property
    def pressed(self) -> bool:
        return len(self.frames) * 2 > self.limit


@dataclass(eq=False)
class Run:
    id: str
    thread: Thread
    sequencer: Sequencer
    buffer: collections.deque[tuple[int, bytes]]
    detached: bool = False
    consumers: set[Consumer] = field(default_factory=set)
    execution: Execution | None = None

    @property
    def ended(self) -> bool:
        return self.sequencer.ended

    def publish(self) -> bool:
        """Send what the sequencer made to the buffer and the consumers; True when one is falling behind."""
        made = self.sequencer.take()
        if not made:
            return False
        self.buffer.extend(made)
        frames = [frame for _, frame in made]
        pressed = False
        for consumer in list(self.consumers):
            if not consumer.push(frames):
                self.consumers.discard(consumer)
                if consumer.overflowed and consumer.owns_run and not self.detached:
                    self.cancel()  # now, not when its stuck writer returns
            elif consumer.pressed:
                pressed = True
        if self.ended:
            for consumer in self.consumers:
                consumer.close()
        return pressed

    def cancel(self) -> bool:
        """Cancel the execution this run carries; False when there is none running."""
        execution = self.execution
        if self.ended or execution is None or execution.task is None or execution.task.done():
            return False
        execution.task.cancel()
        return True

    def replay(self, after: int) -> tuple[list[bytes], bool]:
        """Buffered frames after ``after``, and whether some were already dropped from the buffer."""
        first = self.buffer[0][0] if self.buffer else self.sequencer.seq + 1
        return [frame for seq, frame in self.buffer if seq > after], after + 1 < first


@dataclass(eq=False)
class PendingInterrupt:
    id: str
    key: str
    request: Ask | None
    expires: datetime
    kind: str = "ask"  # "ask": a parked ctx.ask; "arguments": the call has not started yet


@dataclass(eq=False)
class Execution:
    capability: Any
    thread: Thread
    run: Run
    task: asyncio.Task[None] | None = None
    answer: asyncio.Future[dict[str, Any]] | None = None
    streamed_text: bool = False
    idempotency_key: str | None = None


@dataclass(eq=False)
class Thread:
    id: str
    owner: str
    skill: str
    state: dict[str, Any] = field(default_factory=dict)
    version: int = 0
    messages: list[dict[str, Any]] = field(default_factory=list)
    execution: Execution | None = None
    interrupts: dict[str, PendingInterrupt] = field(default_factory=dict)
    arguments: dict[str, Any] = field(default_factory=dict)
    idempotency_key: str | None = None
    approval_id: str | None = None
    forwarded: dict[str, Any] = field(default_factory=dict)  # the run's forwardedProps (agui/messages.py)


def interrupt_id() -> str:
    return f"int-{os.urandom(8).hex()}"


def expiry(seconds: float) -> datetime:
    return datetime.now(timezone.utc) + timedelta(seconds=seconds)


def iso(moment: datetime) -> str:
    return moment.isoformat(timespec="seconds").replace("+00:00", "Z")


def interrupt_of(pending: PendingInterrupt, message: str, schema: Mapping[str, Any], reason: str) -> dict[str, Any]:
    return {"id": pending.id, "reason": reason, "message": message, "responseSchema": dict(schema),
            "expiresAt": iso(pending.expires)}


class AguiChannel:
    """The core channel of one execution: events go to whichever run currently carries it."""

    __slots__ = ("execution", "agent")

    def __init__(self, agent: Agent, execution: Execution) -> None:
        self.agent = agent
        self.execution = execution

    def supports(self, capability: str) -> bool:
        return capability == "elicitation"

    async def progress(self, progress: float, total: float | None, message: str | None) -> None:
        await self.emit(Progress(progress, total, message))

    async def log(self, level: str, data: Any, logger_name: str | None) -> None:
        return None  # AG-UI has no log events; progress and steps are what a UI shows

    async def emit(self, event: CoreEvent) -> None:
        execution = self.execution
        run = execution.run
        if run.ended:
            return
        if isinstance(event, StateChanged):
            execution.thread.version += 1
        elif isinstance(event, TextDelta) or (isinstance(event, ArtifactUpdate) and event.artifact.text):
            execution.streamed_text = True
        run.sequencer.apply(event)
        task = asyncio.current_task()
        if run.publish() or (task is not None and task.cancelling()):
            # A consumer is half full (let it drain), or this run was just canceled: a function that never
            # awaits anything else would otherwise neither let readers catch up nor see its cancellation.
            await asyncio.sleep(0)

    async def gather(self, requests: Mapping[str, InputRequest]) -> dict[str, Any]:
        execution = self.execution
        thread = execution.thread
        run = execution.run
        interrupts = []
        for key, request in requests.items():
            assert isinstance(request, Ask)
            pending = PendingInterrupt(interrupt_id(), key, request, expiry(self.agent.park_timeout_seconds))
            thread.interrupts[pending.id] = pending
            reason = "confirmation" if request.confirmation else "input_required"
            interrupts.append(interrupt_of(pending, request.message, request.schema, reason))
        loop = asyncio.get_running_loop()
        execution.answer = loop.create_future()
        run.sequencer.interrupt(interrupts, thread.state)
        run.publish()
        try:
            answers = await asyncio.wait_for(execution.answer, self.agent.park_timeout_seconds)
        except TimeoutError as exc:
            thread.interrupts.clear()
            raise Permanent("No answer arrived before the interrupt expired.") from exc
        finally:
            execution.answer = None
        return answers


def answers_for(thread: Thread, resume: list[dict[str, Any]]) -> dict[str, Any]:
    """The parked questions' answers from a ``resume`` list, keyed as the function asked them."""
    answers: dict[str, Any] = {}
    for entry in resume:
        pending = thread.interrupts[entry["interruptId"]]
        assert pending.request is not None  # "arguments" interrupts never reach a parked execution
        answers[pending.key] = answer_from(entry.get("payload"), pending.request)
    return answers


# --- bounded tables (docs/limits.md) ------------------------------------------------------------------


def thread_busy(thread: Thread) -> bool:
    """A thread the tables must keep: its execution runs or is parked on a question (a parked one ends by
    itself within ``park_timeout_seconds``). A thread that only waits for missing arguments holds no
    execution, so it is not kept: an unbounded number of those would be free to make."""
    execution = thread.execution
    return execution is not None and execution.task is not None and not execution.task.done()


def thread_table(agent: Agent) -> BoundedTable[str, Thread]:
    """Threads by id: at most ``agui_max_threads`` idle ones, each forgotten ``agui_thread_idle_seconds``
    after its last run; a busy thread (:func:`thread_busy`) is always kept."""
    return BoundedTable(agent.agui_max_threads, agent.agui_thread_idle_seconds, pinned=thread_busy, touch=True)


def run_table(agent: Agent) -> BoundedTable[str, Run]:
    """Runs by id, for reconnects and cancels: at most ``agui_max_runs`` ended ones, each kept
    ``agui_run_retention_seconds`` after it started; a run still in progress is always kept."""
    return BoundedTable(agent.agui_max_runs, agent.agui_run_retention_seconds, pinned=lambda run: not run.ended)
