"""The app tests/test_shutdown.py serves with uvicorn in a subprocess: capabilities that wait, on every face.

- ``approve`` (a skill) asks a person: over A2A the task parks in ``INPUT_REQUIRED``; over AG-UI the run ends
  with an interrupt and the coroutine stays parked.
- ``confirm_order`` (a tool) asks over MCP: in the handshake era the call waits on ``elicitation/create``.
- ``wait`` (a skill) reports progress, then waits until the process ends: a live AG-UI run to follow.

Run it with ``python -m uvicorn tests.shutdown_app:app`` from the repository root.
"""

from __future__ import annotations

import asyncio

from starlette.applications import Starlette

from agentmw import Agent, AgentMiddleware, Context
from agentmw.a2a import A2ASettings

agent = Agent("shutdown-test", "0.0.1", a2a=A2ASettings(description="Waits on every face", push=None))


@agent.skill
async def approve(item: str, ctx: Context) -> str:
    """Ask a person to approve an item, and wait for the answer.

    Summary:
        Waits for a human decision.
    """
    answer = await ctx.ask(
        f"Approve {item}?",
        {"type": "object", "properties": {"approved": {"type": "boolean"}}, "required": ["approved"]},
    )
    return f"{item}: {'approved' if (answer.content or {}).get('approved') else 'declined'}"


@agent.tool
async def confirm_order(sku: str, ctx: Context) -> str:
    """Ask the user to confirm an order, and wait for the answer."""
    answer = await ctx.ask(
        f"Order {sku}?", {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
    )
    return f"{sku}: {answer.action}"


@agent.skill
async def wait(text: str, ctx: Context) -> str:
    """Report progress, then wait until the process ends.

    Summary:
        A run that never finishes by itself.
    """
    await ctx.progress(1, 2, "waiting")
    await asyncio.Event().wait()
    return "unreachable"


app = Starlette()
app.add_middleware(AgentMiddleware, agent=agent)
