"""Eager task starts (``agentmw.tasks.runner.start``): which functions qualify, and that a run that suspends after
all goes on in a task of its own exactly as a task would have run it. Then, through a real A2A endpoint, that a
quiet blocking send runs a never-suspending skill in the request, and that nothing else does."""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
from typing import Any

import pytest
from starlette.applications import Starlette

from agentmw import Agent, AgentMiddleware, Message
from agentmw.capability import _never_suspends
from agentmw.tasks.runner import start
from agentmw.testing import A2ATestClient
from tests.waiting import eventually

# --- which functions never suspend ----------------------------------------------------------------------


async def plain(x: int) -> int:
    return x + 1


async def awaits(x: int) -> int:
    await asyncio.sleep(0)
    return x


async def enters(x: Any) -> None:
    async with x:
        pass


async def iterates(x: Any) -> list[Any]:
    return [y async for y in x]


async def awaits_in_a_comprehension(xs: list[Any]) -> list[Any]:
    return [await x for x in xs]


async def awaits_in_a_branch(x: int) -> int:
    if x > 10**9:
        await asyncio.sleep(0)
    return x


async def defines_an_awaiting_inner_function(x: int) -> int:
    async def inner() -> None:  # defined, never awaited here: it cannot suspend this coroutine
        await asyncio.sleep(0)

    return x


def sync(x: int) -> int:
    return x


async def agen(x: int) -> Any:
    yield x


@functools.wraps(plain)
async def wrapper(x: int) -> int:
    return await plain(x)


def sync_returning_a_coroutine(x: int) -> Any:
    return awaits(x)


class Callable:
    async def __call__(self, x: int) -> int:
        return x


@pytest.mark.parametrize(
    ("fn", "expected"),
    [
        (plain, True),
        (defines_an_awaiting_inner_function, True),
        (awaits, False),
        (enters, False),
        (iterates, False),
        (awaits_in_a_comprehension, False),
        (awaits_in_a_branch, False),  # a suspension anywhere in its code, taken or not
        (sync, False),
        (agen, False),
        (wrapper, False),  # what runs is the wrapper, which awaits
        (Callable(), False),  # not a plain function: assumed to suspend
        *(
            [
                (inspect.markcoroutinefunction(sync_returning_a_coroutine), False)
            ]  # 3.12+: a def that says it is async
            if hasattr(inspect, "markcoroutinefunction")
            else []
        ),
    ],
)
def test_never_suspends(fn: Any, expected: bool) -> None:
    assert _never_suspends(fn) is expected


# --- start ----------------------------------------------------------------------------------------------

var: contextvars.ContextVar[str] = contextvars.ContextVar("var", default="caller")


async def test_an_eager_run_that_ends_at_once_has_no_task_and_keeps_its_context_to_itself() -> None:
    ran: list[Any] = []

    async def run() -> None:
        var.set("run")
        ran.append((asyncio.current_task(), var.get()))

    assert start(run(), "t", eagerly=True) is None
    assert ran == [(asyncio.current_task(), "run")]  # it ran here, before start returned
    assert var.get() == "caller"  # in a copy of the context, as a task's first step is


async def test_an_eager_run_that_suspends_goes_on_in_a_task_with_its_context() -> None:
    steps: list[str] = []
    gate: asyncio.Future[str] = asyncio.get_running_loop().create_future()

    async def run() -> None:
        var.set("run")
        steps.append("first")
        steps.append(await gate)
        await asyncio.sleep(0)
        steps.append(f"last {var.get()}")

    task = start(run(), "suspends", eagerly=True)
    assert task is not None and task.get_name() == "suspends"
    assert steps == ["first"] and not task.done()
    gate.set_result("answer")
    await task
    assert steps == ["first", "answer", "last run"]
    assert var.get() == "caller"


async def test_a_suspended_eager_run_is_cancelled_where_it_waits_and_may_clean_up() -> None:
    cleaned: list[str] = []
    waiting = asyncio.Event()

    async def run() -> None:
        try:
            await waiting.wait()
        except asyncio.CancelledError:
            cleaned.append("cancelled where it waited")
            await asyncio.sleep(0)  # it may still await while it cleans up
            cleaned.append("cleaned up")
            raise

    task = start(run(), "cancel-me", eagerly=True)
    assert task is not None
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert task.cancelled() and cleaned == ["cancelled where it waited", "cleaned up"]


async def test_a_suspended_eager_run_may_catch_a_cancellation_and_end_normally() -> None:
    async def run() -> None:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            return

    task = start(run(), "swallows", eagerly=True)
    assert task is not None
    await asyncio.sleep(0)
    task.cancel()
    await task
    assert not task.cancelled()


async def test_an_error_of_a_suspended_eager_run_is_its_tasks() -> None:
    async def run() -> None:
        await asyncio.sleep(0)
        raise LookupError("after the first step")

    task = start(run(), "fails", eagerly=True)
    assert task is not None
    with pytest.raises(LookupError, match="after the first step"):
        await task


async def test_a_run_that_is_not_eager_starts_in_its_own_task() -> None:
    ran: list[Any] = []

    async def run() -> None:
        ran.append(asyncio.current_task())

    task = start(run(), "lazy", eagerly=False)
    assert task is not None and ran == []
    await task
    assert ran == [task]


# --- through the A2A endpoint ---------------------------------------------------------------------------


def a2a_app() -> tuple[Starlette, dict[str, list[str]]]:
    """Skills that record the name of the asyncio task they ran in: the request's, or a task of their own."""
    agent = Agent("eager", store="memory://")
    HELD["event"], HELD["waiting"] = asyncio.Event(), asyncio.Event()
    seen: dict[str, list[str]] = {"quick": [], "slow": [], "side": []}

    @agent.skill
    async def quick(text: str) -> str:
        """Answers at once."""
        seen["quick"].append(asyncio.current_task().get_name())
        return f"quick: {text}"

    @agent.skill
    async def slow(text: str) -> str:
        """Awaits before it answers."""
        await asyncio.sleep(0)
        seen["slow"].append(asyncio.current_task().get_name())
        return f"slow: {text}"

    @agent.skill
    async def held(text: str) -> str:
        """Waits for the test's event."""
        await HELD["event"].wait()
        seen.setdefault("held", []).append(asyncio.current_task().get_name())
        return f"held: {text}"

    @agent.skill(timeout=5)
    async def timed(text: str) -> str:
        """Answers at once, under a deadline."""
        seen.setdefault("timed", []).append(asyncio.current_task().get_name())
        return f"timed: {text}"

    @agent.skill
    async def replies(text: str) -> Message:
        """Answers with a message and no task, after a wait."""
        HELD["waiting"].set()
        await HELD["event"].wait()
        return Message(f"replied: {text}")

    agent.skills["held"].never_suspends = True  # a wrong promise: the runner must cope when it suspends
    agent.skills["replies"].never_suspends = True
    app = Starlette()
    app.add_middleware(AgentMiddleware, agent=agent)
    return app, seen


HELD: dict[str, asyncio.Event] = {}  # made by each app, in its test's event loop


async def test_a_quiet_blocking_send_runs_a_never_suspending_skill_in_the_request() -> None:
    app, seen = a2a_app()
    async with A2ATestClient(app) as a2a:
        task = (await a2a.send("hi", skill="quick"))["task"]
        assert task["status"]["state"] == "TASK_STATE_COMPLETED"
        assert task["artifacts"][0]["parts"] == [{"text": "quick: hi"}]
        assert not seen["quick"][0].startswith("a2a-task-")  # no task of its own
        assert (await a2a.get(task["id"]))["status"]["state"] == "TASK_STATE_COMPLETED"

        slow = (await a2a.send("hi", skill="slow"))["task"]
        assert slow["artifacts"][0]["parts"] == [{"text": "slow: hi"}]
        assert seen["slow"] == [f"a2a-task-{slow['id']}"]  # it awaits: a task of its own


@pytest.mark.parametrize("how", ["stream", "returnImmediately", "idempotencyKey"])
async def test_a_watched_or_keyed_send_runs_the_skill_in_a_task_of_its_own(how: str) -> None:
    """Someone may see its intermediate states (a stream, an immediate answer) or an idempotency key must be
    looked up first: the run keeps a task of its own, as before."""
    app, seen = a2a_app()
    async with A2ATestClient(app) as a2a:
        if how == "stream":
            async with a2a.stream("hi", skill="quick") as events:
                streamed = [event async for event in events]
            assert "task" in streamed[0], streamed
            task_id = streamed[0]["task"]["id"]
        elif how == "returnImmediately":
            task_id = (await a2a.send("hi", skill="quick", configuration={"returnImmediately": True}))[
                "task"
            ]["id"]

            async def completed(task_id: str = task_id) -> bool:
                return (await a2a.get(task_id))["status"]["state"] == "TASK_STATE_COMPLETED"

            await eventually(completed, "the task to complete", interval=0.01)
        else:
            task_id = (await a2a.send("hi", skill="quick", metadata={"idempotencyKey": "k-1"}))["task"]["id"]
        assert (await a2a.get(task_id))["status"]["state"] == "TASK_STATE_COMPLETED"
    assert seen["quick"] == [f"a2a-task-{task_id}"]


async def test_a_skill_that_suspends_after_all_is_working_and_goes_on_in_a_task_of_its_own() -> None:
    app, seen = a2a_app()
    # a caller with a credential lists its own tasks (an anonymous one is listed nothing: docs/a2a.md)
    async with A2ATestClient(app, headers={"authorization": "Bearer eager-test"}) as a2a:
        sending = asyncio.create_task(a2a.send("hi", skill="held"))

        async def tasks() -> list[dict[str, Any]]:
            return (await a2a.rpc("ListTasks", {}))["tasks"]

        listed = await eventually(tasks, "the skill's task to be listed")
        assert [t["status"]["state"] for t in listed] == ["TASK_STATE_WORKING"]
        HELD["event"].set()
        task = (await sending)["task"]
        assert task["id"] == listed[0]["id"] and task["status"]["state"] == "TASK_STATE_COMPLETED"
        assert task["artifacts"][0]["parts"] == [{"text": "held: hi"}]
    assert seen["held"] == [f"a2a-task-{task['id']}"]


async def test_a_skill_with_a_deadline_runs_in_a_task_of_its_own() -> None:
    """asyncio.timeout belongs to the task it is entered in: eagerly, that would be the request's."""
    app, seen = a2a_app()
    async with A2ATestClient(app) as a2a:
        task = (await a2a.send("hi", skill="timed"))["task"]
    assert task["artifacts"][0]["parts"] == [{"text": "timed: hi"}]
    assert seen["timed"] == [f"a2a-task-{task['id']}"]


async def test_a_message_reply_that_suspends_after_all_is_still_a_message() -> None:
    app, _ = a2a_app()
    async with A2ATestClient(app) as a2a:
        sending = asyncio.create_task(a2a.send("hi", skill="replies"))
        await asyncio.wait_for(HELD["waiting"].wait(), 5)  # the skill suspends after all
        HELD["event"].set()
        answer = await sending
    assert list(answer) == ["message"], answer
    assert answer["message"]["parts"] == [{"text": "replied: hi"}]
