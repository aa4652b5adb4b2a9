"""A small agent that lints clean: a quick tool, a slow one with progress, a skill that asks, one that holds until a
test releases it (for cancels and reconnects), and a plain chat skill; served by a FastAPI app."""

from __future__ import annotations

import asyncio

from fastapi import FastAPI

from agentmw import Agent, AgentMiddleware, Context, skill, tool

log: list[str] = []
release: dict[str, asyncio.Event] = {}
"""Per label, the event a ``hold`` run waits for; a test sets it to let the run finish."""


@tool(read_only=True, open_world=False)
async def add(a: int, b: int) -> int:
    """Add two integers and return their sum.

    Summary:
        Does exact integer arithmetic, for sums a model should not guess.
    """
    return a + b


@tool(read_only=True, open_world=False)
async def slow_count(steps: int, ctx: Context, pause: float = 0.4) -> int:
    """Count to `steps`, pausing between steps and reporting progress after each one.

    Summary:
        A deliberately slow job, to watch progress reports arrive.
    """
    for step in range(1, steps + 1):
        await ctx.progress(step, steps, f"step {step}")
        await asyncio.sleep(pause)
    return steps


@skill(tags=("approval",))
async def approve(item: str, ctx: Context) -> str:
    """Ask a person to approve buying one item, then report the decision.

    Summary:
        Gets a purchase decided by a person; waits for their answer.
    """
    answer = await ctx.ask(
        f"Approve {item}?",
        {"type": "object", "properties": {"approved": {"type": "boolean"}}, "required": ["approved"]},
    )
    approved = answer.accepted and (answer.content or {}).get("approved") is True
    return f"{item}: {'approved' if approved else 'declined'}"


@skill
async def hold(label: str, ctx: Context) -> str:
    """Report that it started, then wait until released (or cancelled).

    Summary:
        A long job that can be cancelled, or followed again after a disconnect.
    """
    event = release.setdefault(label, asyncio.Event())
    log.append(f"{label}:started")
    await ctx.progress(1, 2, "waiting")
    try:
        await asyncio.wait_for(event.wait(), 30)
    except asyncio.CancelledError:
        log.append(f"{label}:cancelled")
        raise
    await ctx.say(f"{label} released")
    return f"{label}: done"


@skill
async def chat(text: str) -> str:
    """Answer a message by repeating it.

    Summary:
        Echoes a conversation turn, for trying a front end.
    """
    return f"You said: {text}"


def build() -> tuple[Agent, FastAPI]:
    """A fresh agent and app (a factory, as ``agentmw inspect tests.cli_apps.demo_app:build`` calls it)."""
    fresh = FastAPI()

    @fresh.get("/health")
    def health() -> dict[str, str]:
        return {"status": "ok"}

    made = Agent(
        "demo",
        "1.0.0",
        include=[add, slow_count, approve, hold, chat],
        instructions="A demo agent for the CLI tests.",
    )
    fresh.add_middleware(AgentMiddleware, agent=made)
    return made, fresh


agent, app = build()
