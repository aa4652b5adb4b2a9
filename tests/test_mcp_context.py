"""What a function asks through ``ctx``, answered by the official client in every mode.

Handshake era: elicitation, sampling and roots are server-to-client requests on the call's SSE stream.
Stateless era: the call ends with ``input_required`` and the client retries with the answers.
"""

from __future__ import annotations

import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from tests.conformance.mcp_fixture import app
from tests.conftest import serve

MODES = ["legacy", "2026-07-28", "auto"]


@pytest.fixture(scope="module")
def fixture_url():
    with serve(app) as url:
        yield url


def client(url: str, mode: str, **kwargs: object) -> Client:
    http = httpx2.AsyncClient(timeout=30)
    return Client(streamable_http_client(f"{url}/mcp", http_client=http), mode=mode, cache=None, **kwargs)


async def on_elicit(context, params: types.ElicitRequestParams) -> types.ElicitResult:
    return types.ElicitResult(
        action="accept",
        content={
            "name": "Ada",
            "username": "ada",
            "email": "a@x.io",
            "color": "green",
            "ok": True,
            "context": "ctx",
        },
    )


async def on_sample(context, params) -> types.CreateMessageResult:
    prompt = params.messages[0].content.text
    return types.CreateMessageResult(
        role="assistant", model="stub-model", content=types.TextContent(type="text", text=f"echo: {prompt}")
    )


async def on_roots(context) -> types.ListRootsResult:
    return types.ListRootsResult(roots=[types.Root(uri="file:///srv/data", name="data")])


@pytest.mark.parametrize("mode", MODES)
async def test_elicitation_round_trip(fixture_url: str, mode: str) -> None:
    async with client(fixture_url, mode, elicitation_callback=on_elicit) as c:
        result = await c.call_tool("test_input_required_result_multi_round", {})
        assert result.is_error is False
        assert result.content[0].text == "Ada likes green"


@pytest.mark.parametrize("mode", MODES)
async def test_sampling_and_roots_in_one_request(fixture_url: str, mode: str) -> None:
    async with client(
        fixture_url,
        mode,
        elicitation_callback=on_elicit,
        sampling_callback=on_sample,
        list_roots_callback=on_roots,
    ) as c:
        result = await c.call_tool("test_input_required_result_multiple_inputs", {})
        assert result.is_error is False, result.content
        assert result.content[0].text == "echo: Generate a greeting Ada (1 roots)"


@pytest.mark.parametrize("mode", MODES)
async def test_prompt_can_ask_too(fixture_url: str, mode: str) -> None:
    async with client(fixture_url, mode, elicitation_callback=on_elicit) as c:
        prompt = await c.get_prompt("test_input_required_result_prompt", {})
        assert prompt.messages[0].content.text == "Use this context: ctx"


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_asking_a_client_that_cannot_answer(fixture_url: str, mode: str) -> None:
    async with client(fixture_url, mode) as c:
        if mode == "legacy":
            result = await c.call_tool("test_missing_capability", {})
            assert result.is_error is True
            assert "sampling" in result.content[0].text
        else:
            with pytest.raises(MCPError) as info:
                await c.call_tool("test_missing_capability", {})
            assert info.value.code == -32021


@pytest.mark.parametrize("mode", MODES)
async def test_logs_follow_the_requested_level(fixture_url: str, mode: str) -> None:
    received: list[tuple[str, object]] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        received.append((params.level, params.data))

    async with client(fixture_url, mode, logging_callback=on_log, log_level="warning") as c:
        if mode == "legacy":
            await c.set_logging_level("warning")
        result = await c.call_tool("test_logging_tool", {})
        assert result.content[0].text == "logged"
    assert received == [("warning", "warning message"), ("error", "error message")]


async def test_handshake_fallback_when_the_client_cannot_be_asked(fixture_url: str) -> None:
    async with client(fixture_url, "legacy") as c:
        result = await c.call_tool("test_input_required_result_elicitation", {})
    assert result.is_error is True
    assert (
        "elicitation capability" in result.content[0].text
        and "- What is your name?" in result.content[0].text
    )
    assert result.meta["agentmw/inputRequests"]["user_name"]["method"] == "elicitation/create"


async def test_raised_needs_input_reports_the_question_in_both_eras() -> None:
    from agentmw import Agent, NeedsInput
    from agentmw.testing import McpTestClient

    agent = Agent()

    @agent.tool
    async def order(sku: str = "") -> str:
        if not sku:
            raise NeedsInput(
                "Which SKU?", schema={"type": "object", "properties": {"sku": {"type": "string"}}}
            )
        return sku

    for era in ("2025-11-25", "2026-07-28"):
        async with McpTestClient(agent.asgi(), era=era, capabilities={"elicitation": {}}) as mcp:
            result = await mcp.call_tool("order", {})
            assert result["isError"] is True and "- Which SKU?" in result["content"][0]["text"]
            assert (await mcp.call_tool("order", {"sku": "MON-27"}))["content"][0]["text"] == "MON-27"
