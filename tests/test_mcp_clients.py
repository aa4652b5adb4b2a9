"""The official ``mcp`` client, in each of its modes, against the example app: over a real socket and in-process."""

from __future__ import annotations

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from examples.fastapi_app.main import app

MODES = ["legacy", "2026-07-28", "auto"]
AUTH = {"Authorization": "Bearer demo-token"}


def socket_client(url: str, mode: str, headers: dict[str, str] | None = None, **kwargs: object) -> Client:
    http = httpx2.AsyncClient(headers=headers or {}, timeout=30)
    return Client(streamable_http_client(f"{url}/mcp", http_client=http), mode=mode, cache=None, **kwargs)


def in_process_client(mode: str, headers: dict[str, str] | None = None, **kwargs: object) -> Client:
    http = httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url="http://127.0.0.1:8000",
                              headers=headers or {})
    return Client(streamable_http_client("http://127.0.0.1:8000/mcp", http_client=http), mode=mode, cache=None,
                  **kwargs)


@pytest.fixture(params=["socket", "in-process"])
def connect(request: pytest.FixtureRequest, example_url: str):
    if request.param == "socket":
        return lambda mode, headers=None, **kw: socket_client(example_url, mode, headers, **kw)
    return lambda mode, headers=None, **kw: in_process_client(mode, headers, **kw)


@pytest.mark.parametrize("mode", MODES)
async def test_lists_and_calls_read_only_tool(connect, mode: str) -> None:
    async with connect(mode) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert set(tools) == {"search_assets", "department_budget", "submit_purchase_request"}
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


@pytest.mark.parametrize("mode", MODES)
async def test_auth_dependency_is_resolved_from_the_mcp_request_headers(connect, mode: str) -> None:
    request = {"request": {"sku": "MON-27", "quantity": 2, "department": "engineering",
                           "justification": "Second screens for the on-call rotation"}}
    async with connect(mode, AUTH) as client:
        result = await client.call_tool("submit_purchase_request", request)
        assert result.is_error is False, result.content
        assert result.structured_content["requested_by"] == "alice"
        assert result.structured_content["total"] == 898.0
    async with connect(mode) as anonymous:
        denied = await anonymous.call_tool("submit_purchase_request", request)
        assert denied.is_error is True
        assert denied.content[0].text == "HTTP 401: Not authenticated"


@pytest.mark.parametrize("mode", MODES)
async def test_progress_reaches_the_client(connect, mode: str) -> None:
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    request = {"request": {"sku": "ACC-DOCK", "quantity": 1, "department": "engineering",
                           "justification": "Docking station for a new hire"}}
    async with connect(mode, AUTH) as client:
        result = await client.call_tool("submit_purchase_request", request, progress_callback=on_progress)
        assert result.is_error is False
    assert seen == [(1, 2, "checking the budget"), (2, 2, "submitted")]


async def test_plain_http_routes_still_work(example_url: str) -> None:
    async with httpx2.AsyncClient(base_url=example_url) as http:
        assert (await http.get("/health")).json() == {"status": "ok"}
        assets = (await http.get("/assets", params={"category": "monitor"})).json()
        assert [a["sku"] for a in assets] == ["MON-27"]
        budget = await http.get("/budgets/design")
        assert budget.json()["spent"] == 18900.0
        denied = await http.post("/purchase-requests", json={"sku": "MON-27", "quantity": 1,
                                                             "department": "engineering",
                                                             "justification": "A monitor for testing"})
        assert denied.status_code == 401
        ok = await http.post("/purchase-requests", headers=AUTH, json={
            "sku": "MON-27", "quantity": 1, "department": "engineering", "justification": "A monitor for testing"})
        assert ok.status_code == 200 and ok.json()["status"] == "submitted"
