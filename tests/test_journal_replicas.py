"""Executions survive their replica: two agents sharing one store (a SQLite file, a real redis-server) play two
replicas. A question asked on A is answered on B, and a run whose replica dies is taken over, with no one-time
step done twice (docs/durability.md)."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from agentmw import Agent, Context
from agentmw.journal import JOURNAL_NS, LEASE_NS, Journal, orphaned, resume
from agentmw.runtime import invoke
from agentmw.state import SQLiteState, State
from tests.helpers.channels import Parking, Waiting
from tests.state.conftest import redis_url  # noqa: F401  (a fixture: a real redis-server for the session)
from tests.waiting import eventually

LEASE = 0.6


class Effects:
    """The side-effect counter: one entry per step actually done, by any replica."""

    def __init__(self) -> None:
        self.done: list[str] = []
        self.reached = asyncio.Event()

    def do(self, name: str, replica: str) -> str:
        self.done.append(name)
        return f"{name}@{replica}"


def replica(name: str, state: State, effects: Effects, *, hang: bool = False) -> Agent:
    """One replica: the same functions, its own Agent and its own connection to the shared store."""
    agent = Agent(f"replica-{name}", store=state)

    @agent.tool
    async def transfer(amount: int, ctx: Context) -> dict[str, Any]:
        """Debit, ask for approval, credit."""
        debit = await ctx.once("debit", effects.do, "debit", name)
        answer = await ctx.ask(
            f"Transfer {amount}?", {"type": "object", "properties": {"to": {"type": "string"}}}
        )
        credit = await ctx.once("credit", effects.do, f"credit {answer.content['to']}", name)
        return {"debit": debit, "credit": credit}

    @agent.tool
    async def batch(ctx: Context) -> list[str]:
        """Three steps; on a hanging replica, the work stalls (and the replica dies) after the second."""
        done = [
            await ctx.once("one", effects.do, "one", name),
            await ctx.once("two", effects.do, "two", name),
        ]
        if hang:
            effects.reached.set()
            await asyncio.Event().wait()
        done.append(await ctx.once("three", effects.do, "three", name))
        return done

    return agent


@pytest.fixture(params=["sqlite", "redis"])
async def stores(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[tuple[State, State]]:
    """Two connections to one store: one per replica."""
    made: list[State] = []
    if request.param == "sqlite":
        made = [SQLiteState(tmp_path / "shared.db"), SQLiteState(tmp_path / "shared.db")]
    else:
        from agentmw.state.redis import RedisState

        url = request.getfixturevalue("redis_url")
        prefix = f"j{uuid.uuid4().hex[:12]}"
        made = [RedisState(url, prefix=prefix), RedisState(url, prefix=prefix)]
    yield made[0], made[1]
    for store in made:
        await store.close()


async def start(
    agent: Agent, tool: str, arguments: dict[str, Any], execution_id: str, face: Parking, lease: float = LEASE
) -> Any:
    cap = agent.tools[tool]
    ctx = Context(cap, face, caller="alice", agent=agent, face="test")
    return await invoke(
        cap, arguments, ctx, journal=Journal.for_agent(agent, execution_id, lease_seconds=lease)
    )


@pytest.mark.parametrize("wait", [False, True], ids=["question-ends-the-call", "parked-in-memory"])
async def test_a_question_asked_on_a_is_answered_on_b(stores: tuple[State, State], wait: bool) -> None:
    effects = Effects()
    a, b = replica("a", stores[0], effects), replica("b", stores[1], effects)
    face = Waiting() if wait else Parking()
    run = asyncio.create_task(start(a, "transfer", {"amount": 5}, "t1", face))
    if wait:
        await asyncio.wait_for(face.asked.wait(), 10)
    else:
        parked = await asyncio.wait_for(run, 10)
        assert parked.status == "needs_input" and list(parked.pending) == ["ask-1"]
    stored = await stores[1].get(JOURNAL_NS, "t1")
    assert stored is not None and stored.value["status"] == "parked"
    assert await stores[1].get_key(LEASE_NS, "t1") is None

    outcome = await resume(b, "t1", answers={"ask-1": {"to": "bob"}}, channel=Parking())
    assert outcome.status == "completed"
    assert outcome.value == {"debit": "debit@a", "credit": "credit bob@b"}
    assert effects.done == ["debit", "credit bob"]  # the debit was not done again on B

    if wait:  # A's coroutine wakes late: it must not go on
        assert face.answer is not None
        face.answer.set_result({"to": "mallory"})
        stale = await asyncio.wait_for(run, 10)
        assert stale.status == "canceled" and stale.code == "taken_over"
        assert effects.done == ["debit", "credit bob"]
    again = await resume(a, "t1", answers={"ask-1": {"to": "eve"}})
    assert again.status == "completed" and again.value == outcome.value
    assert effects.done == ["debit", "credit bob"]


async def test_a_run_whose_replica_dies_is_taken_over(stores: tuple[State, State]) -> None:
    effects = Effects()
    a = replica("a", stores[0], effects, hang=True)
    b = replica("b", stores[1], effects)
    run = asyncio.create_task(start(a, "batch", {}, "t2", Parking()))
    await asyncio.wait_for(effects.reached.wait(), 10)
    assert effects.done == ["one", "two"]
    lease = await stores[1].get_key(LEASE_NS, "t2")
    assert lease is not None  # A holds it and renews it while it runs

    busy = await resume(b, "t2")
    assert busy.status == "failed" and busy.retryable and busy.code == "execution_busy"
    assert await orphaned(b) == []

    run.cancel()  # A dies: nothing is written, the lease is neither renewed nor released
    with pytest.raises(asyncio.CancelledError):
        await run
    died = time.monotonic()
    outcome = await resume(b, "t2", wait=10 * LEASE)
    assert outcome.status == "completed", outcome
    assert time.monotonic() - died >= LEASE / 3  # B waited for A's lease to expire
    assert outcome.value == ["one@a", "two@a", "three@b"]
    assert effects.done == ["one", "two", "three"]  # no step done twice
    stored = await stores[0].get(JOURNAL_NS, "t2")
    assert stored is not None and stored.value["status"] == "completed"
    assert await stores[0].get_key(LEASE_NS, "t2") is None


async def test_an_orphan_is_found_by_any_replica(stores: tuple[State, State]) -> None:
    effects = Effects()
    a = replica("a", stores[0], effects, hang=True)
    b = replica("b", stores[1], effects)
    run = asyncio.create_task(start(a, "batch", {}, "t3", Parking(), lease=0.3))
    await asyncio.wait_for(effects.reached.wait(), 10)
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run

    async def only_t3_orphaned() -> bool:
        return await orphaned(b) == ["t3"]

    await eventually(only_t3_orphaned, "the dead run's lease to expire", timeout=10, interval=0.02)
    # two replicas sweep at once: the lease lets one replay it; the other is told it runs elsewhere (or,
    # if it came after, gets the recorded outcome)
    a2 = replica("a2", stores[0], effects)
    outcomes = await asyncio.gather(resume(a2, "t3"), resume(b, "t3"))
    assert any(o.status == "completed" for o in outcomes), outcomes
    assert all(o.status == "completed" or o.code == "execution_busy" for o in outcomes), outcomes
    assert effects.done == ["one", "two", "three"]
