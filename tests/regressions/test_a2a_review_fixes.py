"""Fixes for the hostile review of the A2A face (issue 24): an unreadable answer on a replica that does not hold
the task, anonymous repeats, refused follow-ups, and repeats of a message answered with a message alone."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path

import httpx

from agentmw.state import open_state
from tests import a2a_app
from tests.conftest import serve
from tests.regressions import test_a2a_answers_replicas as rep
from tests.regressions.test_a2a_hostile_review import (  # noqa: F401  (fixtures)
    build,
    fresh,
    gates,
    go_on,
    msg,
    result,
    rpc,
    server,
    sse,
)
from tests.waiting import eventually

ADA = {
    "authorization": "Bearer ada"
}  # a caller of its own: anonymous callers' repeats are never de-duplicated


async def test_after_an_unreadable_answer_on_b_a_readable_answer_on_a_completes_once(tmp_path: Path) -> None:
    """Parked on A; an answer B cannot read is asked again on B without un-parking the task or taking it from A
    (a write from B would supersede A's, and the next message would run the skill from scratch)."""
    made = []
    for _ in range(2):
        agent, app = a2a_app.build(open_state(f"sqlite:///{tmp_path}/shared.db"))
        rep.add_skill(agent)
        made.append((agent, app))
    (a, app_a), (b, app_b) = made
    rep.runs.clear()
    item = f"crate-{uuid.uuid4().hex[:6]}"
    try:
        async with rep.client(app_a) as on_a, rep.client(app_b) as on_b:
            first = rep.msg([{"data": {"item": item}}], metadata={"skill": "release"})
            parked = (await rep.rpc(on_a, "SendMessage", {"message": first}))["task"]
            await a.a2a_app.ops.tasks.flush()
            answer = {"message": rep.msg([{"text": "soon"}], taskId=parked["id"])}
            unread = (await rep.rpc(on_b, "SendMessage", answer))["task"]
            assert unread["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
            assert "could not be read: 'soon'" in unread["status"]["message"]["parts"][0]["text"]
            await b.a2a_app.ops.tasks.flush()
            still = await rep.rpc(on_a, "GetTask", {"id": parked["id"]})
            assert still["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
            yes = {"message": rep.msg([{"text": "yes"}], taskId=parked["id"])}
            on_a_reply = await rep.rpc(on_a, "SendMessage", yes)
            await a.a2a_app.ops.tasks.flush()
            got_a = await rep.rpc(on_a, "GetTask", {"id": parked["id"]})
            got_b = await rep.rpc(on_b, "GetTask", {"id": parked["id"]})
            yes_again = {"message": rep.msg([{"text": "yes"}], taskId=parked["id"])}
            third = await on_a.post(
                "/a2a", json={"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": yes_again}
            )
            await a.a2a_app.ops.tasks.flush()
    finally:
        for agent, _ in made:
            await agent.a2a_app.ops.tasks.close()
            await agent.a2a_app.ops.tasks.state.close()
            await agent.state.close()
    assert on_a_reply["task"]["status"]["state"] == "TASK_STATE_COMPLETED", on_a_reply
    assert got_a["status"]["state"] == got_b["status"]["state"] == "TASK_STATE_COMPLETED", (got_a, got_b)
    assert got_b["artifacts"] == on_a_reply["task"]["artifacts"]
    assert third.json()["error"]["code"] == -32004, third.json()  # completed: it takes no more messages
    assert rep.runs == [item]  # the skill ran once


async def test_a_refused_follow_up_is_not_kept_in_the_history(server) -> None:  # noqa: F811
    """A follow-up to a working task is refused, by SendMessage and SendStreamingMessage: nothing of it is kept
    (history, ctx.messages, the bytes counted against the task's budget)."""
    agent, url = server
    label = f"busy-{uuid.uuid4().hex[:6]}"
    async with httpx.AsyncClient(timeout=30) as http:
        task = (
            await result(
                http,
                url,
                "SendMessage",
                {
                    "message": msg([{"text": label}], metadata={"skill": "hold"}),
                    "configuration": {"returnImmediately": True},
                },
            )
        )["task"]
        await eventually(lambda: label in gates, "the skill to run")
        live = agent.a2a_app.ops.tasks.registry.local(task["id"])
        assert live is not None
        before = (live.bytes, len(live.messages))
        refused = await rpc(
            http, url, "SendMessage", {"message": msg([{"text": "INTRUDER"}], taskId=task["id"])}
        )
        assert refused["error"]["code"] == -32004, refused
        streamed = {"message": msg([{"text": "INTRUDER2"}], taskId=task["id"])}
        refused_stream = await rpc(http, url, "SendStreamingMessage", streamed)  # an error, before any stream
        assert refused_stream["error"]["code"] == -32004, refused_stream
        got = await result(http, url, "GetTask", {"id": task["id"]})
        after = (live.bytes, len(live.messages))
        go_on(label)
    users = [m["parts"] for m in got["history"] if m["role"] == "ROLE_USER"]
    assert users == [[{"text": label}]], users
    assert after == before


async def test_a_streaming_repeat_of_a_quiet_task_is_the_same_message() -> None:
    """The first sender of a message whose skill answers with a Message alone gets that Message; a streaming
    repeat sent while it runs gets the same Message, and never a Task first (a task that never exists)."""
    agent, app = build(dedupe=True)
    with serve(app) as url:
        label = f"quiet-{uuid.uuid4().hex[:6]}"
        same = msg([{"text": label}], metadata={"skill": "ponder"})
        async with httpx.AsyncClient(timeout=30, headers=ADA) as http:
            first = asyncio.ensure_future(result(http, url, "SendMessage", {"message": same}))
            await eventually(lambda: label in gates, "the skill to run")
            repeat = asyncio.ensure_future(sse(http, url, "SendStreamingMessage", {"message": same}))
            await eventually(
                lambda: any(x.subscribers for x in agent.a2a_app.ops.tasks.live.values()), "the repeat"
            )
            go_on(label)
            one = await asyncio.wait_for(first, 10)
            events = await asyncio.wait_for(repeat, 10)
    assert one["message"]["parts"] == [{"text": f"thought about {label}"}], one
    assert events == [{"message": one["message"]}], events


async def test_a_0_3_streaming_repeat_of_a_quiet_task_is_the_same_message() -> None:
    agent, app = build(dedupe=True)
    with serve(app) as url:
        label = f"quiet03-{uuid.uuid4().hex[:6]}"
        v03 = {
            "kind": "message",
            "messageId": uuid.uuid4().hex,
            "role": "user",
            "parts": [{"kind": "text", "text": label}],
            "metadata": {"skill": "ponder"},
        }
        headers = {"a2a-version": "0.3"}
        async with httpx.AsyncClient(timeout=30, headers=ADA) as http:
            sent = {"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": v03}}
            first = asyncio.ensure_future(http.post(f"{url}/a2a", json=sent, headers=headers))
            await eventually(lambda: label in gates, "the skill to run")

            async def repeat() -> list[dict[str, object]]:
                body = {"jsonrpc": "2.0", "id": 2, "method": "message/stream", "params": {"message": v03}}
                async with http.stream("POST", f"{url}/a2a", json=body, headers=headers) as response:
                    return [
                        json.loads(x[5:])["result"]
                        async for x in response.aiter_lines()
                        if x.startswith("data:")
                    ]

            streaming = asyncio.ensure_future(repeat())
            await eventually(
                lambda: any(x.subscribers for x in agent.a2a_app.ops.tasks.live.values()), "the repeat"
            )
            go_on(label)
            one = (await asyncio.wait_for(first, 10)).json()["result"]
            events = await asyncio.wait_for(streaming, 10)
    assert one["kind"] == "message", one
    assert [e["kind"] for e in events] == ["message"], events
    assert events[0]["parts"] == one["parts"]


async def test_a_return_immediately_repeat_of_a_quiet_message_names_a_task_that_exists() -> None:
    """An immediate repeat gets the task at once, as a first immediate send does; the first sender still gets
    the Message alone, and the task the repeat named exists: completed, with that message as its status."""
    _agent, app = build(dedupe=True)
    with serve(app) as url:
        label = f"quiet-{uuid.uuid4().hex[:6]}"
        same = msg([{"text": label}], metadata={"skill": "ponder"})
        async with httpx.AsyncClient(timeout=30, headers=ADA) as http:
            first = asyncio.ensure_future(result(http, url, "SendMessage", {"message": same}))
            await eventually(lambda: label in gates, "the skill to run")
            now = await result(
                http, url, "SendMessage", {"message": same, "configuration": {"returnImmediately": True}}
            )
            while_running = await result(http, url, "GetTask", {"id": now["task"]["id"]})
            go_on(label)
            one = await asyncio.wait_for(first, 10)
            looked = await result(http, url, "GetTask", {"id": now["task"]["id"]})
    assert one["message"]["parts"] == [{"text": f"thought about {label}"}], one
    assert while_running["id"] == now["task"]["id"]
    assert looked["status"]["state"] == "TASK_STATE_COMPLETED", looked
    assert looked["status"]["message"]["parts"] == one["message"]["parts"]


async def test_an_anonymous_repeat_never_hands_over_another_anonymous_callers_task(server) -> None:  # noqa: F811
    """Anonymous callers share one identity: the same messageId and content from two of them (the TCK's fixed
    or counter ids) are two messages, two tasks; neither can answer the other's question."""
    _, url = server
    same = msg([{"data": {"item": "payroll"}}], message_id="1", metadata={"skill": "approve"})
    async with httpx.AsyncClient(timeout=30) as first, httpx.AsyncClient(timeout=30) as second:
        mine = (await result(first, url, "SendMessage", {"message": same}))["task"]
        theirs = (await result(second, url, "SendMessage", {"message": same}))["task"]
    assert mine["status"]["state"] == theirs["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert theirs["id"] != mine["id"], "another anonymous caller got this caller's task"
