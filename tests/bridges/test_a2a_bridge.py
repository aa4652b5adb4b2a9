"""A remote A2A agent (a2a-sdk 1.3.0's server classes, its own process) bridged into an agent: each remote skill
is a capability, served over MCP (the in-process test client) with the remote task states mapped."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from agentmw import Agent
from agentmw.bridges import A2A_VERSION, A2APeer, Egress, ServiceAccount
from agentmw.safety.framing import unescape
from agentmw.testing import McpError, McpTestClient
from tests.bridges.conftest import side_effects
from tests.helpers.a2a_raw import send_message

LOOPBACK = Egress(allow_hosts=["127.0.0.1"])


def bridged(url: str, **options: Any) -> Agent:
    agent = Agent("front", store="memory://")
    agent.bridge(A2APeer(url, version=A2A_VERSION, name="legal", allow=LOOPBACK, **options))
    return agent


def text_of(result: dict) -> str:
    return "".join(block.get("text", "") for block in result["content"] if block["type"] == "text")


def test_the_version_is_a_constant() -> None:
    from agentmw.bridges.a2a import A2A_VERSIONS

    assert A2A_VERSION == "1.0"
    assert A2A_VERSIONS == ("1.0", "0.3")  # 0.3 only when pinned so (tests/bridges/test_a2a03_bridge.py)
    # the default is 1.0, never "whatever the card offers"
    assert A2APeer("http://127.0.0.1:1").version == "1.0"
    with pytest.raises(ValueError, match="A2A 1.0"):
        A2APeer("http://127.0.0.1:1", version="latest")


async def test_remote_skills_become_tools_and_skills(a2a_peer) -> None:
    agent = bridged(a2a_peer.url)
    await agent.start_bridges()
    assert {"echo", "ask", "slow", "fail", "files", "inject", "auth", "reject"} <= set(agent.tools)
    assert set(agent.skills) == {"echo", "ask", "slow", "fail", "files", "inject", "auth", "reject"}
    assert "legal.await_task" in agent.tools
    summary = agent.skills["echo"].summary
    assert summary.startswith('<untrusted-data source="A2A peer legal skill echo"')  # card text is framed
    assert "Returns the text it received." in summary


async def test_completed_echo_over_mcp(a2a_peer) -> None:
    agent = bridged(a2a_peer.url)
    before = side_effects(a2a_peer)
    async with McpTestClient(agent.asgi()) as mcp:  # the first request connects the bridge: no start call
        result = await mcp.call_tool("echo", {"text": "hello there"})
    assert result["isError"] is False
    assert "hello there" in text_of(result)
    assert text_of(result).startswith('<untrusted-data source="A2A peer legal skill echo"')
    assert side_effects(a2a_peer) == before + 1


async def test_failed_rejected_and_auth_required_are_never_success(a2a_peer) -> None:
    agent = bridged(a2a_peer.url)
    async with McpTestClient(agent.asgi()) as mcp:
        failed = await mcp.call_tool("fail", {"text": "x"})
        rejected = await mcp.call_tool("reject", {"text": "x"})  # a tool error the model reads (issue 24, 12)
        auth = await mcp.call_tool("auth", {"text": "x"})
    assert failed["isError"] is True and "backend exploded" in text_of(failed)
    assert "permanent" in text_of(failed)
    assert auth["isError"] is True and "needs authentication" in text_of(auth)
    assert "Sign in to the contract archive first." in unescape(text_of(auth))
    assert rejected["isError"] is True and rejected["_meta"]["agentmw/rejected"] is True, rejected
    assert "rejected the request" in text_of(rejected) and "permanent" not in text_of(rejected)
    assert "This agent does not take that request." in unescape(text_of(rejected))


async def test_files_and_data_artifacts(a2a_peer) -> None:
    agent = bridged(a2a_peer.url)
    async with McpTestClient(agent.asgi()) as mcp:
        result = await mcp.call_tool("files", {"text": "report"})
    assert result["isError"] is False
    blocks = result["content"]
    resource = next(b for b in blocks if b["type"] == "resource")
    assert resource["resource"]["mimeType"] == "text/plain"
    import base64

    assert base64.b64decode(resource["resource"]["blob"]) == b"Quarterly report\nTotal: 42\n"
    import json

    data = [json.loads(b["text"]) for b in blocks if b["type"] == "text"]
    assert data == [{"total": 42}]  # data stays data: not framed
    assert result["structuredContent"] == {"total": 42}  # and is the result's structured content


async def test_input_required_is_a_normal_result_with_a_handle_then_answered(a2a_peer) -> None:
    agent = bridged(a2a_peer.url)
    before = side_effects(a2a_peer)
    async with McpTestClient(agent.asgi()) as mcp:
        asked = await mcp.call_tool("ask", {"text": "contract"})
        assert asked["isError"] is False  # not an error: the model decides
        text = text_of(asked)
        assert "needs input" in text and "Which jurisdiction?" in text and "legal.await_task" in text
        handle = next(b for b in asked["content"] if b["type"] == "text" and b["text"].startswith("{"))
        import json

        data = json.loads(handle["text"])
        assert data["status"] == "input-required" and data["taskId"] and data["contextId"]
        done = await mcp.call_tool("legal.await_task", {"task_id": data["taskId"], "answer": "EU"})
    assert done["isError"] is False
    assert "Reviewed for EU" in text_of(done)
    assert side_effects(a2a_peer) == before + 1  # the answer resumed the same remote task


async def test_another_caller_cannot_await_a_task_handle(a2a_peer) -> None:
    agent = bridged(a2a_peer.url)
    import json

    async with McpTestClient(agent.asgi(), headers={"Authorization": "Bearer alice"}) as alice:
        asked = await alice.call_tool("ask", {"text": "contract"})
        handle = json.loads(next(b["text"] for b in asked["content"] if b["text"].startswith("{")))
    async with McpTestClient(agent.asgi(), headers={"Authorization": "Bearer mallory"}) as mallory:
        with pytest.raises(McpError, match="Unknown task"):
            await mallory.call_tool("legal.await_task", {"task_id": handle["taskId"], "answer": "US"})


async def test_slow_task_past_the_bounded_wait_answers_with_a_handle(a2a_peer) -> None:
    agent = bridged(a2a_peer.url, wait_seconds=0.6)
    import json

    async with McpTestClient(agent.asgi()) as mcp:
        first = await mcp.call_tool("slow", {"text": "go"})
        assert first["isError"] is False
        handle = json.loads(next(b["text"] for b in first["content"] if b["text"].startswith("{")))
        assert handle["status"] == "working"
        done = await mcp.call_tool("legal.await_task", {"task_id": handle["taskId"], "wait_seconds": 10})
    assert done["isError"] is False, done
    assert "chunk 6" in unescape(text_of(done))


async def test_identity_translation_is_logged_and_the_inbound_token_is_not_sent(a2a_peer, caplog) -> None:
    agent = bridged(
        a2a_peer.url, credential=ServiceAccount("svc-legal", {"Authorization": "Bearer svc-token"})
    )
    caplog.set_level(logging.INFO, logger="agentmw.bridges")
    async with McpTestClient(agent.asgi(), headers={"Authorization": "Bearer inbound-secret"}) as mcp:
        result = await mcp.call_tool("echo", {"text": "hi"})
    assert result["isError"] is False
    [record] = [r for r in caplog.records if r.getMessage().startswith("bridge identity")]
    assert record.bridge_as == "service account svc-legal" and record.bridge_peer == "legal"
    assert record.bridge_target == "skill echo" and record.bridge_caller.startswith("credential:")
    assert "inbound-secret" not in caplog.text


async def test_egress_refuses_a_loopback_peer_by_default(a2a_peer) -> None:
    agent = Agent("front", store="memory://")
    agent.bridge(A2APeer(a2a_peer.url, name="legal"))
    from agentmw.bridges import BridgeError

    with pytest.raises(BridgeError, match="private, loopback or link-local"):
        await agent.start_bridges()


async def test_input_required_over_a2a_is_input_required_answered_on_the_same_remote_task(a2a_peer) -> None:
    import httpx

    agent = bridged(a2a_peer.url)
    before = a2a_peer.counter()
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=agent.asgi()), base_url="http://127.0.0.1", timeout=30
    ) as http:
        send = send_message([{"text": "review this"}], message_id="m-ask", metadata={"skill": "ask"})
        task = (await http.post("/a2a", json=send, headers={"A2A-Version": "1.0"})).json()["result"]["task"]
        assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        question = task["status"]["message"]["parts"][0]["text"]
        assert question.startswith('<untrusted-data source="A2A peer legal skill ask"')
        assert "Which jurisdiction?" in unescape(question)
        answer = send_message([{"text": "France"}], message_id="m-answer", request_id=2, taskId=task["id"])
        done = (await http.post("/a2a", json=answer, headers={"A2A-Version": "1.0"})).json()["result"]["task"]
    assert done["status"]["state"] == "TASK_STATE_COMPLETED", done
    assert "Reviewed for France" in unescape(done["artifacts"][0]["parts"][0]["text"])
    after = a2a_peer.counter()
    assert (after["count"], after["resumes"]) == (before["count"] + 1, before["resumes"] + 1)
