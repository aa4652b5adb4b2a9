"""The agent the fault tests run as real ``uvicorn`` processes (``tests.faults.app:app``).

It keeps everything in ``$AGENTMW_STORE`` (a redis-server, an SQLite file) and serves, on every face:

- ``quick`` (skill and MCP tool, task optional): one journaled step (``ctx.once``), then its answer;
- ``ask`` (skill): a question (A2A ``INPUT_REQUIRED``, an AG-UI interrupt);
- ``gated`` (MCP tool): a question, in MCP 2026 an ``input_required`` round with a signed ``requestState``;
- ``poison`` (skill): a one-time step that kills its own process (``os._exit``), the poison pill;
- ``parked`` (skill): a step, a question, a step; what it does is ``$AGENTMW_FAULTS_VERSION``: ``v1`` (the first
  deploy), ``v2`` (a deploy that changed it: another step before the question) or ``gone`` (a deploy that removed
  it).

Callers are told apart by their bearer token (anonymous callers are never de-duplicated). With
``$AGENTMW_FAULTS_FAST`` set, the A2A heartbeats, leases and sweeps are short (seconds), so a take-over happens in
a test's time; ``$AGENTMW_FAULTS_MAX_RECOVERIES`` sets ``Limits.max_recovery_attempts``; ``$AGENTMW_FAULTS_REPLICA`` names the process in the ``x-faults-replica`` header of every answer.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from starlette.applications import Starlette
from starlette.requests import HTTPConnection
from starlette.responses import JSONResponse
from starlette.routing import Route

from agentmw import Agent, AgentMiddleware, Context
from agentmw.a2a import A2ASettings
from agentmw.settings import Limits

REPLICA = os.environ.get("AGENTMW_FAULTS_REPLICA", "0")
VERSION = os.environ.get("AGENTMW_FAULTS_VERSION", "v1")
HEADER = b"x-faults-replica"

if os.environ.get("AGENTMW_FAULTS_FAST"):
    import agentmw.a2a.registry as a2a_registry

    a2a_registry.HEARTBEAT_SECONDS = 2.0
    a2a_registry.LEASE_SECONDS = 2.0
    a2a_registry.SWEEP_SECONDS = 0.5
    a2a_registry.RETRY_TAKE_OVER_SECONDS = 0.5


def identify(connection: HTTPConnection) -> str | None:
    _scheme, _, token = connection.headers.get("authorization", "").partition(" ")
    return token or None


def _stamp(label: str) -> dict[str, str]:
    return {"label": label, "by": REPLICA}


async def _die(label: str) -> None:
    await asyncio.sleep(0.5)  # the caller's answer (returnImmediately) goes out first
    os._exit(17)  # the poison pill: no shutdown code runs, as with a segfault or an OOM kill


agent = Agent(
    "faults",
    "0.1",
    identify=identify,
    a2a=A2ASettings(description="The fault tests' agent"),
    limits=Limits(max_recovery_attempts=int(os.environ.get("AGENTMW_FAULTS_MAX_RECOVERIES", "100"))),
)


@agent.tool(task="optional")
@agent.skill
async def quick(label: str, ctx: Context) -> dict[str, Any]:
    """One journaled step, then the answer.

    Summary:
        Answers at once.
    """
    done = await ctx.once("stamp", _stamp, label)
    return {"label": label, "done": done["by"]}


@agent.skill
async def ask(label: str, ctx: Context) -> dict[str, Any]:
    """Asks a question first.

    Summary:
        Waits for an answer.
    """
    answer = await ctx.ask(
        f"Go on with {label}?", {"type": "object", "properties": {"go": {"type": "boolean"}}}
    )
    return {"label": label, "go": (answer.content or {}).get("go")}


@agent.tool
async def gated(label: str, ctx: Context) -> str:
    """Asks before it answers (MCP 2026: an ``input_required`` round, its ``requestState`` signed)."""
    answer = await ctx.ask(
        f"Sure about {label}?", {"type": "object", "properties": {"ok": {"type": "boolean"}}}
    )
    return f"{label}: {(answer.content or {}).get('ok')}"


@agent.skill
async def poison(label: str, ctx: Context) -> str:
    """A step that kills the process that runs it.

    Summary:
        Never finishes.
    """
    await ctx.once("start", _stamp, label)  # the journal exists: a take-over replays it
    await ctx.once("die", _die, label)
    return "unreachable"


if VERSION != "gone":

    @agent.skill
    async def parked(label: str, ctx: Context) -> dict[str, Any]:
        """A step, a question, a step; ``v2`` takes another step before the question.

        Summary:
            Parks on a question.
        """
        first = await ctx.once("before", _stamp, label)
        if VERSION == "v2":
            await ctx.once("inserted", _stamp, label)
        answer = await ctx.ask(
            f"Finish {label}?", {"type": "object", "properties": {"go": {"type": "boolean"}}}
        )
        after = await ctx.once("after", _stamp, label)
        return {
            "label": label,
            "before": first["by"],
            "after": after["by"],
            "go": (answer.content or {}).get("go"),
        }


async def health(_: Any) -> JSONResponse:
    return JSONResponse({"ok": True, "replica": REPLICA, "pid": os.getpid()})


_inner = Starlette(routes=[Route("/health", health)])
_inner.add_middleware(AgentMiddleware, agent=agent)


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """The agent's app; every answer names the process that sent it."""
    if scope["type"] != "http":
        await _inner(scope, receive, send)
        return
    identity = f"{REPLICA}-{os.getpid()}".encode()

    async def tagged(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", []), (HEADER, identity)]}
        await send(message)

    await _inner(scope, receive, tagged)
