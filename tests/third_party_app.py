"""Agents for the third-party A2A clients (tests/test_a2a_third_party.py), one per server.

Text-only clients (ADK's ``RemoteA2aAgent``, ``a2a-handler``) cannot name a skill in metadata, so every agent
but ``multi`` has exactly one skill: the one the task runs. ``multi`` is the one where the client must answer
"which skill?" by text.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from starlette.applications import Starlette

import agentmw
from agentmw import Agent, AgentMiddleware, Artifact, Context, human_gate

APPROVAL = {"type": "object", "properties": {"approved": {"type": "boolean"}}, "required": ["approved"]}
CHUNKS = ("alpha-", "beta-", "gamma")  # one artifact in three chunks: read whole it is "alpha-beta-gamma"
gated_runs: list[str] = []  # what the gated skill did: it runs only once a person approved


def _app(agent: Agent) -> Starlette:
    app = Starlette()
    app.add_middleware(AgentMiddleware, agent=agent)
    return app


def echo_agent() -> Starlette:
    agent = Agent("tp-echo", "1.0.0")

    @agent.skill
    async def echo(text: str) -> str:
        """Echo text back.

        Summary:
            Repeats what it is told.
        """
        return f"echo: {text}"

    return _app(agent)


def multi_agent() -> Starlette:
    agent = Agent("tp-multi", "1.0.0")

    @agent.skill
    async def echo(text: str) -> str:
        """Echo text back.

        Summary:
            Repeats what it is told.
        """
        return f"echo: {text}"

    @agent.skill
    async def shout(text: str) -> str:
        """Say text loudly.

        Summary:
            Repeats what it is told in capitals.
        """
        return f"SHOUT: {text.upper()}"

    return _app(agent)


def approve_agent() -> Starlette:
    agent = Agent("tp-approve", "1.0.0")

    @agent.skill
    async def approve(item: str, ctx: Context) -> str:
        """Ask whether to approve an item.

        Summary:
            Waits for a human decision.
        """
        await ctx.progress(1, 2, "checking")
        answer = await ctx.ask(f"Approve {item}?", APPROVAL)
        return f"{item}: {'approved' if (answer.content or {}).get('approved') is True else 'declined'}"

    return _app(agent)


def gated_agent() -> Starlette:
    agent = Agent("tp-gated", "1.0.0")

    @agent.skill
    @human_gate(side_effects="deletes the file")
    async def delete(path: str) -> str:
        """Delete a file.

        Summary:
            Deletes a file once a person approves.
        """
        gated_runs.append(path)
        return f"deleted {path}"

    return _app(agent)


async def report(text: str, ctx: Context) -> list[Artifact]:
    """Write a report in chunks: one streamed now, the rest returned.

    Summary:
        Streams one artifact in chunks.
    """
    first, middle, last = CHUNKS
    await ctx.artifact(Artifact(first, name="report", artifact_id="report-1", last_chunk=False))
    return [
        Artifact(middle, name="report", artifact_id="report-1", append=True, last_chunk=False),
        Artifact(last, name="report", artifact_id="report-1", append=True, last_chunk=True),
    ]


def chunks_agent() -> Starlette:
    agent = Agent("tp-chunks", "1.0.0")
    agent.skill(report)
    return _app(agent)


def reply_agent() -> Starlette:
    agent = Agent("tp-reply", "1.0.0")

    @agent.skill
    async def greet(text: str) -> agentmw.Message:
        """Reply with a message and no task.

        Summary:
            Greets whoever writes.
        """
        return agentmw.Message(f"hello, {text}")

    return _app(agent)


def sdk03_agent() -> Starlette:
    """Several skills: a2a-sdk 0.3's client names one in ``metadata.skill``, as a scripted client can."""
    agent = Agent("tp-sdk03", "1.0.0")

    @agent.skill
    async def echo(text: str) -> str:
        """Echo text back.

        Summary:
            Repeats what it is told.
        """
        return f"echo: {text}"

    @agent.skill
    async def approve(item: str, ctx: Context) -> str:
        """Ask whether to approve an item.

        Summary:
            Waits for a human decision.
        """
        answer = await ctx.ask(f"Approve {item}?", APPROVAL)
        return f"{item}: {'approved' if (answer.content or {}).get('approved') is True else 'declined'}"

    @agent.skill
    async def wait(text: str, ctx: Context) -> str:
        """Work until canceled.

        Summary:
            Never finishes on its own.
        """
        await ctx.progress(1, 2, "waiting")
        await asyncio.Event().wait()  # only a cancel ends it
        return "unreachable"

    agent.skill(report)
    return _app(agent)


AGENTS: dict[str, Callable[[], Starlette]] = {
    "echo": echo_agent,
    "multi": multi_agent,
    "approve": approve_agent,
    "gated": gated_agent,
    "chunks": chunks_agent,
    "reply": reply_agent,
    "sdk03": sdk03_agent,
}
