"""Issue 24, items 1, 2, 3 and 7: a stream starts with the task as it was when it began; a subscription answers
at once; every repeat of a message is answered (a parked one at once, a streaming one ends); repeats to a
read-only skill are new messages (what the A2A TCK sends), repeats to one with side effects are not.

Driven by the real ``a2a-sdk==1.3.0`` client on both bindings and 0.3, and by raw HTTP; the task a client
builds from a stream is built by a2a-sdk 0.3's own ``ClientTaskManager`` (its venv, ``.deps/a2a03``)."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import subprocess
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.types.a2a_pb2 import GetTaskRequest, SendMessageRequest, SubscribeToTaskRequest, TaskState
from google.protobuf.json_format import MessageToDict
from starlette.applications import Starlette

import agentmw
from agentmw import Agent, AgentMiddleware, Context
from agentmw.a2a import A2ASettings
from agentmw.a2a.tasks import snapshot
from agentmw.lifecycle import TaskRecord
from tests.conftest import require_tool, serve
from tests.helpers.a2a_raw import V1
from tests.helpers.a2a_sdk import a2a_client, message
from tests.waiting import eventually

BINDINGS = ["JSONRPC", "HTTP+JSON"]
ORDER = {
    "TASK_STATE_SUBMITTED": 0,
    "TASK_STATE_WORKING": 1,
    "TASK_STATE_INPUT_REQUIRED": 1,
    "TASK_STATE_COMPLETED": 2,
    "TASK_STATE_FAILED": 2,
    "TASK_STATE_CANCELED": 2,
    "TASK_STATE_REJECTED": 2,
}
ROOT = Path(__file__).resolve().parents[2]
A2A03 = (
    Path(os.environ.get("AGENTMW_DEPS") or ROOT / ".deps").absolute() / "a2a03" / "bin" / "python"
)  # setup-tools

ran: list[str] = []  # what the skill with side effects did
gates: dict[str, tuple[asyncio.AbstractEventLoop, asyncio.Event]] = {}  # a pondering skill's, by its text


def build(dedupe: bool | str = "side-effects") -> tuple[Agent, Starlette]:
    agent = Agent("a2a-streams", a2a=A2ASettings(dedupe_message_ids=dedupe))  # type: ignore[arg-type]

    @agent.skill(read_only=True)
    async def echo(text: str) -> str:
        """Echo text back.

        Summary:
            Repeats what it is told.
        """
        return f"echo: {text}"

    @agent.skill(idempotent=True)
    async def upsert(text: str) -> str:
        """Set a value (doing it twice is doing it once).

        Summary:
            Sets a note.
        """
        ran.append(f"set {text}")
        return f"set: {text}"

    @agent.skill
    async def record(text: str) -> str:
        """Write the text down (a side effect).

        Summary:
            Keeps a note.
        """
        ran.append(text)
        return f"noted: {text}"

    @agent.skill(read_only=True)
    async def approve(item: str, ctx: Context) -> str:
        """Ask whether to approve an item.

        Summary:
            Waits for a human decision.
        """
        await ctx.progress(1, 3, "reading")
        await ctx.progress(2, 3, "checking")
        answer = await ctx.ask(
            f"Approve {item}?",
            {"type": "object", "properties": {"approved": {"type": "boolean"}}, "required": ["approved"]},
        )
        return f"{item}: {'approved' if (answer.content or {}).get('approved') else 'declined'}"

    @agent.skill
    async def confirm(item: str, ctx: Context) -> str:
        """Ask, then write the item down (a side effect).

        Summary:
            Keeps a confirmed note.
        """
        await ctx.ask(f"Keep {item}?", {"type": "object", "properties": {"keep": {"type": "boolean"}}})
        ran.append(item)
        return f"kept {item}"

    @agent.skill
    async def ponder(text: str, ctx: Context) -> agentmw.Message:
        """Think, then reply with a message.

        Summary:
            May answer with a message and no task.
        """
        gate = gates[text] = (asyncio.get_running_loop(), asyncio.Event())
        if text.startswith("show"):
            await ctx.progress(1, 2, "thinking")
        await gate[1].wait()
        return agentmw.Message(f"thought about {text}")

    app = Starlette()
    app.add_middleware(AgentMiddleware, agent=agent)
    return agent, app


@pytest.fixture(scope="module")
def server():
    agent, app = build()
    with serve(app) as url:
        yield agent, url


@pytest.fixture(autouse=True)
def fresh():
    ran.clear()
    yield
    for text in list(gates):  # a pondering skill left waiting goes on, so no task outlives its test
        go_on(text)


def go_on(text: str) -> None:
    """Let the skill pondering ``text`` answer (its event belongs to the server's loop, in its thread)."""
    loop, event = gates.pop(text)
    loop.call_soon_threadsafe(event.set)


def events_of(responses: list[Any]) -> list[dict[str, Any]]:
    return [MessageToDict(r) for r in responses]


def check_order(events: list[dict[str, Any]], *, first_state: str, history: int) -> None:
    """Task first (as the stream began), states never backwards, each artifact once, nothing after the end."""
    assert "task" in events[0], events[0]
    first = events[0]["task"]
    assert first["status"]["state"] == first_state and len(first.get("history", [])) == history, first
    states = [first["status"]["state"]] + [
        e["statusUpdate"]["status"]["state"] for e in events if "statusUpdate" in e
    ]
    assert all(ORDER[a] <= ORDER[b] for a, b in itertools.pairwise(states)), states
    artifacts = [e["artifactUpdate"]["artifact"]["artifactId"] for e in events if "artifactUpdate" in e]
    assert len(artifacts) == len(set(artifacts)), artifacts
    assert (
        not any("artifacts" in e.get("task", {}) for e in events[:1]) or first_state != "TASK_STATE_SUBMITTED"
    )


def built_by_a2a03(events: list[dict[str, Any]]) -> dict[str, Any]:
    """The task a2a-sdk 0.3's ClientTaskManager builds from these 1.0 events (converted to 0.3 shapes)."""
    require_tool("a2a-sdk 0.3 (its own venv)", A2A03, "run `scripts/setup-tools`, which makes it")
    script = r"""
import asyncio, json, sys
from a2a.client.client_task_manager import ClientTaskManager
from a2a.types import Task, TaskStatusUpdateEvent, TaskArtifactUpdateEvent
STATES = {"TASK_STATE_SUBMITTED": "submitted", "TASK_STATE_WORKING": "working", "TASK_STATE_COMPLETED": "completed",
          "TASK_STATE_INPUT_REQUIRED": "input-required", "TASK_STATE_FAILED": "failed", "TASK_STATE_CANCELED": "canceled"}
def message(m):
    parts = [{"kind": "text", "text": p["text"]} if "text" in p else {"kind": "data", "data": p["data"]} for p in m["parts"]]
    return {"kind": "message", "messageId": m["messageId"], "role": "agent" if m["role"] == "ROLE_AGENT" else "user",
            "parts": parts, "taskId": m.get("taskId"), "contextId": m.get("contextId")}
def status(s):
    out = {"state": STATES[s["state"]]}
    if "message" in s:
        out["message"] = message(s["message"])
    return out
async def main():
    manager = ClientTaskManager()
    for event in json.load(sys.stdin):
        if "task" in event:
            t = event["task"]
            await manager.save_task_event(Task(id=t["id"], contextId=t["contextId"], status=status(t["status"]),
                                               history=[message(m) for m in t.get("history", [])],
                                               artifacts=t.get("artifacts") and [
                                                   {"artifactId": a["artifactId"], "parts": [{"kind": "text", "text": p.get("text", "")} for p in a["parts"]]}
                                                   for a in t["artifacts"]]))
        elif "statusUpdate" in event:
            u = event["statusUpdate"]
            await manager.save_task_event(TaskStatusUpdateEvent(taskId=u["taskId"], contextId=u["contextId"],
                                                                status=status(u["status"]), final=False))
        elif "artifactUpdate" in event:
            u = event["artifactUpdate"]
            await manager.save_task_event(TaskArtifactUpdateEvent(taskId=u["taskId"], contextId=u["contextId"],
                artifact={"artifactId": u["artifact"]["artifactId"], "parts": [{"kind": "text", "text": p.get("text", "")} for p in u["artifact"]["parts"]]},
                append=u.get("append", False), lastChunk=u.get("lastChunk", False)))
    task = manager.get_task()
    print(json.dumps({"history": len(task.history or []), "artifacts": len(task.artifacts or []),
                      "state": task.status.state.value}))
asyncio.run(main())
"""
    done = subprocess.run(
        [str(A2A03), "-c", script],
        check=False,
        input=json.dumps(events),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


async def get_task(http: httpx.AsyncClient, url: str, task_id: str) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": task_id}}
    return (await http.post(f"{url}/a2a", json=body, headers=V1)).json()["result"]


# --- item 1: the first Task is the task as the stream began -------------------------------------------------


@pytest.mark.parametrize("binding", BINDINGS)
async def test_a_stream_starts_with_the_submitted_task_and_never_goes_back(server, binding: str) -> None:
    _, url = server
    async with httpx.AsyncClient(timeout=30) as http:
        client = await a2a_client(http, url, binding, streaming=True)
        events = events_of(
            [e async for e in client.send_message(SendMessageRequest(message=message("hi", skill="echo")))]
        )
        check_order(events, first_state="TASK_STATE_SUBMITTED", history=1)
        assert "artifacts" not in events[0]["task"], "the artifact comes after the first Task, once"
        assert [e["statusUpdate"]["status"]["state"] for e in events if "statusUpdate" in e][
            -1
        ] == "TASK_STATE_COMPLETED"
        assert "statusUpdate" in events[-1], "the terminal status is the last event"
        stored = await get_task(http, url, events[0]["task"]["id"])
    built = built_by_a2a03(events)
    assert built == {"history": len(stored["history"]), "artifacts": 1, "state": "completed"}


@pytest.mark.parametrize("binding", BINDINGS)
async def test_a_stream_of_a_question_and_its_answer_builds_the_task_get_task_returns(
    server, binding: str
) -> None:
    _, url = server
    async with httpx.AsyncClient(timeout=30) as http:
        client = await a2a_client(http, url, binding, streaming=True)
        asked = events_of(
            [
                e
                async for e in client.send_message(
                    SendMessageRequest(message=message(data={"item": "x"}, skill="approve"))
                )
            ]
        )
        check_order(asked, first_state="TASK_STATE_SUBMITTED", history=1)
        task_id = asked[0]["task"]["id"]
        assert asked[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        stored = await get_task(http, url, task_id)
        assert built_by_a2a03(asked)["history"] == len(stored["history"]) == 4  # user, 2 progress, question
        answered = events_of(
            [
                e
                async for e in client.send_message(
                    SendMessageRequest(message=message(data={"approved": True}, task_id=task_id))
                )
            ]
        )
        check_order(answered, first_state="TASK_STATE_INPUT_REQUIRED", history=5)
        stored = await get_task(http, url, task_id)
    assert stored["status"]["state"] == "TASK_STATE_COMPLETED"
    assert built_by_a2a03(answered)["history"] == len(stored["history"])


async def test_the_0_3_stream_starts_with_the_submitted_task(server) -> None:
    _, url = server
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "message/stream",
        "params": {
            "message": {
                "kind": "message",
                "messageId": uuid.uuid4().hex,
                "role": "user",
                "parts": [{"kind": "text", "text": "hi"}],
                "metadata": {"skill": "echo"},
            }
        },
    }
    async with (
        httpx.AsyncClient(timeout=30) as http,
        http.stream("POST", f"{url}/a2a", json=body) as response,
    ):
        results = [
            json.loads(line[5:])["result"]
            async for line in response.aiter_lines()
            if line.startswith("data:")
        ]
    kinds = [r["kind"] for r in results]
    assert (
        kinds[0] == "task"
        and results[0]["status"]["state"] == "submitted"
        and len(results[0]["history"]) == 1
    )
    assert "artifacts" not in results[0] and kinds.count("artifact-update") == 1
    assert results[-1]["kind"] == "status-update" and results[-1]["status"]["state"] == "completed"


# --- item 2: subscriptions answer at once; snapshots are copies -----------------------------------------------


@pytest.mark.parametrize("binding", BINDINGS)
async def test_subscribing_to_a_shown_quiet_task_yields_it_at_once(server, binding: str) -> None:
    _, url = server
    async with httpx.AsyncClient(timeout=30) as http:
        client = await a2a_client(http, url, binding, streaming=True)
        label = f"show-{binding}"
        stream = client.send_message(SendMessageRequest(message=message(label, skill="ponder")))
        first = MessageToDict(await anext(stream))
        task_id = first["task"]["id"]
        assert first["task"]["status"]["state"] == "TASK_STATE_SUBMITTED"
        subscription = client.subscribe(SubscribeToTaskRequest(id=task_id))
        now = MessageToDict(await asyncio.wait_for(anext(subscription), 10))
        assert now["task"]["id"] == task_id and now["task"]["status"]["state"] == "TASK_STATE_WORKING"
        go_on(label)
        rest = events_of([e async for e in subscription])
        await stream.aclose()
    assert rest[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert f"thought about {label}" in json.dumps(rest[-1])


async def test_subscribing_to_a_task_nobody_has_seen_yet_yields_it_at_once(server) -> None:
    agent, url = server
    async with httpx.AsyncClient(timeout=30) as http:
        client = await a2a_client(http, url)
        sending = asyncio.ensure_future(
            client.send_message(SendMessageRequest(message=message("hide", skill="ponder"))).__anext__()
        )
        tasks = agent.a2a_app.ops.tasks
        live = await eventually(
            lambda: "hide" in gates and next(iter(l for l in tasks.live.values() if l.quiet), None),
            "the quiet task",
        )
        assert live.first_view is not None and live.first_view["history"] is not live.record.history
        subscription = (await a2a_client(http, url, streaming=True)).subscribe(
            SubscribeToTaskRequest(id=live.record.id)
        )
        now = MessageToDict(await asyncio.wait_for(anext(subscription), 10))
        assert (
            now["task"]["id"] == live.record.id and now["task"]["status"]["state"] == "TASK_STATE_SUBMITTED"
        )
        go_on("hide")
        rest = events_of([e async for e in subscription])
        reply = MessageToDict(await asyncio.wait_for(sending, 10))
    assert rest[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert reply["task"]["id"] == live.record.id, "a task a follower saw stays a task"


def test_a_snapshot_shares_no_list_with_the_record() -> None:
    record = TaskRecord(
        "t", "c", "o", history=[{"messageId": "m"}], artifacts=[{"artifactId": "a", "parts": []}]
    )
    record.metadata["k"] = "v"
    view = snapshot(record)
    record.history.append({"messageId": "later"})
    record.artifacts.append({"artifactId": "b", "parts": []})
    record.metadata["k2"] = "v2"
    assert len(view["history"]) == 1 and len(view["artifacts"]) == 1 and view["metadata"] == {"k": "v"}


# --- item 3: every repeat gets an answer -------------------------------------------------------------------


async def test_a_repeat_of_a_parked_message_answers_at_once_with_its_state() -> None:
    _, app = build(dedupe=True)
    with serve(app) as url:
        async with httpx.AsyncClient(timeout=30, headers={"authorization": "Bearer repeater"}) as http:
            client = await a2a_client(http, url)
            ask = message(data={"item": "y"}, skill="approve", message_id="m-parked")
            first = [e async for e in client.send_message(SendMessageRequest(message=ask))][-1].task
            assert first.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
            repeat = asyncio.ensure_future(client.send_message(SendMessageRequest(message=ask)).__anext__())
            await eventually(repeat.done, "the repeat of a parked message to be answered", timeout=5)
            again = repeat.result().task
            assert again.id == first.id and again.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
            streaming = await a2a_client(http, url, streaming=True)
            events = asyncio.ensure_future(_collect(streaming.send_message(SendMessageRequest(message=ask))))
            await eventually(events.done, "the streaming repeat of an INPUT_REQUIRED task to end", timeout=5)
            got = events_of(events.result())
    assert len(got) == 1 and got[0]["task"]["id"] == first.id
    assert got[0]["task"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"


async def _collect(stream: Any) -> list[Any]:
    return [e async for e in stream]


async def test_a_raw_streaming_repeat_of_an_input_required_task_ends(server) -> None:
    _, url = server
    msg = {
        "messageId": uuid.uuid4().hex,
        "role": "ROLE_USER",
        "parts": [{"data": {"item": "z"}}],
        "metadata": {"skill": "confirm"},  # side effects behind the question: repeats are de-duplicated
    }
    async with httpx.AsyncClient(timeout=30, headers={"authorization": "Bearer repeater"}) as http:
        body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": msg}}
        task = (await http.post(f"{url}/a2a", json=body, headers=V1)).json()["result"]["task"]
        assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"

        async def repeat() -> list[dict[str, Any]]:
            async with http.stream(
                "POST", f"{url}/a2a/message:stream", json={"message": msg}, headers=V1
            ) as response:
                return [
                    json.loads(line[5:]) async for line in response.aiter_lines() if line.startswith("data:")
                ]

        streaming = asyncio.ensure_future(repeat())
        await eventually(streaming.done, "the streaming repeat of an INPUT_REQUIRED task to end", timeout=5)
    lines = streaming.result()
    assert len(lines) == 1 and lines[0]["task"]["id"] == task["id"]
    assert lines[0]["task"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED" and ran == []


# --- item 7: repeats to read-only skills are new messages; to ones with side effects, the first outcome -----


@pytest.mark.parametrize("binding", BINDINGS)
async def test_repeated_message_ids_make_new_tasks_for_a_read_only_skill_only(server, binding: str) -> None:
    _, url = server
    same = f"tck-complete-task-{binding}"
    async with httpx.AsyncClient(timeout=30, headers={"authorization": "Bearer repeater"}) as http:
        client = await a2a_client(http, url, binding)

        async def send(skill: str) -> Any:
            msg = message("TCK prerequisite task creation", skill=skill, message_id=f"{same}-{skill}")
            return [e async for e in client.send_message(SendMessageRequest(message=msg))][-1].task

        one, two = await send("echo"), await send("echo")
        assert one.id != two.id, "a read-only skill: the repeat is a new message (the TCK's expectation)"
        three, four = await send("record"), await send("record")
        assert three.id == four.id and ran == ["TCK prerequisite task creation"], "side effects: done once"
        five, six = await send("upsert"), await send("upsert")
        assert five.id != six.id, "an idempotent skill: running it again does no harm, so it is a new message"
        # the TCK's working task, made twice with one messageId, then continued: two tasks, each continues
        asks = [await send_ask(client, f"tck-input-required-{binding}") for _ in range(2)]
        assert asks[0].id != asks[1].id and all(
            a.status.state == TaskState.TASK_STATE_INPUT_REQUIRED for a in asks
        )
        for asked in asks:
            done = [
                e
                async for e in client.send_message(
                    SendMessageRequest(
                        message=message(
                            data={"approved": True}, task_id=asked.id, message_id=f"{same}-follow"
                        )
                    )
                )
            ][-1].task
            assert done.id == asked.id and done.status.state == TaskState.TASK_STATE_COMPLETED
        fetched = await client.get_task(GetTaskRequest(id=asks[0].id))
    assert fetched.status.state == TaskState.TASK_STATE_COMPLETED


async def send_ask(client: Any, message_id: str) -> Any:
    msg = message(data={"item": "tck"}, skill="approve", message_id=message_id)
    return [e async for e in client.send_message(SendMessageRequest(message=msg))][-1].task


@pytest.mark.parametrize(("dedupe", "same_echo", "same_record"), [(True, True, True), (False, False, False)])
async def test_dedupe_message_ids_true_and_false_mean_every_repeat_and_none(
    dedupe: bool, same_echo: bool, same_record: bool
) -> None:
    _, app = build(dedupe=dedupe)
    with serve(app) as url:
        async with httpx.AsyncClient(timeout=30, headers={"authorization": "Bearer repeater"}) as http:
            client = await a2a_client(http, url)

            async def send(skill: str) -> str:
                msg = message("x", skill=skill, message_id=f"m-{skill}")
                return [e async for e in client.send_message(SendMessageRequest(message=msg))][-1].task.id

            echo = [await send("echo"), await send("echo")]
            record = [await send("record"), await send("record")]
    assert (echo[0] == echo[1]) is same_echo and (record[0] == record[1]) is same_record
    assert len(ran) == (1 if same_record else 2)


def test_dedupe_message_ids_takes_three_values() -> None:
    with pytest.raises(ValueError, match="side-effects"):
        A2ASettings(dedupe_message_ids="always")  # type: ignore[arg-type]
    assert A2ASettings().dedupe_message_ids == "side-effects"


# --- the A2A TCK's own flows, replicated: its messageIds repeat across tests and transports -----------------
# (a2aproject/a2a-tck: tck_id() is one id per run and name, so "tck-complete-task-<run>" is sent by a dozen
# requirements on every transport, and tests/compatibility/_task_helpers.py makes its "working" and
# "multi-turn" tasks with the same ids each time). The SUT routes on the messageId prefix, as the TCK's own
# SUT does; its one skill is read-only, which is what it is.

RUN = uuid.uuid4().hex[:8]


def tck_id(name: str) -> str:
    return f"tck-{name}-{RUN}"


SUTS: dict[str, Agent] = {}


def agentmw_tasks(url: str) -> Any:
    """The SUT's A2A task manager (the server runs in this process: the test waits for its subscribers)."""
    return SUTS[url].a2a_app.ops.tasks


def build_tck() -> tuple[Agent, Starlette]:
    agent = Agent("tck-sut")  # default settings

    @agent.skill(read_only=True)
    async def tck(request: agentmw.Message, ctx: Context) -> str:
        """Answer the TCK by the messageId's prefix.

        Summary:
            The TCK's system under test.
        """
        if (request.message_id or "").startswith("tck-input-required"):
            await ctx.ask("More input, please.", {"type": "object"})
            return "Hello from TCK"
        if (request.message_id or "").startswith("tck-stream"):
            await ctx.progress(1, 1, "streaming")
        return "Hello from TCK"

    app = Starlette()
    app.add_middleware(AgentMiddleware, agent=agent)
    return agent, app


class Tck:
    """The TCK's two HTTP transports, raw, as its own clients speak them."""

    def __init__(self, http: httpx.AsyncClient, url: str, transport: str) -> None:
        self.http, self.url, self.transport = http, url, transport

    async def rpc(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
        reply = (await self.http.post(f"{self.url}/a2a", json=body, headers=V1)).json()
        assert "result" in reply, reply
        return reply["result"]

    async def send(
        self, message: dict[str, Any], configuration: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        params = {"message": message, **({"configuration": configuration} if configuration else {})}
        if self.transport == "jsonrpc":
            return (await self.rpc("SendMessage", params))["task"]
        return (await self.http.post(f"{self.url}/a2a/message:send", json=params, headers=V1)).json()["task"]

    async def get(self, task_id: str, history_length: int | None = None) -> dict[str, Any]:
        if self.transport == "jsonrpc":
            return await self.rpc("GetTask", {"id": task_id, "historyLength": history_length})
        query = {} if history_length is None else {"historyLength": history_length}
        return (await self.http.get(f"{self.url}/a2a/tasks/{task_id}", params=query, headers=V1)).json()

    async def cancel(self, task_id: str) -> dict[str, Any]:
        if self.transport == "jsonrpc":
            return await self.rpc("CancelTask", {"id": task_id})
        return (await self.http.post(f"{self.url}/a2a/tasks/{task_id}:cancel", json={}, headers=V1)).json()

    async def stream(
        self, message: dict[str, Any] | None = None, *, subscribe: str | None = None, take: int = 0
    ) -> list[dict[str, Any]]:
        if self.transport == "jsonrpc":
            method = "SubscribeToTask" if subscribe else "SendStreamingMessage"
            params = {"id": subscribe} if subscribe else {"message": message}
            request = self.http.stream(
                "POST",
                f"{self.url}/a2a",
                json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params},
                headers=V1,
            )
        else:
            path = f"/a2a/tasks/{subscribe}:subscribe" if subscribe else "/a2a/message:stream"
            request = self.http.stream(
                "POST", f"{self.url}{path}", json={} if subscribe else {"message": message}, headers=V1
            )
        events = []
        async with request as response:
            async for line in response.aiter_lines():
                if line.startswith("data:"):
                    data = json.loads(line[5:])
                    events.append(data.get("result", data))
                    if take and len(events) == take:
                        break
        return events

    async def working_task(self) -> dict[str, Any]:  # _task_helpers.create_working_task
        task = await self.send(
            {
                "role": "ROLE_USER",
                "parts": [{"text": "TCK prerequisite task creation"}],
                "messageId": tck_id("input-required"),
            }
        )
        assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", task
        return task

    async def multiturn_task(self) -> dict[str, Any]:  # _task_helpers.create_multiturn_task
        task = await self.working_task()
        follow = {
            "role": "ROLE_USER",
            "parts": [{"text": "TCK follow-up for history"}],
            "messageId": tck_id("complete-task"),
            "taskId": task["id"],
        }
        done = await self.send(follow)
        assert done["id"] == task["id"] and done["status"]["state"] == "TASK_STATE_COMPLETED", done
        return done


async def test_the_tck_flows_with_repeated_message_ids_pass_with_default_settings() -> None:
    hello = {"role": "ROLE_USER", "parts": [{"text": "Hello from TCK"}], "messageId": tck_id("complete-task")}
    streamed = {
        "role": "ROLE_USER",
        "parts": [{"text": "Stream task lifecycle"}],
        "messageId": tck_id("stream-003"),
    }
    seen: set[str] = set()
    agent, app = build_tck()
    with serve(app) as url:
        SUTS[url] = agent
        async with httpx.AsyncClient(timeout=30) as http:
            for transport in ("jsonrpc", "http_json"):  # the TCK runs every requirement on each transport
                tck = Tck(http, url, transport)
                task = await tck.send(hello)  # CORE-SEND-001, CORE-MULTI-003: a new task with a unique id
                assert task["status"]["state"] == "TASK_STATE_COMPLETED" and task["id"] not in seen
                seen.add(task["id"])
                events = await tck.stream(
                    streamed
                )  # CORE-STREAM-003: the Task, its updates, closed at the end
                assert "task" in events[0] and events[0]["task"]["id"] not in seen
                assert (
                    len(events) > 2
                    and events[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
                )
                seen.add(events[0]["task"]["id"])
                # CORE-CANCEL-001: a working task is canceled; the next working task is another, still working
                working = await tck.working_task()
                assert (await tck.cancel(working["id"]))["status"]["state"] == "TASK_STATE_CANCELED"
                again = await tck.working_task()
                assert again["id"] != working["id"]
                # STREAM-SUB-001: a subscription's first event is the task as it is now
                first = await tck.stream(subscribe=again["id"], take=1)
                assert first[0]["task"]["id"] == again["id"]
                assert first[0]["task"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
                # STREAM-ORDER-002/003: two subscriptions, then the follow-up: both get the same events, in order
                subscriptions = [asyncio.ensure_future(tck.stream(subscribe=again["id"])) for _ in range(2)]
                live = agentmw_tasks(url).live[again["id"]]
                await eventually(lambda live=live: len(live.subscribers) == 2, "both subscriptions")
                follow = {
                    "role": "ROLE_USER",
                    "parts": [{"text": "Complete multi-stream task"}],
                    "messageId": tck_id("complete-task"),
                    "taskId": again["id"],
                }
                assert (await tck.send(follow))["status"]["state"] == "TASK_STATE_COMPLETED"
                both = await asyncio.wait_for(asyncio.gather(*subscriptions), 10)
                assert both[0] == both[1] and len(both[0]) > 2 and "task" in both[0][0]
                # CORE-HIST-001/002/004/005: two multi-turn tasks, made the same way, each with its history
                one, two = await tck.multiturn_task(), await tck.multiturn_task()
                assert one["id"] != two["id"]
                assert "history" not in await tck.get(one["id"], 0)
                assert len((await tck.get(one["id"], 1))["history"]) == 1
                history = (await tck.get(two["id"], 10))["history"]
                assert [m["role"] for m in history] == [
                    "ROLE_USER",
                    "ROLE_AGENT",
                    "ROLE_USER",
                ]  # chronological
                assert [history[0]["parts"], history[2]["parts"]] == [  # CORE-HIST-006: as exchanged
                    [{"text": "TCK prerequisite task creation"}],
                    [{"text": "TCK follow-up for history"}],
                ]
                # CORE-HIST-003: a follow-up with historyLength 0 answers with no history
                working = await tck.working_task()
                follow = {
                    "role": "ROLE_USER",
                    "parts": [{"text": "Follow-up with no history"}],
                    "messageId": tck_id("complete-task"),
                    "taskId": working["id"],
                }
                assert "history" not in await tck.send(follow, {"historyLength": 0})


async def test_a_blocking_send_waiting_on_a_running_task_answers_when_the_agent_closes() -> None:
    """A shutdown leaves no request waiting on a task: it answers with the task as it is (no outliving SIGTERM)."""
    agent = Agent("closing")
    started = asyncio.Event()

    @agent.skill
    async def linger(text: str, ctx: Context) -> str:
        """Take a journaled step, then run until stopped.

        Summary:
            Never ends by itself; a shutdown leaves it for a replica to take over.
        """
        await ctx.once("first", lambda: text)  # journaled: a shutdown leaves the task as it is, not canceled
        started.set()
        await asyncio.Event().wait()
        return text

    app = Starlette()
    app.add_middleware(AgentMiddleware, agent=agent)
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {"message": {"messageId": "m-close", "role": "ROLE_USER", "parts": [{"text": "x"}]}},
    }
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1:8000"
    ) as http:
        sending = asyncio.ensure_future(http.post("/a2a", json=body, headers=V1))
        await asyncio.wait_for(started.wait(), 10)
        await agent.a2a_app.ops.tasks.close()
        await eventually(sending.done, "the blocking send to answer once the agent closed", timeout=5)
    task = sending.result().json()["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_WORKING", task  # left for another process to take over
