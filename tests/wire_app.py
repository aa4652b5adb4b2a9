"""A small agent for wire-level tests: a header-mirrored argument and a slow, cancellable tool."""

from __future__ import annotations

from typing import Annotated

import anyio
from pydantic import Field
from starlette.applications import Starlette

from agentmw import Agent, AgentMiddleware, Context

agent = Agent("wire-test", allowed_hosts=["api.example.com"])
events: dict[str, anyio.Event] = {}
log: list[str] = []


@agent.tool
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@agent.tool
async def regional(
    region: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})], n: int = 1
) -> str:
    """Echo the region, which proxies can route on."""
    return f"{region}:{n}"


@agent.tool
async def slow(ctx: Context, tag: str = "slow") -> str:
    """Report progress, then wait until cancelled (or released by the test)."""
    events.setdefault(tag, anyio.Event())
    log.append(f"{tag}:started")
    await ctx.progress(1, 2, "waiting")
    try:
        await events[tag].wait()
    except anyio.get_cancelled_exc_class():  # only a cancellation is logged as one, never another error
        log.append(f"{tag}:cancelled")
        raise
    log.append(f"{tag}:finished")
    return "released"


app = Starlette()
app.add_middleware(AgentMiddleware, agent=agent)


@agent.prompt
def greet(name: str) -> str:
    """Greet someone."""
    return f"Hello {name}"


@agent.resource("wire://status", mime_type="text/plain")
def status() -> str:
    """A resource clients can subscribe to."""
    return "ok"
