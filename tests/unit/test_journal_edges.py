"""Journal edge cases found in review (docs/durability.md): ``ctx.patched`` inside a one-time step's function,
concurrent one-time steps, the byte cap applied to answers a resume records, and an operator's retry racing a
sweep's take-over. In-process, on the memory state and SQLite files."""

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
    Journal,
    cancel_execution,
    orphaned,
    resume,
    retry,
    show_execution,
)
from agentmw.retries import RetryPolicy
from agentmw.runtime import invoke
from agentmw.state import MemoryState, SQLiteState, StoreLimits
from tests.helpers.channels import Parking
from tests.regressions.test_journal_review import FORMAT_1_PARKED, shop
from tests.waiting import eventually


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SQLiteState]:
    made = SQLiteState(tmp_path / "edges.db")
    yield made
    await made.close()


async def start(agent: Agent, tool: str, execution_id: str, args: dict[str, Any] | None = None) -> Any:
    cap = agent.tools[tool]
    ctx = Context(cap, Parking(), caller="alice", agent=agent, face="test")
    return await invoke(cap, args or {}, ctx, journal=Journal.for_agent(agent, execution_id))


@pytest.mark.parametrize("retried", [False, True])
async def test_patched_inside_a_step_function_replays_on_the_new_path(
    store: SQLiteState, retried: bool
) -> None:
    agent = Agent("edges", store=store)
    runs: list[str] = []

    @agent.tool
    async def fee(ctx: Context) -> str:
        """ctx.patched inside the step's own function."""

        def compute() -> str:
            runs.append("fee")
            return "new" if ctx.patched("fee-v2") else "old"

        policy = RetryPolicy(attempts=2, initial_interval=0.0) if retried else None
        value = await ctx.once("fee", compute, retry=policy)
        await ctx.ask("ok?")
        return f"{value}/{'patched' if ctx.patched('after') else 'unpatched'}"

    first = await start(agent, "fee", "p1")
    assert first.status == "needs_input"
    found = await store.get(JOURNAL_NS, "p1")
    assert found is not None and found.value["stepCount"] == 2  # the step and the question, no marker
    again = await resume(agent, "p1", answers={"ask-1": {}})
    assert again.status == "completed", (again.code, again.message)
    assert again.value == "new/patched"
    assert runs == ["fee"]  # the replay returned the recorded step


async def test_concurrent_one_time_steps_are_not_taken_for_nested_ones(store: SQLiteState) -> None:
    agent = Agent("edges", store=store)
    both = asyncio.Barrier(2)

    @agent.tool
    async def pair(ctx: Context) -> list[str]:
        """Two async steps at once, then two blocking ones."""

        async def meet(name: str) -> str:
            await both.wait()  # each step is in flight while the other starts
            return name

        first = await asyncio.gather(ctx.once("a", meet, "a"), ctx.once("b", meet, "b"))
        second = await asyncio.gather(ctx.once("c", str, "c"), ctx.once("d", str, "d"))
        return [*first, *second]

    outcome = await start(agent, "pair", "g1")
    assert outcome.status == "completed", (outcome.code, outcome.message)
    assert outcome.value == ["a", "b", "c", "d"]


def capped(store: SQLiteState) -> Agent:
    agent = Agent("caps", store=store, limits=Limits(max_journal_bytes=2_000))

    @agent.tool
    async def asks(ctx: Context) -> str:
        """One step, then a question."""
        await ctx.once("s", str, 1)
        answer = await ctx.ask("say", {"type": "object", "properties": {"t": {"type": "string"}}})
        return str(answer.content["t"])[:10]

    return agent


async def test_an_answer_past_the_byte_cap_fails_the_execution_and_frees_its_lease(
    store: SQLiteState,
) -> None:
    agent = capped(store)
    assert (await start(agent, "asks", "big")).status == "needs_input"
    outcome = await resume(agent, "big", answers={"ask-1": {"t": "x" * 5_000}})
    assert outcome.status == "failed" and outcome.code == "journal_full", (outcome.status, outcome.code)
    assert "max_journal_bytes" in (outcome.message or "")
    assert await store.get_key(LEASE_NS, "big") is None
    found = await store.get(JOURNAL_NS, "big")
    assert found is not None and found.value["status"] == "failed"
    loaded = await Journal.load(store, "big")
    assert loaded is not None and loaded.steps[-1].get("a") == {}  # the answer was not recorded
    later = await resume(agent, "big", answers={"ask-1": {"t": "short"}})
    assert later.code == "journal_full"  # the recorded end, every time


async def test_an_answer_within_the_byte_cap_completes(store: SQLiteState) -> None:
    agent = capped(store)
    assert (await start(agent, "asks", "small")).status == "needs_input"
    outcome = await resume(agent, "small", answers={"ask-1": {"t": "fine"}})
    assert outcome.status == "completed" and outcome.value == "fine"


class SlowLeaseDelete(MemoryState):
    """A store whose lease deletes wait for ``go``: what a slow network does between two of retry's writes."""

    def __init__(self) -> None:
        super().__init__()
        self.go = asyncio.Event()
        self.deleting = asyncio.Event()
        self.slow = False

    async def delete_key(self, ns: str, key: str) -> Any:
        if ns == LEASE_NS and self.slow:
            self.deleting.set()
            await self.go.wait()
        return await super().delete_key(ns, key)


async def _held_by(store: MemoryState, owner: str) -> bool:
    found = await store.get_key(LEASE_NS, "r1")
    return found is not None and found.get("owner") == owner


async def test_an_operator_retry_never_drops_the_lease_of_a_take_over() -> None:
    store = SlowLeaseDelete()
    gate = asyncio.Event()
    agent = Agent("rr", store=store, limits=Limits(max_recovery_attempts=0))

    @agent.tool
    async def pill(ctx: Context) -> str:
        """One step, then one that waits."""
        await ctx.once("first", str, 1)
        await ctx.once("second", gate.wait)
        return "done"

    cap = agent.tools["pill"]
    ctx = Context(cap, Parking(), caller="alice", agent=agent, face="test")
    run = asyncio.create_task(invoke(cap, {}, ctx, journal=Journal(store, "r1", lease_seconds=0.3)))

    async def stepped() -> bool:
        found = await store.get(JOURNAL_NS, "r1")
        return found is not None and found.value.get("stepCount", 0) >= 1

    await eventually(stepped, "the first step")
    run.cancel()  # the replica dies mid-step
    await asyncio.gather(run, return_exceptions=True)
    found = await eventually(lambda: orphaned(agent), "the orphan", timeout=10)
    dead = await resume(agent, found[0], journal=await Journal.load(store, found[0]))
    assert dead.code == "recovery_exhausted"
    record = await store.get(JOURNAL_NS, "r1")
    assert record is not None and record.value["status"] == DEAD

    agent.limits = Limits(max_recovery_attempts=5)
    store.slow = True
    retrying = asyncio.create_task(retry(agent, "r1"))
    taker: asyncio.Task[Any] | None = None
    try:
        # a retry may drop a stale lease, but only before the record says running again
        await asyncio.wait(
            [retrying, asyncio.create_task(store.deleting.wait())], return_when=asyncio.FIRST_COMPLETED
        )
        record = await store.get(JOURNAL_NS, "r1")
        assert record is not None
        if store.deleting.is_set() and not retrying.done():
            assert record.value["status"] == DEAD, (
                "the record said running while a lease delete was in flight"
            )
        store.go.set()
        assert await retrying
        orphan = await eventually(lambda: orphaned(agent), "the retried execution, for the sweep")
        assert orphan == ["r1"]
        taker = asyncio.create_task(
            resume(agent, orphan[0], journal=await Journal.load(store, orphan[0]), owner="B")
        )
        await eventually(lambda: _held_by(store, "B"), "replica B to hold the execution")
        assert await orphaned(agent) == []
    finally:
        store.go.set()
        gate.set()
        if taker is not None:
            outcome = await asyncio.wait_for(taker, 5)
            assert outcome.status == "completed", (outcome.code, outcome.message)


async def test_a_sleep_longer_than_the_stores_retention_keeps_its_journal(store: SQLiteState) -> None:
    """The header is kept for StoreLimits.max_age of "journal" after its last write, the step log's entries four
    times that after they were appended: a held execution that writes nothing for longer (a durable sleep) is
    written again in time, its header and then its whole log, and wakes up to go on."""
    store.limit(JOURNAL_NS, StoreLimits(max_age=0.5))  # the step log keeps its entries 2 s
    agent = Agent("sleepy", store=store)
    ran: list[str] = []

    @agent.tool
    async def nap(ctx: Context) -> str:
        """A step, a sleep past both retentions, a question."""
        await ctx.once("before", ran.append, "before")
        await ctx.sleep(3.0)
        await ctx.ask("still there?")
        return "woke"

    cap = agent.tools["nap"]
    ctx = Context(cap, Parking(), caller="alice", agent=agent, face="test")
    outcome = await invoke(cap, {}, ctx, journal=Journal(store, "n1", lease_seconds=0.3))
    assert outcome.status == "needs_input", (outcome.status, outcome.code, outcome.message)
    loaded = await Journal.load(store, "n1")
    assert loaded is not None and len(loaded.steps) == 3  # the step, the wake-up time, the question
    again = await resume(agent, "n1", answers={"ask-1": {}})
    assert again.status == "completed" and again.value == "woke", (again.code, again.message)
    assert ran == ["before"]


async def test_the_step_past_the_cap_does_not_run(store: SQLiteState) -> None:
    agent = Agent("caps", store=store, limits=Limits(max_steps_per_execution=2))
    ran: list[int] = []

    @agent.tool
    async def many(ctx: Context) -> int:
        """Three steps, past a cap of two."""
        for i in range(3):
            await ctx.once(f"s{i}", ran.append, i)
        return 3

    outcome = await start(agent, "many", "over")
    assert outcome.status == "failed" and outcome.code == "journal_full", (outcome.status, outcome.code)
    assert ran == [0, 1]  # the third step's side effect never happened
    found = await store.get(JOURNAL_NS, "over")
    assert found is not None and found.value["status"] == "failed" and found.value["stepCount"] == 2


async def test_the_byte_cap_counts_only_new_steps_of_a_format_1_record() -> None:
    """A format-1 journal (steps in the record) moves its history to the step log at its first write; that
    history predates the cap and is never dropped by it."""
    memory = MemoryState()
    await memory.put(JOURNAL_NS, "old", FORMAT_1_PARKED, expected_version=None)
    agent = shop(memory)
    agent.limits = Limits(max_journal_bytes=300)
    outcome = await resume(agent, "old", answers={"ask-1": {"city": "Oslo"}})
    detail = await show_execution(memory, "old")
    assert detail is not None and len(detail.steps) >= 3, detail
    assert outcome.status == "completed", (outcome.code, outcome.message)


async def test_an_operator_cancel_of_a_running_execution_reaches_its_holders_caller(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    replica, operator = SQLiteState(db), SQLiteState(db)
    gate = asyncio.Event()
    agent = Agent("c", store=replica)
    ran: list[str] = []

    @agent.tool
    async def work(ctx: Context) -> str:
        """A step, a slow step, a step."""
        await ctx.once("one", str, 1)
        await ctx.once("slow", gate.wait)
        await ctx.once("three", ran.append, "three")
        return "done"

    cap = agent.tools["work"]
    ctx = Context(cap, Parking(), caller="alice", agent=agent, face="test")
    run = asyncio.create_task(invoke(cap, {}, ctx, journal=Journal(replica, "w1")))

    async def first() -> bool:
        found = await operator.get(JOURNAL_NS, "w1")
        return found is not None and found.value.get("stepCount", 0) >= 1

    try:
        await eventually(first, "the first step")
        assert await cancel_execution(operator, "w1", "Canceled by an operator.")
        gate.set()
        outcome = await asyncio.wait_for(run, 5)
        assert outcome.status == "canceled" and outcome.code == "canceled", (outcome.code, outcome.message)
        assert outcome.message == "Canceled by an operator."
        assert ran == []  # it stopped at its next journaled step
    finally:
        gate.set()
        await replica.close()
        await operator.close()


async def test_steps_gathered_that_finish_out_of_order_replay(store: SQLiteState) -> None:
    """Steps started together are recorded as they finish (b, then a); the replay, where every recorded step
    returns at once, finds each by its key. A step the function no longer runs still diverges."""
    agent = Agent("edges", store=store)
    ran: list[str] = []
    b_done = asyncio.Event()

    async def step(name: str) -> str:
        if name == "a":
            await b_done.wait()  # a finishes after b
        ran.append(name)
        if name == "b":
            b_done.set()
        return name

    @agent.tool
    async def fan(ctx: Context) -> list[str]:
        """Two steps and a clock read at once, then a question."""
        got = await asyncio.gather(ctx.once("a", step, "a"), ctx.once("b", step, "b"))
        await ctx.ask("ok?")
        return list(got)

    assert (await start(agent, "fan", "f1")).status == "needs_input"
    loaded = await Journal.load(store, "f1")
    assert loaded is not None and [s.get("k") for s in loaded.steps[:2]] == ["b", "a"]
    done = await resume(agent, "f1", answers={"ask-1": {}})
    assert done.status == "completed", (done.code, done.message)
    assert done.value == ["a", "b"] and ran == ["b", "a"]  # nothing ran again

    assert (await start(agent, "fan", "f2")).status == "needs_input"
    changed = Agent("edges", store=store)  # a deploy whose fan runs a step the first run never recorded

    @changed.tool(name="fan")
    async def fan_now(ctx: Context) -> list[str]:
        """Another body under the same name."""
        got = await asyncio.gather(ctx.once("a", step, "a"), ctx.once("c", step, "c"))
        return list(got)

    diverged = await resume(changed, "f2", answers={"ask-1": {}})
    assert diverged.code == "replay_diverged", (diverged.code, diverged.message)


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_a_long_lived_executions_step_log_outlives_the_executions_around_it(
    kind: str, tmp_path: Path
) -> None:
    """Logs are kept by their last append, headers by their last write: an execution whose later steps ride in
    its header (no append) while many others come and go must not lose its log (its run, its first steps)."""
    held: Any = MemoryState() if kind == "memory" else SQLiteState(tmp_path / "evict.db")
    held.limit(JOURNAL_NS, StoreLimits(max_count=3))
    agent = Agent("evict", store=held)
    rounds = 8

    @agent.tool
    async def long(ctx: Context) -> int:
        """A step, then a question a round."""
        await ctx.once("one", str, 1)
        for i in range(rounds):
            await ctx.ask(f"round {i}?")
        return rounds

    @agent.tool
    async def short(ctx: Context) -> str:
        """One step."""
        await ctx.once("s", str, 1)
        return "ok"

    try:
        assert (await start(agent, "long", "L")).status == "needs_input"
        outcome: Any = None
        for i in range(rounds):
            for j in range(2):  # 16 others in all: more logs than the log namespace keeps (4 x 3)
                assert (await start(agent, "short", f"E{i}-{j}")).status == "completed"
            outcome = await resume(agent, "L", answers={f"ask-{i + 1}": {}})
            assert outcome.status in ("needs_input", "completed"), (i, outcome.code, outcome.message)
        assert outcome.status == "completed" and outcome.value == rounds
    finally:
        await held.close()


async def test_an_execution_whose_step_log_is_gone_fails_cleanly_for_good() -> None:
    held = MemoryState()
    agent = Agent("lost", store=held)

    @agent.tool
    async def asks(ctx: Context) -> str:
        """A step, then a question."""
        await ctx.once("one", str, 1)
        await ctx.ask("go on?")
        return "done"

    assert (await start(agent, "asks", "gone")).status == "needs_input"
    held.limit(STEPS_NS, StoreLimits(max_count=1))  # the log's bounds shrink: the next append evicts its log
    await held.append(STEPS_NS, "someone-else", {"p": 0, "e": []})
    outcome = await resume(agent, "gone", answers={"ask-1": {}})  # must not raise
    assert outcome.status == "failed" and outcome.code == "journal_lost", (outcome.code, outcome.message)
    assert "lost its entry" in (outcome.message or "") and not outcome.retryable
    found = await held.get(JOURNAL_NS, "gone")
    assert found is not None and found.value["status"] == "failed"
    assert await orphaned(agent) == []  # no sweep takes it over again
    again = await resume(agent, "gone")
    assert again.code == "journal_lost"


class Blip(MemoryState):
    """A store that refuses one journal write (the ``fail_at``-th)."""

    def __init__(self) -> None:
        super().__init__()
        self.fail_at = -1
        self.puts = 0

    async def put(self, ns: str, key: str, value: Any, **kw: Any) -> int:
        if ns == JOURNAL_NS:
            self.puts += 1
            if self.puts == self.fail_at:
                raise StoreUnavailable("the store refused a write")
        return await super().put(ns, key, value, **kw)


async def test_one_refused_journal_write_does_not_fail_the_execution_for_good() -> None:
    held = Blip()
    agent = Agent("blip", store=held)
    done: list[str] = []

    @agent.tool
    async def work(ctx: Context) -> str:
        """Three steps."""
        for name in ("a", "b", "c"):
            await ctx.once(name, done.append, name)
        return "ok"

    held.fail_at = 2  # the write of step b
    first = await start(agent, "work", "b1")
    assert first.status == "failed" and first.retryable, (first.status, first.message)
    found = await held.get(JOURNAL_NS, "b1")
    assert found is not None and found.value["status"] == "running"  # not ended: it can go on
    assert await held.get_key(LEASE_NS, "b1") is None  # given up: a take-over need not wait for it
    again = await resume(agent, "b1")
    assert again.status == "completed", (again.code, again.message)
    assert done == ["a", "b", "b", "c"]  # a step whose record was refused is done again (at least once)


async def test_a_patch_answer_holds_inside_later_steps(store: SQLiteState) -> None:
    """An execution recorded before a patch replays with ctx.patched False at the patch point; a fresh step's
    function asking the same patch later in that run gets False too (the first answer holds)."""
    agent = Agent("pc", store=store)
    patch_on = {"v": False}

    @agent.tool
    async def flow(ctx: Context) -> dict[str, Any]:
        """A step, the patch point, a question, a step whose function asks the same patch."""
        await ctx.once("a", str, 1)
        outside = ctx.patched("fee-v2") if patch_on["v"] else False
        await ctx.ask("go?")
        inside = await ctx.once("b", lambda: ctx.patched("fee-v2") if patch_on["v"] else False)
        return {"outside": outside, "inside": inside}

    assert (await start(agent, "flow", "old")).status == "needs_input"
    patch_on["v"] = True  # the deploy that adds the patch
    done = await resume(agent, "old", answers={"ask-1": {}})
    assert done.status == "completed", (done.code, done.message)
    assert done.value == {"outside": False, "inside": False}


class RefusingEnd(MemoryState):
    """A store that refuses the journal's end write (an outcome in it) ``times`` times."""

    def __init__(self, times: int) -> None:
        super().__init__()
        self.times = times
        self.refused = 0

    async def put(self, ns: str, key: str, value: Any, **kw: Any) -> int:
        if (
            ns == JOURNAL_NS
            and isinstance(value, dict)
            and value.get("outcome")
            and self.refused < self.times
        ):
            self.refused += 1
            raise StoreUnavailable("the store refused a write")
        return await super().put(ns, key, value, **kw)


@pytest.mark.parametrize("times", [3, 10_000], ids=["refused-then-taken", "refused-throughout"])
async def test_a_refused_end_write_is_retried_and_never_fails_the_run(
    times: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    import agentmw.journal as journal_module

    monkeypatch.setattr(journal_module, "SETTLE_RETRY_SECONDS", 0.5)
    held = RefusingEnd(times)
    agent = Agent("end", store=held)

    @agent.tool
    async def work(ctx: Context) -> str:
        """One step."""
        await ctx.once("a", str, 1)
        return "ok"

    outcome = await start(agent, "work", "e1")  # must not raise
    assert outcome.status == "completed" and outcome.value == "ok"
    found = await held.get(JOURNAL_NS, "e1")
    assert found is not None
    if times == 3:
        assert found.value["status"] == "completed" and held.refused == 3
    else:
        assert found.value["status"] == "running"  # as last written: a take-over ends it
