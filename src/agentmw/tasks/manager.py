"""What every face does with its tasks the same way: find one for its owner, cancel it wherever its
coroutine runs, and take over the tasks whose process died.

A face's task manager subclasses :class:`TaskManager` and says how its errors look (:meth:`not_found`,
:meth:`not_cancelable`, :meth:`invalid_id`) and how a stored task gets a handle here (:meth:`adopt`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

from .._bounded import BoundedTable
from ..journal import Journal, orphaned
from ..journal import cancel as cancel_execution
from ..lifecycle import TaskRecord, TaskState
from ..state import State
from ..state.base import MAX_KEY_LENGTH
from .host import TaskHost
from .registry import Bounds, Cadence, LiveTask, RecordShapes, Spaces, TaskRegistry
from .runner import TaskRunner

__all__ = ["TaskError", "TaskManager", "registry_for", "spawn"]

logger = logging.getLogger("agentmw")
_background: set[asyncio.Task[Any]] = set()  # fire-and-forget work, held so it is not collected


def spawn(coroutine: Any, name: str) -> asyncio.Task[Any]:
    """Run ``coroutine`` in the background, held until it ends."""
    task = asyncio.get_running_loop().create_task(coroutine, name=name)
    _background.add(task)
    task.add_done_callback(_background.discard)
    return task


def registry_for(
    agent: TaskHost,
    state: State,
    *,
    spaces: Spaces,
    shapes: RecordShapes,
    timing: Cadence,
    label: str,
    write_behind: bool = False,
) -> TaskRegistry:
    """A face's task registry, bounded by the agent's limits, its journals in the agent's state."""

    async def orphans() -> Sequence[str]:
        return await orphaned(agent)

    bounds = Bounds(
        max_tasks=agent.limits.max_tasks,
        retention_seconds=agent.timing.task_retention_seconds,
        idle_seconds=agent.timing.park_timeout_seconds,
        max_bytes=agent.budgets.a2a_tasks_bytes,
    )
    return TaskRegistry(
        state,
        bounds=bounds,
        journal=agent.state,
        orphans=orphans,
        spaces=spaces,
        shapes=shapes,
        timing=timing,
        label=label,
        write_behind=write_behind,
    )


class TaskError(Exception):
    """A task request that cannot be served; a face answers it with its own error."""

    def __init__(self, kind: str, message: str, task_id: Any, record: TaskRecord | None = None) -> None:
        super().__init__(message)
        self.kind = kind  # "not_found", "not_cancelable", "invalid_id"
        self.message = message
        self.task_id = task_id
        self.record = record


class TaskManager:
    """A face's tasks: its registry (records and followers) and runner (coroutines), put together."""

    def __init__(self, agent: TaskHost, registry: TaskRegistry, runner: TaskRunner) -> None:
        self.agent = agent
        self.registry = registry
        self.runner = runner
        registry.take_over = self.take_over

    @property
    def live(self) -> BoundedTable[str, LiveTask]:
        return self.registry.live

    @property
    def state(self) -> State:
        return self.registry.state

    async def ready(self) -> None:
        await self.registry.ready()

    async def flush(self) -> None:
        """Wait until every change this process made so far is written to the state."""
        await self.registry.flush()

    # --- a face's errors -------------------------------------------------------------------------------
    def invalid_id(self, task_id: Any) -> Exception:
        return TaskError("invalid_id", "The task id must be a string", task_id)

    def not_found(self, task_id: Any) -> Exception:
        return TaskError("not_found", f"Task {task_id} not found", task_id)

    def not_cancelable(self, task_id: Any, record: TaskRecord) -> Exception:
        return TaskError(
            "not_cancelable", f"Task {task_id} is {record.state} and cannot be canceled", task_id, record
        )

    def too_busy(self, task_id: Any) -> Exception:
        return TaskError("not_cancelable", f"Task {task_id} is changing too often to cancel", task_id)

    # --- reading -------------------------------------------------------------------------------------
    async def get(self, task_id: Any, owner: str) -> TaskRecord:
        """The task, for its owner only: another caller's task does not exist for this one."""
        if not isinstance(task_id, str):
            raise self.invalid_id(task_id)
        if not task_id or len(task_id) > MAX_KEY_LENGTH:  # no task has such an id (the state refuses the key)
            raise self.not_found(task_id)
        await self.ready()
        record = await self.registry.find(task_id)
        if record is None or record.owner != owner:
            raise self.not_found(task_id)
        return record

    async def adopt(self, record: TaskRecord, version: int) -> LiveTask:
        """A handle here for a stored task (a face adds what its runner needs)."""
        return self.registry.adopt_handle(record, version)

    # --- taking over a task whose process died -------------------------------------------------------
    def take_over(self, task_id: str) -> None:
        """Resume here, from its journal, a task whose process died while it ran (found by the orphan sweep,
        or by a reader that saw its holder gone). Several replicas may try: the journal's lease lets one
        replay it; the others let go. A task tried here is not tried again for
        ``Cadence.retry_take_over_seconds``."""
        registry = self.registry
        if registry.closed or registry.closing or registry.local(task_id) is not None:
            return
        if not registry.sweeper.may_try(task_id):
            return
        spawn(self._take_over(task_id), f"{registry._name}-take-over-{task_id}")

    async def _take_over(self, task_id: str) -> None:
        registry = self.registry
        try:
            found = await registry.state.get(registry.spaces.tasks, task_id)
            if found is None:  # not a task of this face (another face's, an AG-UI run, another agent's)
                return
            record = TaskRecord.from_dict(found.value)
            journal = await Journal.load(
                self.agent.state, task_id, lease_seconds=registry.timing.lease_seconds
            )
            if journal is None:
                return
            reopen = record.terminal and journal.retried and journal.status == "running"
            if record.terminal and not reopen:  # the task ended, its journal did not: nothing to resume
                if not journal.finished:
                    await cancel_execution(self.agent, task_id)
                return
            if registry.local(task_id) is not None or registry.closing:
                return
            live = await self.adopt(record, found.version)
            if reopen:  # a dead letter an operator retried (agentmw executions retry): the task runs again
                live.published = True
                registry.status(live, TaskState.WORKING, None)
            live.runner = asyncio.get_running_loop().create_task(
                self.runner.replay(live, journal, None, None), name=f"{registry._name}-resume-{task_id}"
            )
            logger.info("taking over %s task %s (its process is gone)", registry.label, task_id)
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.exception("taking over %s task %s failed", registry.label, task_id)

    # --- following -----------------------------------------------------------------------------------
    def subscribe(self, live: LiveTask) -> asyncio.Queue[Any]:
        queue: asyncio.Queue[Any] = asyncio.Queue()
        live.subscribers.add(queue)
        return queue

    def unsubscribe(self, live: LiveTask, queue: asyncio.Queue[Any]) -> None:
        live.subscribers.discard(queue)

    # --- canceling -----------------------------------------------------------------------------------
    async def cancel(self, task_id: Any, owner: str) -> TaskRecord:
        """Cancel the task wherever its coroutine runs: here at once; in another process over the bus (this
        waits, briefly, for that process to confirm); one whose process is gone is settled here. Its journal
        ends too, so it is never resumed or taken over. A terminal task raises :meth:`not_cancelable`."""
        registry = self.registry
        for _ in range(10):
            record = await self.get(task_id, owner)
            if record.terminal:
                raise self.not_cancelable(task_id, record)
            live = registry.local(task_id)
            if live is not None:
                if live.runner is not None and not live.runner.done():
                    live.runner.cancel()
                    try:
                        await live.runner
                    except asyncio.CancelledError:
                        if asyncio.current_task().cancelling():  # type: ignore[union-attr]
                            raise
                if not live.record.terminal:
                    self.runner.finish(live, TaskState.CANCELED, "The task was canceled.")
                await registry.persist(live)
                await self._end_journal(task_id)
                return live.record
            loaded = await registry.load(task_id)
            if loaded is None:
                continue
            if loaded[0].terminal:
                return loaded[0]
            done = await registry.elsewhere.cancel(*loaded)
            if done is not None:
                await self._end_journal(task_id)
                return done
        raise self.too_busy(task_id)

    async def _end_journal(self, task_id: str) -> None:
        """A cancel ends the task's execution for good: a resume or a take-over finds it canceled."""
        try:
            await cancel_execution(self.agent, task_id)
        except Exception:
            logger.exception(
                "the journal of %s task %s could not be marked canceled", self.registry.label, task_id
            )

    async def close(self) -> None:
        await self.registry.close()
