"""Take-overs are safe and bounded (docs/durability.md): a take-over goes on only while the execution is still
running at the version the orphan sweep saw (with the sweep's lease reads slowed so that the execution parks in
between, every time); an execution taken over past ``Limits.max_recovery_attempts`` ends as a dead letter its
caller is told of, and an operator retries it; a function a new deploy removed says so; the step log keeps
per-step cost flat and caps an execution. Real SQLite files and the memory store."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from agentmw import Agent, Context, Limits, StoreUnavailable
from agentmw.journal import (
    DEAD,
    JOURNAL_NS,
    LEASE_NS,
    STEPS_NS,
    TAIL_STEPS,
    Journal,
    cancel_execution,
    list_executions,
    orphaned,
    resume,
    resume_now,
    retry,
    show_execution,
)
from agentmw.runtime import invoke
from agentmw.state import Conflict, Json, MemoryState, SQLiteState, State
from tests.helpers.channels import Parking, Waiting
from tests.waiting import eventually

LEASE = 0.3


class SlowLeases(MemoryState):
    """A store whose lease reads wait until the test lets them go: the sweep's scan sees the execution
    running, and its lease read comes only after the execution parked (the race of issue 25, every time)."""

    def __init__(self) -> None:
        super().__init__()
        self.hold = asyncio.Event()
        self.hold.set()
        self.held = asyncio.Event()

    async def get_key(self, ns: str, key: str) -> Json | None:
        if ns == LEASE_NS and not self.hold.is_set():
            self.held.set()
            await self.hold.wait()
        return await super().get_key(ns, key)


@pytest.fixture(params=["memory", "sqlite"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[State]:
    made: State = MemoryState() if request.param == "memory" else SQLiteState(tmp_path / "journal.db")
    yield made
    await made.close()


def make_agent(state: State, effects: list[str], gate: asyncio.Event, **limits: Any) -> Agent:
    agent = Agent("recovery", store=state, limits=Limits(**limits))

    @agent.tool
    async def order(item: str, ctx: Context) -> dict[str, Any]:
        """A step, a slow step, a question, a last step."""
        charged = await ctx.once("charge", effects.append, f"charge {item}")
        await ctx.once("pack", _wait_then, gate, effects, "pack")
        answer = await ctx.ask("Where to?", {"type": "object", "properties": {"city": {"type": "string"}}})
        await ctx.once("ship", effects.append, f"ship {answer.content['city']}")
        return {"charged": charged, "to": answer.content["city"]}

    @agent.tool
    async def pill(ctx: Context) -> str:
        """A poison pill: its second step never ends while the pill is armed (its process dies there)."""
        await ctx.once("first", effects.append, "first")
        await ctx.once("second", _wait_then, gate, effects, "second")
        return "survived"

    @agent.tool
    async def many(n: int, ctx: Context) -> int:
        """n one-time steps."""
        for i in range(n):
            await ctx.once(f"s{i}", effects.append, f"s{i}")
        return n

    return agent


async def _wait_then(gate: asyncio.Event, effects: list[str], name: str) -> None:
    await gate.wait()
    effects.append(name)


def start(agent: Agent, tool: str, arguments: dict[str, Any], execution_id: str, face: Any) -> Any:
    cap = agent.tools[tool]
    ctx = Context(cap, face, caller="alice", agent=agent, face="test")
    journal = Journal.for_agent(agent, execution_id, lease_seconds=LEASE)
    return asyncio.create_task(invoke(cap, arguments, ctx, journal=journal))


async def stored(state: State, execution_id: str) -> tuple[str, int]:
    found = await state.get(JOURNAL_NS, execution_id)
    assert found is not None
    return found.value["status"], found.version


async def test_an_execution_that_parks_while_the_sweep_reads_leases_is_not_taken_over() -> None:
    state = SlowLeases()
    effects: list[str] = []
    gate = asyncio.Event()
    agent = make_agent(state, effects, gate)
    face = Waiting()
    run = start(agent, "order", {"item": "desk"}, "race-1", face)
    await eventually(lambda: _recorded(state, "race-1", 1), "the first step to be recorded")
    seen = await stored(state, "race-1")
    assert seen[0] == "running"  # held, inside its slow step

    state.hold.clear()  # the sweep scans now, and its lease read waits
    sweep = asyncio.create_task(orphaned(agent))
    await asyncio.wait_for(state.held.wait(), 5)
    gate.set()  # the step ends, the execution asks and parks (giving its lease up) before the lease read
    await asyncio.wait_for(face.asked.wait(), 5)
    parked = await stored(state, "race-1")
    assert parked[0] == "parked" and parked[1] > seen[1]
    state.hold.set()
    found = await asyncio.wait_for(sweep, 5)
    assert found == ["race-1"] and found[0].version == seen[1]  # the sweep took it for an orphan

    journal = await Journal.load(state, found[0], lease_seconds=LEASE)
    outcome = await resume(agent, found[0], journal=journal)
    assert outcome.code == "taken_over" and "moved on since the orphan sweep saw it" in outcome.message
    assert await stored(state, "race-1") == parked  # untouched: still parked, nothing written
    assert await state.get_key(LEASE_NS, "race-1") is None
    assert not await cancel_orphan(agent, found[0])  # nor ended by a face's clean-up at the sweep's version

    assert face.answer is not None  # the parked coroutine goes on with its answer, as if nothing happened
    face.answer.set_result({"city": "Lyon"})
    done = await asyncio.wait_for(run, 5)
    assert done.status == "completed" and done.value == {"charged": None, "to": "Lyon"}
    assert effects == ["charge desk", "pack", "ship Lyon"]


async def cancel_orphan(agent: Agent, orphan: Any) -> bool:
    from agentmw.journal import cancel

    return await cancel(agent, orphan, "The AG-UI run of this execution ended.")


async def test_an_orphan_still_running_at_the_version_seen_is_taken_over(store: State) -> None:
    effects: list[str] = []
    gate = asyncio.Event()
    agent = make_agent(store, effects, gate)
    run = start(agent, "pill", {}, "dies-1", Parking())
    await eventually(lambda: _recorded(store, "dies-1", 1), "the first step to be recorded")
    run.cancel()  # its replica dies inside the second step: running, its lease left to expire
    await asyncio.gather(run, return_exceptions=True)
    found = await eventually(lambda: orphaned(agent), "the lease to expire")
    gate.set()
    outcome = await resume(agent, found[0], journal=await Journal.load(store, found[0]))
    assert outcome.status == "completed" and outcome.value == "survived"
    assert effects == ["first", "second"]
    journal = await Journal.load(store, "dies-1")
    assert journal is not None and journal.attempts == 1 and journal.status == "completed"


async def test_a_poison_pill_ends_as_a_dead_letter_and_an_operator_retries_it(store: State) -> None:
    effects: list[str] = []
    gate = asyncio.Event()
    agent = make_agent(store, effects, gate, max_recovery_attempts=2)
    run = start(agent, "pill", {}, "pill-1", Parking())
    await eventually(lambda: _recorded(store, "pill-1", 1), "the first step to be recorded")
    for recovery in range(1, 4):
        run.cancel()  # the process dies in the second step, every time
        await asyncio.gather(run, return_exceptions=True)
        found = await eventually(lambda: orphaned(agent), "the lease to expire", timeout=10)
        assert found == ["pill-1"]
        take_over = asyncio.create_task(
            resume(agent, found[0], journal=await Journal.load(store, found[0]), lease_seconds=LEASE)
        )
        if recovery == 3:
            break
        await eventually(
            lambda: store.get_key(LEASE_NS, "pill-1"), f"take-over {recovery} to hold the execution"
        )
        await eventually(
            lambda n=recovery: _attempts(store, "pill-1", n), f"take-over {recovery} to be counted"
        )
        run = take_over
    dead = await asyncio.wait_for(take_over, 5)
    assert dead.status == "failed" and dead.code == "recovery_exhausted"
    assert "given up after 2 recoveries" in dead.message and "retry" in dead.message
    assert effects == ["first"]  # the second step never ran to its end; the first never ran again
    status, _ = await stored(store, "pill-1")
    assert status == DEAD
    assert await orphaned(agent) == []  # no longer swept
    again = await resume(agent, "pill-1")  # a later resume finds the dead letter, and runs nothing
    assert again.code == "recovery_exhausted"

    listed, _ = await list_executions(agent, status=DEAD)
    assert [(i.id, i.status, i.attempts, i.steps, i.name) for i in listed] == [
        ("pill-1", "dead", 2, 1, "pill")
    ]
    assert listed[0].reason is not None and "given up after 2 recoveries" in listed[0].reason
    detail = await show_execution(store, "pill-1")
    assert detail is not None and [(s["t"], s["k"]) for s in detail.steps] == [("once", "first")]

    gate.set()  # the operator fixed the cause
    assert await retry(agent, "pill-1")
    assert not await retry(agent, "pill-1")  # no longer a dead letter
    found = await orphaned(agent)
    assert found == ["pill-1"]
    outcome = await resume(agent, found[0], journal=await Journal.load(store, found[0]))
    assert outcome.status == "completed" and outcome.value == "survived"
    assert effects == ["first", "second"]
    journal = await Journal.load(store, "pill-1")
    assert journal is not None and journal.attempts == 1 and journal.retried


async def _recorded(state: State, execution_id: str, steps: int) -> bool:
    found = await state.get(JOURNAL_NS, execution_id)
    return found is not None and found.value.get("stepCount", 0) >= steps


async def _attempts(state: State, execution_id: str, n: int) -> bool:
    journal = await Journal.load(state, execution_id)
    return journal is not None and journal.attempts == n


async def test_operators_cancel_and_resume_now(store: State) -> None:
    effects: list[str] = []
    gate = asyncio.Event()
    agent = make_agent(store, effects, gate)
    run = start(agent, "pill", {}, "stuck-1", Parking())
    await eventually(lambda: _recorded(store, "stuck-1", 1), "the first step to be recorded")
    assert await orphaned(agent) == []  # held, and renewed
    assert await resume_now(agent, "stuck-1")  # a stuck holder: its lease is dropped
    assert await orphaned(agent) == ["stuck-1"]
    gate.set()
    outcome = await asyncio.wait_for(run, 5)  # the holder lives on: it takes its lease again and ends
    assert outcome.status == "completed"
    assert not await resume_now(agent, "stuck-1")  # ended
    assert not await cancel_execution(agent, "stuck-1")

    parked = start(agent, "order", {"item": "lamp"}, "parked-1", Parking())
    assert (await asyncio.wait_for(parked, 5)).status == "needs_input"
    assert not await resume_now(agent, "parked-1")  # parked: waits on its answer, not on a replica
    assert await cancel_execution(agent, "parked-1")
    assert (await stored(store, "parked-1"))[0] == "canceled"
    assert (await resume(agent, "parked-1", answers={"ask-1": {"city": "x"}})).status == "canceled"


async def test_a_parked_function_removed_by_a_deploy_says_so(store: State) -> None:
    effects: list[str] = []
    gate = asyncio.Event()
    gate.set()
    old = Agent("recovery", store=store, code_version="v1")

    @old.tool
    async def legacy(ctx: Context) -> str:
        """Asks, in v1 only."""
        await ctx.once("step", effects.append, "step")
        await ctx.ask("ok?", key="ok")
        return "done"

    cap = old.tools["legacy"]
    parked = await invoke(
        cap, {}, Context(cap, Parking(), caller="a", agent=old, face="test"), journal=Journal(store, "gone-1")
    )
    assert parked.status == "needs_input"
    assert (await Journal.load(store, "gone-1")).code_version == "v1"  # type: ignore[union-attr]
    new = make_agent(store, effects, gate)  # v2 has no `legacy`
    new.code_version = "v2"
    outcome = await resume(new, "gone-1", answers={"ok": {}})
    assert outcome.status == "failed" and outcome.code == "capability_gone"
    assert "function 'legacy'" in outcome.message and "no longer served by this deploy" in outcome.message
    assert "code version v1 → v2" in outcome.message and "restarted" not in outcome.message
    assert (await stored(store, "gone-1"))[0] == "failed"
    assert (await resume(new, "gone-1")).code == "capability_gone"  # told the same again


async def test_the_step_log_holds_the_steps_and_the_header_stays_small(store: State) -> None:
    effects: list[str] = []
    agent = make_agent(store, effects, asyncio.Event())
    done = await asyncio.wait_for(start(agent, "many", {"n": 300}, "long-1", Parking()), 60)
    assert done.status == "completed" and len(effects) == 300
    found = await store.get(JOURNAL_NS, "long-1")
    assert found is not None and "steps" not in found.value and found.value["stepCount"] == 300
    tail = found.value["tail"]  # the newest steps ride in the header (one write a step), at most TAIL_STEPS
    assert len(tail) <= TAIL_STEPS and len(str(found.value)) < 4_000  # it does not grow with the steps
    entries = await store.read(STEPS_NS, "long-1", 0, 1000)
    assert "run" in entries[0][1] and len(entries) <= 300 // TAIL_STEPS + 1  # the rest, in batches
    assert sum(len(entry["e"]) for _, entry in entries) + len(tail) == 300
    journal = await Journal.load(store, "long-1")
    assert journal is not None and [s["k"] for s in journal.steps] == [f"s{i}" for i in range(300)]


async def test_an_execution_past_its_step_cap_fails_for_good(store: State) -> None:
    effects: list[str] = []
    agent = make_agent(store, effects, asyncio.Event(), max_steps_per_execution=5)
    outcome = await asyncio.wait_for(start(agent, "many", {"n": 8}, "capped-1", Parking()), 10)
    assert outcome.status == "failed" and outcome.code == "journal_full" and not outcome.retryable
    assert "cap of 5 journaled steps" in outcome.message and "max_steps_per_execution" in outcome.message
    assert effects == ["s0", "s1", "s2", "s3", "s4"]  # the sixth, past the cap, never ran
    journal = await Journal.load(store, "capped-1")
    assert journal is not None and journal.status == "failed" and len(journal.steps) == 5

    small = make_agent(store, effects, asyncio.Event(), max_journal_bytes=2_000)
    big = await asyncio.wait_for(start(small, "many", {"n": 200}, "capped-2", Parking()), 10)
    assert big.code == "journal_full" and "2000 journal bytes" in big.message


async def test_a_write_that_loses_its_race_leaves_nothing_a_replay_reads(store: State) -> None:
    effects: list[str] = []
    gate = asyncio.Event()
    agent = make_agent(store, effects, gate)
    run = start(agent, "pill", {}, "split-1", Parking())
    await eventually(lambda: _recorded(store, "split-1", 1), "the first step to be recorded")
    stale = await Journal.load(store, "split-1")
    assert stale is not None
    await store.delete_key(LEASE_NS, "split-1")  # another replica takes it over and records a step first
    gate.set()
    assert (await asyncio.wait_for(run, 5)).status == "completed"
    stale.steps.append({"t": "once", "k": "intruder", "v": None})
    stale._unlogged.append(stale.steps[-1])
    with pytest.raises(BaseException, match="moved on"):
        await stale._write(lease=False)  # its log entry was appended, its header write refused
    journal = await Journal.load(store, "split-1")
    assert journal is not None and [s["k"] for s in journal.steps] == ["first", "second"]


class LostAnswers(MemoryState):
    """A store that writes a journal header and then loses its answer, once when armed: as a timeout does
    (``StoreUnavailable``), or as a client that sends the write again after a dropped connection (then the second
    send conflicts with the first)."""

    def __init__(self) -> None:
        super().__init__()
        self.arm: str | None = None

    async def put(self, ns: str, key: str, value: Json, *, expected_version: int | None) -> int:
        version = await super().put(ns, key, value, expected_version=expected_version)
        mode, self.arm = (self.arm, None) if ns == JOURNAL_NS else (None, self.arm)
        if mode == "timeout":
            raise StoreUnavailable("the store did not answer in time")
        if mode == "resent":
            raise Conflict(ns, key, expected_version or 0, version)
        return version


@pytest.mark.parametrize("mode", ["timeout", "resent"])
async def test_a_write_that_landed_but_lost_its_answer_is_not_a_take_over(mode: str) -> None:
    state = LostAnswers()
    effects: list[str] = []
    agent = Agent("recovery", store=state)

    @agent.tool
    async def steps(ctx: Context) -> list[str]:
        """Three steps; the second one's write lands, but its answer is lost."""
        await ctx.once("one", effects.append, "one")
        state.arm = mode
        try:
            await ctx.once("two", effects.append, "two")
        except StoreUnavailable:
            effects.append("told")  # a timeout reaches the step; what it wrote is not lost
        await ctx.once("three", effects.append, "three")
        return effects

    outcome = await asyncio.wait_for(start(agent, "steps", {}, "lost-1", Parking()), 5)
    assert outcome.status == "completed", outcome
    assert effects == (["one", "two", "told", "three"] if mode == "timeout" else ["one", "two", "three"])
    journal = await Journal.load(state, "lost-1")
    assert journal is not None and journal.status == "completed"
    assert [s["k"] for s in journal.steps] == ["one", "two", "three"]
