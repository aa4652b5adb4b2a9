"""Nothing acknowledged is lost (issue 25, must-have 1), on the task side: write-through by default.

Replicas as in ``tests/test_a2a_replicas.py``: apps from ``tests/a2a_app.py``, each with its own Agent and its own
state connection to one shared backend (a real SQLite file; a real ``redis-server``), so what one writes reaches
another only through the backend. Checked from outside, through the A2A endpoint and by reading the store
directly on another connection:

- every task answered COMPLETED or INPUT_REQUIRED (blocking, streamed, ``returnImmediately``) is in the store
  the moment its answer is out, and a follow-up on another replica right after it never gets "Task not found";
- a store that refuses writes (a real SQLite write lock held by another connection) makes a send fail within a
  bounded time with a retryable error, while its record stays queued and is written once the store takes it
  (a repeat of the same message then gets that task); past ``MAX_BACKLOG`` queued writes a send fails at once;
- a replica whose running task's holder died takes it over from its timer, with no request reaching it.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette

from agentmw import Agent, Context
from agentmw.a2a import registry as a2a_registry_module
from agentmw.state import SQLiteState, State, open_state
from agentmw.tasks import registry as registry_module
from tests import a2a_app
from tests.state.conftest import redis_url  # noqa: F401  (a fixture: a real redis-server for the session)
from tests.waiting import eventually

V1 = {"a2a-version": "1.0"}
TASKS = "a2a.tasks"
ASK_SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
stalled: list[str] = []  # labels of the tasks that reached the point where their first replica stalls
effects: list[str] = []  # one entry per one-time step actually done, by any replica


def effect(name: str) -> str:
    effects.append(name)
    return name


def add_skills(agent: Agent, *, stall: bool = False) -> None:
    @agent.skill
    async def shout(text: str) -> str:
        """Shout the text back.

        Summary:
            The text, louder.
        """
        return text.upper()

    @agent.skill
    async def greet(ctx: Context) -> str:
        """Ask for a name, then greet.

        Summary:
            A greeting for a name asked for.
        """
        answer = await ctx.ask("Your name?", ASK_SCHEMA)
        return f"hello {answer.content['name']}"

    @agent.skill
    async def two_steps(label: str, ctx: Context) -> dict[str, list[str]]:
        """Two one-time steps; on a stalling replica it stalls between them.

        Summary:
            Steps done once each.
        """
        done = [await ctx.once("one", effect, f"{label}:1")]
        if stall:
            stalled.append(label)
            await asyncio.Event().wait()  # the test "kills" the replica here
        done.append(await ctx.once("two", effect, f"{label}:2"))
        return {"done": done}


@pytest.fixture(params=["sqlite", "redis"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/acks.db"
    return f"{request.getfixturevalue('redis_url')}?prefix=acks{uuid.uuid4().hex[:10]}"


Replica = tuple[Agent, Starlette]


@pytest.fixture
async def replicas() -> AsyncIterator[Callable[..., Replica]]:
    made: list[Agent] = []

    def make(store: State, *, stall: bool = False) -> Replica:
        agent, app = a2a_app.build(store)
        add_skills(agent, stall=stall)
        made.append(agent)
        return agent, app

    yield make
    for agent in made:
        ops = agent.a2a_app.ops
        await ops.tasks.close()
        await agent.state.close()


def client(app: Starlette, who: str = "alice") -> httpx.AsyncClient:
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app),
        base_url="http://127.0.0.1:8000",
        headers={**V1, "authorization": f"Bearer {who}"},
        timeout=30,
    )


async def call(http: httpx.AsyncClient, method: str, params: dict[str, Any]) -> dict[str, Any]:
    response = await http.post("/a2a", json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
    return response.json()  # type: ignore[no-any-return]


async def rpc(http: httpx.AsyncClient, method: str, params: dict[str, Any]) -> dict[str, Any]:
    answer = await call(http, method, params)
    assert "result" in answer, answer
    return answer["result"]  # type: ignore[no-any-return]


async def stream(http: httpx.AsyncClient, params: dict[str, Any]) -> list[dict[str, Any]]:
    response = await http.post(
        "/a2a", json={"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage", "params": params}
    )
    assert response.status_code == 200, response.text
    return [json.loads(line[5:])["result"] for line in response.text.splitlines() if line.startswith("data:")]


def msg(skill: str, data: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "messageId": f"m-{uuid.uuid4()}",
        "role": "ROLE_USER",
        "parts": [{"data": data or {}}],
        "metadata": {"skill": skill},
        **extra,
    }


def state_of(event_or_task: dict[str, Any]) -> str:
    status = event_or_task.get("status") or event_or_task.get("statusUpdate", {}).get("status") or {}
    return str(status.get("state"))


async def test_every_answered_task_is_in_the_store_when_its_answer_is_out(backend: str, replicas) -> None:
    a, app_a = replicas(open_state(backend))
    _b, app_b = replicas(open_state(backend))
    reader = open_state(backend)  # the store itself, on a connection of its own
    try:
        async with client(app_a) as on_a, client(app_b) as on_b:

            async def stored(task_id: str) -> dict[str, Any]:
                found = await reader.get(TASKS, task_id)
                assert found is not None, f"task {task_id} was answered before it was in the store"
                return found.value

            async def blocking_completed(n: int) -> None:
                task = (await rpc(on_a, "SendMessage", {"message": msg("shout", {"text": f"t{n}"})}))["task"]
                assert state_of(task) == "TASK_STATE_COMPLETED"
                assert (await stored(task["id"]))["state"] == "TASK_STATE_COMPLETED"

            async def blocking_asked(n: int) -> None:
                task = (await rpc(on_a, "SendMessage", {"message": msg("greet")}))["task"]
                assert state_of(task) == "TASK_STATE_INPUT_REQUIRED"
                value = await stored(task["id"])
                assert value["state"] == "TASK_STATE_INPUT_REQUIRED" and value.get("parked") is True
                # the follow-up at once, on the other replica: it finds the task and resumes it there
                follow_up = msg("greet", {"name": f"n{n}"}, taskId=task["id"], contextId=task["contextId"])
                done = (await rpc(on_b, "SendMessage", {"message": follow_up}))["task"]
                assert state_of(done) == "TASK_STATE_COMPLETED", done
                assert (await stored(task["id"]))["state"] == "TASK_STATE_COMPLETED"

            async def streamed_asked(n: int) -> None:
                events = await stream(on_a, {"message": msg("greet")})
                assert state_of(events[-1]) == "TASK_STATE_INPUT_REQUIRED", events
                task_id = events[0]["task"]["id"]
                assert (await stored(task_id))["state"] == "TASK_STATE_INPUT_REQUIRED"
                follow_up = msg("greet", {"name": f"s{n}"}, taskId=task_id)
                done = await stream(on_b, {"message": follow_up})
                assert state_of(done[-1]) == "TASK_STATE_COMPLETED", done
                assert (await stored(task_id))["state"] == "TASK_STATE_COMPLETED"

            async def immediate(n: int) -> None:
                params = {
                    "message": msg("shout", {"text": f"i{n}"}),
                    "configuration": {"returnImmediately": True},
                }
                task = (await rpc(on_a, "SendMessage", params))["task"]
                await stored(task["id"])  # the task it names exists for every replica
                found = await rpc(on_b, "GetTask", {"id": task["id"]})
                assert found["id"] == task["id"]

            await asyncio.gather(
                *(blocking_completed(n) for n in range(30)),
                *(blocking_asked(n) for n in range(15)),
                *(streamed_asked(n) for n in range(8)),
                *(immediate(n) for n in range(8)),
            )
        commits = a.a2a_app.ops.tasks.registry.commits
        assert commits.failures == 0 and not commits.unwritten
    finally:
        await reader.close()


@pytest.fixture
def short_waits(monkeypatch: pytest.MonkeyPatch) -> float:
    """Answers wait 1.5 s for their commit (the default is 5 s)."""
    monkeypatch.setattr(a2a_registry_module, "COMMIT_WAIT_SECONDS", 1.5)
    return 1.5


class Lock:
    """Another connection holding the SQLite file's write lock: every write of the agent is refused (SQLITE_BUSY
    past its busy_timeout), as with a long transaction of another process."""

    def __init__(self, path: Path) -> None:
        self.db = sqlite3.connect(path, isolation_level=None)
        self.db.execute("BEGIN IMMEDIATE")

    def release(self) -> None:
        self.db.execute("ROLLBACK")
        self.db.close()


def refused(answer: dict[str, Any]) -> None:
    """The answer is A2A's retryable store error (-32603 marked STORE_UNAVAILABLE, retryable)."""
    error = answer.get("error")
    assert error is not None and error["code"] == -32603, answer
    assert "STORE_UNAVAILABLE" in json.dumps(error), answer


async def test_a_refused_write_fails_the_send_retryably_in_bounded_time_and_is_written_later(
    tmp_path: Path, replicas, short_waits: float
) -> None:
    path = tmp_path / "refusing.db"
    agent, app = replicas(SQLiteState(path, busy_timeout=0.2))
    reader = SQLiteState(path)
    registry = agent.a2a_app.ops.tasks.registry
    try:
        async with client(app) as http:
            await rpc(http, "SendMessage", {"message": msg("shout", {"text": "warm"})})  # the file is set up
            assert await reader.get(TASKS, "none") is None  # (the reader's connection too, before the lock)
            lock = Lock(path)
            message = msg("shout", {"text": "kept"})
            try:
                started = time.monotonic()
                answer = await call(http, "SendMessage", {"message": message})
                took = time.monotonic() - started
                refused(answer)
                assert took < short_waits + 3.0, f"the refused send took {took:.1f} s"
                [task_id] = list(registry.unwritten)  # not acknowledged, and not dropped: queued
                assert await reader.get(TASKS, task_id) is None
                assert registry.commits.failures >= 1
            finally:
                lock.release()
            # the store takes writes again: the queued record is written, with the state the task reached
            found = await eventually(
                lambda: reader.get(TASKS, task_id), "the queued record to be written", timeout=10
            )
            assert found.value["state"] == "TASK_STATE_COMPLETED"
            assert found.value["artifacts"][0]["parts"] == [{"text": "KEPT"}]
            # a repeat of the send that was refused finds that task (its skill has side effects: de-duplicated)
            again = (await rpc(http, "SendMessage", {"message": message}))["task"]
            assert again["id"] == task_id and state_of(again) == "TASK_STATE_COMPLETED"
            await eventually(lambda: registry.commits.failures == 0, "the writer to recover")
    finally:
        await reader.close()


async def test_a_full_backlog_fails_new_sends_at_once_while_the_store_refuses(
    tmp_path: Path, replicas, short_waits: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(registry_module, "MAX_BACKLOG", 3)
    path = tmp_path / "full.db"
    agent, app = replicas(SQLiteState(path, busy_timeout=0.2))
    reader = SQLiteState(path)
    registry = agent.a2a_app.ops.tasks.registry
    try:
        async with client(app) as http:
            await rpc(http, "SendMessage", {"message": msg("shout", {"text": "warm"})})
            assert await reader.get(TASKS, "none") is None
            lock = Lock(path)
            try:
                answers = await asyncio.gather(
                    *(
                        call(http, "SendMessage", {"message": msg("shout", {"text": f"q{n}"})})
                        for n in range(4)
                    )
                )
                for answer in answers:
                    refused(answer)
                queued = set(registry.unwritten)
                assert len(queued) == 4 and registry.backlog == 4
                started = time.monotonic()
                refused(await call(http, "SendMessage", {"message": msg("shout", {"text": "one more"})}))
                took = time.monotonic() - started
                assert took < short_waits / 2, f"a send past the backlog waited {took:.2f} s"
                assert set(registry.unwritten) == queued  # that send queued nothing: it ran nothing
            finally:
                lock.release()
            for task_id in queued:
                found = await eventually(
                    lambda task_id=task_id: reader.get(TASKS, task_id), "the queued writes"
                )
                assert found.value["state"] == "TASK_STATE_COMPLETED"
            task = (await rpc(http, "SendMessage", {"message": msg("shout", {"text": "after"})}))["task"]
            assert (await reader.get(TASKS, task["id"])) is not None
    finally:
        await reader.close()


async def test_a_task_whose_holder_died_is_taken_over_with_no_request_to_the_survivor(
    backend: str, replicas, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(a2a_registry_module, "HEARTBEAT_SECONDS", 0.3)
    monkeypatch.setattr(a2a_registry_module, "LEASE_SECONDS", 0.6)
    monkeypatch.setattr(a2a_registry_module, "SWEEP_SECONDS", 0.2)
    monkeypatch.setattr(a2a_registry_module, "RETRY_TAKE_OVER_SECONDS", 0.1)
    a, app_a = replicas(open_state(backend), stall=True)
    _b, app_b = replicas(open_state(backend))
    reader = open_state(backend)
    label = f"dead-{uuid.uuid4().hex[:6]}"
    try:
        async with client(app_a) as on_a, client(app_b) as on_b:
            await rpc(on_b, "ListTasks", {})  # B's first use (this is all B ever serves in this test)
            params = {
                "message": msg("two_steps", {"label": label}),
                "configuration": {"returnImmediately": True},
            }
            task = (await rpc(on_a, "SendMessage", params))["task"]
            await eventually(lambda: label in stalled, "A to do the first step and stall")
            # A dies: its coroutine stops with nothing written or released, its heartbeat and timers stop
            registry = a.a2a_app.ops.tasks.registry
            registry.closing = True
            live = registry.live.get(task["id"])
            assert live is not None and live.runner is not None
            live.runner.cancel()
            for background in list(registry._background):
                background.cancel()

            async def completed() -> bool:  # read from the store: no request reaches B
                found = await reader.get(TASKS, task["id"])
                return found is not None and found.value["state"] == "TASK_STATE_COMPLETED"

            await eventually(completed, "B's timer to take the task over and finish it", timeout=15)
        done = (await reader.get(TASKS, task["id"])).value  # type: ignore[union-attr]
        assert done["artifacts"][0]["parts"][0]["data"]["done"] == [f"{label}:1", f"{label}:2"]
        assert [e for e in effects if e.startswith(f"{label}:")] == [f"{label}:1", f"{label}:2"]
    finally:
        await reader.close()
