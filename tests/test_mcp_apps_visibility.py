"""MCP Apps visibility on the server: a tool whose UI ``visibility`` leaves out ``"model"`` (app-only) is listed and
served only to clients that advertise the extension with ``text/html;profile=mcp-app``, in both eras; to any other
client it is exactly an unknown tool. And ``initialize`` declares the extensions to every handshake version (only
2025-11-25's ``tasks`` capability stays with 2025-11-25). The official ``mcp`` client, and raw JSON-RPC where the
bytes of an error are compared."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from mcp.shared.exceptions import MCPError

from agentmw import Agent, tool
from agentmw.apps import APP_MIME_TYPE, EXTENSION_ID, UI, ui_resource
from agentmw.mcp.methods import Catalog
from examples.fastapi_app.main import agent as example_agent
from examples.fastapi_app.main import app as example_app
from tests.helpers.mcp_raw import JSON, initialize, open_session, session_headers
from tests.test_mcp_apps import MODES, client, submit

APPS_CAPABILITIES = {"extensions": {EXTENSION_ID: {"mimeTypes": [APP_MIME_TYPE]}}}
CARD = "<!doctype html><title>Cart</title><p>the cart</p>"


def shop() -> Agent:
    @tool(ui="ui://shop/cart.html")
    def show_cart(sku: str) -> str:
        return f"cart with {sku}"

    @tool(ui=UI("ui://shop/cart.html", visibility=("app",)))
    def add_to_cart(sku: str) -> str:
        return f"added {sku}"

    @tool(ui=UI("ui://shop/cart.html", visibility=("model", "app")))
    def both(sku: str) -> str:
        return sku

    @tool(ui=UI("ui://shop/cart.html", visibility=("model",)))
    def model_only(sku: str) -> str:
        return sku

    @tool
    def plain(sku: str) -> str:
        return sku

    card = ui_resource("ui://shop/cart.html", html=CARD)
    return Agent("shop", include=[show_cart, add_to_cart, both, model_only, plain, card])


def test_only_a_visibility_without_model_makes_a_tool_app_only() -> None:
    agent = shop()
    assert {name for name, cap in agent.tools.items() if cap.app_only} == {"add_to_cart"}


def test_the_catalog_keeps_one_list_per_kind_of_client_built_once_per_revision() -> None:
    agent = shop()
    catalog = Catalog(agent).fresh()
    assert [t["name"] for t in catalog.tools] == ["add_to_cart", "both", "model_only", "plain", "show_cart"]
    assert [t["name"] for t in catalog.model_tools] == ["both", "model_only", "plain", "show_cart"]
    assert catalog.model_tools[0] is catalog.tools[1]  # the same descriptors, not copies
    built = catalog.model_tools
    assert catalog.fresh().model_tools is built  # nothing rebuilt while the registry is unchanged

    @agent.tool(ui=UI("ui://shop/cart.html", visibility=("app",)))
    def remove_from_cart(sku: str) -> str:
        return sku

    catalog.fresh()
    assert "remove_from_cart" in {t["name"] for t in catalog.tools}
    assert "remove_from_cart" not in {t["name"] for t in catalog.model_tools}
    plain_only = Catalog(Agent("plain", include=[tool(lambda sku: sku, name="p")])).fresh()
    assert plain_only.model_tools is plain_only.tools  # no app-only tool: one list


@pytest.mark.parametrize("advertised", [True, False], ids=["apps-client", "other-client"])
@pytest.mark.parametrize("mode", MODES)
async def test_an_app_only_tool_is_for_clients_that_render_apps(mode: str, advertised: bool) -> None:
    async with client(shop().asgi(), mode, advertised) as c:
        names = {t.name for t in (await c.list_tools()).tools}
        assert names >= {"show_cart", "both", "model_only", "plain"}
        assert ("add_to_cart" in names) is advertised
        if advertised:
            added = await c.call_tool("add_to_cart", {"sku": "MON-27"})
            assert added.is_error is False and added.content[0].text == "added MON-27"
        else:
            with pytest.raises(MCPError) as app_only:
                await c.call_tool("add_to_cart", {"sku": "MON-27"})
            with pytest.raises(MCPError) as unknown:
                await c.call_tool("no_such_tool", {"sku": "MON-27"})
            assert app_only.value.error.code == unknown.value.error.code == -32602
            assert app_only.value.error.message == "Unknown tool: add_to_cart"
        # the other tools with a UI are everyone's, as are tools without one
        assert (await c.call_tool("both", {"sku": "a"})).is_error is False
        assert (await c.call_tool("plain", {"sku": "a"})).is_error is False


def _body(answer: httpx.Response) -> dict[str, Any]:
    text = answer.text
    if answer.headers["content-type"].startswith("text/event-stream"):
        text = next(line[5:] for line in text.splitlines() if line.startswith("data:"))
    decoded: dict[str, Any] = json.loads(text)
    return decoded


async def _handshake_answers(capabilities: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """tools/list and both refused calls, in one 2025-11-25 session opened with ``capabilities``."""
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=shop().asgi()), base_url="http://127.0.0.1:8000"
    ) as http:
        headers = await open_session(http, capabilities=capabilities)
        await http.post(
            "/mcp", headers=headers, json={"jsonrpc": "2.0", "method": "notifications/initialized"}
        )
        out = {}
        for key, method, params in (
            ("list", "tools/list", {}),
            ("app_only", "tools/call", {"name": "add_to_cart", "arguments": "not an object"}),
            ("unknown", "tools/call", {"name": "no_such_tool", "arguments": "not an object"}),
        ):
            body = {"jsonrpc": "2.0", "id": 7, "method": method, "params": params}
            out[key] = _body(await http.post("/mcp", headers=headers, json=body))
        return out


async def _stateless_answers(capabilities: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The same in 2026-07-28, the capabilities in each request's envelope."""
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=shop().asgi()), base_url="http://127.0.0.1:8000"
    ) as http:
        out = {}
        for key, method, params in (
            ("list", "tools/list", {}),
            ("app_only", "tools/call", {"name": "add_to_cart", "arguments": "not an object"}),
            ("unknown", "tools/call", {"name": "no_such_tool", "arguments": "not an object"}),
        ):
            envelope = {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": capabilities,
            }
            headers = {**JSON, "mcp-protocol-version": "2026-07-28", "mcp-method": method}
            if method == "tools/call":
                headers["mcp-name"] = params["name"]
            body = {"jsonrpc": "2.0", "id": 7, "method": method, "params": {**params, "_meta": envelope}}
            out[key] = _body(await http.post("/mcp", headers=headers, json=body))
        return out


@pytest.mark.parametrize("era", ["2025-11-25", "2026-07-28"])
@pytest.mark.parametrize(
    "capabilities",
    [
        {},
        {"extensions": {EXTENSION_ID: {}}},  # the extension without the mime type renders nothing
        {"extensions": {EXTENSION_ID: {"mimeTypes": ["text/html"]}}},
        {"extensions": {"com.example/other": {"mimeTypes": [APP_MIME_TYPE]}}},
    ],
    ids=["none", "no-mime-types", "other-mime-type", "other-extension"],
)
async def test_to_any_other_client_an_app_only_tool_is_exactly_an_unknown_tool(
    era: str, capabilities: dict[str, Any]
) -> None:
    answers = await (_handshake_answers if era == "2025-11-25" else _stateless_answers)(capabilities)
    assert "add_to_cart" not in {t["name"] for t in answers["list"]["result"]["tools"]}
    # the same error, byte for byte once the name is swapped: even arguments that are not an object are not
    # looked at first, so no answer tells an app-only tool from a missing one
    refused = json.dumps(answers["app_only"]).replace("add_to_cart", "no_such_tool")
    assert refused == json.dumps(answers["unknown"])
    assert answers["unknown"]["error"]["code"] == -32602


@pytest.mark.parametrize("era", ["2025-11-25", "2026-07-28"])
async def test_an_apps_client_gets_the_app_only_tool_on_the_wire(era: str) -> None:
    answers = await (_handshake_answers if era == "2025-11-25" else _stateless_answers)(APPS_CAPABILITIES)
    listed = {t["name"]: t for t in answers["list"]["result"]["tools"]}
    assert listed["add_to_cart"]["_meta"]["ui"] == {
        "resourceUri": "ui://shop/cart.html",
        "visibility": ["app"],
    }
    # its call is served: only the arguments are wrong here
    assert answers["app_only"]["error"]["message"] == "tools/call 'arguments' must be an object"


async def test_the_examples_decision_is_no_tool_of_a_model_without_the_card() -> None:
    """The example's app-only decide_purchase_approval: a budget admin's ordinary MCP client (whose model reads the
    requester's justification) neither sees nor calls it; the card's host does."""
    waiting = await submit("2026-07-28")
    approval_id = waiting.meta["agentmw/approval"]["id"]
    for mode in MODES:
        async with client(example_app, mode, advertised=False, token="admin-token") as admin:
            names = {t.name for t in (await admin.list_tools()).tools}
            assert "purchase_approval" in names and "decide_purchase_approval" not in names
            with pytest.raises(MCPError, match="Unknown tool: decide_purchase_approval"):
                await admin.call_tool(
                    "decide_purchase_approval", {"approval_id": approval_id, "approve": True}
                )
    stored = await example_agent.approvals.get(approval_id)
    assert stored is not None and stored.status == "pending" and stored.decided_by is None


# --- the extensions, declared to every handshake version ---------------------------------------------------------


@pytest.mark.parametrize("version", ["2025-11-25", "2025-06-18", "2025-03-26"])
async def test_every_handshake_version_is_told_of_the_extensions_and_only_2025_11_25_of_tasks(
    version: str,
) -> None:
    @tool(task="optional")
    async def slow(n: int) -> int:
        return n

    @tool(ui="ui://shop/cart.html")
    def show_cart(sku: str) -> str:
        return sku

    agent = Agent("both", include=[slow, show_cart, ui_resource("ui://shop/cart.html", html=CARD)])
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=agent.asgi()), base_url="http://127.0.0.1:8000"
    ) as http:
        response = await initialize(http, revision=version, capabilities=APPS_CAPABILITIES)
        result = _body(response)["result"]
        assert result["protocolVersion"] == version
        capabilities = result["capabilities"]
        assert capabilities["extensions"] == {EXTENSION_ID: {}}
        assert ("tasks" in capabilities) is (version == "2025-11-25")
        assert capabilities["tools"] == {"listChanged": True}
        headers = session_headers(response, revision=version)
        await http.post(
            "/mcp", headers=headers, json={"jsonrpc": "2.0", "method": "notifications/initialized"}
        )
        listed = _body(
            await http.post("/mcp", headers=headers, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        )
        assert {t["name"] for t in listed["result"]["tools"]} == {"slow", "show_cart"}
