"""Executions that survive their process: a journal per execution, replayed on any replica (docs/durability.md).

A :class:`Journal` records what one execution learned from outside its own code: the answers to its
questions (``ctx.ask``, ``ctx.confirm``, a gate's approval, keyed by the question key), the results of its
``ctx.call`` sub-calls (keyed by call order, tool name and a hash of the arguments), the results of its
one-time steps (``await ctx.once(name, fn, *args)``), and how many of its events were already delivered.
It lives in the agent's shared state (``agent.state``) as one versioned record, written with
compare-and-set at each step, so whichever replica holds the execution's lease can replay it:
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
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from typing import TYPE_CHECKING, Any

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
from .errors import Permanent
from .events import CoreEvent, ToolCallFinished, ToolCallStarted
from .outcomes import PERMANENT, Code, InputsPending, Outcome, Status
from .pipeline import journaled_approval
from .runtime import invoke
from .state import Conflict

if TYPE_CHECKING:
    from .capability import Capability
    from .state import State

__all__ = [
    "FORMAT",
    "JOURNAL_NS",
    "LEASE_NS",
    "Journal",
    "ReplayDiverged",
    "TakenOver",
    "cancel",
    "journaled_approval",
    "orphaned",
    "resume",
]

logger = logging.getLogger("agentmw")

FORMAT = 1
"""The version of the record's layout (``"format"``); a replica refuses a journal of a newer one."""

JOURNAL_NS = "journal"
LEASE_NS = "journal.lease"
DEFAULT_LEASE_SECONDS = 30.0
_CAPABILITIES = ("elicitation", "sampling", "roots")
_PROCESS = f"{socket.gethostname()}-{os.getpid()}"


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
        self._failure: ReplayDiverged | None = None
        self._in_once = 0
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
        """The stored journal of the execution, or None."""
        found = await state.get(JOURNAL_NS, execution_id)
        if found is None:
            return None
        value, version = found
        if int(value.get("format", 0)) > FORMAT:
            raise ValueError(
                f"the journal of {execution_id!r} has format {value.get('format')}, newer than "
                f"this agentmw reads ({FORMAT})"
            )
        journal = cls(state, execution_id, owner=owner, lease_seconds=lease_seconds)
        journal.run = value.get("run")
        journal.steps = list(value.get("steps") or [])
        journal.version = version
        journal.status = journal._stored_status = value.get("status") or "running"
        journal.outcome = value.get("outcome")
        journal.delivered = journal._stored_delivered = int(value.get("delivered") or 0)
        return journal

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
        if taken:
            self._leased = True
            self._lost = False
            self._start_renewer()
        return taken

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
            except asyncio.CancelledError:
                raise
            except TakenOver:
                return
            except Exception:
                logger.exception("renewing the lease of execution %s failed", self.id)

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
            "run": self.run,
            "steps": self.steps,
            "delivered": self.delivered,
            "owner": self.owner,
            "updatedAt": time.time(),
        }
        if self.outcome is not None:
            value["outcome"] = self.outcome
        return value

    async def _write(self, *, lease: bool = True) -> None:
        """Write the record (compare-and-set on the version this journal read or wrote last).

        ``lease``: take the lease first if this journal does not hold it (a running execution); a park
        needs none. A conflict means another coroutine moved the execution on: this one stops.
        """
        if self._lost:
            raise TakenOver(f"execution {self.id} lost its lease")
        if lease and not self._leased and not await self.acquire():
            self._lost = True
            raise TakenOver(f"execution {self.id} is held by another replica")
        async with self._lock:
            delivered = self.delivered
            try:
                self.version = await self.state.put(
                    JOURNAL_NS, self.id, self._value(), expected_version=self.version or None
                )
            except Conflict as exc:
                self._lost = True
                self._stop_renewer()
                raise TakenOver(
                    f"execution {self.id} was moved on elsewhere (version {exc.actual})"
                ) from None
            self._stored_delivered = delivered
            self._stored_status = self.status

    async def flush(self) -> None:
        """Write the count of delivered events now (it is otherwise written with the next step)."""
        if self.stored and self.delivered != self._stored_delivered:
            await self._write(lease=False)

    async def answer(self, answers: Mapping[str, Any]) -> bool:
        """Record answers to pending questions (raw payloads as a face received them, or parsed answers);
        True if any was recorded. Compare-and-set: of two replicas answering one question, one wins, and
        the other gets :class:`TakenOver`."""
        changed = False
        for step in self.steps:
            if step.get("t") != "ask":
                continue
            recorded = step.setdefault("a", {})
            for key, request in (step.get("q") or {}).items():
                if key in recorded or key not in answers:
                    continue
                recorded[key] = to_json(_parsed(answers[key], from_json(request)))
                changed = True
        if changed:
            self.status = "running"
            await self._write(lease=False)
        return changed

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
        self.seq = 0
        self._skip_through = self.delivered
        self._replay_end = len(self.steps)
        self._messages = ctx.messages
        ctx.attach(_Scope(self, ""), numbering=self._counting)
        if self._leased:
            self._start_renewer()

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
            return None
        candidates = [indexes[cursor]]
        if self._inflight.get(scope, 0) > 0:  # concurrent steps (asyncio.gather): they may come in any order
            candidates = [i for i in indexes[cursor:] if i not in self._consumed]
        elif kind == "call":
            # sub-calls started together are recorded as they finish, so the first of them to start again may
            # be recorded after the others: look through the run of calls here (their keys carry the order
            # they started in, so a key matches one call only)
            candidates = []
            for i in indexes[cursor:]:
                if i in self._consumed:
                    continue
                if self.steps[i].get("t") != "call":
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

    async def _record(self, scope: str, step: dict[str, Any], *, lease: bool = True) -> None:
        if scope:
            step["s"] = scope
        index = len(self.steps)
        self.steps.append(step)
        self._by_scope.setdefault(scope, []).append(index)
        self._consumed.add(index)
        self._done[(scope, step["t"], json.dumps(step["k"]))] = step
        await self._write(lease=lease)

    async def _settle(self, outcome: Outcome) -> None:
        """The end of a run: record the outcome (when the journal was written) and give the lease up."""
        try:
            if not self.stored:
                return
            if outcome.status == Status.NEEDS_INPUT and self.pending:
                self.status = "parked"
                if self.delivered != self._stored_delivered:
                    await self._write(lease=False)
                return
            self.status = str(getattr(outcome.status, "value", outcome.status))
            self.outcome = outcome.to_dict()
            await self._write(lease=False)
        finally:
            await self.release()


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
        self, ctx: Context, name: str, capability: Capability, arguments: Mapping[str, Any]
    ) -> Any:
        return await _journaled_call(ctx, self, name, capability, arguments)

    async def once(
        self,
        ctx: Context,
        name: str,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> Any:
        return await _once(self, name, fn, args, kwargs)

    async def inputs(self, ctx: Context, requests: Mapping[str, InputRequest]) -> dict[str, Any]:
        journal = self.journal
        if journal._in_once:
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
        for key, value in given.items():
            if key in missing:
                answers[key] = to_json(value)
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


def _registry_key(capability: Capability) -> str:
    if capability.kind == "resource":
        return capability.uri_template or capability.uri or capability.name
    return capability.name


# -- the steps Context delegates to (``_Scope`` is its ``Recorder``) ---------------------------------------


async def _journaled_call(
    ctx: Context, scope: _Scope, name: str, capability: Capability, arguments: Mapping[str, Any]
) -> Any:
    """``ctx.call`` in a journaled execution: a recorded sub-call returns its recorded value (its events are
    emitted again, numbered, so delivered ones are skipped); another runs with its own scope of the journal."""
    journal = scope.journal
    if journal._in_once:
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
    try:
        outcome = await invoke(capability, arguments, child)
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
    scope: _Scope, name: str, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """``ctx.once`` in a journaled execution: run ``fn`` once and journal its JSON result; a replay returns it."""
    journal = scope.journal
    if journal._in_once:
        raise RuntimeError("one-time steps do not nest: ctx.once cannot run inside another")
    step = journal._lookup(scope.name, "once", name)
    if step is not None:
        return from_json(step.get("v"))
    journal._inflight[scope.name] = journal._inflight.get(scope.name, 0) + 1
    journal._in_once += 1
    try:
        value = await run_step(fn, args, kwargs)
    finally:
        journal._in_once -= 1
        journal._inflight[scope.name] -= 1
    encoded = recorded_json(value, f"ctx.once({name!r})")
    await journal._record(scope.name, {"t": "once", "k": name, "v": encoded})
    return value


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
                code=Code.REPLAY_DIVERGED,
                data=failure.data,
            )
        await journal._settle(outcome)
        return outcome
    except TakenOver as exc:
        journal._stop_renewer()
        journal._leased = False
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

    Returns the outcome: that of the replay; the recorded one when the execution already ended;
    ``failed`` with code ``execution_busy`` (retryable) when another replica holds its lease;
    ``rejected`` with code ``unknown_execution`` when there is no such journal.
    """
    replay_state, store = state, agent.state
    if journal is None:
        journal = await Journal.load(store, execution_id, owner=owner, lease_seconds=lease_seconds)
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
        capability = _find(agent, run)
        if capability is None:
            await journal.release()
            return Outcome(
                status=Status.FAILED,
                code=Code.UNKNOWN_CAPABILITY,
                message=f"This replica does not serve {run.get('kind')} {run.get('name')!r}, which "
                f"execution {execution_id!r} runs.",
            )
        if answers:
            await journal.answer(answers)
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


async def cancel(agent: Services, execution_id: str, message: str = "The execution was canceled.") -> bool:
    """Record that a stored execution was canceled (A2A ``CancelTask``, AG-UI abort); False if none is stored
    or it already ended. The coroutine running it, if any, is the face's to cancel."""
    journal = await Journal.load(agent.state, execution_id)
    if journal is None or journal.finished:
        return False
    try:
        await journal.cancel(message)
    except TakenOver:
        return False
    return True


async def orphaned(agent: Services, *, limit: int = 100) -> list[str]:
    """Executions stored as running whose lease has expired: their replica died. Resume each with
    :func:`resume` (which takes the lease, so of several replicas sweeping at once, one takes each)."""
    state = agent.state
    found: list[str] = []
    cursor = None
    while len(found) < limit:
        page = await state.scan(JOURNAL_NS, where={"status": "running"}, cursor=cursor, limit=min(limit, 100))
        for item in page.items:
            if await state.get_key(LEASE_NS, item.key) is None:
                found.append(item.key)
        if page.next is None:
            break
        cursor = page.next
    return found[:limit]
