"""Issue 24, items 4 and 5, where a task parked on one replica is answered on another (its coroutine replayed from
the journal there): an unreadable text answer is asked again without replaying anything, a readable one resumes
it; a chunk streamed before the question and one returned after it make one artifact, appended, closed once."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentmw import Agent, Artifact, Context
from agentmw.state import open_state
from tests import a2a_app
from tests.helpers.a2a_raw import V1

APPROVAL = {"type": "object", "properties": {"approved": {"type": "boolean"}}, "required": ["approved"]}
runs: list[str] = []  # one entry each time the skill starts: a replay starts it again


def add_skill(agent: Agent) -> None:
    @agent.skill
    async def release(item: str, ctx: Context) -> list[Artifact]:
        """Stream a first chunk, ask, return the last chunk.

        Summary:
            Releases an item once approved.
        """
        runs.append(item)
        await ctx.artifact(Artifact(f"{item} ", name="notes", artifact_id="notes", last_chunk=False))
        answer = await ctx.ask(f"Release {item}?", APPROVAL)
        verdict = "released" if (answer.content or {}).get("approved") is True else "kept"
        return [Artifact(verdict, name="notes", artifact_id="notes")]


@pytest.fixture
async def two(tmp_path: Path) -> AsyncIterator[list[Any]]:
    made = []
    for _ in range(2):
        agent, app = a2a_app.build(open_state(f"sqlite:///{tmp_path}/shared.db"))
        add_skill(agent)
        made.append((agent, app))
    yield made
    for agent, _ in made:
        await agent.a2a_app.ops.tasks.close()
        await agent.a2a_app.ops.tasks.state.close()
        await agent.state.close()


def client(app: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app),
        base_url="http://127.0.0.1:8000",
        headers={**V1, "authorization": "Bearer alice"},
        timeout=30,
    )


def msg(parts: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": parts, **extra}


async def rpc(http: httpx.AsyncClient, method: str, params: dict[str, Any]) -> Any:
    response = await http.post("/a2a", json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
    assert response.status_code == 200, response.text
    body = response.json()
    assert "result" in body, body
    return body["result"]


async def stream(http: httpx.AsyncClient, params: dict[str, Any]) -> list[dict[str, Any]]:
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage", "params": params}
    response = await http.post("/a2a", json=body)
    assert response.status_code == 200, response.text
    return [json.loads(line[5:])["result"] for line in response.text.splitlines() if line.startswith("data:")]


async def test_an_answer_on_another_replica_is_read_or_asked_again(two: list[Any]) -> None:
    (a, app_a), (_b, app_b) = two
    runs.clear()
    item = f"crate-{uuid.uuid4().hex[:6]}"
    async with client(app_a) as on_a, client(app_b) as on_b:
        first = msg([{"data": {"item": item}}], metadata={"skill": "release"})
        parked = (await rpc(on_a, "SendMessage", {"message": first}))["task"]
        assert parked["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        await a.a2a_app.ops.tasks.flush()
        unread = (await rpc(on_b, "SendMessage", {"message": msg([{"text": "soon"}], taskId=parked["id"])}))[
            "task"
        ]
        assert unread["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        text = unread["status"]["message"]["parts"][0]["text"]
        assert text.startswith(
            f"Release {item}?\nThat answer could not be read: 'soon' is neither yes nor no"
        )
        assert runs == [item]  # nothing was replayed for an answer that could not be read
        events = await stream(on_b, {"message": msg([{"text": "Yes"}], taskId=parked["id"])})
        got = await rpc(on_b, "GetTask", {"id": parked["id"]})
    assert events[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert runs == [item, item]  # replayed once, on B, from the journal
    updates = [e["artifactUpdate"] for e in events if "artifactUpdate" in e]
    # the first chunk was sent by A before the question (the replay does not send it again); B appends the
    # returned one to it and closes the artifact
    assert [(u.get("append", False), u["lastChunk"], u["artifact"]["parts"]) for u in updates] == [
        (True, True, [{"text": "released"}])
    ]
    assert got["artifacts"] == [
        {"artifactId": "notes", "name": "notes", "parts": [{"text": f"{item} "}, {"text": "released"}]}
    ]
