"""A2A tasks: what the operations call. The registry (``registry.py``) keeps records and fans events out;
the runner (``runner.py``) runs skills; this module puts them together per request: de-duplicating repeated
messages, finding the task a follow-up continues (here or in the state), sending, following, canceling.

Tasks are versioned records in the agent's state (``agentmw.state``), so every replica sharing it can
read, list, follow and cancel them; the coroutine itself, and a parked question, stay in the process that
runs it (docs/a2a.md, "Stores, restarts and replicas").
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import logging
import time
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any

from starlette.requests import HTTPConnection

from .._bounded import BoundedTable
from ..journal import Journal
from ..lifecycle import INTERRUPTED, TERMINAL, TaskRecord
from ..state import State
from ..tasks.manager import TaskManager, spawn
from ..tasks.registry import ANONYMOUS
from ..tasks.runner import LOST_REASON
from .push import PushSender, with_config
from .registry import (
    A2AHost,
    LiveTask,
    a2a_registry,
    is_final,
    status_of,
    task_dict,
)
from .runner import A2ATaskRunner
from .wire import (
    INVALID_PARAMS,
    TASK_NOT_CANCELABLE,
    TASK_NOT_FOUND,
    UNSUPPORTED_OPERATION,
    A2AError,
    message_from_wire,
    new_id,
    now_iso,
)

if TYPE_CHECKING:
    from ..messages import Message

__all__ = ["A2ATaskManager", "LiveTask", "Stream", "snapshot", "status_of", "task_dict"]

logger = logging.getLogger("agentmw")


_Seen = tuple[str, str, dict[str, Any] | None]
"""What one message got: ``(fingerprint, task id, message-only reply or None)``. A messageId's entry in the
table is one of these, or a tuple of them when the id was reused with other content. Flat tuples of strings,
which the garbage collector stops tracking the first time it sees them: a2a_max_message_ids of them, kept for
an hour, cost it nothing."""


def _entries(value: _Seen | tuple[_Seen, ...]) -> tuple[_Seen, ...]:
    return (value,) if type(value[0]) is str else value  # type: ignore[return-value]


def _packed(entries: tuple[_Seen, ...]) -> _Seen | tuple[_Seen, ...]:
    return entries[0] if len(entries) == 1 else entries


_PLAIN_TEXT_CHARS = 1024  # a plain message up to this much text is told apart by its text itself


def _fingerprint(message: dict[str, Any], metadata: Mapping[str, Any] | None) -> tuple[str, int]:
    """The message's fingerprint and its size (the length of the JSON measured or encoded on the way: the
    byte budgets, docs/limits.md). What makes a repeat the *same* message: everything it says (parts, metadata,
    taskId, contextId, ...)
    and the request's metadata; the messageId itself is the lookup key. Two messages have equal fingerprints
    exactly when their JSON is the same (keys in any order).

    A plain message (no metadata, every field a string, text parts only, up to ``_PLAIN_TEXT_CHARS`` of
    text; the common case) is its own fingerprint: ``"p"`` and the ``repr`` of its sorted fields and its texts,
    cheaper than a digest (a string's ``repr`` is unambiguous, so two equal fingerprints come from equal
    messages). Any other is ``"h"`` and the SHA-256 of its canonical JSON, so a plain message never says the
    same as one that is not. A string, so the table that keeps it never holds a container.
    """
    if not metadata:
        fields = []
        texts: list[str] = []
        size = 0
        for name, value in message.items():
            if name == "parts":
                for part in value:
                    text = part.get("text") if len(part) == 1 else None
                    if type(text) is not str:
                        break
                    texts.append(text)
                    size += len(text) + 12  # {"text":""},
                else:
                    continue
                break
            if type(value) is not str:
                break
            size += len(name) + len(value) + 6
            if name != "messageId":
                fields.append((name, value))
        else:
            if size <= _PLAIN_TEXT_CHARS:
                fields.sort()
                return "p" + repr((fields, texts)), size
    body = {k: v for k, v in message.items() if k != "messageId"}
    canonical = json.dumps([body, metadata or {}], sort_keys=True, separators=(",", ":"), default=str)
    return "h" + hashlib.sha256(canonical.encode()).hexdigest(), len(canonical)


def _remove(items: list[Any], item: Any) -> None:
    """Take ``item`` itself (not an equal one) out of ``items``, looking from the end, where it was added."""
    for index in range(len(items) - 1, -1, -1):
        if items[index] is item:
            del items[index]
            return


def snapshot(record: TaskRecord) -> dict[str, Any]:
    """The task as it is now, in wire form, sharing no list or dict with the live record: a stream's first
    event must not grow with the changes sent after it (a client builds its history from both)."""
    task = task_dict(record)
    for name in ("history", "artifacts"):
        if name in task:
            task[name] = list(task[name])  # the entries themselves are never mutated once kept (registry)
    if "metadata" in task:
        task["metadata"] = dict(task["metadata"])
    task["status"] = dict(task["status"])
    return task


class Stream(asyncio.Queue[Any]):
    """One follower's events, and the task as it was when they began (``first``): the stream's first event,
    followed by exactly the changes after it.

    ``hold``: the task may still answer with a message and no task (a quiet task), so ``first`` waits for
    the next event: a message alone, or the task and then what it shows."""

    def __init__(self, first: dict[str, Any]) -> None:
        super().__init__()
        self.first = first
        self.hold = False

    def restart(self, record: TaskRecord) -> None:
        """Take the snapshot again, now: what was queued before is in it (a follow-up that waited for the
        task's lock), and is dropped; the end of the stream, if queued, is kept."""
        ended = False
        while not self.empty():
            ended = self.get_nowait() is None or ended
        self.first = snapshot(record)
        if ended:
            self.put_nowait(None)


def _seen_bytes(key: tuple[str, str], value: _Seen | tuple[_Seen, ...]) -> int:
    """A messageId's entry, measured by its strings (a message-only reply counts as a fixed 1 KiB)."""
    return (
        len(key[0])
        + len(key[1])
        + sum(
            len(fp) + len(tid) + 64 + (1024 if reply is not None else 0) for fp, tid, reply in _entries(value)
        )
    )


class A2ATaskManager(TaskManager):
    """One per agent: the core's task manager (``agentmw.tasks``), with what A2A adds: messages, follow-ups,
    repeats, push notifications and streams.

    Args:
        state: the state tasks live in (``agent.state`` by default).
    """

    runner: A2ATaskRunner
    agent: A2AHost

    def __init__(self, agent: A2AHost, state: State, push: PushSender | None = None) -> None:
        registry = a2a_registry(agent, state, write_behind=agent.a2a.write_behind)
        super().__init__(agent, registry, A2ATaskRunner(agent, registry))
        self.push = push
        self.registry.push = push
        # (owner, messageId) -> what each message with that id got (usually one): at most a2a_max_message_ids,
        # each for A2ASettings.message_id_ttl_seconds (apart from idempotency keys)
        self._messages: BoundedTable[tuple[str, str], _Seen | tuple[_Seen, ...]] = BoundedTable(
            agent.limits.max_message_ids,
            agent.a2a.message_id_ttl_seconds,
            clock=time.time,
            max_bytes=agent.budgets.a2a_message_ids_bytes,
            size=_seen_bytes,
        )
        self.message_repeats = 0  # repeats answered from self._messages

    @property
    def store(self) -> State:
        """The state this process keeps its A2A tasks in. Setting another one points this process at it
        (tests use it to cut a process off its file, as a crash would)."""
        return self.registry.state

    @store.setter
    def store(self, state: State) -> None:
        self.registry.state = state
        if self.push is not None:
            self.push.state = state

    # --- A2A's errors ----------------------------------------------------------------------------------
    def invalid_id(self, task_id: Any) -> Exception:
        return A2AError(INVALID_PARAMS, "id must be a string")

    def not_found(self, task_id: Any) -> Exception:
        return A2AError(TASK_NOT_FOUND, f"Task {task_id} not found", {"taskId": task_id})

    def not_cancelable(self, task_id: Any, record: TaskRecord) -> Exception:
        return A2AError(
            TASK_NOT_CANCELABLE,
            f"Task {task_id} is {record.state} and cannot be canceled",
            {"taskId": task_id},
        )

    def too_busy(self, task_id: Any) -> Exception:
        return A2AError(
            TASK_NOT_CANCELABLE, f"Task {task_id} is changing too often to cancel", {"taskId": task_id}
        )

    # --- reading -------------------------------------------------------------------------------------
    async def page(
        self,
        owner: str,
        *,
        context_id: str | None = None,
        state: str | None = None,
        after: float | None = None,
        size: int = 50,
        offset: int = 0,
    ) -> tuple[list[TaskRecord], int]:
        await self.ready()
        return await self.registry.page(
            owner, context_id=context_id, state=state, after=after, size=size, offset=offset
        )

    # --- sending -------------------------------------------------------------------------------------
    async def send(
        self,
        message: dict[str, Any],
        owner: str,
        connection: HTTPConnection | None,
        metadata: Mapping[str, Any] | None = None,
        push: dict[str, Any] | None = None,
        *,
        follow: bool = False,
        immediate: bool = False,
    ) -> tuple[LiveTask, asyncio.Queue[Any] | asyncio.Future[None]]:
        """Record the message and move its task on.

        Returns the task and, with ``follow``, a queue of its events from now on; without, a future that
        resolves when the task next settles (terminal or interrupted), which is all a blocking send needs.
        ``live.reply`` is set instead when the skill answered with a message and no task. ``immediate``
        (``returnImmediately``) shows the task at once, so it cannot become a message-only reply.
        """
        await self.ready()
        registry = self.registry
        # the writer far behind (MAX_BACKLOG): wait for it (bounded), or fail at once while the store refuses
        await registry.room()  # writes (StoreUnavailable, retryable)
        incoming = message_from_wire(message)  # a part that cannot be read is -32602, before anything runs
        # every anonymous caller is the same owner: a repeat could hand one another's task (and its question)
        dedupe = self.agent.a2a.dedupe_message_ids if owner != ANONYMOUS else False
        key = (owner, message["messageId"])
        fingerprint, size = _fingerprint(message, metadata)
        cap = self.agent.budgets.a2a_task_bytes
        if size > cap:  # refused before anything is kept or run (docs/limits.md)
            raise A2AError(
                INVALID_PARAMS,
                f"The message is {size:,} bytes encoded; a task holds at most {cap:,}",
                {"messageId": key[1]},
            )
        if not dedupe:
            fingerprint = ""
        if dedupe:
            repeated = await self._repeated(key, fingerprint, push)
            if repeated is not None:
                return repeated, self._settled_waiter(repeated, follow, immediate=immediate)
        task_id = message.get("taskId")
        fresh = task_id is None
        if task_id is not None:
            live = await self._existing(task_id, owner, message)
            if live.bytes + size > cap:
                raise A2AError(
                    INVALID_PARAMS,
                    f"Task {task_id} holds {live.bytes:,} bytes of messages; with this "
                    f"one it would pass its limit of {cap:,}",
                    {"taskId": task_id},
                )
        else:
            context_id = message.get("contextId") or new_id()
            live = registry.open(
                TaskRecord(
                    id=new_id(),
                    context_id=context_id,
                    owner=owner,
                    status_timestamp=now_iso(),
                    metadata=dict(metadata or {}),
                )
            )
        if dedupe:  # remembered now, so a repeat that arrives while this one is being sent finds it
            if fresh:  # a message-only reply is recorded with it
                live.on_reply = functools.partial(self._replied, key, fingerprint, live.record.id)
            seen: _Seen = (fingerprint, live.record.id, None)
            entries = self._messages.get(key)
            self._messages[key] = (
                seen
                if entries is None
                else _packed((*(e for e in _entries(entries) if e[0] != fingerprint), seen))
            )
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
        live.bytes += size
        registry.live.resize(live.record.id)
        stream = waiting if isinstance(waiting, Stream) else None
        try:
            if fresh:  # nobody else knows its id yet, so nothing can race this first message: no lock to take
                await self._advance(
                    live, message, incoming, connection, quiet=push is None and not immediate, stream=stream
                )
            else:
                async with live.lock:
                    await self._advance(live, message, incoming, connection, quiet=False, stream=stream)
        except BaseException:
            live.bytes -= size
            if isinstance(waiting, asyncio.Queue):
                self.unsubscribe(live, waiting)
            else:
                live.settle_waiters.remove(waiting)
            if fresh and live.runner is None:  # refused before anything ran: the task never existed
                registry.live.pop(live.record.id, None)
                for other in live.settle_waiters:  # a concurrent repeat must not wait for it forever
                    if not other.done():
                        other.set_result(None)
                live.settle_waiters.clear()
                for queue in list(live.subscribers):
                    queue.put_nowait(None)
                live.subscribers.clear()
            self._forget(key, fingerprint)
            raise
        if dedupe == "side-effects" and fresh and not self._harmful(live.record):
            # nothing a repeat could do twice: it is a new message (A2A#928 leaves de-duplication to the
            # server; the A2A TCK repeats its messageIds and expects new tasks)
            self._forget(key, fingerprint)
        if follow or immediate or push is not None:
            # others may look this task up before it settles: it is written now, and on every change
            registry.publish(live)
            if not live.quiet:
                await registry.persist(live)
        return live, waiting

    async def _advance(
        self,
        live: LiveTask,
        message: dict[str, Any],
        incoming: Message,
        connection: HTTPConnection | None,
        *,
        quiet: bool,
        stream: Stream | None = None,
    ) -> None:
        """Add the message to the task and move it on. ``stream``: the sender's stream, whose first event is
        the task as it is now, with this message and before anything it starts (docs/a2a.md, "Streams")."""
        record = live.record
        message = {**message, "taskId": record.id, "contextId": record.context_id}
        record.history.append(message)
        live.messages.append(incoming)
        if stream is not None:
            stream.restart(record)
        shown, seen = len(record.history), len(record.artifacts)
        view = live.first_view
        try:
            await self.runner.advance(live, message, connection, quiet=quiet)
        except BaseException:
            # refused (the task is working, the skill is hidden, ...): nothing of the message is kept, so
            # GetTask and ctx.messages never show what the caller was told was not taken
            _remove(record.history, message)
            _remove(live.messages, incoming)
            raise
        if stream is not None:
            stream.hold = live.quiet
        if live.first_view is not None and live.first_view is not view:
            # "as submitted", as it was then: the runner's view shares the record's lists, which grow on
            live.first_view = {
                **live.first_view,
                "status": dict(live.first_view["status"]),
                **({"history": record.history[:shown]} if "history" in live.first_view else {}),
                **({"artifacts": record.artifacts[:seen]} if "artifacts" in live.first_view else {}),
            }

    def _harmful(self, record: TaskRecord) -> bool:
        """Whether running a task's message again could do something twice: its skill (or tool) changes
        something (``Capability.side_effects``: not ``read_only``) and does not say that doing it again is
        harmless (``idempotent``). A task that has not chosen its skill yet has run nothing."""
        if record.skill is None:
            return False
        capability = self.agent.tools.get(record.tool) if record.tool else self.agent.skills.get(record.skill)
        if capability is None:
            return True
        return capability.side_effects and not (capability.annotations or {}).get("idempotentHint", False)

    def subscribe(self, live: LiveTask) -> Stream:
        """A follower's queue of the task's events from now on, with the task as it is now."""
        queue = Stream(snapshot(live.record))
        live.subscribers.add(queue)
        return queue

    async def settled(self, live: LiveTask, waiter: asyncio.Future[None]) -> None:
        """Block until the task is terminal or interrupted (the blocking ``SendMessage``) and, write-through
        (the default), until its record is committed too (StoreUnavailable past
        ``Cadence.commit_wait_seconds``). A caller that leaves before then leaves the task running, written
        for others to see."""
        try:
            await waiter  # a waiter cancelled with its caller is never set (status() checks)
        except asyncio.CancelledError:
            if waiter in live.settle_waiters:  # the caller left; the task itself goes on
                live.settle_waiters.remove(waiter)
            if live.reply is None:
                self.registry.publish(live)
            raise
        if not self.registry.write_behind and live.reply is None:
            await self.registry.persist(live)

    def _forget(self, key: tuple[str, str], fingerprint: str) -> None:
        """A refused message is not remembered: its repeat is refused the same way, not answered."""
        entries = self._messages.get(key)
        if entries is not None:
            kept = tuple(e for e in _entries(entries) if e[0] != fingerprint)
            if kept:
                self._messages[key] = _packed(kept)
            else:
                self._messages.pop(key, None)

    def _replied(self, key: tuple[str, str], fingerprint: str, task_id: str, reply: dict[str, Any]) -> None:
        """Record a message-only reply on its message's entry: the one with its content and its task (the entry
        may have been forgotten meanwhile and made again by a repeat, for another task: that one is not it)."""
        entries = self._messages.get(key)
        if entries is not None and any(
            fp == fingerprint and tid == task_id for fp, tid, _ in _entries(entries)
        ):
            self._messages[key] = _packed(
                tuple(
                    (fp, tid, reply if fp == fingerprint and tid == task_id else old)
                    for fp, tid, old in _entries(entries)
                )
            )

    async def _repeated(
        self, key: tuple[str, str], fingerprint: str, push: dict[str, Any] | None
    ) -> LiveTask | None:
        """What a repeat of the same message (same caller, id and content, so the same taskId) already got.

        A reused ``messageId`` with anything different is not a repeat: it is handled as a new message, and
        logged. A repeat is never answered with another message's task.
        """
        entries = self._messages.get(key)  # None once expired
        if entries is None:
            return None
        seen = next((e for e in _entries(entries) if e[0] == fingerprint), None)
        if seen is None:
            logger.warning(
                "A2A messageId %r was reused by caller %r with different content or another task; "
                "handled as a new message",
                key[1],
                key[0],
            )
            return None
        _, task_id, reply = seen
        if reply is not None:
            if push is not None:
                raise A2AError(
                    INVALID_PARAMS,
                    f"Message {key[1]} was answered with a message and no task, so "
                    "there is no task to send push notifications about",
                    {"messageId": key[1]},
                )
            self.message_repeats += 1
            return LiveTask(TaskRecord(task_id, reply.get("contextId", ""), key[0]), reply=reply)
        live = self.registry.local(task_id)
        if live is None:
            loaded = await self.registry.load(task_id)
            if loaded is None:  # forgotten by the state: nothing to answer with, so it runs as new
                return None
            live = LiveTask(loaded[0], version=loaded[1])
        if push is not None:
            await self._add_push(live, push)
        self.message_repeats += 1
        return live

    async def _add_push(self, live: LiveTask, push: dict[str, Any]) -> None:
        """An inline push config: kept on the task; on a repeat, one the task has already is not added twice,
        and a task that already finished sends its final status to the new config at once."""
        record = live.record
        config = {**push, "taskId": record.id}
        same = ("url", "token", "authentication")
        policy = self.agent.a2a.push  # set: the config was checked against it

        def add(value: dict[str, Any]) -> dict[str, Any] | None:
            configs = value.get("configs", [])
            if any(all(c.get(k) == config.get(k) for k in same) for c in configs):
                return None
            return {
                **value,
                "configs": with_config(configs, config, policy),  # type: ignore[arg-type]
                "done": record.terminal,
            }  # -32602 past the policy's configs per task

        before = await self.registry.push_configs(record.id)
        if add({"configs": before}) is None:
            return
        await self.registry.update_push(record.id, add)
        live.has_push = True
        if self.push is None:
            return
        if record.terminal:
            final = {
                "statusUpdate": {
                    "taskId": record.id,
                    "contextId": record.context_id,
                    "status": status_of(record),
                }
            }
            spawn(self.push._deliver(config, final), f"a2a-push-final-{record.id}")
        else:
            self.registry.publish(live)
            self.push.watch(record.id)

    def _settled_waiter(
        self, live: LiveTask, follow: bool, *, immediate: bool = False
    ) -> asyncio.Queue[Any] | asyncio.Future[None]:
        """What a repeat waits on: the first outcome, at once when there is one. A task parked on a question
        (or waiting for input) is answered with its state now: nothing changes it until a follow-up does. A
        task another process holds is answered with its stored state (nothing here would wake the wait).

        A quiet task (the first sender may still get a message and no task) gets the repeat what the first
        sender gets: a stream holds its first event until it is a message alone, or the task. An
        ``immediate`` repeat gets the task at once, as a first immediate send does, and the first sender still
        gets what the skill answers; so that the task it names exists, the task is written now and kept when
        it answers with a message alone (completed, with that message as its status)."""
        record = live.record
        held = self.registry.live.get(record.id) is live
        answered = live.answer is not None and live.answer.done()  # going on from its question
        now = (
            live.reply is not None
            or not held
            or record.terminal
            or (record.state in INTERRUPTED and not answered)
        )
        if follow:
            queue = self.subscribe(live)
            if live.reply is not None:  # a repeat of a message-only reply: that message alone
                queue.hold = True
                queue.put_nowait({"message": live.reply})
            elif live.quiet and not now:
                queue.hold = True
            if now:
                queue.put_nowait(None)
            return queue
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if now:
            waiter.set_result(None)
        else:
            live.settle_waiters.append(waiter)
        if immediate and live.quiet and not now:
            self.registry.name(live)
        return waiter

    async def _existing(self, task_id: Any, owner: str, message: dict[str, Any]) -> LiveTask:
        """The task a follow-up continues: this process's handle, else the stored record (claimed here
        with a compare-and-set, so two replicas never both continue it)."""
        registry = self.registry
        for _ in range(10):
            record = await self.get(task_id, owner)
            if record.terminal:
                raise A2AError(
                    UNSUPPORTED_OPERATION,
                    f"Task {task_id} is {record.state} and takes no more messages",
                    {"taskId": task_id},
                )
            if message.get("contextId") not in (None, record.context_id):
                raise A2AError(
                    INVALID_PARAMS, f"contextId does not match task {task_id}'s context", {"taskId": task_id}
                )
            live = registry.local(task_id)
            if live is not None:
                if registry.live.get(task_id) is not live:
                    registry.live[task_id] = live
                return live
            loaded = await registry.load(task_id)  # known to the state but not to this process
            if loaded is None:
                continue
            record, version = loaded
            if record.terminal:
                continue
            if record.parked or record.replica is not None:
                # its coroutine is in another process (or was, in one that is gone)
                if record.parked:
                    journal = await Journal.load(
                        self.agent.state, task_id, lease_seconds=registry.timing.lease_seconds
                    )
                    if journal is not None and not journal.finished and journal.pending:
                        live = await self.adopt(record, version)  # resumed here from its journal
                        live.resume = journal
                        return live
                    if not await registry.elsewhere.fail(record, version, LOST_REASON):
                        continue
                    raise A2AError(
                        UNSUPPORTED_OPERATION, f"Task {task_id} can no longer continue", {"taskId": task_id}
                    )
                raise A2AError(
                    UNSUPPORTED_OPERATION,
                    f"Task {task_id} is working and is not waiting for input",
                    {"taskId": task_id},
                )
            return await self.adopt(record, version)
        raise A2AError(
            UNSUPPORTED_OPERATION, f"Task {task_id} is changing too often to continue", {"taskId": task_id}
        )

    async def adopt(self, record: TaskRecord, version: int) -> LiveTask:
        """A handle here for a stored task: its user messages (ctx.messages) and push sender."""
        registry = self.registry
        live = registry.adopt_handle(record, version)
        for earlier in record.history:
            if earlier.get("role") == "ROLE_USER":
                try:
                    live.messages.append(message_from_wire(earlier))
                except A2AError:  # checked when it arrived
                    pass
        if self.push is not None and await registry.push_configs(record.id):
            live.has_push = True
            self.push.watch(record.id)
        return live

    # --- following -----------------------------------------------------------------------------------
    async def events(
        self, live: LiveTask, queue: asyncio.Queue[Any], *, stop_on_interrupt: bool
    ) -> AsyncIterator[dict[str, Any]]:
        """The task's events from ``queue`` until it is terminal (or interrupted, when asked). Write-through,
        an event that settles the task (terminal, or interrupted) is sent once the record holding it is
        committed, as a blocking answer is."""
        through = not self.registry.write_behind
        try:
            while True:
                if live.record.terminal and queue.empty():  # events queued before the end are still owed
                    return
                event = await queue.get()
                if event is None:
                    return
                if through and is_final(event, True) and not live.superseded:
                    await self.registry.committed(live.record.id)
                yield event
                if is_final(event, stop_on_interrupt):
                    return
        finally:
            self.unsubscribe(live, queue)

    def follow(self, record: TaskRecord) -> AsyncIterator[dict[str, Any]]:
        """The events of a task this process does not hold, from the state's log of it."""
        return self.registry.elsewhere.follow(record)

    async def close(self) -> None:
        await self.registry.close()
        if self.push is not None:
            await self.push.close()


__all__ += ["INTERRUPTED", "TERMINAL"]
