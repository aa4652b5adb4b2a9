"""The official ``mcp`` client, in each of its modes, against the example app: over a real socket and in-process."""

from __future__ import annotations

import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from examples.fastapi_app.main import app

MODES = ["legacy", "2026-07-28", "auto"]
AUTH = {"Authorization": "Bearer demo-token"}
approvals: list[str] = []


async def approve(context, params: types.ElicitRequestParams) -> types.ElicitResult:
    """The person behind the client approves the exact action the human gate shows."""
    approvals.append(params.message)
    return types.ElicitResult(action="accept", content={"approved": True})


def socket_client(url: str, mode: str, headers: dict[str, str] | None = None, **kwargs: object) -> Client:
    http = httpx2.AsyncClient(headers=headers or {}, timeout=30)
    return Client(streamable_http_client(f"{url}/mcp", http_client=http), mode=mode, cache=None, **kwargs)


def in_process_client(mode: str, headers: dict[str, str] | None = None, **kwargs: object) -> Client:
    http = httpx2.AsyncClient(
        transport=httpx2.ASGITransport(app=app), base_url="http://127.0.0.1:8000", headers=headers or {}
    )
    return Client(
        streamable_http_client("http://127.0.0.1:8000/mcp", http_client=http), mode=mode, cache=None, **kwargs
    )


def connector(kind: str, example_url: str):
    if kind == "socket":
        return lambda mode, headers=None, **kw: socket_client(example_url, mode, headers, **kw)
    return lambda mode, headers=None, **kw: in_process_client(mode, headers, **kw)


@pytest.fixture(params=["socket", "in-process"])
def connect(request: pytest.FixtureRequest, example_url: str):
    return connector(request.param, example_url)


# A gated call asks its question in-band. In the handshake era that question is a server-to-client request
# on the call's SSE stream, which an in-process ASGI transport only delivers after the response ends; so
# the handshake era runs these over a real socket, and in-process uses the stateless era (input_required).
GATED = [("socket", mode) for mode in MODES] + [("in-process", "2026-07-28"), ("in-process", "auto")]


@pytest.mark.parametrize("mode", MODES)
async def test_lists_and_calls_read_only_tool(connect, mode: str) -> None:
    async with connect(mode) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert set(tools) == {
            "search_assets",
            "department_budget",
            "submit_purchase_request",
            "read_policy",
            "supplier_notes",
        }
        search = tools["search_assets"]
        assert search.annotations.read_only_hint is True
        assert search.title == "Search the asset catalog"
        assert "Use it to find a SKU" in search.description
        assert "Summary" not in search.description  # the scheduler summary is not the model's contract
        assert search.output_schema["properties"]["result"]["type"] == "array"
        result = await client.call_tool("search_assets", {"query": "laptop"})
        assert result.is_error is False
        skus = [item["sku"] for item in result.structured_content["result"]]
        assert skus == ["LPT-14", "LPT-13"]


@pytest.mark.parametrize("mode", MODES)
async def test_object_return_is_structured_content(connect, mode: str) -> None:
    async with connect(mode) as client:
        result = await client.call_tool("department_budget", {"department": "engineering"})
        assert result.structured_content == {"department": "engineering", "total": 50000.0, "spent": 31250.0}
        missing = await client.call_tool("department_budget", {"department": "sales"})
        assert missing.is_error is True
        assert "HTTP 404" in missing.content[0].text


@pytest.mark.parametrize("mode", MODES)
async def test_invalid_arguments_are_a_tool_error_the_model_can_read(connect, mode: str) -> None:
    async with connect(mode) as client:
        result = await client.call_tool("search_assets", {"limit": 500})
        assert result.is_error is True
        assert "limit" in result.content[0].text


@pytest.mark.parametrize("mode", MODES)
async def test_resource_template_and_prompt(connect, mode: str) -> None:
    async with connect(mode) as client:
        templates = (await client.list_resource_templates()).resource_templates
        assert [t.uri_template for t in templates] == ["budget://{department}"]
        read = await client.read_resource("budget://design")
        assert '"department":"design"' in read.contents[0].text
        prompt = await client.get_prompt("purchase_justification", {"sku": "MON-27", "reason": "eye strain"})
        assert "MON-27" in prompt.messages[0].content.text


@pytest.mark.parametrize(("kind", "mode"), GATED)
async def test_auth_dependency_is_resolved_from_the_mcp_request_headers(
    kind: str, mode: str, example_url: str
) -> None:
    connect = connector(kind, example_url)
    request = {
        "request": {
            "sku": "MON-27",
            "quantity": 2,
            "department": "engineering",
            "justification": "Second screens for the on-call rotation",
        }
    }
    async with connect(mode, AUTH, elicitation_callback=approve) as client:
        result = await client.call_tool("submit_purchase_request", request)
        assert result.is_error is False, result.content
        assert approvals[-1].startswith('Run submit_purchase_request(request={"sku": "MON-27", "quantity": 2')
        assert result.structured_content["requested_by"] == "alice"
        assert result.structured_content["total"] == 898.0
    async with connect(mode) as anonymous:
        # the tool's declared scope is checked before the route's own dependency: an HTTP 401 (docs/auth.md)
        with pytest.raises(
            MCPError,
            match=r"^Authentication required: tool submit_purchase_request needs the "
            r"scope\(s\) purchases:write$",
        ):
            await anonymous.call_tool("submit_purchase_request", request)


@pytest.mark.parametrize(("kind", "mode"), GATED)
async def test_progress_reaches_the_client(kind: str, mode: str, example_url: str) -> None:
    connect = connector(kind, example_url)
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    request = {
        "request": {
            "sku": "ACC-DOCK",
            "quantity": 1,
            "department": "engineering",
            "justification": "Docking station for a new hire",
        }
    }
    async with connect(mode, AUTH, elicitation_callback=approve) as client:
        result = await client.call_tool("submit_purchase_request", request, progress_callback=on_progress)
        assert result.is_error is False
    assert seen == [(1, 2, "checking the budget"), (2, 2, "submitted")]


@pytest.mark.parametrize("mode", MODES)
async def test_example_roots_and_untrusted_supplier_text(connect, mode: str) -> None:
    async with connect(mode) as client:
        policy = await client.call_tool("read_policy", {"path": "purchasing.md"})
        assert policy.content[0].text.startswith("# Purchasing policy")
        escape = await client.call_tool("read_policy", {"path": "../main.py"})
        assert escape.is_error is True and "outside the allowed roots" in escape.content[0].text
        notes = (await client.call_tool("supplier_notes", {"sku": "MON-27"})).content[0].text
        assert (
            notes.startswith('<untrusted-data source="tool supplier_notes"')
            and "&lt;b&gt;Best seller" in notes
        )


async def test_plain_http_routes_still_work(example_url: str) -> None:
    async with httpx2.AsyncClient(base_url=example_url) as http:
        assert (await http.get("/health")).json() == {"status": "ok"}
        assets = (await http.get("/assets", params={"category": "monitor"})).json()
        assert [a["sku"] for a in assets] == ["MON-27"]
        budget = await http.get("/budgets/design")
        assert budget.json()["spent"] == 18900.0
        denied = await http.post(
            "/purchase-requests",
            json={
                "sku": "MON-27",
                "quantity": 1,
                "department": "engineering",
                "justification": "A monitor for testing",
            },
        )
        assert denied.status_code == 401
        ok = await http.post(
            "/purchase-requests",
            headers=AUTH,
            json={
                "sku": "MON-27",
                "quantity": 1,
                "department": "engineering",
                "justification": "A monitor for testing",
            },
        )
        assert ok.status_code == 200 and ok.json()["status"] == "submitted"
