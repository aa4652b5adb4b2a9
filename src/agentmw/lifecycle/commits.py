"""Commits: how a handle's changes reach its record in the shared state, once, off the request path.

A :class:`Handle` is what a process holds of one task: its record, the version of it last written or read,
and what is not written yet. :class:`Commits` writes handles behind the requests (:class:`WriteBehind`):

- every write is a compare-and-set on the handle's version, so a task another replica settled first is never
  overwritten (the client's ``adopt`` takes the other's record instead);
- the pending events of a published handle are appended to its log first, and the record written with the id
  of the last of them (``log_id``), so a follower misses nothing and repeats nothing;
- **one write for a fast task**: a task that settled for good before anything of it was written is encoded
  at once and only those bytes wait for the writer (:meth:`Commits.schedule`), not its handle and messages;
- the records alone go in batches of ``put_many`` (one transaction on SQLite, one round trip on Redis);
- **group commit**: with no batching delay (write-through, the default of the task registries), the writer
  writes what is queued as soon as it is idle, and what is queued meanwhile goes in the next batch; a request
  that must not answer before its record is stored awaits :meth:`Commits.committed`, woken when the batch
  holding its task's last change has committed;
- **a failed write is kept**: a write the store refused (``StoreUnavailable``, or any other store error) stays
  queued and is tried again, with a backoff from ``RETRY_FIRST_SECONDS`` to ``RETRY_MAX_SECONDS``, until the
  store takes it; only a record that cannot be encoded at all (``TypeError``/``ValueError``) is given up
  (logged). A waiter does not wait for that without bound: past its timeout it gets ``StoreUnavailable``
  (not acknowledged) while the write stays queued.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from .._transport import dumps, loads
from ..errors import StoreUnavailable
from ..state import Conflict, Encoded, State, encoded, encoded_bytes
from .events import Followers
from .records import TaskRecord, retry
from .writer import WriteBehind

__all__ = ["RETRY_FIRST_SECONDS", "RETRY_MAX_SECONDS", "WRITE_BATCH", "Commits", "Handle", "permanent"]

logger = logging.getLogger("agentmw")

WRITE_BATCH = 64  # records per put_many: SQLite writes a batch this small on the event loop, a larger one on
# its thread, where the loop's work keeps taking the GIL from it (a lagging writer makes ever larger batches)
RETRY_FIRST_SECONDS = (
    0.05  # a batch the store refused is tried again after this, then twice as long each time
)
RETRY_MAX_SECONDS = 2.0  # ... up to this
WATCH_SECONDS = 0.1  # how often the watchdog looks for waiters past their deadline (while any waits)


def permanent(exc: BaseException) -> bool:
    """Whether a failed write can never succeed as it is: its record cannot be encoded (``TypeError``,
    ``ValueError``). Every other failure (``StoreUnavailable``, a lost connection, a full disk) is the
    store's, and the write is tried again."""
    return isinstance(exc, (TypeError, ValueError)) and not isinstance(exc, StoreUnavailable)


@dataclass(eq=False, slots=True)
class Handle:
    """A task this process holds a record of, and what of it is not written yet."""

    record: TaskRecord
    subscribers: Followers = field(default_factory=Followers)  # who follows the task here
    version: int = 0  # of the record in the state; 0: never written
    published: bool = False  # every change is written and every event logged
    dirty: bool = False  # changes not written yet
    queued: bool = False  # in the writer's queue
    events: list[dict[str, Any]] = field(default_factory=list)  # logged events not appended yet
    superseded: bool = False  # another replica settled it: this process's changes are dropped
    handed_over: bool = False  # settled at once: its one write was encoded and handed to the writer
    has_push: bool = False  # push configs exist: the client is told after the events are appended

    def holds(self) -> bool:
        """This process runs the task's coroutine, or it is parked here (a client's handle says)."""
        return False


H = TypeVar("H", bound=Handle)


class Commits(Generic[H]):
    """The writes of one namespace of task records (and their logs), behind the requests.

    Args:
        state: where the records and logs are (re-settable: :attr:`state`).
        tasks: the records' namespace; ``events``: the logs'.
        replica: this process, written into a record whose coroutine it holds.
        label: the face, as logs name it.
        present: awaited before a record names this process as its holder (its heartbeat is up).
        adopt: a handle's write conflicted: another replica wrote the task first.
        pushed: the events of a task with push configs were appended.
        delay: the seconds a batch waits for company (read at each batch).
        stop: whether the client is closing (a failing write is not retried then).
    """

    def __init__(
        self,
        state: State,
        *,
        tasks: str,
        events: str,
        replica: str,
        label: str,
        present: Callable[[], Awaitable[None]],
        adopt: Callable[[H], Awaitable[None]],
        pushed: Callable[[str], None],
        delay: Callable[[], float],
        stop: Callable[[], bool],
    ) -> None:
        self.state = state
        self.tasks = tasks
        self.events = events
        self.replica = replica
        self.label = label
        self._present = present
        self._adopt = adopt
        self._pushed = pushed
        self._stop = stop
        # tasks with changes not written yet: their handles, or the one write of a task that settled at once
        self.unwritten: dict[str, H | Encoded] = {}
        self.writer: WriteBehind[H | str] = WriteBehind(
            self._write_batch, delay, f"{label.lower()}-task-writer"
        )
        self.writes = 0  # records written by this process (tests and benchmarks read it)
        self.failures = 0  # batches refused in a row (0: the last write went through)
        self.failing_since: float | None = (
            None  # when the store began refusing writes (monotonic); None: it is not
        )
        self._again: list[H | str] = []  # the items of the batch being written that are to be tried again
        self._last_error: BaseException | None = None
        self._given_up: dict[str, BaseException] = {}  # tasks whose record can never be written, and why
        self._waiters: dict[str, list[asyncio.Future[None]]] = {}  # who awaits each task's commit
        self._watched: list[tuple[float, asyncio.Future[None]]] = []  # the waiters and their deadlines
        self._watch: asyncio.TimerHandle | None = None  # the watchdog's next look
        self._watch_loop: asyncio.AbstractEventLoop | None = None  # the loop it looks on
        # records whose write failed with no answer (a store timeout, a dropped connection): such a write may
        # still land, and the conflict the next one meets is then this process's own write, not another's
        self._unanswered: dict[str, list[dict[str, Any]]] = {}

    @property
    def pending(self) -> int:
        return self.writer.pending

    async def flush(self, timeout: float | None = None) -> None:
        """Wait until everything queued so far is written; past ``timeout`` seconds (None: no bound),
        :class:`~agentmw.errors.StoreUnavailable` (what is queued stays queued)."""
        if timeout is None:
            await self.writer.flush()
            return
        try:
            async with asyncio.timeout(timeout):
                await self.writer.flush()
        except TimeoutError:
            raise self.unavailable() from None

    def unavailable(self) -> StoreUnavailable:
        """The error of a request that cannot be acknowledged: the store does not take the writes now."""
        return StoreUnavailable(
            f"the agent's store is not taking {self.label} task records now "
            f"({self.pending} waiting to be written); try again shortly",
            retry_after=1.0,
        )

    async def committed(self, task_id: str, timeout: float) -> None:
        """Return once every change of the task queued so far is in the store (at once when none is
        pending); the group commit wakes each waiter with the batch that wrote its task. Past ``timeout``
        seconds (give or take ``WATCH_SECONDS``): :class:`~agentmw.errors.StoreUnavailable` (the task's write
        stays queued and is written once the store takes it). A record that cannot be encoded at all raises
        what its encoding raised."""
        if task_id not in self.unwritten:
            return
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[None] = loop.create_future()
        self._waiters.setdefault(task_id, []).append(waiter)
        # one watchdog for every waiter, not a timer each: a commit is waited for on every answer
        self._watched.append((loop.time() + timeout, waiter))
        if self._watch is None or self._watch_loop is not loop:  # none yet, or one on a loop that ended
            self._watch, self._watch_loop = loop.call_later(WATCH_SECONDS, self._expire), loop
        try:
            await waiter
        except BaseException:  # given up (the store refused), or the caller left: not waited for any more
            waiters = self._waiters.get(task_id)
            if waiters is not None and waiter in waiters:
                waiters.remove(waiter)
                if not waiters:
                    del self._waiters[task_id]
            raise

    def _expire(self) -> None:
        """The watchdog: waiters past their deadline get StoreUnavailable; it looks again while any waits."""
        self._watch = None
        loop = asyncio.get_running_loop()
        now = loop.time()
        watched: list[tuple[float, asyncio.Future[None]]] = []
        for deadline, waiter in self._watched:
            if waiter.done() or waiter.get_loop() is not loop:  # another loop's waiter went with its loop
                continue
            if deadline <= now:
                waiter.set_exception(self.unavailable())
            else:
                watched.append((deadline, waiter))
        self._watched = watched
        if watched:
            self._watch, self._watch_loop = loop.call_later(WATCH_SECONDS, self._expire), loop

    def _wake(self) -> None:
        """Wake the waiters of every task that has nothing left to write (or never will have)."""
        given_up, self._given_up = self._given_up, {}
        if not self._waiters:
            return
        for task_id in [t for t in self._waiters if t not in self.unwritten or t in given_up]:
            failure = given_up.get(task_id)
            for waiter in self._waiters.pop(task_id):
                if waiter.done():
                    continue
                if failure is None:
                    waiter.set_result(None)
                else:
                    waiter.set_exception(
                        RuntimeError(f"the record of {self.label} task {task_id} cannot be stored: {failure}")
                    )

    def schedule(self, handle: H) -> None:
        """Queue the handle's changes for the writer (a task that settled for good, never written: its
        encoded record alone)."""
        if handle.queued or handle.handed_over:
            return
        if self.writer.stopped():
            handle.dirty = True  # unwritten: the task is left as a shutdown leaves it
            return
        task_id = handle.record.id
        final = (
            self._final(handle)
            if getattr(self.state, "accepts_encoded", False)
            and handle.version == 0
            and not handle.published
            and handle.record.terminal
            and not (
                handle.events
                or handle.subscribers
                or handle.has_push
                or handle.superseded
                or task_id in self.unwritten
            )
            else None
        )
        if final is not None:
            handle.dirty = False
            handle.handed_over = True  # its record is final: nothing of this handle is written again
            self.unwritten[task_id] = final
            self.writer.add(task_id)
        else:
            handle.queued = True
            self.unwritten[task_id] = handle
            self.writer.add(handle, urgent=handle.published)  # a followed task's changes go out at once

    @staticmethod
    def _final(handle: H) -> Encoded | None:
        """The one write of a task that settled for good before anything of it was written (the fast task of a
        blocking send), encoded now. Waiting for the writer, these bytes are all that is kept of the task, not
        its handle, record and messages: a backlog of those would outlive the garbage collector's young
        generations, and every full collection would walk them again. None when the record cannot be encoded
        (its handle waits instead, and the writer says why)."""
        try:
            return encoded(handle.record.to_stored(None))
        except (TypeError, ValueError):
            return None

    async def _write_batch(self, items: list[H | str]) -> None:
        try:
            await self._write_items(items)
        finally:
            again, self._again = self._again, []
            self._wake()
        if again:
            await self._refused(again)
        elif self.failures:
            logger.warning(
                "the store takes %s task records again, after %d refused batches", self.label, self.failures
            )
            self.failures = 0
            self.failing_since = None

    async def _refused(self, again: list[H | str]) -> None:
        """The store refused some of the batch: they are queued again, and the writer waits a little longer
        each time before it tries."""
        self.failures += 1
        if self.failing_since is None:
            self.failing_since = time.monotonic()
        if self.failures % 20 == 1:  # the first refusal of a streak, then every 20th
            exc = self._last_error
            logger.warning(
                "the store refused %d %s task records (%s: %s); they stay queued and are tried again until "
                "the store takes them (%d refused batches in a row)",
                len(again),
                self.label,
                type(exc).__name__,
                exc,
                self.failures,
            )
        kept: list[H | str] = []
        for item in again:
            if not isinstance(item, str):
                if item.queued:  # scheduled again while its write was on its way: queued once already
                    self.writer.done()
                    continue
                item.queued = True
            kept.append(item)
        self.writer.again(kept)
        if self._stop():
            return
        await asyncio.sleep(min(RETRY_MAX_SECONDS, RETRY_FIRST_SECONDS * 2 ** min(self.failures - 1, 10)))

    def _keep(self, item: H | str, exc: BaseException) -> None:
        """A write the store refused: tried again with the next batch."""
        self._again.append(item)
        self._last_error = exc

    async def _write_items(self, items: list[H | str]) -> None:
        finals: list[tuple[str, Encoded]] = []
        batch: list[H] = []
        for item in items:
            if not isinstance(item, str):
                batch.append(item)
                continue
            pending = self.unwritten.get(item)
            if isinstance(pending, Handle):
                if not pending.queued:
                    batch.append(pending)  # a handle made of it (the client's local()): written instead
                else:
                    self.writer.done()  # that handle is queued itself
            elif pending is not None and encoded_bytes(pending) is not None:
                finals.append((item, pending))
            else:
                self.writer.done()
        for handle in batch:
            handle.queued = False
        if finals:
            await self._write_finals(finals)
        if len(batch) <= 1:
            if batch:
                await self._write_one(batch[0])
            return
        # the records alone (no events to append first) go in one put_many; the others, and any that changed
        # again meanwhile, one by one
        simple = [h for h in batch if h.dirty and not h.events and not h.superseded]
        rest = [h for h in batch if not (h.dirty and not h.events and not h.superseded)]
        if len(simple) > 1:
            rest.extend(await self._write_many(simple))
        else:
            rest.extend(simple)
        if rest:
            await asyncio.gather(*(self._write_one(handle) for handle in rest))

    def _maybe_landed(self, task_id: str, body: dict[str, Any] | Encoded) -> None:
        """A write of ``body`` failed without an answer: it may land yet (remembered, at most a few)."""
        raw = encoded_bytes(body)
        value: dict[str, Any] = loads(raw) if raw is not None else loads(dumps(body))
        kept = self._unanswered.setdefault(task_id, [])
        kept.append(value)
        del kept[:-4]

    async def _landed(self, task_id: str, body: dict[str, Any] | Encoded) -> tuple[int, bool] | None:
        """After a conflict: the stored record's version when it is one this process wrote (``body``, or a write
        that failed with no answer and landed after all), and whether it is ``body`` itself; None when it is
        another's, or cannot be read."""
        try:
            found = await self.state.get(self.tasks, task_id)
        except Exception:  # noqa: BLE001  (cannot tell: taken for another's, as before)
            return None
        if found is None:
            return None
        raw = encoded_bytes(body)
        current = loads(raw) if raw is not None else loads(dumps(body))
        if found.value == current:
            self._unanswered.pop(task_id, None)
            return found.version, True
        if any(found.value == earlier for earlier in self._unanswered.get(task_id, ())):
            return found.version, False
        return None

    async def _write_finals(self, finals: list[tuple[str, Encoded]]) -> None:
        """The first and only writes of tasks that settled at once (``_final``), in batches of ``put_many``."""
        ns = self.tasks
        for start in range(0, len(finals), WRITE_BATCH):
            chunk = finals[start : start + WRITE_BATCH]
            results: list[int | Conflict | None]
            try:
                results = list(
                    await self.state.put_many([(ns, task_id, body, 0) for task_id, body in chunk])  # type: ignore[misc]  # an Encoded is written as its bytes (accepts_encoded)
                )
            except Exception as exc:  # noqa: BLE001  (kept and retried) encoded already: the store's failure
                for task_id, _ in chunk:
                    self._keep(task_id, exc)  # still in `unwritten`: the next batch writes it (or its handle)
                continue
            for (task_id, body), result in zip(chunk, results, strict=True):
                if isinstance(result, Conflict):
                    landed = await self._landed(task_id, body)  # a retry of a write that landed unanswered
                    if landed is not None and landed[1]:
                        result = landed[0]
                self.writer.done()
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
                    if isinstance(pending, Handle) and not pending.queued:
                        del self.unwritten[task_id]
                        if result is not None:
                            await self._adopt(pending)
                    continue
                self.writes += 1
                if isinstance(pending, Handle) and pending.version == 0:
                    # a handle of the task, made or scheduled while this write was on its way: what it writes
                    # next comes after this version; unchanged since, it has nothing left to write
                    pending.version = result
                    if not pending.queued:
                        pending.dirty = False
                        del self.unwritten[task_id]

    def _holder(self, handle: H) -> str | None:
        """The replica a record names as its holder: this one, while its coroutine runs or is parked here."""
        return self.replica if not handle.record.terminal and handle.holds() else None

    async def _write_many(self, handles: list[H]) -> list[H]:
        """Write the records of ``handles`` in batches of ``put_many`` (compare-and-set each); returns those
        still to write one by one (changed again meanwhile, or the batch failed: the fallback)."""
        again: list[H] = []
        for start in range(0, len(handles), WRITE_BATCH):
            chunk = handles[start : start + WRITE_BATCH]
            bodies = []
            holders: list[str | None] = []
            for handle in chunk:
                handle.dirty = False
                if not handle.record.terminal:
                    handle.published = True
                holders.append(self._holder(handle))
                bodies.append(handle.record.to_stored(holders[-1]))
            if any(holder is not None for holder in holders):
                await self._present()
            try:
                results = await self.state.put_many(
                    [
                        (self.tasks, h.record.id, body, h.version)
                        for h, body in zip(chunk, bodies, strict=True)
                    ]
                )
            except Exception as exc:  # noqa: BLE001  (kept and retried, or written one by one)
                for handle in chunk:
                    handle.dirty = True
                if permanent(exc):  # one of them cannot be encoded: one by one, the others are written
                    again.extend(chunk)
                else:  # the store refused the batch: all of it is tried again
                    for handle, body in zip(chunk, bodies, strict=True):
                        self._maybe_landed(handle.record.id, body)
                        self._keep(handle, exc)
                continue
            for handle, holder, body, result in zip(chunk, holders, bodies, results, strict=True):
                if isinstance(result, Conflict):
                    landed = await self._landed(handle.record.id, body)
                    if landed is not None:
                        result = landed[0]
                        if not landed[1]:
                            handle.dirty = True  # an earlier write of ours landed: this one is still to make
                if isinstance(result, Conflict):
                    await self._adopt(handle)
                else:
                    handle.version = result
                    handle.record.replica = holder
                    self.writes += 1
                if handle.dirty or handle.events:
                    again.append(handle)
                else:
                    self.writer.done()
                    self._written(handle)
        return again

    def _written(self, handle: H) -> None:
        if not handle.queued and self.unwritten.get(handle.record.id) is handle:
            del self.unwritten[handle.record.id]

    async def _write_one(self, handle: H) -> None:
        try:
            await self.write(handle)
        except Exception as exc:
            if not permanent(exc):
                self._keep(handle, exc)  # still pending, and in `unwritten`: tried again with the next batch
                return
            logger.exception("%s task %s could not be written to the state", self.label, handle.record.id)
            self._given_up[handle.record.id] = exc
        self.writer.done()
        self._written(handle)

    async def write(self, handle: H) -> None:
        """Append the handle's pending events, then write its record as it was when they were taken."""
        record = handle.record
        while (handle.dirty or handle.events) and not handle.superseded:
            events, handle.events = handle.events, []
            dirty, handle.dirty = handle.dirty, False
            if not record.terminal:
                handle.published = True  # what happens from here on is logged
            holder = self._holder(handle) if dirty else None
            body = record.to_stored(holder) if dirty else None  # the record as it is with these events
            if holder is not None:
                await self._present()
            for index, event in enumerate(events):
                try:
                    record.log_id = await retry(
                        lambda event=event: self.state.append(self.events, record.id, event),  # type: ignore[misc]
                        stop=self._stop,
                    )
                except BaseException:
                    # not appended: these events, and the record, are still to write (the next try does)
                    handle.events[:0] = events[index:]
                    handle.dirty = handle.dirty or dirty
                    raise
            if handle.has_push and events:
                self._pushed(record.id)
            if body is None:
                continue
            if record.log_id:
                body["log_id"] = record.log_id  # the last of the events appended above
            try:
                handle.version = await retry(
                    lambda body=body: self.state.put(
                        self.tasks, record.id, body, expected_version=handle.version
                    ),  # type: ignore[misc]
                    stop=self._stop,
                )
                record.replica = holder
                self.writes += 1
                self._unanswered.pop(record.id, None)
            except Conflict:
                # the write may be ours after all: retry() sends it again when an attempt failed unanswered
                landed = await self._landed(record.id, body)
                if landed is None:
                    await self._adopt(handle)
                    return
                handle.version = landed[0]  # a write of ours that landed unanswered: go on from it
                record.replica = holder
                if not landed[1]:
                    handle.dirty = True
            except BaseException as exc:
                handle.dirty = (
                    True  # its events are in the log (log_id says so); the record is still to write
                )
                if isinstance(exc, Exception) and not permanent(exc):
                    self._maybe_landed(record.id, body)
                raise
