"""Auth in the example app (examples/fastapi_app), run as a user runs it, in its own process:

- with ``AGENTMW_EXAMPLE_ISSUER`` naming the tests' real authorization server (Authlib, tests/auth/server.py), the
  official ``mcp`` client's OAuth support walks the whole flow against the example: a public read-only tool
  needs no token; the scoped tool answers 401, and the client discovers, registers, authorizes with PKCE, gets a
  token and makes the call;
- the admin-only skill is hidden from everyone but budget admins, and the approvals endpoint decides with the
  verified identities of the requester and the approver;
- in dev mode, a capability's rate limit holds across ``uvicorn --workers 2`` (separate processes) sharing one
  SQLite file.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import mcp_types as types
import pytest

from tests.auth.clients import bearer_client, oauth_client
from tests.auth.server import AuthServer
from tests.example_process import REPLICA_HEADER, example_process

ADMIN = "admin"  # the authorization server's admin user, made a budget admin of the example
ORDER = {
    "request": {
        "sku": "ACC-DOCK",
        "quantity": 1,
        "department": "engineering",
        "justification": "Docking station for a new hire",
    }
}
META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}


@pytest.fixture(scope="module")
def example_url(auth_server: AuthServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    env = {"AGENTMW_EXAMPLE_ISSUER": auth_server.issuer, "AGENTMW_EXAMPLE_BUDGET_ADMINS": ADMIN}
    with example_process(tmp_path_factory.mktemp("example-oauth"), env) as url:
        yield url


@pytest.fixture(autouse=True)
def alice(auth_server: AuthServer) -> None:
    auth_server.login("alice")


def token(
    auth_server: AuthServer, url: str, subject: str, scope: str = "", roles: tuple[str, ...] = ()
) -> str:
    return auth_server.issue(subject=subject, audience=f"{url}/mcp", scope=scope, roles=roles)


async def approve(context, params: types.ElicitRequestParams) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={"approved": True})


async def _call(
    http: httpx.AsyncClient,
    url: str,
    bearer: str | None,
    name: str,
    arguments: dict,
    meta: dict | None = None,
) -> httpx.Response:
    headers = {
        "accept": "application/json, text/event-stream",
        "content-type": "application/json",
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": "tools/call",
        "mcp-name": name,
    }
    if bearer:
        headers["authorization"] = f"Bearer {bearer}"
    return await http.post(
        f"{url}/mcp",
        headers=headers,
        json={
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": name, "arguments": arguments, "_meta": {**META, **(meta or {})}},
        },
    )


# --- the OAuth flow, with the official client ----------------------------------------------------------------


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_the_official_client_logs_in_to_the_example(
    auth_server: AuthServer, example_url: str, mode: str
) -> None:
    registrations = auth_server.registrations
    asked = len(auth_server.authorize_requests)
    async with oauth_client(example_url, mode, elicitation_callback=approve) as client:
        tools = {t.name for t in (await client.list_tools()).tools}  # public: no login yet
        found = await client.call_tool("search_assets", {"query": "monitor"})
        assert auth_server.registrations == registrations, "the public read-only tool needs no token"
        receipt = await client.call_tool("submit_purchase_request", ORDER)  # 401: log in, then the call
    assert {"search_assets", "submit_purchase_request", "department_budget"} <= tools
    assert [a["sku"] for a in found.structured_content["result"]] == ["MON-27"]
    assert receipt.is_error is False, receipt.content
    assert (
        receipt.structured_content["requested_by"] == "alice"
    )  # the route's dependency sees the verified caller
    assert auth_server.registrations == registrations + 1  # RFC 7591 dynamic registration
    login = auth_server.authorize_requests[asked]
    assert login["code_challenge_method"] == "S256" and len(login["code_challenge"]) == 43  # PKCE
    assert login["resource"] == f"{example_url}/mcp"  # RFC 8707: a token for this server
    assert login["scope"] == "purchases:write"  # what the 401's challenge named
    assert auth_server.token_requests[-1]["code_verifier"]
    assert auth_server.token_requests[-1]["resource"] == f"{example_url}/mcp"


async def test_the_example_challenges_and_publishes_its_metadata(
    auth_server: AuthServer, example_url: str
) -> None:
    async with httpx.AsyncClient(timeout=30) as http:
        metadata = (await http.get(f"{example_url}/.well-known/oauth-protected-resource/mcp")).json()
        refused = await _call(http, example_url, None, "submit_purchase_request", ORDER)
        wrong = await _call(
            http,
            example_url,
            auth_server.issue(subject="alice", audience="http://elsewhere/mcp", scope="purchases:write"),
            "submit_purchase_request",
            ORDER,
        )
        bob = await _call(
            http,
            example_url,
            token(auth_server, example_url, "bob", "assets:read"),
            "submit_purchase_request",
            ORDER,
        )
    assert metadata["resource"] == f"{example_url}/mcp"
    assert metadata["authorization_servers"] == [auth_server.issuer]
    assert {"purchases:write", "budget:admin"} <= set(metadata["scopes_supported"])
    assert refused.status_code == 401
    assert (
        f'resource_metadata="{example_url}/.well-known/oauth-protected-resource/mcp"'
        in refused.headers["www-authenticate"]
    )
    assert wrong.status_code == 401 and 'error="invalid_token"' in wrong.headers["www-authenticate"]
    assert bob.status_code == 403 and 'scope="purchases:write"' in bob.headers["www-authenticate"]  # step-up


# --- the admin-only skill ------------------------------------------------------------------------------------


async def test_the_admin_only_skill_is_for_budget_admins_only(
    auth_server: AuthServer, example_url: str
) -> None:
    admin = token(auth_server, example_url, ADMIN, "budget:admin", ("budget-admin",))
    alice = token(auth_server, example_url, "alice", "purchases:write", ("buyer",))

    async def send(bearer: str, skill: str) -> httpx.Response:
        return await http.post(
            f"{example_url}/a2a",
            headers={"a2a-version": "1.0", "authorization": f"Bearer {bearer}"},
            json={
                "jsonrpc": "2.0",
                "id": 1,
                "method": "SendMessage",
                "params": {
                    "message": {
                        "messageId": str(uuid.uuid4()),
                        "role": "ROLE_USER",
                        "metadata": {"skill": skill},
                        "parts": [{"data": {"department": "marketing", "total": 12000}}],
                    }
                },
            },
        )

    async with httpx.AsyncClient(timeout=30) as http:
        cards = {
            who: (
                await http.get(
                    f"{example_url}/.well-known/agent-card.json",
                    headers={"authorization": f"Bearer {bearer}"},
                )
            ).json()
            for who, bearer in (("admin", admin), ("alice", alice))
        }
        done = (await send(admin, "set_budget")).json()["result"]["task"]
        hidden = (await send(alice, "set_budget")).json()["error"]
        unknown = (await send(alice, "no_such_skill")).json()["error"]
    assert "set_budget" in {s["id"] for s in cards["admin"]["skills"]}
    assert "set_budget" not in {s["id"] for s in cards["alice"]["skills"]}
    assert done["status"]["state"] == "TASK_STATE_COMPLETED", done
    assert done["artifacts"][0]["parts"][0]["data"]["total"] == 12000
    assert json.dumps(hidden).replace("set_budget", "X") == json.dumps(unknown).replace("no_such_skill", "X")


# --- out-of-band approvals between verified identities ------------------------------------------------------


async def test_approvals_are_requested_and_decided_by_verified_identities(
    auth_server: AuthServer, example_url: str
) -> None:
    alice = token(auth_server, example_url, "alice", "purchases:write", ("buyer",))
    bob = token(auth_server, example_url, "bob", "purchases:write")
    admin = token(auth_server, example_url, ADMIN, "budget:admin", ("budget-admin",))
    async with httpx.AsyncClient(timeout=30, base_url=example_url) as http:
        pending = (await _call(http, example_url, alice, "submit_purchase_request", ORDER)).json()["result"]
        approval = pending["_meta"]["agentmw/approval"]
        assert approval["requestedBy"] == "alice"  # the token's subject, not anything the client claims
        url = f"/approvals/{approval['id']}"

        def as_(bearer: str) -> dict[str, str]:
            return {"authorization": f"Bearer {bearer}"}

        assert (await http.get(url, headers=as_(alice))).status_code == 200  # the requester may read it
        assert (await http.post(url, json={"approve": True}, headers=as_(alice))).status_code == 403
        assert (await http.get(url, headers=as_(bob))).status_code == 403  # a stranger may not even read it
        assert (await http.post(url, json={"approve": True})).status_code == 401
        decided = await http.post(url, json={"approve": True, "note": "ok"}, headers=as_(admin))
        assert decided.status_code == 200 and decided.json()["decidedBy"] == ADMIN
        done = (
            await _call(
                http,
                example_url,
                alice,
                "submit_purchase_request",
                ORDER,
                {"agentmw/approvalId": approval["id"]},
            )
        ).json()["result"]
    assert done["isError"] is False and done["structuredContent"]["requested_by"] == "alice"


# --- a rate limit across two worker processes ------------------------------------------------------------------


async def test_a_rate_limit_holds_across_two_worker_processes(tmp_path: Path) -> None:
    """``supplier_notes`` allows 30 calls a minute per caller. 40 calls at once, 20 to each of two worker
    processes that share the SQLite file, as ``uvicorn --workers 2`` runs them: exactly 30 pass, and both let
    calls through. Each worker listens on its own port so that each surely gets its 20: on one shared port,
    which worker accepts a connection is the kernel's choice, and on a loaded machine one may get almost none."""
    store = f"sqlite:///{tmp_path / 'shared.db'}"
    with (
        example_process(tmp_path / "a", {}, store=store) as url_a,
        example_process(tmp_path / "b", {}, store=store) as url_b,
    ):
        if time.time() % 60 > 45:  # a fixed one-minute window: start the burst well inside one
            await asyncio.sleep(61 - time.time() % 60)
        async with httpx.AsyncClient(timeout=60) as http:

            async def one(url: str) -> tuple[str, dict]:
                response = await _call(http, url, "demo-token", "supplier_notes", {"sku": "MON-27"})
                assert response.status_code == 200, response.text
                return response.headers[REPLICA_HEADER], response.json()["result"]

            answers = await asyncio.gather(*(one(url) for url in (url_a, url_b) for _ in range(20)))
        async with bearer_client(
            url_b, "2026-07-28", "admin-token"
        ) as client:  # another caller: its own limit
            other = await client.call_tool("supplier_notes", {"sku": "MON-27"})
    workers = {who for who, _ in answers}
    assert len({pid.split("-")[1] for pid in workers}) == 2, workers  # two processes
    passed = [r for _, r in answers if not r["isError"]]
    refused = [r for _, r in answers if r["isError"]]
    assert len(passed) == 30 and len(refused) == 10
    assert all(
        r["_meta"]["agentmw/retryable"] is True and 0 < r["_meta"]["agentmw/retryAfter"] <= 60
        for r in refused
    )
    assert {who for who, r in answers if not r["isError"]} == workers  # both workers let calls through
    assert other.is_error is False
