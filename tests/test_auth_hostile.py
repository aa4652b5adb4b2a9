"""Auth attacked: forged and odd tokens against the real protected agent (tests/auth/app.py) and the real Authlib
authorization server, Host header games, key-set refetch storms, and rate-limit dodges.

Each test is a defense that holds, kept as a regression test; those that were findings (the Host header
choosing the audience, metadata for any Host, the key-set refetch storm, tokens without a subject, rate-limit
buckets minted by made-up credentials, scopes split on any whitespace) failed before their fix.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import time
from typing import Any

import httpx
import pytest
from joserfc import jwt as jose_jwt
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from agentmw import Agent
from agentmw.auth import IntrospectionVerifier, InvalidToken, JWTVerifier, RateLimit, verifiers
from agentmw.testing import McpTestClient
from tests.auth.server import AuthServer
from tests.conftest import serve

# a token refused, or a verifier that cannot check it now (an error of its own, when the auth package has one)
REFUSED = tuple(c for c in (InvalidToken, getattr(verifiers, "VerifierUnavailable", None)) if c is not None)

MCP_HEADERS = {
    "accept": "application/json, text/event-stream",
    "content-type": "application/json",
    "mcp-protocol-version": "2026-07-28",
}
META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}


def _b64(data: bytes | dict[str, Any]) -> str:
    raw = json.dumps(data).encode() if isinstance(data, dict) else data
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def claims_for(auth_server: AuthServer, audience: Any, **changes: Any) -> dict[str, Any]:
    now = int(time.time())
    claims = {
        "iss": auth_server.issuer,
        "sub": "alice",
        "aud": audience,
        "iat": now - 5,
        "exp": now + 600,
        "scope": "mcp",
        "jti": secrets.token_hex(8),
    }
    claims.update(changes)
    return {k: v for k, v in claims.items() if v is not None}


def signed(auth_server: AuthServer, claims: dict[str, Any], **header: Any) -> str:
    """A token signed by the authorization server's real current key (joserfc), with any header and claims."""
    key = auth_server.keys[0]
    return jose_jwt.encode({"alg": "RS256", "kid": key.kid, "typ": "at+jwt", **header}, claims, key)


async def mcp_post(
    url: str,
    token: str | None,
    method: str = "tools/list",
    params: dict[str, Any] | None = None,
    headers: dict[str, str] | None = None,
) -> httpx.Response:
    sent = {**MCP_HEADERS, "mcp-method": method, **(headers or {})}
    if token is not None:
        sent["authorization"] = f"Bearer {token}"
    if params and "name" in params:
        sent["mcp-name"] = params["name"]
    async with httpx.AsyncClient() as http:
        return await http.post(
            f"{url}/mcp",
            headers=sent,
            json={"jsonrpc": "2.0", "id": 1, "method": method, "params": {**(params or {}), "_meta": META}},
        )


async def a2a_post(url: str, token: str | None, headers: dict[str, str] | None = None) -> httpx.Response:
    sent = {
        "a2a-version": "1.0",
        **({"authorization": f"Bearer {token}"} if token else {}),
        **(headers or {}),
    }
    body = {
        "message": {
            "messageId": secrets.token_hex(8),
            "role": "ROLE_USER",
            "parts": [{"text": "hi"}],
            "metadata": {"skill": "chat"},
        }
    }
    async with httpx.AsyncClient() as http:
        return await http.post(
            f"{url}/a2a",
            headers=sent,
            json={"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": body},
        )


# --- forged tokens: every one is a 401, never a 500 and never a pass --------------------------------------------


def _forged(auth_server: AuthServer, resource: str, case: str) -> str:
    claims = claims_for(auth_server, resource)
    key = auth_server.keys[0]
    if case == "alg none":
        return f"{_b64({'alg': 'none', 'typ': 'JWT'})}.{_b64(claims)}."
    if case == "HS256 keyed with the public key":  # the classic algorithm confusion
        public = key.as_pem(private=False)
        head = _b64({"alg": "HS256", "kid": key.kid, "typ": "JWT"})
        body = _b64(claims)
        mac = hmac.new(public, f"{head}.{body}".encode(), hashlib.sha256).digest()
        return f"{head}.{body}.{_b64(mac)}"
    if case == "kid not a string":  # joserfc will not write it: signed by hand with the same key
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import padding

        private = serialization.load_pem_private_key(key.as_pem(private=True), password=None)
        signing_input = f"{_b64({'alg': 'RS256', 'kid': 123, 'typ': 'at+jwt'})}.{_b64(claims)}"
        signature = private.sign(signing_input.encode(), padding.PKCS1v15(), hashes.SHA256())  # type: ignore[union-attr]
        return f"{signing_input}.{_b64(signature)}"
    if case == "kid path injection":
        return signed(auth_server, claims, kid="../../../../dev/null")
    if case == "no exp":
        return signed(auth_server, claims_for(auth_server, resource, exp=None))
    if case == "nbf in the future":
        return signed(auth_server, claims_for(auth_server, resource, nbf=int(time.time()) + 3600))
    if case == "iat in the future":
        return signed(auth_server, claims_for(auth_server, resource, iat=int(time.time()) + 3600))
    if case == "issuer with a suffix":
        return signed(
            auth_server, claims_for(auth_server, resource, iss=auth_server.issuer + ".evil.example")
        )
    if case == "issuer with a trailing slash":
        return signed(auth_server, claims_for(auth_server, resource, iss=auth_server.issuer + "/"))
    if case == "audience a prefix of ours":
        return signed(auth_server, claims_for(auth_server, resource.removesuffix("/mcp")))
    if case == "audience ours plus a path":
        return signed(auth_server, claims_for(auth_server, resource + "/../other"))
    if case == "signature of another token":
        other = signed(auth_server, claims_for(auth_server, resource, sub="bob"))
        mine = signed(auth_server, claims_for(auth_server, resource, sub="root", roles=["admin"]))
        return mine.rsplit(".", 1)[0] + "." + other.rsplit(".", 1)[1]
    if case == "huge":
        return signed(auth_server, claims_for(auth_server, resource, pad="x" * 30_000))
    raise AssertionError(case)


@pytest.mark.parametrize(
    "case",
    [
        "alg none",
        "HS256 keyed with the public key",
        "kid not a string",
        "kid path injection",
        "no exp",
        "nbf in the future",
        "iat in the future",
        "issuer with a suffix",
        "issuer with a trailing slash",
        "audience a prefix of ours",
        "audience ours plus a path",
        "signature of another token",
    ],
)
async def test_forged_tokens_are_401(auth_server: AuthServer, agent_url: str, case: str) -> None:
    token = _forged(auth_server, f"{agent_url}/mcp", case)
    mcp = await mcp_post(agent_url, token)
    a2a = await a2a_post(agent_url, token)
    assert mcp.status_code == 401, mcp.text
    assert 'error="invalid_token"' in mcp.headers["www-authenticate"]
    assert a2a.status_code == 401, a2a.text


async def test_a_huge_token_is_refused_without_a_server_error(
    auth_server: AuthServer, agent_url: str
) -> None:
    response = await mcp_post(agent_url, _forged(auth_server, f"{agent_url}/mcp", "huge"))
    assert response.status_code in (200, 401, 431)  # signed and valid: fine; too large for the server: 431
    assert response.status_code < 500


async def test_an_audience_list_naming_us_is_accepted(auth_server: AuthServer, agent_url: str) -> None:
    """RFC 7519: ``aud`` may be a list; a token for several resources, this one among them, is for this one."""
    token = signed(auth_server, claims_for(auth_server, ["https://other.example/api", f"{agent_url}/mcp"]))
    assert (await mcp_post(agent_url, token)).status_code == 200


async def test_a_hidden_tool_is_unknown_even_with_bad_arguments(
    auth_server: AuthServer, agent_url: str
) -> None:
    """Validation runs after the visibility check: a hidden tool's schema errors would tell it exists."""
    token = signed(auth_server, claims_for(auth_server, f"{agent_url}/mcp", scope="mcp budget:admin"))
    hidden = await mcp_post(
        agent_url, token, "tools/call", {"name": "set_budget", "arguments": {"amount": "x"}}
    )
    unknown = await mcp_post(
        agent_url, token, "tools/call", {"name": "set_budgeu", "arguments": {"amount": "x"}}
    )
    assert hidden.status_code == unknown.status_code
    assert hidden.json()["error"]["code"] == unknown.json()["error"]["code"]
    assert hidden.json()["error"]["message"].replace("set_budget", "N") == unknown.json()["error"][
        "message"
    ].replace("set_budgeu", "N")


# --- the Host header decides the audience -----------------------------------------------------------------------


@pytest.mark.parametrize("face", ["a2a", "agui"])
async def test_a_token_for_another_resource_is_refused_whatever_the_host_header(
    auth_server: AuthServer, agent_url: str, face: str
) -> None:
    """A resource server at evil.example that the same users log into gets their tokens (aud: its own URL). It
    must not be able to replay them here by naming itself in ``Host``: that is exactly what RFC 8707 stops."""
    stolen = signed(auth_server, claims_for(auth_server, "http://evil.example/mcp", sub="victim"))
    assert (await mcp_post(agent_url, stolen)).status_code == 401  # with our own Host: refused, as it must be
    if face == "a2a":
        response = await a2a_post(agent_url, stolen, headers={"host": "evil.example"})
    else:
        async with httpx.AsyncClient() as http:
            response = await http.post(
                f"{agent_url}/agui/chat",
                headers={
                    "authorization": f"Bearer {stolen}",
                    "host": "evil.example",
                    "accept": "text/event-stream",
                },
                json={
                    "threadId": "t",
                    "runId": "r",
                    "messages": [{"id": "m", "role": "user", "content": "hi"}],
                    "tools": [],
                    "context": [],
                    "state": {},
                    "forwardedProps": {},
                },
            )
    assert response.status_code in (401, 421), response.text[:300]


async def test_the_resource_metadata_does_not_echo_a_foreign_host(agent_url: str) -> None:
    async with httpx.AsyncClient() as http:
        response = await http.get(
            f"{agent_url}/.well-known/oauth-protected-resource/mcp", headers={"host": "evil.example"}
        )
    assert response.status_code == 421 or "evil.example" not in response.text


async def test_the_mcp_face_refuses_a_foreign_host(auth_server: AuthServer, agent_url: str) -> None:
    stolen = signed(auth_server, claims_for(auth_server, "http://evil.example/mcp"))
    assert (await mcp_post(agent_url, stolen, headers={"host": "evil.example"})).status_code == 421


# --- who the caller is ---------------------------------------------------------------------------------------------


async def test_a_token_without_a_subject_is_refused(auth_server: AuthServer, agent_url: str) -> None:
    token = signed(auth_server, claims_for(auth_server, f"{agent_url}/mcp", sub=None))
    assert (await mcp_post(agent_url, token)).status_code == 401


async def test_scopes_split_on_spaces_only(auth_server: AuthServer, agent_url: str) -> None:
    token = signed(auth_server, claims_for(auth_server, f"{agent_url}/mcp", scope="mcp x\x1fassets:read"))
    response = await mcp_post(
        agent_url, token, "tools/call", {"name": "department_budget", "arguments": {"department": "design"}}
    )
    assert response.status_code == 403


# --- key sets and introspection answers --------------------------------------------------------------------------


class _Flaky:
    """A real HTTP server standing in for an authorization server's JWKS or introspection endpoint."""

    def __init__(self, answer: Any, status: int = 200) -> None:
        self.answer = answer
        self.status = status
        self.hits = 0

    def app(self) -> Starlette:
        async def endpoint(request: Request) -> Response:
            self.hits += 1
            return JSONResponse(self.answer, status_code=self.status)

        return Starlette(routes=[Route("/{path:path}", endpoint, methods=["GET", "POST"])])


async def test_an_unreachable_key_set_is_not_fetched_per_request(auth_server: AuthServer) -> None:
    down = _Flaky({"error": "down"}, status=503)
    with serve(down.app()) as url:
        verifier = JWTVerifier(issuer=auth_server.issuer, jwks_url=f"{url}/jwks", refetch_seconds=30)
        token = signed(auth_server, claims_for(auth_server, "http://127.0.0.1/mcp"))
        for _ in range(10):
            with pytest.raises(REFUSED):
                await verifier.verify(token, "http://127.0.0.1/mcp")
    assert down.hits <= 2


async def test_unknown_key_ids_do_not_turn_requests_into_fetches(auth_server: AuthServer) -> None:
    verifier = JWTVerifier(issuer=auth_server.issuer, refetch_seconds=30)
    good = signed(auth_server, claims_for(auth_server, "http://127.0.0.1/mcp"))
    await verifier.verify(good, "http://127.0.0.1/mcp")
    fetched = verifier.jwks.fetches
    for index in range(20):
        with pytest.raises(InvalidToken):
            await verifier.verify(
                signed(auth_server, claims_for(auth_server, "http://127.0.0.1/mcp"), kid=f"made-up-{index}"),
                "http://127.0.0.1/mcp",
            )
    assert verifier.jwks.fetches <= fetched + 1


@pytest.mark.parametrize(
    "answer",
    [
        {"active": False, "sub": "alice", "aud": "http://127.0.0.1/mcp"},
        {"active": "true", "sub": "alice", "aud": "http://127.0.0.1/mcp"},
        {"active": 1, "sub": "alice", "aud": "http://127.0.0.1/mcp"},
        {"sub": "alice", "aud": "http://127.0.0.1/mcp"},
        {"active": True, "sub": "alice"},  # no audience
        {"active": True, "sub": "alice", "aud": ["http://127.0.0.1/mcpx"]},  # another audience
        {"active": True, "sub": "alice", "aud": "http://127.0.0.1/mcp", "exp": 1},  # long expired
        ["active", True],
    ],
)
async def test_introspection_answers_that_do_not_say_active_are_refused(answer: Any) -> None:
    endpoint = _Flaky(answer)
    with serve(endpoint.app()) as url:
        verifier = IntrospectionVerifier(f"{url}/introspect", client_id="rs", client_secret="s")
        with pytest.raises(InvalidToken):
            await verifier.verify("opaque", "http://127.0.0.1/mcp")


# --- rate limits ---------------------------------------------------------------------------------------------------


def _limited_agent() -> Agent:
    agent = Agent("limited", store="memory://", rate_limits=[RateLimit(2, per=60)])

    @agent.tool
    async def ping() -> str:
        """Answer pong."""
        return "pong"

    return agent


async def test_a_new_made_up_credential_per_request_does_not_escape_the_limit() -> None:
    agent = _limited_agent()
    statuses = []
    for index in range(5):
        async with McpTestClient(agent.asgi(), headers={"Authorization": f"Bearer junk-{index}"}) as mcp:
            try:
                await mcp.call_tool("ping", {})
                statuses.append(200)
            except Exception as exc:  # noqa: BLE001  (the 429 is raised by the test client)
                statuses.append(getattr(exc, "status", 0))
    assert 429 in statuses


async def test_a_forwarded_for_header_does_not_make_a_new_caller() -> None:
    agent = _limited_agent()
    statuses = []
    for index in range(4):
        async with McpTestClient(
            agent.asgi(), headers={"X-Forwarded-For": f"10.0.0.{index}", "Forwarded": f"for=10.0.0.{index}"}
        ) as mcp:
            try:
                await mcp.call_tool("ping", {})
                statuses.append(200)
            except Exception as exc:  # noqa: BLE001
                statuses.append(getattr(exc, "status", 0))
    assert statuses[:2] == [200, 200] and 429 in statuses[2:]
