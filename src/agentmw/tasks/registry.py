"""Tasks as versioned records in the shared state, and the fan-out of their events: the part of the task
model every face shares (A2A tasks, MCP tasks).

The registry is the part of a face's task manager that does not run anything: it keeps each task's record,
its live handle in this process, and sends every change to whoever follows the task. A face's runner
changes tasks only through its public calls: :meth:`TaskRegistry.show`, :meth:`status`, :meth:`artifact`,
:meth:`reply`, :meth:`emit`. Each face keeps its tasks in namespaces of its own (:class:`Spaces`), so an
A2A task and an MCP task never meet, though both are the same record (``stores.base.TaskRecord``, A2A 1.0
shaped so that rendering an A2A task is a copy) and run the same way.

What lives where (docs/a2a.md, "Stores, restarts and replicas"; docs/durability.md):

- **Records** (``<face>.tasks``, keyed by task id): every write is a compare-and-set on the version this
  process last wrote or read, so a task that another replica failed or canceled is never overwritten
  (the local handle adopts the other's terminal record instead: :meth:`_adopt`).
- **One write for a fast task.** A task's intermediate states stay in memory for the process that runs it;
  its record is written once, when it settles (terminal or interrupted), by a writer task off the request
  path (write-behind: at most ``MAX_BACKLOG`` writes behind; a send waits when it is further behind).
  A task is *published* (its record written at once and again on every change, each event appended to its
  log) when it is still running after ``Timing.publish_after_seconds``, or when its face asks (it streams,
  is returned immediately, has push notifications, stays interrupted, is an MCP task handle).
- **Events** of a published task go to its log (``<face>.events``, one log per task). A record carries
  ``log_id``, the last event it reflects, so a follower on another replica reads the record, then the log
  after ``log_id``, and misses nothing and repeats nothing (:meth:`follow`). Followers on the process that
  runs the task get the events from memory.
- **Which process holds the coroutine**: ``record.replica``. Each process with such tasks keeps a
  heartbeat key (``<face>.replicas``). A task whose holder's heartbeat is gone goes on from its journal
  (``agentmw.journal``, in ``agent.state``): parked, an answer on any replica resumes it; running, a
  replica takes it over (:meth:`_orphan`, and the lazy orphan sweep of :meth:`ready`). One with no journal
  is failed by whoever reads it (:meth:`load`). With an older ``TaskStore`` (single-process mode), any
  other holder is gone.
- **Cancel** goes over the bus (``<face>.cancel``) to the process that holds the coroutine.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from .._bounded import BoundedTable
from .._transport import loads
from ..messages import Artifact, Message
from ..state import Conflict, Encoded, Limits, State, encoded, encoded_bytes
from ..stores.base import INTERRUPTED, TERMINAL, TaskRecord
from ..stores.sqlite import RESTART_REASON

if TYPE_CHECKING:
    from ..agent import Agent

__all__ = [
    "MAX_BACKLOG",
    "SETTLED",
    "LiveTask",
    "Pusher",
    "RecordShapes",
    "ResumedElsewhere",
    "Spaces",
    "TaskRegistry",
    "Timing",
    "is_final",
    "status_event",
    "status_of",
]

logger = logging.getLogger("agentmw")

SETTLED = TERMINAL | INTERRUPTED
ANONYMOUS = "anonymous"  # the identity of every caller without authentication (agentmw.identity)

MAX_BACKLOG = 256  # writes the writer may be behind before a send waits for it
WRITE_DELAY_SECONDS = 0.005  # a settled task's write waits this long for others to share the hand-off
LOOK_AGAIN_SECONDS = 0.025  # a lookup that misses looks again once after this (another replica's write)
WRITE_BATCH = 64  # records per put_many: SQLite writes a batch this small on the event loop, a larger one on
# its thread, where the loop's work keeps taking the GIL from it (a lagging writer makes ever larger batches)
_ALIVE_CACHE_SECONDS = 1.0
_WRITE_ATTEMPTS = 3


@dataclass(frozen=True, slots=True)
class Spaces:
    """The state's names one face keeps its tasks under; two faces never share them."""

    tasks: str  # records: one per task
    events: str  # logs: one per published task, its events
    push: str  # records: a task's push configs and the id of the last event pushed (A2A)
    lease: str  # keys: "push:<task id>", the one sender of a task's pushes (A2A)
    replicas: str  # keys: one heartbeat per process that holds a coroutine
    cancel: str  # bus channel: {"task": id} to the process that holds it

    @classmethod
    def of(cls, face: str) -> Spaces:
        return cls(
            f"{face}.tasks",
            f"{face}.events",
            f"{face}.push",
            f"{face}.lease",
            f"{face}.replicas",
            f"{face}.cancel",
        )


@dataclass(frozen=True, slots=True)
class Timing:
    """How long things last; a face sets its own (A2A's are module constants of ``a2a/registry.py``)."""

    publish_after_seconds: float = 0.25  # a task still running this long is written, for other replicas
    heartbeat_seconds: float = 10.0  # a process's heartbeat key lives this long, renewed every third of it
    lease_seconds: float = 10.0  # a running task's journal lease (docs/durability.md), renewed every third
    sweep_seconds: float = 5.0  # a process looks for orphaned tasks on first use, then at most this often
    retry_take_over_seconds: float = 2.0  # a take-over that found the task busy is not tried again sooner
    cancel_wait_seconds: float = 5.0  # how long a cancel waits for the holder to confirm


class RecordShapes(Protocol):
    """How a face's messages and artifacts are kept in a record (A2A: its 1.0 wire shapes, ``a2a.wire``)."""

    def now_iso(self) -> str: ...

    def agent_message(self, task_id: str, context_id: str, parts: list[dict[str, Any]]) -> dict[str, Any]: ...

    def message_to_wire(
        self, message: Message, task_id: str | None, context_id: str | None
    ) -> dict[str, Any]: ...

    def artifact_to_wire(self, artifact: Artifact) -> dict[str, Any]: ...


class Pusher(Protocol):
    """A face's push sender (A2A push notifications): told which tasks have events to deliver."""

    def watch(self, task_id: str) -> None: ...


class ResumedElsewhere(Exception):
    """Set on the answer future of a coroutine parked here when another process resumed its task."""

    def __init__(self, task_id: str) -> None:
        super().__init__(f"Task {task_id} was resumed by another process")


@dataclass(eq=False, slots=True)
class LiveTask:
    """A task this process holds: its record, its coroutine, and who follows it here."""

    record: TaskRecord
    runner: asyncio.Task[None] | None = None
    subscribers: set[asyncio.Queue[dict[str, Any] | None]] = field(default_factory=set)
    answer: asyncio.Future[dict[str, Any]] | None = None
    settle_waiters: list[asyncio.Future[None]] = field(default_factory=list)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    messages: list[Message] = field(default_factory=list)  # the user messages, as the skill sees them (ctx)
    quiet: bool = False  # nothing shown yet: a skill that may answer with a Message can still reply taskless
    first_view: dict[str, Any] | None = None  # a quiet task as submitted: a stream sends it once it is shown
    reply: dict[str, Any] | None = None  # the skill's message-only answer; then no task exists
    streamed: set[str] = field(default_factory=set)  # ids of the artifacts already sent
    on_reply: Callable[[dict[str, Any]], None] | None = None  # records a message-only reply (A2A messageIds)
    handed_over: bool = False  # settled at once: its one write was encoded and handed to the writer (_final)
    resume: Any = None  # the stored journal a follow-up resumes (its coroutine is in no process here)
    # persistence
    version: int = 0  # of the record in the state; 0: never written
    published: bool = False  # every change is written and every event logged
    dirty: bool = False  # changes not written yet
    queued: bool = False  # in the writer's queue
    events: list[dict[str, Any]] = field(default_factory=list)  # logged events not appended yet
    publish_later: bool = False  # publish once shown (a quiet task that streams)
    young: bool = False  # running, to be published if it still runs after Timing.publish_after_seconds
    superseded: bool = False  # another replica settled it: this process's changes are dropped
    has_push: bool = False  # push configs exist: the writer wakes the sender after appending
    face: Any = None  # what the face keeps here for the task (an MCP task's parked questions)
    bytes: int = 0  # its messages, as the face measured them (the handle table's budget, docs/limits.md)

    def holds(self) -> bool:
        """This process runs the coroutine, or it is parked here on a question."""
        return (self.runner is not None and not self.runner.done()) or self.answer is not None


def _live_bytes(_task_id: str, live: LiveTask) -> int:
    return live.bytes


def status_of(record: TaskRecord) -> dict[str, Any]:
    status: dict[str, Any] = {"state": record.state, "timestamp": record.status_timestamp}
    if record.status_message is not None:
        status["message"] = record.status_message
    return status


def status_event(record: TaskRecord, metadata: Mapping[str, Any] | None = None) -> dict[str, Any]:
    update: dict[str, Any] = {
        "taskId": record.id,
        "contextId": record.context_id,
        "status": status_of(record),
    }
    if metadata:
        update["metadata"] = dict(metadata)
    return {"statusUpdate": update}


def is_final(event: Mapping[str, Any], stop_on_interrupt: bool = False) -> bool:
    """Whether a stream of the task ends with this event."""
    update = event.get("statusUpdate")
    if update is None:
        return False
    state = update["status"]["state"]
    return state in TERMINAL or (stop_on_interrupt and state in INTERRUPTED)


def _release_waiters(live: LiveTask) -> None:
    """The blocking sends waiting for the task to settle go on."""
    for waiter in live.settle_waiters:
        if not waiter.done():
            waiter.set_result(None)
    live.settle_waiters.clear()


def _end_followers(live: LiveTask, last: dict[str, Any]) -> None:
    """The task's followers here get ``last``, then the end of their stream."""
    for queue in list(live.subscribers):
        queue.put_nowait(last)
        queue.put_nowait(None)
    live.subscribers.clear()


class TaskRegistry:
    """The records, live handles and followers of one face's tasks (one agent's), in ``state``.

    Args:
        spaces: the state's names this face keeps its tasks under (``Spaces.of("a2a")``).
        shapes: how the face's messages and artifacts are kept in a record.
        timing: heartbeats, leases, sweeps (the face's own).
        label: the face, as logs name it ("A2A", "MCP").
        single_process: an older ``TaskStore`` was given: no other process shares these tasks, so a task
            another process held is lost (failed on first use) and no heartbeat or bus is needed.
        write_behind: a blocking send answers before its task's one write lands (see the module doc);
            False makes it wait for the write.
    """

    def __init__(
        self,
        agent: Agent,
        state: State,
        *,
        spaces: Spaces,
        shapes: RecordShapes,
        timing: Timing = Timing(),
        label: str = "A2A",
        single_process: bool = False,
        write_behind: bool = True,
    ) -> None:
        self.agent = agent
        self.state = state
        self.spaces = spaces
        self.shapes = shapes
        self.timing = timing
        self.label = label
        self._name = label.lower()  # of this registry's background tasks
        self.single_process = single_process
        self.write_behind = write_behind
        self.replica = uuid.uuid4().hex[:16]
        self.push: Pusher | None = None
        retention = agent.a2a_task_retention_seconds
        for ns in (spaces.tasks, spaces.push):
            state.limit(ns, Limits(max_count=agent.a2a_max_tasks, max_age=retention))
        state.limit(spaces.events, Limits(max_count=agent.a2a_max_tasks, max_age=retention, max_len=10_000))
        # bounded (docs/limits.md): idle handles past a2a_max_tasks or park_timeout_seconds are dropped (the
        # state has the record, and `unwritten` whatever is not written yet); a handle that runs, is parked,
        # or has a waiter or subscriber is kept
        self.live: BoundedTable[str, LiveTask] = BoundedTable(
            agent.a2a_max_tasks,
            agent.park_timeout_seconds,
            touch=True,
            pinned=lambda live: bool(
                (live.runner is not None and not live.runner.done())
                or live.answer is not None
                or live.subscribers
                or live.settle_waiters
                or live.lock.locked()
            ),
            max_bytes=agent.budgets.a2a_tasks_bytes,
            size=_live_bytes,
        )
        # tasks with changes the writer has not written yet: their handles, or the one write of a task that
        # settled at once, encoded (_final)
        self.unwritten: dict[str, LiveTask | Encoded] = {}
        self._queue: deque[LiveTask | str] = deque()  # handles, and the ids of those final writes
        self._wake: asyncio.Event | None = None
        self._idle: asyncio.Event | None = None
        self._urgent: asyncio.Event | None = None
        self._writer: asyncio.Task[None] | None = None
        self._pending = 0  # queued or being written
        self._presence: asyncio.Future[None] | None = None  # heartbeat and cancel listener, started once
        self._background: set[asyncio.Task[Any]] = set()
        self._alive: dict[str, float] = {}  # replica -> until when it is known to be alive
        self._recovery: asyncio.Future[int] | None = None
        self._ticker: asyncio.Task[None] | None = None
        self._next_sweep = 0.0  # when the next orphan sweep may run (monotonic)
        self._attempts: dict[str, float] = {}  # task id -> when a take-over may be tried again
        self.take_over: Callable[[str], None] | None = None  # set by the TaskManager: resume a task here
        self.closing = False  # close() is cancelling this process's coroutines (a shutdown, not a cancel)
        self.writes = 0  # records written by this process (tests and benchmarks read it)
        self.closed = False

    # --- reading ---------------------------------------------------------------------------------------
    def local(self, task_id: str) -> LiveTask | None:
        """The task's handle in this process: live, or settled with its write still pending."""
        live = self.live.get(task_id)
        if live is not None:
            return live
        pending = self.unwritten.get(task_id)
        raw = encoded_bytes(pending)
        if raw is not None:  # its final write: a handle made of it is written instead (_write_all)
            pending = self.unwritten[task_id] = LiveTask(TaskRecord.from_dict(loads(raw)), dirty=True)
        return pending  # type: ignore[return-value]

    def _held(self, task_id: str) -> LiveTask | None:
        """The task's handle, if this process has one that may still run (never a settled one's, made anew)."""
        live = self.live.get(task_id)
        if live is not None:
            return live
        pending = self.unwritten.get(task_id)
        return pending if type(pending) is LiveTask else None

    async def ready(self) -> None:
        """On first use (never at import or start-up), fail the tasks whose holder is gone; callers wait."""
        if self._recovery is None:
            self._recovery = asyncio.ensure_future(self._recover())
            failed = await self._recovery
            if failed:
                logger.warning(
                    "failed %d %s tasks left unfinished by a process that is gone", failed, self.label
                )
        elif not self._recovery.done():
            await asyncio.shield(self._recovery)
        if self.take_over is not None and time.monotonic() >= self._next_sweep and not self.closed:
            self._next_sweep = time.monotonic() + self.timing.sweep_seconds
            self._spawn(self._sweep(), f"{self._name}-orphan-sweep")

    async def _sweep(self) -> None:
        """Take over the tasks whose replica died while they ran: their journal says running and its lease
        expired (``agentmw.journal.orphaned``). Run on a process's first use, then at most every
        ``self.timing.sweep_seconds`` when it is used; nothing runs in the background of an idle process."""
        from ..journal import orphaned

        try:
            for task_id in await orphaned(self.agent):
                if self.take_over is not None:
                    self.take_over(task_id)
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.exception("the %s orphan sweep failed; it runs again on a later request", self.label)

    async def _orphan(self, record: TaskRecord) -> bool:
        """A task whose holder is gone: True when its journal lets it go on (parked: a follow-up resumes it;
        otherwise it is taken over here), False when there is nothing to replay (the caller fails it)."""
        from ..journal import JOURNAL_NS

        try:
            found = await self.agent.state.get(JOURNAL_NS, record.id)
        except Exception:
            logger.exception("the journal of %s task %s could not be read", self.label, record.id)
            return False
        if found is None:
            return False
        status = found.value.get("status")
        if not (status == "parked" and record.parked) and self.take_over is not None:
            self.take_over(record.id)
        return True

    async def _recover(self) -> int:
        failed = 0
        for where in ({"parked": True}, {"state": "TASK_STATE_WORKING"}, {"state": "TASK_STATE_SUBMITTED"}):
            cursor = None
            while True:
                page = await self.state.scan(self.spaces.tasks, where=where, limit=500, cursor=cursor)
                for item in page.items:
                    record = TaskRecord.from_dict(item.value)
                    if await self._lost(record) and not await self._orphan(record):
                        if await self._fail_lost(record, item.version) is not None:
                            failed += 1
                if page.next is None:
                    break
                cursor = page.next
        return failed

    async def load(self, task_id: str) -> tuple[TaskRecord, int] | None:
        """The stored record and its version; a task whose holder is gone is failed first."""
        for _ in range(5):
            found = await self.state.get(self.spaces.tasks, task_id)
            if found is None:
                return None
            record = TaskRecord.from_dict(found.value)
            if record.terminal or not await self._lost(record) or await self._orphan(record):
                return record, found.version
            failed = await self._fail_lost(record, found.version)
            if failed is not None:
                return failed
        return None

    async def find(self, task_id: str) -> TaskRecord | None:
        """The latest record of a task: this process's own first, then the state's."""
        live = self.local(task_id)
        if live is not None:
            return live.record
        loaded = await self.load(task_id)
        if loaded is None and not self.write_behind:
            return None
        if loaded is None:
            # Another replica may have answered for it a moment ago, its one write still on the way.
            await asyncio.sleep(LOOK_AGAIN_SECONDS)
            loaded = await self.load(task_id)
        return loaded[0] if loaded else None

    async def _lost(self, record: TaskRecord) -> bool:
        """Whether the process that holds the task's coroutine is gone."""
        holder = record.replica
        if holder is None or holder == self.replica:
            return holder == self.replica and not record.terminal and self._held(record.id) is None
        if self.single_process:
            return True
        now = time.monotonic()
        if self._alive.get(holder, 0.0) > now:
            return False
        if await self.state.get_key(self.spaces.replicas, holder) is not None:
            if len(self._alive) > 1000:
                self._alive.clear()
            self._alive[holder] = now + min(_ALIVE_CACHE_SECONDS, self.timing.heartbeat_seconds / 10)
            return False
        return True

    async def _fail_lost(self, record: TaskRecord, version: int) -> tuple[TaskRecord, int] | None:
        """Fail a task whose holder is gone; None when another writer came first."""
        return await self.settle_stored(record, version, "TASK_STATE_FAILED", RESTART_REASON, restart=True)

    async def settle_stored(
        self, record: TaskRecord, version: int, state: str, text: str, *, restart: bool = False
    ) -> tuple[TaskRecord, int] | None:
        """Settle a task no process here holds: write its record (compare-and-set), then log the final event.
        None when the record changed meanwhile."""
        record.state = state
        record.parked = False
        record.replica = None
        record.status_timestamp = self.shapes.now_iso()
        record.status_message = (
            {
                "messageId": f"restart-{record.id}",
                "role": "ROLE_AGENT",
                "taskId": record.id,
                "contextId": record.context_id,
                "parts": [{"text": text}],
            }
            if restart
            else self.shapes.agent_message(record.id, record.context_id, [{"text": text}])
        )
        record.history.append(record.status_message)
        record.updated_at = time.time()
        try:
            version = await self.state.put(
                self.spaces.tasks, record.id, record.to_stored(None), expected_version=version
            )
        except Conflict:
            return None
        self.writes += 1
        await self.state.append(self.spaces.events, record.id, status_event(record))
        return record, version

    async def list(
        self,
        owner: str,
        *,
        context_id: str | None,
        state: str | None,
        after: float | None,
        size: int,
        offset: int,
    ) -> tuple[list[TaskRecord], int]:
        """One page of the owner's tasks, newest update first (then id), and how many match.

        The page token stays the offset it always was; the pages are read through the state's ordered scan.
        This process's own tasks are written first, so a caller sees what it just did. An anonymous caller
        (no authentication: every such caller is ``"anonymous"``) is listed nothing: its tasks are reachable
        only through their own unguessable ids, never through another anonymous caller's list (docs/auth.md).
        """
        if owner == ANONYMOUS:
            return [], 0
        for live in self.live.values():
            if not live.published and not live.quiet and live.record.owner == owner and live.holds():
                self.publish(live)
        await self.flush()
        where: dict[str, Any] = {"owner": owner}
        if context_id is not None:
            where["context_id"] = context_id
        if state is not None:
            where["state"] = state
        records: list[TaskRecord] = []
        skip, cursor, total = offset, None, None
        while True:
            page = await self.state.scan(
                self.spaces.tasks,
                where=where,
                since=after,
                limit=min(1000, skip + size),
                cursor=cursor,
                total=total is None,
            )
            if total is None:
                total = page.total or 0
            items = page.items
            if skip:
                taken = min(skip, len(items))
                items, skip = items[taken:], skip - taken
            records.extend(TaskRecord.from_dict(item.value) for item in items[: size - len(records)])
            if len(records) >= size or page.next is None:
                break
            cursor = page.next
        return records, total

    # --- changes: the runner's API ---------------------------------------------------------------------
    def open(self, record: TaskRecord) -> LiveTask:
        live = LiveTask(record)
        self.live[record.id] = live
        return live

    def adopt_handle(self, record: TaskRecord, version: int) -> LiveTask:
        """A handle for a stored task this process did not have."""
        live = LiveTask(record, version=version, published=record.state not in TERMINAL)
        self.live[record.id] = live
        return live

    def show(self, live: LiveTask) -> None:
        """A quiet task becomes visible (WORKING) before the first thing it shows."""
        if live.quiet and not live.superseded:
            live.quiet = False
            self.status(live, "TASK_STATE_WORKING", None)
            if live.publish_later:
                self.publish(live)

    def status(
        self,
        live: LiveTask,
        state: str,
        parts: list[dict[str, Any]] | None,
        metadata: Mapping[str, Any] | None = None,
    ) -> None:
        """A new status: the record changes, and the update goes to every follower."""
        if live.superseded:  # another replica settled it: its record stands
            return
        record = live.record
        live.quiet = False  # shown from now on
        record.state = state
        record.status_timestamp = self.shapes.now_iso()
        record.status_message = (
            self.shapes.agent_message(record.id, record.context_id, parts) if parts else None
        )
        if record.status_message is not None:
            record.history.append(record.status_message)
        record.parked = state == "TASK_STATE_INPUT_REQUIRED" and live.answer is not None
        self.emit(live, status_event(record, metadata) if live.subscribers or live.published else None)
        if state in SETTLED:
            _release_waiters(live)

    def artifact(self, live: LiveTask, artifact: Artifact) -> None:
        """One artifact, or one chunk of one: an artifact update, and the task's artifacts brought up to date
        (an appended chunk extends the artifact with its id). An untrusted capability's are framed already
        (the context frames its events, the pipeline its value)."""
        if live.superseded:
            return
        self.show(live)
        record = live.record
        wire = self.shapes.artifact_to_wire(artifact)
        stored = wire
        for index, existing in enumerate(record.artifacts):
            if existing["artifactId"] == artifact.artifact_id:
                # never mutated once stored (snapshots share them): replaced instead
                stored = (
                    {**existing, **wire, "parts": existing["parts"] + wire["parts"]}
                    if artifact.append
                    else wire
                )
                record.artifacts[index] = stored
                break
        else:
            record.artifacts.append(stored)
        live.streamed.add(artifact.artifact_id)  # type: ignore[arg-type]  # always set (messages.py)
        update: dict[str, Any] = {"taskId": record.id, "contextId": record.context_id, "artifact": wire}
        if artifact.append:
            update["append"] = True
        update["lastChunk"] = artifact.last_chunk
        self.emit(live, {"artifactUpdate": update})

    def add_artifact(self, live: LiveTask, artifact: dict[str, Any]) -> None:
        """A whole artifact, in wire form, added at once (a plain result)."""
        if live.superseded:
            return
        record = live.record
        record.artifacts.append(artifact)
        self.emit(
            live,
            {
                "artifactUpdate": {
                    "taskId": record.id,
                    "contextId": record.context_id,
                    "artifact": artifact,
                    "lastChunk": True,
                }
            }
            if live.subscribers or live.published
            else None,
        )

    def reply(self, live: LiveTask, message: Message) -> None:
        """A message-only answer: no task is kept; the waiting request answers with the message."""
        record = live.record
        reply = self.shapes.message_to_wire(message, None, record.context_id)
        live.reply = reply
        live.quiet = False
        if live.on_reply is not None:
            live.on_reply(reply)
        _end_followers(live, {"message": reply})
        _release_waiters(live)
        self.live.pop(record.id, None)

    def emit(self, live: LiveTask, event: dict[str, Any] | None) -> None:
        """Fan an event out: to this process's followers at once; to the log (and so to other replicas and
        the push sender) once published; the record is written when the task settles, or at once when
        published. ``event`` None: the record changed, and nobody needs the event (no follower here, not
        published), so the caller did not make it."""
        if live.superseded:
            return
        record = live.record
        record.updated_at = time.time()
        live.dirty = True
        if event is not None:
            if live.subscribers:
                for queue in list(live.subscribers):
                    queue.put_nowait(event)
            if live.published:
                live.events.append(event)
        if live.published or record.state in SETTLED:
            self._schedule(live)
        if record.state in TERMINAL:
            if live.subscribers:
                for queue in list(live.subscribers):
                    queue.put_nowait(None)
                live.subscribers.clear()
            self.live.pop(record.id, None)

    # --- persistence -----------------------------------------------------------------------------------
    def publish(self, live: LiveTask) -> None:
        """Write the task now and on every change from now on, and log its events (a quiet task: once it
        is shown)."""
        if live.quiet:
            live.publish_later = True
            return
        if live.published or live.superseded or live.reply is not None:
            return
        live.published = True
        live.dirty = True
        self._schedule(live)

    def publish_later(self, live: LiveTask) -> None:
        """Publish the task if it is still running after ``self.timing.publish_after_seconds``. One ticker for all tasks,
        not a timer each: a fast task costs nothing here but a flag; the ticker wakes every
        ``self.timing.publish_after_seconds`` while tasks run and publishes those it saw running at its previous tick."""
        if live.published:
            return
        live.young = True
        if (self._ticker is None or self._ticker.done()) and not self._ending(self._ticker):
            self._ticker = asyncio.get_running_loop().create_task(
                self._tick(), name=f"{self._name}-publish-ticker"
            )

    async def _tick(self) -> None:
        seen: set[LiveTask] = set()  # running at the previous tick: they have run at least one period now
        while not self.closed:
            await asyncio.sleep(self.timing.publish_after_seconds)
            now: set[LiveTask] = set()
            for live in list(self.live.values()):
                if live.published or not live.young or live.record.state in SETTLED or not live.holds():
                    continue
                if live in seen:
                    self.publish(live)
                else:
                    now.add(live)
            seen = now
            if not now and not any(not live.published and live.holds() for live in self.live.values()):
                return

    async def persist(self, live: LiveTask) -> None:
        """Wait until the task's changes so far are written."""
        if live.dirty or live.queued:
            self._schedule(live)
            await self.flush()
        elif live.record.id in self.unwritten:  # its final write (or a handle made of it) is pending
            await self.flush()

    @property
    def backlog(self) -> int:
        return self._pending

    async def flush(self) -> None:
        """Wait until every change this process made so far is written (at once: no batching delay)."""
        if self._pending and self._idle is not None:
            if self._urgent is not None:
                self._urgent.set()
            await self._idle.wait()

    def _ending(self, task: asyncio.Task[Any] | None) -> bool:
        """Whether no background task of this registry may start any more: it was closed, or the event loop
        is ending (it cancelled ``task``, which only :meth:`close` does otherwise). A task started then would
        never run: asyncio.run and the test runners cancel the loop's tasks once, then close it."""
        return self.closed or (task is not None and task.cancelled())

    def _schedule(self, live: LiveTask) -> None:
        if live.queued or live.handed_over:
            return
        if (self._writer is None or self._writer.done()) and self._ending(self._writer):
            live.dirty = True  # unwritten: the task is left as a shutdown leaves it
            return
        task_id = live.record.id
        final = (
            self._final(live)
            if getattr(self.state, "accepts_encoded", False)
            and live.version == 0
            and (not live.published)
            and (
                live.record.terminal
                and not (
                    live.events
                    or live.subscribers
                    or live.has_push
                    or live.superseded
                    or task_id in self.unwritten
                )
            )
            else None
        )
        if final is not None:
            live.dirty = False
            live.handed_over = True  # its record is final: nothing of this handle is written again
            self.unwritten[task_id] = final
            self._queue.append(task_id)
        else:
            live.queued = True
            self.unwritten[task_id] = live
            self._queue.append(live)
        self._pending += 1
        if self._writer is None or self._writer.done():
            self._wake = asyncio.Event()
            self._idle = asyncio.Event()
            self._urgent = asyncio.Event()
            self._writer = asyncio.get_running_loop().create_task(
                self._write_all(), name=f"{self._name}-task-writer"
            )
        self._idle.clear()  # type: ignore[union-attr]
        self._wake.set()  # type: ignore[union-attr]
        if live.published and self._urgent is not None:
            self._urgent.set()  # a followed task's changes go out at once

    @staticmethod
    def _final(live: LiveTask) -> Encoded | None:
        """The one write of a task that settled for good before anything of it was written (the fast task of a
        blocking send), encoded now. Waiting for the writer, these bytes are all that is kept of the task, not
        its handle, record and messages: a backlog of those would outlive the garbage collector's young
        generations, and every full collection would walk them again. None when the record cannot be encoded
        (its handle waits instead, and the writer says why)."""
        try:
            return encoded(live.record.to_stored(None))
        except (TypeError, ValueError):
            return None

    async def _write_all(self) -> None:
        """Write what is queued, in batches: a settled task waits up to ``WRITE_DELAY_SECONDS`` so that the
        tasks settling meanwhile are written with it (one hand-off to the store's thread for many writes,
        instead of one each); a flush, or a published task's change, writes at once."""
        wake, idle, urgent = self._wake, self._idle, self._urgent
        assert wake is not None and idle is not None and urgent is not None
        queue = self._queue
        while not self.closed:
            if not queue:
                idle.set()
                wake.clear()
                await wake.wait()
                continue
            if not urgent.is_set() and WRITE_DELAY_SECONDS > 0:
                # asyncio.timeout, not wait_for: no inner task to cancel, so a cancellation (close, or the loop
                # ending) reaches this task at once; with 3.11's wait_for, one that landed as the wait ended
                # could leave the writer waiting on a future nobody completes, and the loop's end hanging
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(WRITE_DELAY_SECONDS):
                        await urgent.wait()
            urgent.clear()
            finals: list[tuple[str, Encoded]] = []
            batch: list[LiveTask] = []
            for item in queue:
                if type(item) is not str:
                    batch.append(item)  # type: ignore[arg-type]
                    continue
                pending = self.unwritten.get(item)
                if encoded_bytes(pending) is not None:
                    finals.append((item, pending))  # type: ignore[arg-type]
                elif pending is not None and not pending.queued:  # type: ignore[union-attr]
                    batch.append(pending)  # type: ignore[arg-type]  # a handle made of it (local()): written instead
                else:
                    self._pending -= 1  # that handle is queued itself
            queue.clear()
            for live in batch:
                live.queued = False
            if finals:
                await self._write_finals(finals)
            if len(batch) <= 1:
                if batch:
                    await self._write_one(batch[0])
                continue
            # the records alone (no events to append first) go in one put_many: one transaction on SQLite,
            # one round trip on Redis; the others, and any that changed again meanwhile, one by one
            simple = [live for live in batch if live.dirty and not live.events and not live.superseded]
            rest = [live for live in batch if not (live.dirty and not live.events and not live.superseded)]
            if len(simple) > 1:
                rest.extend(await self._write_many(simple))
            else:
                rest.extend(simple)
            if rest:
                await asyncio.gather(*(self._write_one(live) for live in rest))

    async def _write_finals(self, finals: list[tuple[str, Encoded]]) -> None:
        """The first and only writes of tasks that settled at once (``_final``), in batches of ``put_many``."""
        ns = self.spaces.tasks
        for start in range(0, len(finals), WRITE_BATCH):
            chunk = finals[start : start + WRITE_BATCH]
            results: list[int | Conflict | None]
            try:
                results = list(await self.state.put_many([(ns, task_id, body, 0) for task_id, body in chunk]))
            except Exception:
                logger.exception(
                    "a batch of %d %s task records could not be written; writing them one by one",
                    len(chunk),
                    self.label,
                )
                results = [await self._put_final(task_id, body) for task_id, body in chunk]
            for (task_id, body), result in zip(chunk, results, strict=True):
                self._pending -= 1
                pending = self.unwritten.get(task_id)
                if pending is body:
                    del self.unwritten[task_id]
                    pending = None
                if not isinstance(result, int):
                    # its id was written by someone else (theirs stands), or the write failed (logged): a handle
                    # made of it meanwhile adopts the stored record, or is dropped as the write was
                    if isinstance(result, Conflict):
                        logger.warning(
                            "%s task %s was already in the state; its record there stands",
                            self.label,
                            task_id,
                        )
                    if isinstance(pending, LiveTask) and not pending.queued:
                        del self.unwritten[task_id]
                        if result is not None:
                            await self._adopt(pending)
                    continue
                self.writes += 1
                if isinstance(pending, LiveTask) and pending.version == 0:
                    # a handle of the task, made or scheduled while this write was on its way: what it writes
                    # next comes after this version; unchanged since, it has nothing left to write
                    pending.version = result
                    if not pending.queued:
                        pending.dirty = False
                        del self.unwritten[task_id]

    async def _put_final(self, task_id: str, body: Encoded) -> int | Conflict | None:
        try:
            return await self._retry(
                lambda: self.state.put(
                    self.spaces.tasks,
                    task_id,
                    body,  # type: ignore[arg-type]
                    expected_version=0,
                )
            )  # type: ignore[no-any-return]
        except Conflict as conflict:
            return conflict
        except Exception:
            logger.exception("%s task %s could not be written to the state", self.label, task_id)
            return None

    async def _write_many(self, lives: list[LiveTask]) -> list[LiveTask]:
        """Write the records of ``lives`` in batches of ``put_many`` (compare-and-set each); returns those
        still to write one by one (changed again meanwhile, or the batch failed: the fallback)."""
        put_many = getattr(self.state, "put_many", None)
        if put_many is None:
            return lives
        again: list[LiveTask] = []
        for start in range(0, len(lives), WRITE_BATCH):
            chunk = lives[start : start + WRITE_BATCH]
            bodies = []
            holders: list[str | None] = []
            for live in chunk:
                record = live.record
                live.dirty = False
                if not record.terminal:
                    live.published = True
                holders.append(self.replica if not record.terminal and live.holds() else None)
                bodies.append(record.to_stored(holders[-1]))
            if any(holder is not None for holder in holders):
                await self._present()
            try:
                results = await put_many(
                    [
                        (self.spaces.tasks, live.record.id, body, live.version)
                        for live, body in zip(chunk, bodies, strict=True)
                    ]
                )
            except Exception:
                logger.exception(
                    "a batch of %d %s task records could not be written; writing them one by one",
                    len(chunk),
                    self.label,
                )
                for live in chunk:
                    live.dirty = True
                again.extend(chunk)
                continue
            for live, holder, result in zip(chunk, holders, results, strict=True):
                if isinstance(result, Conflict):
                    await self._adopt(live)
                else:
                    live.version = result
                    live.record.replica = holder
                    self.writes += 1
                if live.dirty or live.events:
                    again.append(live)
                else:
                    self._pending -= 1
                    if not live.queued and self.unwritten.get(live.record.id) is live:
                        del self.unwritten[live.record.id]
        return again

    async def _write_one(self, live: LiveTask) -> None:
        try:
            await self._write(live)
        except Exception:
            logger.exception("%s task %s could not be written to the state", self.label, live.record.id)
        finally:
            self._pending -= 1
            if not live.queued and self.unwritten.get(live.record.id) is live:
                del self.unwritten[live.record.id]

    async def _write(self, live: LiveTask) -> None:
        """Append the task's pending events, then write its record as it was when they were taken."""
        record = live.record
        while (live.dirty or live.events) and not live.superseded:
            events, live.events = live.events, []
            dirty, live.dirty = live.dirty, False
            if not record.terminal:
                live.published = True  # what happens from here on is logged
            holder = self.replica if dirty and not record.terminal and live.holds() else None
            body = record.to_stored(holder) if dirty else None  # the record as it is with these events
            if holder is not None:
                await self._present()
            for event in events:
                record.log_id = await self._retry(
                    lambda event=event: self.state.append(self.spaces.events, record.id, event)
                )
            if live.has_push and events and self.push is not None:
                self.push.watch(record.id)
            if body is None:
                continue
            if record.log_id:
                body["log_id"] = record.log_id  # the last of the events appended above
            try:
                live.version = await self._retry(
                    lambda body=body: self.state.put(
                        self.spaces.tasks, record.id, body, expected_version=live.version
                    )
                )
                record.replica = holder
                self.writes += 1
            except Conflict:
                await self._adopt(live)
                return

    async def _retry(self, call: Callable[[], Any]) -> Any:
        for attempt in range(_WRITE_ATTEMPTS):
            try:
                return await call()
            except Conflict:
                raise
            except Exception:
                if attempt == _WRITE_ATTEMPTS - 1 or self.closed:
                    raise
                await asyncio.sleep(0.05 * (attempt + 1))
        raise AssertionError("unreachable")

    async def _adopt(self, live: LiveTask) -> None:
        """Another replica wrote the task first (it failed or canceled it): that record stands; the
        coroutine here stops and the followers here get its final status. A record that cannot be read now
        leaves this one in its place for them (the writer must not die of it: every flush would wait forever)."""
        try:
            found = await self.state.get(self.spaces.tasks, live.record.id)
        except Exception:
            logger.exception(
                "%s task %s was written by another replica, whose record could not be read",
                self.label,
                live.record.id,
            )
            found = None
        live.superseded = True
        if found is not None:
            live.record = TaskRecord.from_dict(found.value)
            live.version = found.version
        _end_followers(live, status_event(live.record))
        _release_waiters(live)
        if live.answer is not None and not live.answer.done():
            live.answer.cancel()
        if live.runner is not None and not live.runner.done():
            live.runner.cancel()
        self.live.pop(live.record.id, None)
        logger.info(
            "%s task %s was settled by another replica (%s)", self.label, live.record.id, live.record.state
        )

    # --- presence: heartbeat and cancel listener ----------------------------------------------------------
    async def _present(self) -> None:
        """Before this process writes that it holds a task: its heartbeat is up, and it listens for cancels."""
        if self.single_process:
            return
        if self._presence is None:
            self._presence = asyncio.get_running_loop().create_future()
            started = asyncio.get_running_loop().create_future()
            self._spawn(self._heartbeat(), f"{self._name}-heartbeat")
            self._spawn(self._listen(started), f"{self._name}-cancel-listener")
            try:
                await self.state.set_key(
                    self.spaces.replicas, self.replica, {"owner": self.replica}, self.timing.heartbeat_seconds
                )
                await asyncio.wait_for(asyncio.shield(started), 5.0)
            finally:
                self._presence.set_result(None)
        elif not self._presence.done():
            await asyncio.shield(self._presence)

    def _spawn(self, coroutine: Any, name: str) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(coroutine, name=name)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task

    async def _heartbeat(self) -> None:
        while not self.closed:
            await asyncio.sleep(self.timing.heartbeat_seconds / 3)
            try:
                if not await self.state.renew(
                    self.spaces.replicas, self.replica, self.replica, self.timing.heartbeat_seconds
                ):
                    await self.state.set_key(
                        self.spaces.replicas,
                        self.replica,
                        {"owner": self.replica},
                        self.timing.heartbeat_seconds,
                    )
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.exception("%s heartbeat of replica %s failed; retrying", self.label, self.replica)

    async def _listen(self, started: asyncio.Future[None]) -> None:
        while not self.closed:
            try:
                async with self.state.subscribe(self.spaces.cancel) as sub:
                    if not started.done():
                        started.set_result(None)
                    async for _, message in sub:
                        live = self._held(str(message.get("task")))
                        if live is None or live.superseded:
                            continue
                        if message.get("moved"):  # resumed elsewhere: the coroutine parked here yields
                            self._spawn(self._yield_if_moved(live), f"{self._name}-yield")
                        elif message.get("settled"):  # settled elsewhere already: that record stands
                            self._spawn(self._adopt(live), f"{self._name}-adopt")
                        elif live.runner is not None and not live.runner.done():
                            live.runner.cancel()
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.exception(
                    "%s cancel listener of replica %s failed; listening again", self.label, self.replica
                )
                await asyncio.sleep(0.5)

    # --- following a task another process runs -----------------------------------------------------------
    async def follow(self, record: TaskRecord) -> AsyncIterator[dict[str, Any]]:
        """The task's events after ``record`` (from its log), until it is terminal. Ends too when the task's
        holder is gone (the task is failed, and that is the last event)."""
        after = record.log_id
        task_id = record.id
        while True:
            entries = await self.state.read(self.spaces.events, task_id, after, 100, block=1.0)
            for event_id, event in entries:
                after = event_id
                yield event
                if is_final(event):
                    return
            if entries:
                continue
            loaded = await self.load(task_id)
            if loaded is None:
                return
            current = loaded[0]
            if current.terminal:
                tail = await self.state.read(self.spaces.events, task_id, after, 100)
                for _, event in tail:
                    yield event
                    if is_final(event):
                        return
                yield status_event(current)
                return

    async def cancel_elsewhere(self, record: TaskRecord, version: int) -> TaskRecord | None:
        """Cancel a task this process does not hold. None: the record changed meanwhile (read it again)."""
        if record.replica is None or await self._lost(record):
            settled = await self.settle_stored(
                record, version, "TASK_STATE_CANCELED", "The task was canceled."
            )
            return settled[0] if settled else None
        await self.state.publish(self.spaces.cancel, {"task": record.id})
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timing.cancel_wait_seconds
        after = record.log_id
        while (remaining := deadline - loop.time()) > 0:
            entries = await self.state.read(
                self.spaces.events, record.id, after, 100, block=min(remaining, 1.0)
            )
            for event_id, event in entries:
                after = event_id
                if is_final(event):
                    return await self._settled_record(record, event)
            if not entries:
                loaded = await self.load(record.id)
                if loaded is None or loaded[0].terminal:
                    return loaded[0] if loaded else record
        loaded = await self.load(record.id)
        return loaded[0] if loaded else record

    async def _settled_record(self, record: TaskRecord, final: dict[str, Any]) -> TaskRecord:
        """The record as of its final event: its holder appends the event, then writes the record, so the
        record may lag a moment behind; without it after a short wait, the event's status is applied."""
        for _ in range(20):
            loaded = await self.load(record.id)
            if loaded is not None and loaded[0].terminal:
                return loaded[0]
            await asyncio.sleep(0.01)
        status = final["statusUpdate"]["status"]
        record.state = status["state"]
        record.status_timestamp = status.get("timestamp", record.status_timestamp)
        record.status_message = status.get("message")
        return record

    async def fail_elsewhere(self, record: TaskRecord, version: int, text: str) -> bool:
        """Fail a task whose coroutine another process holds, and tell that process to stop it."""
        holder = record.replica
        settled = await self.settle_stored(record, version, "TASK_STATE_FAILED", text)
        if settled is not None and holder not in (None, self.replica) and not self.single_process:
            with contextlib.suppress(Exception):
                await self.state.publish(self.spaces.cancel, {"task": record.id, "settled": True})
        return settled is not None

    async def moved(self, live: LiveTask, holder: str | None) -> None:
        """This process resumed a task another process had parked: that process's coroutine yields (it finds
        the journal moved on and stops with ``taken_over``, writing nothing)."""
        if holder not in (None, self.replica) and not self.single_process:
            with contextlib.suppress(Exception):
                await self.state.publish(self.spaces.cancel, {"task": live.record.id, "moved": True})

    async def _yield_if_moved(self, live: LiveTask) -> None:
        """The coroutine parked here stops once the journal shows the answer recorded elsewhere (the
        resuming replica says so before it writes the answer, so this looks until it sees it, or gives up)."""
        from ..journal import JOURNAL_NS

        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timing.cancel_wait_seconds
        while live.answer is not None and not live.answer.done() and loop.time() < deadline:
            found = await self.agent.state.get(JOURNAL_NS, live.record.id)
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
        if self.live.get(record.id) is live:
            self.live.pop(record.id, None)
        _release_waiters(live)
        for queue in list(live.subscribers):
            self._spawn(self._hand_over(record, queue), f"{self._name}-follow-{record.id}")
        live.subscribers.clear()

    async def _hand_over(self, record: TaskRecord, queue: asyncio.Queue[dict[str, Any] | None]) -> None:
        try:
            async for event in self.follow(record):
                queue.put_nowait(event)
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.exception("following %s task %s from its log failed", self.label, record.id)
        finally:
            queue.put_nowait(None)

    # --- push configs (read and written by any replica) --------------------------------------------------
    async def push_configs(self, task_id: str) -> list[dict[str, Any]]:
        found = await self.state.get(self.spaces.push, task_id)
        return list(found.value.get("configs", [])) if found else []

    async def update_push(
        self, task_id: str, change: Callable[[dict[str, Any]], dict[str, Any] | None]
    ) -> dict[str, Any]:
        """Read-modify-write the task's push record (compare-and-set, retried); ``change`` returns the new
        value, or None to leave it."""
        while True:
            found = await self.state.get(self.spaces.push, task_id)
            value, version = (
                (found.value, found.version) if found else ({"configs": [], "delivered": 0, "done": False}, 0)
            )
            new = change(dict(value))
            if new is None:
                return value
            try:
                await self.state.put(self.spaces.push, task_id, new, expected_version=version)
                return new
            except Conflict:
                continue

    # --- the end ---------------------------------------------------------------------------------------
    async def close(self) -> None:
        """Cancel this process's coroutines, write what is pending (briefly), stop the background tasks.
        A task with a journal is left as it is (running, or parked), for another process, or this one after a
        restart, to resume (docs/durability.md); one without is canceled, as before."""
        self.closing = True
        for live in list(self.live.values()):
            if live.runner is not None and not live.runner.done():
                live.runner.cancel()
        if self._pending:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.flush(), 2.0)
        self.closed = True
        if self._wake is not None:
            self._wake.set()
        for live in list(self.live.values()):  # followers of the tasks left for others: their streams end
            for queue in list(live.subscribers):
                queue.put_nowait(None)
            live.subscribers.clear()
        tasks = list(self._background) + [t for t in (self._writer, self._ticker) if t is not None]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        if self._presence is not None and not self.single_process:
            with contextlib.suppress(Exception):
                await self.state.release(self.spaces.replicas, self.replica, self.replica)
