"""Review of the journal (issue 25, must-haves 3 and 4), as a hostile world would use it: two replicas (two
stores on one SQLite file) recording one execution's steps at once, a journal written by the previous format
(steps in the record, as agentmw wrote it before the step log) parked or orphaned across the upgrade, a retry of a
dead letter racing a sweep, retry policies cut by cancellation or a deadline, and the step cap at its boundary.
In-process: memory and SQLite-file stores, no sockets."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from agentmw import Agent, Context, Limits
from agentmw.journal import (
    JOURNAL_NS,
    LEASE_NS,
    Journal,
    list_executions,
    orphaned,
    resume,
    resume_now,
    retry,
    show_execution,
)
from agentmw.retries import RetryPolicy, StepFailed
from agentmw.runtime import invoke
from agentmw.state import Json, MemoryState, SQLiteState, State
from tests.helpers.channels import Parking
from tests.waiting import eventually

effects: list[str] = []


@pytest.fixture(autouse=True)
def _clear() -> None:
    effects.clear()


def start(agent: Agent, tool: str, arguments: dict[str, Any], journal: Journal) -> Any:
    cap = agent.tools[tool]
    ctx = Context(cap, Parking(), caller="alice", agent=agent, face="test")
    return invoke(cap, arguments, ctx, journal=journal)


# --- two replicas, one execution ------------------------------------------------------------------------------


def racing(store: State, who: str, gates: dict[str, asyncio.Event]) -> Agent:
    agent = Agent("race", store=store)

    async def pay(n: int) -> str:
        if n == 2:
            await gates[who].wait()
        effects.append(f"{who}:{n}")
        return f"{who}-{n}"

    @agent.tool
    async def work(ctx: Context) -> list[str]:
        """Three steps; the second waits on its replica's gate."""
        return [await ctx.once("a", pay, 1), await ctx.once("b", pay, 2), await ctx.once("c", pay, 3)]

    return agent


async def test_a_stuck_holder_that_records_after_its_take_over_loses_and_the_log_keeps_one_result(
    tmp_path: Path,
) -> None:
    db = tmp_path / "race.db"
    sa, sb = SQLiteState(db), SQLiteState(db)
    gates = {"A": asyncio.Event(), "B": asyncio.Event()}
    a, b = racing(sa, "A", gates), racing(sb, "B", gates)
    run = asyncio.create_task(start(a, "work", {}, Journal(sa, "e1", lease_seconds=0.6)))
    try:

        async def first_step() -> bool:
            detail = await show_execution(sb, "e1")
            return detail is not None and len(detail.steps) >= 1

        await eventually(first_step, "A to record step a and block in step b")
        assert await resume_now(sb, "e1")  # an operator: A is stuck
        found = await eventually(lambda: orphaned(b), "the orphan")
        gates["B"].set()
        took = await resume(b, found[0], journal=await Journal.load(sb, found[0]))
        assert took.status == "completed" and took.value == ["A-1", "B-2", "B-3"]
        gates["A"].set()  # A wakes and records its step b: it must lose
        late = await asyncio.wait_for(run, 5)
        assert (late.status, late.code) == ("canceled", "taken_over")
        detail = await show_execution(sa, "e1")
        assert detail is not None and detail.outcome is not None
        assert [(s["k"], s["v"]) for s in detail.steps] == [("a", "A-1"), ("b", "B-2"), ("c", "B-3")]
        assert detail.outcome["status"] == "completed"
        assert effects == ["A:1", "B:2", "B:3", "A:2"]  # A's late step ran, but is not recorded
    finally:
        gates["A"].set()
        gates["B"].set()
        await sa.close()
        await sb.close()


class SlowLeaseDelete(MemoryState):
    """A store whose lease deletes wait until the test lets them go."""

    def __init__(self) -> None:
        super().__init__()
        self.go = asyncio.Event()
        self.deleting = asyncio.Event()

    async def delete_key(self, ns: str, key: str) -> Any:
        if ns == LEASE_NS:
            self.deleting.set()
            await self.go.wait()
        return await super().delete_key(ns, key)


async def test_a_retried_dead_letter_is_swept_only_once_its_stale_lease_is_gone() -> None:
    store = SlowLeaseDelete()
    gate = asyncio.Event()
    agent = Agent("rr", store=store, limits=Limits(max_recovery_attempts=0))

    @agent.tool
    async def pill(ctx: Context) -> str:
        """One step, then one that waits."""
        await ctx.once("first", effects.append, "first")
        await ctx.once("second", gate.wait)
        return "done"

    run = asyncio.create_task(start(agent, "pill", {}, Journal(store, "p1", lease_seconds=0.3)))

    async def recorded() -> bool:
        found = await store.get(JOURNAL_NS, "p1")
        return found is not None and found.value.get("stepCount", 0) >= 1

    await eventually(recorded, "the first step")
    run.cancel()  # the replica dies in the second step
    await asyncio.gather(run, return_exceptions=True)
    found = await eventually(lambda: orphaned(agent), "the orphan", timeout=10)
    dead = await resume(agent, found[0], journal=await Journal.load(store, found[0]))
    assert dead.code == "recovery_exhausted"
    agent.limits = Limits(max_recovery_attempts=5)
    retrying = asyncio.create_task(retry(agent, "p1"))
    await store.deleting.wait()
    early = await orphaned(agent)  # the lease delete is in flight: nothing a sweep could lose to it
    store.go.set()
    assert await retrying
    assert early == []
    orphan = await orphaned(agent)
    assert orphan == ["p1"]
    taking = asyncio.create_task(
        resume(agent, orphan[0], journal=await Journal.load(store, orphan[0]), owner="B")
    )
    try:

        async def held() -> bool:
            lease: Json | None = await store.get_key(LEASE_NS, "p1")
            return lease is not None and lease.get("owner") == "B"

        await eventually(held, "B to hold the retried execution")
        assert await orphaned(agent) == []  # held: no second take-over
    finally:
        gate.set()
        done = await asyncio.wait_for(taking, 5)
    assert done.status == "completed" and done.value == "done"
    assert effects == ["first"]


# --- a journal written before the step log (format 1) --------------------------------------------------------

# As agentmw at commit 148da0e stored it (SQLiteState, `journal` namespace): ``order`` parked on its question
# after a one-time step and a sub-call.
FORMAT_1_PARKED: dict[str, Any] = {
    "format": 1,
    "status": "parked",
    "run": {
        "kind": "tool",
        "name": "order",
        "arguments": {"item": "lamp"},
        "caller": "alice",
        "face": "test",
        "idempotencyKey": None,
        "approvalId": None,
        "supports": ["elicitation"],
    },
    "steps": [
        {"t": "once", "k": "charge", "v": "c1"},
        {"t": "call", "k": "1:price:096ec503917deafa", "ok": True, "x": '{"result":7}', "v": 7},
        {
            "t": "ask",
            "k": "ask-1",
            "q": {
                "ask-1": {
                    "$t": "Ask",
                    "v": {
                        "message": "Where to?",
                        "schema": {"type": "object", "properties": {"city": {"type": "string"}}},
                        "confirmation": False,
                    },
                }
            },
            "a": {},
        },
    ],
    "delivered": 2,
    "owner": "vm-32627-dc43b79f1644",
    "updatedAt": 1796215504.833472,
}


def charge() -> str:
    effects.append("charge")
    return "c1"


def shop(store: State) -> Agent:
    agent = Agent("f1", store=store)

    @agent.tool
    def price(item: str) -> int:
        """A sub-call."""
        effects.append(f"price {item}")
        return 7

    @agent.tool
    async def order(item: str, ctx: Context) -> dict[str, Any]:
        """A step, a sub-call, a question, a step."""
        charged = await ctx.once("charge", charge)
        cost = await ctx.call("price", {"item": item})
        answer = await ctx.ask("Where to?", {"type": "object", "properties": {"city": {"type": "string"}}})
        await ctx.once("ship", effects.append, "ship")
        return {"charged": charged, "cost": cost, "to": answer.content["city"]}

    return agent


@pytest.fixture
async def sqlite(tmp_path: Path) -> AsyncIterator[SQLiteState]:
    made = SQLiteState(tmp_path / "journal.db")
    yield made
    await made.close()


async def test_an_execution_parked_before_the_upgrade_resumes_after_it(sqlite: SQLiteState) -> None:
    await sqlite.put(JOURNAL_NS, "old", FORMAT_1_PARKED, expected_version=None)
    listed, _ = await list_executions(sqlite)
    assert [(i.id, i.status, i.steps, i.name) for i in listed] == [("old", "parked", 3, "order")]
    done = await resume(shop(sqlite), "old", answers={"ask-1": {"city": "Oslo"}})
    assert done.status == "completed", done.message
    assert done.value == {"charged": "c1", "cost": 7, "to": "Oslo"}
    assert effects == ["ship"]  # the step and the sub-call recorded by the old format did not run again
    found = await sqlite.get(JOURNAL_NS, "old")
    assert found is not None and found.value["format"] == 2 and "steps" not in found.value
    again = await Journal.load(sqlite, "old")
    assert again is not None and [s["k"] for s in again.steps] == [
        "charge",
        "1:price:096ec503917deafa",
        "ask-1",
        "ship",
    ]


async def test_an_execution_running_when_the_old_replica_died_is_taken_over_by_the_new_code(
    sqlite: SQLiteState,
) -> None:
    record = {**FORMAT_1_PARKED, "status": "running", "steps": FORMAT_1_PARKED["steps"][:2], "delivered": 1}
    await sqlite.put(JOURNAL_NS, "orphan", record, expected_version=None)
    agent = shop(sqlite)
    found = await orphaned(agent)
    assert found == ["orphan"]
    outcome = await resume(agent, found[0], journal=await Journal.load(sqlite, found[0]))
    assert outcome.status == "needs_input"  # it replayed to its question, and parked on it
    assert effects == []
    journal = await Journal.load(sqlite, "orphan")
    assert journal is not None and journal.attempts == 1 and journal.status == "parked"
    assert [s["t"] for s in journal.steps] == ["once", "call", "ask"]
    done = await resume(agent, "orphan", answers={"ask-1": {"city": "Rome"}})
    assert done.status == "completed" and done.value["to"] == "Rome"
    assert effects == ["ship"]


# --- retry policies --------------------------------------------------------------------------------------------


class Boom(Exception):
    pass


def boom(name: str) -> None:
    effects.append(name)
    raise Boom(f"{name} failed")


def failing(store: State) -> Agent:
    agent = Agent("retry-edges", store=store)
    slow = RetryPolicy(attempts=3, initial_interval=30.0)

    @agent.tool
    async def backoff(ctx: Context) -> str:
        """A failing step with a 30 s backoff."""
        await ctx.once("first", str, 1)
        await ctx.once("s", boom, "s", retry=slow)
        return "never"

    @agent.tool(timeout=0.5)
    async def deadline(ctx: Context) -> str:
        """The same, under a 0.5 s deadline."""
        await ctx.once("first", str, 1)
        await ctx.once("s", boom, "s", retry=slow)
        return "never"

    @agent.tool
    async def non_retryable(ctx: Context) -> str:
        """A non-retryable error, caught; then a question."""
        try:
            await ctx.once(
                "s", boom, "s", retry=RetryPolicy(attempts=5, initial_interval=0, non_retryable=(Boom,))
            )
        except StepFailed as exc:
            got = f"{exc.attempts}:{exc.cause_type}:{exc.cause_message}"
        await ctx.ask("go on?")
        return got

    return agent


async def test_a_cancellation_during_a_backoff_records_nothing_and_leaves_no_task(
    sqlite: SQLiteState,
) -> None:
    agent = failing(sqlite)
    before = set(asyncio.all_tasks())
    run = asyncio.create_task(start(agent, "backoff", {}, Journal.for_agent(agent, "c1")))
    await eventually(lambda: effects == ["s"], "the first try to fail")
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run

    def settled() -> bool:
        return not [
            t for t in asyncio.all_tasks() - before if t is not asyncio.current_task() and not t.done()
        ]

    await eventually(settled, "no task of the execution (its lease renewer, its backoff) left running")
    journal = await Journal.load(sqlite, "c1")
    assert journal is not None and [s["k"] for s in journal.steps] == ["first"]


async def test_the_invocations_deadline_cuts_a_long_backoff_and_no_failure_is_recorded(
    sqlite: SQLiteState,
) -> None:
    agent = failing(sqlite)
    began = time.monotonic()
    outcome = await asyncio.wait_for(start(agent, "deadline", {}, Journal.for_agent(agent, "d1")), 10)
    assert time.monotonic() - began < 5
    assert (outcome.status, outcome.code) == ("failed", "timeout")
    assert effects == ["s"]
    journal = await Journal.load(sqlite, "d1")
    assert journal is not None and not any("err" in s for s in journal.steps)


async def test_a_non_retryable_error_is_tried_once_and_replays_as_the_same_step_failure(
    sqlite: SQLiteState,
) -> None:
    agent = failing(sqlite)
    assert (await start(agent, "non_retryable", {}, Journal.for_agent(agent, "n1"))).status == "needs_input"
    assert effects == ["s"]
    done = await resume(agent, "n1", answers={"ask-1": {}})
    assert done.status == "completed" and done.value == "1:Boom:s failed"
    assert effects == ["s"]  # the replay raised the recorded StepFailed without running the step


# --- the step cap ----------------------------------------------------------------------------------------------


async def test_the_step_cap_allows_exactly_its_count_and_ends_the_one_past_it_cleanly(
    sqlite: SQLiteState,
) -> None:
    agent = Agent("caps", store=sqlite, limits=Limits(max_steps_per_execution=3))

    @agent.tool
    async def many(n: int, ctx: Context) -> int:
        """n steps."""
        for i in range(n):
            await ctx.once(f"s{i}", effects.append, f"s{i}")
        return n

    assert (await start(agent, "many", {"n": 3}, Journal.for_agent(agent, "ok"))).status == "completed"
    effects.clear()
    over = await start(agent, "many", {"n": 4}, Journal.for_agent(agent, "over"))
    assert (over.status, over.code) == ("failed", "journal_full")
    assert "3 journaled steps" in over.message and "Limits.max_steps_per_execution" in over.message
    found = await sqlite.get(JOURNAL_NS, "over")
    assert found is not None and found.value["status"] == "failed" and found.value["stepCount"] == 3
    assert await sqlite.get_key(LEASE_NS, "over") is None
    assert await orphaned(agent) == []


# --- concurrent steps -------------------------------------------------------------------------------------------


def fanning(store: State) -> Agent:
    agent = Agent("fan", store=store)

    @agent.tool
    def price(item: str) -> int:
        """A sub-call."""
        effects.append(f"price {item}")
        return len(item)

    async def slow(name: str, delay: float) -> str:
        await asyncio.sleep(delay)
        effects.append(name)
        return name

    @agent.tool
    async def fan(ctx: Context) -> dict[str, Any]:
        """Steps at once (finishing in another order than they start), then a question."""
        a, b, now, uid, p = await asyncio.gather(
            ctx.once("a", slow, "a", 0.05, retry=RetryPolicy(attempts=2, initial_interval=0)),
            ctx.once("b", slow, "b", 0.0),
            ctx.now(),
            ctx.uuid(),
            ctx.call("price", {"item": "lamp"}),
        )
        await ctx.ask("ok?")
        return {"a": a, "b": b, "now": now.timestamp(), "uuid": str(uid), "p": p}

    return agent


async def test_gathered_steps_replay_on_another_replica_with_the_same_values(tmp_path: Path) -> None:
    db = tmp_path / "fan.db"
    s1, s2 = SQLiteState(db), SQLiteState(db)
    try:
        one = fanning(s1)
        parked = await start(one, "fan", {}, Journal.for_agent(one, "f1"))
        assert parked.status == "needs_input", parked.message
        first = await Journal.load(s1, "f1")
        assert first is not None
        recorded = {s["k"]: s.get("v") for s in first.steps if s["t"] == "once"}
        assert sorted(effects) == ["a", "b", "price lamp"]
        effects.clear()
        done = await resume(fanning(s2), "f1", answers={"ask-1": {}})
        assert done.status == "completed", done.message
        assert effects == []  # nothing ran again
        assert done.value["uuid"] == recorded["agentmw.uuid:1"]
        assert done.value["now"] == datetime.fromtimestamp(recorded["agentmw.now:1"], UTC).timestamp()
        assert (done.value["a"], done.value["b"], done.value["p"]) == ("a", "b", 4)
    finally:
        await s1.close()
        await s2.close()
