"""AG-UI edges over HTTP: bad bodies, capabilities, resume rules, state arbitration, reconnect, backpressure, cancel."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from agentmw.agui.settings import AguiSettings
from tests import agui_app
from tests.conftest import serve
from tests.waiting import eventually


def run_body(thread: str, run: str, text: str = "hi", **extra: object) -> dict:
    return {
        "threadId": thread,
        "runId": run,
        "messages": [{"id": f"u-{run}", "role": "user", "content": text}],
        "state": extra.pop("state", {}),
        "tools": [],
        "context": [],
        "forwardedProps": extra.pop("props", {}),
        **extra,
    }


def frames(text: str) -> list[dict]:
    return [json.loads(line[5:]) for line in text.splitlines() if line.startswith("data:")]


@pytest.fixture
def app():
    return agui_app.build()[1]


@pytest.fixture(autouse=True)
def fresh_log():
    """Each test reads only what it logged itself, even when the suite runs twice in one process (mutmut)."""
    agui_app.log.clear()


def client(app) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1:8000", timeout=10
    )


async def test_bad_bodies_get_422_before_any_stream(app) -> None:
    async with client(app) as http:
        missing = await http.post("/agui/chat", json={"threadId": "t"})
        assert missing.status_code == 422 and missing.headers["content-type"] == "application/json"
        assert {tuple(e["loc"]) for e in missing.json()["detail"]} >= {("runId",), ("messages",)}
        assert (await http.post("/agui/chat", content="{nope")).status_code == 422
        assert (await http.post("/agui/unknown", json=run_body("t", "r"))).status_code == 404
        assert (await http.get("/agui/chat")).status_code == 405


async def test_capabilities_are_declared(app) -> None:
    async with client(app) as http:
        caps = (await http.get("/agui/approval/capabilities")).json()
    assert caps["humanInTheLoop"]["interrupts"] is True and caps["state"]["deltas"] is True
    assert caps["transport"] == {
        "streaming": True,
        "websocket": False,
        "httpBinary": False,
        "pushNotifications": False,
        "resumable": True,
    }
    from ag_ui.core import AgentCapabilities

    AgentCapabilities.model_validate(caps)


async def test_stream_headers_and_framing(app) -> None:
    async with client(app) as http:
        response = await http.post("/agui/chat", json=run_body("t-frame", "r-frame"))
    assert response.headers["content-type"] == "text/event-stream"
    assert (
        response.headers["cache-control"] == "no-cache, no-transform"
        and response.headers["x-accel-buffering"] == "no"
    )
    assert "\r" not in response.text and response.text.endswith("\n\n")
    ids = [int(line[4:]) for line in response.text.splitlines() if line.startswith("id: ")]
    assert ids == list(range(1, len(ids) + 1))


async def test_resume_must_answer_every_interrupt_and_only_them(app) -> None:
    async with client(app) as http:
        first = frames((await http.post("/agui/approval", json=run_body("t-r", "r1", "pc"))).text)
        interrupt = first[-1]["outcome"]["interrupts"][0]
        unanswered = frames((await http.post("/agui/approval", json=run_body("t-r", "r2", "pc"))).text)
        assert unanswered[-1]["type"] == "RUN_ERROR" and unanswered[-1]["code"] == "INVALID_RESUME"
        wrong = frames(
            (
                await http.post(
                    "/agui/approval",
                    json=run_body(
                        "t-r", "r3", "pc", resume=[{"interruptId": "int-nope", "status": "resolved"}]
                    ),
                )
            ).text
        )
        assert wrong[-1]["code"] == "INVALID_RESUME"
        right = frames(
            (
                await http.post(
                    "/agui/approval",
                    json=run_body(
                        "t-r",
                        "r4",
                        "pc",
                        resume=[
                            {
                                "interruptId": interrupt["id"],
                                "status": "resolved",
                                "payload": {"approved": False},
                            }
                        ],
                    ),
                )
            ).text
        )
        assert right[-1]["outcome"] == {"type": "success"}
        text = "".join(e.get("delta", "") for e in right if e["type"] == "TEXT_MESSAGE_CONTENT")
        assert text == "pc: not bought"


async def test_missing_arguments_interrupt_then_resume_with_them(app) -> None:
    async with client(app) as http:
        body = run_body("t-args", "a1")
        body["messages"] = []
        asked = frames((await http.post("/agui/flood", json=body)).text)
        [interrupt] = asked[-1]["outcome"]["interrupts"]
        assert interrupt["reason"] == "input_required" and "count" in interrupt["message"]
        assert interrupt["responseSchema"]["required"] == ["count"]
        resumed = frames(
            (
                await http.post(
                    "/agui/flood",
                    json={
                        **body,
                        "runId": "a2",
                        "resume": [
                            {"interruptId": interrupt["id"], "status": "resolved", "payload": {"count": 3}}
                        ],
                    },
                )
            ).text
        )
        assert "".join(e.get("delta", "") for e in resumed if e["type"] == "TEXT_MESSAGE_CONTENT") == "0 1 2 "


async def test_the_server_arbitrates_state_versions(app) -> None:
    async with client(app) as http:
        first = frames((await http.post("/agui/planner", json=run_body("t-state", "s1"))).text)
        state = {"cart": [{"sku": "MON-27", "price": 449.0}], "total": 449.0}
        assert [e for e in first if e["type"] == "STATE_DELTA"]
        stale = frames(
            (
                await http.post(
                    "/agui/planner",
                    json=run_body("t-state", "s2", state={"cart": []}, props={"stateVersion": 0}),
                )
            ).text
        )
        assert [e["type"] for e in stale] == ["RUN_STARTED", "STATE_SNAPSHOT", "RUN_ERROR"]
        assert stale[1]["snapshot"] == state and stale[-1]["code"] == "STATE_VERSION_CONFLICT"
        changed_without_version = frames(
            (await http.post("/agui/planner", json=run_body("t-state", "s3", state={"cart": []}))).text
        )
        assert changed_without_version[-1]["code"] == "STATE_VERSION_CONFLICT"
        same = frames((await http.post("/agui/planner", json=run_body("t-state", "s4", state=state))).text)
        assert same[-1]["type"] == "RUN_FINISHED"


async def test_reconnect_gets_the_rest_or_snapshots() -> None:
    agent, app = agui_app.build(agui=AguiSettings(buffer_events=8))
    with serve(app) as url:
        async with httpx.AsyncClient(base_url=url, timeout=10) as http:
            body = run_body("t-re", "re1", props={"detached": True, "arguments": {"count": 50}})
            seen: list[int] = []
            async with http.stream("POST", "/agui/flood", json=body) as response:
                async for line in response.aiter_lines():
                    if line.startswith("id: "):
                        seen.append(int(line[4:]))
                    if seen == [1, 2, 3]:
                        break  # drop the connection after the third event; the run is detached
            assert seen == [1, 2, 3], "the connection was dropped right after the third event"
            run = await eventually(
                lambda: (r := agent.agui_app.runs.get("re1")) is not None and r.ended and r,
                "the detached run to end",
            )
            last = run.sequencer.seq
            tail = await http.get("/agui/flood/runs/re1/events", params={"after": last - 2})
            tail_events = frames(tail.text)
            assert [e["type"] for e in tail_events][-1] == "RUN_FINISHED" and len(tail_events) == 2
            behind = await http.get("/agui/flood/runs/re1/events", headers={"last-event-id": "3"})
            kinds = [e["type"] for e in frames(behind.text)]
            assert kinds[:2] == ["STATE_SNAPSHOT", "MESSAGES_SNAPSHOT"] and kinds[-1] == "RUN_FINISHED"
            assert len(kinds) == 2 + 8  # the snapshots, then the whole (bounded) buffer
            assert (await http.get("/agui/flood/runs/nope/events")).status_code == 404


async def test_a_consumer_that_stops_reading_is_cut_off_and_memory_stays_bounded() -> None:
    agent, app = agui_app.build(agui=AguiSettings(consumer_limit=64, buffer_events=32))
    sent: list[int] = []
    stuck = asyncio.Event()

    async def send(message: dict) -> None:
        if message["type"] == "http.response.body":
            sent.append(len(message.get("body", b"")))
            if len(sent) >= 2:
                await stuck.wait()  # a client whose socket never drains

    body = json.dumps(run_body("t-slow", "sl1", props={"arguments": {"count": 100_000}})).encode()
    received = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive() -> dict:
        if received:
            return received.pop()
        await asyncio.Event().wait()
        return {}

    scope = {
        "type": "http",
        "method": "POST",
        "path": "/agui/flood",
        "root_path": "",
        "query_string": b"",
        "headers": [(b"host", b"127.0.0.1"), (b"content-type", b"application/json")],
        "scheme": "http",
        "server": ("127.0.0.1", 80),
        "client": ("127.0.0.1", 1),
    }
    serving = asyncio.create_task(app(scope, receive, send))
    run = await eventually(
        lambda: (r := agent.agui_app.runs.get("sl1")) is not None and r.ended and r,
        "the run of the stuck consumer to end",
    )
    assert run.ended and run.sequencer.ended
    assert len(sent) >= 2, "the consumer was stuck on a write"
    assert not run.consumers, "the stuck consumer was disconnected"
    assert len(run.buffer) <= 32
    assert run.sequencer.seq < 100_000, "the run was cancelled when its only consumer fell behind"
    stuck.set()
    serving.cancel()
    await asyncio.gather(serving, return_exceptions=True)


async def test_cancel_endpoint_reaches_the_coroutine(app) -> None:
    with serve(app) as url:
        async with httpx.AsyncClient(base_url=url, timeout=10) as http:
            cancel: httpx.Response | None = None
            finished: dict | None = None
            async with http.stream(
                "POST", "/agui/slow", json=run_body("t-c", "c1", "via-endpoint")
            ) as response:
                async for line in response.aiter_lines():
                    if "ACTIVITY_SNAPSHOT" in line and cancel is None:
                        cancel = await http.post("/agui/slow/runs/c1/cancel")
                    if "RUN_FINISHED" in line:
                        finished = json.loads(line[5:])
                        break
            assert cancel is not None and cancel.status_code == 200, (
                "the run reported progress and was cancelled"
            )
            assert finished is not None and finished["outcome"] == {"type": "cancelled"}
            assert "slow:via-endpoint:cancelled" in agui_app.log
            again = await http.post("/agui/slow/runs/c1/cancel")
            assert again.status_code == 409
