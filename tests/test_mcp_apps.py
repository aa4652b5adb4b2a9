"""MCP Apps (SEP-1865, ``io.modelcontextprotocol/ui``): declared, negotiated and served as the official ``mcp``
client sees them, in both eras; the declarations' checks; and the example's approval card end to end (its
decision tool applies the approvals' rule). The card rendered in Chromium: tests/test_mcp_apps_browser.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.extension import advertise
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from agentmw import Agent, resource, tool
from agentmw.apps import (
    APP_MIME_TYPE,
    EXTENSION_ID,
    UI,
    UiCsp,
    UiPermissions,
    UiResource,
    client_supports_apps,
    ui_resource,
)
from agentmw.errors import RegistrationError
from examples.fastapi_app.main import APPROVAL_CARD
from examples.fastapi_app.main import agent as example_agent
from examples.fastapi_app.main import app as example_app
from tests.helpers.mcp_raw import JSON, open_session

MODES = ["legacy", "2026-07-28", "auto"]
APPS = advertise(EXTENSION_ID, {"mimeTypes": [APP_MIME_TYPE]})
CARD = "<!doctype html><title>Card</title><p>the card</p>"
CSP = UiCsp(
    connect_domains=["https://api.example.com", "wss://events.example.com"],
    resource_domains=["https://*.cdn.example.com"],
    frame_domains=["https://maps.example.com:8443"],
    base_uri_domains=["https://example.com"],
)


def plain(quantity: int, sku: str = "LPT-14") -> str:
    """A tool without a UI: its descriptor must not change when an agent serves MCP Apps."""
    return f"{quantity} x {sku}"


def apps_agent() -> Agent:
    @tool(ui="ui://shop/card.html", title="Show the cart")
    def show_cart(sku: str) -> dict[str, Any]:
        """Show the cart.

        Args:
            sku: the item.
        """
        return {"sku": sku, "quantity": 1}

    @tool(ui=UI("ui://shop/card.html", visibility=("app",)))
    def add_to_cart(sku: str) -> str:
        return f"added {sku}"

    @resource("ui://shop/other.html", ui=UiResource(domain="shop.sandbox.example.com"))
    def other_card() -> str:
        return CARD

    card = ui_resource(
        "ui://shop/card.html",
        html=CARD,
        csp=CSP,
        permissions=UiPermissions(camera=True, clipboard_write=True),
        domain="a904794854a047f6.sandbox.example.com",
        prefers_border=False,
        name="cart-card",
        title="The cart",
        description="The cart as a card.",
    )
    return Agent("shop", include=[show_cart, add_to_cart, card, other_card, tool(plain)])


def client(app: Any, mode: str, advertised: bool, token: str | None = None) -> Client:
    headers = {"authorization": f"Bearer {token}"} if token else {}
    http = httpx2.AsyncClient(
        transport=httpx2.ASGITransport(app=app), base_url="http://127.0.0.1:8000", headers=headers
    )
    return Client(
        streamable_http_client("http://127.0.0.1:8000/mcp", http_client=http),
        mode=mode,
        cache=None,
        extensions=[APPS] if advertised else None,
    )


async def capabilities_of(c: Client, mode: str) -> Any:
    """What the server declared: the handshake's, or (a pinned 2026 client synthesizes one) a real discover."""
    if mode == "2026-07-28":
        return types.DiscoverResult.model_validate(await c.session.send_discover(mode)).capabilities
    return c.server_capabilities


# --- the value objects and the declarations' checks ---------------------------------------------------------------


def test_value_objects_write_the_spec_keys() -> None:
    assert UI("ui://a/b.html").tool_meta() == {"resourceUri": "ui://a/b.html"}
    assert UI("ui://a/b.html", visibility=("model", "app")).tool_meta() == {
        "resourceUri": "ui://a/b.html",
        "visibility": ["model", "app"],
    }
    assert CSP.as_meta() == {
        "connectDomains": ["https://api.example.com", "wss://events.example.com"],
        "resourceDomains": ["https://*.cdn.example.com"],
        "frameDomains": ["https://maps.example.com:8443"],
        "baseUriDomains": ["https://example.com"],
    }
    assert UiCsp(connect_domains=["https://a.example"]).as_meta() == {"connectDomains": ["https://a.example"]}
    assert UiPermissions(microphone=True, geolocation=True).as_meta() == {"microphone": {}, "geolocation": {}}
    assert UiResource().as_meta() == {}
    assert UiResource(prefers_border=True, csp=UiCsp()).as_meta() == {"prefersBorder": True}


@pytest.mark.parametrize(
    ("declare", "message"),
    [
        (lambda: tool(ui="https://example.com/card.html")(plain), "an MCP App's UI is a ui:// resource"),
        (lambda: tool(ui="ui://")(plain), "got 'ui://'"),
        (lambda: tool(ui="ui://a/b c.html")(plain), "whitespace"),
        (lambda: tool(ui=42)(plain), "takes a ui:// URI or an agentmw.apps.UI"),
        (lambda: UI("card.html"), "an MCP App's UI is a ui:// resource"),
        (lambda: UI("ui://a.html", visibility=("user",)), "distinct 'model' and 'app'"),
        (lambda: UI("ui://a.html", visibility=()), "non-empty"),
        (lambda: UI("ui://a.html", visibility=("app", "app")), "distinct"),
        (lambda: UI("ui://a.html", visibility="app"), "takes a tuple"),  # type: ignore[arg-type]
        (
            lambda: resource("ui://a.html", mime_type="text/html")(lambda: CARD),
            "served as 'text/html;profile",
        ),
        (lambda: resource("docs://a", ui=UiResource())(lambda: CARD), "ui= is for a ui:// resource"),
        (lambda: ui_resource("https://a/b.html", html=CARD), "an MCP App's UI is a ui:// resource"),
        (lambda: ui_resource("ui://a.html"), "html=... or as file=..., one of them"),
        (lambda: ui_resource("ui://a.html", html=CARD, file="card.html"), "one of them"),
        (lambda: ui_resource("ui://a.html", html="  "), "empty"),
        (
            lambda: ui_resource("ui://a.html", file="/nonexistent/card.html"),
            "cannot read '/nonexistent/card.html'",
        ),
        (lambda: UiCsp(connect_domains=["https://a.example; script-src *"]), "is not an origin"),
        (lambda: UiCsp(connect_domains=["api.example.com"]), "is not an origin"),
        (lambda: UiCsp(connect_domains="https://a.example"), "a list of origins"),  # type: ignore[arg-type]
        (lambda: UiResource(domain="a b"), "host name or origin"),
        # a tool names one page: a template would be read with "{id}" in it
        (lambda: tool(ui="ui://x/{id}")(plain), "not a template"),
        (lambda: UI("ui://x/{id}.html"), "not a template"),
        (lambda: tool(ui="ui://x/{+path}")(plain), "not a template"),
        (lambda: tool(ui="ui://x\x00y")(plain), "control character"),
        (lambda: tool(ui="ui://x\x7fy")(plain), "control character"),
        (lambda: UI("ui://x/\u200by.html"), "control character"),
        (lambda: ui_resource("ui://x\x00y", html=CARD), "control character"),
        (lambda: UiCsp(connect_domains=["http://a.com:99999"]), "is not an origin"),
        (lambda: UiCsp(connect_domains=["https://a.com:0"]), "is not an origin"),
        (lambda: UiCsp(resource_domains=["https://a.com:65536"]), "is not an origin"),
        *(
            (lambda domain=domain: UiResource(domain=domain), "host name or origin")
            for domain in (
                "a.com;x",
                "a.com,b.com",
                '"><script>',
                "a'b",
                "a<b",
                "a>b",
                "a\x00b",
                "a\x1bb",
                "",
            )
        ),
        (lambda: ui_resource("ui://a.html", html=CARD, domain="a.com; script-src *"), "host name or origin"),
        # @resource(ui=...) takes a UiResource, not its wire form or another value object
        (
            lambda: resource("ui://a.html", ui={"csp": {}})(lambda: CARD),  # type: ignore[arg-type]
            "takes an agentmw.apps.UiResource",
        ),
        (
            lambda: resource("ui://a.html", ui="prefers_border")(lambda: CARD),  # type: ignore[arg-type]
            "takes an agentmw.apps.UiResource",
        ),
        (
            lambda: resource("ui://a.html", ui=UiCsp(connect_domains=["https://a.example"]))(  # type: ignore[arg-type]
                lambda: CARD
            ),
            "got UiCsp",
        ),
        (
            lambda: resource("ui://a.html", ui=UiResource)(lambda: CARD),  # type: ignore[arg-type]
            "takes an agentmw.apps.UiResource",
        ),
    ],
)
def test_a_bad_declaration_fails_where_it_is_written(declare: Any, message: str) -> None:
    with pytest.raises(RegistrationError) as raised:
        declare()
    assert message in str(raised.value)


def test_registration_checks_what_the_decorators_hand_on() -> None:
    agent = Agent("checks")
    with pytest.raises(RegistrationError, match="ui:// resource"):
        agent.add("tool", plain, ui={"resourceUri": "https://x/card.html"})
    with pytest.raises(RegistrationError, match="ui= is for tools"):
        agent.add("prompt", plain, ui={"resourceUri": "ui://x/card.html"})
    with pytest.raises(RegistrationError, match="served as 'text/html;profile=mcp-app'"):
        agent.add("resource", lambda: CARD, uri="ui://x/card.html", mime_type="text/plain")
    served = agent.add("resource", lambda: CARD, uri="ui://x/card.html", name="card")
    assert served.mime_type == APP_MIME_TYPE and served.ui == {}  # a ui:// resource is an app's UI, typed so


def test_a_ui_resource_from_a_file_is_read_once_where_it_is_declared(tmp_path: Path) -> None:
    page = tmp_path / "card.html"
    page.write_text(CARD, encoding="utf-8")
    serve = ui_resource("ui://files/card.html", file=page)
    page.write_text("changed", encoding="utf-8")
    assert serve() == CARD
    cap = Agent("files", include=[serve]).resources["ui://files/card.html"]
    assert cap.name == "ui://files/card.html" and cap.mime_type == APP_MIME_TYPE


def test_client_supports_apps_reads_the_client_capability() -> None:
    assert client_supports_apps({"extensions": {EXTENSION_ID: {"mimeTypes": [APP_MIME_TYPE]}}})
    assert not client_supports_apps({"extensions": {EXTENSION_ID: {}}})
    assert not client_supports_apps({"extensions": {EXTENSION_ID: {"mimeTypes": ["text/html"]}}})
    assert not client_supports_apps({"extensions": {"other": {"mimeTypes": [APP_MIME_TYPE]}}})
    assert not client_supports_apps({}) and not client_supports_apps(None)


# --- what the official client sees ---------------------------------------------------------------------------------


@pytest.mark.parametrize("advertised", [True, False], ids=["advertised", "not-advertised"])
@pytest.mark.parametrize("mode", MODES)
async def test_the_official_client_sees_the_extension_and_the_ui_metadata(
    mode: str, advertised: bool
) -> None:
    agent = apps_agent()
    async with client(agent.asgi(), mode, advertised) as c:
        declared = await capabilities_of(c, mode)
        assert declared.extensions == {EXTENSION_ID: {}}
        tools = {t.name: t for t in (await c.list_tools()).tools}
        assert tools["show_cart"].meta == {
            "ui": {"resourceUri": "ui://shop/card.html"},
            "ui/resourceUri": "ui://shop/card.html",
        }
        if (
            advertised
        ):  # app-only: listed only to a client that renders MCP Apps (test_mcp_apps_visibility.py)
            assert tools["add_to_cart"].meta["ui"] == {
                "resourceUri": "ui://shop/card.html",
                "visibility": ["app"],
            }
        else:
            assert "add_to_cart" not in tools
        assert tools["plain"].meta is None
        listed = {str(r.uri): r for r in (await c.list_resources()).resources}
        card = listed["ui://shop/card.html"]
        assert card.mime_type == APP_MIME_TYPE and card.name == "cart-card" and card.title == "The cart"
        expected = {
            "csp": CSP.as_meta(),
            "permissions": {"camera": {}, "clipboardWrite": {}},
            "domain": "a904794854a047f6.sandbox.example.com",
            "prefersBorder": False,
        }
        assert card.meta == {"ui": expected}
        read = (await c.read_resource("ui://shop/card.html")).contents
        assert len(read) == 1
        assert read[0].mime_type == APP_MIME_TYPE and read[0].text == CARD
        assert read[0].meta == {"ui": expected}  # hosts build the iframe's CSP from this copy
        other = (await c.read_resource("ui://shop/other.html")).contents[0]
        assert other.mime_type == APP_MIME_TYPE and other.meta == {
            "ui": {"domain": "shop.sandbox.example.com"}
        }
        # SEP-2133: the tool answers with meaningful content whether or not the client renders the UI
        result = await c.call_tool("show_cart", {"sku": "MON-27"})
        assert result.is_error is False and result.structured_content == {"sku": "MON-27", "quantity": 1}
        assert json.loads(result.content[0].text) == {"sku": "MON-27", "quantity": 1}


async def _raw(app: Any, method: str, stateless: bool) -> dict[str, Any]:
    """One raw JSON-RPC answer, as bytes decode to it: the handshake era initializes first."""
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1:8000"
    ) as http:
        headers = dict(JSON)
        body: dict[str, Any] = {"jsonrpc": "2.0", "id": 2, "method": method, "params": {}}
        if stateless:
            headers |= {"mcp-protocol-version": "2026-07-28", "mcp-method": method}
            body["params"] = {
                "_meta": {
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "io.modelcontextprotocol/clientCapabilities": {},
                }
            }
        else:
            headers = await open_session(http)
            await http.post(
                "/mcp", headers=headers, json={"jsonrpc": "2.0", "method": "notifications/initialized"}
            )
        response = await http.post("/mcp", headers=headers, json=body)
        assert response.status_code == 200, response.text
        text = response.text
        if response.headers["content-type"].startswith("text/event-stream"):
            text = next(line[5:] for line in text.splitlines() if line.startswith("data:"))
        answer: dict[str, Any] = json.loads(text)
        return answer


@pytest.mark.parametrize("stateless", [False, True], ids=["2025-11-25", "2026-07-28"])
async def test_a_tool_without_a_ui_is_listed_byte_for_byte_as_before(stateless: bool) -> None:
    without = Agent("shop", include=[tool(plain)])
    before = {t["name"]: t for t in (await _raw(without.asgi(), "tools/list", stateless))["result"]["tools"]}
    after = {
        t["name"]: t for t in (await _raw(apps_agent().asgi(), "tools/list", stateless))["result"]["tools"]
    }
    assert json.dumps(after["plain"]) == json.dumps(before["plain"]) and "_meta" not in after["plain"]
    assert "_meta" in after["show_cart"]


async def test_no_extension_is_declared_without_a_ui() -> None:
    agent = Agent("plain", include=[tool(plain)])
    for mode in MODES:
        async with client(agent.asgi(), mode, advertised=True) as c:
            assert not (await capabilities_of(c, mode)).extensions


# --- the example: the purchase approval card, and the tool its buttons call ------------------------------------


@pytest.mark.parametrize("mode", MODES)
async def test_the_example_serves_its_approval_card(mode: str) -> None:
    async with client(example_app, mode, advertised=True, token="admin-token") as admin:
        assert (await capabilities_of(admin, mode)).extensions[EXTENSION_ID] == {}
        tools = {t.name: t for t in (await admin.list_tools()).tools}
        assert tools["submit_purchase_request"].meta["ui"] == {"resourceUri": APPROVAL_CARD}
        assert tools["purchase_approval"].meta["ui"] == {"resourceUri": APPROVAL_CARD}
        assert tools["decide_purchase_approval"].meta["ui"] == {
            "resourceUri": APPROVAL_CARD,
            "visibility": ["app"],
        }
        assert tools["search_assets"].meta is None
        card = (await admin.read_resource(APPROVAL_CARD)).contents[0]
        assert card.mime_type == APP_MIME_TYPE and card.meta == {"ui": {"prefersBorder": True}}
        assert "ui/initialize" in card.text and "decide_purchase_approval" in card.text
        assert "<script src" not in card.text and "https://" not in card.text  # self-contained: no CDN
    async with client(example_app, mode, advertised=True, token="demo-token") as alice:
        names = {t.name for t in (await alice.list_tools()).tools}
        assert "submit_purchase_request" in names
        assert not names & {"purchase_approval", "decide_purchase_approval"}  # for budget admins only


ORDER = {
    "request": {
        "sku": "ACC-DOCK",
        "quantity": 1,
        "department": "engineering",
        "justification": "A dock for the new developer's desk",
    }
}


async def submit(mode: str, approval_id: str | None = None) -> Any:
    async with client(example_app, mode, advertised=True, token="demo-token") as alice:
        meta = {"agentmw/approvalId": approval_id} if approval_id else None
        return await alice.call_tool("submit_purchase_request", ORDER, meta=meta)


@pytest.mark.parametrize("mode", MODES)
async def test_the_cards_decision_tool_records_the_decision_with_the_approvals_rule(mode: str) -> None:
    waiting = await submit(mode)  # no in-band approval: an out-of-band one, shown by the card
    assert waiting.is_error is True and "Nothing has been executed" in waiting.content[0].text
    approval = waiting.meta["agentmw/approval"]
    assert approval["status"] == "pending" and approval["requestedBy"] == "alice"
    async with client(example_app, mode, advertised=True, token="admin-token") as admin:
        shown = await admin.call_tool("purchase_approval", {"approval_id": approval["id"]})
        assert shown.is_error is False and shown.structured_content["status"] == "pending"
        assert shown.structured_content["arguments"] == ORDER
        decided = await admin.call_tool(
            "decide_purchase_approval", {"approval_id": approval["id"], "approve": True, "note": "ok"}
        )
        assert decided.is_error is False
        assert decided.structured_content["status"] == "approved"
        assert decided.structured_content["decidedBy"] == "budget-admin"
        again = await admin.call_tool(
            "decide_purchase_approval", {"approval_id": approval["id"], "approve": False}
        )
        assert again.is_error is True
        # the store's clause made a sentence, then the permanence: "... approved. This failure is permanent"
        assert (
            f"Approval {approval['id']} is already approved. This failure is permanent"
            in again.content[0].text
        )
    stored = await example_agent.approvals.get(approval["id"])
    assert stored is not None and stored.status == "approved" and stored.decided_by == "budget-admin"
    done = await submit(mode, approval["id"])
    assert done.is_error is False and done.structured_content["status"] == "submitted"


async def test_the_requester_cannot_decide_through_the_card() -> None:
    waiting = await submit("2026-07-28")
    approval_id = waiting.meta["agentmw/approval"]["id"]
    async with client(example_app, "2026-07-28", advertised=True, token="demo-token") as alice:
        with pytest.raises(
            MCPError, match="Unknown tool: decide_purchase_approval"
        ):  # hidden: not a budget admin
            await alice.call_tool("decide_purchase_approval", {"approval_id": approval_id, "approve": True})
    stored = await example_agent.approvals.get(approval_id)
    assert stored is not None and stored.status == "pending" and stored.decided_by is None


async def test_a_budget_admin_cannot_decide_their_own_request() -> None:
    async with client(example_app, "2026-07-28", advertised=True, token="admin-token") as admin:
        waiting = await admin.call_tool("submit_purchase_request", ORDER)
        approval_id = waiting.meta["agentmw/approval"]["id"]
        refused = await admin.call_tool(
            "decide_purchase_approval", {"approval_id": approval_id, "approve": True}
        )
        assert refused.is_error is True and "other than the requester" in refused.content[0].text
    stored = await example_agent.approvals.get(approval_id)
    assert stored is not None and stored.status == "pending"


async def test_a_decisions_note_is_bounded_as_the_cards_field() -> None:
    waiting = await submit("2026-07-28")
    approval_id = waiting.meta["agentmw/approval"]["id"]
    async with client(example_app, "2026-07-28", advertised=True, token="admin-token") as admin:
        refused = await admin.call_tool(
            "decide_purchase_approval", {"approval_id": approval_id, "approve": True, "note": "x" * 2001}
        )
        assert refused.is_error is True and "2000" in refused.content[0].text
        stored = await example_agent.approvals.get(approval_id)
        assert stored is not None and stored.status == "pending" and stored.note == ""
        decided = await admin.call_tool(
            "decide_purchase_approval", {"approval_id": approval_id, "approve": False, "note": "n" * 2000}
        )
        assert decided.is_error is False and decided.structured_content["status"] == "rejected"
    stored = await example_agent.approvals.get(approval_id)
    assert stored is not None and stored.note == "n" * 2000


def test_agent_decorators_and_routes_take_a_ui_too() -> None:
    from fastapi import FastAPI

    from agentmw import AgentMiddleware
    from agentmw.mcp.convert import tool_descriptor

    app = FastAPI()

    @app.get("/cart/{sku}")
    @tool(ui=UI("ui://shop/card.html", visibility=("model",)))
    def cart_route(sku: str) -> dict[str, str]:
        return {"sku": sku}

    agent = Agent("decorators", include=[app])

    @agent.tool(ui="ui://shop/card.html")
    def show(sku: str) -> str:
        return sku

    @agent.resource("ui://shop/card.html", ui=UiResource(prefers_border=True))
    def card() -> str:
        return CARD

    app.add_middleware(AgentMiddleware, agent=agent)
    agent.bind_host(app)
    route = agent.tools["cart_route"]
    assert route.route is not None  # the route, served over MCP with its UI
    assert tool_descriptor(route)["_meta"]["ui"] == {
        "resourceUri": "ui://shop/card.html",
        "visibility": ["model"],
    }
    assert agent.tools["show"].ui == {"resourceUri": "ui://shop/card.html"}
    assert agent.resources["ui://shop/card.html"].ui == {"prefersBorder": True}
