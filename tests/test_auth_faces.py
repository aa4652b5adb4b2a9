"""The same verified caller on every face: A2A (the a2a-sdk client with a bearer token, both bindings, the card
and extended card, 401/403, signed push notifications), AG-UI (the official ``@ag-ui/client`` with a header),
rate limits held in the shared state across two replicas, and RFC 7662 introspection."""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path

import httpx
import jwt
import pytest
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types.a2a_pb2 import GetExtendedAgentCardRequest, Message, Part, Role, SendMessageRequest, TaskState
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from agentmw.a2a import A2ASettings, PushPolicy, PushSigner
from agentmw.auth import IntrospectionVerifier, RateLimit
from tests.auth.app import build
from tests.auth.clients import a2a_refusal
from tests.auth.server import AuthServer
from tests.conftest import serve
from tests.test_agui_client import types
from tests.waiting import eventually

BINDINGS = ["JSONRPC", "HTTP+JSON"]


def token(
    auth_server: AuthServer, agent_url: str, who: str, scope: str = "mcp", roles: tuple[str, ...] = ()
) -> str:
    return auth_server.issue(subject=who, audience=f"{agent_url}/mcp", scope=scope, roles=roles)


def message(text: str, skill: str | None = None) -> Message:
    msg = Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=[Part(text=text)])
    if skill:
        msg.metadata.update({"skill": skill})
    return msg


async def sdk_client(http: httpx.AsyncClient, url: str, binding: str):
    card = await A2ACardResolver(http, url).get_agent_card()
    return ClientFactory(
        ClientConfig(httpx_client=http, streaming=False, supported_protocol_bindings=[binding])
    ).create(card)


# --- A2A ----------------------------------------------------------------------------------------------------


async def test_the_card_lists_what_the_caller_may_use_and_the_security_schemes(
    auth_server: AuthServer, agent_url: str
) -> None:
    admin = token(auth_server, agent_url, "root", "mcp budget:admin", ("admin",))
    async with httpx.AsyncClient() as http:
        public = (await http.get(f"{agent_url}/.well-known/agent-card.json")).json()
        seen_by_admin = (
            await http.get(
                f"{agent_url}/.well-known/agent-card.json", headers={"authorization": f"Bearer {admin}"}
            )
        ).json()
    assert [s["id"] for s in public["skills"]] == ["chat"]  # set_budget is for admins: not even named
    assert [s["id"] for s in seen_by_admin["skills"]] == ["set_budget", "chat"]
    assert seen_by_admin["skills"][0]["securityRequirements"] == [
        {"schemes": {"oauth2": {"list": ["budget:admin"]}}}
    ]
    oauth = public["securitySchemes"]["oauth2"]["oauth2SecurityScheme"]
    assert oauth["oauth2MetadataUrl"] == f"{auth_server.issuer}/.well-known/oauth-authorization-server"
    assert public["securitySchemes"]["bearer"] == {
        "httpAuthSecurityScheme": {"scheme": "Bearer", "bearerFormat": "JWT"}
    }
    assert public["securityRequirements"][0] == {"schemes": {"oauth2": {"list": ["mcp"]}}}


@pytest.mark.parametrize("binding", BINDINGS)
async def test_the_sdk_client_with_a_bearer_token(
    auth_server: AuthServer, agent_url: str, binding: str
) -> None:
    alice = token(auth_server, agent_url, "alice", roles=("buyer",))
    async with httpx.AsyncClient(timeout=30, headers={"authorization": f"Bearer {alice}"}) as http:
        client = await sdk_client(http, agent_url, binding)
        task = [e async for e in client.send_message(SendMessageRequest(message=message("hi", "chat")))][
            -1
        ].task
        assert task.status.state == TaskState.TASK_STATE_COMPLETED
        assert task.artifacts[0].parts[0].text == "You said: hi"
        extended = await client.get_extended_agent_card(GetExtendedAgentCardRequest())
        assert extended.description == "Procurement, as alice sees it"
        assert [s.id for s in extended.skills] == ["chat"]
        errors = []
        for skill in ("set_budget", "no_such_skill"):  # hidden, and truly unknown: answered alike
            with pytest.raises(Exception) as caught:
                [e async for e in client.send_message(SendMessageRequest(message=message("x", skill)))]
            errors.append(str(caught.value).replace(skill, "<skill>"))
        assert errors[0] == errors[1] and "Unknown skill" in errors[0]


@pytest.mark.parametrize("binding", BINDINGS)
async def test_an_admin_runs_the_admin_skill(auth_server: AuthServer, agent_url: str, binding: str) -> None:
    admin = token(auth_server, agent_url, "root", "mcp budget:admin", ("admin",))
    async with httpx.AsyncClient(timeout=30, headers={"authorization": f"Bearer {admin}"}) as http:
        client = await sdk_client(http, agent_url, binding)
        request = SendMessageRequest(message=message("", "set_budget"))
        request.message.parts[0].ClearField("text")
        # a department no other test reads: the app's BUDGETS live as long as the module's server
        request.message.parts[0].data.struct_value.update({"department": "marketing", "amount": 25000})
        task = [e async for e in client.send_message(request)][-1].task
    assert task.status.state == TaskState.TASK_STATE_COMPLETED, task
    assert task.artifacts[0].parts[0].text == "marketing: 25000"


async def _a2a(agent_url: str, bearer: str | None, skill: str, path: str = "/a2a") -> httpx.Response:
    headers = {"a2a-version": "1.0", **({"authorization": f"Bearer {bearer}"} if bearer else {})}
    body = {
        "message": {
            "messageId": str(uuid.uuid4()),
            "role": "ROLE_USER",
            "parts": [{"text": "x"}],
            "metadata": {"skill": skill},
        }
    }
    async with httpx.AsyncClient() as http:
        if path == "/a2a":
            return await http.post(
                agent_url + path,
                headers=headers,
                json={"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": body},
            )
        return await http.post(agent_url + path, headers=headers, json=body)


@pytest.mark.parametrize("path", ["/a2a", "/a2a/message:send"])
async def test_a2a_401_and_403(auth_server: AuthServer, agent_url: str, path: str) -> None:
    missing = await _a2a(agent_url, None, "chat", path)
    assert missing.status_code == 401 and a2a_refusal(missing) == "UNAUTHENTICATED"
    assert 'resource_metadata="' in missing.headers["www-authenticate"]
    # an admin whose token lacks budget:admin: the skill is visible (the role) but its scope is missing
    admin = token(auth_server, agent_url, "root", "mcp", ("admin",))
    refused = await _a2a(agent_url, admin, "set_budget", path)
    assert refused.status_code == 403 and a2a_refusal(refused) == "PERMISSION_DENIED"
    assert 'error="insufficient_scope"' in refused.headers["www-authenticate"]
    assert 'scope="mcp budget:admin"' in refused.headers["www-authenticate"]


async def test_push_notifications_carry_a_jwt_the_receiver_verifies(auth_server: AuthServer) -> None:
    received: list[tuple[dict[str, str], bytes]] = []

    async def hook(request: Request) -> JSONResponse:
        received.append((dict(request.headers), await request.body()))
        return JSONResponse({})

    settings = A2ASettings(
        push=PushPolicy(allow_hosts=["127.0.0.1"], signer=PushSigner(issuer="procurement"))
    )
    with (
        serve(build(auth_server.issuer, a2a=settings)) as url,
        serve(Starlette(routes=[Route("/hook", hook, methods=["POST"])])) as receiver,
    ):
        alice = token(auth_server, url, "alice")
        async with httpx.AsyncClient(timeout=30, headers={"authorization": f"Bearer {alice}"}) as http:
            client = await sdk_client(http, url, "JSONRPC")
            request = SendMessageRequest(message=message("ping", "chat"))
            request.configuration.task_push_notification_config.url = f"{receiver}/hook"
            task = [e async for e in client.send_message(request)][-1].task
            await eventually(lambda: len(received) >= 3, "three push notifications")
            jwks = (await http.get(f"{url}/.well-known/jwks.json")).json()
    keys = {k["kid"]: jwt.PyJWK(k) for k in jwks["keys"]}
    seen = set()
    for headers, body in received:
        signed = headers["authorization"].removeprefix("Bearer ")
        key = keys[jwt.get_unverified_header(signed)["kid"]]
        claims = jwt.decode(
            signed,
            key.key,
            algorithms=["ES256"],
            audience=f"{receiver}/hook",
            issuer="procurement",
            options={"require": ["exp", "iat", "jti"]},
        )
        assert claims["taskId"] == task.id
        assert claims["request_body_sha256"] == __import__("hashlib").sha256(body).hexdigest()
        seen.add(claims["jti"])
        assert next(iter(json.loads(body)))  # the event itself, unchanged
    assert len(seen) == len(received)  # one token per delivery


# --- AG-UI --------------------------------------------------------------------------------------------------


def test_agui_client_with_a_bearer_header(auth_server: AuthServer, agent_url: str) -> None:
    alice = token(auth_server, agent_url, "alice")
    node_steps = drive_with_headers(agent_url, "chat", {"authorization": f"Bearer {alice}"})
    assert types(node_steps[0])[-1] == "RUN_FINISHED"


def drive_with_headers(url: str, skill: str, headers: dict[str, str]) -> list[dict]:
    import subprocess

    from tests.test_agui_client import HARNESS, harness_node

    node = harness_node()
    scenario = {
        "url": f"{url}/agui/{skill}",
        "threadId": f"t-{uuid.uuid4()}",
        "headers": headers,
        "steps": [{"runId": f"r-{uuid.uuid4()}", "say": "hello"}],
    }
    run = subprocess.run(
        [node, str(HARNESS), json.dumps(scenario)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=HARNESS.parent,
    )
    assert run.returncode == 0, run.stderr
    output = json.loads(run.stdout.strip().splitlines()[-1])
    assert output["warnings"] == [] and all("rejected" not in s for s in output["steps"]), output
    return output["steps"]


async def test_agui_401_403_and_hidden_skills(auth_server: AuthServer, agent_url: str) -> None:
    body = {
        "threadId": "t",
        "runId": "r",
        "state": {},
        "tools": [],
        "context": [],
        "forwardedProps": {},
        "messages": [{"id": "u", "role": "user", "content": "hi"}],
    }
    admin_without_scope = token(auth_server, agent_url, "root", "mcp", ("admin",))
    alice = token(auth_server, agent_url, "alice")
    async with httpx.AsyncClient() as http:
        missing = await http.post(f"{agent_url}/agui/chat", json=body)
        assert missing.status_code == 401 and 'resource_metadata="' in missing.headers["www-authenticate"]
        refused = await http.post(
            f"{agent_url}/agui/set_budget",
            json=body,
            headers={"authorization": f"Bearer {admin_without_scope}"},
        )
        assert (
            refused.status_code == 403 and 'scope="mcp budget:admin"' in refused.headers["www-authenticate"]
        )
        hidden = await http.get(
            f"{agent_url}/agui/set_budget/capabilities", headers={"authorization": f"Bearer {alice}"}
        )
        unknown = await http.get(
            f"{agent_url}/agui/no_such_skill/capabilities", headers={"authorization": f"Bearer {alice}"}
        )
        assert hidden.status_code == unknown.status_code == 404
        assert hidden.json()["detail"].replace("set_budget", "X") == unknown.json()["detail"].replace(
            "no_such_skill", "X"
        )


# --- rate limits across replicas -------------------------------------------------------------------------


async def test_rate_limits_hold_across_two_replicas(auth_server: AuthServer, tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'shared.db'}"
    limits = (RateLimit(3, per=60),)
    with (
        serve(build(auth_server.issuer, store=store, rate_limits=limits)) as one,
        serve(build(auth_server.issuer, store=store, rate_limits=limits)) as two,
    ):
        # tokens for one resource URI; both replicas serve it (the resource is the URL the client uses)
        headers = {
            "accept": "application/json, text/event-stream",
            "content-type": "application/json",
            "mcp-protocol-version": "2026-07-28",
            "mcp-method": "tools/list",
        }
        meta = {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
        }
        statuses = []
        async with httpx.AsyncClient() as http:
            for url in (one, two, one, two):
                bearer = auth_server.issue(subject="alice", audience=f"{url}/mcp", scope="mcp")
                response = await http.post(
                    f"{url}/mcp",
                    headers={**headers, "authorization": f"Bearer {bearer}"},
                    json={"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": meta}},
                )
                statuses.append(response.status_code)
            other = auth_server.issue(subject="bob", audience=f"{two}/mcp", scope="mcp")
            bobs = await http.post(
                f"{two}/mcp",
                headers={**headers, "authorization": f"Bearer {other}"},
                json={"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": meta}},
            )
    assert statuses == [200, 200, 200, 429]  # alice's three requests were counted on both replicas together
    assert 1 <= int(response.headers["retry-after"]) <= 60
    assert bobs.status_code == 200  # per caller


# --- introspection ---------------------------------------------------------------------------------------


async def test_introspection_verifier(auth_server: AuthServer) -> None:
    verifier = IntrospectionVerifier(
        f"{auth_server.issuer}/introspect",
        client_id="resource-server",
        client_secret="rs-secret",
        issuer=auth_server.issuer,
    )
    with serve(build(auth_server.issuer, verifier=verifier)) as url:
        headers = {
            "accept": "application/json, text/event-stream",
            "content-type": "application/json",
            "mcp-protocol-version": "2026-07-28",
            "mcp-method": "tools/list",
        }
        meta = {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
        }
        payload = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": meta}}
        async with httpx.AsyncClient() as http:
            good = auth_server.issue(subject="alice", audience=f"{url}/mcp", scope="mcp")
            ok = await http.post(
                f"{url}/mcp", headers={**headers, "authorization": f"Bearer {good}"}, json=payload
            )
            other = auth_server.issue(subject="alice", audience="https://elsewhere.example/mcp", scope="mcp")
            wrong = await http.post(
                f"{url}/mcp", headers={**headers, "authorization": f"Bearer {other}"}, json=payload
            )
            expired = auth_server.issue(subject="alice", audience=f"{url}/mcp", scope="mcp", expires_in=-60)
            stale = await http.post(
                f"{url}/mcp", headers={**headers, "authorization": f"Bearer {expired}"}, json=payload
            )
    assert ok.status_code == 200 and ok.json()["result"]["tools"][0]["name"] == "department_budget"
    assert wrong.status_code == 401 and "audience" in wrong.headers["www-authenticate"]
    assert stale.status_code == 401
    assert re.search(r'error_description="The token is not active"', stale.headers["www-authenticate"])
