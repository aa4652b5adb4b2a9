"""``A2APeer(version="0.3")`` against a real A2A 0.3 agent: a2a-sdk 0.3.26's server classes
(tests/bridges/peers/a2a03_peer.py) in their own venv (``.deps/a2a03``), as the agents in the field that pin
``a2a-sdk<1.0`` are built. The bridge speaks 0.3 JSON-RPC to it (``message/stream``, ``tasks/get``,
``tasks/cancel``, ``tasks/resubscribe``; ``kind`` on objects and parts; ``A2A-Version: 0.3``) and serves its
skills on every face of agentmw, with the same features as a 1.0 peer: streaming, input-required, cancel,
framing, egress. A pin is exact, both ways: 1.0 never reaches a 0.3-only card, 0.3 never a 1.0-only one.

Without ``.deps/a2a03`` these tests skip with the way to install it; under ``CI=true`` they fail."""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentmw import Agent
from agentmw.bridges import A2A_VERSION, A2APeer, BridgeError, Egress, VersionMismatch
from agentmw.safety.framing import unescape
from agentmw.testing import McpTestClient
from tests.bridges.peers.a2a03_skills import ASK_QUESTION, FILE_BYTES, INJECTION, SKILLS, SLOW_STEPS
from tests.bridges.peers.process import ROOT, PeerProcess, start_peer
from tests.conftest import require_tool
from tests.test_agui_wire import frames, run_body
from tests.waiting import eventually

LOOPBACK = Egress(allow_hosts=["127.0.0.1"])
PEER_APP = "tests.bridges.peers.a2a03_peer:create_app"
PYTHON = Path(os.environ.get("AGENTMW_DEPS") or ROOT / ".deps").absolute() / "a2a03" / "bin" / "python"


@pytest.fixture(scope="module")
def peer03(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PeerProcess]:
    python = require_tool(
        "a2a-sdk 0.3 (its venv .deps/a2a03)", PYTHON, "run `scripts/setup` to install it, or set AGENTMW_DEPS"
    )
    peer = start_peer(PEER_APP, tmp_path_factory.mktemp("a2a03"), {}, name="a2a-peer-0.3", python=python)
    try:
        yield peer
    finally:
        peer.stop()


class Recording(httpx.AsyncBaseTransport):
    """The bridge's own requests to the peer, as they went out (method and ``A2A-Version``)."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.sent: list[tuple[str, str | None]] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.method == "POST":
            self.sent.append((json.loads(request.content)["method"], request.headers.get("a2a-version")))
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


def bridged(url: str, **options: Any) -> Agent:
    agent = Agent("front", store="memory://")
    agent.bridge(A2APeer(url, version="0.3", name="legacy", allow=LOOPBACK, **options))
    return agent


def text_of(result: dict[str, Any]) -> str:
    return "".join(block.get("text", "") for block in result["content"] if block["type"] == "text")


def http(agent: Agent) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=agent.asgi()), base_url="http://127.0.0.1", timeout=60
    )


def send(skill: str, parts: list[dict[str, Any]], message_id: str, **params: Any) -> dict[str, Any]:
    message = {"messageId": message_id, "role": "ROLE_USER", "parts": parts, "metadata": {"skill": skill}}
    return {
        "jsonrpc": "2.0",
        "id": 1,
        "method": params.pop("method", "SendMessage"),
        "params": {"message": {**message, **params.pop("message", {})}, **params},
    }


async def counter(peer: PeerProcess) -> dict[str, Any]:
    async with httpx.AsyncClient(timeout=10) as client:
        return (await client.get(f"{peer.base}/_test/counter")).json()  # type: ignore[no-any-return]


async def remote_state(peer: PeerProcess, task_id: str) -> str:
    """The remote task's state as the 0.3 peer itself tells it (``tasks/get`` on the peer)."""
    body = {"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {"id": task_id}}
    async with httpx.AsyncClient(timeout=10) as client:
        answer = (await client.post(f"{peer.url}/a2a", json=body, headers={"A2A-Version": "0.3"})).json()
    return str(answer["result"]["status"]["state"])


# --- discovery and version pins ---------------------------------------------------------------------------------


async def test_the_card_of_a_0_3_agent_is_read_and_its_skills_bridged(peer03: PeerProcess) -> None:
    recording = Recording()
    peer = A2APeer(peer03.url, version="0.3", name="legacy", allow=LOOPBACK, transport=recording)
    agent = Agent("front", store="memory://")
    agent.bridge(peer)
    await agent.start_bridges()
    assert set(agent.skills) == set(SKILLS) and set(SKILLS) <= set(agent.tools)
    assert "legacy.await_task" in agent.tools
    assert peer.endpoint == f"{peer03.url}/a2a"  # the 0.3 card's url (preferredTransport JSONRPC)
    assert agent.skills["echo"].summary.startswith('<untrusted-data source="A2A peer legacy skill echo"')
    async with McpTestClient(agent.asgi()) as mcp:
        result = await mcp.call_tool("echo", {"text": "hello"})
    assert result["isError"] is False and "hello" in text_of(result)
    assert recording.sent == [("message/stream", "0.3")]  # 0.3 method names, and the 0.3 version header


async def test_a_1_0_pin_never_falls_back_to_a_0_3_agent(peer03: PeerProcess) -> None:
    agent = Agent("front", store="memory://")
    agent.bridge(A2APeer(peer03.url, version=A2A_VERSION, name="legacy", allow=LOOPBACK))
    with pytest.raises(VersionMismatch, match="offers protocol version \\['0.3.0'\\].*pinned to A2A 1.0"):
        await agent.start_bridges()
    assert "echo" not in agent.tools


async def test_a_0_3_pin_never_goes_up_to_a_1_0_only_agent(a2a_peer: PeerProcess) -> None:
    agent = Agent("front", store="memory://")
    agent.bridge(A2APeer(a2a_peer.url, version="0.3", name="modern", allow=LOOPBACK))
    with pytest.raises(VersionMismatch, match="pinned to A2A 0.3"):
        await agent.start_bridges()
    assert "echo" not in agent.tools


def test_only_the_two_versions_can_be_pinned() -> None:
    with pytest.raises(ValueError, match="A2A 1.0 \\(or 0.3"):
        A2APeer("http://127.0.0.1:1", version="0.2")


async def test_the_egress_policy_holds_for_a_0_3_peer(peer03: PeerProcess) -> None:
    agent = Agent("front", store="memory://")
    agent.bridge(A2APeer(peer03.url, version="0.3", name="legacy"))  # default: public addresses only
    with pytest.raises(BridgeError, match="private, loopback or link-local"):
        await agent.start_bridges()


# --- a call through each face -----------------------------------------------------------------------------------


async def test_a_0_3_skill_through_every_face(peer03: PeerProcess) -> None:
    agent = bridged(peer03.url)
    before = await counter(peer03)
    async with McpTestClient(agent.asgi()) as mcp:
        result = await mcp.call_tool("echo", {"text": "over mcp"})
    assert result["isError"] is False
    assert text_of(result).startswith('<untrusted-data source="A2A peer legacy skill echo"')
    assert "over mcp" in unescape(text_of(result))

    async with http(agent) as client:
        answer = await client.post(
            "/a2a", json=send("echo", [{"text": "over a2a"}], "m-echo"), headers={"A2A-Version": "1.0"}
        )
        task = answer.json()["result"]["task"]
        assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
        assert "over a2a" in unescape(task["artifacts"][0]["parts"][0]["text"])

        body = run_body("t-03", "r-03", props={"arguments": {"text": "over ag-ui"}})
        body["messages"] = []
        events = frames((await client.post("/agui/echo", json=body)).text)
    assert events[-1]["type"] == "RUN_FINISHED", events[-1]
    assert any("over ag-ui" in unescape(json.dumps(e)) for e in events)
    assert (await counter(peer03))["count"] == before["count"] + 3  # one remote task per call


async def test_files_data_and_injection_framing_from_a_0_3_agent(peer03: PeerProcess) -> None:
    agent = bridged(peer03.url)
    async with McpTestClient(agent.asgi()) as mcp:
        files = await mcp.call_tool("files", {"text": "report"})
        injected = await mcp.call_tool("inject", {"text": "x"})
    resource = next(b for b in files["content"] if b["type"] == "resource")
    assert resource["resource"]["mimeType"] == "text/plain"
    assert base64.b64decode(resource["resource"]["blob"]) == FILE_BYTES
    assert files["structuredContent"] == {"total": 42}  # a 0.3 data part stays data
    framed = text_of(injected)
    assert framed.startswith('<untrusted-data source="A2A peer legacy skill inject"')
    assert INJECTION not in framed and INJECTION in unescape(framed)  # escaped inside its frame


# --- streaming, input-required, cancel, cuts --------------------------------------------------------------------


async def test_a_0_3_stream_is_progress_and_one_whole_artifact(peer03: PeerProcess) -> None:
    agent = bridged(peer03.url, skills=["slow"], wait_seconds=30)
    progress: list[dict[str, Any]] = []
    async with McpTestClient(agent.asgi()) as mcp:
        result = await mcp.request(
            "tools/call",
            {"name": "slow", "arguments": {"text": "go"}, "_meta": {"progressToken": "p"}},
            on_notification=progress.append,
        )
    assert result["isError"] is False
    said = [n["params"]["message"] for n in progress if n.get("method") == "notifications/progress"]
    assert [unescape(s).split("\n")[2] for s in said] == [f"step {k} of {SLOW_STEPS}" for k in range(1, 7)]
    assert unescape(text_of(result)).count("chunk") == SLOW_STEPS  # the appended chunks, all of them


async def test_input_required_from_a_0_3_agent_round_trips(peer03: PeerProcess) -> None:
    agent = bridged(peer03.url)
    before = await counter(peer03)
    async with McpTestClient(agent.asgi()) as mcp:  # a model: a handle, then await_task with the answer
        asked = await mcp.call_tool("ask", {"text": "contract"})
        assert asked["isError"] is False and ASK_QUESTION in unescape(text_of(asked))
        handle = json.loads(next(b["text"] for b in asked["content"] if b["text"].startswith("{")))
        assert handle["status"] == "input-required"
        done = await mcp.call_tool("legacy.await_task", {"task_id": handle["taskId"], "answer": "EU"})
    assert done["isError"] is False and "Reviewed for EU" in unescape(text_of(done))

    async with http(agent) as client:  # an A2A caller: asked in-band, answered on the same remote task
        answer = await client.post(
            "/a2a", json=send("ask", [{"text": "review"}], "m-ask"), headers={"A2A-Version": "1.0"}
        )
        task = answer.json()["result"]["task"]
        assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", task
        assert ASK_QUESTION in unescape(task["status"]["message"]["parts"][0]["text"])
        follow = send("ask", [{"text": "France"}], "m-answer", message={"taskId": task["id"]})
        done_a2a = (await client.post("/a2a", json=follow, headers={"A2A-Version": "1.0"})).json()["result"]
    assert done_a2a["task"]["status"]["state"] == "TASK_STATE_COMPLETED", done_a2a
    assert "Reviewed for France" in unescape(done_a2a["task"]["artifacts"][0]["parts"][0]["text"])
    after = await counter(peer03)
    assert (after["count"], after["resumes"]) == (before["count"] + 2, before["resumes"] + 2)


async def test_a_cancel_reaches_the_0_3_agent(peer03: PeerProcess) -> None:
    recording = Recording()
    agent = bridged(peer03.url, skills=["slow"], transport=recording)
    before = await counter(peer03)
    async with http(agent) as client:
        body = send("slow", [{"text": "go"}], "m-cancel", configuration={"returnImmediately": True})
        task = (await client.post("/a2a", json=body, headers={"A2A-Version": "1.0"})).json()["result"]["task"]

        async def started() -> str | None:
            tasks = (await counter(peer03))["tasks"]
            return tasks[-1] if len(tasks) > len(before["tasks"]) else None

        remote = await eventually(started, "the 0.3 peer to start the slow task", timeout=20)
        await eventually(lambda: _is(peer03, remote, "working"), "the remote task working", timeout=20)
        cancel = {"jsonrpc": "2.0", "id": 2, "method": "CancelTask", "params": {"id": task["id"]}}
        canceled = (await client.post("/a2a", json=cancel, headers={"A2A-Version": "1.0"})).json()["result"]
    assert canceled["status"]["state"] == "TASK_STATE_CANCELED"
    await eventually(lambda: _is(peer03, remote, "canceled"), "the 0.3 task canceled on the peer", timeout=7)
    assert (await counter(peer03))["cancels"] == before["cancels"] + 1
    assert ("tasks/cancel", "0.3") in recording.sent


async def _is(peer: PeerProcess, task_id: str, state: str) -> bool:
    return await remote_state(peer, task_id) == state


async def test_a_cut_0_3_stream_is_read_back_not_run_again(peer03: PeerProcess) -> None:
    """The stream is cut after its second event; the task runs on at the peer. The bridge reads it back with
    ``tasks/get`` (a 0.3 resubscribe would make a2a-sdk 0.3 store every later chunk twice), never sends the
    message again, and answers with the whole artifact, each chunk once, in order."""
    recording = Recording()
    agent = bridged(peer03.url, skills=["slow"], wait_seconds=30, transport=recording)
    before = await counter(peer03)
    peer03.cut_next_stream()
    async with McpTestClient(agent.asgi()) as mcp:
        result = await mcp.call_tool("slow", {"text": "go"})
    assert result["isError"] is False, text_of(result)
    chunks = [line for line in unescape(text_of(result)).splitlines() if line.startswith("chunk")]
    assert chunks == [f"chunk {k}" for k in range(1, SLOW_STEPS + 1)]  # nothing lost or doubled at the cut
    assert (await counter(peer03))["count"] == before["count"] + 1  # the skill ran once
    methods = [method for method, _ in recording.sent]
    assert methods[0] == "message/stream" and set(methods[1:]) == {"tasks/get"}, methods


# --- which interface of a card a pin takes ----------------------------------------------------------------------


@pytest.mark.parametrize(("version", "methods"), [("0.3", "message/stream"), ("1.0", "SendStreamingMessage")])
async def test_a_card_offering_both_versions_is_spoken_to_in_the_pinned_one(
    version: str, methods: str
) -> None:
    """agentmw's own card lists JSONRPC at 1.0 and at 0.3 (``supportedInterfaces``): each pin takes its own
    entry, and is answered by agentmw's own face in that version."""
    from agentmw import Context
    from tests.conftest import serve

    remote = Agent("own", store="memory://")

    @remote.skill
    async def steps(ctx: Context, text: str) -> str:
        """Reports three steps, then answers."""
        for k in range(1, 4):
            await ctx.progress(k, 3, f"step {k}")
        return f"done {text}"

    recording = Recording()
    with serve(remote.asgi()) as url:
        agent = Agent("front", store="memory://")
        agent.bridge(A2APeer(url, version=version, name="own", allow=LOOPBACK, transport=recording))
        notes: list[dict[str, Any]] = []
        async with McpTestClient(agent.asgi()) as mcp:
            result = await mcp.request(
                "tools/call",
                {"name": "steps", "arguments": {"text": "x"}, "_meta": {"progressToken": "p"}},
                on_notification=notes.append,
            )
    assert result["isError"] is False and "done x" in unescape(text_of(result))
    said = [unescape(n["params"]["message"]) for n in notes if n.get("method") == "notifications/progress"]
    assert [s.splitlines()[2] for s in said] == ["step 1 (1/3)", "step 2 (2/3)", "step 3 (3/3)"]
    assert recording.sent == [(methods, version)]


async def test_a_0_3_card_s_additional_jsonrpc_interface_is_taken() -> None:
    """A 0.3 card whose preferred transport is gRPC names its JSON-RPC endpoint in ``additionalInterfaces``."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    from tests.conftest import serve

    base: dict[str, str] = {}
    seen: list[dict[str, Any]] = []

    async def card(request: Request) -> JSONResponse:
        return JSONResponse(
            {
                "name": "grpc-first",
                "description": "a 0.3 agent",
                "version": "1",
                "protocolVersion": "0.3.0",
                "url": f"{base['url']}/grpc",
                "preferredTransport": "GRPC",
                "additionalInterfaces": [{"url": f"{base['url']}/jsonrpc", "transport": "JSONRPC"}],
                "capabilities": {"streaming": False},
                "defaultInputModes": ["text/plain"],
                "defaultOutputModes": ["text/plain"],
                "skills": [{"id": "work", "name": "work", "description": "works", "tags": []}],
            }
        )

    async def rpc(request: Request) -> JSONResponse:
        body = await request.json()
        seen.append(body)
        task = {
            "kind": "task",
            "id": "t-1",
            "contextId": "c-1",
            "status": {"state": "completed"},
            "artifacts": [{"artifactId": "a-1", "parts": [{"kind": "text", "text": "worked"}]}],
        }
        return JSONResponse({"jsonrpc": "2.0", "id": body["id"], "result": task})

    app = Starlette(
        routes=[Route("/.well-known/agent-card.json", card), Route("/jsonrpc", rpc, methods=["POST"])]
    )
    with serve(app) as url:
        base["url"] = url
        agent = bridged(url)
        async with McpTestClient(agent.asgi()) as mcp:
            result = await mcp.call_tool("work", {"text": "go"})
    assert result["isError"] is False and "worked" in unescape(text_of(result))
    [sent] = seen
    assert sent["method"] == "message/send"
    message = sent["params"]["message"]
    assert message["kind"] == "message" and message["role"] == "user"
    assert message["parts"] == [{"kind": "text", "text": "go"}]
    assert sent["params"]["configuration"]["blocking"] is False  # the task id at once, to read back or cancel
