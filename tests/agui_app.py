"""Skills for the AG-UI tests: streamed text, steps and tool calls, state, approvals, errors, long work."""

from __future__ import annotations

import asyncio

from starlette.applications import Starlette

from agentmw import Agent, AgentMiddleware, Context, tool

log: list[str] = []


@tool
async def lookup(sku: str) -> dict:
    """Look up a SKU."""
    if sku == "missing":
        raise KeyError(sku)
    return {"sku": sku, "price": 449.0}


def build(**settings: object) -> tuple[Agent, Starlette]:
    agent = Agent("agui-test", **settings)  # type: ignore[arg-type]
    agent.include(lookup)

    @agent.skill
    async def chat(text: str):
        """Stream a reply word by word."""
        for word in f"You said: {text}".split(" "):
            yield word + " "

    @agent.skill(tools=(lookup,))
    async def planner(text: str, ctx: Context) -> str:
        """Plan a purchase: steps, reasoning, tool calls and shared state."""
        async with ctx.step("look up"):
            await ctx.reason("I should price the monitor first.")
            found = await ctx.call("lookup", {"sku": "MON-27"})
            try:
                await ctx.call("lookup", {"sku": "missing"})
            except Exception:  # noqa: BLE001 - the skill reports any failed lookup in words
                await ctx.say("One SKU was not found. ")
        ctx.state["cart"] = [found]
        await ctx.progress(1, 1, "priced")
        ctx.state["total"] = found["price"]
        return f"Total: {found['price']:.2f}"

    @agent.skill
    async def approval(item: str, ctx: Context) -> str:
        """Ask for approval of the exact action."""
        log.append(f"approval:{item}:asked")
        ok = await ctx.confirm(f"Buy {item} for 449.00?", details={"function": "buy", "item": item})
        log.append(f"approval:{item}:{'yes' if ok else 'no'}")
        return f"{item}: {'bought' if ok else 'not bought'}"

    @agent.skill
    async def boom(text: str) -> str:
        """Always fails."""
        raise RuntimeError("kaboom with secrets")

    @agent.skill
    async def slow(text: str, ctx: Context) -> str:
        """Report progress, then wait until canceled."""
        log.append(f"slow:{text}:started")
        await ctx.progress(1, 2, "waiting")
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            log.append(f"slow:{text}:cancelled")
            raise
        return "finished"

    @agent.skill
    async def flood(count: int, ctx: Context) -> str:
        """Stream ``count`` text deltas."""
        for i in range(count):
            await ctx.say(f"{i} ")
        return "done"

    app = Starlette()
    app.add_middleware(AgentMiddleware, agent=agent)
    return agent, app
