"""The pipeline (``agentmw.pipeline``): which stages a capability gets, assembled once, and in which order they
act. No server: calls go through ``invoke`` with a plain context."""

from __future__ import annotations

from typing import Any

import pytest

from agentmw import Agent, Context
from agentmw.observability.hooks import Hook, Invocation
from agentmw.outcomes import Code, Outcome, Status
from agentmw.runtime import invoke, pipeline_of
from agentmw.safety import human_gate
from agentmw.safety.roots import RootedPath

ran: list[str] = []


@pytest.fixture(autouse=True)
def _reset() -> None:
    ran.clear()


def _agent(*, full: bool = False) -> Agent:
    """An agent with nothing configured; ``full``: with a tool that asks for everything (a scope makes the agent
    check access for all its capabilities)."""
    agent = Agent("pipeline", roots=["/srv/data"])

    @agent.tool(read_only=True)
    async def lookup(sku: str) -> str:
        """Reads."""
        ran.append("lookup")
        return sku

    @agent.tool
    async def order(sku: str) -> str:
        """Writes."""
        ran.append("order")
        return f"ordered {sku}"

    if full:

        @agent.tool(untrusted=True, scopes=["files:read"])
        @human_gate(side_effects="reads a file")
        async def read(path: RootedPath) -> str:
            """Everything at once."""
            ran.append("read")
            return path

    return agent


def test_a_direct_call_is_validated_and_run_nothing_else() -> None:
    agent = _agent()
    assert pipeline_of(agent.tools["lookup"]).stages == ("validate", "run")


def test_a_plain_tool_of_an_agent_gets_the_fewest_stages() -> None:
    agent = _agent()
    assert pipeline_of(agent.tools["lookup"], agent).stages == ("validate", "in_flight", "run")
    # a tool with side effects may be called with an idempotency key: the stage is there for those calls
    assert pipeline_of(agent.tools["order"], agent).stages == ("validate", "idempotency", "in_flight", "run")


def test_a_fully_configured_tool_gets_every_stage_in_order() -> None:
    agent = _agent(full=True)
    agent.use(Hook())
    assert pipeline_of(agent.tools["read"], agent).stages == (
        "validate",
        "hooks",
        "access",
        "idempotency",
        "framing",
        "in_flight",
        "roots",
        "gate",
        "run",
    )


def test_the_pipeline_is_assembled_once_and_again_when_the_agent_changes() -> None:
    agent = _agent()
    lookup = agent.tools["lookup"]
    first = pipeline_of(lookup, agent)
    assert pipeline_of(lookup, agent) is first
    agent.use(Hook())  # hooks added after the first call: the next call has them
    again = pipeline_of(lookup, agent)
    assert again is not first and again.stages[:2] == ("validate", "hooks")


async def test_invoke_assembles_the_pipeline_at_the_first_call() -> None:
    agent = _agent()
    lookup = agent.tools["lookup"]
    assert lookup.pipeline is None
    outcome = await invoke(lookup, {"sku": "A1"}, Context(lookup, agent=agent))
    assert outcome.status is Status.COMPLETED and outcome.value == "A1"
    assert lookup.pipeline is not None and lookup.pipeline.stages == ("validate", "in_flight", "run")


async def test_invalid_arguments_stop_at_validation() -> None:
    agent = _agent()
    lookup = agent.tools["lookup"]
    outcome = await invoke(lookup, {"sku": 3}, Context(lookup, agent=agent))
    assert outcome.status is Status.REJECTED and outcome.code == Code.INVALID_ARGUMENTS
    assert ran == []


async def test_roots_refuse_before_the_gate_asks_anyone() -> None:
    agent = _agent(full=True)
    read = agent.tools["read"]

    class Stages(Hook):
        def __init__(self) -> None:
            self.seen: list[str] = []

        def stage(self, invocation: Invocation, name: str, attributes: Any) -> None:
            self.seen.append(name)

    stages = Stages()
    agent.use(stages)  # a call without an HTTP request was authorized where it started: access lets it pass
    outcome = await invoke(read, {"path": "/etc/passwd"}, Context(read, agent=agent))
    assert outcome.status is Status.REJECTED and outcome.code == Code.ROOT_VIOLATION
    assert "agentmw.roots.refused" in stages.seen
    assert not any(name.startswith("agentmw.gate") for name in stages.seen)
    assert ran == []


async def test_the_in_flight_cap_refuses_a_call_past_it() -> None:
    agent = _agent()
    lookup = agent.tools["lookup"]
    lookup.max_in_flight = 0
    outcome = await invoke(lookup, {"sku": "A1"}, Context(lookup, agent=agent))
    assert outcome.status is Status.FAILED and outcome.code == Code.BUSY and outcome.retryable
    assert ran == []


async def test_a_repeated_key_returns_the_first_outcome_without_running_again() -> None:
    agent = _agent()
    order = agent.tools["order"]
    first = await invoke(order, {"sku": "A1"}, Context(order, agent=agent), idempotency_key="k1")
    again = await invoke(order, {"sku": "A1"}, Context(order, agent=agent), idempotency_key="k1")
    assert first.value == again.value == "ordered A1"
    assert ran == ["order"]
    other = await invoke(order, {"sku": "B2"}, Context(order, agent=agent), idempotency_key="k1")
    assert other.status is Status.REJECTED and other.code == Code.IDEMPOTENCY_KEY_REUSED
    assert ran == ["order"]


async def test_a_hook_denial_wins_over_invalid_arguments() -> None:
    agent = _agent()
    lookup = agent.tools["lookup"]

    class Deny(Hook):
        async def before(self, invocation: Invocation) -> Outcome | None:
            return Outcome(status=Status.REJECTED, code=Code.FORBIDDEN, message="no")

    agent.use(Deny())
    outcome = await invoke(lookup, {"sku": 3}, Context(lookup, agent=agent))
    assert outcome.code == Code.FORBIDDEN and ran == []


async def test_ctx_call_goes_through_the_sub_call_s_own_pipeline() -> None:
    agent = _agent()

    @agent.tool
    async def outer(ctx: Context) -> str:
        """Calls another tool."""
        return str(await ctx.call("lookup", {"sku": "Z9"}))

    outer_cap = agent.tools["outer"]
    outcome = await invoke(outer_cap, {}, Context(outer_cap, agent=agent))
    assert outcome.value == "Z9" and ran == ["lookup"]
    assert agent.tools["lookup"].pipeline is not None


async def test_a_context_no_pipeline_ran_cannot_make_sub_calls() -> None:
    agent = _agent()
    ctx = Context(agent.tools["lookup"], agent=agent)
    with pytest.raises(RuntimeError, match="ctx.call"):
        await ctx.call("lookup", {"sku": "A1"})


def test_the_host_app_s_dependencies_get_their_stage_before_roots_and_gate() -> None:
    from fastapi import Header

    agent = _agent()

    @agent.tool
    async def whoami(x_user: str = Header()) -> str:
        """Reads a header."""
        return x_user

    assert pipeline_of(agent.tools["whoami"], agent).stages == (
        "validate",
        "idempotency",
        "in_flight",
        "host",
        "run",
    )
