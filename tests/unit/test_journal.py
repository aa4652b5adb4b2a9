"""Journal replay on the memory state: answers, ``ctx.call``, ``ctx.once``, divergence, delivered events, leases,
and no journal at all for an execution that takes no journaled step (docs/durability.md)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic import BaseModel

from agentmw import Agent, Context
from agentmw.events import TextDelta, ToolCallFinished, ToolCallStarted
from agentmw.journal import FORMAT, JOURNAL_NS, LEASE_NS, Journal, ReplayDiverged, cancel, orphaned, resume
from agentmw.runtime import invoke
from agentmw.state import MemoryState
from tests.helpers.channels import Parking, Waiting
from tests.waiting import eventually

counters: dict[str, int] = {}
flags: dict[str, Any] = {}


def bump(name: str) -> int:
    counters[name] = counters.get(name, 0) + 1
    return counters[name]


class Quote(BaseModel):
    item: str
    price: float


def make_agent(state: MemoryState) -> Agent:
    agent = Agent("journal-test", store=state)

    @agent.tool
    def plain(a: int, b: int) -> int:
        """No journaled step."""
        bump("plain")
        return a + b

    @agent.tool
    def quote(item: str) -> Quote:
        """A sub-call target with a side effect."""
        bump("quote")
        return Quote(item=item, price=9.5)

    @agent.tool
    async def order(item: str, ctx: Context) -> dict[str, Any]:
        """Charges once, asks, then ships once."""
        await ctx.say("starting")
        receipt = await ctx.once("charge", charge, item)
        answer = await ctx.ask("Where to?", {"type": "object", "properties": {"city": {"type": "string"}}})
        await ctx.say("shipping")
        shipped = await ctx.once("ship", ship, answer.content["city"])
        return {"receipt": receipt, "shipped": shipped}

    @agent.tool
    async def buy(item: str, ctx: Context) -> dict[str, Any]:
        """A sub-call, then a confirmation."""
        quoted = await ctx.call("quote", {"item": item})
        assert isinstance(quoted, Quote)  # the recorded value comes back in its declared type
        ok = await ctx.confirm(f"Buy {item} for {quoted.price}?")
        return {"price": quoted.price, "ok": ok, "calls": counters.get("quote", 0)}

    @agent.tool
    async def fickle(ctx: Context) -> str:
        """Asks a question whose key changes between runs: not replay-safe."""
        await ctx.ask("first?", key=flags.get("key", "first"))
        await ctx.ask("second?", key="second")
        return "done"

    @agent.tool
    async def swallowing(ctx: Context) -> str:
        """Catches everything, even the divergence; the execution must fail anyway."""
        try:
            await ctx.once(flags.get("step", "a"), bump, "swallowing")
            await ctx.ask("go?", key="go")
        except Exception:  # noqa: BLE001  (the test: a tool that swallows the park)
            return "swallowed"
        return "done"

    @agent.tool
    async def lonely(ctx: Context) -> str:
        """One step, then a wait the test ends by cancelling."""
        await ctx.once("step", bump, "lonely")
        flags["reached"].set()
        await asyncio.Event().wait()
        return "never"

    return agent


@pytest.fixture(autouse=True)
def _reset() -> None:
    counters.clear()
    flags.clear()


@pytest.fixture
def state() -> MemoryState:
    return MemoryState()


@pytest.fixture
def agent(state: MemoryState) -> Agent:
    return make_agent(state)


async def start(
    agent: Agent, tool: str, arguments: dict[str, Any], execution_id: str, channel: Any = None
) -> Any:
    cap = agent.tools[tool]
    ctx = Context(cap, channel or Parking(), caller="alice", agent=agent, face="test")
    return await invoke(cap, arguments, ctx, journal=Journal.for_agent(agent, execution_id))


async def test_a_plain_execution_writes_no_journal(agent: Agent, state: MemoryState) -> None:
    outcome = await start(agent, "plain", {"a": 2, "b": 3}, "e-plain")
    assert outcome.status == "completed" and outcome.value == 5
    assert await state.get(JOURNAL_NS, "e-plain") is None
    assert await state.get_key(LEASE_NS, "e-plain") is None
    again = await resume(agent, "e-plain")
    assert again.status == "rejected" and again.code == "unknown_execution"


async def test_answers_and_once_steps_replay_without_running_again(agent: Agent, state: MemoryState) -> None:
    first = await start(agent, "order", {"item": "desk"}, "e1")
    assert first.status == "needs_input" and list(first.pending) == ["ask-1"]
    assert counters == {"charge": 1}
    stored, _ = await state.get(JOURNAL_NS, "e1")
    assert stored["status"] == "parked" and stored["format"] == FORMAT == 2
    journal = await Journal.load(state, "e1")  # the record is the header; the steps are in the step log
    assert journal is not None and journal.run is not None
    assert [(s["t"], s["k"]) for s in journal.steps] == [("once", "charge"), ("ask", "ask-1")]
    assert journal.run["name"] == "order" and journal.run["caller"] == "alice"
    assert await state.get_key(LEASE_NS, "e1") is None  # a parked execution holds no lease

    done = await resume(agent, "e1", answers={"ask-1": {"city": "Lyon"}})
    assert done.status == "completed"
    assert done.value == {"receipt": "charged desk #1", "shipped": "shipped to Lyon #1"}
    assert counters == {"charge": 1, "ship": 1}
    stored, _ = await state.get(JOURNAL_NS, "e1")
    assert stored["status"] == "completed"
    journal = await Journal.load(state, "e1")
    assert journal is not None
    assert journal.steps[1]["a"]["ask-1"]["v"] == {"action": "accept", "content": {"city": "Lyon"}}
    assert await state.get_key(LEASE_NS, "e1") is None

    repeat = await resume(agent, "e1", answers={"ask-1": {"city": "Paris"}})  # ended: the recorded outcome
    assert repeat.status == "completed" and repeat.value == done.value
    assert counters == {"charge": 1, "ship": 1}


async def test_resume_without_the_answer_parks_again(agent: Agent) -> None:
    await start(agent, "order", {"item": "desk"}, "e2")
    again = await resume(agent, "e2", answers={"unrelated": "x"})
    assert again.status == "needs_input" and list(again.pending) == ["ask-1"]
    assert counters == {"charge": 1}


async def test_sub_calls_are_recorded_with_their_value(agent: Agent, state: MemoryState) -> None:
    first = await start(agent, "buy", {"item": "lamp"}, "e3")
    assert first.status == "needs_input" and list(first.pending) == ["confirm-1"]
    assert counters == {"quote": 1}
    journal = await Journal.load(state, "e3")
    assert journal is not None
    call = journal.steps[0]
    assert call["t"] == "call" and call["ok"] is True and call["k"].startswith("1:quote:")
    assert call["v"] == {"item": "lamp", "price": 9.5}
    done = await resume(agent, "e3", answers={"confirm-1": True})
    assert done.status == "completed" and done.value == {"price": 9.5, "ok": True, "calls": 1}
    assert counters == {"quote": 1}


async def test_sub_call_events_are_not_sent_again(agent: Agent) -> None:
    face = Parking()
    await start(agent, "buy", {"item": "lamp"}, "e4", face)
    assert [type(e) for e in face.events] == [ToolCallStarted, ToolCallFinished]
    again = Parking()
    done = await resume(agent, "e4", answers={"confirm-1": {"approved": True}}, channel=again)
    assert done.status == "completed"
    assert again.events == []  # both tool-call events were delivered before the question


async def test_delivered_events_are_skipped_on_replay(agent: Agent, state: MemoryState) -> None:
    face = Parking()
    await start(agent, "order", {"item": "desk"}, "e5", face)
    assert [e.text for e in face.events] == ["starting"]
    stored, _ = await state.get(JOURNAL_NS, "e5")
    assert stored["delivered"] == 1
    later = Parking()
    done = await resume(agent, "e5", answers={"ask-1": {"city": "Oslo"}}, channel=later)
    assert done.status == "completed"
    assert later.events == [TextDelta("shipping")]
    stored, _ = await state.get(JOURNAL_NS, "e5")
    assert stored["delivered"] == 2


async def test_a_divergent_replay_fails_naming_both_steps(agent: Agent, state: MemoryState) -> None:
    first = await start(agent, "fickle", {}, "e6")
    assert list(first.pending) == ["first"]
    flags["key"] = "other"
    outcome = await resume(agent, "e6", answers={"first": {"x": 1}})
    assert outcome.status == "failed" and not outcome.retryable and outcome.code == "replay_diverged"
    assert "the question 'first'" in outcome.message and "asks the question 'other'" in outcome.message
    assert outcome.data["position"] == 1
    stored, _ = await state.get(JOURNAL_NS, "e6")
    assert stored["status"] == "failed" and stored["outcome"]["code"] == "replay_diverged"


async def test_a_divergence_the_function_catches_still_fails(agent: Agent) -> None:
    first = await start(agent, "swallowing", {}, "e7")
    assert list(first.pending) == ["go"]
    flags["step"] = "b"
    outcome = await resume(agent, "e7", answers={"go": {}})
    assert outcome.status == "failed" and outcome.code == "replay_diverged"
    assert "the one-time step 'a'" in outcome.message and "runs the one-time step 'b'" in outcome.message
    assert counters == {"swallowing": 1}


async def test_the_in_memory_fast_path_records_the_answer(agent: Agent, state: MemoryState) -> None:
    face = Waiting()
    run = asyncio.create_task(start(agent, "order", {"item": "desk"}, "e8", face))
    await asyncio.wait_for(face.asked.wait(), 5)
    assert face.answer is not None
    face.answer.set_result({"city": "Rome"})
    outcome = await asyncio.wait_for(run, 5)
    assert outcome.status == "completed" and outcome.value["shipped"] == "shipped to Rome #1"
    stored, _ = await state.get(JOURNAL_NS, "e8")
    journal = await Journal.load(state, "e8")
    assert journal is not None
    assert stored["status"] == "completed" and journal.steps[1]["a"]["ask-1"]["v"]["content"] == {
        "city": "Rome"
    }


async def test_a_parked_coroutine_yields_to_a_resume_elsewhere(agent: Agent) -> None:
    face = Waiting()
    run = asyncio.create_task(start(agent, "order", {"item": "desk"}, "e9", face))
    await asyncio.wait_for(face.asked.wait(), 5)
    done = await resume(agent, "e9", answers={"ask-1": {"city": "Kyiv"}})
    assert done.status == "completed"
    assert face.answer is not None
    face.answer.set_result({"city": "Late"})  # the stale coroutine wakes: it must not go on
    stale = await asyncio.wait_for(run, 5)
    assert stale.status == "canceled" and stale.code == "taken_over"
    assert counters == {"charge": 1, "ship": 1}


async def test_leases_exclude_and_expire(agent: Agent, state: MemoryState) -> None:
    await start(agent, "order", {"item": "desk"}, "e10")
    holder = await Journal.load(state, "e10")
    assert holder is not None
    assert await holder.acquire("replica-a", 0.2)
    assert await holder.holder() == "replica-a"
    busy = await resume(agent, "e10", answers={"ask-1": {"city": "Bern"}})
    assert busy.status == "failed" and busy.retryable and busy.code == "execution_busy"
    assert await holder.renew()
    holder._stop_renewer()  # the holder dies: no renewal, no release
    done = await resume(agent, "e10", answers={"ask-1": {"city": "Bern"}}, wait=5)
    assert done.status == "completed" and counters == {"charge": 1, "ship": 1}
    assert not await holder.renew()  # lost


async def test_release_gives_the_lease_up_at_once(state: MemoryState) -> None:
    journal = Journal(state, "lease-only", owner="a", lease_seconds=30)
    assert await journal.acquire()
    other = Journal(state, "lease-only", owner="b", lease_seconds=30)
    assert not await other.acquire()
    assert not await other.release()
    assert await journal.release()
    assert await other.acquire()
    assert await other.release()


async def test_a_dead_run_is_taken_over_without_repeating_its_step(agent: Agent, state: MemoryState) -> None:
    cap = agent.tools["lonely"]
    journal = Journal(state, "e11", lease_seconds=0.3)
    flags["reached"] = asyncio.Event()
    run = asyncio.create_task(invoke(cap, {}, Context(cap, Parking(), agent=agent), journal=journal))
    await asyncio.wait_for(flags["reached"].wait(), 5)
    assert counters == {"lonely": 1} and journal.stored and await state.get_key(LEASE_NS, "e11") is not None
    assert await orphaned(agent) == []
    run.cancel()  # the replica dies: its lease is neither renewed nor released
    with pytest.raises(asyncio.CancelledError):
        await run

    async def only_e11_orphaned() -> bool:
        return await orphaned(agent) == ["e11"]

    await eventually(only_e11_orphaned, "the dead run's lease to expire", interval=0.01)
    assert await orphaned(agent) == ["e11"]
    flags["reached"] = asyncio.Event()
    second = asyncio.create_task(resume(agent, "e11", wait=5))
    await asyncio.wait_for(flags["reached"].wait(), 5)  # past the step, on the replay
    assert (await state.get_key(LEASE_NS, "e11") or {}).get("owner") != journal.owner
    assert counters == {"lonely": 1}  # replayed: the step returned its recorded result
    second.cancel()
    with pytest.raises(asyncio.CancelledError):
        await second


async def test_cancel_is_recorded(agent: Agent) -> None:
    await start(agent, "order", {"item": "desk"}, "e12")
    assert await cancel(agent, "e12")
    outcome = await resume(agent, "e12", answers={"ask-1": {"city": "Nice"}})
    assert outcome.status == "canceled" and outcome.code == "canceled"
    assert counters == {"charge": 1}
    assert not await cancel(agent, "e12")


async def test_once_without_a_journal_just_runs(agent: Agent) -> None:
    ctx = Context(agent.tools["plain"], agent=agent)
    assert await ctx.once("x", bump, "bare") == 1
    assert await ctx.once("x", bump, "bare") == 2  # nothing to replay against
    with pytest.raises(TypeError, match="does not come back unchanged"):
        await ctx.once("model", lambda: Quote(item="a", price=1.0))


async def test_once_refuses_a_result_the_journal_cannot_hold(agent: Agent, state: MemoryState) -> None:
    @agent.tool
    async def setty(ctx: Context) -> str:
        """Returns a set from a step."""
        await ctx.once("s", lambda: {1, 2})
        return "no"

    outcome = await start(agent, "setty", {}, "e13")
    assert outcome.status == "failed" and "TypeError" in outcome.message
    assert await state.get(JOURNAL_NS, "e13") is None


async def test_a_repeated_step_name_runs_once(agent: Agent) -> None:
    @agent.tool
    async def twice(ctx: Context) -> list[int]:
        """Two steps with one name."""
        return [await ctx.once("n", bump, "twice"), await ctx.once("n", bump, "twice")]

    outcome = await start(agent, "twice", {}, "e14")
    assert outcome.value == [1, 1] and counters == {"twice": 1}


async def test_concurrent_steps_replay_in_any_order(agent: Agent) -> None:
    @agent.tool
    async def fan(ctx: Context) -> list[Any]:
        """Two sub-calls at once, then a question."""
        quotes = await asyncio.gather(ctx.call("quote", {"item": "a"}), ctx.call("quote", {"item": "b"}))
        await ctx.confirm("ok?")
        return [q.item for q in quotes]

    first = await start(agent, "fan", {}, "e15")
    assert first.status == "needs_input" and counters == {"quote": 2}
    done = await resume(agent, "e15", answers={"confirm-1": True})
    assert done.status == "completed" and done.value == ["a", "b"] and counters == {"quote": 2}


async def test_asking_inside_a_step_is_refused(agent: Agent) -> None:
    @agent.tool
    async def nested(ctx: Context) -> str:
        """Asks from inside a one-time step."""

        async def inner() -> str:
            await ctx.ask("inside?")
            return "x"

        return await ctx.once("outer", inner)

    outcome = await start(agent, "nested", {}, "e16")
    assert outcome.status == "failed" and "RuntimeError" in outcome.message


async def test_an_approval_used_by_the_first_run_is_not_used_again(agent: Agent) -> None:
    from agentmw.journal import journaled_approval
    from agentmw.safety.gate import Approval

    async def consume() -> Approval:
        bump("consume")
        return Approval(
            "ap1", "gated", "h", "do it", {}, "test", "alice", 0.0, status="used", decided_by="bob"
        )

    @agent.tool
    async def gated(ctx: Context) -> str:
        """Uses an approval, then asks."""
        approval = await journaled_approval(ctx, "ap1", consume)
        await ctx.ask("more?", key="more")
        return f"{approval.status} by {approval.decided_by}"

    first = await start(agent, "gated", {}, "e17")
    assert first.status == "needs_input"
    done = await resume(agent, "e17", answers={"more": {}})
    assert done.status == "completed" and done.value == "used by bob"
    assert counters == {"consume": 1}


async def test_divergence_error_is_permanent() -> None:
    error = ReplayDiverged("x", 2, "the question 'a'", "asks the question 'b'")
    assert "step 2" in error.message and "docs/durability.md" in error.message


async def charge(item: str) -> str:
    return f"charged {item} #{bump('charge')}"


def ship(city: str) -> str:
    return f"shipped to {city} #{bump('ship')}"


async def test_concurrent_sub_calls_that_finished_out_of_order_replay(agent: Agent) -> None:
    @agent.tool
    async def slow_quote(item: str, delay: float) -> Quote:
        """A sub-call target that takes its time."""
        await asyncio.sleep(delay)
        bump("slow_quote")
        return Quote(item=item, price=1.0)

    @agent.tool
    async def fan_out(ctx: Context) -> list[Any]:
        """The first sub-call started finishes last, so the journal records it second."""
        quotes = await asyncio.gather(
            ctx.call("slow_quote", {"item": "a", "delay": 0.05}),
            ctx.call("slow_quote", {"item": "b", "delay": 0.0}),
        )
        await ctx.confirm("ok?")
        return [q.item for q in quotes]

    first = await start(agent, "fan_out", {}, "e-out-of-order")
    assert first.status == "needs_input" and counters == {"slow_quote": 2}
    done = await resume(agent, "e-out-of-order", answers={"confirm-1": True})
    assert done.status == "completed" and done.value == ["a", "b"] and counters == {"slow_quote": 2}
