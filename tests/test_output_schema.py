"""Output schemas are enforced: a return value that breaks the declared type is a tool error, on every face."""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from pydantic import BaseModel
from starlette.applications import Starlette

from agentmw import Agent, AgentMiddleware, Context, skill
from agentmw.testing import McpTestClient
from tests.test_agui_wire import frames, run_body

MISMATCH = "does not match the declared output type"


class Budget(BaseModel):
    department: str
    total: float
    spent: float


@dataclass
class Point:
    x: int
    y: int


def build() -> Starlette:
    agent = Agent("outputs")

    @agent.tool
    async def forgot_to_return(department: str) -> Budget:
        """Declares a model and returns nothing (the docs' old snippet)."""

    @agent.tool
    async def wrong_shape(department: str) -> Budget:
        """Returns an object with a field of the wrong type."""
        return {"department": department, "total": "a lot", "spent": 1.0}  # type: ignore[return-value]

    @agent.tool
    async def as_dict(department: str) -> Budget:
        """A dict that fits the model is served, as FastAPI serves a response_model."""
        return {"department": department, "total": 10, "spent": 1.5}  # type: ignore[return-value]

    @agent.tool
    async def budget(department: str) -> Budget:
        return Budget(department=department, total=10.0, spent=2.5)

    @agent.tool
    def count(items: str) -> int:
        """A primitive: the wrong type is refused too."""
        return None if items == "none" else len(items.split(","))  # type: ignore[return-value]

    @agent.tool
    def points(n: int) -> list[Point]:
        return [Point(i, i) for i in range(n)] + ([None] if n > 2 else [])  # type: ignore[list-item]

    @agent.tool
    def maybe(found: bool) -> Budget | None:
        """``None`` is allowed when the declared type allows it."""
        return Budget(department="d", total=1.0, spent=0.0) if found else None

    @skill
    async def plan(text: str, ctx: Context) -> Budget:
        """A skill that declares a model and returns nothing."""
        await ctx.say("planning")

    agent.include(plan)
    app = Starlette()
    app.add_middleware(AgentMiddleware, agent=agent)
    return app


@pytest.fixture
def app() -> Starlette:
    return build()


def official(app: Starlette, mode: str) -> Client:
    http = httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url="http://127.0.0.1:8000")
    return Client(
        streamable_http_client("http://127.0.0.1:8000/mcp", http_client=http), mode=mode, cache=None
    )


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_the_official_client_gets_a_tool_error_not_a_runtime_error(app, mode: str, caplog) -> None:
    caplog.set_level(logging.WARNING, logger="agentmw")
    async with official(app, mode) as client:
        result = await client.call_tool("forgot_to_return", {"department": "engineering"})
        assert result.is_error is True
        assert result.structured_content is None
        text = result.content[0].text
        assert f"The return value of forgot_to_return {MISMATCH} Budget" in text
        assert "repeating the same call will not help" in text
        good = await client.call_tool("budget", {"department": "design"})
        assert good.is_error is False
        assert good.structured_content == {"department": "design", "total": 10.0, "spent": 2.5}
    [record] = [r for r in caplog.records if "forgot_to_return" in r.getMessage()]
    assert record.levelno == logging.WARNING and record.exc_info is None
    assert MISMATCH in record.getMessage()


async def test_every_declared_type_is_checked(app) -> None:
    async with McpTestClient(app) as mcp:
        wrong = await mcp.call_tool("wrong_shape", {"department": "x"})
        assert wrong["isError"] is True and "structuredContent" not in wrong
        assert "total: Input should be a valid number" in wrong["content"][0]["text"]
        fitted = await mcp.call_tool("as_dict", {"department": "x"})
        assert fitted["isError"] is False
        assert fitted["structuredContent"] == {"department": "x", "total": 10.0, "spent": 1.5}
        assert (await mcp.call_tool("count", {"items": "a,b"}))["structuredContent"] == {"result": 2}
        none = await mcp.call_tool("count", {"items": "none"})
        assert none["isError"] is True and f"{MISMATCH} int" in none["content"][0]["text"]
        assert (await mcp.call_tool("points", {"n": 2}))["structuredContent"] == {
            "result": [{"x": 0, "y": 0}, {"x": 1, "y": 1}]
        }
        broken = await mcp.call_tool("points", {"n": 3})
        assert broken["isError"] is True and f"{MISMATCH} list[Point]" in broken["content"][0]["text"]
        assert "3:" in broken["content"][0]["text"], "the message says which element is wrong"
        assert (await mcp.call_tool("maybe", {"found": False}))["structuredContent"] == {"result": None}
        assert (await mcp.call_tool("maybe", {"found": True}))["isError"] is False


async def test_a2a_and_agui_get_the_failure_outcome(app) -> None:
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1:8000", timeout=10
    ) as client:
        message = {
            "messageId": str(uuid.uuid4()),
            "role": "ROLE_USER",
            "parts": [{"text": "next quarter"}],
            "metadata": {"skill": "plan"},
        }
        reply = (
            await client.post(
                "/a2a",
                headers={"a2a-version": "1.0"},
                json={"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}},
            )
        ).json()
        status = reply["result"]["task"]["status"]
        assert status["state"] == "TASK_STATE_FAILED"
        assert MISMATCH in status["message"]["parts"][0]["text"]
        assert not reply["result"]["task"].get("artifacts")
        body = run_body("t-out", "r-out", "next quarter")
        events = frames((await client.post("/agui/plan", json=body)).text)
        assert events[-1]["type"] == "RUN_ERROR" and events[-1]["code"] == "FAILED"
        assert MISMATCH in events[-1]["message"]


def test_the_check_is_built_at_registration() -> None:
    agent = Agent()

    @agent.tool
    def get(department: str) -> Budget:
        return Budget(department=department, total=1.0, spent=0.0)

    plan = agent.tools["get"].output
    assert plan.adapter is not None and plan.declared == "Budget"
    instance = Budget(department="d", total=1.0, spent=0.0)
    assert plan.structured(instance) == {"department": "d", "total": 1.0, "spent": 0.0}
