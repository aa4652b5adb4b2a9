"""An agent for the A2A tests: skills that echo, add, wait, ask, fail and reject, and callers told apart."""

from __future__ import annotations

import asyncio

from starlette.applications import Starlette
from starlette.requests import HTTPConnection

from agentmw import Agent, AgentMiddleware, Context, Rejected, Retryable, tool
from agentmw.a2a import A2ASettings, PushPolicy
from agentmw.identity import Unauthenticated

log: list[str] = []


def identify(connection: HTTPConnection) -> str | None:
    _scheme, _, token = connection.headers.get("authorization", "").partition(" ")
    if not token:
        return None
    if token == "bad":
        raise Unauthenticated("Invalid token")
    return token


@tool
async def multiply(a: int, b: int) -> int:
    """Multiply two integers."""
    return a * b


def build(store=None) -> tuple[Agent, Starlette]:
    agent = Agent(
        "a2a-test",
        "1.2.3",
        identify=identify,
        store=store,
        a2a=A2ASettings(
            description="Test agent",
            push=PushPolicy(allow_hosts=["127.0.0.1"], first_delay=0.05),
            security_schemes={"bearer": {"httpAuthSecurityScheme": {"scheme": "bearer"}}},
            security_requirements=[{"bearer": []}],
            extended_card=lambda who: (
                {"skills": [{"id": "admin", "name": "admin", "description": "Admin only", "tags": ["admin"]}]}
                if who == "admin"
                else None
            ),
        ),
    )
    agent.include(multiply)

    @agent.skill(tags=("test",), examples=("hello",))
    async def echo(text: str) -> str:
        """Echo text back.

        Summary:
            Repeats what it is told.
        """
        return f"echo: {text}"

    @agent.skill(tools=(multiply,))
    async def add(a: int, b: int) -> int:
        """Add two integers.

        Summary:
            Adds numbers; groups multiply.
        """
        return a + b

    @agent.skill
    async def slow(label: str, ctx: Context) -> str:
        """Report progress, then wait a long time.

        Summary:
            A long job that can be canceled.
        """
        log.append(f"{label}:started")
        await ctx.progress(1, 2, "halfway")
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            log.append(f"{label}:cancelled")
            raise
        return "done"

    @agent.skill
    async def approve(item: str, ctx: Context) -> str:
        """Ask a person to approve an item.

        Summary:
            Waits for a human decision.
        """
        answer = await ctx.ask(
            f"Approve {item}?",
            {"type": "object", "properties": {"approved": {"type": "boolean"}}, "required": ["approved"]},
        )
        approved = bool((answer.content or {}).get("approved"))
        return f"{item}: {'approved' if approved else 'declined'}"

    @agent.skill
    async def flaky(text: str) -> str:
        """Always busy.

        Summary:
            Fails in a retryable way.
        """
        raise Retryable("the ledger is busy", retry_after=3)

    @agent.skill
    async def picky(text: str) -> str:
        """Refuses everything.

        Summary:
            Rejects its input.
        """
        raise Rejected("this request is not acceptable")

    app = Starlette()
    app.add_middleware(AgentMiddleware, agent=agent)
    return agent, app
