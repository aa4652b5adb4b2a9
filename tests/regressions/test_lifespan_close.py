"""A server that sends lifespan events has the agent hand its work over at shutdown (``Agent.aclose``), before
the host app hears of the shutdown; the host's own lifespan still runs, and no lifespan is needed."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from starlette.applications import Starlette

from agentmw import Agent, AgentMiddleware


def test_lifespan_shutdown_closes_the_agent_before_the_host_app() -> None:
    order: list[str] = []

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        order.append("host started")
        yield
        order.append("host stopped")

    agent = Agent("lifespan")
    closing = agent.aclose

    async def aclose() -> None:
        order.append("agent closed")
        await closing()

    agent.aclose = aclose  # type: ignore[method-assign]
    app = AgentMiddleware(Starlette(lifespan=lifespan), agent=agent)
    sent: list[dict[str, Any]] = []

    async def run() -> None:
        inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        await inbox.put({"type": "lifespan.startup"})
        await inbox.put({"type": "lifespan.shutdown"})

        async def send(message: Any) -> None:
            sent.append(dict(message))

        await app({"type": "lifespan", "asgi": {"version": "3.0"}}, inbox.get, send)

    asyncio.run(run())
    assert order == ["host started", "agent closed", "host stopped"]
    assert [m["type"] for m in sent] == ["lifespan.startup.complete", "lifespan.shutdown.complete"]
