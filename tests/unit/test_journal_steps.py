"""Journaled steps with a retry policy and the patch API, on the memory state (docs/durability.md): only the final
result of a retried step is recorded (with its attempts), a final failure is recorded and raised again by a
replay without running the step; ``ctx.patched`` is True for an execution that runs the new path fresh, and
False when it replays an execution recorded before the patch existed. Code versions are stamped."""

from __future__ import annotations

from typing import Any

import pytest

from agentmw import Agent, Context
from agentmw.errors import Retryable
from agentmw.journal import Journal, resume
from agentmw.retries import RetryPolicy, StepFailed
from agentmw.runtime import invoke
from agentmw.state import MemoryState
from tests.helpers.channels import Parking

FAST = RetryPolicy(attempts=4, initial_interval=0.0)
tries: dict[str, int] = {}
flags: dict[str, Any] = {}


def flaky(name: str, failures: int) -> str:
    tries[name] = tries.get(name, 0) + 1
    if tries[name] <= failures:
        raise ConnectionError(f"{name} down ({tries[name]})")
    return f"{name} ok after {tries[name]}"


def make_agent(state: MemoryState, code_version: str | None = None) -> Agent:
    agent = Agent("steps-test", store=state, code_version=code_version)

    @agent.tool
    async def fetch(ctx: Context) -> dict[str, Any]:
        """A flaky step with a policy, then a question."""
        got = await ctx.once("fetch", flaky, "fetch", flags.get("failures", 2), retry=FAST)
        await ctx.ask("go on?", key="go")
        return {"got": got}

    @agent.tool
    async def doomed(ctx: Context) -> str:
        """A step that never works: its failure is the step's result."""
        try:
            await ctx.once("pay", flaky, "pay", 99, retry=FAST)
        except StepFailed as failed:
            await ctx.ask("failed: retry by hand?", key="manual")
            return f"{failed.name}: {failed.attempts} {failed.cause_type} {failed.cause_message}"
        return "paid"

    @agent.tool
    def wobbly() -> str:
        """A sub-call target that fails retryably twice."""
        tries["wobbly"] = tries.get("wobbly", 0) + 1
        if tries["wobbly"] <= 2:
            raise Retryable("busy", retry_after=0.0)
        return "steady"

    @agent.tool
    async def calls(ctx: Context) -> str:
        """A sub-call with a policy, then a question."""
        value = await ctx.call("wobbly", {}, retry=FAST)
        await ctx.ask("done?", key="done")
        return str(value)

    @agent.tool
    async def fee(ctx: Context) -> str:
        """v1: charge, ask, ship. v2 adds a fee after the charge, behind a patch."""
        await ctx.once("charge", lambda: "charged")
        if flags.get("v2") and ctx.patched("fee"):
            await ctx.once("fee", lambda: "fee")
            path = "new"
        else:
            path = "old"
        await ctx.ask("ship?", key="ship")
        await ctx.once("ship", lambda: "shipped")
        return path

    return agent


@pytest.fixture(autouse=True)
def _reset() -> None:
    tries.clear()
    flags.clear()


async def start(agent: Agent, tool: str, execution_id: str) -> Any:
    cap = agent.tools[tool]
    ctx = Context(cap, Parking(), caller="alice", agent=agent, face="test")
    return await invoke(cap, {}, ctx, journal=Journal.for_agent(agent, execution_id))


async def steps(state: MemoryState, execution_id: str) -> list[dict[str, Any]]:
    journal = await Journal.load(state, execution_id)
    assert journal is not None
    return journal.steps


async def test_a_retried_step_records_its_final_result_and_attempts_once() -> None:
    state = MemoryState()
    agent = make_agent(state)
    parked = await start(agent, "fetch", "r1")
    assert parked.status == "needs_input" and tries == {"fetch": 3}
    [step, _ask] = await steps(state, "r1")
    assert step["k"] == "fetch" and step["v"] == "fetch ok after 3" and step["n"] == 3
    done = await resume(agent, "r1", answers={"go": {}})
    assert done.status == "completed" and done.value == {"got": "fetch ok after 3"}
    assert tries == {"fetch": 3}  # the replay neither tried again nor waited


async def test_a_final_failure_is_recorded_and_raised_again_without_running() -> None:
    state = MemoryState()
    agent = make_agent(state)
    parked = await start(agent, "doomed", "r2")
    assert parked.status == "needs_input" and tries == {"pay": 4}
    [step, _ask] = await steps(state, "r2")
    assert step["err"] == {"type": "ConnectionError", "message": "pay down (4)"} and step["n"] == 4
    done = await resume(agent, "r2", answers={"manual": {}})
    assert done.status == "completed" and done.value == "pay: 4 ConnectionError pay down (4)"
    assert tries == {"pay": 4}


async def test_a_sub_call_with_a_policy_records_its_last_outcome() -> None:
    state = MemoryState()
    agent = make_agent(state)
    parked = await start(agent, "calls", "r3")
    assert parked.status == "needs_input" and tries == {"wobbly": 3}
    [call, _ask] = await steps(state, "r3")
    assert call["t"] == "call" and call["ok"] is True and call["v"] == "steady" and call["n"] == 3
    done = await resume(agent, "r3", answers={"done": {}})
    assert done.status == "completed" and done.value == "steady" and tries == {"wobbly": 3}


async def test_a_patch_keeps_old_executions_on_the_old_path() -> None:
    state = MemoryState()
    v1 = make_agent(state, "v1")
    assert (await start(v1, "fee", "old-1")).status == "needs_input"  # parked on v1
    journal = await Journal.load(state, "old-1")
    assert journal is not None and journal.code_version == "v1"

    flags["v2"] = True  # the deploy of v2
    v2 = make_agent(state, "v2")
    replayed = await resume(v2, "old-1", answers={"ship": {}})
    assert replayed.status == "completed" and replayed.value == "old"  # no divergence, no fee
    assert [s["k"] for s in await steps(state, "old-1")] == ["charge", "ship", "ship"]

    assert (await start(v2, "fee", "new-1")).status == "needs_input"  # a fresh execution on v2
    assert [(s["t"], s["k"]) for s in await steps(state, "new-1")] == [
        ("once", "charge"),
        ("patch", "fee"),
        ("once", "fee"),
        ("ask", "ship"),
    ]
    fresh = await resume(v2, "new-1", answers={"ship": {}})
    assert fresh.status == "completed" and fresh.value == "new"  # its replay takes the new path again
    journal = await Journal.load(state, "new-1")
    assert journal is not None and journal.code_version == "v2"


async def test_a_format_1_record_is_read_and_moved_to_the_step_log() -> None:
    """A journal an older agentmw wrote (its steps in the record) replays, and its next write moves them."""
    from agentmw.journal import JOURNAL_NS, STEPS_NS

    state = MemoryState()
    agent = make_agent(state)
    run = {"kind": "tool", "name": "fee", "arguments": {}, "caller": "alice", "face": "test", "supports": []}
    steps = await steps_of_fresh(agent)  # the steps as this agentmw records them: charge, then the question
    assert [s["k"] for s in steps] == ["charge", "ship"]
    value = {"format": 1, "status": "parked", "run": run, "steps": steps, "delivered": 0, "owner": "old"}
    await state.put(JOURNAL_NS, "legacy-1", value, expected_version=None)
    journal = await Journal.load(state, "legacy-1")
    assert journal is not None and journal.steps == steps and journal.run == run
    done = await resume(agent, "legacy-1", answers={"ship": {}})
    assert done.status == "completed" and done.value == "old"
    found = await state.get(JOURNAL_NS, "legacy-1")
    assert found is not None and found.value["format"] == 2 and "steps" not in found.value
    assert found.value["stepCount"] == 3 and found.value["status"] == "completed"
    assert len(await state.read(STEPS_NS, "legacy-1", 0, 100)) >= 1
    again = await Journal.load(state, "legacy-1")
    assert again is not None and [s["k"] for s in again.steps] == ["charge", "ship", "ship"]
    assert again.run is not None and again.run["name"] == "fee"


async def steps_of_fresh(agent: Agent) -> list[dict[str, Any]]:
    assert (await start(agent, "fee", "fresh-for-legacy")).status == "needs_input"
    return await steps(agent.state, "fresh-for-legacy")  # type: ignore[arg-type]
