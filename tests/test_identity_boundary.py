"""The identity boundary is the same on every face: ``identify`` raising Unauthenticated is HTTP 401 with its
challenge, Forbidden is 403, and neither runs anything."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import HTTPConnection

from agentmw import Agent, AgentMiddleware, tool
from agentmw.a2a import A2ASettings
from agentmw.identity import Forbidden, Unauthenticated
from tests.helpers.mcp_raw import initialize, session_headers

ran: list[str] = []
CHALLENGE = 'Bearer realm="test"'


def identify(connection: HTTPConnection) -> str | None:
    token = connection.headers.get("authorization", "").removeprefix("Bearer ")
    if token == "expired":
        raise Unauthenticated("The token has expired", challenge=CHALLENGE)
    if token == "blocked":
        raise Forbidden("This account is blocked")
    return token or None


def build() -> Starlette:
    agent = Agent("identity", identify=identify, a2a=A2ASettings())

    @tool
    def touch() -> str:
        """Record a call."""
        ran.append("touch")
        return "ok"

    @agent.skill
    async def chat(text: str) -> str:
        """Answer.

        Summary:
            Answers.
        """
        ran.append(text)
        return text

    agent.include(touch)
    app = Starlette()
    app.add_middleware(AgentMiddleware, agent=agent)
    return app


MCP = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}


async def mcp_stateless(http: httpx.AsyncClient, token: str) -> httpx.Response:
    return await http.post(
        "/mcp",
        headers={
            **MCP,
            "authorization": f"Bearer {token}",
            "mcp-protocol-version": "2026-07-28",
            "mcp-method": "tools/call",
            "mcp-name": "touch",
        },
        json={
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "touch", "arguments": {}, "_meta": META},
        },
    )


async def mcp_handshake(http: httpx.AsyncClient, token: str) -> httpx.Response:
    bearer = {"authorization": f"Bearer {token}"}
    session = {**session_headers(await initialize(http, headers=bearer, request_id=1)), **bearer}
    return await http.post(
        "/mcp",
        headers=session,
        json={
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "touch", "arguments": {}},
        },
    )


async def a2a(http: httpx.AsyncClient, token: str) -> httpx.Response:
    return await http.post(
        "/a2a",
        headers={"a2a-version": "1.0", "authorization": f"Bearer {token}"},
        json={
            "jsonrpc": "2.0",
            "id": 1,
            "method": "SendMessage",
            "params": {
                "message": {"messageId": f"m-{token}", "role": "ROLE_USER", "parts": [{"text": "hello"}]}
            },
        },
    )


async def agui(http: httpx.AsyncClient, token: str) -> httpx.Response:
    return await http.post(
        "/agui/chat",
        headers={"authorization": f"Bearer {token}"},
        json={
            "threadId": f"t-{token}",
            "runId": f"r-{token}",
            "state": {},
            "tools": [],
            "context": [],
            "forwardedProps": {},
            "messages": [{"id": "u", "role": "user", "content": "hello"}],
        },
    )


async def approvals(http: httpx.AsyncClient, token: str) -> httpx.Response:
    return await http.get("/approvals/nope", headers={"authorization": f"Bearer {token}"})


@pytest.mark.parametrize("face", [mcp_stateless, mcp_handshake, a2a, agui, approvals])
@pytest.mark.parametrize(("token", "status"), [("expired", 401), ("blocked", 403)])
async def test_identify_errors_are_http_401_and_403_on_every_face(face: Any, token: str, status: int) -> None:
    ran.clear()
    app = build()
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1:8000"
    ) as http:
        response = await face(http, token)
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    if status == 401:
        assert response.headers["www-authenticate"] == CHALLENGE
    assert ran == []


@pytest.mark.parametrize("face", [mcp_stateless, mcp_handshake, a2a, agui])
async def test_a_valid_identity_passes_every_face(face: Any) -> None:
    ran.clear()
    app = build()
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1:8000"
    ) as http:
        response = await face(http, "alice")
    assert response.status_code == 200, response.text
    assert ran
