"""The A2A bridge's transport failures are transport failures (issue 24, must-have 5): a peer that refuses
connections, sheds load (429) or breaks a stream is retryable and counts toward the breaker; a stream cut, or
an event garbled, after the peer named its task is recovered by reading that task back, never by sending the
message again; and a peer lost for good while it holds a task hands the caller that task, not a call to repeat.

Real peers: the a2a-sdk 1.3.0 agent in its own process (stopped mid-test), and a hostile A2A server on a
loopback socket whose answers a test scripts (tests/test_bridges_hostile.py)."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from agentmw import Agent
from agentmw.bridges import A2A_VERSION, A2APeer, Breaker, Egress
from agentmw.testing import McpTestClient
from tests.bridges.conftest import A2A_APP
from tests.bridges.peers.process import PeerProcess, start_peer
from tests.test_bridges_hostile import HostilePeer, completed, text_of
from tests.waiting import eventually

LOOPBACK = Egress(allow_hosts=["127.0.0.1"])


@pytest.fixture
def own_peer(tmp_path: Path) -> Iterator[PeerProcess]:
    """An a2a-sdk 1.3.0 peer of this test's own, which the test may stop (the shared one must live on)."""
    peer = start_peer(A2A_APP, tmp_path, {"PEER_A2A_VERSION": "1.0"}, name="a2a-peer-own")
    try:
        yield peer
    finally:
        peer.stop()


@pytest.fixture
def hostile() -> Iterator[HostilePeer]:
    from tests.conftest import serve

    peer = HostilePeer()
    with serve(peer.app()) as url:
        peer.url = url
        yield peer


def bridged(url: str, breaker: Breaker, **options: Any) -> tuple[A2APeer, Agent]:
    peer = A2APeer(url, version=A2A_VERSION, name="legal", allow=LOOPBACK, breaker=breaker, **options)
    agent = Agent("front", store="memory://")
    agent.bridge(peer)
    return peer, agent


def strict_breaker() -> Breaker:
    """Opens at the first failure: a test sees at once whether a call counted as one."""
    return Breaker(failure_rate=0.5, min_calls=1, window_seconds=60, open_seconds=60)


# --- a peer that is down -----------------------------------------------------------------------------------------


async def test_a_dead_peer_is_retryable_and_opens_the_breaker(own_peer: PeerProcess) -> None:
    peer, agent = bridged(
        own_peer.url, Breaker(failure_rate=0.5, min_calls=3, window_seconds=60, open_seconds=60)
    )
    async with McpTestClient(agent.asgi()) as mcp:
        assert (await mcp.call_tool("echo", {"text": "up"}))["isError"] is False
        own_peer.stop()  # connections are refused from now on
        for _ in range(2):
            down = await mcp.call_tool("echo", {"text": "down"})
            assert down["isError"] is True and "could not be reached" in text_of(down), down
            assert "Retry after 5 seconds." in text_of(down) and "permanent" not in text_of(down)
        assert peer.breaker.state == "open"  # 2 failures of 3 calls
        cut_off = await mcp.call_tool("echo", {"text": "again"})
    assert cut_off["isError"] is True and "failing too often" in text_of(cut_off)


async def test_a_peer_lost_while_it_holds_a_task_hands_back_the_task(own_peer: PeerProcess) -> None:
    peer, agent = bridged(own_peer.url, strict_breaker(), skills=["slow"], wait_seconds=60)
    async with McpTestClient(agent.asgi()) as mcp:
        await agent.start_bridges()
        async with httpx_client() as http:

            async def working() -> bool:
                tasks = (await http.get(f"{own_peer.base}/_test/counter")).json()["tasks"]
                return bool(tasks)

            call = asyncio.ensure_future(mcp.call_tool("slow", {"text": "go"}))
            await eventually(working, "the peer to start the slow task", timeout=20)
        own_peer.stop()  # the stream breaks, and every way to read the task back is refused
        result = await asyncio.wait_for(call, 60)
        text = text_of(result)
        assert result["isError"] is True and "could not be reached" in text, result
        assert "Do not repeat the call" in text and "legal.await_task" in text
        assert "Retry after" in text and "permanent" not in text
        assert peer.breaker.state == "open"  # a transport failure, counted against the peer
        task_id = re.search(r"task_id='([^']+)'", text).group(1)  # type: ignore[union-attr]
        # the handle is this caller's: await_task takes it (and says the peer is still unreachable)
        peer.breaker = Breaker()
        again = await mcp.call_tool("legal.await_task", {"task_id": task_id, "wait_seconds": 30})
    assert "Unknown task" not in text_of(again)
    assert again["isError"] is True and "could not be reached" in text_of(again)


def httpx_client() -> httpx.AsyncClient:
    return httpx.AsyncClient(timeout=10)


async def test_a_peer_shedding_load_is_retryable_after_its_own_delay(hostile: HostilePeer) -> None:
    async def busy(request: Request, body: dict[str, Any]) -> Response:
        return Response("slow down", status_code=429, headers={"Retry-After": "7"})

    hostile.rpc = busy
    peer, agent = bridged(hostile.url, strict_breaker())
    async with McpTestClient(agent.asgi()) as mcp:
        result = await mcp.call_tool("work", {"text": "x"})
    assert result["isError"] is True and "could not be reached (HTTP 429)" in text_of(result)
    assert "Retry after 7 seconds." in text_of(result)
    assert peer.breaker.state == "open"


async def test_a_malformed_answer_is_permanent_and_counted_against_the_peer(hostile: HostilePeer) -> None:
    async def garbage(request: Request, body: dict[str, Any]) -> Response:
        return Response("<html>not json-rpc</html>", media_type="text/html")

    hostile.rpc = garbage
    peer, agent = bridged(hostile.url, strict_breaker())
    async with McpTestClient(agent.asgi()) as mcp:
        result = await mcp.call_tool("work", {"text": "x"})
    # the same request would get the same answer, and may have run: not one to repeat
    assert result["isError"] is True and "not A2A 1.0" in text_of(result)
    assert peer.breaker.state == "open"  # but the peer's fault, counted


# --- streams cut, or garbled, after the task was named ------------------------------------------------------------

TASK = {"id": "t-1", "contextId": "c-1"}


def event(result: dict[str, Any]) -> bytes:
    return f"data: {json.dumps({'jsonrpc': '2.0', 'id': 1, 'result': result})}\n\n".encode()


class Cut(Exception):
    """Raised inside the streaming body: uvicorn drops the connection mid-body."""


def streaming_peer(hostile: HostilePeer, after_task: bytes | None) -> list[str]:
    """The hostile peer streams: the task (working), then ``after_task`` (None: the connection is cut), and
    keeps the task to be read back: SubscribeToTask and the first GetTask fail (503), the next GetTask has it
    completed. Returns the methods the bridge called, in order."""
    hostile.card = hostile.default_card(capabilities={"streaming": True})
    called: list[str] = []

    async def stream() -> AsyncIterator[bytes]:
        yield event({"task": {**TASK, "status": {"state": "TASK_STATE_WORKING"}}})
        if after_task is None:
            raise Cut("the connection drops")
        yield after_task

    async def rpc(request: Request, body: dict[str, Any]) -> Response:
        called.append(body["method"])
        if body["method"] == "SendStreamingMessage":
            return StreamingResponse(stream(), media_type="text/event-stream")
        if body["method"] == "SubscribeToTask" or called.count("GetTask") == 1:
            return Response("down", status_code=503)
        done = {
            **TASK,
            "status": {"state": "TASK_STATE_COMPLETED"},
            "artifacts": [{"artifactId": "a-1", "name": "answer", "parts": [{"text": "the whole answer"}]}],
        }
        return JSONResponse({"jsonrpc": "2.0", "id": body["id"], "result": done})

    hostile.rpc = rpc
    return called


@pytest.mark.parametrize(
    "after_task",
    [None, b"data: {not json at all\n\n", event({"statusUpdate": {"taskId": "t-1", "status": "lost"}})],
    ids=["cut", "not-json", "malformed-update"],
)
async def test_a_stream_broken_after_the_task_was_named_is_read_back(
    hostile: HostilePeer, after_task: bytes | None
) -> None:
    called = streaming_peer(hostile, after_task)
    peer, agent = bridged(hostile.url, strict_breaker(), wait_seconds=30)
    async with McpTestClient(agent.asgi()) as mcp:
        result = await mcp.call_tool("work", {"text": "x"})
    assert result["isError"] is False, text_of(result)
    assert "the whole answer" in text_of(result)
    assert called.count("SendStreamingMessage") == 1  # the message was sent once: the skill ran once
    assert called[-1] == "GetTask"
    assert peer.breaker.state == "closed"  # the call ended answered: a success, however it got there


async def test_a_refused_stream_before_the_task_is_named_is_retried_only_with_retries(
    hostile: HostilePeer,
) -> None:
    hostile.card = hostile.default_card(capabilities={"streaming": True})
    bodies: list[dict[str, Any]] = []

    async def rpc(request: Request, body: dict[str, Any]) -> Response:
        bodies.append(body)
        if len(bodies) == 1:
            return Response("down", status_code=503)
        return await completed("second time")(request, body)

    hostile.rpc = rpc
    _, agent = bridged(hostile.url, Breaker(), retries=1)
    async with McpTestClient(agent.asgi()) as mcp:
        result = await mcp.call_tool("work", {"text": "x"})
    assert result["isError"] is False and "second time" in text_of(result)
    keys = [b["params"]["message"]["metadata"]["idempotencyKey"] for b in bodies]
    assert len(bodies) == 2 and keys[0] == keys[1]  # the same message, its key the same
