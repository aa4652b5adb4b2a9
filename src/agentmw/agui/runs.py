"""AG-UI threads, runs and interrupts: their whole lifecycle, over the core and the shared state.

A *thread* holds the shared state (with a version the server arbitrates), the messages, and at most one
*execution*: the capability's coroutine, in its own asyncio task. A *run* is one HTTP exchange on the thread:
its events are numbered, kept in a bounded buffer for reconnects, and fanned out to consumers with bounded
queues. When the function asks something (``ctx.ask``, ``ctx.confirm``) the run ends with an ``interrupt``
outcome while the execution stays parked in memory; a new run with ``resume`` hands it the answers and
carries its events from there. The thread and its record are ``threads.py``; which case a resume is, and
why, is the table in ``resume.py``.

The durable mechanisms are the lifecycle engine's (``agentmw.lifecycle``): the thread record's
compare-and-set (``Records.save``), the run's log written behind the stream and followed (``LogWriter``,
``EventLog.follow``), cancel asked and answered on the bus (``Canceller``), the orphan sweep (``Sweeper``),
background work and the namespaces' bounds. This module says what they mean for AG-UI.

What other replicas must see lives in the agent's state (``agentmw.state``, ``docs/agui.md``):

- ``agui.threads``: one record per thread (owner, skill, state and its version, messages, open interrupts,
  the run in progress). A run starts with one compare-and-set on it, so the state arbitration, the
  "one run at a time" rule and a resume are atomic across replicas; the run's end writes it again before its
  terminal event reaches anyone.
- ``agui.runs``: one expiring key per run id, set if absent: a duplicate run id is refused on every replica,
  and any replica knows the run's owner and thread.
- ``agui.events``: one log per run, the sequencer's framed events in batches (``{"first": seq, "frames":
  [...], "end": bool}``), written behind the stream by one writer task (``LogWriter``); any replica replays and tails it.
- the bus: ``agui.cancel.<run id>`` asks the replica running it to cancel, ``agui.cancelled.<run id>`` answers.
- ``journal``: each execution runs with a journal (``agentmw.journal``, id ``agui:<random>:<thread id>``, named
  in the thread record), written only once the function takes a journaled step (a question, ``ctx.call``,
  ``ctx.once``). A resume that reaches a replica without the parked coroutine (another one, or this one after a
  restart) replays the execution there with the answers; a run whose replica died is found by a sweep (made by
  AG-UI requests, at most every ``sweep_seconds``) once its lease expired, and taken over: its events go on
  after those its log holds.

The stream that started a run reads its frames from memory: the state is never on the path of a text delta.
"""

from __future__ import annotations

import asyncio
import collections
import copy
import functools
import json
import logging
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from pydantic import ValidationError

from .._bounded import BoundedTable
from .._transport import store_fault
from ..context import Ask, Context, InputRequest, Services, answer_from
from ..errors import Permanent
from ..events import ArtifactUpdate, CoreEvent, Progress, StateChanged, TextDelta
from ..journal import (
    CAPABILITY_GONE,
    DEFAULT_LEASE_SECONDS,
    JOURNAL_FULL,
    JOURNAL_NS,
    RECOVERY_EXHAUSTED,
    Journal,
    Orphan,
    orphaned,
)
from ..journal import cancel as cancel_execution
from ..journal import resume as resume_execution
from ..lifecycle import Background, Canceller, EventLog, LogWriter, Records, Sweeper, Watch, limit
from ..messages import is_answer
from ..outcomes import Code, Outcome, Status
from ..runtime import describe_validation_error, invoke
from ..settings import Limits, Timing
from ..state import Conflict, Json, State, Versioned
from ..state.base import MAX_KEY_LENGTH
from .messages import messages_from_run
from .resume import resume_case, resume_facts
from .sequence import Sequencer
from .settings import AguiSettings
from .threads import PendingInterrupt, Thread, thread_record

if TYPE_CHECKING:
    from starlette.requests import HTTPConnection

    from ..capability import Capability
    from ..observability.telemetry import Telemetry
    from ..safety import Budgets

__all__ = [
    "AguiChannel",
    "Consumer",
    "Execution",
    "PendingInterrupt",
    "Refused",
    "Run",
    "Runs",
    "RunsHost",
    "Thread",
    "run_table",
    "thread_busy",
    "thread_table",
]

logger = logging.getLogger("agentmw")

THREADS = "agui.threads"
RUNS = "agui.runs"
EVENTS = "agui.events"
CANCEL = "agui.cancel."  # + run id: cancel it, wherever it runs
CANCELLED = "agui.cancelled."  # + run id: the answer of the replica that runs it
CANCEL_WAIT = 10.0  # seconds a cancel requested on another replica waits for its answer
TAIL_WAIT = 5.0  # seconds a remote reconnect waits for new events before it checks the run still exists
SAVE_ATTEMPTS = 20
FINAL_ACK_WAIT_SECONDS = 5.0  # how long the live RUN_FINISHED waits for the run's end to be logged
FINAL_LOG_SECONDS = 60.0  # how long a run's end is retried on a store that refuses it (Runs._finish)
CLOSE_GRACE_SECONDS = 5.0  # what Runs.close() waits for log writers and saves before cancelling them
EXECUTION = "agui:"  # + random + ":" + thread id: an execution's journal id (agentmw.journal)
SWEEP_SECONDS = 10.0  # at most this often, a request looks for runs whose replica died (Runs.sweep)
RESUME_WAIT = 5.0  # seconds a resume waits for an execution's lease held elsewhere
NOT_REPLAYED = (
    Code.EXECUTION_BUSY,
    Code.UNKNOWN_EXECUTION,
    Code.UNKNOWN_CAPABILITY,
    CAPABILITY_GONE,
    RECOVERY_EXHAUSTED,
)  # the state is as before
GIVEN_UP = (RECOVERY_EXHAUSTED, CAPABILITY_GONE, JOURNAL_FULL)  # RUN_ERROR says which, in its code
MOVED = (Code.TAKEN_OVER, Code.EXECUTION_BUSY)  # an execution that goes on (or ends) on another replica


Frames = list[tuple[int, bytes]]
"""Encoded events by sequence number, as a run's sequencer makes them."""


class RunsHost(Services, Protocol):
    """What the runs read of the agent that builds them (``agentmw.Agent`` is one): the core's services, the
    skills, the shared state, telemetry, the byte budgets and the AG-UI bounds (docs/limits.md)."""

    @property
    def state(self) -> State: ...
    @property
    def skills(self) -> Mapping[str, Capability]: ...
    @property
    def telemetry(self) -> Telemetry | None: ...
    @property
    def budgets(self) -> Budgets: ...
    @property
    def agui(self) -> AguiSettings: ...
    @property
    def limits(self) -> Limits: ...
    @property
    def timing(self) -> Timing: ...


class Refused(Exception):
    """A request answered with an HTTP error before any stream opened."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


class Consumer:
    """One reader of a run's frames, with a bounded backlog: one that falls too far behind is cut off."""

    __slots__ = ("closed", "frames", "limit", "overflowed", "owns_run", "ready")

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
    runs: Runs | None = None  # the lifecycle that keeps this run's log and thread record
    finished: asyncio.Event = field(default_factory=asyncio.Event)  # the end is saved and delivered
    _writer: LogWriter | None = None  # writes its frames to the shared log, behind the stream
    _watcher: Watch | None = None  # cancel requests from other replicas
    _finishing: bool = False
    input_bytes: int = (
        0  # its RUN_STARTED frame, which carries the run's input (the sequencer keeps its messages)
    )
    buffered: int = 0  # bytes of the frames in ``buffer``

    def __post_init__(self) -> None:
        self.buffered = sum(len(frame) for _, frame in self.buffer)

    @property
    def ended(self) -> bool:
        return self.sequencer.ended

    @property
    def held(self) -> int:
        """The bytes the run holds, as measured by the frames it encoded (the run table's budget)."""
        return self.input_bytes + self.buffered

    def _keep(self, made: list[tuple[int, bytes]]) -> None:
        """Buffer frames for reconnects: at most ``agui_buffer_events`` of them and ``agui_run_buffer_bytes``
        of bytes (the oldest go first; a reconnect from before them is told some were dropped)."""
        buffer = self.buffer
        full = buffer.maxlen
        for item in made:
            if full is not None and len(buffer) == full:
                self.buffered -= len(buffer[0][1])
            buffer.append(item)
            self.buffered += len(item[1])
        runs = self.runs
        if runs is not None:
            limit = runs.agent.budgets.agui_run_buffer_bytes
            while self.buffered > limit and len(buffer) > 1:
                self.buffered -= len(buffer.popleft()[1])
            runs.runs.resize(self.id)

    def publish(self) -> bool:
        """Send what the sequencer made to the buffer, the log and the consumers; True when one is falling
        behind. The terminal frames reach the consumers only once the thread record and the log hold the
        end (``Runs.finish``), so a client that goes on at once, on any replica, finds the thread as it is."""
        made = self.sequencer.take()
        if not made:
            return False
        self._keep(made)
        frames = [frame for _, frame in made]
        runs = self.runs
        if runs is not None:
            if self.ended and not self._finishing:
                self._finishing = True
                runs.finish(self, made)
                return False
            runs.log(self, made)
        return self.deliver(frames)

    def deliver(self, frames: list[bytes]) -> bool:
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
            self.finished.set()
        return pressed

    def cancel(self) -> bool:
        """Cancel the execution this run carries; False when there is none running."""
        execution = self.execution
        if self.ended or execution is None or execution.task is None or execution.task.done():
            return False
        execution.abort = True  # for good: its journal records the cancel, so no replica resumes it
        execution.task.cancel()
        return True

    def replay(self, after: int) -> tuple[list[bytes], bool]:
        """Buffered frames after ``after``, and whether some were already dropped from the buffer."""
        first = self.buffer[0][0] if self.buffer else self.sequencer.seq + 1
        return [frame for seq, frame in self.buffer if seq > after], after + 1 < first


@dataclass(eq=False)
class Execution:
    capability: Any
    thread: Thread
    run: Run
    task: asyncio.Task[None] | None = None
    answer: asyncio.Future[dict[str, Any]] | None = None
    streamed_text: bool = False
    idempotency_key: str | None = None
    execution_id: str | None = None  # its journal's id (agentmw.journal), also in the thread record
    start_state: dict[str, Any] | None = None  # ctx.state as the execution began: what a replay starts from
    abort: bool = (
        False  # cancelled for good (a cancel request, an abandoned attached run, a cancelled resume)
    )
    journal: Journal | None = None


class AguiChannel:
    """The core channel of one execution: events go to whichever run currently carries it."""

    __slots__ = ("agent", "ctx", "execution")

    def __init__(self, agent: RunsHost, execution: Execution) -> None:
        self.agent = agent
        self.execution = execution
        self.ctx: Context | None = None

    def bind(self, ctx: Context) -> None:
        """The execution's own context (``journal.resume`` hands it over too): its progress is numbered with
        its other events, so a replay skips what was delivered (docs/durability.md)."""
        self.ctx = ctx

    def supports(self, capability: str) -> bool:
        return capability == "elicitation"

    async def progress(self, progress: float, total: float | None, message: str | None) -> None:
        event = Progress(progress, total, message)
        ctx = self.ctx
        # The function's own progress goes through its journal's numbering. A sub-call's (a tool's
        # ctx.progress, while a step of the function is in flight) does not: a replay returns a recorded
        # sub-call without running it, so counting its events would shift the numbering.
        recorder = ctx.recorder if ctx is not None else None
        if ctx is not None and ctx.watched and not (recorder is not None and recorder.in_step):
            await ctx.deliver(event)
            return
        await self.emit(event)

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
        timeout = self.agent.timing.park_timeout_seconds
        with self.agent.in_flight.parked(
            thread.bytes
        ):  # a parked execution holds no in-flight slot (docs/limits.md)
            interrupts = []
            for key, request in requests.items():
                assert isinstance(request, Ask)
                interrupts.append(
                    thread.open_interrupt(key, request, request.message, request.schema, timeout)
                )
            execution.answer = asyncio.get_running_loop().create_future()
            run.sequencer.interrupt(interrupts, thread.state)
            run.publish()
            try:
                answers = await asyncio.wait_for(execution.answer, timeout)
            except TimeoutError as exc:
                thread.interrupts.clear()
                raise Permanent("No answer arrived before the interrupt expired.") from exc
            finally:
                execution.answer = None
        return answers


def answers_for(interrupts: Mapping[str, PendingInterrupt], resume: list[dict[str, Any]]) -> dict[str, Any]:
    """The parked questions' answers from a ``resume`` list, keyed as the function asked them."""
    answers: dict[str, Any] = {}
    for entry in resume:
        pending = interrupts[entry["interruptId"]]
        assert pending.request is not None  # "arguments" interrupts never reach a parked execution
        answers[pending.key] = answer_from(entry.get("payload"), pending.request)
    return answers


# --- the resume decision: a case of resume.RESUME_CASES, then what it does ----------------------------------

Act = Callable[["HTTPConnection"], None]
"""What a run does once its decision is in the thread record (it makes the run's first events)."""


@dataclass(frozen=True, slots=True)
class _Resume:
    """What a resume case's handler works from: the open interrupts as they were, before they closed."""

    run: Run
    skill: Capability
    entries: list[dict[str, Any]]
    pending: dict[str, PendingInterrupt]
    execution: Execution | None
    journaled: str | None  # the execution's journal, when the interrupts are its questions


def _refusal(run: Run, message: str, code: str) -> Act:
    """A run refused after the thread was read: the thread's state as it is, then the error."""
    state = run.thread.state

    def refuse(connection: HTTPConnection) -> None:
        run.sequencer.state_snapshot(state)
        run.sequencer.error(message, code)

    return refuse


def _snapshot_then(run: Run, act: Act) -> Act:
    def both(connection: HTTPConnection) -> None:
        run.sequencer.state_snapshot(run.thread.state)
        act(connection)

    return both


# --- the lifecycle ---------------------------------------------------------------------------------------


class _Shared(NamedTuple):
    """What :class:`Runs` keeps in the shared state."""

    state: State
    records: Records  # the thread records (agui.threads), compare-and-set on their versions
    events: EventLog  # one log per run (agui.events): {"first": seq, "frames": [...], "end": bool} batches
    cancels: Canceller  # cancel requests (agui.cancel.<run>) and their answers (agui.cancelled.<run>)


class Runs:
    """Every thread and run of one agent's AG-UI face, in this process and in the shared state."""

    def __init__(self, agent: RunsHost) -> None:
        self.agent = agent
        self.replica = os.urandom(8).hex()  # this endpoint's name in records and on the bus
        self.threads = thread_table(agent)  # bounded in count and age (docs/limits.md)
        self.runs = run_table(agent)
        self.background = Background()  # work off the request path, kept referenced until done
        self.lease_seconds = DEFAULT_LEASE_SECONDS  # of a running execution's journal (agentmw.journal)
        self._sweeper = Sweeper(SWEEP_SECONDS, 0.0)  # the first request of the process sweeps
        self._shared: _Shared | None = None
        self._following = 0  # clients following, here, runs another replica carries (replay_log)
        self._timer: asyncio.Task[None] | None = None
        self._closing = False  # closed (close()): no more sweeps from this process

    @property
    def sweep_seconds(self) -> float:
        """At most this often, a request looks for runs whose replica died (:meth:`sweep`)."""
        return self._sweeper.every

    @sweep_seconds.setter
    def sweep_seconds(self, seconds: float) -> None:
        self._sweeper.every = seconds

    @property
    def shared(self) -> _Shared:
        """What the runs keep in the shared state (lifecycle), made on first use (the agent's store opens
        only when first needed), with the namespaces' bounds (docs/limits.md)."""
        shared = self._shared
        if shared is None:
            state, agent = self.agent.state, self.agent
            limit(
                state, [THREADS], max_count=agent.limits.max_threads, max_age=agent.timing.thread_idle_seconds
            )
            limit(state, [RUNS], max_count=agent.limits.max_runs, max_age=agent.timing.run_retention_seconds)
            limit(
                state,
                [EVENTS],
                max_count=agent.limits.max_runs,
                max_age=agent.timing.run_retention_seconds,
                max_len=agent.agui.buffer_events,
            )
            records, events = Records(state, THREADS), EventLog(state, EVENTS)
            cancels = Canceller(state, CANCEL, CANCELLED, self.background)
            shared = self._shared = _Shared(state, records, events, cancels)
        return shared

    @property
    def state(self) -> State:
        return self.shared.state

    def _spawn(self, coroutine: Coroutine[Any, Any, Any], name: str) -> asyncio.Task[Any]:
        return self.background.spawn(coroutine, name)

    # --- starting a run ------------------------------------------------------------------------------
    async def start(
        self, skill: Capability, run_input: Any, connection: HTTPConnection, owner: str, limit: int
    ) -> tuple[Run, Consumer]:
        """Claim the run id, then start the run; raises :class:`Refused` before anything ran."""
        for name in (run_input.thread_id, run_input.run_id):
            if not name or len(name) > MAX_KEY_LENGTH - 64:
                raise Refused(422, "threadId and runId are 1 to 960 characters")
        state = self.state
        found = await self.shared.records.get(run_input.thread_id)
        thread = self._thread(run_input.thread_id, found, owner, skill.name)
        if thread is None or thread.owner != owner or thread.skill != skill.name:
            raise Refused(404, f"Thread {run_input.thread_id} not found")
        if run_input.run_id in self.runs or not await state.set_if_absent(
            RUNS,
            run_input.run_id,
            {"owner": owner, "thread": thread.id, "skill": skill.name, "replica": self.replica},
            self.agent.timing.run_retention_seconds,
        ):
            raise Refused(409, f"Run {run_input.run_id} already exists")
        props = run_input.forwarded_props if isinstance(run_input.forwarded_props, dict) else {}
        messages = [m.model_dump(mode="json", by_alias=True, exclude_none=True) for m in run_input.messages]
        run = Run(
            run_input.run_id,
            thread,
            Sequencer(thread.id, run_input.run_id, messages),
            collections.deque(maxlen=self.agent.agui.buffer_events),
            detached=props.get("detached") is True,
            runs=self,
        )
        self.runs[run.id] = run  # the table drops the oldest ended runs past agui_max_runs
        consumer = Consumer(limit, owns_run=True)
        run.consumers.add(consumer)
        telemetry = self.agent.telemetry
        if telemetry is not None:  # the run's span begins the thread's next turn; RUN_STARTED shows its trace
            telemetry.anchor("agui", thread.id)
        run.sequencer.start(
            run_input.model_dump(mode="json", by_alias=True, exclude_none=True),
            telemetry.run_metadata() if telemetry is not None else None,
        )
        await self._measure(run)
        try:
            run._watcher = await self._watch(run)  # live before the record names this run as running
            await self._begin(run, run_input, messages, skill, connection, props)
        except Exception as exc:
            if not _store_fault(run, exc):
                logger.exception("AG-UI run %s failed to start", run.id)
                if not run.ended:
                    run.sequencer.error("The agent failed to start this run.", "INTERNAL_ERROR")
        if run.ended and run._watcher is not None:
            run._watcher.close()
        run.publish()
        return run, consumer

    async def _measure(self, run: Run) -> None:
        """The run's input, as its RUN_STARTED frame encoded it, is what the run and its thread hold: over
        ``Budgets.agui_input_bytes`` the run is refused (413) before anything ran, and its id is free again."""
        out = run.sequencer.out
        run.input_bytes = len(out[-1][1]) if out else 0
        cap = self.agent.budgets.agui_input_bytes
        if run.input_bytes > cap:
            self.runs.pop(run.id, None)
            await self.state.delete_key(RUNS, run.id)
            raise Refused(
                413,
                f"The run's input (state, messages and forwardedProps) is {run.input_bytes:,} bytes "
                f"encoded; the limit is {cap:,}",
            )
        self.runs.resize(run.id)
        thread = run.thread
        thread.bytes = run.input_bytes
        self.threads.resize(thread.id)

    def _thread(self, thread_id: str, found: Versioned | None, owner: str, skill: str) -> Thread | None:
        """The local thread, made or brought up to date from its record."""
        thread: Thread | None = self.threads.get(thread_id)
        if found is None:
            if thread is None:
                thread = Thread(thread_id, owner, skill)
                self.threads[thread_id] = thread
            return thread
        if thread is None:
            thread = Thread(thread_id, found.value["owner"], found.value["skill"])
            thread.load(found.value, found.version)
            self.threads[thread_id] = thread
        elif thread.record_version != found.version:
            thread.load(found.value, found.version)
        return thread

    async def _begin(
        self,
        run: Run,
        run_input: Any,
        messages: list[dict[str, Any]],
        skill: Capability,
        connection: HTTPConnection,
        props: dict[str, Any],
    ) -> None:
        """Decide what the run does, write that to the thread record in one compare-and-set (deciding again
        from the new record when another replica wrote first), then do it: events are made only then."""
        thread = run.thread
        resume = [
            entry.model_dump(mode="json", by_alias=True, exclude_none=True)
            for entry in run_input.resume or []
        ]
        write, act = self._decide(run, run_input, messages, resume, skill, props, connection)
        foreign = False

        def merge(found: Versioned | None) -> Json | None:  # another replica wrote first: decide again
            nonlocal write, act, foreign
            if found is None:
                thread.record_version = 0
            elif found.value["owner"] != thread.owner or found.value["skill"] != skill.name:
                foreign = True
                return None
            else:
                thread.load(found.value, found.version)
            write, act = self._decide(run, run_input, messages, resume, skill, props, connection)
            return thread_record(thread) if write else None

        if write:
            records = self.shared.records
            try:
                version = await records.save(
                    thread.id, thread_record(thread), thread.record_version, merge, attempts=SAVE_ATTEMPTS
                )
            except Conflict:
                run.sequencer.error(
                    "The thread changed too often to start this run; try again.", "STATE_VERSION_CONFLICT"
                )
                return
            if foreign:
                run.sequencer.error("This thread belongs to another caller or skill.", "NOT_FOUND")
                return
            if version is not None:
                thread.record_version = version
        act(connection)

    def _decide(
        self,
        run: Run,
        run_input: Any,
        messages: list[dict[str, Any]],
        resume: list[dict[str, Any]],
        skill: Capability,
        props: dict[str, Any],
        connection: HTTPConnection,
    ) -> tuple[bool, Act]:
        """Change the local thread as the run asks; returns whether the thread record is to be written, and
        what to do once it is (no event is made before)."""
        thread = run.thread
        sequencer = run.sequencer
        client_state, version = run_input.state, props.get("stateVersion")
        if not self._state_ok(thread, client_state, version):
            return False, _refusal(
                run,
                f"The state changed on the server (now version {thread.version}); start again from this "
                "snapshot.",
                "STATE_VERSION_CONFLICT",
            )
        if thread.interrupts or resume:
            return self._decide_resume(run, resume, skill, client_state, messages)
        execution = thread.execution
        if thread.running is not None or (
            thread_busy(thread) and (execution is None or execution.answer is None or execution.answer.done())
        ):
            return False, _refusal(run, "This thread already has a run in progress.", "RUN_IN_PROGRESS")
        self._take_state(thread, client_state)
        sequencer.messages = thread.messages = messages
        arguments = dict(props.get("arguments") or {})
        text = next(
            (
                m.get("content")
                for m in reversed(thread.messages)
                if m.get("role") == "user" and isinstance(m.get("content"), str)
            ),
            None,
        )
        if text and skill.text_parameter and skill.text_parameter not in arguments:
            arguments[skill.text_parameter] = text
        thread.arguments = arguments
        key = props.get("idempotencyKey") or connection.headers.get("idempotency-key")
        thread.idempotency_key = key if isinstance(key, str) else None
        approval = props.get("approvalId")
        thread.approval_id = approval if isinstance(approval, str) else None
        thread.forwarded = props
        return True, _snapshot_then(run, self._start_or_ask(run, skill))

    @staticmethod
    def _state_ok(thread: Thread, client_state: Any, version: Any) -> bool:
        """The server arbitrates: a client write must name the version it saw (or match the state)."""
        if client_state is None:
            return True
        if not isinstance(client_state, dict):
            return False
        if version is not None:
            return bool(version == thread.version)
        return not (thread.version and client_state != thread.state)

    @staticmethod
    def _take_state(thread: Thread, client_state: Any) -> None:
        if client_state is not None and client_state != thread.state:
            thread.state = client_state
            thread.version += 1

    def _start_or_ask(self, run: Run, skill: Capability) -> Act:
        """The arguments are complete: run the skill; missing: an ``arguments`` interrupt."""
        thread = run.thread
        model = skill.params.input_model
        if skill.params.arg_names and model is not None:
            try:
                model.model_validate(thread.arguments)
            except ValidationError as exc:
                message = describe_validation_error(exc).replace(
                    "Invalid arguments", "Missing or invalid input"
                )
                thread.interrupts = {}
                interrupt = thread.open_interrupt(
                    "arguments",
                    None,
                    message,
                    skill.input_schema,
                    self.agent.timing.park_timeout_seconds,
                    kind="arguments",
                )
                thread.running = None
                thread.parked_on = None
                return lambda connection: run.sequencer.interrupt([interrupt], thread.state)
        thread.running = run.id
        thread.parked_on = None
        # A unique journal id, named in the record before anything runs: nothing is journaled until the
        # function takes a journaled step (a question, ctx.call, ctx.once), which a plain run never does.
        thread.execution_id = f"{EXECUTION}{os.urandom(8).hex()}:{thread.id}"
        thread.execution_info = None

        def start(connection: HTTPConnection) -> None:
            execution = Execution(
                skill, thread, run, idempotency_key=thread.idempotency_key, execution_id=thread.execution_id
            )
            run.execution = execution
            thread.execution = execution
            execution.task = asyncio.create_task(
                self._execute(execution, connection), name=f"agui-run-{run.id}"
            )

        return start

    # --- resuming: which case of RESUME_CASES, then what it does -------------------------------------------
    def _decide_resume(
        self,
        run: Run,
        resume: list[dict[str, Any]],
        skill: Capability,
        client_state: Any,
        messages: list[dict[str, Any]],
    ) -> tuple[bool, Act]:
        """A run that answers (or cancels) the thread's open interrupts: the facts, the first case of
        :data:`RESUME_CASES` they match, and that case's handler (``_resume_<name>``). Every case but
        ``invalid`` takes the client's state and messages and closes the interrupts in the record."""
        thread = run.thread
        facts = resume_facts(thread, resume)
        case = resume_case(facts)
        if case.name == "invalid":
            answered = {entry.get("interruptId") for entry in resume}
            missing = sorted(set(thread.interrupts) - answered)
            unknown = sorted(str(name) for name in answered - set(thread.interrupts))
            return False, _refusal(
                run,
                f"A resume must answer every open interrupt (missing: {missing}, unknown: {unknown}).",
                "INVALID_RESUME",
            )
        self._take_state(thread, client_state)
        run.sequencer.messages = thread.messages = messages
        pending = thread.interrupts
        journaled = thread.execution_id if next(iter(pending.values())).kind == "ask" else None
        thread.interrupts = {}
        thread.parked_on = None
        handler: Callable[[_Resume], Act] = getattr(self, f"_resume_{case.name}")
        act = handler(_Resume(run, skill, resume, pending, thread.execution, journaled))
        return True, _snapshot_then(run, act)

    def _resume_cancel_parked(self, resume: _Resume) -> Act:
        run, execution = resume.run, resume.execution
        assert execution is not None and execution.task is not None
        task = execution.task
        run.thread.running = run.id

        def cancel(connection: HTTPConnection) -> None:
            execution.run = run
            run.execution = execution
            execution.abort = True
            task.cancel()  # parked on the question: nothing after it runs

        return cancel

    def _resume_cancel_elsewhere(self, resume: _Resume) -> Act:
        run, journaled = resume.run, resume.journaled
        run.thread.running = None

        def cancelled(connection: HTTPConnection) -> None:
            if journaled:  # parked elsewhere, or in no memory at all: no replica may resume it now
                self._spawn(
                    self._end_execution(journaled, "The interrupt was cancelled."), f"agui-cancel-{journaled}"
                )
            run.sequencer.finish({"type": "cancelled"})

        return cancelled

    def _resume_arguments(self, resume: _Resume) -> Act:
        thread = resume.run.thread
        payload = resume.entries[0].get("payload")
        if isinstance(payload, dict):
            thread.arguments.update(payload)
        return self._start_or_ask(resume.run, resume.skill)

    def _resume_answer_here(self, resume: _Resume) -> Act:
        run, execution = resume.run, resume.execution
        assert execution is not None and execution.answer is not None
        future = execution.answer
        answers = answers_for(resume.pending, resume.entries)
        run.thread.running = run.id

        def answer(connection: HTTPConnection) -> None:
            execution.run = run
            run.execution = execution
            future.set_result(answers)

        return answer

    def _resume_expired(self, resume: _Resume) -> Act:
        run, journaled = resume.run, resume.journaled
        assert journaled is not None
        run.thread.running = None

        def expired(connection: HTTPConnection) -> None:
            self._spawn(
                self._end_execution(journaled, "No answer arrived before the interrupt expired."),
                f"agui-expire-{journaled}",
            )
            run.sequencer.error(
                "The interrupt expired before this resume; start a new run.", "INVALID_RESUME"
            )

        return expired

    def _resume_replay(self, resume: _Resume) -> Act:
        run, skill, journaled = resume.run, resume.skill, resume.journaled
        thread = run.thread
        payloads = {entry.get("interruptId"): entry.get("payload") for entry in resume.entries}
        answers = {
            p.key: payloads[p.id] for p in resume.pending.values()
        }  # raw: parsed against the journal's questions
        info = thread.execution_info or {}
        thread.running = run.id

        def replay(connection: HTTPConnection) -> None:
            replayed = Execution(
                skill,
                thread,
                run,
                execution_id=journaled,
                start_state=info.get("startState") or {},
                streamed_text=bool(info.get("streamedText")),
            )
            run.execution = replayed
            thread.execution = replayed
            replayed.task = asyncio.create_task(
                self._replay(replayed, connection, answers), name=f"agui-run-{run.id}"
            )

        return replay

    def _resume_lost(self, resume: _Resume) -> Act:
        run = resume.run
        run.thread.running = None
        return lambda connection: run.sequencer.error(
            "The interrupted execution is gone (it expired, or it was cancelled); start a new run.",
            "RESUME_LOST",
        )

    # --- executing -------------------------------------------------------------------------------------
    async def _execute(self, execution: Execution, connection: HTTPConnection) -> None:
        thread = execution.thread
        channel = AguiChannel(self.agent, execution)
        ctx = Context(
            execution.capability,
            channel,
            request=connection,
            caller=thread.owner,
            agent=self.agent,
            state=thread.state,
            face="agui",
        )
        channel.bind(ctx)
        ctx.messages = messages_from_run(thread.messages, thread.forwarded)  # this turn's (agui/messages.py)
        execution.start_state = ctx.published_state  # the state as it starts (Context keeps it unchanged)
        journal = execution.journal = (
            Journal.for_agent(self.agent, execution.execution_id, lease_seconds=self.lease_seconds)
            if execution.execution_id
            else None
        )
        await self._carry(
            execution,
            invoke(
                execution.capability,
                dict(thread.arguments),
                ctx,
                idempotency_key=execution.idempotency_key,
                approval_id=thread.approval_id,
                journal=journal,
            ),
        )

    async def _replay(
        self,
        execution: Execution,
        connection: HTTPConnection | None,
        answers: dict[str, Any] | None,
        *,
        take_over: bool = False,
    ) -> None:
        """Go on with an execution this process does not hold: replay its journal (with the answers of a
        resume), from the state it started with; delivered events are skipped, the rest go to ``execution.run``."""
        thread = execution.thread
        channel = AguiChannel(self.agent, execution)
        execution_id = execution.execution_id
        assert execution_id is not None

        async def replayed() -> Outcome:
            execution.journal = await Journal.load(self.state, execution_id, lease_seconds=self.lease_seconds)
            return await resume_execution(
                self.agent,
                execution_id,
                answers=answers,
                channel=channel,
                request=connection,
                state=thread.state,
                lease_seconds=self.lease_seconds,
                wait=0.0 if take_over else RESUME_WAIT,
                journal=execution.journal,
            )

        before, thread.state = thread.state, copy.deepcopy(execution.start_state or {})
        await self._carry(execution, replayed(), take_over=take_over, state_before=before)

    async def _carry(
        self,
        execution: Execution,
        running: Awaitable[Outcome],
        *,
        take_over: bool = False,
        state_before: dict[str, Any] | None = None,
    ) -> None:
        """Run the execution's coroutine and end its current run with what it returns."""
        thread = execution.thread
        outcome: Outcome | None = None
        moved = False
        try:
            outcome = await running
        except asyncio.CancelledError:
            journal = execution.journal
            if journal is not None and journal._lost:
                # It had lost its lease (this process stalled): another replica goes on with the execution.
                moved = True
                self._abandon(execution.run)
                return
            if execution.abort and (
                journal is None or journal.stored
            ):  # an unwritten journal: nothing to say
                await self._end_execution(execution.execution_id, "The run was cancelled.")
            run = execution.run
            if not run.ended:
                run.sequencer.finish({"type": "cancelled"})
                run.publish()
            return
        except Exception as exc:
            run = execution.run
            if not _store_fault(run, exc):
                logger.exception("AG-UI execution failed inside agentmw")
                run.sequencer.error("The agent failed while running.", "INTERNAL_ERROR")
            run.publish()
            return
        finally:
            if thread.execution is execution:
                thread.execution = None
                if not moved and not (outcome is not None and outcome.code in MOVED):
                    thread.execution_info = None  # over: nothing is left to replay
                    if execution.run.ended and not thread.interrupts and thread.parked_on == self.replica:
                        # It ended while parked (expired or orphaned), with no run to carry the news: say so.
                        thread.parked_on = None
                        self._spawn(self._save(thread, None), f"agui-save-{thread.id}")
        run = execution.run
        code = outcome.code
        if code == Code.TAKEN_OVER or (take_over and code in (Code.EXECUTION_BUSY, Code.UNKNOWN_EXECUTION)):
            # Another replica goes on with it (and reports it), or already did: this one says nothing.
            if state_before is not None:
                thread.state = state_before
            self._abandon(run)
            return
        if run.ended:
            return
        if code in NOT_REPLAYED and state_before is not None:
            thread.state = state_before  # nothing was replayed
        try:
            if code == Code.UNKNOWN_EXECUTION:
                run.sequencer.error(
                    "The interrupted execution is gone (its journal expired); start a new run.", "RESUME_LOST"
                )
            else:
                self._render(execution, outcome)
        except Exception as exc:  # whatever the function returned, the run ends with a terminal event
            if not _store_fault(run, exc):
                logger.exception("AG-UI run %s could not render its outcome", run.id)
                run.sequencer.error("The agent failed while sending this run's result.", "INTERNAL_ERROR")
        run.publish()

    async def _end_execution(self, execution_id: str | None, message: str) -> None:
        """Record in the journal that the execution ended for good (nothing is written when it has none)."""
        if not execution_id:
            return
        try:
            await cancel_execution(self.agent, execution_id, message)
        except Exception:
            logger.exception("AG-UI: the journal of execution %s could not record its cancel", execution_id)

    def _abandon(self, run: Run) -> None:
        """Forget a run that goes on elsewhere: its readers here are cut off (they reconnect, on any replica)."""
        if run._watcher is not None:
            run._watcher.close()
        if run._writer is not None:  # what it made before goes to the log still
            self._spawn(self._close_log(run, [], end=False), f"agui-log-{run.id}")
        if self.runs.get(run.id) is run:
            self.runs.pop(run.id, None)
        for consumer in list(run.consumers):
            consumer.close()
        run.consumers.clear()
        run.finished.set()

    # --- runs whose replica died ---------------------------------------------------------------------
    def _follow_begins(self) -> None:
        """A client follows here a run another replica carries: while any does, a timer sweeps every
        ``sweep_seconds``, so that when that replica dies its run is taken over (and the followers see it go
        on) even if no other AG-UI request comes (keep-alives keep the client from giving up)."""
        self._following += 1
        if not self._closing and (self._timer is None or self._timer.done()):
            self._timer = self._spawn(self._sweep_while_followed(), "agui-follow-sweep")

    def _follow_ends(self) -> None:
        self._following = max(0, self._following - 1)

    async def _sweep_while_followed(self) -> None:
        while self._following > 0:
            await asyncio.sleep(self.sweep_seconds)
            if self._following > 0:
                self.sweep()

    async def close(self, grace: float = CLOSE_GRACE_SECONDS) -> None:
        """Stop this process's AG-UI work, as a replica that shuts down (the agent's own close calls this).

        The follow timer and sweeps stop. A run whose execution is journaled is handed over, not ended: its
        coroutine stops, what it made goes to the run's log, and its lease is given up, so that the next sweep
        of another replica goes on with the same run at once (its followers reconnect there) rather than after
        the lease expires. A run with no journal ends ``cancelled``. Other work (log writers, saves) gets up to
        ``grace`` seconds to finish, then is cancelled."""
        self._following = 0
        self._closing = True
        handed: list[Journal] = []
        stopping: list[asyncio.Task[Any]] = []
        for run in list(self.runs.values()):
            execution = run.execution
            if execution is None or execution.task is None or execution.task.done():
                continue
            journal = execution.journal
            if journal is not None and journal.stored:
                journal._lost = True  # its task abandons the run (_carry) rather than ending it
                handed.append(journal)
            execution.task.cancel()
            stopping.append(execution.task)
        if self._timer is not None:
            self._timer.cancel()
            stopping.append(self._timer)
        if stopping:
            await asyncio.gather(*stopping, return_exceptions=True)
        for journal in handed:
            try:
                await journal.release()
            except Exception:  # noqa: BLE001 (the lease then expires: a take-over comes later)
                logger.warning("AG-UI: execution %s: its lease could not be given up", journal.id)
        rest = list(self.background.tasks)
        if rest:
            await asyncio.wait(rest, timeout=grace)
        await self.background.close()
        self._timer = None

    def sweep(self) -> None:
        """Look for executions whose replica died (in the background), at most every ``sweep_seconds``.

        Called by each AG-UI request, so the first request of a process sweeps and nothing runs at import or
        start-up; costs one clock read otherwise."""
        if not self._closing and self._sweeper.due():
            self._spawn(self._sweeper.sweep(self._orphans, self._take_over, label="AG-UI"), "agui-sweep")

    async def _orphans(self) -> list[str]:
        """The executions of AG-UI runs whose lease expired (their journal's: ``agentmw.journal``)."""
        return [found for found in await orphaned(self.agent) if found.startswith(EXECUTION)]

    async def _take_over(self, execution_id: str) -> None:
        """Go on with a run whose replica died (its journal is running, its lease expired): replay it here,
        numbering its events after those its log holds, so the thread does not stay in progress forever.

        ``execution_id``: an :class:`~agentmw.journal.Orphan` from the sweep: nothing is done (neither a
        replay nor an end) unless its journal is still running at the version the sweep saw (an execution
        that parked or ended meanwhile is left alone); the replay checks it again once it holds the lease."""
        if isinstance(execution_id, Orphan):
            now = await self.state.get(JOURNAL_NS, execution_id)
            if now is None or now.version != execution_id.version or now.value.get("status") != "running":
                return
        thread_id = execution_id.split(":", 2)[2]
        found = await self.shared.records.get(thread_id)
        record = found.value if found is not None else None
        journaled = (record or {}).get("execution")
        run_id = (record or {}).get("running")
        if (
            record is None
            or not isinstance(journaled, dict)
            or journaled.get("id") != execution_id
            or not run_id
        ):
            # No run carries it any more (it ended, was cancelled or superseded, or the thread expired): end it,
            # unless it moved on since the sweep saw it (journal.cancel checks the Orphan's version)
            await self._end_execution(execution_id, "The AG-UI run of this execution ended.")
            return
        local = self.runs.get(run_id)
        skill = self.agent.skills.get(record.get("skill", ""))
        if (local is not None and not local.ended) or skill is None:
            return  # it runs here (its lease lapsed while this process was busy), or this replica cannot run it
        frames, ended = await self._logged(run_id)
        if ended:
            return
        thread = self._thread(thread_id, found, record["owner"], record["skill"])
        if thread is None or (
            thread.execution is not None
            and thread.execution.task is not None
            and not thread.execution.task.done()
        ):
            return
        events = [(seq, json.loads(frame.split(b"data: ", 1)[1])) for seq, frame in frames]
        sequencer = Sequencer.resumed(thread.id, run_id, list(thread.messages), events)
        run = Run(
            run_id,
            thread,
            sequencer,
            collections.deque(frames, maxlen=self.agent.agui.buffer_events),
            detached=True,
            runs=self,
        )
        if not sequencer.open:  # nothing of it was logged: it starts over, numbered after what was
            sequencer.start(None)
            sequencer.state_snapshot(thread.state)
        info = thread.execution_info or {}
        # Never parked: the record holds the state as the run began (it is written at the start and the end).
        start = info.get("startState", thread.state)
        streamed = bool(info.get("streamedText")) or any(
            e.get("type") == "TEXT_MESSAGE_CONTENT" for _, e in events
        )
        execution = Execution(
            skill,
            thread,
            run,
            execution_id=execution_id,
            start_state=copy.deepcopy(start),
            streamed_text=streamed,
        )
        self.runs[run_id] = run
        run.execution = execution
        thread.execution = execution
        thread.running = run_id
        run._watcher = await self._watch(run)
        run.publish()
        logger.warning(
            "AG-UI run %s (thread %s): its replica died; this one goes on with it", run_id, thread_id
        )
        execution.task = self._spawn(
            self._replay(execution, None, None, take_over=True), f"agui-run-{run_id}"
        )

    async def _logged(self, run_id: str) -> tuple[list[tuple[int, bytes]], bool]:
        """The frames a run's log holds, by sequence number, and whether it holds the run's end."""
        frames: dict[int, bytes] = {}
        ended = False
        async for entry in self.shared.events.follow(
            run_id, 0, is_final=_is_end, when_quiet=_nothing, block=0
        ):
            first = int(entry.get("first") or 1)
            for index, frame in enumerate(entry.get("frames") or []):
                frames.setdefault(first + index, frame.encode("utf-8"))
            ended = ended or _is_end(entry)
        return sorted(frames.items()), ended

    def _render(self, execution: Execution, outcome: Outcome) -> None:
        run, thread = execution.run, execution.thread
        sequencer = run.sequencer
        if outcome.status == Status.COMPLETED:
            if is_answer(outcome.value) and not execution.capability.is_async_gen:  # a generator's are sent
                sequencer.answer(outcome.value, text=not execution.streamed_text)
            elif not execution.streamed_text:
                text = "".join(getattr(part, "text", "") for part in outcome.content)
                sequencer.text(text)
            sequencer.finish(result=outcome.structured)
        elif outcome.status in (Status.NEEDS_INPUT, Status.AWAITING_APPROVAL):
            interrupts = []
            for key, request in (outcome.pending or {}).items():
                if not isinstance(request, Ask):  # AG-UI asks only questions (elicitation)
                    raise TypeError(f"an AG-UI interrupt cannot carry {type(request).__name__}")
                interrupts.append(
                    thread.open_interrupt(
                        key,
                        None,
                        request.message,
                        request.schema,
                        self.agent.timing.park_timeout_seconds,
                        kind="arguments",
                    )
                )
            sequencer.interrupt(interrupts, thread.state)
        else:
            code = (
                "RETRYABLE"
                if outcome.retryable
                else ("REJECTED" if outcome.status == Status.REJECTED else "FAILED")
            )
            if outcome.code in GIVEN_UP:  # a dead letter, a function gone, a journal full: say which
                code = str(outcome.code).upper()
            message = outcome.message or outcome.status
            if outcome.retryable and outcome.retry_after is not None:
                message = f"{message} Retry after {outcome.retry_after:g} seconds."
            sequencer.error(message, code)

    # --- the end of a run, and its log -------------------------------------------------------------------
    def finish(self, run: Run, final: Frames) -> None:
        """The run's last frames were made: save the thread, then close the log, then deliver them."""
        thread = run.thread
        if thread.running == run.id:
            thread.running = None
        execution = thread.execution
        if thread.interrupts and execution is not None and execution.answer is not None:
            thread.parked_on = self.replica
            # What a replay elsewhere needs and the journal does not keep: the state it started from (the
            # record's state now holds its changes) and whether it streamed text (then its result is not sent
            # as text again).
            thread.execution_info = {
                "startState": execution.start_state or {},
                "streamedText": execution.streamed_text,
            }
        if run._watcher is not None:
            run._watcher.close()
        self._spawn(self._finish(run, final), f"agui-finish-{run.id}")

    async def _finish(self, run: Run, final: Frames) -> None:
        """Save the thread, write the run's end to its log, then send the last frames (``RUN_FINISHED``, the
        acknowledgement): after the end is committed, so a follower or a reconnect on any replica reads it too.
        A store that refuses the write is retried for ``FINAL_LOG_SECONDS``; the live client waits at most
        ``FINAL_ACK_WAIT_SECONDS`` for it (as an A2A answer waits for its record), and the write goes on behind."""
        try:
            await self._save(run.thread, run)
        except Exception:
            logger.exception("AG-UI run %s: the thread could not be saved", run.id)
        closing = self._spawn(self._close_end(run, final), f"agui-end-{run.id}")
        try:
            await asyncio.wait({closing}, timeout=FINAL_ACK_WAIT_SECONDS)
        finally:
            run.deliver([frame for _, frame in final])

    async def _close_end(self, run: Run, final: Frames) -> None:
        try:
            await self._close_log(run, final, end=True, retry_for=FINAL_LOG_SECONDS)
        except Exception:
            logger.exception("AG-UI run %s: its last events could not be logged", run.id)

    async def _save(self, thread: Thread, run: Run | None) -> None:
        """Write the thread as this replica has it; another writer's state wins when it is newer."""

        def merge(found: Versioned | None) -> Json:
            thread.record_version = found.version if found is not None else 0
            theirs = found.value if found is not None else {}
            if (theirs.get("version") or 0) > thread.version:
                thread.state, thread.version = theirs.get("state") or {}, theirs["version"]
            if run is not None and theirs.get("running") not in (None, run.id):
                thread.running = theirs["running"]
            return thread_record(thread)

        try:
            version = await self.shared.records.save(
                thread.id, thread_record(thread), thread.record_version, merge, attempts=SAVE_ATTEMPTS
            )
        except Conflict:
            logger.warning("AG-UI thread %s: gave up saving after %d conflicts", thread.id, SAVE_ATTEMPTS)
            return
        assert version is not None  # merge never stops
        thread.record_version = version

    # --- the run's log: written behind the stream (lifecycle.LogWriter), read by any replica -----------------
    def log(self, run: Run, made: Frames) -> None:
        """Queue frames for the run's shared log; its writer appends them off the stream's path."""
        self._log_writer(run).add(made)

    def _log_writer(self, run: Run) -> LogWriter:
        writer = run._writer
        if writer is None:
            batch = max(16, self.agent.agui.buffer_events // 8)  # the log keeps agui_buffer_events entries
            writer = run._writer = LogWriter(
                self.shared.events,
                run.id,
                batch=batch,
                keep=batch * self.agent.agui.buffer_events,
                name=f"agui-log-{run.id}",
                label=f"AG-UI run {run.id}",
            )
        return writer

    async def _close_log(self, run: Run, last: Frames, *, end: bool, retry_for: float = 0.0) -> None:
        """Append what the run's writer still holds and ``last``; ``end``: the last entry says the run ended."""
        await self._log_writer(run).close(last, end=end, next_seq=run.sequencer.seq + 1, retry_for=retry_for)

    # --- cancelling (lifecycle.Canceller: asked on the bus, answered by the replica that runs it) -----------
    async def _watch(self, run: Run) -> Watch:
        """Cancel requests for this run from other replicas, until it ends (subscribed when it returns)."""
        return await self.shared.cancels.watch(run.id, functools.partial(self._cancel_here, run))

    @staticmethod
    async def _cancel_here(run: Run) -> bool:
        """Cancel the run's execution here and wait until the run ended; False when none was running."""
        if not run.cancel():
            return False
        execution = run.execution
        if execution is not None and execution.task is not None:
            await asyncio.gather(execution.task, return_exceptions=True)
        await run.finished.wait()
        return True

    async def cancel(self, run_id: str, owner: str) -> None:
        """Cancel a run wherever it runs; returns once it ended. Raises :class:`Refused` (404, 409)."""
        run = self.runs.get(run_id)
        if run is not None:
            if run.thread.owner != owner:
                raise Refused(404, f"Run {run_id} not found")
            if not await self._cancel_here(run):
                raise Refused(409, f"Run {run_id} is not running")
            return
        claim = await self._claim(run_id, owner)
        found = await self.shared.records.get(claim["thread"])
        if found is None or found.value.get("running") != run_id:
            raise Refused(409, f"Run {run_id} is not running")
        if not await self.shared.cancels.request(run_id, CANCEL_WAIT):
            raise Refused(409, f"Run {run_id} is not running")

    async def _claim(self, run_id: str, owner: str) -> dict[str, Any]:
        if not run_id or len(run_id) > MAX_KEY_LENGTH:
            raise Refused(404, "Run not found")
        claim = await self.state.get_key(RUNS, run_id)
        if claim is None or claim.get("owner") != owner:
            raise Refused(404, f"Run {run_id} not found")
        return claim

    # --- reconnecting ------------------------------------------------------------------------------------
    async def remote(self, run_id: str, owner: str) -> dict[str, Any]:
        """The run's claim, when another replica runs it and the caller owns it; raises :class:`Refused`."""
        return await self._claim(run_id, owner)

    async def replay_log(self, run_id: str, thread_id: str, after: int) -> AsyncIterator[bytes]:
        """The frames after ``after`` from the run's shared log, then each new batch until the run's end. Where
        the log no longer holds some (trimmed), the thread's state and messages come first instead."""
        expected = after + 1
        over = 0

        async def quiet() -> list[Any] | None:  # nothing new for a while: is the run still known?
            nonlocal over
            if await self.state.get_key(RUNS, run_id) is None:
                return []
            found = await self.shared.records.get(thread_id)
            local = self.runs.get(run_id)
            if (found is not None and found.value.get("running") == run_id) or (
                local is not None and not local.ended
            ):
                over = 0
                return None  # it runs (here, or on a replica that holds or takes it over)
            over += 1
            if over < 2:  # its end may be on its way to the log (Runs._finish retries it)
                return None
            # it ended, but its end is not in the log (the store refused it): a bounded, retryable answer
            event = {
                "type": "RUN_ERROR",
                "message": "This run ended, but its last events could not be read from the store. Retry later.",
                "code": "RETRYABLE",
                "timestamp": int(time.time() * 1000),
            }
            frame = f"id: {expected}\ndata: {json.dumps(event)}\n\n"
            return [{"first": expected, "frames": [frame], "end": True}]

        self._follow_begins()
        try:
            async for entry in self.shared.events.follow(
                run_id, 0, is_final=_is_end, when_quiet=quiet, block=TAIL_WAIT
            ):
                out: list[bytes] = []
                frames, first = entry.get("frames") or [], entry.get("first", expected)
                if first > expected:  # trimmed away: the snapshots stand for what was lost
                    out.extend(await self._snapshot(thread_id))
                    expected = first
                for index, frame in enumerate(frames):
                    if first + index >= expected:
                        out.append(frame.encode("utf-8"))
                expected = max(expected, first + len(frames))
                if out:
                    yield b"".join(out)
        finally:
            self._follow_ends()

    async def _snapshot(self, thread_id: str) -> list[bytes]:
        found = await self.shared.records.get(thread_id)
        value = found.value if found is not None else {}
        return Sequencer.reconnect_snapshot(value.get("state") or {}, value.get("messages") or [])


def _store_fault(run: Run, exc: BaseException) -> bool:
    """End the run with a retryable ``RUN_ERROR`` when ``exc`` is (or wraps) a store fault; False otherwise."""
    fault = store_fault(exc)
    if fault is None:
        return False
    logger.warning("AG-UI run %s: %s", run.id, fault.message)
    if not run.ended:
        run.sequencer.error(f"{fault.message} Retry after {fault.retry_after or 1:g} seconds.", "RETRYABLE")
    return True


def _is_end(entry: Any) -> bool:
    """Whether a log entry is a run's last."""
    return bool(entry.get("end"))


async def _nothing() -> list[Any]:
    """A log read to its end: nothing more is waited for."""
    return []


# --- bounded tables (docs/limits.md) ------------------------------------------------------------------


def thread_busy(thread: Thread) -> bool:
    """A thread the tables must keep: its execution runs or is parked on a question (a parked one ends by
    itself within ``park_timeout_seconds``). A thread that only waits for missing arguments holds no
    execution, so it is not kept: an unbounded number of those would be free to make."""
    execution = thread.execution
    return execution is not None and execution.task is not None and not execution.task.done()


def thread_table(agent: RunsHost) -> BoundedTable[str, Thread]:
    """Threads by id: at most ``agui_max_threads`` idle ones and ``Budgets.agui_threads_bytes`` of them, each
    forgotten ``agui_thread_idle_seconds`` after its last run; a busy thread (:func:`thread_busy`) is always
    kept. One dropped is read again from its record in the state when it is next used."""
    return BoundedTable(
        agent.limits.max_threads,
        agent.timing.thread_idle_seconds,
        pinned=thread_busy,
        touch=True,
        max_bytes=agent.budgets.agui_threads_bytes,
        size=_thread_bytes,
    )


def _thread_bytes(_key: str, thread: Thread) -> int:
    return thread.bytes


def _run_bytes(_key: str, run: Run) -> int:
    return run.held


def run_table(agent: RunsHost) -> BoundedTable[str, Run]:
    """Runs by id, for reconnects and cancels: at most ``agui_max_runs`` ended ones, each kept
    ``agui_run_retention_seconds`` after it started, and ``Budgets.agui_runs_bytes`` of their inputs and
    buffers; a run still in progress is always kept. A reconnect to one dropped replays the shared log."""
    return BoundedTable(
        agent.limits.max_runs,
        agent.timing.run_retention_seconds,
        pinned=lambda run: not run.ended,
        max_bytes=agent.budgets.agui_runs_bytes,
        size=_run_bytes,
    )
