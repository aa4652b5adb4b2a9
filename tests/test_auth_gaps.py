"""Four auth edges, each over a real socket: an issuer outage is 503 (not 401); on MCP 2026-07-28 a hidden tool
with ``x-mcp-header`` arguments answers exactly as an unknown one; A2A picks the only skill a caller may see; and
push notifications are signed with the key the agent's JWKS publishes, wherever A2A keeps its tasks."""

from __future__ import annotations

import hashlib
import json
import uuid
from typing import Annotated

import httpx
import jwt
import pytest
from a2a.types.a2a_pb2 import SendMessageRequest
from pydantic import Field
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from agentmw import Agent, skill, tool
from agentmw.a2a import A2ASettings, PushPolicy, PushSigner
from agentmw.auth import IntrospectionVerifier, JWTVerifier, Principal, ProtectedResource
from tests.auth.app import build
from tests.auth.clients import a2a_refusal
from tests.auth.server import AuthServer
from tests.conftest import free_port, serve
from tests.test_auth_faces import message, sdk_client
from tests.waiting import eventually

STATELESS = {
    "accept": "application/json, text/event-stream",
    "content-type": "application/json",
    "mcp-protocol-version": "2026-07-28",
}
META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}


async def _mcp(
    http: httpx.AsyncClient,
    url: str,
    token: str | None,
    method: str,
    params: dict | None = None,
    headers: dict[str, str] | None = None,
) -> httpx.Response:
    sent = {**STATELESS, "mcp-method": method, **(headers or {})}
    if params and "name" in params:
        sent["mcp-name"] = params["name"]
    if token is not None:
        sent["authorization"] = f"Bearer {token}"
    return await http.post(
        f"{url}/mcp",
        headers=sent,
        json={"jsonrpc": "2.0", "id": 1, "method": method, "params": {**(params or {}), "_meta": META}},
    )


# --- (1) the issuer is down: 503 with Retry-After, never 401 ---------------------------------------------------


@pytest.mark.parametrize("kind", ["jwks", "introspection"])
async def test_an_issuer_outage_is_503_with_retry_after(auth_server: AuthServer, kind: str) -> None:
    dead = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    verifier = (
        JWTVerifier(issuer=auth_server.issuer, jwks_url=f"{dead}/jwks")
        if kind == "jwks"
        else IntrospectionVerifier(
            f"{dead}/introspect", client_id="resource-server", client_secret="rs-secret"
        )
    )
    with serve(build(auth_server.issuer, verifier=verifier)) as url:
        bearer = auth_server.issue(subject="alice", audience=f"{url}/mcp", scope="mcp")
        auth = {"authorization": f"Bearer {bearer}"}
        async with httpx.AsyncClient(timeout=30) as http:
            mcp = await _mcp(http, url, bearer, "tools/list")
            a2a = await http.post(
                f"{url}/a2a",
                headers={"a2a-version": "1.0", **auth},
                json={
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "SendMessage",
                    "params": {
                        "message": {
                            "messageId": "m1",
                            "role": "ROLE_USER",
                            "parts": [{"text": "hi"}],
                            "metadata": {"skill": "chat"},
                        }
                    },
                },
            )
            agui = await http.post(
                f"{url}/agui/chat",
                headers=auth,
                json={
                    "threadId": "t",
                    "runId": "r",
                    "state": {},
                    "tools": [],
                    "context": [],
                    "forwardedProps": {},
                    "messages": [{"id": "u", "role": "user", "content": "hi"}],
                },
            )
            card = await http.get(f"{url}/.well-known/agent-card.json", headers=auth)
            anonymous = await _mcp(http, url, None, "tools/list")
    for response in (mcp, a2a, agui):
        assert response.status_code == 503, response.text
        assert 1 <= int(response.headers["retry-after"]) <= 60
        assert "www-authenticate" not in response.headers  # nothing tells the client to log in again
    assert "cannot be fetched" in mcp.text or "introspection failed" in mcp.text
    assert a2a_refusal(a2a) == "UNAVAILABLE"
    assert card.status_code == 200  # the card is public: it is served as anonymous callers see it
    assert anonymous.status_code == 401  # no token is still a login prompt


# --- (2) MCP 2026-07-28: a hidden tool's Mcp-Param headers are never checked ------------------------------------


def _role_agent() -> Agent:
    @tool(roles=["ops"])
    async def regional_reset(
        region: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})],
    ) -> str:
        """Reset a region (operators only)."""
        return f"reset {region}"

    @tool
    async def ping() -> str:
        """Ping."""
        return "pong"

    users = {"op": Principal("op", roles={"ops"}), "guest": Principal("guest")}
    auth = ProtectedResource(
        authorization_servers=["https://login.example.com"], verifier=lambda token, resource: users.get(token)
    )
    return Agent("regions", include=[regional_reset, ping], auth=auth, store="memory://")


async def test_a_hidden_tool_with_header_params_answers_as_an_unknown_one() -> None:
    with serve(_role_agent().asgi()) as url:
        async with httpx.AsyncClient(timeout=30) as http:
            answers = {}
            for name in ("regional_reset", "no_such_tool"):  # neither sends its Mcp-Param-Region header
                response = await _mcp(
                    http, url, "guest", "tools/call", {"name": name, "arguments": {"region": "eu"}}
                )
                answers[name] = (
                    response.status_code,
                    json.dumps(response.json()["error"]).replace(name, "<name>"),
                )
            visible = await _mcp(
                http, url, "op", "tools/call", {"name": "regional_reset", "arguments": {"region": "eu"}}
            )
            called = await _mcp(
                http,
                url,
                "op",
                "tools/call",
                {"name": "regional_reset", "arguments": {"region": "eu"}},
                {"mcp-param-region": "eu"},
            )
    assert answers["regional_reset"] == answers["no_such_tool"]
    assert "Unknown tool" in answers["no_such_tool"][1]
    assert visible.json()["error"]["code"] == -32020  # the check still holds for a caller who sees the tool
    assert called.json()["result"]["content"][0]["text"] == "reset eu"


# --- (3) A2A: the only skill a caller may see needs no name -----------------------------------------------------


async def test_a2a_runs_the_only_skill_the_caller_may_see(auth_server: AuthServer, agent_url: str) -> None:
    bob = auth_server.issue(subject="bob", audience=f"{agent_url}/mcp", scope="mcp")
    root = auth_server.issue(
        subject="root", audience=f"{agent_url}/mcp", scope="mcp budget:admin", roles=("admin",)
    )
    states = {}
    async with httpx.AsyncClient(timeout=30) as http:
        for who, bearer in (("bob", bob), ("root", root)):
            response = await http.post(
                f"{agent_url}/a2a",
                headers={"a2a-version": "1.0", "authorization": f"Bearer {bearer}"},
                json={
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "SendMessage",
                    "params": {
                        "message": {
                            "messageId": str(uuid.uuid4()),
                            "role": "ROLE_USER",
                            "parts": [{"text": "hello"}],
                        }
                    },
                },
            )
            task = response.json()["result"]["task"]
            states[who] = task["status"]["state"], task
    state, task = states["bob"]  # bob sees only chat (set_budget is for admins): it runs
    assert state == "TASK_STATE_COMPLETED", task
    assert task["artifacts"][0]["parts"][0]["text"] == "You said: hello"
    state, task = states["root"]  # an admin sees both: the task asks which
    assert state == "TASK_STATE_INPUT_REQUIRED"
    assert {s["id"] for s in task["status"]["message"]["parts"][1]["data"]["skills"]} == {
        "chat",
        "set_budget",
    }


# --- (4) push: signed with the key the agent publishes, even when A2A keeps its tasks elsewhere ---------------


async def test_push_is_signed_with_the_published_key_when_a2a_has_its_own_store() -> None:
    received: list[tuple[dict[str, str], bytes]] = []

    async def hook(request: Request) -> JSONResponse:
        received.append((dict(request.headers), await request.body()))
        return JSONResponse({})

    @skill
    async def echo(text: str) -> str:
        """Echo.

        Summary:
            Says it back.
        """
        return text

    settings = A2ASettings(
        push=PushPolicy(allow_hosts=["127.0.0.1"], signer=PushSigner()),
    )
    agent = Agent("pusher", include=[echo], store="memory://", a2a=settings)
    with (
        serve(agent.asgi()) as url,
        serve(Starlette(routes=[Route("/hook", hook, methods=["POST"])])) as receiver,
    ):
        async with httpx.AsyncClient(timeout=30) as http:
            jwks = (await http.get(f"{url}/.well-known/jwks.json")).json()  # published before any push
            client = await sdk_client(http, url, "JSONRPC")
            request = SendMessageRequest(message=message("ping"))
            request.configuration.task_push_notification_config.url = f"{receiver}/hook"
            [e async for e in client.send_message(request)]
            await eventually(lambda: len(received) >= 1, "a push notification")
    keys = {k["kid"]: jwt.PyJWK(k) for k in jwks["keys"]}
    for headers, body in received:
        signed = headers["authorization"].removeprefix("Bearer ")
        kid = jwt.get_unverified_header(signed)["kid"]
        assert kid in keys, "the push was signed with a key the agent does not publish"
        claims = jwt.decode(
            signed, keys[kid].key, algorithms=["ES256"], audience=f"{receiver}/hook", issuer="pusher"
        )  # the issuer defaults to the agent's name
        assert claims["request_body_sha256"] == hashlib.sha256(body).hexdigest()
