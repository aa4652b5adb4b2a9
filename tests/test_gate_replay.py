"""A gate's approval is a signed, single-use requestState issued to one caller (MCP 2026-07-28): answers without
their state are ignored, another caller's state is refused, and concurrent replays run the function once."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from starlette.applications import Starlette

from agentmw import Agent, AgentMiddleware, tool
from agentmw._bounded import BoundedTable, UsedTokens
from agentmw.safety import human_gate
from agentmw.safety.gate import arguments_hash
from agentmw.testing import McpError, McpTestClient

STATELESS = "2026-07-28"
CAPS = {"elicitation": {}}
effects: list[str] = []


def build() -> Starlette:
    agent = Agent("gate-replay")

    @tool
    @human_gate(side_effects="Sends money")
    async def pay(to: str, amount: int) -> str:
        """Pay someone."""
        await asyncio.sleep(0.01)  # I/O before the side effect: the window a late claim would leave open
        effects.append(f"pay:{to}:{amount}")
        return f"paid {amount} to {to}"

    agent.include(pay)
    app = Starlette()
    app.add_middleware(AgentMiddleware, agent=agent)
    return app


@pytest.fixture
def app() -> Starlette:
    effects.clear()
    return build()


def client(app: Starlette, who: str = "alice") -> McpTestClient:
    return McpTestClient(app, era=STATELESS, capabilities=CAPS, headers={"authorization": f"Bearer {who}"})


async def ask(mcp: McpTestClient, arguments: dict[str, Any]) -> tuple[str, str]:
    first = await mcp.call_tool("pay", arguments)
    assert first["resultType"] == "input_required"
    [key] = first["inputRequests"]
    return key, first["requestState"]


ACCEPT = {"action": "accept", "content": {"approved": True}}


async def test_answers_without_their_state_are_ignored_and_asked_again(app: Starlette) -> None:
    arguments = {"to": "mallory", "amount": 100}
    async with client(app) as mcp:
        key, state = await ask(mcp, arguments)
        done = await mcp.request(
            "tools/call",
            {"name": "pay", "arguments": arguments, "inputResponses": {key: ACCEPT}, "requestState": state},
        )
        assert done["content"][0]["text"] == "paid 100 to mallory"
        for _ in range(3):  # the same answer again, without the state: asked again, never run
            again = await mcp.request(
                "tools/call", {"name": "pay", "arguments": arguments, "inputResponses": {key: ACCEPT}}
            )
            assert again["resultType"] == "input_required" and key in again["inputRequests"]
    assert effects == ["pay:mallory:100"]


async def test_a_key_computed_from_the_arguments_cannot_answer_an_unasked_gate(app: Starlette) -> None:
    arguments = {"to": "eve", "amount": 5}
    guessed = {f"approve-{arguments_hash('pay', arguments)[:16]}": ACCEPT}  # what the server would ask
    async with client(app) as mcp:
        result = await mcp.request(
            "tools/call", {"name": "pay", "arguments": arguments, "inputResponses": guessed}
        )
        assert result["resultType"] == "input_required" and set(result["inputRequests"]) == set(guessed)
    assert effects == []


async def test_a_state_answers_only_the_questions_it_asked(app: Starlette) -> None:
    async with client(app) as mcp:
        _, state = await ask(mcp, {"to": "bob", "amount": 1})
        # a valid state for this call, but the answer is keyed to a question this state never asked
        result = await mcp.request(
            "tools/call",
            {
                "name": "pay",
                "arguments": {"to": "bob", "amount": 1},
                "inputResponses": {"approve-0000000000000000": ACCEPT},
                "requestState": state,
            },
        )
        assert result["resultType"] == "input_required"
    assert effects == []


async def test_another_callers_state_is_refused(app: Starlette) -> None:
    arguments = {"to": "carol", "amount": 7}
    async with client(app, "alice") as alice:
        key, state = await ask(alice, arguments)
    async with client(app, "bob") as bob:
        with pytest.raises(McpError) as refused:
            await bob.request(
                "tools/call",
                {
                    "name": "pay",
                    "arguments": arguments,
                    "inputResponses": {key: ACCEPT},
                    "requestState": state,
                },
            )
        assert refused.value.code == -32602 and "another caller" in refused.value.message
    async with client(app, "alice") as alice:  # bob's attempt did not use it up
        done = await alice.request(
            "tools/call",
            {"name": "pay", "arguments": arguments, "inputResponses": {key: ACCEPT}, "requestState": state},
        )
        assert done["content"][0]["text"] == "paid 7 to carol"
    assert effects == ["pay:carol:7"]


async def test_concurrent_replays_of_one_state_run_once(app: Starlette) -> None:
    arguments = {"to": "dave", "amount": 9}
    async with client(app) as mcp:
        key, state = await ask(mcp, arguments)
        retry = {
            "name": "pay",
            "arguments": arguments,
            "inputResponses": {key: ACCEPT},
            "requestState": state,
        }

        async def attempt() -> str:
            try:
                result = await mcp.request("tools/call", retry)
            except McpError as exc:
                assert exc.code == -32602 and "already used" in exc.message
                return "refused"
            assert result["content"][0]["text"] == "paid 9 to dave"
            return "ran"

        outcomes = await asyncio.gather(*(attempt() for _ in range(5)))
    assert sorted(outcomes) == ["ran", "refused", "refused", "refused", "refused"]
    assert effects == ["pay:dave:9"]


def test_claim_is_set_if_absent_with_expiry() -> None:
    now = [1000.0]
    table: BoundedTable[str, int] = BoundedTable(10, 5.0, clock=lambda: now[0])
    assert table.put_if_absent("k", 1) is True
    assert table.put_if_absent("k", 2) is False and table["k"] == 1
    now[0] += 6  # expired: the key can be claimed again
    assert table.put_if_absent("k", 3) is True and table["k"] == 3
    tokens = UsedTokens(60.0, 10, lambda token: None)
    assert tokens.claim("s") is True
    assert tokens.claim("s") is False and tokens.seen("s")
