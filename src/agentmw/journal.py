"""Executions that survive their process: a journal per execution, replayed on any replica (docs/durability.md).

A :class:`Journal` records what one execution learned from outside its own code: the answers to its
questions (``ctx.ask``, ``ctx.confirm``, a gate's approval, keyed by the question key), the results of its
``ctx.call`` sub-calls (keyed by call order, tool name and a hash of the arguments), the results of its
one-time steps (``await ctx.once(name, fn, *args)``), and how many of its events were already delivered.
It lives in the agent's shared state (``agent.state``): a small versioned *header* (status, lease owner,
counters, code version) in ``journal``, written with compare-and-set at each step, and the steps themselves in
an append-only log (``journal.steps``, one per execution), so that a step costs the same however many came
before it. Whichever replica holds the execution's lease can replay it:
``invoke(..., journal=journal)`` runs the function from the start; every recorded step returns its
recorded value, in order; the first step that is not recorded runs for real and is recorded. A replay that
asks another question, or calls another step, where the journal records something else fails with
:class:`ReplayDiverged`, never silently.

Nothing is written for an execution that never takes a journaled step: the record (and the lease) are
made at the first one. MCP 2026's ``input_required`` replays the same way with the answers carried by the
client (``mcp/stateless.py``); A2A tasks and AG-UI runs keep them here.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
import socket
import time
import uuid
import weakref
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Self

from ._codec import from_json, to_json
from ._executor import run_step
from .content import Text
from .context import (
    Answer,
    Ask,
    ClientCapabilityMissing,
    Context,
    InputRequest,
    Services,
    ToolCallFailed,
    answer_from,
    needed_capability,
    recorded_json,
)
from .errors import NeedsInput, Permanent, Retryable
from .events import CoreEvent, ToolCallFinished, ToolCallStarted
from .outcomes import PERMANENT, Code, InputsPending, Outcome, Status
from .pipeline import journaled_approval
from .runtime import invoke
from .state import Conflict, State, StoreLimits
from .state.base import MAX_PAGE, encode

if TYPE_CHECKING:
    from .capability import Capability
    from .retries import RetryPolicy

__all__ = [
    "DEAD",
    "FORMAT",
    "JOURNAL_NS",
    "LEASE_NS",
    "STATS",
    "STEPS_NS",
    "ExecutionDetail",
    "ExecutionInfo",
    "Journal",
    "JournalFull",
    "Orphan",
    "ReplayDiverged",
    "RetryRefused",
    "TakenOver",
    "cancel",
    "cancel_execution",
    "journaled_approval",
    "list_executions",
    "orphaned",
    "resume",
    "resume_now",
    "retry",
    "show_execution",
]

logger = logging.getLogger("agentmw")

FORMAT = 2
"""The version of the record's layout (``"format"``); a replica refuses a journal of a newer one. Format 1
kept the steps in the record itself; such a record is read, and moved to the step log at its next write."""

JOURNAL_NS = "journal"
LEASE_NS = "journal.lease"
STEPS_NS = "journal.steps"
DEAD = "dead"
"""The status of a dead letter: an execution given up after ``Limits.max_recovery_attempts`` take-overs."""
RECOVERY_EXHAUSTED = "recovery_exhausted"  # the code of a dead letter's outcome
CAPABILITY_GONE = "capability_gone"  # the code of an execution whose function this deploy no longer serves
JOURNAL_FULL = "journal_full"  # the code of an execution past its step or size cap
SETTLE_RETRY_SECONDS = 5.0  # how long a run's last journal write is retried while the store refuses it
JOURNAL_LOST = "journal_lost"  # the code of an execution whose step log lost entries (it cannot be replayed)
DEFAULT_MAX_RECOVERY_ATTEMPTS = 100  # as DBOS's max_recovery_attempts
STATS: dict[str, int] = {"takeovers": 0, "dead_letters": 0}
"""What this process did, for the metrics: take-overs that went on (recoveries), executions dead-lettered."""
DEFAULT_MAX_STEPS = 10_000
DEFAULT_MAX_BYTES = 16 * 1024 * 1024
TAIL_STEPS = 32  # the newest steps the header carries before they go to the step log in one entry
TAIL_BYTES = 16 * 1024  # ... and their encoded size at most (a large step goes to the log at once)
DEFAULT_LEASE_SECONDS = 30.0
_CAPABILITIES = ("elicitation", "sampling", "roots")
_PROCESS = f"{socket.gethostname()}-{os.getpid()}"


_IN_STEP: ContextVar[Journal | None] = ContextVar("agentmw_journal_step", default=None)
"""The journal whose one-time step (``ctx.once``) the current task runs in: per task (and the worker thread of a
step's blocking function), so that concurrent steps (``asyncio.gather``) are not taken for nested ones."""


def _in_step(journal: Journal) -> bool:
    return _IN_STEP.get() is journal


class ReplayDiverged(Permanent):
    """A replay took another path than the run it replays: the function is not deterministic.

    The execution fails for good (code ``replay_diverged``); nothing after the divergence runs.
    """

    def __init__(self, execution_id: str, position: int, recorded: str, found: str) -> None:
        message = (
            f"Replay of execution {execution_id!r} diverged at step {position}: the journal records "
            f"{recorded}, but the function now {found}. A replayed function must take the same steps in "
            "the same order (docs/durability.md); the execution was stopped."
        )
        super().__init__(
            message,
            data={"execution": execution_id, "position": position, "recorded": recorded, "found": found},
        )
        self.execution_id = execution_id
        self.position = position
        self.recorded = recorded
        self.found = found


class JournalFull(Permanent):
    """The execution reached its cap (``Limits.max_steps_per_execution`` or ``Limits.max_journal_bytes``):
    it fails for good (code ``journal_full``); the step that would pass the cap does not run."""

    code = JOURNAL_FULL

    def __init__(self, execution_id: str, what: str) -> None:
        message = (
            f"Execution {execution_id!r} reached its cap of {what}; it was stopped. Raise the cap "
            "(agentmw.Limits), or split the work into several executions."
        )
        super().__init__(message, data={"execution": execution_id, "cap": what})
        self.execution_id = execution_id


class RetryRefused(Exception):
    """An operator's retry (:func:`retry`, ``agentmw executions retry``) of a dead letter that cannot go on
    where its callers would see it: the message says why and what to do instead. The execution stays dead."""

    def __init__(self, execution_id: str, message: str) -> None:
        super().__init__(message)
        self.execution_id = execution_id
        self.message = message


_NOT_RETRIED = {
    # face: why an operator's retry cannot be right for its dead letters (docs/agui.md, "A replica that dies")
    "agui": (
        "it is an AG-UI run's, and AG-UI has no run to go on in: its run already ended with RUN_ERROR "
        "RECOVERY_EXHAUSTED, after which the protocol sends nothing more; a client follows or reconnects only "
        "to a run whose id it knows, so a replay in a new run would reach no one; and its thread may have "
        "moved on since. Have the client start a new run on the thread instead (its steps are done again)"
    ),
}


class Orphan(str):
    """An execution id found by :func:`orphaned`, with the version of its record the sweep saw: a take-over
    (``Journal.load(state, orphan)``, then :func:`resume`) goes on only if the execution is still running at
    that version once its lease is taken, so an execution that parked or ended meanwhile is left alone."""

    version: int

    def __new__(cls, execution_id: str, version: int) -> Self:
        made = super().__new__(cls, execution_id)
        made.version = version
        return made


class TakenOver(BaseException):
    """This coroutine no longer owns the execution: its lease was lost, or another replica resumed it.

    A BaseException, like cancellation, so that a function's ``except Exception`` cannot swallow it;
    ``invoke`` turns it into ``Outcome(status=Status.CANCELED, code=Code.TAKEN_OVER)``, which a face must not
    publish (the replica that took the execution over reports it).
    """


def _describe(step: Mapping[str, Any]) -> str:
    kind = step.get("t")
    key = step.get("k")
    if kind == "ask":
        return (
            f"the question {', '.join(map(repr, key))}" if isinstance(key, list) else f"the question {key!r}"
        )
    if kind == "call":
        return f"the sub-call {key!r}"
    if kind == "patch":
        return f"the patch marker {key!r} (ctx.patched)"
    return f"the one-time step {key!r}"


def _wording(kind: str, key: Any) -> str:
    return {"ask": "asks", "call": "makes", "once": "runs"}[kind] + " " + _describe({"t": kind, "k": key})


def _args_hash(arguments: Mapping[str, Any]) -> str:
    text = json.dumps(to_json(dict(arguments)), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class Journal:
    """The journal of one execution, kept in ``state`` under ``execution_id`` (docs/durability.md).

    Make one per execution (``Journal.for_agent(agent, task_id)``) and pass it to ``invoke``; or read one
    back with :meth:`load`. Nothing is written until the execution takes its first journaled step.

    Args:
        state: the shared state (``agent.state``).
        execution_id: the execution's id (an A2A task id, an AG-UI thread and run); at most 1,024 characters.
        owner: who holds the lease while this object runs the execution (default: host, pid and a random
            token, unique to this object).
        lease_seconds: how long a lease lasts without renewal; it is renewed every third of it.
    """

    def __init__(
        self,
        state: State,
        execution_id: str,
        *,
        owner: str | None = None,
        lease_seconds: float = DEFAULT_LEASE_SECONDS,
    ) -> None:
        self.state = state
        self.id = execution_id
        self._owner = owner
        self.lease_seconds = lease_seconds
        self.run: dict[str, Any] | None = None  # what to run: capability, arguments, caller, face, hints
        self.steps: list[dict[str, Any]] = []
        self.version = 0  # of the stored record; 0: not written
        self.status = "running"
        self.outcome: dict[str, Any] | None = None
        self.attempts = 0  # take-overs so far (a recovery after its replica died, or lost it)
        self.code_version: str | None = None  # the deploy's version when the execution started
        self.reason: str | None = None  # why it is a dead letter (or failed for good), for operators
        self.updated_at = 0.0
        self.max_recovery_attempts = DEFAULT_MAX_RECOVERY_ATTEMPTS
        self.max_steps = DEFAULT_MAX_STEPS
        self.max_bytes = DEFAULT_MAX_BYTES
        self._expected: int | None = None  # a take-over: the version the orphan sweep saw
        self._last = 0  # the id of the last step-log entry the header names (0: none)
        self._bytes = 0  # of the step log's accepted entries
        self._unlogged: list[dict[str, Any]] = []  # steps and answers not yet written
        self._tail: list[dict[str, Any]] = []  # steps and answers the header carries (not yet in the log)
        self._tail_bytes = 0
        self._unsure: list[str] = []  # the names of writes (and a lease take) that failed with no answer
        self._legacy = False  # read from a format-1 record: its steps go to the log at the next write
        self._log_since = 0.0  # when the step log's chain began (its oldest entry): see _refresh
        self._appended = False  # whether this run appended to the step log yet (see _log)
        self.log_lost: str | None = None  # why its step log cannot be read (an entry expired or was evicted)
        self._faulted = False  # a write of this run failed (a store fault): see run_journaled
        self._patches: dict[tuple[str, str], bool] = {}
        self.retried = False  # made runnable again by an operator (a dead letter: ``retry``)
        self.delivered = 0  # events 1..delivered reached the face
        self.seq = 0  # the number of the last event emitted in this run
        self._stored_delivered = 0
        self._stored_status = ""
        self._messages: list[Any] | None = None
        self._skip_through = 0
        self._replay_end = 0  # how many steps were recorded when this run began
        self._leased = False
        self._lost = False
        self._renewer: asyncio.Task[None] | None = None
        self._lock_: asyncio.Lock | None = None
        self._start: tuple[Any, ...] | None = None
        self._failure: ReplayDiverged | JournalFull | None = None
        self._by_scope: dict[str, list[int]] = {}
        self._cursor: dict[str, int] = {}
        self._consumed: set[int] = set()
        self._done: dict[tuple[str, str, str], dict[str, Any]] = {}
        self._inflight: dict[str, int] = {}

    @property
    def owner(self) -> str:
        if self._owner is None:
            self._owner = f"{_PROCESS}-{uuid.uuid4().hex[:12]}"
        return self._owner

    @owner.setter
    def owner(self, value: str) -> None:
        self._owner = value

    @property
    def _lock(self) -> asyncio.Lock:
        if self._lock_ is None:
            self._lock_ = asyncio.Lock()
        return self._lock_

    @classmethod
    def for_agent(
        cls, agent: Services, execution_id: str, *, lease_seconds: float = DEFAULT_LEASE_SECONDS
    ) -> Journal:
        return cls(agent.state, execution_id, lease_seconds=lease_seconds)

    @classmethod
    async def load(
        cls,
        state: State,
        execution_id: str,
        *,
        owner: str | None = None,
        lease_seconds: float = DEFAULT_LEASE_SECONDS,
    ) -> Journal | None:
        """The stored journal of the execution (its header, then its steps from the step log), or None.

        ``execution_id`` may be an :class:`Orphan` (from :func:`orphaned`): :func:`resume` then takes the
        execution over only if it is still running at the version the sweep saw."""
        expected = execution_id.version if isinstance(execution_id, Orphan) else None
        execution_id = str(execution_id)
        found = await state.get(JOURNAL_NS, execution_id)
        if found is None:
            return None
        journal = cls(state, execution_id, owner=owner, lease_seconds=lease_seconds)
        await journal._read(found.value, found.version)
        journal._expected = expected
        return journal

    async def _read(self, value: Mapping[str, Any], version: int) -> None:
        execution_id = self.id
        if int(value.get("format", 0)) > FORMAT:
            raise ValueError(
                f"the journal of {execution_id!r} has format {value.get('format')}, newer than "
                f"this agentmw reads ({FORMAT})"
            )
        self.version = version
        self.status = self._stored_status = value.get("status") or "running"
        self.outcome = value.get("outcome")
        self.delivered = self._stored_delivered = int(value.get("delivered") or 0)
        self.attempts = int(value.get("attempts") or 0)
        self.code_version = value.get("codeVersion")
        self.reason = value.get("reason")
        self.retried = bool(value.get("retried"))
        self.updated_at = float(value.get("updatedAt") or 0.0)
        self._log_since = float(value.get("logSince") or self.updated_at)
        if "steps" in value:  # format 1: the steps are in the record
            self.run = value.get("run")
            self.steps = list(value.get("steps") or [])
            self._legacy = True
            return
        self._last = int(value.get("last") or 0)
        self._bytes = int(value.get("logBytes") or 0)
        self._tail = list(value.get("tail") or [])
        self._tail_bytes = len(encode({"e": self._tail})) if self._tail else 0
        try:
            self.run, self.steps = await _read_log(self.state, execution_id, self._last)
        except _LogLost as lost:  # readable still (an operator sees it), not replayable: resume() ends it
            self.run, self.steps, self.log_lost = None, [], str(lost)
            logger.error("%s", lost)
        else:
            _apply(self.steps, self._tail)
        if self.run is None:
            self.run = value.get("run")

    # -- what the faces read ----------------------------------------------------------------------------

    @property
    def stored(self) -> bool:
        """Whether the journal was written (the execution took a journaled step)."""
        return self.version > 0

    @property
    def finished(self) -> bool:
        return self.status not in ("running", "parked")

    @property
    def replaying(self) -> bool:
        """Whether this run has not yet reached the last step recorded before it began: what the function
        does until then was done before, so a face that numbers its own events (A2A's progress updates) can
        skip them. False for a run that began with an empty journal."""
        end = self._replay_end
        return end > 0 and (end - 1) not in self._consumed

    @property
    def pending(self) -> dict[str, InputRequest]:
        """The questions the execution is waiting on, by key (empty when it waits on none)."""
        found: dict[str, InputRequest] = {}
        for step in self.steps:
            if step.get("t") == "ask":
                answers = step.get("a") or {}
                for key, request in (step.get("q") or {}).items():
                    if key not in answers:
                        found[key] = from_json(request)
        return found

    # -- the lease ----------------------------------------------------------------------------------------

    async def acquire(self, owner: str | None = None, ttl: float | None = None) -> bool:
        """Take the execution's lease (``set_if_absent``); True if this call took it. While held, it is
        renewed every third of ``ttl`` until :meth:`release` or the end of the execution."""
        if owner is not None:
            self.owner = owner
        if ttl is not None:
            self.lease_seconds = ttl
        taken = await self.state.set_if_absent(
            LEASE_NS, self.id, {"owner": self.owner, "execution": self.id}, self.lease_seconds
        )
        if not taken and self._unsure:  # an earlier take that failed (a store timeout) may have landed
            found = await self.state.get_key(LEASE_NS, self.id)
            taken = found is not None and found.get("owner") == self.owner
        if taken:
            self._leased = True
            self._lost = False
            self._start_renewer()
        return taken

    async def _take(self) -> bool:
        """:meth:`acquire`, remembering a failed take (its answer lost) so that a retry recognizes it."""
        try:
            return await self.acquire()
        except Exception:
            self._unsure = [*self._unsure[-7:], "lease"]
            raise

    async def renew(self) -> bool:
        """Extend the lease; False when it was lost (expired, or taken by another)."""
        ok = await self.state.renew(LEASE_NS, self.id, self.owner, self.lease_seconds)
        if not ok:
            self._leased = False
            self._lost = True
        return ok

    async def release(self) -> bool:
        """Give the lease up (only if this journal's owner holds it), and stop renewing it."""
        self._stop_renewer()
        if not self._leased:
            return False
        self._leased = False
        return await self.state.release(LEASE_NS, self.id, self.owner)

    async def holder(self) -> str | None:
        """Who holds the lease now (None: nobody; the execution is free to take over)."""
        found = await self.state.get_key(LEASE_NS, self.id)
        return None if found is None else str(found.get("owner"))

    def _start_renewer(self) -> None:
        if self._renewer is None or self._renewer.done():
            try:
                self._renewer = asyncio.get_running_loop().create_task(
                    self._keep(), name=f"journal-lease-{self.id}"
                )
            except RuntimeError:
                self._renewer = None

    def _stop_renewer(self) -> None:
        renewer, self._renewer = self._renewer, None
        if renewer is not None and renewer is not asyncio.current_task():
            renewer.cancel()

    async def _keep(self) -> None:
        while True:
            await asyncio.sleep(self.lease_seconds / 3)
            try:
                if not await self.renew():
                    logger.warning(
                        "execution %s lost its lease; it stops at its next journaled step", self.id
                    )
                    return
                if self.delivered != self._stored_delivered and self.stored and not self._lock.locked():
                    await self.flush()
                await self._refresh()
            except asyncio.CancelledError:
                raise
            except TakenOver:
                return
            except Exception:
                logger.exception("renewing the lease of execution %s failed", self.id)

    async def _refresh(self) -> None:
        """Keep a held execution's record within the store's retention while it writes nothing (a durable
        sleep, a long step): the header is written again past half of the journal namespace's ``max_age``,
        and the whole step log again, as one new chain, before its oldest entry nears the log's retention
        (four times the header's: :func:`_bound_log`)."""
        if not self.stored or self.finished or self._lock.locked():
            return
        retention = self.state.limits(JOURNAL_NS).max_age
        now = time.time()
        if now - self._log_since > retention and not self._legacy:
            self._legacy = True  # what a format-1 record does: every step to one new entry
            await self._write(lease=False)
        elif now - self.updated_at > retention / 2:
            await self._write(lease=False)

    # -- writing ------------------------------------------------------------------------------------------

    def _value(self) -> dict[str, Any]:
        if self.run is None and self._start is not None:
            capability, arguments, ctx, idempotency_key, approval_id = self._start
            self.run = {
                "kind": capability.kind,
                "name": _registry_key(capability),
                "arguments": to_json(dict(arguments)),
                "caller": ctx.caller,
                "face": ctx.face,
                "idempotencyKey": idempotency_key,
                "approvalId": approval_id,
                "supports": [c for c in _CAPABILITIES if ctx.supports(c)],
            }
        run = self.run
        if run is not None and "messages" not in run and self._messages:
            run["messages"] = to_json(list(self._messages))
        value: dict[str, Any] = {
            "format": FORMAT,
            "status": self.status,
            "delivered": self.delivered,
            "owner": self.owner,
            "updatedAt": time.time(),
            "attempts": self.attempts,
            "stepCount": len(self.steps),
            "last": self._last,
            "logBytes": self._bytes,
            "tail": self._tail,
            "codeVersion": self.code_version,
            "logSince": self._log_since,
        }
        if run is not None:  # what an operator reads without the log (the log holds the whole of it)
            value["kind"], value["name"], value["face"] = run.get("kind"), run.get("name"), run.get("face")
        if self.outcome is not None:
            value["outcome"] = self.outcome
        if self.reason is not None:
            value["reason"] = self.reason
        if self.retried:
            value["retried"] = True
        return value

    async def _log(self) -> tuple[int, int, list[dict[str, Any]], int]:
        """Place the new steps and answers: in the header's tail while it stays small (``TAIL_STEPS``,
        ``TAIL_BYTES``: one write a step), else the tail and them in one step-log entry naming the entry before
        it (the run goes there at the first write). Returns the header's new ``last``, ``logBytes``, ``tail``
        and the tail's size. Nothing is accepted until the header is written: an entry appended by a writer
        whose header write then fails is never read (:func:`_read_log` follows the chain from the header)."""
        first = self.version == 0 or self._legacy
        events = self._unlogged
        if self._legacy:
            events = list(self.steps)  # a format-1 record's steps, answers and all, move to the log
        if not events and not first:
            return self._last, self._bytes, self._tail, self._tail_bytes
        size = len(encode({"e": events}))
        # against the cap count only what is new: a moved history (format 1, or a log written again by
        # _refresh) was counted, or predates the cap, and is never dropped
        new = self._unlogged if self._legacy else events
        counted = (len(encode({"e": new})) if new else 0) if self._legacy else size
        _bound_log(self.state, self.max_steps)
        if self._bytes + counted > self.max_bytes:
            dropped = {id(event) for event in new}  # the steps past the cap are not recorded
            self.steps[:] = [step for step in self.steps if id(step) not in dropped]
            self._unlogged.clear()
            raise self._full(f"{self.max_bytes} journal bytes (Limits.max_journal_bytes)")
        tail = [*self._tail, *events] if not self._legacy else list(events)
        tail_bytes = self._tail_bytes + size if not self._legacy else size
        # the first step of each run (a resume's answers, a take-over's first step) goes to the log even when
        # it would fit in the header: logs are kept by their last append, headers by their last write, so a
        # long-lived execution whose header stays fresh keeps its log among the newest too (_bound_log)
        if not first and self._appended and len(tail) <= TAIL_STEPS and tail_bytes <= TAIL_BYTES:
            return self._last, self._bytes + counted, tail, tail_bytes
        entry: dict[str, Any] = {"p": 0 if self._legacy else self._last, "e": tail}
        if first:
            entry["run"] = self.run
        last = await self.state.append(STEPS_NS, self.id, entry)
        return last, self._bytes + counted, [], 0

    def _full(self, what: str) -> JournalFull:
        failure = JournalFull(self.id, what)
        if self._failure is None:
            self._failure = failure  # the execution fails even if the function catches it
        logger.error("%s", failure.message)
        return failure

    async def _write(self, *, lease: bool = True) -> None:
        """Write the record (compare-and-set on the version this journal read or wrote last).

        ``lease``: take the lease first if this journal does not hold it (a running execution); a park
        needs none. A conflict means another coroutine moved the execution on: this one stops.
        """
        if self._lost:
            raise TakenOver(f"execution {self.id} lost its lease")
        if lease and not self._leased:
            async with self._lock:  # concurrent first steps (asyncio.gather): one of them takes the lease
                if not self._leased and not await self._take():
                    self._lost = True
                    raise TakenOver(f"execution {self.id} is held by another replica")
        async with self._lock:
            delivered = self.delivered
            unlogged = len(self._unlogged)
            if self.run is None:
                self._value()  # fills in the run from the execution's start
            before = self._last, self._bytes, self._tail, self._tail_bytes
            since = time.time() if self.version == 0 or self._legacy else self._log_since
            self._last, self._bytes, self._tail, self._tail_bytes = await self._log()
            value = self._value()
            value["logSince"] = since  # a new chain starts now
            value["w"] = nonce = uuid.uuid4().hex[:16]  # names this write, if its answer is lost
            try:
                try:
                    self.version = await self.state.put(
                        JOURNAL_NS, self.id, value, expected_version=self.version or None
                    )
                except Conflict:
                    found = await self.state.get(JOURNAL_NS, self.id)
                    mark = None if found is None else found.value.get("w")
                    if found is not None and mark == nonce:
                        self.version = found.version  # this very write landed, then was sent again
                    elif found is not None and mark in self._unsure:
                        # an earlier write of ours whose answer was lost (a store timeout) landed: go on from it
                        self.version = await self.state.put(
                            JOURNAL_NS, self.id, value, expected_version=found.version
                        )
                    else:
                        raise
            except Conflict as exc:
                self._last, self._bytes, self._tail, self._tail_bytes = before
                self._lost = True
                self._stop_renewer()
                raise TakenOver(
                    f"execution {self.id} was moved on elsewhere (version {exc.actual})"
                ) from None
            except BaseException as exc:
                self._last, self._bytes, self._tail, self._tail_bytes = before
                self._unsure = [*self._unsure[-7:], nonce]
                if isinstance(exc, Exception):
                    self._faulted = (
                        True  # a store fault: the run's failure is not the execution's (run_journaled)
                    )
                raise
            self._unsure = []
            del self._unlogged[:unlogged]
            self._legacy = False
            self._appended = self._appended or self._last != before[0]
            self._log_since = since
            self.updated_at = value["updatedAt"]
            self._stored_delivered = delivered
            self._stored_status = self.status

    async def flush(self) -> None:
        """Write the count of delivered events now (it is otherwise written with the next step)."""
        if self.stored and self.delivered != self._stored_delivered:
            await self._write(lease=False)

    async def answer(self, answers: Mapping[str, Any]) -> bool:
        """Record answers to pending questions (raw payloads as a face received them, or parsed answers);
        True if any was recorded. Compare-and-set: of two replicas answering one question, one wins, and
        the other gets :class:`TakenOver`. Answers that would pass the journal's cap
        (``Limits.max_journal_bytes``) are not recorded: :class:`JournalFull` is raised."""
        changed: list[tuple[dict[str, Any], str]] = []
        for index, step in enumerate(self.steps):
            if step.get("t") != "ask":
                continue
            recorded = step.setdefault("a", {})
            given: dict[str, Any] = {}
            for key, request in (step.get("q") or {}).items():
                if key in recorded or key not in answers:
                    continue
                recorded[key] = given[key] = to_json(_parsed(answers[key], from_json(request)))
                changed.append((recorded, key))
            if given:
                self._unlogged.append({"t": "ans", "i": index, "a": given})
        if changed:
            status, self.status = self.status, "running"
            try:
                await self._write(lease=False)
            except JournalFull:
                for recorded, key in changed:  # not recorded: the journal stays as it is stored
                    recorded.pop(key, None)
                self.status = status
                raise
        return bool(changed)

    async def cancel(self, message: str = "The execution was canceled.") -> None:
        """Record that the execution was canceled (a face's cancel request): a later resume returns this."""
        if not self.stored:
            return
        self.status = "canceled"
        self.outcome = Outcome(status=Status.CANCELED, message=message, code=Code.CANCELED).to_dict()
        try:
            await self._write(lease=False)
        finally:
            await self.release()

    # -- running ------------------------------------------------------------------------------------------

    def execute(
        self,
        capability: Capability,
        arguments: Mapping[str, Any] | None,
        ctx: Context,
        *,
        idempotency_key: str | None = None,
        approval_id: str | None = None,
    ) -> Coroutine[Any, Any, Outcome]:
        """Run the execution through the pipeline with this journal behind ctx's steps: what
        ``invoke(..., journal=self)`` does."""
        return run_journaled(
            capability, arguments, ctx, self, idempotency_key=idempotency_key, approval_id=approval_id
        )

    def _begin(
        self,
        capability: Capability,
        arguments: Mapping[str, Any],
        ctx: Context,
        idempotency_key: str | None,
        approval_id: str | None,
    ) -> None:
        if self.run is None:  # what to run, kept as it is until the first write (docs/durability.md)
            self._start = (capability, arguments, ctx, idempotency_key, approval_id)
        self._by_scope = {}
        for index, step in enumerate(self.steps):
            self._by_scope.setdefault(step.get("s", ""), []).append(index)
        self._cursor = {}
        self._consumed = set()
        self._done = {}
        self._inflight = {}
        self._failure = None
        self._faulted = False
        self._patches = {}
        agent = ctx.agent
        self._limit(agent)
        if not self.stored and self.code_version is None:
            self.code_version = getattr(agent, "code_version", None)
        self.seq = 0
        self._skip_through = self.delivered
        self._replay_end = len(self.steps)
        self._messages = ctx.messages
        ctx.attach(_Scope(self, ""), numbering=self._counting)
        if self._leased:
            self._start_renewer()

    def _limit(self, agent: Any) -> None:
        """Take the agent's caps (``Limits``): before a run, and before a resume records its answers."""
        limits = getattr(agent, "limits", None)
        if limits is not None:
            self.max_recovery_attempts = getattr(limits, "max_recovery_attempts", self.max_recovery_attempts)
            self.max_steps = getattr(limits, "max_steps_per_execution", self.max_steps)
            self.max_bytes = getattr(limits, "max_journal_bytes", self.max_bytes)

    def _counting(
        self, emit: Callable[[CoreEvent], Awaitable[None]]
    ) -> Callable[[CoreEvent], Awaitable[None]]:
        """The face's ``emit``, numbering events; those a previous run delivered are not sent again."""

        async def journaled_emit(event: CoreEvent) -> None:
            self.seq += 1
            if self.seq <= self._skip_through:
                return
            await emit(event)
            self.delivered = max(self.delivered, self.seq)

        return journaled_emit

    def _check(self) -> None:
        if self._failure is not None:
            raise self._failure
        if self._lost:
            raise TakenOver(f"execution {self.id} lost its lease")

    def _lookup(self, scope: str, kind: str, key: Any) -> dict[str, Any] | None:
        """The recorded step this one replays, or None (it runs for real); raises on a divergence."""
        self._check()
        ident = (scope, kind, json.dumps(key))
        done = self._done.get(ident)
        if done is not None:  # the same key again in this run: once per execution
            return done
        indexes = self._by_scope.get(scope, ())
        cursor = self._cursor.get(scope, 0)
        while cursor < len(indexes) and indexes[cursor] in self._consumed:
            cursor += 1
        self._cursor[scope] = cursor
        if cursor >= len(indexes):
            if len(self.steps) >= self.max_steps:  # a new step past the cap does not run
                raise self._full(f"{self.max_steps} journaled steps (Limits.max_steps_per_execution)")
            return None
        candidates = [indexes[cursor]]
        if self._inflight.get(scope, 0) > 0:  # concurrent steps (asyncio.gather): they may come in any order
            candidates = [i for i in indexes[cursor:] if i not in self._consumed]
        elif kind in ("call", "once"):
            # steps started together (asyncio.gather) are recorded as they finish, so the first of them to start
            # again may be recorded after the others, and a replay has none in flight (a recorded step returns
            # at once): look through the run of sub-calls and one-time steps here (a one-time step's key is
            # unique in its scope, a sub-call's carries the order it started in: a key matches one step only)
            candidates = []
            for i in indexes[cursor:]:
                if i in self._consumed:
                    continue
                if self.steps[i].get("t") not in ("call", "once"):
                    break
                candidates.append(i)
        for index in candidates:
            step = self.steps[index]
            if step.get("t") == kind and step.get("k") == key:
                self._consumed.add(index)
                self._done[ident] = step
                return step
        expected = self.steps[indexes[cursor]]
        self._failure = ReplayDiverged(self.id, indexes[cursor] + 1, _describe(expected), _wording(kind, key))
        logger.error("%s", self._failure.message)
        raise self._failure

    def _add(self, scope: str, step: dict[str, Any]) -> None:
        """Add a step to the journal (written, and logged, with the next write)."""
        if len(self.steps) >= self.max_steps:
            raise self._full(f"{self.max_steps} journaled steps (Limits.max_steps_per_execution)")
        if scope:
            step["s"] = scope
        index = len(self.steps)
        self.steps.append(step)
        self._unlogged.append(step)
        self._by_scope.setdefault(scope, []).append(index)
        self._consumed.add(index)
        self._done[(scope, step["t"], json.dumps(step["k"]))] = step

    async def _record(self, scope: str, step: dict[str, Any], *, lease: bool = True) -> None:
        self._add(scope, step)
        await self._write(lease=lease)

    async def _settle(self, outcome: Outcome) -> None:
        """The end of a run: record the outcome (when the journal was written) and give the lease up."""
        try:
            if not self.stored:
                return
            if outcome.status == Status.NEEDS_INPUT and self.pending:
                self.status = "parked"
                if self.delivered != self._stored_delivered:
                    await self._write_end()
                return
            self.status = str(getattr(outcome.status, "value", outcome.status))
            self.outcome = outcome.to_dict()
            await self._write_end()
        finally:
            try:
                await self.release()
            except Exception:  # noqa: BLE001 (the store is down: the lease expires by itself)
                logger.warning("execution %s: its lease could not be given up; it expires", self.id)

    async def _write_end(self) -> None:
        """The run's last write, retried with backoff for ``SETTLE_RETRY_SECONDS`` while the store refuses it. If
        it still cannot be written, the run's outcome stands for its caller all the same (the face records it
        in its own record): the journal stays as last written, and a take-over finds the face's record ended
        and ends it (A2A/MCP: the task is terminal; AG-UI: no run carries it)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + SETTLE_RETRY_SECONDS
        delay = 0.05
        while True:
            try:
                await self._write(lease=False)
                return
            except (TakenOver, JournalFull):
                raise
            except Exception as exc:  # noqa: BLE001 (a store fault: tried again, then given up)
                if loop.time() + delay > deadline:
                    logger.warning(
                        "execution %s: its end could not be recorded (%s: %s); a take-over ends it",
                        self.id,
                        type(exc).__name__,
                        exc,
                    )
                    return
                await asyncio.sleep(delay)
                delay = min(delay * 2, 1.0)


class _Scope:
    """The journal as one context sees it: the execution's own steps, or those of a ``ctx.call`` inside it."""

    __slots__ = ("journal", "name")

    def __init__(self, journal: Journal, name: str) -> None:
        self.journal = journal
        self.name = name

    @property
    def in_step(self) -> bool:
        return bool(self.journal._inflight.get(self.name, 0))

    async def call(
        self,
        ctx: Context,
        name: str,
        capability: Capability,
        arguments: Mapping[str, Any],
        *,
        retry: RetryPolicy | None = None,
    ) -> Any:
        return await _journaled_call(ctx, self, name, capability, arguments, retry)

    async def once(
        self,
        ctx: Context,
        name: str,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        *,
        retry: RetryPolicy | None = None,
    ) -> Any:
        return await _once(self, name, fn, args, kwargs, retry)

    def patched(self, ctx: Context, patch_id: str) -> bool:
        """Whether this execution takes the code path of patch ``patch_id`` (as Temporal's ``patched``): True
        for an execution that reaches this point fresh (a marker is recorded, so its replays say True too);
        False for a replay of one recorded before the patch existed (it went past this point without a
        marker), which goes on on the old path. The first answer holds for the rest of the run. Inside a
        one-time step's function it is always True, unrecorded: the function runs only fresh."""
        journal = self.journal
        journal._check()
        known = journal._patches.get((self.name, patch_id))
        if known is not None:  # the first answer holds for the rest of the run, inside steps too
            return known
        if _in_step(journal):
            # inside a one-time step's function: it runs only fresh (a replay returns the step's recorded
            # result without running it), so it is on the new path; no marker, which would land before the step
            return True
        indexes = journal._by_scope.get(self.name, ())
        cursor = journal._cursor.get(self.name, 0)
        while cursor < len(indexes) and indexes[cursor] in journal._consumed:
            cursor += 1
        journal._cursor[self.name] = cursor
        if cursor < len(indexes):  # replaying: the run recorded here has the marker, or predates the patch
            candidates = [indexes[cursor]]
            if journal._inflight.get(self.name, 0) > 0:
                candidates = [i for i in indexes[cursor:] if i not in journal._consumed]
            found = False
            for index in candidates:
                step = journal.steps[index]
                if step.get("t") == "patch" and step.get("k") == patch_id:
                    journal._consumed.add(index)
                    found = True
                    break
        else:  # fresh: the marker goes to the journal with its next write
            journal._add(self.name, {"t": "patch", "k": patch_id})
            found = True
        journal._patches[(self.name, patch_id)] = found
        return found

    async def inputs(self, ctx: Context, requests: Mapping[str, InputRequest]) -> dict[str, Any]:
        journal = self.journal
        if _in_step(journal):
            raise RuntimeError("a one-time step (ctx.once) cannot ask questions; ask before or after it")
        keys = list(requests)
        key: Any = keys[0] if len(keys) == 1 else keys
        step = journal._lookup(self.name, "ask", key)
        if step is not None:
            answers = step.get("a") or {}
            missing = {k: r for k, r in requests.items() if k not in answers}
            if not missing:
                await ctx.end_text_frame()
                return {k: from_json(answers[k]) for k in keys}
            return await self._wait(ctx, step, missing, requests, new=False)
        for request in requests.values():
            needed = needed_capability(request)
            if not ctx.channel.supports(needed):
                raise ClientCapabilityMissing(needed, requests)
        step = {"t": "ask", "k": key, "q": {k: to_json(r) for k, r in requests.items()}, "a": {}}
        return await self._wait(ctx, step, requests, requests, new=True)

    async def _wait(
        self,
        ctx: Context,
        step: dict[str, Any],
        missing: Mapping[str, InputRequest],
        requests: Mapping[str, InputRequest],
        *,
        new: bool,
    ) -> dict[str, Any]:
        """Park on the missing answers: the journal says so (and the lease is given up) before the face is
        asked, so an answer may land on any replica. A face that waits in memory (the fast path) gets its
        answer recorded here, unless another replica resumed the execution meanwhile."""
        journal = self.journal
        await ctx.end_text_frame()  # a question ends the message (and, on AG-UI, the run)
        journal.status = "parked"
        if new:
            await journal._record(self.name, step, lease=False)
        elif journal._stored_status != "parked" or journal.delivered != journal._stored_delivered:
            await journal._write(lease=False)
        await journal.release()
        scope = self.name
        journal._inflight[scope] = journal._inflight.get(scope, 0) + 1
        try:
            given = await ctx.channel.gather(missing)
        except Exception:
            if await _moved_on(journal):
                raise TakenOver(f"execution {journal.id} was resumed elsewhere") from None
            raise
        finally:
            journal._inflight[scope] -= 1
        if not await journal.acquire():
            journal._lost = True
            raise TakenOver(f"execution {journal.id} was resumed elsewhere")
        answers = step.setdefault("a", {})
        logged: dict[str, Any] = {}
        for key, value in given.items():
            if key in missing:
                answers[key] = logged[key] = to_json(value)
        index = next((i for i, s in enumerate(journal.steps) if s is step), None)
        if logged and index is not None:
            journal._unlogged.append({"t": "ans", "i": index, "a": logged})
        journal.status = "running"
        await journal._write()
        return {k: from_json(answers[k]) if k in answers else given.get(k) for k in requests}


def _parsed(payload: Any, request: Any) -> Any:
    if isinstance(request, Ask) and not isinstance(payload, Answer):
        return answer_from(payload, request)
    return payload


async def _moved_on(journal: Journal) -> bool:
    """Whether another replica wrote the journal since this coroutine last did (it resumed the execution)."""
    try:
        found = await journal.state.get(JOURNAL_NS, journal.id)
    except Exception:  # noqa: BLE001 (an unreadable store: not known to have moved on)
        return False
    return found is not None and found.version != journal.version


_bounded: weakref.WeakKeyDictionary[State, int] = weakref.WeakKeyDictionary()


def _bound_log(state: State, max_steps: int) -> None:
    """The step log's bounds: four times as many logs as journals and entries kept four times as long as a
    journal's header (whose age and rank count from its last write, a log's from its last append; each run
    of an execution appends, see _log), and room for every entry of an execution at its step cap."""
    if _bounded.get(state) == max_steps:
        return
    journals = state.limits(JOURNAL_NS)
    state.limit(
        STEPS_NS,
        StoreLimits(
            max_count=4 * journals.max_count,
            max_age=4 * journals.max_age,
            max_len=2 * max_steps + 1_000,
        ),
    )
    _bounded[state] = max_steps


async def _read_log(
    state: State, execution_id: str, last: int
) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """The run and the steps (answers merged into their questions) of the log's entries the header accepts:
    the chain from ``last`` back through each entry's ``p``; entries off the chain (of a writer whose header
    write failed) are ignored."""
    if not last:
        return None, []
    entries: dict[int, dict[str, Any]] = {}
    after = 0
    while after < last:
        page = await state.read(STEPS_NS, execution_id, after, MAX_PAGE)
        if not page:
            break
        for entry_id, entry in page:
            if entry_id > last:
                break
            entries[entry_id] = entry
        after = page[-1][0]
    chain: list[dict[str, Any]] = []
    at = last
    while at:
        link = entries.get(at)
        if link is None:
            raise _LogLost(
                f"the step log of execution {execution_id!r} lost its entry {at} (expired or trimmed): "
                "the execution cannot be replayed"
            )
        chain.append(link)
        at = int(link.get("p") or 0)
    run: dict[str, Any] | None = None
    steps: list[dict[str, Any]] = []
    for entry in reversed(chain):
        if entry.get("run") is not None:
            run = entry["run"]
        _apply(steps, entry.get("e") or ())
    return run, steps


class _LogLost(ValueError):
    """The step log of a journal lost an entry its header names (expired, or evicted past its bounds)."""


def _apply(steps: list[dict[str, Any]], events: Iterable[Mapping[str, Any]]) -> None:
    """Add recorded events to the steps: a step, or the answers to an earlier question (``ans``)."""
    for event in events:
        if event.get("t") == "ans":
            index = int(event.get("i", -1))
            if 0 <= index < len(steps):
                steps[index].setdefault("a", {}).update(event.get("a") or {})
        else:
            steps.append(dict(event))


def _registry_key(capability: Capability) -> str:
    if capability.kind == "resource":
        return capability.uri_template or capability.uri or capability.name
    return capability.name


# -- the steps Context delegates to (``_Scope`` is its ``Recorder``) ---------------------------------------


async def _journaled_call(
    ctx: Context,
    scope: _Scope,
    name: str,
    capability: Capability,
    arguments: Mapping[str, Any],
    retry: RetryPolicy | None = None,
) -> Any:
    """``ctx.call`` in a journaled execution: a recorded sub-call returns its recorded value (its events are
    emitted again, numbered, so delivered ones are skipped); another runs with its own scope of the journal."""
    journal = scope.journal
    if _in_step(journal):
        raise RuntimeError("a one-time step (ctx.once) cannot call tools; call them before or after it")
    number = ctx.next_call()
    key = f"{number}:{name}:{_args_hash(arguments)}"
    call_id = f"call-{journal.id}-{scope.name + '/' if scope.name else ''}{number}"
    step = journal._lookup(scope.name, "call", key)
    await ctx.emit(ToolCallStarted(call_id, name, dict(arguments)))
    if step is not None:
        text = step.get("x") or ""
        if not step.get("ok"):
            await ctx.emit(ToolCallFinished(call_id, name, text, True))
            raise ToolCallFailed(name, text, Outcome.from_dict(step["o"]) if step.get("o") else None)
        await ctx.emit(ToolCallFinished(call_id, name, text, False))
        return _restored(capability, from_json(step.get("v")))
    child = ctx.child(capability)
    child.attach(_Scope(journal, f"{scope.name}/{key}" if scope.name else key))
    journal._inflight[scope.name] = journal._inflight.get(scope.name, 0) + 1
    tries = 0
    try:
        if retry is None:
            outcome = await invoke(capability, arguments, child)
            tries = 1
        else:
            last: list[Outcome] = []

            async def one() -> Outcome:
                nonlocal tries
                tries += 1
                current = child
                if tries > 1:  # a try of its own: its steps are journaled apart from the failed tries'
                    current = ctx.child(capability)
                    scoped = f"{key}#{tries}"
                    current.attach(_Scope(journal, f"{scope.name}/{scoped}" if scope.name else scoped))
                made = await invoke(capability, arguments, current)
                last[:] = [made]
                if made.status == Status.FAILED and made.retryable:
                    raise _RetryableOutcome(made)
                return made

            from . import retries  # the policy's module, for a step with one

            try:
                outcome = await retries.attempt(retry, one)
            except _RetryableOutcome:
                outcome = last[0]
    finally:
        journal._inflight[scope.name] -= 1
    journal._check()
    if outcome.status == Status.NEEDS_INPUT and outcome.pending and journal.pending:
        raise InputsPending(outcome.pending)  # the tool parked on a question: so does the whole execution
    text = "".join(getattr(part, "text", "") for part in outcome.content) or outcome.message
    ok = outcome.status == Status.COMPLETED
    record: dict[str, Any] = {
        "t": "call",
        "k": key,
        "ok": ok,
        "x": text if ok else (text or str(outcome.status)),
    }
    if tries > 1:
        record["n"] = tries
    if ok:
        record["v"] = to_json(outcome.value)
    else:
        record["o"] = outcome.to_dict()
    await journal._record(scope.name, record)
    if not ok:
        await ctx.emit(ToolCallFinished(call_id, name, record["x"], True))
        raise ToolCallFailed(name, record["x"], outcome)
    await ctx.emit(ToolCallFinished(call_id, name, text, False))
    return outcome.value


def _restored(capability: Capability, value: Any) -> Any:
    """A recorded tool value in its declared type again (a pydantic model from its JSON), where one is declared."""
    adapter = capability.output.adapter
    if adapter is None or value is None:
        return value
    try:
        return adapter.validate_python(value)
    except Exception:  # noqa: BLE001 (a value the type no longer fits is handed over as JSON)
        return value


async def _once(
    scope: _Scope,
    name: str,
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    retry: RetryPolicy | None = None,
) -> Any:
    """``ctx.once`` in a journaled execution: run ``fn`` once and journal its JSON result; a replay returns it.

    With ``retry``, ``fn`` runs through the policy (``agentmw.retries``) before anything is recorded: only its
    final result is, with the number of attempts; a final failure is recorded too, and raised again, as
    :class:`~agentmw.retries.StepFailed`, by every replay (the step is not run again)."""
    journal = scope.journal
    if _in_step(journal):
        raise RuntimeError("one-time steps do not nest: ctx.once cannot run inside another")
    step = journal._lookup(scope.name, "once", name)
    if step is not None:
        if "err" in step:
            raise _step_failed(name, step)
        return from_json(step.get("v"))
    journal._inflight[scope.name] = journal._inflight.get(scope.name, 0) + 1
    inside = _IN_STEP.set(journal)
    tries = 0
    failure: BaseException | None = None
    try:
        if retry is None:
            value = await run_step(fn, args, kwargs)
        else:

            async def one() -> Any:
                nonlocal tries
                tries += 1
                return await run_step(fn, args, kwargs)

            from . import retries  # the policy's module, for a step with one

            try:
                value = await retries.attempt(retry, one)
            except NeedsInput:
                raise  # a question is not a failure: it propagates, unrecorded
            except Exception as exc:  # noqa: BLE001 (the final failure is the step's result)
                failure = exc
    finally:
        _IN_STEP.reset(inside)
        journal._inflight[scope.name] -= 1
    if failure is not None:
        record: dict[str, Any] = {
            "t": "once",
            "k": name,
            "err": {"type": type(failure).__qualname__, "message": str(failure)},
            "n": tries,
        }
        await journal._record(scope.name, record)
        raise _step_failed(name, record) from failure
    encoded = recorded_json(value, f"ctx.once({name!r})")
    record = {"t": "once", "k": name, "v": encoded}
    if tries > 1:
        record["n"] = tries
    await journal._record(scope.name, record)
    return value


class _RetryableOutcome(Retryable):
    """A sub-call's retryable failure, raised so that its retry policy tries the call again (after the
    outcome's ``retry_after``, when it has one)."""

    def __init__(self, outcome: Outcome) -> None:
        super().__init__(outcome.message, retry_after=outcome.retry_after)
        self.outcome = outcome


def _step_failed(name: str, step: Mapping[str, Any]) -> Exception:
    from . import retries

    err = step.get("err") or {}
    failed: Exception = retries.StepFailed(
        name, int(step.get("n") or 1), str(err.get("message", "")), str(err.get("type", "Exception"))
    )
    return failed


# -- invoke with a journal ---------------------------------------------------------------------------------


async def run_journaled(
    capability: Capability,
    arguments: Mapping[str, Any] | None,
    ctx: Context,
    journal: Journal,
    *,
    idempotency_key: str | None,
    approval_id: str | None,
) -> Outcome:
    """What ``invoke(..., journal=journal)`` does: the pipeline, with the journal behind ctx's steps."""
    if journal.finished and journal.outcome is not None:
        return Outcome.from_dict(journal.outcome)
    journal._begin(capability, arguments or {}, ctx, idempotency_key, approval_id)
    try:
        outcome = await invoke(
            capability, arguments, ctx, idempotency_key=idempotency_key, approval_id=approval_id
        )
        failure = journal._failure
        if failure is not None:  # even if the function caught it: a divergence always fails the execution
            outcome = Outcome(
                status=Status.FAILED,
                content=[Text(f"{failure.message} {PERMANENT}")],
                message=failure.message,
                code=Code.REPLAY_DIVERGED if isinstance(failure, ReplayDiverged) else JOURNAL_FULL,
                data=failure.data,
            )
        elif journal._faulted and outcome.status == Status.FAILED and outcome.retryable:
            # a journal write failed (the store refused it) and the run failed of it: the execution did not.
            # Nothing is recorded; the lease is given up, so a resume or a take-over goes on from the last
            # recorded step.
            try:
                await journal.release()
            except Exception:  # noqa: BLE001 (the store is still down: the lease expires)
                journal._stop_renewer()
            return outcome
        await journal._settle(outcome)
        return outcome
    except TakenOver as exc:
        journal._stop_renewer()
        journal._leased = False
        ended = await _ended_elsewhere(journal)
        if ended is not None:  # canceled meanwhile (an operator): that is this caller's answer
            return ended
        return Outcome(
            status=Status.CANCELED,
            message=f"{exc} The execution goes on where it was resumed.",
            code=Code.TAKEN_OVER,
        )
    except BaseException:
        # cancellation (or a crash of the face): nothing is written and the lease is not given up, so when it
        # expires another replica may take the execution over and replay it. A face that cancels for good
        # calls Journal.cancel().
        journal._stop_renewer()
        raise


async def _ended_elsewhere(journal: Journal) -> Outcome | None:
    """The recorded cancel of an execution that another writer canceled while this run held it (an operator's
    ``agentmw executions cancel``), or None when it goes on elsewhere (a take-over) or cannot be read."""
    try:
        found = await journal.state.get(JOURNAL_NS, journal.id)
    except Exception:  # noqa: BLE001 (unknown: it is reported as moved on, as before)
        return None
    if found is None:
        return None
    value = found.value
    # only a cancel: an end a take-over recorded (a dead letter, a function gone) was told by that replica
    if value.get("status") != "canceled" or not value.get("outcome"):
        return None
    try:
        return Outcome.from_dict(value["outcome"])
    except Exception:  # noqa: BLE001
        return None


# -- resuming on any replica --------------------------------------------------------------------------------


class _ReplayChannel:
    """The channel of a resume without a face: recorded answers only; a new question parks the execution."""

    def __init__(self, supports: list[str]) -> None:
        self._supports = frozenset(supports)

    def supports(self, capability: str) -> bool:
        return capability in self._supports

    async def progress(self, progress: float, total: float | None, message: str | None) -> None:
        return None

    async def log(self, level: str, data: Any, logger: str | None) -> None:
        return None

    async def gather(self, requests: Mapping[str, InputRequest]) -> dict[str, Any]:
        raise InputsPending(requests)


def _find(agent: Services, run: Mapping[str, Any]) -> Capability | None:
    kind, name = run.get("kind"), run.get("name")
    table = {"tool": agent.tools, "skill": agent.skills, "prompt": agent.prompts}.get(str(kind))
    if table is not None:
        return table.get(str(name))
    return agent.resources.get(str(name)) or agent.templates.get(str(name))


async def resume(
    agent: Services,
    execution_id: str,
    *,
    answers: Mapping[str, Any] | None = None,
    channel: Any = None,
    request: Any = None,
    messages: list[Any] | None = None,
    owner: str | None = None,
    lease_seconds: float = DEFAULT_LEASE_SECONDS,
    wait: float = 0.0,
    journal: Journal | None = None,
    state: dict[str, Any] | None = None,
    expected_version: int | None = None,
) -> Outcome:
    """Resume a stored execution on this replica: take its lease, record ``answers`` to its pending
    questions, and replay it (docs/durability.md).

    Args:
        answers: payloads by question key, as the face received them (parsed like any answer) or parsed.
        channel: the face's channel for this resume (its events, new questions); None: events are dropped
            and a new question parks the execution again (``needs_input``). A channel with a ``bind(ctx)``
            method is handed the replay's context before the function starts.
        request: the HTTP connection of the request that resumes it (host dependencies, identity).
        messages: ``ctx.messages`` for the replay; default: those stored at the first journaled step.
        state: ``ctx.state`` for the replay (a face that keeps a shared state, AG-UI): the state as the
            execution started, so that the replay makes the same changes, in the same order, as the first run.
        wait: how long to wait for a lease held elsewhere (to expire, or be given up).
        journal: a journal already loaded (``Journal.load``); default: read it now.
        expected_version: a take-over of an orphan (default: the version of an :class:`Orphan` the journal
            was loaded with): it goes on only if, once this call holds the lease, the execution is still
            running at that version; otherwise it is left as it is (``taken_over``): it parked, ended or was
            resumed since the sweep saw it.

    A resume that finds the execution running (its holder died, or lost it) is a recovery: the journal counts
    it, and past ``Limits.max_recovery_attempts`` the execution ends as a dead letter (status ``dead``,
    outcome ``failed`` with code ``recovery_exhausted``) instead of being replayed again; :func:`retry` makes
    it runnable again.

    Returns the outcome: that of the replay; the recorded one when the execution already ended;
    ``failed`` with code ``execution_busy`` (retryable) when another replica holds its lease;
    ``rejected`` with code ``unknown_execution`` when there is no such journal.
    """
    replay_state, store = state, agent.state
    if journal is None:
        journal = await Journal.load(store, execution_id, owner=owner, lease_seconds=lease_seconds)
    execution_id = str(execution_id)
    if expected_version is None and journal is not None:
        expected_version = journal._expected
    if expected_version is not None and (
        journal is None or journal.version != expected_version or journal.status != "running"
    ):
        return _left_alone(execution_id)
    if journal is not None and journal.log_lost is not None:  # it cannot be replayed: it ends, or ended
        if journal.finished and journal.outcome:
            return Outcome.from_dict(journal.outcome)
        return await _log_lost(journal)
    if journal is None or journal.run is None:
        return Outcome(
            status=Status.REJECTED,
            code=Code.UNKNOWN_EXECUTION,
            message=f"No stored execution {execution_id!r}: it never took a journaled step, or it expired.",
        )
    if journal.finished:
        return (
            Outcome.from_dict(journal.outcome)
            if journal.outcome
            else Outcome(
                status=Status.CANCELED,
                code=journal.status,
                message=f"Execution {execution_id!r} ended ({journal.status}).",
            )
        )
    deadline = time.monotonic() + max(wait, 0.0)
    while not await journal.acquire(owner, lease_seconds):
        if time.monotonic() >= deadline:
            return Outcome(
                status=Status.FAILED,
                retryable=True,
                retry_after=journal.lease_seconds / 3,
                code=Code.EXECUTION_BUSY,
                content=[Text(f"Execution {execution_id!r} is running on another replica. Retry later.")],
                message=f"Execution {execution_id!r} is running on another replica.",
            )
        await asyncio.sleep(min(0.05, max(deadline - time.monotonic(), 0.001)))
    try:
        fresh = await store.get(
            JOURNAL_NS, execution_id
        )  # the lease is ours: read what the last holder wrote
        if fresh is None:
            await journal.release()
            return Outcome(
                status=Status.REJECTED,
                code=Code.UNKNOWN_EXECUTION,
                message=f"No stored execution {execution_id!r}.",
            )
        if expected_version is not None and (
            fresh.version != expected_version or fresh.value.get("status") != "running"
        ):
            await journal.release()
            return _left_alone(execution_id)
        if fresh.version != journal.version:
            moved = await Journal.load(
                store, execution_id, owner=journal.owner, lease_seconds=journal.lease_seconds
            )
            assert moved is not None
            moved._leased, journal._leased = True, False
            journal._stop_renewer()
            moved._start_renewer()
            journal = moved
            if journal.finished:
                await journal.release()
                return await resume(agent, execution_id, journal=journal)
        run = journal.run
        assert run is not None
        journal._limit(agent)  # the caps hold for the answers recorded below too
        capability = _find(agent, run)
        if capability is None:
            return await _gone(agent, journal, run)
        if journal.status == "running":  # its holder died (or lost it): a recovery, counted
            limits = getattr(agent, "limits", None)
            limit = getattr(limits, "max_recovery_attempts", journal.max_recovery_attempts)
            if journal.attempts >= limit:
                return await _dead_letter(journal, limit)
            journal.attempts += 1
            await journal._write()
            STATS["takeovers"] += 1
        if answers:
            try:
                await journal.answer(answers)
            except JournalFull as full:
                outcome = Outcome(
                    status=Status.FAILED,
                    content=[Text(f"{full.message} {PERMANENT}")],
                    message=full.message,
                    code=JOURNAL_FULL,
                    data=full.data,
                )
                await journal._settle(outcome)  # ends it (failed) and gives the lease up
                return outcome
        ctx = Context(
            capability,
            channel or _ReplayChannel(list(run.get("supports") or [])),
            request,
            run.get("caller"),
            agent=agent,
            face=run.get("face"),
            state=replay_state,
        )
        bind = getattr(channel, "bind", None)
        if bind is not None:  # a face's channel that needs the replay's context (AG-UI counts progress on it)
            bind(ctx)
        ctx.messages = list(messages) if messages is not None else list(from_json(run.get("messages")) or [])
        # no idempotency key: it guarded the start of this execution, and a resume is the same execution
        return await invoke(
            capability,
            from_json(run.get("arguments")) or {},
            ctx,
            approval_id=run.get("approvalId"),
            journal=journal,
        )
    except TakenOver as exc:
        await journal.release()
        return Outcome(status=Status.CANCELED, message=str(exc), code=Code.TAKEN_OVER)
    except BaseException:
        # cancelled (or failed) between taking the lease and replaying: stop renewing it, so it expires and
        # another attempt can take the execution over; a renewer left running would hold it forever
        journal._stop_renewer()
        raise


def _left_alone(execution_id: str) -> Outcome:
    return Outcome(
        status=Status.CANCELED,
        code=Code.TAKEN_OVER,
        message=f"Execution {execution_id!r} moved on since the orphan sweep saw it (it parked, ended or was "
        "resumed): it is not taken over.",
    )


async def _gone(agent: Services, journal: Journal, run: Mapping[str, Any]) -> Outcome:
    """An execution whose function this deploy does not serve (it was removed or renamed): it fails for good,
    saying so (a caller waiting on it is told, and a later resume finds the same)."""
    now = getattr(agent, "code_version", None)
    then = journal.code_version
    versions = ""
    if then or now:
        versions = f" (code version {then or 'unknown'} → {now or 'unknown'})"
    message = (
        f"Execution {journal.id!r} cannot go on: its function {run.get('name')!r} ({run.get('kind')}) is no "
        f"longer served by this deploy{versions}. Start it again."
    )
    journal.status = "failed"
    journal.reason = message
    journal.outcome = Outcome(
        status=Status.FAILED,
        content=[Text(f"{message} {PERMANENT}")],
        message=message,
        code=CAPABILITY_GONE,
        data={"execution": journal.id, "function": run.get("name"), "from": then, "to": now},
    ).to_dict()
    try:
        await journal._write()
    finally:
        await journal.release()
    logger.warning("%s", message)
    return Outcome.from_dict(journal.outcome)


async def _log_lost(journal: Journal) -> Outcome:
    """An execution whose step log lost entries: it cannot be replayed, so it fails for good, saying so (its
    callers are told; no sweep takes it over again)."""
    message = (
        f"Execution {journal.id!r} cannot go on: {journal.log_lost} (past the store's retention or bounds for "
        "the journal, StoreLimits of 'journal'). Start it again."
    )
    journal.status = "failed"
    journal.reason = message
    journal.outcome = Outcome(
        status=Status.FAILED,
        content=[Text(f"{message} {PERMANENT}")],
        message=message,
        code=JOURNAL_LOST,
        data={"execution": journal.id},
    ).to_dict()
    try:
        await journal._write(lease=False)
    except TakenOver:
        pass  # another writer moved it on: what it recorded stands
    return Outcome.from_dict(journal.outcome)


async def _dead_letter(journal: Journal, limit: int) -> Outcome:
    """Give the execution up: past ``limit`` take-overs it is a dead letter, told to its caller, kept for an
    operator (:func:`retry`)."""
    message = (
        f"Execution {journal.id!r} was given up after {journal.attempts} recoveries: each time it was taken "
        f"over, it did not end (its replica died or lost it), past the limit of {limit} "
        "(Limits.max_recovery_attempts). It is kept as a dead letter; an operator can retry it "
        f"(agentmw executions retry {journal.id})."
    )
    journal.status = DEAD
    journal.reason = message
    journal.outcome = Outcome(
        status=Status.FAILED,
        content=[Text(message)],
        message=message,
        code=RECOVERY_EXHAUSTED,
        data={"execution": journal.id, "attempts": journal.attempts, "limit": limit},
    ).to_dict()
    try:
        await journal._write()
    finally:
        await journal.release()
    STATS["dead_letters"] += 1
    logger.error("%s", message)
    return Outcome.from_dict(journal.outcome)


async def cancel(
    agent: Services,
    execution_id: str,
    message: str = "The execution was canceled.",
    *,
    expected_version: int | None = None,
) -> bool:
    """Record that a stored execution was canceled (A2A ``CancelTask``, AG-UI abort); False if none is stored
    or it already ended. The coroutine running it, if any, is the face's to cancel.

    ``expected_version`` (default: that of an :class:`Orphan`): only if its record is still at that version
    (a sweep that found it orphaned; one that parked or moved on since is left alone)."""
    if expected_version is None and isinstance(execution_id, Orphan):
        expected_version = execution_id.version
    journal = await Journal.load(_state_of(agent), str(execution_id))
    if journal is None or journal.finished:
        return False
    if expected_version is not None and journal.version != expected_version:
        return False
    try:
        await journal.cancel(message)
    except TakenOver:
        return False
    return True


async def orphaned(agent: Services, *, limit: int = 100) -> list[Orphan]:
    """Executions stored as running whose lease has expired: their replica died. Each is an :class:`Orphan`
    (its id, and the version of its record the scan saw); resume each with :func:`resume` (which takes the
    lease, so of several replicas sweeping at once, one takes each, and only while it is still running at
    that version: one that parked or ended since the scan is not taken over)."""
    state = agent.state
    found: list[Orphan] = []
    cursor = None
    while len(found) < limit:
        page = await state.scan(JOURNAL_NS, where={"status": "running"}, cursor=cursor, limit=min(limit, 100))
        for item in page.items:
            if await state.get_key(LEASE_NS, item.key) is None:
                found.append(Orphan(item.key, item.version))
        if page.next is None:
            break
        cursor = page.next
    return found[:limit]


# -- what operators see and do (``agentmw executions ...``) ---------------------------------------------------


def _state_of(where: Any) -> State:
    """The state of an agent (``agent.state``), or ``where`` itself when it is a state."""
    return where if isinstance(where, State) else where.state


@dataclass(frozen=True, slots=True)
class ExecutionInfo:
    """One stored execution as an operator sees it (``agentmw executions list``).

    ``status``: ``running``, ``parked`` (waiting on an answer), ``completed``, ``failed``, ``canceled``, or
    ``dead`` (a dead letter: given up after ``attempts`` take-overs; ``reason`` says why). ``holder``: who holds
    its lease now (None: nobody; a running execution without one is taken over by the next sweep)."""

    id: str
    status: str
    attempts: int
    code_version: str | None
    steps: int
    updated_at: float
    holder: str | None
    name: str | None
    kind: str | None
    face: str | None
    reason: str | None
    version: int


@dataclass(frozen=True, slots=True)
class ExecutionDetail:
    """One execution with its journal (``agentmw executions show``): each step as recorded (``t``: ``ask``,
    ``call``, ``once`` or ``patch``; ``k``: its key; ``s``: the scope of a sub-call's own steps; ``n``: the
    attempts of a step with a retry policy; an ask's answers in ``a``), what it runs, and its outcome."""

    info: ExecutionInfo
    steps: list[dict[str, Any]]
    run: dict[str, Any] | None
    outcome: dict[str, Any] | None


def _info(key: str, value: Mapping[str, Any], version: int, holder: str | None) -> ExecutionInfo:
    run = value.get("run") or {}
    steps = value.get("stepCount")
    if steps is None:  # format 1
        steps = len(value.get("steps") or ())
    outcome = value.get("outcome") or {}
    reason = value.get("reason")
    if reason is None and value.get("status") == "failed":
        reason = outcome.get("message") or None
    return ExecutionInfo(
        id=key,
        status=str(value.get("status") or "running"),
        attempts=int(value.get("attempts") or 0),
        code_version=value.get("codeVersion"),
        steps=int(steps),
        updated_at=float(value.get("updatedAt") or 0.0),
        holder=holder,
        name=value.get("name") or run.get("name"),
        kind=value.get("kind") or run.get("kind"),
        face=value.get("face") or run.get("face"),
        reason=reason,
        version=version,
    )


async def _holder(state: State, execution_id: str) -> str | None:
    found = await state.get_key(LEASE_NS, execution_id)
    return None if found is None else str(found.get("owner"))


async def list_executions(
    where: Any, *, status: str | None = None, limit: int = 100, cursor: str | None = None
) -> tuple[list[ExecutionInfo], str | None]:
    """One page of the stored executions, the most recently written first, optionally of one ``status``;
    returns them and the cursor of the next page (None: the last). ``where``: an agent, or a state."""
    state = _state_of(where)
    page = await state.scan(
        JOURNAL_NS,
        where={"status": status} if status else None,
        cursor=cursor,
        limit=max(1, min(limit, MAX_PAGE)),
    )
    infos = [_info(item.key, item.value, item.version, await _holder(state, item.key)) for item in page.items]
    return infos, page.next


async def show_execution(where: Any, execution_id: str) -> ExecutionDetail | None:
    """The execution with its steps, or None when none is stored under that id."""
    state = _state_of(where)
    found = await state.get(JOURNAL_NS, execution_id)
    if found is None:
        return None
    journal = Journal(state, execution_id)
    await journal._read(found.value, found.version)
    info = _info(execution_id, found.value, found.version, await _holder(state, execution_id))
    return ExecutionDetail(info, [dict(step) for step in journal.steps], journal.run, journal.outcome)


async def cancel_execution(
    where: Any, execution_id: str, message: str = "The execution was canceled by an operator."
) -> bool:
    """End a stored execution for good (as :func:`cancel`): a resume or a take-over finds it canceled. The
    coroutine running it, if any, stops at its next journaled step (its write finds the record moved on)."""
    journal = await Journal.load(_state_of(where), execution_id)
    if journal is None or journal.finished and journal.status != DEAD:
        return False
    try:
        await journal.cancel(message)
    except TakenOver:
        return False
    return True


async def retry(where: Any, execution_id: str) -> bool:
    """Make a dead letter runnable again: its take-over count starts over, and the next orphan sweep of a
    replica that serves its function takes it over (replaying its journal). False when it is not a dead
    letter (or another writer moved it on meanwhile).

    Raises :class:`RetryRefused` for a dead letter of a face where no caller could see it go on (an AG-UI
    run's, whose run ended for good); it stays dead."""
    state = _state_of(where)
    journal = await Journal.load(state, execution_id)
    if journal is None or journal.status != DEAD:
        return False
    why = _NOT_RETRIED.get(str((journal.run or {}).get("face")))
    if why is not None:
        raise RetryRefused(journal.id, f"execution {journal.id!r} cannot be retried: {why}.")
    # a stale lease goes before the record says running again: once it does, a sweep may take the execution
    # over, and a delete then would drop that take-over's live lease (a second sweep would replay it again)
    await state.delete_key(LEASE_NS, execution_id)
    journal.status = "running"
    journal.attempts = 0
    journal.outcome = None
    journal.reason = None
    journal.retried = True
    try:
        await journal._write(lease=False)
    except TakenOver:
        return False
    logger.warning("execution %s: retried by an operator; the next sweep takes it over", execution_id)
    return True


async def resume_now(where: Any, execution_id: str) -> bool:
    """Have a running execution taken over at the next orphan sweep of any replica, even if a holder still
    names itself in its lease (a stuck one: a replica that stalls; if it lives on, its next journaled write
    finds the record moved on and it stops, so two replicas never both record); a dead letter is retried
    (:func:`retry`, which may raise :class:`RetryRefused`). False for one that is parked, or ended."""
    state = _state_of(where)
    journal = await Journal.load(state, execution_id)
    if journal is None:
        return False
    if journal.status == DEAD:
        return await retry(state, execution_id)
    if journal.status != "running":
        return False
    await state.delete_key(LEASE_NS, execution_id)
    logger.warning("execution %s: its lease was dropped by an operator, for a take-over", execution_id)
    return True
