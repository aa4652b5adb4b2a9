"""A fresh agent per test for ``tests/test_guards.py``: each build has its own log, so no test reads another's.

Every function is both an MCP tool and an A2A/AG-UI skill. Callers are told apart by their bearer token.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from starlette.applications import Starlette
from starlette.requests import HTTPConnection

from agentmw import Agent, AgentMiddleware, Context, Retryable, skill, tool
from agentmw.a2a import A2ASettings
from agentmw.safety import human_gate


def identify(connection: HTTPConnection) -> str | None:
    _, _, token = connection.headers.get("authorization", "").partition(" ")
    return token or None


@dataclass
class Built:
    agent: Agent
    app: Starlette
    runs: list[tuple[str | None, str, str]] = field(default_factory=list)  # (caller, function, label)

    def count(self, function: str, label: str) -> int:
        return sum(1 for _, fn, lb in self.runs if fn == function and lb == label)

    def callers(self, function: str, label: str) -> list[str | None]:
        return [caller for caller, fn, lb in self.runs if fn == function and lb == label]


def build(**settings: object) -> Built:
    agent = Agent("guards", identify=identify, a2a=A2ASettings(push=None), **settings)  # type: ignore[arg-type]
    built = Built(agent, Starlette())

    @tool
    @skill
    async def record(label: str, ctx: Context) -> dict:
        """Record who ran it; each run gets a new number (side effects: idempotency keys apply)."""
        built.runs.append((ctx.caller, "record", label))
        return {"caller": ctx.caller, "label": label, "run": len(built.runs)}

    @tool
    @skill
    async def flaky(label: str, ctx: Context) -> dict:
        """Fail retryably the first time for a label, succeed after."""
        built.runs.append((ctx.caller, "flaky", label))
        if built.count("flaky", label) == 1:
            raise Retryable("the ledger is locked", retry_after=1)
        return {"label": label, "run": len(built.runs)}

    @tool
    @skill
    @human_gate(side_effects="Moves money")
    async def transfer(label: str, ctx: Context) -> str:
        """Move money, once a person approved it."""
        built.runs.append((ctx.caller, "transfer", label))
        return f"transferred {label}"

    @skill
    async def short(text: str) -> str:
        """Answer with one fixed text: a run of few events."""
        return "done"

    for fn in (record, flaky, transfer, short):
        agent.include(fn)
    built.app.add_middleware(AgentMiddleware, agent=agent)
    return built
