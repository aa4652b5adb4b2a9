"""Running a task over the core, the same way on every face: a journal, a coroutine of its own, and one place
that decides how a run or a resume ends when it is cancelled, taken over or broken.

A face's runner subclasses :class:`TaskRunner` and says three things: which channel a task's function gets
(:meth:`channel`: how its progress and questions reach the face's wire), how an outcome becomes the task's
end (:meth:`settle`), and how a task is ended with a text (:meth:`finish`). Everything else (the journal
that lets any replica resume or take the task over, letting go of a task another process goes on with,
cancellation) is here, once (docs/durability.md).
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from abc import ABC, abstractmethod
from collections.abc import Callable, Coroutine, Generator, Mapping
from typing import TYPE_CHECKING, Any

from .._transport import store_fault
from ..capability import Capability
from ..context import Context, InputRequest
from ..journal import Journal
from ..journal import cancel as cancel_execution
from ..journal import resume as resume_execution
from ..lifecycle import RESTART_REASON, TaskState
from ..outcomes import raised_outcome
from ..runtime import Outcome, invoke
from .host import TaskHost
from .registry import LiveTask, TaskRegistry

if TYPE_CHECKING:
    from starlette.requests import HTTPConnection


__all__ = ["LOST_REASON", "RESTART_REASON", "TaskChannelBase", "TaskRunner", "eager", "journaled", "start"]

logger = logging.getLogger("agentmw")

LOST_REASON = (
    "The agent lost this task's execution (it was restarted, or this request reached another replica); "
    "nothing more will run."
)


def journaled(capability: Capability) -> bool:
    """Whether its function can take a journaled step at all: it has a Context parameter, or a gate. One
    that cannot runs without a journal, for nothing (docs/durability.md)."""
    return capability.params.context_param is not None or capability.gate is not None


def eager(agent: TaskHost, capability: Capability) -> bool:
    """Whether a task of ``capability`` may start eagerly, in the request that creates it (:func:`start`): its
    function never suspends (``Capability.never_suspends``), and nothing the pipeline would do first can
    (hooks, access rules, roots, a gate, the host app's dependencies, a journal, a deadline). The caller adds
    what only it knows: no idempotency key, and nobody watching the task's intermediate states."""
    # no deadline either: asyncio.timeout belongs to the task it is entered in, which would be the request's
    return (
        capability.never_suspends
        and capability.timeout is None
        and agent.hooks is None
        and agent.access is None
        and capability.policy is None
        and capability.gate is None
        and not capability.path_params
        and not capability.params.host_params
        and not journaled(capability)
    )


def start(run: Coroutine[Any, Any, None], name: str, *, eagerly: bool) -> asyncio.Task[None] | None:
    """Start a task's coroutine: in an asyncio task of its own, or, ``eagerly``, in the caller until it first
    suspends (as Python 3.12's eager tasks do). A run that ends without suspending (what :func:`eager`
    promises) costs no task and no turn of the event loop, and nothing can cancel it halfway; None is
    returned then. One that suspends after all goes on in a task of its own, from where it stopped.

    The first step runs in a copy of the caller's context, as a task's would, so what it sets in context
    variables stays its own."""
    if not eagerly:
        return asyncio.get_running_loop().create_task(run, name=name)
    context = contextvars.copy_context()
    try:
        waiting_on = context.run(run.send, None)
    except StopIteration:
        return None
    return asyncio.get_running_loop().create_task(_go_on(run, waiting_on), name=name, context=context)


async def _go_on(run: Coroutine[Any, Any, None], waiting_on: Any) -> None:
    await _Suspended(run, waiting_on)


class _Suspended:
    """A coroutine that suspended on ``waiting_on`` in its first step, driven on from there by the task that
    awaits this: what the task sends or throws in goes to the coroutine, what the coroutine yields to the task."""

    __slots__ = ("run", "waiting_on")

    def __init__(self, run: Coroutine[Any, Any, None], waiting_on: Any) -> None:
        self.run = run
        self.waiting_on = waiting_on

    def __await__(self) -> Generator[Any, Any, None]:
        run, waiting_on = self.run, self.waiting_on
        while True:
            try:
                received = yield waiting_on
            except BaseException as exc:  # noqa: BLE001  (a cancellation, passed on to where the run waits)
                try:
                    waiting_on = run.throw(exc)
                except StopIteration:
                    return
            else:
                try:
                    waiting_on = run.send(received)
                except StopIteration:
                    return


class TaskChannelBase:
    """What every face's task channel shares: its task, and muting what a replay does again."""

    def __init__(self, runner: TaskRunner, live: LiveTask, journal: Journal | None = None) -> None:
        self.runner = runner
        self.registry = runner.registry
        self.live = live
        self.journal = journal  # a replay: what it does again before its last recorded step is not sent again

    def _muted(self) -> bool:
        journal = self.journal
        if journal is None:
            return False
        if journal.replaying:
            return True
        self.journal = None  # caught up: from here on, everything is new
        return False


class TaskRunner(ABC):
    """The face-neutral part of running tasks; ``face`` names the face for the function's context."""

    face = "a2a"

    def __init__(self, agent: TaskHost, registry: TaskRegistry) -> None:
        self.agent = agent
        self.registry = registry

    # --- what a face says --------------------------------------------------------------------------------
    @abstractmethod
    def channel(self, live: LiveTask, journal: Journal | None) -> Any:
        """The core channel of one task; ``journal``: a replay, whose events before its last recorded step
        were delivered already."""

    @abstractmethod
    def settle(self, live: LiveTask, outcome: Outcome) -> None:
        """The task's end (or its question) from the core's outcome."""

    @abstractmethod
    def finish(self, live: LiveTask, state: str, text: str, metadata: dict[str, Any] | None = None) -> None:
        """End the task in ``state`` with ``text`` saying why."""

    # --- running -----------------------------------------------------------------------------------------
    async def execute(
        self,
        live: LiveTask,
        capability: Capability,
        connection: HTTPConnection | None,
        arguments: dict[str, Any],
        *,
        idempotency_key: str | None = None,
        approval_id: str | None = None,
        validated: Any = None,
        channel: Any = None,
        announce: bool = True,
    ) -> None:
        """Run the task's function to its outcome, in the task's own asyncio task.

        Its journal (docs/durability.md) writes nothing unless the function takes a journaled step (a
        question, ``ctx.call``, ``ctx.once``); then any replica can resume it, or take it over if this one
        dies. ``channel``: the one :meth:`channel` would make, when the caller made it already. ``announce``
        False: the task does not show WORKING first (nobody could see it: it runs eagerly, ``start``)."""
        record = live.record
        registry = self.registry
        journal = (
            Journal(self.agent.state, record.id, lease_seconds=registry.timing.lease_seconds)
            if (journaled(capability))
            else None
        )
        try:
            if announce and not live.quiet:
                registry.status(live, TaskState.WORKING, None)
            ctx = Context(
                capability,
                channel if channel is not None else self.channel(live, None),
                request=connection,
                caller=record.owner,
                agent=self.agent,
                face=self.face,
            )
            ctx.messages = live.messages  # the same list: follow-ups that answer a question show up in it
            outcome = await invoke(
                capability,
                arguments,
                ctx,
                idempotency_key=idempotency_key,
                approval_id=approval_id,
                journal=journal,
                validated=validated,
            )
            if outcome.code == "taken_over":  # resumed by another process, which reports it
                registry.elsewhere.let_go(live)
                return
            self.settle(live, outcome)
        except BaseException as exc:  # noqa: BLE001  (a cancellation too: ended_abruptly tells them apart)
            await self.ended_abruptly(live, journal, exc, "")

    async def replay(
        self,
        live: LiveTask,
        journal: Journal,
        connection: HTTPConnection | None,
        answer: Callable[[Mapping[str, InputRequest]], dict[str, Any]] | None,
    ) -> None:
        """Replay, in this process, a task whose coroutine is in no process here (docs/durability.md).

        ``answer``: the answers that resume it, from its pending questions; the task is claimed first (its
        record written here with compare-and-set, so of two replicas answering, one goes on), and the process
        that parked it is told to let go. None: a take-over of a task whose process died (an orphan): nothing
        is written until the replay holds its lease. Events the replay makes again are not sent again (the
        face's channel mutes them)."""
        registry = self.registry
        record = live.record
        answers: dict[str, Any] | None = None
        try:
            if answer is not None:
                holder = record.replica
                registry.status(live, TaskState.WORKING, None)
                await registry.persist(live)  # the claim: of two replicas answering, one writes this
                if live.superseded:
                    return
                await registry.elsewhere.moved(live, holder)
                answers = answer(journal.pending)
            outcome = await resume_execution(
                self.agent,
                record.id,
                answers=answers,
                channel=self.channel(live, journal),
                request=connection,
                messages=live.messages,
                journal=journal,
                lease_seconds=registry.timing.lease_seconds,
                wait=2.0 if answer is not None else 0.0,
            )
            if outcome.code in ("taken_over", "execution_busy"):  # it goes on elsewhere
                logger.info("%s task %s goes on elsewhere (%s)", registry.label, record.id, outcome.code)
                registry.elsewhere.let_go(live)
                return
            if outcome.code in ("unknown_execution", "unknown_capability"):
                logger.warning(
                    "%s task %s cannot be resumed here: %s", registry.label, record.id, outcome.message
                )
                self.finish(live, TaskState.FAILED, RESTART_REASON if answer is None else LOST_REASON)
                return
            self.settle(live, outcome)
        except BaseException as exc:  # noqa: BLE001  (a cancellation too: ended_abruptly tells them apart)
            await self.ended_abruptly(live, journal, exc, " while resuming")

    async def ended_abruptly(
        self, live: LiveTask, journal: Journal | None, exc: BaseException, doing: str
    ) -> None:
        """A run or a resume stopped by cancellation or by a bug of ours: the task ends accordingly."""
        if isinstance(exc, asyncio.CancelledError):
            await self._canceled(live, journal)
            return
        if not isinstance(exc, Exception):
            raise exc
        fault = store_fault(exc)
        if fault is not None:  # the store refused the journal's write: not acknowledged, and worth a retry
            logger.warning("%s task %s%s: %s", self.registry.label, live.record.id, doing, fault.message)
            outcome = raised_outcome(fault)
            assert outcome is not None  # a StoreUnavailable is a Retryable
            self.settle(live, outcome)
            return
        logger.exception(
            "%s task %s failed inside agentmw%s", self.registry.label, live.record.id, doing, exc_info=exc
        )
        self.finish(live, TaskState.FAILED, "The agent failed while running this task.")

    async def _canceled(self, live: LiveTask, journal: Journal | None) -> None:
        """The coroutine was cancelled: by a cancel request (the task ends, and so does its journal), or by
        this process's shutdown (a task with a journal is left as it is, for a replica to resume or take
        over)."""
        stored = journal is not None and journal.stored
        if self.registry.closing and stored:
            return
        self.finish(live, TaskState.CANCELED, "The task was canceled.")
        if stored:
            try:
                await cancel_execution(self.agent, live.record.id)
            except Exception:
                logger.exception(
                    "the journal of %s task %s could not be marked canceled",
                    self.registry.label,
                    live.record.id,
                )
