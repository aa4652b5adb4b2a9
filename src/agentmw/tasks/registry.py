"""Tasks as versioned records in the shared state, and the fan-out of their events: the part of the task
model every face shares (A2A tasks, MCP tasks), as a client of the lifecycle engine (``agentmw.lifecycle``).

The registry is the part of a face's task manager that does not run anything: it keeps each task's record,
its live handle in this process, and sends every change to whoever follows the task. A face's runner
changes tasks only through its public calls: :meth:`TaskRegistry.show`, :meth:`status`, :meth:`artifact`,
:meth:`reply`, :meth:`emit`. Each face keeps its tasks in namespaces of its own (:class:`Spaces`), so an
A2A task and an MCP task never meet, though both are the same record (``lifecycle.TaskRecord``, A2A 1.0
shaped so that rendering an A2A task is a copy) and run the same way.

What the engine does for it (docs/durability.md; docs/a2a.md, "Stores, restarts and replicas"):

- **Records** (``<face>.tasks``): every write is a compare-and-set (``lifecycle.Commits``), so a task that
  another replica failed or canceled is never overwritten (the local handle adopts the other's terminal
  record instead: :meth:`_adopt`).
- **One write for a fast task.** A task's intermediate states stay in memory for the process that runs it;
  its record is written once, when it settles. **Write-through** (the default): an answer that names a state
  (a result, INPUT_REQUIRED, an accepted answer) waits until the record holding it is committed
  (:meth:`persist`); the single writer commits the records of concurrent requests together (group commit,
  ``lifecycle.Commits``), and a write the store refuses stays queued and is retried; the answer then gets
  ``StoreUnavailable`` after ``Cadence.commit_wait_seconds``. With ``write_behind=True`` (opt-in) the answer
  goes out before its write (batched for ``WRITE_DELAY_SECONDS``). Either way at most ``MAX_BACKLOG``
  writes wait: past that a send waits for the writer, or, while the store refuses writes, fails at once
  with ``StoreUnavailable``. A task is *published* (written at once and on
  every change, each event appended to its log) when it still runs after ``Cadence.publish_after_seconds``,
  or when its face asks (it streams, is returned immediately, has push notifications, stays interrupted, is
  an MCP task handle).
- **Events** of a published task go to its log (``lifecycle.EventLog``); a follower on another replica reads
  the record, then the log after the record's ``log_id`` (:meth:`follow`).
- **Which process holds the coroutine**: ``record.replica``, with a heartbeat (``lifecycle.Heartbeat``). A
  task whose holder is gone goes on from its journal (parked: an answer on any replica resumes it; running: a
  replica takes it over, :meth:`_orphan`, the sweep of :meth:`ready` and its timer, which from the first use
  on sweeps every ``Cadence.sweep_seconds`` with no request needed); one with no journal is failed by whoever
  reads it (:meth:`load`).
- **Cancel** goes over the bus (``<face>.cancel``, ``lifecycle.BusListener``) to the process that holds it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from .._bounded import BoundedTable
from .._transport import loads
from ..journal import JOURNAL_NS
from ..lifecycle import (
    LEFT_FOR_ANOTHER,
    RESTART_REASON,
    SETTLED,
    TERMINAL,
    Background,
    BusListener,
    Cadence,
    Commits,
    EventLog,
    Heartbeat,
    Records,
    Spaces,
    Sweeper,
    TaskRecord,
    TaskState,
    every,
    limit,
)
from ..messages import Artifact, Message
from ..state import Conflict, Json, State, Versioned, encoded_bytes
from .elsewhere import Elsewhere
from .events import is_final, status_event, status_of
from .live import LiveTask, ResumedElsewhere, live_bytes, pinned, release_waiters

__all__ = [
    "MAX_BACKLOG",
    "SETTLED",
    "Bounds",
    "Cadence",
    "LiveTask",
    "Pusher",
    "RecordShapes",
    "ResumedElsewhere",
    "Spaces",
    "TaskRegistry",
    "is_final",
    "status_event",
    "status_of",
]

logger = logging.getLogger("agentmw")

ANONYMOUS = "anonymous"  # the identity of every caller without authentication (agentmw.identity)

MAX_BACKLOG = 256  # writes the writer may be behind before a send waits for it (or fails, the store refusing)
WRITE_DELAY_SECONDS = 0.005  # a settled task's write waits this long for others to share the hand-off
LOOK_AGAIN_SECONDS = 0.025  # a lookup that misses looks again once after this (another replica's write)
_EMPTY_PUSH: dict[str, Any] = {"configs": [], "delivered": 0, "done": False}
_DEFAULT_TIMING = Cadence()
# the tasks whose holder may be gone: parked ones, then those that were running
_MAYBE_LOST = ({"parked": True}, {"state": TaskState.WORKING.value}, {"state": TaskState.SUBMITTED.value})


@dataclass(frozen=True, slots=True)
class Bounds:
    """How many tasks a face keeps, and for how long (docs/limits.md)."""

    max_tasks: int  # records and logs in the state; handles in this process
    retention_seconds: float  # a record or log after its last write
    idle_seconds: float  # an idle handle in this process (the park timeout)
    max_bytes: int  # the handles' byte budget (their messages, as the face measured them)


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


class TaskRegistry:
    """The records, live handles and followers of one face's tasks (one agent's), in ``state``.

    Args:
        spaces: the state's names this face keeps its tasks under (``Spaces.of("a2a")``).
        shapes: how the face's messages and artifacts are kept in a record.
        timing: heartbeats, leases, sweeps (the face's own).
        label: the face, as logs name it ("A2A", "MCP").
        write_behind: a blocking send answers before its task's one write lands (opt-in; see the module
            doc); False (the default): every answer waits until its record is committed.
    """

    def __init__(
        self,
        state: State,
        *,
        bounds: Bounds,
        journal: State,
        orphans: Callable[[], Awaitable[Sequence[str]]],
        spaces: Spaces,
        shapes: RecordShapes,
        timing: Cadence = _DEFAULT_TIMING,
        label: str = "A2A",
        write_behind: bool = False,
    ) -> None:
        self.journal = journal  # where the tasks' journals are (agentmw.journal), read to resume or take over
        self._orphans = orphans  # executions whose replica died while they ran (agentmw.journal.orphaned)
        self.spaces = spaces
        self.shapes = shapes
        self.timing = timing
        self.label = label
        self._name = label.lower()  # of this registry's background tasks
        self.write_behind = write_behind
        self.replica = uuid.uuid4().hex[:16]
        self.push: Pusher | None = None
        retention = bounds.retention_seconds
        limit(state, (spaces.tasks, spaces.push), max_count=bounds.max_tasks, max_age=retention)
        limit(state, (spaces.events,), max_count=bounds.max_tasks, max_age=retention, max_len=10_000)
        # bounded (docs/limits.md): idle handles past a2a_max_tasks or park_timeout_seconds are dropped (the
        # state has the record, and `unwritten` whatever is not written yet)
        self.live: BoundedTable[str, LiveTask] = BoundedTable(
            bounds.max_tasks,
            bounds.idle_seconds,
            touch=True,
            pinned=pinned,
            max_bytes=bounds.max_bytes,
            size=live_bytes,
        )
        self.background = Background()
        self.heartbeat = Heartbeat(
            state,
            spaces.replicas,
            self.replica,
            timing.heartbeat_seconds,
            label=label,
            background=self.background,
        )
        self.elsewhere = Elsewhere(self)
        self.listener = BusListener(
            state, spaces.cancel, self.elsewhere.on_bus, label=f"{label} cancel listener"
        )
        self.commits: Commits[LiveTask] = Commits(
            state,
            tasks=spaces.tasks,
            events=spaces.events,
            replica=self.replica,
            label=label,
            present=self._present,
            adopt=self._adopt,
            pushed=self._pushed,
            delay=self._write_delay,
            stop=lambda: self.closed,
        )
        self.log = EventLog(state, spaces.events)
        self.pushes = Records(state, spaces.push)
        self.sweeper = Sweeper(timing.sweep_seconds, timing.retry_take_over_seconds)
        self._state = state
        self._recovery: asyncio.Future[int] | None = None
        self._ticker: asyncio.Task[None] | None = None
        self._sweeping: asyncio.Task[None] | None = None  # the orphan sweep's timer, from the first use on
        self.take_over: Callable[[str], None] | None = None  # set by the TaskManager: resume a task here
        self.closing = False  # close() is cancelling this process's coroutines (a shutdown, not a cancel)
        self.closed = False

    @property
    def state(self) -> State:
        return self._state

    @state.setter
    def state(self, state: State) -> None:
        """Point this process at another state (tests cut a process off its file, as a crash would)."""
        self._state = state
        for part in (self.heartbeat, self.listener, self.commits, self.log, self.pushes):
            part.state = state

    def _write_delay(self) -> float:
        """Write-behind waits for company; write-through writes at once (group commit: what is queued while a
        batch is on its way goes in the next)."""
        return WRITE_DELAY_SECONDS if self.write_behind else 0.0

    @property
    def unwritten(self) -> dict[str, LiveTask | Any]:
        """Tasks with changes not written yet: their handles, or the encoded one write of a fast task."""
        return self.commits.unwritten

    @property
    def writes(self) -> int:
        """Records written by this process (tests and benchmarks read it)."""
        return self.commits.writes

    @property
    def _background(self) -> set[asyncio.Task[Any]]:
        return self.background.tasks

    # --- reading ---------------------------------------------------------------------------------------
    def local(self, task_id: str) -> LiveTask | None:
        """The task's handle in this process: live, or settled with its write still pending."""
        live: LiveTask | None = self.live.get(task_id)  # (the table's get is untyped)
        if live is not None:
            return live
        pending = self.commits.unwritten.get(task_id)
        raw = encoded_bytes(pending)
        if raw is not None:  # its final write: a handle made of it is written instead (Commits)
            made = LiveTask(TaskRecord.from_dict(loads(raw)), dirty=True)
            self.commits.unwritten[task_id] = made
            return made
        return pending if isinstance(pending, LiveTask) else None

    def _held(self, task_id: str) -> LiveTask | None:
        """The task's handle, if this process has one that may still run (never a settled one's, made anew)."""
        live: LiveTask | None = self.live.get(task_id)  # (the table's get is untyped)
        if live is not None:
            return live
        pending = self.commits.unwritten.get(task_id)
        return pending if isinstance(pending, LiveTask) else None

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
        if self.take_over is None or self.closed:
            return
        if self._sweeping is None:
            # from the first use on, a timer sweeps too: a follower of a task whose holder died (a stream,
            # SubscribeToTask, a blocking send) gets the take-over or the failure with no other request
            self._sweeping = self.background.spawn(
                every(
                    lambda: self.timing.sweep_seconds, self._sweep_if_due, label=f"{self.label} orphan sweep"
                ),
                f"{self._name}-orphan-sweep-timer",
            )
        if self.sweeper.due():
            self.background.spawn(
                self.sweeper.sweep(self._orphans, self.take_over, label=self.label),
                f"{self._name}-orphan-sweep",
            )

    async def _sweep_if_due(self) -> None:
        if self.take_over is not None and not (self.closed or self.closing) and self.sweeper.due():
            await self.sweeper.sweep(self._orphans, self.take_over, label=self.label)

    async def _orphan(self, record: TaskRecord) -> bool:
        """A task whose holder is gone: True when its journal lets it go on (parked: a follow-up resumes it;
        otherwise it is taken over here), False when there is nothing to replay (the caller fails it)."""
        try:
            found = await self.journal.get(JOURNAL_NS, record.id)
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
        for where in _MAYBE_LOST:
            cursor = None
            while True:
                page = await self._state.scan(self.spaces.tasks, where=where, limit=500, cursor=cursor)
                for item in page.items:
                    record = TaskRecord.from_dict(item.value)
                    if (
                        await self._lost(record)
                        and not await self._orphan(record)
                        and await self._fail_lost(record, item.version) is not None
                    ):
                        failed += 1
                if page.next is None:
                    break
                cursor = page.next
        return failed

    async def load(self, task_id: str) -> tuple[TaskRecord, int] | None:
        """The stored record and its version; a task whose holder is gone is failed first."""
        for _ in range(5):
            found = await self._state.get(self.spaces.tasks, task_id)
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
        return not await self.heartbeat.alive(holder)

    async def _fail_lost(self, record: TaskRecord, version: int) -> tuple[TaskRecord, int] | None:
        """Fail a task whose holder is gone; None when another writer came first."""
        return await self.settle_stored(record, version, TaskState.FAILED, RESTART_REASON, restart=True)

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
            version = await self._state.put(
                self.spaces.tasks, record.id, record.to_stored(None), expected_version=version
            )
        except Conflict:
            return None
        self.commits.writes += 1
        await self._state.append(self.spaces.events, record.id, status_event(record))
        return record, version

    async def page(
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
        await self.flush(self.timing.commit_wait_seconds)
        where: dict[str, Any] = {"owner": owner}
        if context_id is not None:
            where["context_id"] = context_id
        if state is not None:
            where["state"] = state
        records: list[TaskRecord] = []
        skip, cursor, total = offset, None, None
        while True:
            found = await self._state.scan(
                self.spaces.tasks,
                where=where,
                since=after,
                limit=min(1000, skip + size),
                cursor=cursor,
                total=total is None,
            )
            if total is None:
                total = found.total or 0
            items = found.items
            if skip:
                taken = min(skip, len(items))
                items, skip = items[taken:], skip - taken
            records.extend(TaskRecord.from_dict(item.value) for item in items[: size - len(records)])
            if len(records) >= size or found.next is None:
                break
            cursor = found.next
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
            self.status(live, TaskState.WORKING, None)
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
        record.parked = state == TaskState.INPUT_REQUIRED and live.answer is not None
        self.emit(live, status_event(record, metadata) if live.subscribers or live.published else None)
        if state in SETTLED:
            release_waiters(live)

    def ask_again_here(self, live: LiveTask, parts: list[dict[str, Any]]) -> None:
        """An answer to a task parked in another process could not be read: asked again, to this caller alone.

        Nothing of it is written: the record stays as its holder wrote it (parked there, held by it), so that
        a later answer there, read, completes the task with its own write, and one here resumes it from the
        journal. A write from here would un-park it and supersede the holder's (which then adopts it and runs
        the skill again on the next message). The handle is dropped, so what this process reads of the task
        next comes from the state."""
        record = live.record
        record.state = TaskState.INPUT_REQUIRED
        record.status_timestamp = self.shapes.now_iso()
        record.status_message = self.shapes.agent_message(record.id, record.context_id, parts)
        record.history.append(record.status_message)
        live.quiet = False
        live.superseded = True  # every later change of this handle is dropped, never written
        live.subscribers.end(status_event(record))
        release_waiters(live)
        if self.live.get(record.id) is live:
            self.live.pop(record.id, None)

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

    def name(self, live: LiveTask) -> None:
        """A quiet task's id is given out before it is shown (an immediate repeat of its message): it is
        written now, and kept if it answers with a message alone, so that the id names a task."""
        if live.named or live.superseded:
            return
        live.named = True
        live.dirty = True
        self.commits.schedule(live)

    def reply(self, live: LiveTask, message: Message) -> None:
        """A message-only answer: no task is kept (unless its id was given out: :meth:`name`); the waiting
        request answers with the message."""
        record = live.record
        reply = self.shapes.message_to_wire(message, None, record.context_id)
        live.reply = reply
        live.quiet = False
        if live.on_reply is not None:
            live.on_reply(reply)
        live.subscribers.end({"message": reply})
        release_waiters(live)
        if live.named:  # completed, with the message as its status (its followers have had the message)
            self.status(live, TaskState.COMPLETED, reply["parts"])
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
                live.subscribers.send(event)
            if live.published:
                live.events.append(event)
        if live.published or record.state in SETTLED:
            self.commits.schedule(live)
        if record.state in TERMINAL:
            if live.subscribers:
                live.subscribers.end()
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
        self.commits.schedule(live)

    def publish_later(self, live: LiveTask) -> None:
        """Publish the task if it is still running after ``self.timing.publish_after_seconds``. One ticker for
        all tasks, not a timer each: a fast task costs nothing here but a flag; the ticker wakes every
        ``publish_after_seconds`` while tasks run and publishes those it saw running at its previous tick."""
        if live.published:
            return
        live.young = True
        ticker = self._ticker
        if (ticker is None or ticker.done()) and not (
            self.closed or (ticker is not None and ticker.cancelled())
        ):
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
        """Wait until the task's changes so far are committed (group commit: with the other tasks' changes
        queued meanwhile). Past ``Cadence.commit_wait_seconds``, :class:`~agentmw.errors.StoreUnavailable`: the
        caller is told nothing was acknowledged, while the write stays queued until the store takes it."""
        if live.dirty or live.queued:
            self.commits.schedule(live)
        await self.commits.committed(live.record.id, self.timing.commit_wait_seconds)

    async def committed(self, task_id: str) -> None:
        """Wait until what is pending of the task (its handle's changes, or its one final write) is committed;
        StoreUnavailable past ``Cadence.commit_wait_seconds``, as :meth:`persist`."""
        await self.commits.committed(task_id, self.timing.commit_wait_seconds)

    @property
    def backlog(self) -> int:
        return self.commits.pending

    async def room(self) -> None:
        """Before a new send: when ``MAX_BACKLOG`` writes wait already, wait for the writer (bounded by
        ``Cadence.commit_wait_seconds``), or fail at once with StoreUnavailable while the store refuses writes:
        a send never waits without bound behind writes the store does not take."""
        if self.commits.pending <= MAX_BACKLOG:
            return
        if self.commits.failures:
            raise self.commits.unavailable()
        await self.commits.flush(self.timing.commit_wait_seconds)

    async def flush(self, timeout: float | None = None) -> None:
        """Wait until every change this process made so far is written (at once: no batching delay); past
        ``timeout`` seconds (None: no bound), StoreUnavailable."""
        await self.commits.flush(timeout)

    def _pushed(self, task_id: str) -> None:
        if self.push is not None:
            self.push.watch(task_id)

    async def _adopt(self, live: LiveTask) -> None:
        """Another replica wrote the task first (it failed or canceled it): that record stands; the
        coroutine here stops and the followers here get its final status. A record that cannot be read now
        leaves this one in its place for them (the writer must not die of it: every flush would wait forever)."""
        try:
            found = await self._state.get(self.spaces.tasks, live.record.id)
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
        live.subscribers.end(status_event(live.record))
        release_waiters(live)
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
        await self.heartbeat.start(self.listener.run)

    # --- push configs (read and written by any replica) --------------------------------------------------
    async def push_configs(self, task_id: str) -> list[dict[str, Any]]:
        found = await self.pushes.get(task_id)
        return list(found.value.get("configs", [])) if found else []

    async def update_push(
        self, task_id: str, change: Callable[[dict[str, Any]], dict[str, Any] | None]
    ) -> dict[str, Any]:
        """Read-modify-write the task's push record (compare-and-set, retried); ``change`` returns the new
        value, or None to leave it."""
        left: list[dict[str, Any]] = []

        def make(found: Versioned | None) -> Json | None:
            value = found.value if found else _EMPTY_PUSH
            new = change(dict(value))
            if new is None:
                left.append(value)
            return new

        written = await self.pushes.commit(task_id, make)
        return written[0] if written is not None else left[-1]

    # --- the end ---------------------------------------------------------------------------------------
    async def close(self) -> None:
        """Cancel this process's coroutines, write what is pending (briefly), stop the background tasks.
        A task with a journal is left as it is (running, or parked), for another process, or this one after a
        restart, to resume (docs/durability.md); one without is canceled, as before."""
        self.closing = True
        for live in list(self.live.values()):
            if live.runner is not None and not live.runner.done():
                live.runner.cancel(LEFT_FOR_ANOTHER)  # a shutdown: what it started elsewhere goes on
        if self.commits.pending:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.flush(), 2.0)
            if self.commits.pending:
                logger.error(
                    "%d %s task record writes were still unwritten at shutdown (the store did not take them); "
                    "they are lost",
                    self.commits.pending,
                    self.label,
                )
        self.closed = True
        self.listener.closed = True
        self.heartbeat.closed = True
        self.commits.writer.close()
        for live in list(self.live.values()):  # followers of the tasks left for others: their streams end
            live.subscribers.end()
            release_waiters(live)  # and a request waiting for one to settle answers with it as it is
        await self.background.close(self.commits.writer.task, self._ticker)
        await self.heartbeat.stop()
