"""The durable-execution toolkit as a function sees it (docs/context.md): ``ctx.once(..., retry=...)``,
``ctx.call(..., retry=...)``, durable ``ctx.sleep`` / ``ctx.sleep_until``, the recorded ``ctx.now()`` and
``ctx.uuid()``, and ``ctx.patched()``; with and without a journal, on a real SQLite file."""

from __future__ import annotations

import asyncio
import functools
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest

from agentmw import Agent, Context
from agentmw.errors import Permanent, Retryable
from agentmw.journal import Journal, resume
from agentmw.retries import RetryPolicy, StepFailed
from agentmw.runtime import invoke
from agentmw.state import SQLiteState
from tests.helpers.channels import Parking
from tests.waiting import eventually

FAST = RetryPolicy(attempts=3, initial_interval=0.0)
calls: dict[str, int] = {}
seen: dict[str, Any] = {}


def flaky(name: str, failures: int, error: type[Exception] = ConnectionError) -> str:
    """Fails ``failures`` times (per name), then answers."""
    calls[name] = calls.get(name, 0) + 1
    if calls[name] <= failures:
        raise error(f"{name} try {calls[name]} failed")
    return f"{name} ok after {calls[name]}"


def make_agent(store: Any) -> Agent:
    agent = Agent("toolkit-test", store=store)

    @agent.tool
    def backend(fail: int, kind: str = "retryable") -> str:
        """A tool that fails ``fail`` times, retryably or permanently."""
        calls["backend"] = calls.get("backend", 0) + 1
        if calls["backend"] <= fail:
            if kind == "permanent":
                raise Permanent("the card was declined")
            raise Retryable("busy", retry_after=0.01)
        return f"served on try {calls['backend']}"

    @agent.tool
    async def charge(fail: int, ctx: Context) -> dict[str, Any]:
        """A flaky step with a retry policy, then a question (so that a resume replays it)."""
        receipt = await ctx.once("charge", flaky, "charge", fail, retry=FAST)
        answer = await ctx.ask("Ship it?", {"type": "object", "properties": {"ok": {"type": "boolean"}}})
        return {"receipt": receipt, "ok": answer.accepted}

    @agent.tool
    async def charge_or_say(fail: int, ctx: Context) -> dict[str, Any]:
        """A step that may fail for good, caught by the function, then a question."""
        try:
            receipt = await ctx.once("charge", flaky, "charge", fail, retry=FAST)
        except StepFailed as exc:
            receipt = f"gave up: {exc.attempts} {exc.cause_type} {exc.cause_message}"
        await ctx.ask("Go on?")
        return {"receipt": receipt}

    @agent.tool
    async def uncaught(ctx: Context) -> str:
        """A step that fails for good, not caught."""
        return str(await ctx.once("charge", flaky, "charge", 9, retry=FAST))

    @agent.tool
    async def calling(fail: int, kind: str, ctx: Context) -> dict[str, Any]:
        """A sub-call with a retry policy, then a question."""
        value = await ctx.call("backend", {"fail": fail, "kind": kind}, retry=FAST)
        await ctx.ask("Done?")
        return {"value": value}

    @agent.tool
    async def clocked(ctx: Context) -> dict[str, Any]:
        """Reads the recorded clock and uuid twice, asks, and returns them."""
        first, token, second, other = await ctx.now(), await ctx.uuid(), await ctx.now(), await ctx.uuid()
        seen.setdefault("runs", []).append((first, token, second, other))
        await ctx.ask("Keep?")
        return {"first": first.isoformat(), "token": str(token), "second": second.isoformat()}

    @agent.tool
    async def sleeper(seconds: float, ctx: Context) -> str:
        """Sleeps durably, then asks."""
        seen["started"] = time.time()
        seen.setdefault("reached", asyncio.Event()).set()
        began = time.monotonic()
        await ctx.sleep(seconds)
        seen.setdefault("slept", []).append(time.monotonic() - began)
        seen.setdefault("woke", []).append(time.time())
        await ctx.ask("Awake?")
        return "slept"

    @agent.tool
    async def until(ctx: Context) -> str:
        """Sleeps until a recorded time a moment from now, then asks."""
        await ctx.sleep_until(await ctx.now() + timedelta(seconds=0.3))
        seen.setdefault("woke", []).append(time.time())
        await ctx.ask("Awake?")
        return "slept"

    @agent.tool
    async def versioned(ctx: Context) -> str:
        """Takes a path by patch once the test says the patch exists."""
        path = "old"
        if seen.get("patch") and ctx.patched("fee-v2"):
            path = "new"
        await ctx.ask("Confirm?")
        return path

    return agent


@pytest.fixture(autouse=True)
def _reset() -> None:
    calls.clear()
    seen.clear()


@pytest.fixture
async def agent(tmp_path: Path) -> Any:
    store = SQLiteState(tmp_path / "toolkit.db")
    yield make_agent(store)
    await store.close()


async def start(agent: Agent, tool: str, arguments: dict[str, Any], execution_id: str) -> Any:
    cap = agent.tools[tool]
    ctx = Context(cap, Parking(), caller="alice", agent=agent, face="test")
    return await invoke(cap, arguments, ctx, journal=Journal.for_agent(agent, execution_id))


async def steps(agent: Agent, execution_id: str) -> list[dict[str, Any]]:
    journal = await Journal.load(agent.state, execution_id)
    assert journal is not None
    return list(journal.steps)


def bare(agent: Agent, tool: str) -> Context:
    ctx = Context(agent.tools[tool], agent=agent)
    ctx.invoker = invoke
    return ctx


# --- ctx.once(..., retry=) ----------------------------------------------------------------------------------


async def test_a_retried_step_is_recorded_once_with_its_tries(agent: Agent) -> None:
    first = await start(agent, "charge", {"fail": 2}, "r1")
    assert first.status == "needs_input"
    assert calls == {"charge": 3}
    step = next(s for s in await steps(agent, "r1") if s.get("k") == "charge")
    assert step.get("n") == 3
    done = await resume(agent, "r1", answers={"ask-1": {"ok": True}})
    assert done.status == "completed"
    assert done.value == {"receipt": "charge ok after 3", "ok": True}
    assert calls == {"charge": 3}  # the replay returned the recorded result: no try again


async def test_a_step_that_fails_for_good_is_recorded_and_replays_as_failed(agent: Agent) -> None:
    first = await start(agent, "charge_or_say", {"fail": 9}, "r2")
    assert first.status == "needs_input" and calls == {"charge": 3}
    done = await resume(agent, "r2", answers={"ask-1": {}})
    assert done.status == "completed"
    assert done.value == {"receipt": "gave up: 3 ConnectionError charge try 3 failed"}
    assert calls == {"charge": 3}  # the replay raised the recorded failure without running the step


async def test_an_uncaught_step_failure_fails_the_call_without_its_internals(agent: Agent) -> None:
    outcome = await start(agent, "uncaught", {}, "r3")
    assert outcome.status == "failed" and not outcome.retryable
    assert outcome.message == "step 'charge' failed after 3 attempts (ConnectionError)"
    assert calls == {"charge": 3}


async def test_without_a_journal_the_policy_applies_directly(agent: Agent) -> None:
    ctx = bare(agent, "charge")
    assert await ctx.once("a", flaky, "a", 2, retry=FAST) == "a ok after 3"
    with pytest.raises(StepFailed) as failed:
        await ctx.once("b", flaky, "b", 5, retry=FAST)
    assert failed.value.attempts == 3 and isinstance(failed.value.__cause__, ConnectionError)
    with pytest.raises(StepFailed):  # a non-retryable type ends it at once
        await ctx.once("c", flaky, "c", 5, KeyError, retry=RetryPolicy(attempts=5, non_retryable=(KeyError,)))
    assert calls == {"a": 3, "b": 3, "c": 1}
    with pytest.raises(ConnectionError):  # no policy: as before, the error itself
        await ctx.once("d", flaky, "d", 1)


async def test_retry_is_ctx_onces_own_keyword_and_other_keywords_reach_the_function(agent: Agent) -> None:
    ctx = bare(agent, "charge")

    def greet(name: str, *, retry: int = 0, punctuation: str = ".") -> str:
        return f"hello {name}{punctuation} {retry}"

    assert await ctx.once("g", greet, "ann", punctuation="!") == "hello ann! 0"
    with pytest.raises(TypeError, match="functools.partial"):
        await ctx.once("g2", greet, "ann", retry=2)  # type: ignore[arg-type]
    assert await ctx.once("g3", functools.partial(greet, retry=2), "bob") == "hello bob. 2"
    with pytest.raises(ValueError, match="agentmw's own"):
        await ctx.once("agentmw.now:1", greet, "eve")


# --- ctx.call(..., retry=) ----------------------------------------------------------------------------------


async def test_a_retryable_sub_call_is_tried_again_and_recorded_once(agent: Agent) -> None:
    first = await start(agent, "calling", {"fail": 2, "kind": "retryable"}, "c1")
    assert first.status == "needs_input" and calls == {"backend": 3}
    step = next(s for s in await steps(agent, "c1") if s.get("t") == "call")
    assert step["ok"] is True and step.get("n") == 3
    done = await resume(agent, "c1", answers={"ask-1": {}})
    assert done.value == {"value": "served on try 3"} and calls == {"backend": 3}


async def test_a_permanent_sub_call_failure_is_not_retried(agent: Agent) -> None:
    outcome = await start(agent, "calling", {"fail": 1, "kind": "permanent"}, "c2")
    assert outcome.status == "failed" and not outcome.retryable
    assert calls == {"backend": 1}


async def test_a_sub_call_still_failing_after_its_tries_fails(agent: Agent) -> None:
    outcome = await start(agent, "calling", {"fail": 5, "kind": "retryable"}, "c3")
    assert outcome.status == "failed" and calls == {"backend": 3}


async def test_ctx_call_retries_without_a_journal(agent: Agent) -> None:
    ctx = bare(agent, "calling")
    assert await ctx.call("backend", {"fail": 1}, retry=FAST) == "served on try 2"
    calls.clear()
    with pytest.raises(Exception, match="the card was declined"):
        await ctx.call("backend", {"fail": 1, "kind": "permanent"}, retry=FAST)
    assert calls == {"backend": 1}
    calls.clear()
    with pytest.raises(Exception, match="busy"):
        await ctx.call("backend", {"fail": 1})  # no policy: one try
    with pytest.raises(TypeError, match="RetryPolicy"):
        await ctx.call("backend", {"fail": 0}, retry=3)  # type: ignore[arg-type]


# --- ctx.now(), ctx.uuid() ----------------------------------------------------------------------------------


async def test_now_and_uuid_are_recorded_and_replayed_identically(agent: Agent) -> None:
    first = await start(agent, "clocked", {}, "n1")
    assert first.status == "needs_input"
    done = await resume(agent, "n1", answers={"ask-1": {}})
    assert done.status == "completed"
    (a, b) = seen["runs"]
    assert a == b  # the replay saw the same times and uuids
    f, token, s, other = a
    assert f.tzinfo is UTC and isinstance(token, UUID) and token.version == 4 and token != other
    assert f <= s and abs((datetime.now(UTC) - f).total_seconds()) < 60
    names = [s["k"] for s in await steps(agent, "n1") if s.get("t") == "once"]
    assert names == ["agentmw.now:1", "agentmw.uuid:1", "agentmw.now:2", "agentmw.uuid:2"]


async def test_now_and_uuid_without_a_journal_are_fresh(agent: Agent) -> None:
    ctx = bare(agent, "clocked")
    assert (await ctx.now()).tzinfo is UTC
    assert await ctx.uuid() != await ctx.uuid()
    assert ctx.patched("anything") is True


# --- ctx.sleep, ctx.sleep_until -----------------------------------------------------------------------------


async def test_a_sleep_records_its_wake_time_and_a_replay_after_it_does_not_sleep(agent: Agent) -> None:
    before = time.time()
    first = await start(agent, "sleeper", {"seconds": 1.0}, "s1")
    assert first.status == "needs_input"
    (woke,) = seen["woke"]
    step = next(s for s in await steps(agent, "s1") if s.get("k") == "agentmw.sleep:1")
    wake = float(step["v"])
    assert before + 1.0 <= wake <= woke and seen["slept"][0] >= 0.9
    done = await resume(agent, "s1", answers={"ask-1": {}})
    assert done.status == "completed"
    assert len(seen["slept"]) == 2 and seen["slept"][1] < 0.5  # the wake time had passed: no second sleep


async def test_a_sleep_cut_short_by_a_dying_replica_sleeps_only_the_rest(agent: Agent) -> None:
    cap = agent.tools["sleeper"]
    journal = Journal(agent.state, "s2", lease_seconds=0.3)
    run = asyncio.create_task(
        invoke(cap, {"seconds": 4.0}, Context(cap, Parking(), agent=agent), journal=journal)
    )

    async def recorded() -> list[dict[str, Any]]:
        if await Journal.load(agent.state, "s2") is None:
            return []
        return [s for s in await steps(agent, "s2") if s.get("k") == "agentmw.sleep:1"]

    (step,) = await eventually(recorded, "the sleep's wake time to be recorded")
    wake = float(step["v"])
    await eventually(lambda: time.time() >= wake - 1.0, "3 of the 4 seconds to pass", timeout=10)
    run.cancel()  # the replica dies 3 s into the sleep
    with pytest.raises(asyncio.CancelledError):
        await run
    assert "woke" not in seen
    outcome = await resume(agent, "s2", wait=5)  # another replica takes it over once the lease expires
    assert outcome.status == "needs_input"
    (woke,) = seen["woke"]
    # at the recorded time (1 s after the take-over), not 4 s after it
    assert wake <= woke < wake + 1.5


async def test_sleep_until_a_recorded_time(agent: Agent) -> None:
    first = await start(agent, "until", {}, "s3")
    assert first.status == "needs_input"
    names = [s["k"] for s in await steps(agent, "s3") if s.get("t") == "once"]
    assert names == ["agentmw.now:1", "agentmw.sleep:1"]
    now_step, sleep_step = [s for s in await steps(agent, "s3") if s.get("t") == "once"]
    assert float(sleep_step["v"]) == pytest.approx(float(now_step["v"]) + 0.3)
    assert seen["woke"][0] >= float(sleep_step["v"])


async def test_sleep_refuses_what_is_not_a_duration(agent: Agent) -> None:
    ctx = bare(agent, "sleeper")
    for bad in (-1, float("nan"), "5", True):
        with pytest.raises(ValueError, match="ctx.sleep"):
            await ctx.sleep(bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="timezone-aware"):
        await ctx.sleep_until(datetime(2030, 1, 1))
    await ctx.sleep_until(datetime.now(UTC) - timedelta(seconds=5))  # past: at once
    await ctx.sleep(0)


# --- ctx.patched --------------------------------------------------------------------------------------------


async def test_a_patch_applies_to_new_executions_and_not_to_replays_of_older_ones(agent: Agent) -> None:
    old = await start(agent, "versioned", {}, "p-old")  # recorded before the patch existed
    assert old.status == "needs_input"
    seen["patch"] = True  # the deploy that adds ctx.patched("fee-v2")
    new = await start(agent, "versioned", {}, "p-new")
    assert new.status == "needs_input"
    assert any(s.get("t") == "patch" and s.get("k") == "fee-v2" for s in await steps(agent, "p-new"))
    replayed_old = await resume(agent, "p-old", answers={"ask-1": {}})
    replayed_new = await resume(agent, "p-new", answers={"ask-1": {}})
    assert (replayed_old.value, replayed_new.value) == ("old", "new")
