"""The agent of the durable-sleep restart test (``tests/test_durable_sleep_restart.py``), served by real ``uvicorn``
processes on one store (``$AGENTMW_STORE``): a skill that takes a step, sleeps durably (``ctx.sleep``) and answers
when, and in which process, it woke. A2A's leases and sweeps are short here, so a take-over happens in a test's time.
"""

from __future__ import annotations

import os
import time
from typing import Any

from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route

import agentmw.a2a.registry as a2a_registry
from agentmw import Agent, AgentMiddleware, Context

a2a_registry.HEARTBEAT_SECONDS = 2.0
a2a_registry.LEASE_SECONDS = 2.0
a2a_registry.SWEEP_SECONDS = 0.5
a2a_registry.RETRY_TAKE_OVER_SECONDS = 0.5

agent = Agent("sleepy")


def _pid() -> int:
    return os.getpid()


@agent.skill
async def nap(seconds: float, ctx: Context) -> dict[str, Any]:
    """A step, a durable sleep of ``seconds``, then when and where it woke.

    Summary:
        Sleeps, durably.
    """
    began = await ctx.once("began", _pid)
    await ctx.sleep(seconds)
    return {"began": began, "woke": time.time(), "pid": os.getpid()}


async def health(_: Any) -> JSONResponse:
    return JSONResponse({"ok": True, "pid": os.getpid()})


app = Starlette(routes=[Route("/health", health)])
app.add_middleware(AgentMiddleware, agent=agent)
