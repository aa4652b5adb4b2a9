"""A cancelled call of a bridged A2A skill cancels the remote task too, on every face: A2A ``CancelTask`` (also of a task parked on
the remote's question), MCP ``notifications/cancelled`` or a closed 2026-07-28 call stream (the official ``mcp``
client abandoning its call) and an AG-UI client that disconnects. The remote task is asked of the peer itself (``GetTask`` on the a2a-sdk 1.3.0 agent): it must end
``CANCELED``, and soon, never run on to ``COMPLETED`` as an abandoned wait would let it."""

from __future__ import annotations

import time
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from agentmw import Agent
from agentmw.bridges import A2A_VERSION, A2APeer, Egress
from agentmw.bridges.a2a import CANCEL_SECONDS
from tests.bridges.peers.process import PeerProcess
from tests.conftest import serve
from tests.test_agui_wire import run_body
from tests.waiting import eventually

LOOPBACK = Egress(allow_hosts=["127.0.0.1"])
# the slow skill completes after about 3 s; a cancel that reached it ends it well before
BOUND = CANCEL_SECONDS + 2.0


def legal(peer: PeerProcess, version: str = A2A_VERSION, store: str = "memory://") -> Agent:
    agent = Agent("front", store=store)
    agent.bridge(
        A2APeer(peer.url, version=version, name="legal", allow=LOOPBACK, skills=["slow"], wait_seconds=30)
    )
    return agent


def slow_send(message_id: str) -> dict[str, Any]:
    """A SendMessage to the bridged slow skill that answers at once with the task."""
    return {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {
            "message": {
                "messageId": message_id,
                "role": "ROLE_USER",
                "parts": [{"text": "go"}],
                "metadata": {"skill": "slow"},
            },
            "configuration": {"returnImmediately": True},
        },
    }


async def counter(peer: PeerProcess) -> dict[str, Any]:
    async with httpx.AsyncClient(timeout=10) as http:
        return (await http.get(f"{peer.base}/_test/counter")).json()  # type: ignore[no-any-return]


async def remote_state(peer: PeerProcess, task_id: str, path: str = "/a2a") -> str:
    """The remote task's state, as the peer itself tells it (``GetTask`` on the peer, not through agentmw)."""
    body = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": task_id}}
    async with httpx.AsyncClient(timeout=10) as http:
        answer = (await http.post(f"{peer.base}{path}", json=body, headers={"A2A-Version": "1.0"})).json()
    return str(answer["result"]["status"]["state"])


async def started_task(peer: PeerProcess, before: dict[str, Any]) -> str:
    """The id of the remote task the bridged call started, once the peer reports it working."""

    async def new() -> str | None:
        tasks = (await counter(peer))["tasks"]
        return tasks[-1] if len(tasks) > len(before["tasks"]) else None

    task_id = await eventually(new, "the peer to start the bridged slow task", timeout=20)
    await eventually(
        lambda: _is(peer, task_id, "TASK_STATE_WORKING"), "the remote task to be working", timeout=20
    )
    return task_id


async def _is(peer: PeerProcess, task_id: str, state: str) -> bool:
    return await remote_state(peer, task_id) == state


async def canceled_on_the_peer(peer: PeerProcess, task_id: str, before: dict[str, Any]) -> None:
    await eventually(
        lambda: _is(peer, task_id, "TASK_STATE_CANCELED"),
        f"the remote task {task_id} to end canceled on the peer",
        timeout=BOUND,
    )
    assert (await counter(peer))["cancels"] == before["cancels"] + 1  # the executor was told, once


async def test_cancel_task_on_agentmw_cancels_the_remote_task(a2a_peer: PeerProcess) -> None:
    agent = legal(a2a_peer)
    before = await counter(a2a_peer)
    send = slow_send("m-cancel")
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=agent.asgi()), base_url="http://127.0.0.1", timeout=30
    ) as http:
        task = (await http.post("/a2a", json=send, headers={"A2A-Version": "1.0"})).json()["result"]["task"]
        remote = await started_task(a2a_peer, before)
        cancel = {"jsonrpc": "2.0", "id": 2, "method": "CancelTask", "params": {"id": task["id"]}}
        started = time.monotonic()
        canceled = (await http.post("/a2a", json=cancel, headers={"A2A-Version": "1.0"})).json()["result"]
        took = time.monotonic() - started
        assert canceled["status"]["state"] == "TASK_STATE_CANCELED"  # the caller: nothing more will happen
        assert took < BOUND, f"the local cancel was held {took:.1f} s"
        await canceled_on_the_peer(a2a_peer, remote, before)
        get = {"jsonrpc": "2.0", "id": 3, "method": "GetTask", "params": {"id": task["id"]}}
        local = (await http.post("/a2a", json=get, headers={"A2A-Version": "1.0"})).json()["result"]
    assert local["status"]["state"] == "TASK_STATE_CANCELED"


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_an_abandoned_mcp_call_cancels_the_remote_task(a2a_peer: PeerProcess, mode: str) -> None:
    """The official client abandons its call: ``notifications/cancelled`` in the handshake era, the call's own
    stream closed at 2026-07-28 (that revision's cancellation)."""
    agent = legal(a2a_peer)
    before = await counter(a2a_peer)
    with serve(agent.asgi()) as url:
        http = httpx2.AsyncClient(timeout=30)
        client = Client(streamable_http_client(f"{url}/mcp", http_client=http), mode=mode, cache=None)
        async with client:
            results: list[Any] = []
            async with anyio.create_task_group() as group:

                async def call() -> None:
                    results.append(await client.call_tool("slow", {"text": "go"}))

                group.start_soon(call)
                remote = await started_task(a2a_peer, before)
                group.cancel_scope.cancel()  # the client abandons the call: notifications/cancelled
            assert results == []
            await canceled_on_the_peer(a2a_peer, remote, before)
            # the session goes on: the next call is served as usual
            assert (await client.list_tools()).tools


async def test_an_agui_disconnect_cancels_the_remote_task(a2a_peer: PeerProcess) -> None:
    agent = legal(a2a_peer)
    before = await counter(a2a_peer)
    body = run_body("t-cancel", "r-cancel", props={"arguments": {"text": "go"}})
    body["messages"] = []
    with serve(agent.asgi()) as url:
        async with (
            httpx.AsyncClient(base_url=url, timeout=30) as http,
            http.stream("POST", "/agui/slow", json=body) as response,
        ):
            assert response.status_code == 200
            remote = await started_task(a2a_peer, before)
        # the stream is closed: the run is cancelled, and with it the remote task
        await canceled_on_the_peer(a2a_peer, remote, before)


async def test_cancelling_a_task_parked_on_the_remote_question_cancels_the_remote_task(
    a2a_peer: PeerProcess,
) -> None:
    """The remote asked a question (INPUT_REQUIRED, relayed in-band); the caller cancels instead of answering:
    the remote task, parked on its question too, is cancelled, not left waiting for an answer forever."""
    agent = Agent("front", store="memory://")
    agent.bridge(A2APeer(a2a_peer.url, version=A2A_VERSION, name="legal", allow=LOOPBACK, skills=["ask"]))
    before = await counter(a2a_peer)
    send = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {
            "message": {
                "messageId": "m-parked",
                "role": "ROLE_USER",
                "parts": [{"text": "review"}],
                "metadata": {"skill": "ask"},
            }
        },
    }
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=agent.asgi()), base_url="http://127.0.0.1", timeout=30
    ) as http:
        task = (await http.post("/a2a", json=send, headers={"A2A-Version": "1.0"})).json()["result"]["task"]
        assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", task
        remote = (await counter(a2a_peer))["tasks"][-1]
        assert remote not in before["tasks"]
        assert await remote_state(a2a_peer, remote) == "TASK_STATE_INPUT_REQUIRED"
        cancel = {"jsonrpc": "2.0", "id": 2, "method": "CancelTask", "params": {"id": task["id"]}}
        canceled = (await http.post("/a2a", json=cancel, headers={"A2A-Version": "1.0"})).json()["result"]
    assert canceled["status"]["state"] == "TASK_STATE_CANCELED"
    await canceled_on_the_peer(a2a_peer, remote, before)


async def test_a_shutdown_leaves_the_remote_task_running_for_the_replay(
    a2a_peer: PeerProcess, tmp_path: Any
) -> None:
    """A shutdown is not a cancel: the task is journaled, so another process (or this one after a restart)
    carries it on and finds the remote task in the journal. Cancelling it on the peer would leave that replay
    a CANCELED remote task for work nobody cancelled."""
    agent = legal(a2a_peer, store=f"sqlite://{tmp_path / 'front.db'}")
    before = await counter(a2a_peer)
    send = slow_send("m-shutdown")
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=agent.asgi()), base_url="http://127.0.0.1", timeout=30
    ) as http:
        task = (await http.post("/a2a", json=send, headers={"A2A-Version": "1.0"})).json()["result"]["task"]
        assert task["status"]["state"] in ("TASK_STATE_SUBMITTED", "TASK_STATE_WORKING"), task
        remote = await started_task(a2a_peer, before)
        await agent.a2a_app.ops.tasks.close()  # the process shuts down while the remote task works
    assert await remote_state(a2a_peer, remote) == "TASK_STATE_WORKING"
    assert (await counter(a2a_peer))["cancels"] == before["cancels"]
    # and it runs on to its end on the peer, for the replay to read
    await eventually(
        lambda: _is(a2a_peer, remote, "TASK_STATE_COMPLETED"), "the remote task to complete", timeout=20
    )
