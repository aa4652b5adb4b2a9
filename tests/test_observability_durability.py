"""The durability metrics (docs/observability.md): executions by status (from the store, all replicas), take-overs,
dead letters and step retries (this process), in the Prometheus text and through the real OpenTelemetry SDK's
in-memory reader, on a real SQLite file."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from agentmw import Agent, Context
from agentmw.journal import Journal, orphaned, resume
from agentmw.retries import RetryPolicy
from agentmw.runtime import invoke
from agentmw.settings import Limits
from agentmw.state import SQLiteState
from tests.helpers.channels import Parking
from tests.observability.app import Kit
from tests.waiting import eventually

LEASE = 0.3
flags: dict[str, Any] = {}


def make_agent(state: SQLiteState, kit: Kit) -> Agent:
    agent = Agent(
        "durability-metrics", store=state, telemetry=kit.telemetry, limits=Limits(max_recovery_attempts=1)
    )

    @agent.skill
    async def order(ctx: Context) -> str:
        """A step that succeeds on its third try, then a question."""
        await ctx.once("charge", flaky, retry=RetryPolicy(attempts=3, initial_interval=0.0))
        await ctx.ask("Where to?")
        return "ok"

    @agent.skill
    async def stuck(ctx: Context) -> str:
        """One step, then a wait its replica dies in."""
        await ctx.once("begin", lambda: "begun")
        flags["reached"].set()
        await asyncio.Event().wait()
        return "never"

    return agent


def flaky() -> str:
    flags["tries"] = flags.get("tries", 0) + 1
    if flags["tries"] < 3:
        raise ConnectionError("down")
    return "charged"


@pytest.fixture
async def setup(tmp_path: Path) -> AsyncIterator[tuple[Agent, Kit]]:
    flags.clear()
    state = SQLiteState(tmp_path / "metrics.db")
    kit = Kit()
    yield make_agent(state, kit), kit
    await state.close()


async def start(agent: Agent, name: str, execution_id: str) -> Any:
    cap = agent.skills[name]
    ctx = Context(cap, Parking(), agent=agent, face="a2a")
    return await invoke(cap, {}, ctx, journal=Journal.for_agent(agent, execution_id, lease_seconds=LEASE))


async def hang(agent: Agent, execution_id: str, *, take_over: bool = False) -> asyncio.Task[Any]:
    flags["reached"] = asyncio.Event()
    if take_over:
        await eventually(lambda: _orphaned(agent, execution_id), f"{execution_id}'s lease to expire")
        task = asyncio.create_task(resume(agent, execution_id, lease_seconds=LEASE, wait=5))
    else:
        task = asyncio.create_task(start(agent, "stuck", execution_id))
    await asyncio.wait_for(flags["reached"].wait(), 10)
    return task


async def _orphaned(agent: Agent, execution_id: str) -> bool:
    return execution_id in await orphaned(agent)


async def die(task: asyncio.Task[Any]) -> None:
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


def prometheus(text: str, name: str, labels: str = "") -> float:
    for line in text.splitlines():
        if line.startswith(f"{name}{labels} "):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name}{labels} is not in the exposition:\n{text}")


def otel_total(kit: Kit, name: str) -> float:
    points = kit.metric(name)
    assert points, f"no {name} points"
    return float(sum(p.value for p in points))


async def test_executions_take_overs_dead_letters_and_retries_are_measured(setup: tuple[Agent, Kit]) -> None:
    agent, kit = setup
    text = (await kit.telemetry.registry.exposition()).decode()
    before = {
        name: prometheus(text, name)
        for name in (
            "agentmw_execution_takeovers_total",
            "agentmw_execution_dead_letters_total",
            "agentmw_step_retries_total",
            "agentmw_steps_given_up_total",
        )
    }
    assert prometheus(text, "agentmw_executions", '{status="parked"}') == 0

    assert (await start(agent, "order", "m-parked")).status == "needs_input"  # 2 retries of its step
    await die(await hang(agent, "m-dead"))
    await die(await hang(agent, "m-dead", take_over=True))  # take-over 1
    await eventually(lambda: _orphaned(agent, "m-dead"), "m-dead's lease to expire again")
    dead = await resume(agent, "m-dead", lease_seconds=LEASE, wait=5)  # past the limit: a dead letter
    assert dead.code == "recovery_exhausted"
    running = await hang(agent, "m-running")
    try:
        text = (await kit.telemetry.registry.exposition()).decode()
        assert "# TYPE agentmw_executions gauge" in text
        assert "# TYPE agentmw_execution_takeovers_total counter" in text
        counts = {
            s: prometheus(text, "agentmw_executions", f'{{status="{s}"}}')
            for s in ("running", "parked", "dead")
        }
        assert counts == {"running": 1, "parked": 1, "dead": 1}
        grown = {name: prometheus(text, name) - value for name, value in before.items()}
        assert grown == {
            "agentmw_execution_takeovers_total": 1,
            "agentmw_execution_dead_letters_total": 1,
            "agentmw_step_retries_total": 2,
            "agentmw_steps_given_up_total": 0,
        }

        # the same through the OpenTelemetry SDK (the gauge as last counted: the scrape above counted it)
        by_status = {
            p.attributes["agentmw.execution.status"]: p.value for p in kit.metric("agentmw.executions")
        }
        assert by_status == {"running": 1, "parked": 1, "dead": 1}
        assert (
            otel_total(kit, "agentmw.execution.takeovers") == before["agentmw_execution_takeovers_total"] + 1
        )
        assert (
            otel_total(kit, "agentmw.execution.dead_letters")
            == before["agentmw_execution_dead_letters_total"] + 1
        )
        assert otel_total(kit, "agentmw.step.retries") == before["agentmw_step_retries_total"] + 2
        assert otel_total(kit, "agentmw.step.given_up") == before["agentmw_steps_given_up_total"]
    finally:
        await die(running)

    # a count refreshed without a scrape (an invocation's end does it, at most every few seconds)
    assert (await start(agent, "order", "m-parked-2")).status == "needs_input"
    await kit.telemetry.refresh_executions()
    by_status = {p.attributes["agentmw.execution.status"]: p.value for p in kit.metric("agentmw.executions")}
    assert by_status["parked"] == 2
