"""A follow-up sent right after an INPUT_REQUIRED answer finds its task on any worker (issue 25: "1-48 % of A2A
follow-ups sent right after the INPUT_REQUIRED answer get 'Task not found' across workers" with write-behind).

Real processes: the example app under ``uvicorn --workers 4`` with the default store (one SQLite file shared by
the workers), no keep-alive, so the kernel hands every request to any worker. Write-through, the default: the
INPUT_REQUIRED answer goes out once the parked task is committed, so the worker that gets the follow-up reads it.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import httpx

from tests import replicas
from tests.replicas import REPLICA_HEADER, Cluster

workers_server = replicas.workers_server

AUTH = {"Authorization": "Bearer demo-token", "a2a-version": "1.0"}
APPROVE = {"request_id": "PR-1001", "department": "engineering", "total": 1.0}


def send(message: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}


def message(data: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"messageId": f"m-{uuid.uuid4()}", "role": "ROLE_USER", "parts": [{"data": data}], **extra}


async def test_a_follow_up_right_after_input_required_finds_the_task_on_any_worker(
    workers_server: Cluster,
) -> None:
    url = f"{workers_server.url}/a2a"
    failures: list[Any] = []
    routes: list[tuple[str, str]] = []
    async with httpx.AsyncClient(
        timeout=30, headers=AUTH, limits=httpx.Limits(max_keepalive_connections=0)
    ) as http:

        async def ask_and_answer() -> None:
            asked = await http.post(url, json=send(message(APPROVE, metadata={"skill": "approve_purchase"})))
            task = asked.json()["result"]["task"]
            assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", task["status"]
            answer = message({"approved": True}, taskId=task["id"], contextId=task["contextId"])
            answered = await http.post(url, json=send(answer))  # at once, on whichever worker
            routes.append((asked.headers[REPLICA_HEADER], answered.headers[REPLICA_HEADER]))
            body = answered.json()
            if "result" not in body or body["result"]["task"]["status"]["state"] != "TASK_STATE_COMPLETED":
                failures.append(body)

        for _ in range(8):  # 8 rounds of 10 concurrent pairs
            await asyncio.gather(*(ask_and_answer() for _ in range(10)))
    assert failures == [], f"{len(failures)} of {len(routes)} follow-ups failed, first: {failures[0]}"
    elsewhere = [pair for pair in routes if pair[0] != pair[1]]
    assert len(elsewhere) >= 10, f"too few follow-ups reached another worker to prove anything: {routes}"
