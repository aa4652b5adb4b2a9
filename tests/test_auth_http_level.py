"""Refusals are HTTP answers on every path, over a real socket:

- the handshake era (2025-11-25) answers a missing token 401 and a missing capability scope 403 naming it,
  as raw HTTP, as the stateless era does (tests/test_auth_flow.py);
- a route's own FastAPI ``Security(...)`` dependency raising 401 is HTTP 401 with the resource's challenge (so
  the client logs in), and its 403 is HTTP 403, in both eras;
- a task-augmented ``tools/call`` missing a scope is 401/403 before any task exists, in both eras;
- a scoped, gated tool refuses a caller without the scope before anyone is asked to approve;
- rate limits in A2A's and AG-UI's forms: a capability's limit is a retryable failure, the agent's is 429.
"""

import json
import re
import uuid
from typing import Annotated, Any

import httpx
import pytest
from fastapi import FastAPI, HTTPException, Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from agentmw import Agent, AgentMiddleware, skill, tool
from agentmw.auth import Principal, ProtectedResource, RateLimit, current_principal
from agentmw.mcp.tasks import EXTENSION
from agentmw.safety import human_gate
from tests.auth.clients import a2a_refusal, bearer_client
from tests.auth.server import AuthServer
from tests.conftest import serve

HANDSHAKE = "2025-11-25"
MODERN = "2026-07-28"
ACCEPT = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
USERS = {
    "reader": Principal("reader", scopes={"mcp"}),
    "writer": Principal("writer", scopes={"mcp", "reports:write"}),
    "guest": Principal("guest", scopes={"mcp", "reports:write"}, roles={"guest"}),
}
ASKED: list[str] = []


def _challenge(response: httpx.Response) -> dict[str, str]:
    header = response.headers["www-authenticate"]
    assert header.startswith("Bearer ")
    return dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', header))


class Mcp:
    """Raw MCP requests in either era: a handshake session is opened first (it needs no scope of its own)."""

    def __init__(
        self,
        http: httpx.AsyncClient,
        url: str,
        era: str,
        token: str | None,
        capabilities: dict[str, Any] | None = None,
    ) -> None:
        self.http, self.url, self.era, self.token = http, url, era, token
        self.capabilities = capabilities or {}
        self.session: str | None = None

    def _headers(self, method: str, name: str | None = None) -> dict[str, str]:
        headers = dict(ACCEPT)
        if self.token is not None:
            headers["authorization"] = f"Bearer {self.token}"
        if self.era == MODERN:
            headers.update({"mcp-protocol-version": MODERN, "mcp-method": method})
            if name is not None:
                headers["mcp-name"] = name
        elif self.session is not None:
            headers.update({"mcp-protocol-version": HANDSHAKE, "mcp-session-id": self.session})
        return headers

    async def open(self) -> httpx.Response | None:
        """Starts a handshake session; its response when it was refused."""
        if self.era == MODERN:
            return None
        response = await self.http.post(
            f"{self.url}/mcp",
            headers=self._headers("initialize"),
            json={
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {
                    "protocolVersion": HANDSHAKE,
                    "capabilities": self.capabilities,
                    "clientInfo": {"name": "raw", "version": "1"},
                },
            },
        )
        if response.status_code != 200:
            return response
        self.session = response.headers["mcp-session-id"]
        await self.http.post(
            f"{self.url}/mcp",
            headers=self._headers("notifications/initialized"),
            json={"jsonrpc": "2.0", "method": "notifications/initialized"},
        )
        return None

    async def call(self, name: str, arguments: dict[str, Any], task: bool = False) -> httpx.Response:
        params: dict[str, Any] = {"name": name, "arguments": arguments}
        if self.era == MODERN:
            extensions = {"extensions": {EXTENSION: {}}} if task else {}
            params["_meta"] = {
                "io.modelcontextprotocol/protocolVersion": MODERN,
                "io.modelcontextprotocol/clientCapabilities": extensions,
            }
        elif task:
            params["task"] = {"ttl": 60000}
        return await self.http.post(
            f"{self.url}/mcp",
            headers=self._headers("tools/call", name),
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params},
        )


# --- (1) the handshake era, as raw HTTP ---------------------------------------------------------------------


async def test_the_handshake_era_answers_401_and_403_at_the_http_level(
    auth_server: AuthServer, agent_url: str
) -> None:
    async with httpx.AsyncClient(timeout=30) as http:
        refused = await Mcp(http, agent_url, HANDSHAKE, None).open()
        bob = Mcp(http, agent_url, HANDSHAKE, auth_server.issue(subject="bob", audience=f"{agent_url}/mcp"))
        assert await bob.open() is None
        short = await bob.call("submit_purchase_request", {"sku": "X"})
    assert refused is not None and refused.status_code == 401
    metadata = f"{agent_url}/.well-known/oauth-protected-resource/mcp"
    assert _challenge(refused) == {"resource_metadata": metadata, "scope": "mcp"}
    assert short.status_code == 403
    challenge = _challenge(short)
    assert challenge["error"] == "insufficient_scope" and challenge["scope"] == "mcp purchases:write"
    assert "purchases:write" in short.json()["error"]["message"]


# --- (2..4) an app of its own: route dependencies, task tools, a gated tool -----------------------------


def _app() -> FastAPI:
    app = FastAPI()
    bearer = HTTPBearer(auto_error=False)

    def staff(
        credentials: Annotated[HTTPAuthorizationCredentials | None, Security(bearer)],
        principal: Annotated[Principal | None, Security(current_principal)],
    ) -> Principal:
        """The app's own check: a signed-in caller, not a guest."""
        if credentials is None or principal is None:
            raise HTTPException(401, "Not authenticated", headers={"WWW-Authenticate": "Bearer"})
        if "guest" in principal.roles:
            raise HTTPException(403, "Guests may not read the roster")
        return principal

    @app.get("/roster")
    @tool(read_only=True)
    async def roster(user: Annotated[Principal, Security(staff)]) -> str:
        """The staff roster (no agentmw scope: the route's dependency decides)."""
        return f"roster for {user.subject}"

    @tool(task="optional", scopes=["reports:write"])
    async def build_report(title: str) -> str:
        """Build a report, possibly as a task."""
        ASKED.append(f"ran {title}")
        return title

    @tool(scopes=["reports:write"])
    @human_gate(side_effects="publishes the report")
    async def publish_report(title: str) -> str:
        """Publish a report (a person approves each one)."""
        ASKED.append(f"published {title}")
        return title

    @skill(rate_limit=RateLimit(1, per=60))
    async def summarize(text: str) -> str:
        """Summarize.

        Summary:
            Summarizes text, once a minute per caller.
        """
        return text[:10]

    auth = ProtectedResource(
        authorization_servers=["https://login.example.com"],
        verifier=lambda token, resource: USERS.get(token),
        anonymous=True,
    )
    agent = Agent(
        "reports", include=[app, build_report, publish_report, summarize], auth=auth, store="memory://"
    )
    app.add_middleware(AgentMiddleware, agent=agent)
    return app


@pytest.fixture(scope="module")
def app_url() -> Any:
    with serve(_app()) as url:
        yield url


@pytest.mark.parametrize("era", [HANDSHAKE, MODERN])
async def test_a_route_dependencys_401_and_403_are_http_answers(app_url: str, era: str) -> None:
    async with httpx.AsyncClient(timeout=30) as http:
        anonymous = Mcp(http, app_url, era, None)
        assert await anonymous.open() is None  # anonymous=True: the session opens without a token
        missing = await anonymous.call("roster", {})
        guest = Mcp(http, app_url, era, "guest")
        assert await guest.open() is None
        forbidden = await guest.call("roster", {})
        writer = Mcp(http, app_url, era, "writer")
        assert await writer.open() is None
        allowed = await writer.call("roster", {})
    assert missing.status_code == 401
    assert missing.json()["error"]["message"] == "HTTP 401: Not authenticated"
    # the resource's challenge, not the dependency's bare "Bearer": the client learns where to log in
    assert _challenge(missing)["resource_metadata"] == f"{app_url}/.well-known/oauth-protected-resource/mcp"
    assert forbidden.status_code == 403
    assert forbidden.json()["error"]["message"] == "HTTP 403: Guests may not read the roster"
    assert allowed.status_code == 200 and "roster for writer" in allowed.text


@pytest.mark.parametrize("era", [HANDSHAKE, MODERN])
async def test_a_task_call_without_the_scope_is_refused_before_a_task_exists(app_url: str, era: str) -> None:
    ASKED.clear()
    async with httpx.AsyncClient(timeout=30) as http:
        tasks = {"tasks": {"requests": {"tools": {"call": {}}}}}
        anonymous = Mcp(http, app_url, era, None, tasks)
        assert await anonymous.open() is None
        unauthenticated = await anonymous.call("build_report", {"title": "q3"}, task=True)
        reader = Mcp(http, app_url, era, "reader", tasks)
        assert await reader.open() is None
        short = await reader.call("build_report", {"title": "q3"}, task=True)
        writer = Mcp(http, app_url, era, "writer", tasks)
        assert await writer.open() is None
        made = await writer.call("build_report", {"title": "q3"}, task=True)
    assert unauthenticated.status_code == 401 and _challenge(unauthenticated)["scope"] == "reports:write"
    assert short.status_code == 403
    assert _challenge(short) | {"resource_metadata": ""} == {
        "resource_metadata": "",
        "scope": "reports:write",
        "error": "insufficient_scope",
        "error_description": "Insufficient scope: tool build_report needs the scope(s) reports:write",
    }
    assert made.status_code == 200, made.text
    assert "taskId" in made.text  # the same call with the scope is a task
    assert ASKED in ([], ["ran q3"])  # only the writer's task may have run


@pytest.mark.parametrize("era", [HANDSHAKE, MODERN])
async def test_a_missing_scope_is_refused_before_anyone_is_asked_to_approve(app_url: str, era: str) -> None:
    ASKED.clear()
    async with httpx.AsyncClient(timeout=30) as http:
        reader = Mcp(http, app_url, era, "reader", {"elicitation": {}})
        assert await reader.open() is None
        short = await reader.call("publish_report", {"title": "q3"})
        writer = Mcp(http, app_url, era, "writer", {"elicitation": {}})
        assert await writer.open() is None
        asked = await _first_question(writer, "publish_report", {"title": "q3"})
    assert short.status_code == 403 and _challenge(short)["scope"] == "reports:write"
    assert "elicitation/create" not in short.text and "input_required" not in short.text  # nobody was asked
    assert "Run publish_report" in asked  # with the scope, the same call reaches the gate, which asks
    assert ASKED == []


async def _first_question(mcp: Mcp, name: str, arguments: dict[str, Any]) -> str:
    """The gate's question: 2026 answers ``input_required``; a handshake session streams an
    ``elicitation/create`` request and waits for its answer (not given: the stream is read up to the question,
    then dropped)."""
    if mcp.era == MODERN:
        return (await mcp.call(name, arguments)).text
    headers = mcp._headers("tools/call", name)
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }
    async with mcp.http.stream("POST", f"{mcp.url}/mcp", headers=headers, json=body) as response:
        async for line in response.aiter_lines():
            if "elicitation/create" in line:
                return line
    return ""


# --- (5) rate limits in A2A's and AG-UI's forms ------------------------------------------------------------


def _a2a_headers(token: str) -> dict[str, str]:
    return {"a2a-version": "1.0", "authorization": f"Bearer {token}"}


def _a2a_body(skill_name: str) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {
            "message": {
                "messageId": str(uuid.uuid4()),
                "role": "ROLE_USER",
                "parts": [{"text": "a long text to summarize"}],
                "metadata": {"skill": skill_name},
            }
        },
    }


def _agui_body() -> dict[str, Any]:
    return {
        "threadId": f"t-{uuid.uuid4()}",
        "runId": f"r-{uuid.uuid4()}",
        "state": {},
        "tools": [],
        "context": [],
        "forwardedProps": {},
        "messages": [{"id": "u", "role": "user", "content": "a long text to summarize"}],
    }


def _events(response: httpx.Response) -> list[dict[str, Any]]:
    return [json.loads(line[5:]) for line in response.text.splitlines() if line.startswith("data:")]


async def test_a_capability_rate_limit_in_the_a2a_and_agui_forms(app_url: str) -> None:
    async with httpx.AsyncClient(timeout=30) as http:
        a2a = [
            (
                await http.post(f"{app_url}/a2a", headers=_a2a_headers("reader"), json=_a2a_body("summarize"))
            ).json()
            for _ in range(2)
        ]
        agui = [
            await http.post(
                f"{app_url}/agui/summarize", headers={"authorization": "Bearer writer"}, json=_agui_body()
            )
            for _ in range(2)
        ]
    first, second = (answer["result"]["task"] for answer in a2a)
    assert first["status"]["state"] == "TASK_STATE_COMPLETED"
    assert second["status"]["state"] == "TASK_STATE_FAILED"
    data = next(p["data"] for p in second["status"]["message"]["parts"] if "data" in p)
    assert data["retryable"] is True and 0 < data["retryAfterSeconds"] <= 60
    assert agui[0].status_code == agui[1].status_code == 200
    assert _events(agui[0])[-1]["type"] == "RUN_FINISHED"
    last = _events(agui[1])[-1]
    assert last["type"] == "RUN_ERROR" and last["code"] == "RETRYABLE"


async def test_the_agents_rate_limit_is_429_on_a2a_and_agui() -> None:
    @skill
    async def echo(text: str) -> str:
        """Echo.

        Summary:
            Says it back.
        """
        return text

    auth = ProtectedResource(
        authorization_servers=["https://login.example.com"], verifier=lambda token, resource: USERS.get(token)
    )
    agent = Agent("limited", include=[echo], auth=auth, store="memory://", rate_limits=[RateLimit(1, per=60)])
    with serve(agent.asgi()) as url:
        async with httpx.AsyncClient(timeout=30) as http:
            a2a = [
                await http.post(f"{url}/a2a", headers=_a2a_headers("reader"), json=_a2a_body("echo"))
                for _ in range(2)
            ]
            agui = [
                await http.post(
                    f"{url}/agui/echo", headers={"authorization": "Bearer writer"}, json=_agui_body()
                )
                for _ in range(2)
            ]
    assert a2a[0].status_code == 200 and a2a[1].status_code == 429
    assert a2a_refusal(a2a[1]) == "RESOURCE_EXHAUSTED"
    assert 1 <= int(a2a[1].headers["retry-after"]) <= 60
    assert agui[0].status_code == 200 and agui[1].status_code == 429
    assert 1 <= int(agui[1].headers["retry-after"]) <= 60


# --- (6) per-caller tool lists, with the official client -------------------------------------------------


@pytest.mark.parametrize("hide_missing_scopes", [False, True])
@pytest.mark.parametrize("mode", ["legacy", MODERN])
async def test_each_caller_lists_the_tools_it_may_use(mode: str, hide_missing_scopes: bool) -> None:
    @tool(roles=["ops"])
    async def restart_region(region: str) -> str:
        """Restart a region (operators only)."""
        return f"restarted {region}"

    @tool(scopes=["reports:write"])
    async def file_report(title: str) -> str:
        """File a report."""
        return title

    @tool(read_only=True)
    async def status() -> str:
        """The service status."""
        return "ok"

    users = {"op": Principal("op", scopes={"reports:write"}, roles={"ops"}), "guest": Principal("guest")}
    auth = ProtectedResource(
        authorization_servers=["https://login.example.com"],
        hide_missing_scopes=hide_missing_scopes,
        verifier=lambda token, resource: users.get(token),
    )
    agent = Agent("ops", include=[restart_region, file_report, status], auth=auth, store="memory://")
    with serve(agent.asgi()) as url:
        listed = {}
        for who in ("op", "guest"):
            async with bearer_client(url, mode, who) as client:
                listed[who] = sorted(t.name for t in (await client.list_tools()).tools)
                if who == "guest":
                    with pytest.raises(Exception) as hidden:
                        await client.call_tool("restart_region", {"region": "eu"})
                    with pytest.raises(Exception) as unknown:
                        await client.call_tool("no_such_tool", {"region": "eu"})
    assert listed["op"] == ["file_report", "restart_region", "status"]
    # by default a missing scope stays listed (the call's 403 lets the client step up); roles always hide
    assert listed["guest"] == (["status"] if hide_missing_scopes else ["file_report", "status"])
    assert str(hidden.value).replace("restart_region", "<name>") == str(unknown.value).replace(
        "no_such_tool", "<name>"
    )
