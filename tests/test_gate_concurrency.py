"""One approval runs the gated action once on every face, however many concurrent answers or retries carry it:
A2A follow-ups, AG-UI resumes, out-of-band approval ids (MCP 2026's requestState: tests/test_gate_replay.py)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest

from agentmw.testing import McpTestClient
from tests import safety_app
from tests.test_agui_wire import frames, run_body
from tests.test_safety import a2a, http


@pytest.fixture(autouse=True)
def fresh_log():
    safety_app.log.clear()
    safety_app.gates.clear()


@pytest.fixture
def app(tmp_path: Path):
    return safety_app.build(str(tmp_path))[1]


def orders(item: str) -> list[str]:
    return [e for e in safety_app.entries() if e.startswith(f"order:{item}:")]


async def test_concurrent_a2a_follow_ups_approve_once(app) -> None:
    async with http(app) as client:
        task = await a2a(client, "place_order", {"item": "desk", "quantity": 2})
        assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        replies = await asyncio.gather(
            *(a2a(client, None, {"approved": True}, task_id=task["id"]) for _ in range(5))
        )
    states = sorted(r.get("status", {}).get("state") or str(r.get("error", {}).get("code")) for r in replies)
    assert states.count("TASK_STATE_COMPLETED") >= 1
    assert orders("desk") == ["order:desk:2"], states


async def test_concurrent_agui_resumes_approve_once(app) -> None:
    async with http(app) as client:
        body = run_body("t-conc", "r-ask", props={"arguments": {"item": "shelf", "quantity": 1}})
        body["messages"] = []
        asked = frames((await client.post("/agui/place_order", json=body)).text)
        [interrupt] = asked[-1]["outcome"]["interrupts"]

        async def resume(n: int) -> list[dict]:
            again = run_body("t-conc", f"r-resume-{n}")
            again["messages"] = []
            again["resume"] = [
                {"interruptId": interrupt["id"], "status": "resolved", "payload": {"approved": True}}
            ]
            return frames((await client.post("/agui/place_order", json=again)).text)

        runs = await asyncio.gather(*(resume(n) for n in range(5)))
    finished = [r for r in runs if r[-1]["type"] == "RUN_FINISHED"]
    assert len(finished) == 1, [r[-1] for r in runs]
    assert all(r[-1]["type"] == "RUN_ERROR" for r in runs if r not in finished)
    assert orders("shelf") == ["order:shelf:1"]


async def test_concurrent_uses_of_one_out_of_band_approval_run_once(app) -> None:
    arguments = {"item": "monitor", "quantity": 4}
    async with McpTestClient(app, era="2025-11-25", headers={"authorization": "Bearer alice"}) as mcp:
        approval = (await mcp.call_tool("place_order", arguments))["_meta"]["agentmw/approval"]
        async with http(app) as admin:
            decided = await admin.post(
                f"/approvals/{approval['id']}",
                json={"approve": True},
                headers={"authorization": "Bearer admin"},
            )
            assert decided.status_code == 200
        meta = {"agentmw/approvalId": approval["id"]}
        results = await asyncio.gather(
            *(
                mcp.request("tools/call", {"name": "place_order", "arguments": arguments, "_meta": meta})
                for _ in range(5)
            )
        )
    texts = sorted(r["content"][0]["text"] for r in results)
    assert sum(t == "ordered 4 x monitor" for t in texts) == 1, texts
    assert orders("monitor") == ["order:monitor:4"]


async def test_an_approval_decided_concurrently_is_decided_once(app) -> None:
    async with McpTestClient(app, era="2025-11-25", headers={"authorization": "Bearer bob"}) as mcp:
        approval = (await mcp.call_tool("place_order", {"item": "lamp", "quantity": 1}))["_meta"][
            "agentmw/approval"
        ]
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1:8000"
    ) as admin:
        answers = await asyncio.gather(
            *(
                admin.post(
                    f"/approvals/{approval['id']}",
                    json={"approve": n % 2 == 0},
                    headers={"authorization": "Bearer admin"},
                )
                for n in range(6)
            )
        )
    statuses = sorted(a.status_code for a in answers)
    assert statuses == [200, 409, 409, 409, 409, 409]
