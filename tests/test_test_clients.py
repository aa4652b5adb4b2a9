"""``agentmw.testing``'s in-process clients against real behaviour: questions, follow-ups, cancels, interrupts,
resumes and reconnects; and their checks against the official models, which must catch a malformed event."""

from __future__ import annotations

import asyncio
import json

import pytest
from google.protobuf.json_format import ParseError
from pydantic import ValidationError

from agentmw.testing import A2ACallError, A2ATestClient, AguiHttpError, AguiTestClient, McpTestClient
from tests.cli_apps import demo_app
from tests.waiting import eventually


@pytest.fixture
def app():
    demo_app.log.clear()
    demo_app.release.clear()
    return demo_app.build()[1]


def released(label: str) -> asyncio.Event:
    """The event a ``hold`` run labelled ``label`` waits for, made before the run starts."""
    demo_app.release[label] = asyncio.Event()
    return demo_app.release[label]


# --- A2A -----------------------------------------------------------------------------------------------


async def test_a2a_question_and_follow_up(app) -> None:
    async with A2ATestClient(app) as a2a:
        task = (await a2a.send("laptop", skill="approve"))["task"]
        assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        assert (
            task["status"]["message"]["parts"][0]["text"]
            == "Approve laptop?\nReply with yes or no (or a data part matching the schema)."
        )
        done = (await a2a.follow_up(task, data={"approved": True}))["task"]
        assert done["id"] == task["id"] and done["status"]["state"] == "TASK_STATE_COMPLETED"
        assert done["artifacts"][0]["parts"] == [{"text": "laptop: approved"}]
        assert (await a2a.get(task["id"]))["status"]["state"] == "TASK_STATE_COMPLETED"
        with pytest.raises(A2ACallError) as missing:
            await a2a.get("no-such-task")
        assert missing.value.code == -32001


async def test_a2a_stream_then_cancel(app) -> None:
    released("c1")
    async with A2ATestClient(app) as a2a:
        seen = []
        async with a2a.stream("c1", skill="hold") as live:
            async for event in live:
                seen.append(event)
                if "waiting (1/2)" in json.dumps(event):  # its progress: the skill is running and waiting
                    break
        assert "task" in seen[0] and "waiting (1/2)" in json.dumps(seen)
        task_id = seen[0]["task"]["id"]
        canceled = await a2a.cancel(task_id)  # the stream was left; the task runs on until cancelled
        assert canceled["status"]["state"] == "TASK_STATE_CANCELED"
        await eventually(lambda: "c1:cancelled" in demo_app.log, "the skill's coroutine was not cancelled")
        assert (await a2a.get(task_id))["status"]["state"] == "TASK_STATE_CANCELED"


async def test_a2a_subscribe_follows_a_running_task(app) -> None:
    release = released("s1")
    async with A2ATestClient(app) as a2a:
        task = (await a2a.send("s1", skill="hold", configuration={"returnImmediately": True}))["task"]
        await eventually(lambda: "s1:started" in demo_app.log, "the task did not start")
        async with a2a.subscribe(task["id"]) as follow:
            release.set()
            events = await follow.collect()
        assert "task" in events[0]
        assert events[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
        assert any("s1 released" in json.dumps(e) for e in events)


# --- AG-UI ---------------------------------------------------------------------------------------------


async def test_agui_interrupt_and_resume(app) -> None:
    async with AguiTestClient(app) as agui:
        asked = await agui.run("approve", "laptop")
        [interrupt] = asked.interrupts
        assert interrupt["reason"] == "input_required" and interrupt["message"] == "Approve laptop?"
        assert asked.types[-1] == "RUN_FINISHED" and asked.ids == list(range(1, len(asked.events) + 1))
        resumed = await agui.resume(asked, {"approved": True})
        assert resumed.thread_id == asked.thread_id and resumed.outcome == {"type": "success"}
        assert resumed.text == "laptop: approved" and resumed.interrupts == []
        again = await agui.run("approve", "phone")
        cancelled = await agui.resume(again, status="cancelled")
        assert cancelled.outcome == {"type": "cancelled"} and cancelled.text == ""
        with pytest.raises(ValueError, match="no open interrupt"):
            await agui.resume(resumed, {"approved": True})


async def test_agui_reconnect_with_last_event_id(app) -> None:
    release = released("r1")
    async with AguiTestClient(app) as agui:
        async with agui.stream("hold", arguments={"label": "r1"}, detached=True) as live:
            async for event in live:
                if event["type"] == "ACTIVITY_SNAPSHOT":
                    break  # the client goes away; a detached run goes on
        first = live.run
        assert first.types[0] == "RUN_STARTED" and "RUN_FINISHED" not in first.types
        release.set()
        async with agui.reconnect(first) as rest:
            tail = await rest.collect()
        assert tail.ids and tail.ids[0] == first.last_event_id + 1  # exactly what came after, nothing twice
        assert tail.types[-1] == "RUN_FINISHED" and "r1 released" in tail.text
        async with agui.reconnect(first, after=0) as whole:
            everything = await whole.collect()
        assert everything.events == first.events + tail.events


async def test_agui_cancel_and_disconnect(app) -> None:
    released("k1")
    released("k2")
    async with AguiTestClient(app) as agui:
        async with agui.stream("hold", arguments={"label": "k1"}, detached=True) as live:
            async for event in live:
                if event["type"] == "ACTIVITY_SNAPSHOT":
                    break
        assert (await agui.cancel(live.run)) == {"runId": live.run.run_id, "outcome": "cancelled"}
        await eventually(lambda: "k1:cancelled" in demo_app.log, "cancel did not reach the coroutine")
        async with agui.stream("hold", arguments={"label": "k2"}) as attached:
            async for event in attached:
                if event["type"] == "ACTIVITY_SNAPSHOT":
                    break  # an attached run's client leaves: the run is cancelled
        await eventually(lambda: "k2:cancelled" in demo_app.log, "leaving did not cancel the attached run")
        with pytest.raises(AguiHttpError) as unknown:
            await agui.run("nothing", "x")
        assert unknown.value.status == 404
        caps = await agui.capabilities("approve")
        assert caps["humanInTheLoop"]["interrupts"] is True


# --- MCP: notifications as they stream -----------------------------------------------------------------


async def test_mcp_notifications_arrive_while_the_call_runs(app) -> None:
    arrived: list[tuple[str, bool]] = []
    async with McpTestClient(app) as mcp:
        task = asyncio.create_task(
            mcp.request(
                "tools/call",
                {
                    "name": "slow_count",
                    "arguments": {"steps": 2, "pause": 0.2},
                    "_meta": {"progressToken": "p"},
                },
                on_notification=lambda m: arrived.append((m["params"]["message"], task.done())),
            )
        )
        result = await task
    assert result["structuredContent"] == {"result": 2}
    assert arrived == [("step 1", False), ("step 2", False)]  # each seen before the call had ended


# --- the checks catch what the official models refuse --------------------------------------------------


def _sse_app(body: bytes, content_type: bytes = b"text/event-stream"):
    async def app(scope, receive, send):
        await receive()
        await send(
            {"type": "http.response.start", "status": 200, "headers": [(b"content-type", content_type)]}
        )
        await send({"type": "http.response.body", "body": body})

    return app


async def test_a_malformed_agui_event_fails_the_test() -> None:
    bad = _sse_app(
        b'id: 1\ndata: {"type":"RUN_STARTED","threadId":"t","runId":"r"}\n\n'
        b'id: 2\ndata: {"type":"TEXT_MESSAGE_CONTENT","messageId":"m"}\n\n'
    )  # no delta
    with pytest.raises(ValidationError):
        await AguiTestClient(bad).run("any", "hi")
    backwards = _sse_app(
        b'id: 2\ndata: {"type":"RUN_STARTED","threadId":"t","runId":"r"}\n\n'
        b'id: 1\ndata: {"type":"RUN_FINISHED","threadId":"t","runId":"r"}\n\n'
    )
    with pytest.raises(AssertionError, match="sequence numbers must rise"):
        await AguiTestClient(backwards).run("any", "hi")


async def test_a_malformed_a2a_answer_fails_the_test() -> None:
    bad = _sse_app(
        json.dumps(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "result": {
                    "task": {"id": "t", "contextId": "c", "status": {"state": "TASK_STATE_DAYDREAMING"}}
                },
            }
        ).encode(),
        b"application/json",
    )
    with pytest.raises(ParseError):
        await A2ATestClient(bad).send("hi", skill="x")
    stray = _sse_app(
        json.dumps(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "result": {
                    "task": {
                        "id": "t",
                        "contextId": "c",
                        "status": {"state": "TASK_STATE_COMPLETED"},
                        "mood": "good",
                    }
                },
            }
        ).encode(),
        b"application/json",
    )
    with pytest.raises(ParseError):
        await A2ATestClient(stray).send("hi", skill="x")
    assert (await A2ATestClient(stray, validate=False).send("hi", skill="x"))["task"]["mood"] == "good"
