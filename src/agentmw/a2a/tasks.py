"""A2A tasks over the core: choose the capability, gather its arguments, run it, park it on questions.

One :class:`TaskManager` per agent. A task's coroutine runs in its own asyncio task, so a caller that
disconnects (or asked ``returnImmediately``) does not stop it, ``CancelTask`` reaches it, and a
question (``ctx.ask``) parks it in memory until a follow-up message on the same task answers.
Records go to the store on every state change; live streams and parked coroutines are this
process's (see docs/a2a.md for replicas and restarts).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError
from starlette.requests import HTTPConnection

from .._bounded import BoundedTable
from ..capability import Capability
from ..context import Ask, Context, InputRequest, answer_from
from ..events import ArtifactUpdate, CoreEvent, TextDelta
from ..messages import Artifact, Message
from ..runtime import Outcome, describe_validation_error, invoke
from ..stores.base import INTERRUPTED, TERMINAL, ListQuery, TaskRecord, TaskStore
from .wire import (
    INVALID_PARAMS,
    TASK_NOT_CANCELABLE,
    TASK_NOT_FOUND,
    UNSUPPORTED_OPERATION,
    A2AError,
    agent_message,
    artifact_to_wire,
    message_from_wire,
    message_to_wire,
    new_id,
    now_iso,
    parts_from_outcome,
)

if TYPE_CHECKING:
    from ..agent import Agent
    from .push import PushSender

__all__ = ["TaskManager", "LiveTask"]

logger = logging.getLogger("agentmw")
_background: set[asyncio.Task[Any]] = set()  # fire-and-forget deliveries, held so they are not collected
SETTLED = TERMINAL | INTERRUPTED


@dataclass(eq=False)
class LiveTask:
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
    seen: _Seen | None = None  # the messageId record of the message that created it


@dataclass(eq=False, slots=True)
class _Seen:
    """What one message got: its task, or its message-only reply."""

    task_id: str
    reply: dict[str, Any] | None = None


def _fingerprint(message: dict[str, Any], metadata: Mapping[str, Any] | None) -> str:
    """What makes a repeat the *same* message: everything it says (parts, metadata, taskId, contextId, ...)
    and the request's metadata; the messageId itself is the lookup key."""
    body = {k: v for k, v in message.items() if k != "messageId"}
    canonical = json.dumps([body, metadata or {}], sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


class TaskManager:
    def __init__(self, agent: Agent, store: TaskStore, push: PushSender | None = None) -> None:
        self.agent = agent
        self.store = store
        self.push = push
        # bounded (docs/limits.md): idle handles past a2a_max_tasks or park_timeout_seconds are dropped (the
        # store still has the record); one that runs, is parked, or has a waiter or subscriber is kept
        self.live: BoundedTable[str, LiveTask] = BoundedTable(
            agent.a2a_max_tasks, agent.park_timeout_seconds, touch=True, pinned=lambda live: bool(
                (live.runner is not None and not live.runner.done()) or live.answer is not None
                or live.subscribers or live.settle_waiters or live.lock.locked()))
        self._recovery: asyncio.Future[int] | None = None
        # (owner, messageId) -> {fingerprint: what that message got}: at most a2a_max_message_ids, each for
        # A2ASettings.message_id_ttl_seconds (apart from idempotency keys)
        self._messages: BoundedTable[tuple[str, str], dict[str, _Seen]] = BoundedTable(
            agent.a2a_max_message_ids, agent.a2a.message_id_ttl_seconds, clock=time.time)
        self.message_repeats = 0  # repeats answered from self._messages

    async def ready(self) -> None:
        """Recover the store once, on first use (never at import or start-up); concurrent callers wait."""
        if self._recovery is None:
            self._recovery = asyncio.ensure_future(self.store.recover())
            failed = await self._recovery
            if failed:
                logger.warning("failed %d A2A tasks left unfinished by a previous process", failed)
        elif not self._recovery.done():
            await asyncio.shield(self._recovery)

    # --- reading -------------------------------------------------------------------------------------
    async def get(self, task_id: Any, owner: str) -> TaskRecord:
        if not isinstance(task_id, str):
            raise A2AError(INVALID_PARAMS, "id must be a string")
        await self.ready()
        live = self.live.get(task_id)
        record = live.record if live is not None else await self.store.get(task_id)
        if record is None or record.owner != owner:  # another caller's task does not exist for this one
            raise A2AError(TASK_NOT_FOUND, f"Task {task_id} not found", {"taskId": task_id})
        return record

    async def list(self, query: ListQuery) -> tuple[list[TaskRecord], int]:
        await self.ready()
        return await self.store.list(query)

    # --- sending -------------------------------------------------------------------------------------
    async def send(self, message: dict[str, Any], owner: str, connection: HTTPConnection | None,
                   metadata: Mapping[str, Any] | None = None, push: dict[str, Any] | None = None,
                   *, follow: bool = False, immediate: bool = False,
                   ) -> tuple[LiveTask, asyncio.Queue[Any] | asyncio.Future[None]]:
        """Record the message and move its task on.

        Returns the task and, with ``follow``, a queue of its events from now on; without, a future that
        resolves when the task next settles (terminal or interrupted), which is all a blocking send needs.
        ``live.reply`` is set instead when the skill answered with a message and no task. ``immediate``
        (``returnImmediately``) shows the task at once, so it cannot become a message-only reply.
        """
        await self.ready()
        incoming = message_from_wire(message)  # a part that cannot be read is -32602, before anything runs
        dedupe = self.agent.a2a.dedupe_message_ids
        key = (owner, message["messageId"])
        fingerprint = _fingerprint(message, metadata) if dedupe else ""
        if dedupe:
            repeated = await self._repeated(key, fingerprint, push)
            if repeated is not None:
                return repeated, self._settled_waiter(repeated, follow)
        task_id = message.get("taskId")
        fresh = task_id is None
        if task_id is not None:
            live = await self._existing(task_id, owner, message)
        else:
            context_id = message.get("contextId") or new_id()
            record = TaskRecord(id=new_id(), context_id=context_id, owner=owner, status_timestamp=now_iso(),
                                metadata=dict(metadata or {}))
            live = LiveTask(record)
            self.live[record.id] = live
        if dedupe:  # remembered now, so a repeat that arrives while this one is being sent finds it
            seen = _Seen(live.record.id)
            if fresh:
                live.seen = seen  # a message-only reply is recorded on it
            self._messages.setdefault(key, {})[fingerprint] = seen
        try:
            if push is not None:
                await self._add_push(live, push)
        except BaseException:
            self._forget(key, fingerprint)
            raise
        waiting: asyncio.Queue[Any] | asyncio.Future[None]
        if follow:
            waiting = self.subscribe(live)
        else:
            waiting = asyncio.get_running_loop().create_future()
            live.settle_waiters.append(waiting)
        try:
            async with live.lock:
                record = live.record
                message = {**message, "taskId": record.id, "contextId": record.context_id}
                record.history.append(message)
                live.messages.append(incoming)
                await self._advance(live, message, connection, quiet=fresh and push is None and not immediate)
        except BaseException:
            if isinstance(waiting, asyncio.Queue):
                self.unsubscribe(live, waiting)
            else:
                live.settle_waiters.remove(waiting)
            if fresh and live.runner is None:  # refused before anything ran: the task never existed
                self.live.pop(live.record.id, None)
                for other in live.settle_waiters:  # a concurrent repeat must not wait for it forever
                    if not other.done():
                        other.set_result(None)
                live.settle_waiters.clear()
                for queue in list(live.subscribers):
                    queue.put_nowait(None)
                live.subscribers.clear()
            self._forget(key, fingerprint)
            raise
        return live, waiting

    def _forget(self, key: tuple[str, str], fingerprint: str) -> None:
        """A refused message is not remembered: its repeat is refused the same way, not answered."""
        entries = self._messages.get(key)
        if entries is not None:
            entries.pop(fingerprint, None)
            if not entries:
                self._messages.pop(key, None)

    async def _repeated(self, key: tuple[str, str], fingerprint: str, push: dict[str, Any] | None) -> LiveTask | None:
        """What a repeat of the same message (same caller, id and content, so the same taskId) already got.

        A reused ``messageId`` with anything different is not a repeat: it is handled as a new message, and
        logged. A repeat is never answered with another message's task.
        """
        entries = self._messages.get(key)  # None once expired
        if entries is None:
            return None
        seen = entries.get(fingerprint)
        if seen is None:
            logger.warning("A2A messageId %r was reused by caller %r with different content or another task; "
                           "handled as a new message", key[1], key[0])
            return None
        if seen.reply is not None:
            if push is not None:
                raise A2AError(INVALID_PARAMS, f"Message {key[1]} was answered with a message and no task, so "
                               "there is no task to send push notifications about", {"messageId": key[1]})
            reply = seen.reply
            self.message_repeats += 1
            return LiveTask(TaskRecord(seen.task_id, reply.get("contextId", ""), key[0]), reply=reply)
        live = self.live.get(seen.task_id)
        if live is None:
            record = await self.store.get(seen.task_id)
            if record is None:  # forgotten by the store: nothing to answer with, so it runs as new
                return None
            live = LiveTask(record)
        if push is not None:
            await self._add_push(live, push)
        self.message_repeats += 1
        return live

    async def _add_push(self, live: LiveTask, push: dict[str, Any]) -> None:
        """An inline push config: kept on the task; on a repeat, one the task has already is not added twice,
        and a task that already finished sends its final status to the new config at once."""
        record = live.record
        config = {**push, "taskId": record.id}
        existing = await self.store.list_push(record.id)
        same = ("url", "token", "authentication")
        if any(all(c.get(k) == config.get(k) for k in same) for c in existing):
            return
        await self.store.put_push(record.id, config)
        if self.push is None:
            return
        if record.terminal:
            final = {"statusUpdate": {"taskId": record.id, "contextId": record.context_id,
                                      "status": status_of(record)}}
            task = asyncio.create_task(self.push._deliver(config, final), name=f"a2a-push-final-{record.id}")
            _background.add(task)
            task.add_done_callback(_background.discard)
        else:
            self.push.watch(record.id)

    def _settled_waiter(self, live: LiveTask, follow: bool) -> asyncio.Queue[Any] | asyncio.Future[None]:
        if follow:
            queue = self.subscribe(live)
            if live.reply is not None and live.first_view is None:  # a repeat of a message-only reply
                live.first_view = {}
                queue.put_nowait({"message": live.reply})
                queue.put_nowait(None)
            elif live.record.terminal:
                queue.put_nowait(None)
            return queue
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if live.reply is not None or (live.record.state in SETTLED and live.answer is None
                                      and (live.runner is None or live.runner.done())):
            waiter.set_result(None)
        else:
            live.settle_waiters.append(waiter)
        return waiter

    async def _existing(self, task_id: Any, owner: str, message: dict[str, Any]) -> LiveTask:
        record = await self.get(task_id, owner)
        if record.terminal:
            raise A2AError(UNSUPPORTED_OPERATION, f"Task {task_id} is {record.state} and takes no more messages",
                           {"taskId": task_id})
        if message.get("contextId") not in (None, record.context_id):
            raise A2AError(INVALID_PARAMS, f"contextId does not match task {task_id}'s context",
                           {"taskId": task_id})
        live = self.live.get(task_id)
        if live is None:  # known to the store but not to this process
            live = LiveTask(record)
            for earlier in record.history:
                if earlier.get("role") == "ROLE_USER":
                    with contextlib.suppress(A2AError):  # checked when it arrived
                        live.messages.append(message_from_wire(earlier))
            self.live[task_id] = live
            if self.push is not None and await self.store.list_push(task_id):
                self.push.watch(task_id)
            if record.parked:
                await self._finish(live, "TASK_STATE_FAILED", "The agent lost this task's execution (it was "
                                   "restarted, or this request reached another replica); nothing more will run.")
                raise A2AError(UNSUPPORTED_OPERATION, f"Task {task_id} can no longer continue", {"taskId": task_id})
        return live

    async def _advance(self, live: LiveTask, message: dict[str, Any], connection: HTTPConnection | None, *,
                       quiet: bool = False) -> None:
        record = live.record
        if live.answer is not None and not live.answer.done():
            live.answer.set_result(message)  # the parked coroutine goes on from its question
            return
        if live.runner is not None and not live.runner.done():
            raise A2AError(UNSUPPORTED_OPERATION, f"Task {record.id} is working and is not waiting for input",
                           {"taskId": record.id})
        capability = self._choose(record, message)
        if capability is None:
            await self._ask_for_skill(live)
            return
        record.arguments.update(self._arguments(capability, message, record))
        model = capability.params.input_model
        if capability.params.arg_names and model is not None:
            try:
                model.model_validate(record.arguments)
            except ValidationError as exc:
                text = describe_validation_error(exc).replace("Invalid arguments", "Missing or invalid input")
                await self._status(live, "TASK_STATE_INPUT_REQUIRED", [
                    {"text": f"{text}. Send them in a data part of a message on this task."},
                    {"data": {"inputSchema": capability.input_schema}, "mediaType": "application/json"}])
                return
        missing = [p.name for p in capability.params.message_params
                   if p.required and not any(m.files for m in live.messages)]
        if missing:
            await self._status(live, "TASK_STATE_INPUT_REQUIRED", [
                {"text": f"Missing input: {', '.join(missing)} (a file). Send it as a file part of a message on "
                         "this task."}])
            return
        if quiet and capability.replies_with_message:
            # It may answer with a message and no task: show nothing until it does something else.
            live.quiet = True
            live.first_view = task_dict(record)
        live.runner = asyncio.create_task(self._run(live, capability, connection), name=f"a2a-task-{record.id}")

    def _choose(self, record: TaskRecord, message: dict[str, Any]) -> Capability | None:
        """The capability the task runs: named in metadata, or the agent's only skill (docs/a2a.md)."""
        if record.skill is None:
            meta = message.get("metadata") or {}
            named = meta.get("skill")
            skills = self.agent.skills
            if isinstance(named, str):
                if named not in skills:
                    raise A2AError(INVALID_PARAMS, f"Unknown skill {named!r}; the agent card lists the skills")
                record.skill = named
            elif len(skills) == 1:
                record.skill = next(iter(skills))
            else:
                return None
            tool = meta.get("tool")
            if isinstance(tool, str):
                if tool not in skills[record.skill].groups or tool not in self.agent.tools:
                    raise A2AError(INVALID_PARAMS, f"Skill {record.skill!r} has no tool {tool!r}")
                record.tool = tool
        skill = self.agent.skills.get(record.skill)
        if skill is None:
            raise A2AError(INVALID_PARAMS, f"Skill {record.skill!r} is no longer served")
        return self.agent.tools[record.tool] if record.tool else skill

    @staticmethod
    def _arguments(capability: Capability, message: dict[str, Any], record: TaskRecord) -> dict[str, Any]:
        """Data parts fill the arguments they name; one that names none of them fills the skill's one
        pydantic-model parameter whole; text fills its one string parameter (docs/skill.md)."""
        arguments: dict[str, Any] = {}
        texts = []
        names = capability.params.arg_names
        model = capability.data_parameter
        for part in message["parts"]:
            data = part.get("data")
            if isinstance(data, dict):
                if model is not None and model not in data and not any(k in names for k in data):
                    arguments[model] = data
                else:
                    arguments.update(data)
            elif "text" in part:
                texts.append(part["text"])
        text_param = capability.text_parameter
        if texts and text_param and text_param not in arguments:
            arguments[text_param] = "\n".join(texts)
        return arguments

    async def _ask_for_skill(self, live: LiveTask) -> None:
        skills = self.agent.skills
        lines = [f"- {name}: {cap.summary}" for name, cap in skills.items()]
        text = ("Which skill should handle this? Reply on this task with metadata {\"skill\": <id>}. Skills:\n"
                + "\n".join(lines)) if skills else "This agent has no skills."
        await self._status(live, "TASK_STATE_INPUT_REQUIRED" if skills else "TASK_STATE_REJECTED", [
            {"text": text}, {"data": {"skills": [{"id": n, "summary": c.summary} for n, c in skills.items()]},
                             "mediaType": "application/json"}])

    async def _run(self, live: LiveTask, capability: Capability, connection: HTTPConnection | None) -> None:
        record = live.record
        try:
            if not live.quiet:
                await self._status(live, "TASK_STATE_WORKING", None)
            ctx = Context(capability, _TaskChannel(self, live), request=connection, caller=record.owner,
                          agent=self.agent, face="a2a")
            ctx.messages = live.messages  # the same list: follow-ups that answer a question show up in it
            key = _hint(record, "idempotencyKey")
            approval = _hint(record, "approvalId")
            outcome = await invoke(capability, dict(record.arguments), ctx,
                                   idempotency_key=key if isinstance(key, str) else None,
                                   approval_id=approval if isinstance(approval, str) else None)
            await self._settle(live, outcome)
        except asyncio.CancelledError:
            await asyncio.shield(self._finish(live, "TASK_STATE_CANCELED", "The task was canceled."))
        except Exception:
            logger.exception("A2A task %s failed inside agentmw", record.id)
            await self._finish(live, "TASK_STATE_FAILED", "The agent failed while running this task.")

    async def _show(self, live: LiveTask) -> None:
        """A quiet task becomes visible (WORKING) before the first thing it shows."""
        if live.quiet:
            live.quiet = False
            await self._status(live, "TASK_STATE_WORKING", None)

    async def _reply(self, live: LiveTask, message: Message) -> None:
        """A message-only answer: no task is kept; the waiting request answers with the message."""
        record = live.record
        reply = message_to_wire(message, None, record.context_id)
        live.reply = reply
        live.quiet = False
        if live.seen is not None:
            live.seen.reply = reply
        for queue in list(live.subscribers):
            queue.put_nowait({"message": reply})
            queue.put_nowait(None)
        live.subscribers.clear()
        for waiter in live.settle_waiters:
            if not waiter.done():
                waiter.set_result(None)
        live.settle_waiters.clear()
        self.live.pop(record.id, None)

    async def _artifact(self, live: LiveTask, artifact: Artifact) -> None:
        """One artifact, or one chunk of one: an artifact update, and the task's artifacts brought up to date
        (an appended chunk extends the artifact with its id). An untrusted capability's are framed already
        (the context frames its events, the pipeline its value)."""
        await self._show(live)
        record = live.record
        wire = artifact_to_wire(artifact)
        stored = wire
        for index, existing in enumerate(record.artifacts):
            if existing["artifactId"] == artifact.artifact_id:
                # never mutated once stored (TaskRecord.snapshot shares them): replaced instead
                stored = {**existing, **wire, "parts": existing["parts"] + wire["parts"]} if artifact.append else wire
                record.artifacts[index] = stored
                break
        else:
            record.artifacts.append(stored)
        live.streamed.add(artifact.artifact_id)  # type: ignore[arg-type]  # always set (messages.py)
        update: dict[str, Any] = {"taskId": record.id, "contextId": record.context_id, "artifact": wire}
        if artifact.append:
            update["append"] = True
        update["lastChunk"] = artifact.last_chunk
        await self._emit(live, {"artifactUpdate": update})

    async def _settle(self, live: LiveTask, outcome: Outcome) -> None:
        record = live.record
        if outcome.status == "completed":
            value = outcome.value
            if isinstance(value, Message):
                if live.quiet:
                    await self._reply(live, value)
                    return
                await self._status(live, "TASK_STATE_COMPLETED",
                                   message_to_wire(value, record.id, record.context_id)["parts"])
                return
            await self._show(live)
            if isinstance(value, Artifact) or (isinstance(value, (list, tuple)) and value
                                               and all(isinstance(v, Artifact) for v in value)):
                for artifact in (value,) if isinstance(value, Artifact) else value:
                    if artifact.artifact_id not in live.streamed:  # a generator's were sent as they came
                        await self._artifact(live, artifact)
                await self._status(live, "TASK_STATE_COMPLETED", None)
                return
            if value is None and not outcome.content and outcome.structured is None:
                # nothing to keep: the task completes with a status message and no artifact
                await self._status(live, "TASK_STATE_COMPLETED", [{"text": "Done."}])
                return
            artifact = {"artifactId": new_id(), "name": "result",
                        "parts": parts_from_outcome(outcome.value, outcome.content, outcome.structured)}
            record.artifacts.append(artifact)
            await self._emit(live, {"artifactUpdate": {"taskId": record.id, "contextId": record.context_id,
                                                       "artifact": artifact, "lastChunk": True}})
            await self._status(live, "TASK_STATE_COMPLETED", None)
            return
        await self._show(live)
        if outcome.status == "needs_input":
            questions = outcome.pending or {}
            await self._status(live, "TASK_STATE_INPUT_REQUIRED", _question_parts(questions))
        elif outcome.status == "rejected":
            await self._finish(live, "TASK_STATE_REJECTED", outcome.message or "The request was rejected.")
        else:
            meta = {"retryable": outcome.retryable}
            if outcome.retry_after is not None:
                meta["retryAfterSeconds"] = outcome.retry_after
            when = ""
            if outcome.retryable:
                when = f" Retry after {outcome.retry_after:g} seconds." if outcome.retry_after else " Retry later."
            text = (outcome.message or "The task failed.").rstrip()
            await self._finish(live, "TASK_STATE_FAILED", text if text.endswith(when.strip()) else text + when,
                               meta)

    async def _finish(self, live: LiveTask, state: str, text: str, metadata: dict[str, Any] | None = None) -> None:
        parts: list[dict[str, Any]] = [{"text": text}]
        if metadata:
            parts.append({"data": metadata, "mediaType": "application/json"})
        await self._status(live, state, parts, metadata)

    async def _status(self, live: LiveTask, state: str, parts: list[dict[str, Any]] | None,
                      metadata: dict[str, Any] | None = None) -> None:
        record = live.record
        live.quiet = False  # shown from now on
        record.state = state
        record.status_timestamp = now_iso()
        record.status_message = agent_message(record.id, record.context_id, parts) if parts else None
        if record.status_message is not None:
            record.history.append(record.status_message)
        record.parked = state == "TASK_STATE_INPUT_REQUIRED" and live.answer is not None
        update: dict[str, Any] = {"taskId": record.id, "contextId": record.context_id, "status": status_of(record)}
        if metadata:
            update["metadata"] = metadata
        await self._emit(live, {"statusUpdate": update})
        if state in SETTLED and live.settle_waiters:
            for waiter in live.settle_waiters:
                if not waiter.done():
                    waiter.set_result(None)
            live.settle_waiters.clear()

    async def _emit(self, live: LiveTask, event: dict[str, Any]) -> None:
        record = live.record
        record.updated_at = time.time()
        await self.store.put(record)
        for queue in list(live.subscribers):
            queue.put_nowait(event)
        if self.push is not None:
            await self.push.enqueue(record.id, event)
        if record.terminal:
            for queue in list(live.subscribers):
                queue.put_nowait(None)
            live.subscribers.clear()
            self.live.pop(record.id, None)
            if self.push is not None:
                self.push.task_ended(record.id)

    def subscribe(self, live: LiveTask) -> asyncio.Queue[Any]:
        queue: asyncio.Queue[Any] = asyncio.Queue()
        live.subscribers.add(queue)
        return queue

    def unsubscribe(self, live: LiveTask, queue: asyncio.Queue[Any]) -> None:
        live.subscribers.discard(queue)

    async def events(self, live: LiveTask, queue: asyncio.Queue[Any], *, stop_on_interrupt: bool) -> AsyncIterator[dict]:
        """The task's events from ``queue`` until it is terminal (or interrupted, when asked)."""
        try:
            while True:
                if live.record.terminal and queue.empty():  # events queued before the end are still owed
                    return
                event = await queue.get()
                if event is None:
                    return
                yield event
                update = event.get("statusUpdate")
                if update is not None:
                    state = update["status"]["state"]
                    if state in TERMINAL or (stop_on_interrupt and state in INTERRUPTED):
                        return
        finally:
            self.unsubscribe(live, queue)

    @staticmethod
    async def wait_settled(live: LiveTask, waiter: asyncio.Future[None]) -> None:
        """Block until the task is terminal or interrupted (the blocking ``SendMessage``)."""
        try:
            await asyncio.shield(waiter)
        except asyncio.CancelledError:
            if waiter in live.settle_waiters:  # the caller left; the task itself goes on
                live.settle_waiters.remove(waiter)
            raise

    # --- canceling -----------------------------------------------------------------------------------
    async def cancel(self, task_id: Any, owner: str) -> TaskRecord:
        record = await self.get(task_id, owner)
        if record.terminal:
            raise A2AError(TASK_NOT_CANCELABLE, f"Task {task_id} is {record.state} and cannot be canceled",
                           {"taskId": task_id})
        live = self.live.get(task_id)
        if live is None:
            live = LiveTask(record)
            self.live[task_id] = live
        if live.runner is not None and not live.runner.done():
            live.runner.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await live.runner
        if not live.record.terminal:
            await self._finish(live, "TASK_STATE_CANCELED", "The task was canceled.")
        return live.record

    async def close(self) -> None:
        for live in list(self.live.values()):
            if live.runner is not None and not live.runner.done():
                live.runner.cancel()


def _hint(record: TaskRecord, key: str) -> Any:
    """A key from the latest user message's metadata, else from the request's (docs/a2a.md)."""
    for message in reversed(record.history):
        if message.get("role") == "ROLE_USER":
            value = (message.get("metadata") or {}).get(key)
            if value is not None:
                return value
            break
    return record.metadata.get(key)


def status_of(record: TaskRecord) -> dict[str, Any]:
    status: dict[str, Any] = {"state": record.state, "timestamp": record.status_timestamp}
    if record.status_message is not None:
        status["message"] = record.status_message
    return status


def task_dict(record: TaskRecord, history_length: int | None = None, include_artifacts: bool = True) -> dict:
    task: dict[str, Any] = {"id": record.id, "contextId": record.context_id, "status": status_of(record)}
    if history_length != 0:
        history = record.history if history_length is None else record.history[-history_length:]
        task["history"] = history
    if include_artifacts and record.artifacts:
        task["artifacts"] = record.artifacts
    if record.metadata:
        task["metadata"] = record.metadata
    return task


def _question_parts(questions: Mapping[str, InputRequest]) -> list[dict[str, Any]]:
    asks = {key: q for key, q in questions.items() if isinstance(q, Ask)}
    text = "\n".join(q.message for q in asks.values()) or "Input required."
    return [{"text": text}, {"data": {"inputRequests": {
        key: {"message": q.message, "requestedSchema": dict(q.schema)} for key, q in asks.items()}},
        "mediaType": "application/json"}]


def _payload(message: dict[str, Any], key: str, only: bool) -> Any:
    """What a follow-up message says to one question: its data (keyed by question when several were
    asked), else its text."""
    data: dict[str, Any] = {}
    texts = []
    for part in message.get("parts", []):
        if isinstance(part.get("data"), dict):
            data.update(part["data"])
        elif "text" in part:
            texts.append(part["text"])
    if not only:
        return data.get(key) if isinstance(data.get(key), dict) else {}
    return data or ("\n".join(texts) if texts else {})


class _TaskChannel:
    """The core channel of one A2A task: progress becomes status updates, questions park the coroutine."""

    def __init__(self, manager: TaskManager, live: LiveTask) -> None:
        self.manager = manager
        self.live = live

    def supports(self, capability: str) -> bool:
        return capability == "elicitation"

    async def emit(self, event: CoreEvent) -> None:
        """``ctx.say`` is a WORKING status update carrying the text; ``ctx.artifact`` (and a generator's
        artifacts) an artifact update. Steps, reasoning, tool calls and state have no A2A form."""
        kind = type(event)
        if kind is TextDelta:
            if event.text:  # type: ignore[union-attr]
                await self.manager._show(self.live)
                await self.manager._status(self.live, "TASK_STATE_WORKING", [{"text": event.text}])  # type: ignore[union-attr]
        elif kind is ArtifactUpdate:
            await self.manager._artifact(self.live, event.artifact)  # type: ignore[union-attr]

    async def progress(self, progress: float, total: float | None, message: str | None) -> None:
        await self.manager._show(self.live)
        amount = f"{progress:g}/{total:g}" if total else f"{progress:g}"
        text = f"{message} ({amount})" if message else f"Progress {amount}"
        await self.manager._status(self.live, "TASK_STATE_WORKING", [{"text": text}],
                                   {"progress": progress, **({"total": total} if total else {})})

    async def log(self, level: str, data: Any, logger_name: str | None) -> None:
        return None  # A2A has no log channel; progress is the caller-facing signal

    async def gather(self, requests: Mapping[str, InputRequest]) -> dict[str, Any]:
        live = self.live
        await self.manager._show(live)
        loop = asyncio.get_running_loop()
        live.answer = loop.create_future()
        await self.manager._status(live, "TASK_STATE_INPUT_REQUIRED", _question_parts(requests))
        try:
            message = await asyncio.wait_for(live.answer, self.manager.agent.park_timeout_seconds)
        except TimeoutError as exc:
            from ..errors import Permanent

            raise Permanent("No answer arrived in time; the task was stopped.") from exc
        finally:
            live.answer = None
        only = len(requests) == 1
        answers = {key: answer_from(_payload(message, key, only), req)
                   for key, req in requests.items() if isinstance(req, Ask)}
        await self.manager._status(live, "TASK_STATE_WORKING", None)
        return answers


__all__ += ["task_dict", "status_of"]
