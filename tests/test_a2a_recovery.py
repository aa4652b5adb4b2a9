"""A2A dead letters end to end (docs/durability.md): replicas sharing one store (a SQLite file; a real
redis-server), each its own Agent in this process. A task whose take-over is past ``Limits.max_recovery_attempts``
is told FAILED, saying it was given up after N recoveries, and is not taken over again; an operator's
``agentmw.journal.retry`` makes it runnable, and the next sweep reopens the task and completes it, each step done
once."""

from __future__ import annotations

import uuid
from dataclasses import replace
from typing import Any

import pytest

from agentmw.a2a import registry as registry_module
from agentmw.journal import DEAD, JOURNAL_NS, orphaned, retry
from tests.test_a2a_replicas import (
    backend,  # noqa: F401  (the fixture: a SQLite file, or a prefix on a real redis-server)
    client,
    effects,
    msg,
    redis_url,  # noqa: F401
    replicas,  # noqa: F401
    rpc,
    stalled,
)
from tests.waiting import eventually, stays

ENDED = ("TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED")


@pytest.fixture(autouse=True)
def fast(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry_module, "HEARTBEAT_SECONDS", 0.3)
    monkeypatch.setattr(registry_module, "LEASE_SECONDS", 0.6)
    monkeypatch.setattr(registry_module, "SWEEP_SECONDS", 0.1)
    monkeypatch.setattr(registry_module, "RETRY_TAKE_OVER_SECONDS", 0.1)


async def test_a_task_past_its_recovery_limit_is_a_dead_letter_an_operator_retries(replicas: Any) -> None:  # noqa: F811
    (a, app_a), (b, app_b), _ = replicas(3)
    b.limits = replace(b.limits, max_recovery_attempts=0)  # B gives up at once: every take-over is past it
    label = f"dead-{uuid.uuid4().hex[:6]}"
    async with client(app_a) as on_a, client(app_b) as on_b:
        task = (
            await rpc(
                on_a,
                "SendMessage",
                {
                    "message": msg("steps", data={"label": label, "count": 4}),
                    "configuration": {"returnImmediately": True},
                },
            )
        )["result"]["task"]
        await eventually(lambda: f"{label}:1" in effects and label in stalled, "A to do two steps and stall")
        registry = a.a2a_app.ops.tasks.registry  # A dies: nothing written or released, its heartbeat stops
        registry.closing = True
        live = registry.live.get(task["id"])
        assert live is not None and live.runner is not None
        live.runner.cancel()
        for background in list(registry._background):
            background.cancel()

        got: dict[str, Any] = {}

        async def ended() -> bool:  # GetTask on B sweeps, and takes the orphan over
            nonlocal got
            got = (await rpc(on_b, "GetTask", {"id": task["id"]}))["result"]
            return got["status"]["state"] in ENDED

        await eventually(ended, lambda: f"B to end the task: {got['status']}", timeout=15, interval=0.05)
        assert got["status"]["state"] == "TASK_STATE_FAILED", got["status"]
        text = json_text(got["status"])
        assert "given up after 0 recoveries" in text and "agentmw executions retry" in text, text
        journal = await b.state.get(JOURNAL_NS, task["id"])
        assert journal is not None and journal.value["status"] == DEAD
        assert await orphaned(b) == []
        await stays(
            lambda: [e for e in effects if e.startswith(f"{label}:")] == [f"{label}:0", f"{label}:1"],
            "no step done again while it is a dead letter",
            seconds=0.5,
        )

        b.limits = replace(b.limits, max_recovery_attempts=100)  # the operator fixes the cause, and retries
        assert await retry(b, task["id"])

        async def completed() -> bool:
            nonlocal got
            got = (await rpc(on_b, "GetTask", {"id": task["id"]}))["result"]
            return got["status"]["state"] == "TASK_STATE_COMPLETED"

        await eventually(
            completed, lambda: f"B to complete the task: {got['status']}", timeout=15, interval=0.05
        )
    assert got["artifacts"][-1]["parts"][0]["data"]["done"] == [f"{label}:{n}" for n in range(4)]
    assert [e for e in effects if e.startswith(f"{label}:")] == [f"{label}:{n}" for n in range(4)]
    journal = await b.state.get(JOURNAL_NS, task["id"])
    assert journal is not None and journal.value["status"] == "completed" and journal.value["attempts"] == 1


def json_text(status: dict[str, Any]) -> str:
    message = status.get("message") or {}
    return " ".join(part.get("text", "") for part in message.get("parts") or [])
