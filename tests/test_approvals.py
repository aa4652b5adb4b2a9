"""Out-of-band approvals trust only real identities: the app's authentication, never an invented header.

- With no identity source (no ``identify`` hook, no host authentication), out-of-band approval is off and
  says so: the endpoint answers 403 "no approver configured", and a gated call that cannot be asked
  in-band is refused without recording anything.
- Reading an approval needs the right to decide it, or being its requester.
- An approval is bound to its requester: another caller cannot use its id.
"""

from __future__ import annotations

import httpx
import pytest
from starlette.applications import Starlette
from starlette.authentication import AuthCredentials, AuthenticationBackend, SimpleUser
from starlette.middleware import Middleware
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.requests import HTTPConnection

from agentmw import Agent, AgentMiddleware, tool
from agentmw.identity import Unauthenticated
from agentmw.safety import human_gate
from agentmw.testing import McpTestClient

ran: list[str] = []
USERS = {"t-alice": "alice", "t-bob": "bob", "t-admin": "admin", "t-carol": "carol"}
ARGS = {"item": "printer", "quantity": 3}


@tool
@human_gate(side_effects="Places an order with the supplier")
async def place_order(item: str, quantity: int) -> str:
    """Place an order."""
    ran.append(f"{item}:{quantity}")
    return f"ordered {quantity} x {item}"


def identify(connection: HTTPConnection) -> str | None:
    """The app's authentication: only tokens it issued are identities."""
    scheme, _, token = connection.headers.get("authorization", "").partition(" ")
    if token == "t-expired":
        raise Unauthenticated("The token has expired", challenge='Bearer error="invalid_token"')
    return USERS.get(token) if scheme == "Bearer" else None


class TokenBackend(AuthenticationBackend):
    async def authenticate(self, conn: HTTPConnection):
        _, _, token = conn.headers.get("authorization", "").partition(" ")
        name = USERS.get(token)
        return (AuthCredentials(["authenticated"]), SimpleUser(name)) if name else None


def build(
    *, with_identify: bool = True, host_auth: bool = False, **settings: object
) -> tuple[Agent, Starlette]:
    agent = Agent(
        "approvals", identify=identify if with_identify else None, include=[place_order], **settings
    )  # type: ignore[arg-type]
    middleware = [Middleware(AuthenticationMiddleware, backend=TokenBackend())] if host_auth else []
    app = Starlette(middleware=[*middleware, Middleware(AgentMiddleware, agent=agent)])
    return agent, app


@pytest.fixture(autouse=True)
def _clear() -> None:
    ran.clear()


def http(app: Starlette, token: str | None = None) -> httpx.AsyncClient:
    headers = {"authorization": f"Bearer {token}"} if token else {}
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1:8000", headers=headers, timeout=10
    )


def mcp_as(app: Starlette, token: str | None) -> McpTestClient:
    return McpTestClient(app, headers={"authorization": f"Bearer {token}"} if token else {})


async def request_approval(app: Starlette, token: str) -> dict:
    async with mcp_as(app, token) as mcp:
        pending = await mcp.call_tool("place_order", ARGS)
    assert pending["isError"] is True and "Nothing has been executed" in pending["content"][0]["text"]
    return pending["_meta"]["agentmw/approval"]


async def call_with(app: Starlette, token: str | None, approval_id: str) -> dict:
    async with mcp_as(app, token) as mcp:
        return await mcp.request(
            "tools/call",
            {"name": "place_order", "arguments": ARGS, "_meta": {"agentmw/approvalId": approval_id}},
        )


# --- no identity source: off, and says so --------------------------------------------------------------


async def test_without_an_identity_source_out_of_band_approval_is_off() -> None:
    agent, app = build(with_identify=False)
    async with mcp_as(app, "x") as mcp:  # any invented header: it is not an identity
        refused = await mcp.call_tool("place_order", ARGS)
    assert refused["isError"] is True
    text = refused["content"][0]["text"]
    assert "no approver configured" in text and "Nothing was executed" in text
    assert "agentmw/approval" not in refused.get("_meta", {})
    assert await agent.approvals.count() == 0, "nothing is recorded that nobody could decide"
    async with http(app, "x") as client:
        for method in ("GET", "POST"):
            answer = await client.request(method, "/approvals/appr-anything", json={"approve": True})
            assert answer.status_code == 403 and "no approver configured" in answer.json()["detail"]
    used = await call_with(app, "y", "appr-anything")
    assert used["isError"] is True and "no approver configured" in used["content"][0]["text"]
    assert ran == []


async def test_an_approver_hook_alone_is_no_identity_source() -> None:
    _, app = build(with_identify=False, approver=lambda identity, approval: True)
    async with http(app, "x") as client:
        answer = await client.get("/approvals/appr-anything")
    assert answer.status_code == 403 and "no approver configured" in answer.json()["detail"]


# --- the requester cannot approve themselves, whatever header they invent ------------------------------------


async def test_an_invented_credential_is_no_identity() -> None:
    agent, app = build()
    async with mcp_as(app, "invented") as mcp:
        refused = await mcp.call_tool("place_order", ARGS)
    assert refused["isError"] is True and "needs an authenticated caller" in refused["content"][0]["text"]
    assert await agent.approvals.count() == 0
    approval = await request_approval(app, "t-alice")
    assert approval["requestedBy"] == "alice"
    async with http(app, "made-up") as client:
        for method in ("GET", "POST"):
            answer = await client.request(method, f"/approvals/{approval['id']}", json={"approve": True})
            assert answer.status_code == 401 and answer.headers["www-authenticate"] == "Bearer"
    async with http(app, "t-expired") as client:
        expired = await client.get(f"/approvals/{approval['id']}")
    assert (
        expired.status_code == 401 and expired.headers["www-authenticate"] == 'Bearer error="invalid_token"'
    )
    async with http(app, "t-alice") as client:
        own = await client.post(f"/approvals/{approval['id']}", json={"approve": True})
    assert own.status_code == 403 and "cannot approve their own action" in own.json()["detail"]
    assert (await agent.approvals.get(approval["id"])).status == "pending"


# --- reading needs the right to decide, or being the requester -----------------------------------------------


async def test_reading_an_approval_needs_the_right_to_decide_it_or_being_its_requester() -> None:
    _, app = build(approver=lambda identity, approval: identity == "admin")
    approval = await request_approval(app, "t-alice")
    url = f"/approvals/{approval['id']}"
    async with http(app, "t-carol") as carol:
        shown = await carol.get(url)
        assert shown.status_code == 403 and "arguments" not in shown.text
        assert (await carol.post(url, json={"approve": True})).status_code == 403
    async with http(app, "t-alice") as alice:
        mine = await alice.get(url)
        assert mine.status_code == 200 and mine.json()["arguments"] == ARGS
        assert (await alice.post(url, json={"approve": True})).status_code == 403
    async with http(app, "t-admin") as admin:
        assert (await admin.get(url)).json()["status"] == "pending"
        decided = await admin.post(url, json={"approve": True, "note": "ok"})
        assert decided.status_code == 200 and decided.json()["decidedBy"] == "admin"
    async with http(app) as nobody:
        assert (await nobody.get(url)).status_code == 401


async def test_by_default_any_other_authenticated_caller_decides() -> None:
    _, app = build()
    approval = await request_approval(app, "t-alice")
    async with http(app, "t-carol") as carol:
        assert (await carol.get(f"/approvals/{approval['id']}")).status_code == 200
        decided = await carol.post(f"/approvals/{approval['id']}", json={"approve": False})
        assert decided.json()["status"] == "rejected" and decided.json()["decidedBy"] == "carol"
    rejected = await call_with(app, "t-alice", approval["id"])
    assert rejected["isError"] is True and "carol rejected" in rejected["content"][0]["text"]
    assert ran == []


# --- an approval is bound to its requester ---------------------------------------------------------------


async def test_an_approval_works_only_for_its_requester() -> None:
    _, app = build()
    approval = await request_approval(app, "t-alice")
    async with http(app, "t-admin") as admin:
        assert (await admin.post(f"/approvals/{approval['id']}", json={"approve": True})).status_code == 200
    for token in ("t-bob", "t-admin"):
        stolen = await call_with(app, token, approval["id"])
        assert stolen["isError"] is True and "requested by another caller" in stolen["content"][0]["text"]
    anonymous = await call_with(app, None, approval["id"])
    assert anonymous["isError"] is True and "needs an authenticated caller" in anonymous["content"][0]["text"]
    assert ran == [], "nothing ran for the other callers"
    done = await call_with(app, "t-alice", approval["id"])
    assert done["isError"] is False and done["content"][0]["text"] == "ordered 3 x printer"
    again = await call_with(app, "t-alice", approval["id"])
    assert again["isError"] is True and "single-use" in again["content"][0]["text"]
    assert ran == ["printer:3"]


# --- the host app's authentication is an identity source too ------------------------------------------------


async def test_the_host_apps_authenticated_user_is_an_identity() -> None:
    _, app = build(with_identify=False, host_auth=True)
    approval = await request_approval(app, "t-alice")
    assert approval["requestedBy"] == "user:alice"
    async with http(app, "invented") as stranger:
        assert (await stranger.get(f"/approvals/{approval['id']}")).status_code == 401
    async with http(app, "t-admin") as admin:
        decided = await admin.post(f"/approvals/{approval['id']}", json={"approve": True})
        assert decided.json()["decidedBy"] == "user:admin"
    assert (await call_with(app, "t-bob", approval["id"]))["isError"] is True
    done = await call_with(app, "t-alice", approval["id"])
    assert done["content"][0]["text"] == "ordered 3 x printer"


# --- the decision body ---------------------------------------------------------------------------------------


async def test_decision_bodies_are_read_strictly() -> None:
    _, app = build()
    approval = await request_approval(app, "t-alice")
    url = f"/approvals/{approval['id']}"
    async with http(app, "t-admin") as admin:
        assert (await admin.post(url, content=b"{not json")).status_code == 400
        assert (await admin.post(url, content=b'{"approve": NaN}')).status_code == 400
        assert (await admin.post(url, content=b"")).status_code == 422
        assert (await admin.post(url, json={"approve": "yes"})).status_code == 422
        assert (await admin.post(url, json={"approve": True, "note": "x" * 70_000})).status_code == 413
        put = await admin.put(url, json={"approve": True})
        assert put.status_code == 405 and put.headers["allow"] == "GET, POST"
        assert (await admin.get("/approvals/appr-unknown")).status_code == 404
        assert (await admin.post(url, json={"approve": True})).json()["status"] == "approved"
        twice = await admin.post(url, json={"approve": False})
        assert twice.status_code == 409 and "already approved" in twice.json()["detail"]


# --- the example app: its own tokens are its identity source -----------------------------------------------


async def test_the_example_approves_out_of_band_with_its_own_tokens() -> None:
    from examples.fastapi_app.main import app

    order = {
        "request": {
            "sku": "ACC-DOCK",
            "quantity": 1,
            "department": "engineering",
            "justification": "Docking station for a new hire",
        }
    }
    async with McpTestClient(app, headers={"authorization": "Bearer demo-token"}) as alice:  # no elicitation
        pending = await alice.call_tool("submit_purchase_request", order)
        approval = pending["_meta"]["agentmw/approval"]
        assert approval["requestedBy"] == "alice"
        url = f"/approvals/{approval['id']}"
        async with (
            http(app, "demo-token") as own,
            http(app, "made-up") as stranger,
            http(app, "admin-token") as admin,
        ):
            assert (await own.get(url)).status_code == 200, "the requester may read it"
            assert (await own.post(url, json={"approve": True})).status_code == 403
            assert (await stranger.post(url, json={"approve": True})).status_code == 401
            decided = await admin.post(url, json={"approve": True, "note": "ok"})
            assert decided.status_code == 200 and decided.json()["decidedBy"] == "budget-admin"
        done = await alice.request(
            "tools/call",
            {
                "name": "submit_purchase_request",
                "arguments": order,
                "_meta": {"agentmw/approvalId": approval["id"]},
            },
        )
    assert done["isError"] is False and done["structuredContent"]["status"] == "submitted"
