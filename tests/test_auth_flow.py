"""The OAuth flow end to end: a real authorization server (Authlib), agentmw as the protected resource, and the
official ``mcp`` client's OAuth support: 401, discovery, registration, authorization with PKCE, token, call,
and step-up on 403 ``insufficient_scope``. Both MCP eras."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from tests.auth.clients import Storage, bearer_client, oauth_client
from tests.auth.server import AuthServer

MODES = ["legacy", "2026-07-28"]


@pytest.fixture(autouse=True)
def alice(auth_server: AuthServer) -> None:
    auth_server.login("alice")


@pytest.mark.parametrize("mode", MODES)
async def test_the_official_client_logs_in_and_calls(
    auth_server: AuthServer, agent_url: str, mode: str
) -> None:
    registrations = auth_server.registrations
    asked = len(auth_server.authorize_requests)
    async with oauth_client(agent_url, mode) as client:
        tools = {t.name for t in (await client.list_tools()).tools}
        result = await client.call_tool("search_assets", {"query": "lap"})
    # a route returns data: the JSON array FastAPI serves, as text and as structured content
    assert result.is_error is False and [c.text for c in result.content] == ['["laptop"]']
    assert result.structured_content == {"result": ["laptop"]}
    assert tools == {"search_assets", "department_budget", "submit_purchase_request", "quota_probe"}
    assert auth_server.registrations == registrations + 1  # dynamic client registration
    login = auth_server.authorize_requests[asked]
    assert login["code_challenge_method"] == "S256" and len(login["code_challenge"]) == 43
    assert login["resource"] == f"{agent_url}/mcp"  # RFC 8707: the token is asked for this resource
    assert login["scope"] == "mcp"  # from the 401's challenge
    assert auth_server.token_requests[-1]["resource"] == f"{agent_url}/mcp"
    assert auth_server.token_requests[-1]["code_verifier"]


@pytest.mark.parametrize("mode", MODES)
async def test_step_up_on_insufficient_scope(auth_server: AuthServer, agent_url: str, mode: str) -> None:
    storage = Storage()
    async with oauth_client(agent_url, mode, storage) as client:
        await client.list_tools()  # logs in with the scope the 401 named: mcp
        assert storage.tokens is not None and storage.tokens.scope == "mcp"
        asked = len(auth_server.authorize_requests)
        result = await client.call_tool("department_budget", {"department": "design"})  # 403, step up, retry
    assert result.is_error is False and result.structured_content == {"result": 20000.0}
    assert set(auth_server.authorize_requests[asked]["scope"].split()) == {"mcp", "assets:read"}
    assert set(storage.tokens.scope.split()) == {"mcp", "assets:read"}


@pytest.mark.parametrize("mode", MODES)
async def test_the_route_security_dependency_sees_the_verified_caller(
    auth_server: AuthServer, agent_url: str, mode: str
) -> None:
    async with oauth_client(agent_url, mode) as client:
        await client.list_tools()  # logs in (one request cannot both log in and step up: the client's rule)
        result = await client.call_tool(
            "submit_purchase_request", {"sku": "MON-27"}
        )  # steps up to purchases:write
    assert result.is_error is False, result.content
    # the route's body as FastAPI serves it: a JSON string, and its value as the structured result
    assert [c.text for c in result.content] == ['"alice requested MON-27"']
    assert result.structured_content == {"result": "alice requested MON-27"}


async def _post(
    agent_url: str,
    token: str | None,
    method: str = "tools/list",
    params: dict | None = None,
) -> httpx.Response:
    headers = {
        "accept": "application/json, text/event-stream",
        "content-type": "application/json",
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": method,
    }
    if token is not None:
        headers["authorization"] = f"Bearer {token}"
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    if params and "name" in params:
        headers["mcp-name"] = params["name"]
    async with httpx.AsyncClient() as http:
        return await http.post(
            f"{agent_url}/mcp",
            headers=headers,
            json={"jsonrpc": "2.0", "id": 1, "method": method, "params": {**(params or {}), "_meta": meta}},
        )


def _challenge(response: httpx.Response) -> dict[str, str]:
    import re

    header = response.headers["www-authenticate"]
    assert header.startswith("Bearer ")
    return dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', header))


async def test_no_token_is_401_with_the_metadata_url(agent_url: str) -> None:
    response = await _post(agent_url, None)
    assert response.status_code == 401
    challenge = _challenge(response)
    assert challenge["resource_metadata"] == f"{agent_url}/.well-known/oauth-protected-resource/mcp"
    assert challenge["scope"] == "mcp"
    assert "error" not in challenge  # no token is not an invalid token (RFC 6750 section 3.1)


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("wrong audience", "The token was not issued for this resource (its audience is another)"),
        ("expired", "The token has expired"),
        ("other issuer", "The token was issued by another authorization server"),
        ("garbage", "The token is not a well-formed JWT"),
        ("no audience", "The token has no 'aud' claim"),
    ],
)
async def test_bad_tokens_are_401_invalid_token(
    auth_server: AuthServer, agent_url: str, case: str, expected: str
) -> None:
    resource = f"{agent_url}/mcp"
    token = {
        "wrong audience": lambda: auth_server.issue(audience="http://127.0.0.1:1/other/mcp"),
        "expired": lambda: auth_server.issue(audience=resource, expires_in=-120),
        "other issuer": lambda: auth_server.issue(audience=resource, issuer="https://evil.example"),
        "garbage": lambda: "not-a-jwt",
        "no audience": lambda: auth_server.issue(audience=None),
    }[case]()
    response = await _post(agent_url, token)
    assert response.status_code == 401
    challenge = _challenge(response)
    assert challenge["error"] == "invalid_token" and challenge["error_description"] == expected
    assert challenge["resource_metadata"].endswith("/.well-known/oauth-protected-resource/mcp")


async def test_a_token_without_the_servers_scope_is_403(auth_server: AuthServer, agent_url: str) -> None:
    response = await _post(agent_url, auth_server.issue(audience=f"{agent_url}/mcp", scope="assets:read"))
    assert response.status_code == 403
    assert _challenge(response)["error"] == "insufficient_scope" and _challenge(response)["scope"] == "mcp"


async def test_a_missing_capability_scope_is_403_naming_it(auth_server: AuthServer, agent_url: str) -> None:
    token = auth_server.issue(subject="bob", audience=f"{agent_url}/mcp", scope="mcp")
    response = await _post(
        agent_url, token, "tools/call", {"name": "submit_purchase_request", "arguments": {"sku": "X"}}
    )
    assert response.status_code == 403
    challenge = _challenge(response)
    assert challenge["error"] == "insufficient_scope"
    assert challenge["scope"] == "mcp purchases:write"
    assert "purchases:write" in challenge["error_description"]


async def test_the_route_dependencys_403_is_the_http_answer(auth_server: AuthServer, agent_url: str) -> None:
    token = auth_server.issue(subject="carol", audience=f"{agent_url}/mcp", scope="mcp purchases:write")
    response = await _post(
        agent_url, token, "tools/call", {"name": "submit_purchase_request", "arguments": {"sku": "X"}}
    )
    assert response.status_code == 403  # the scope is there; the app's own Security check refuses carol
    assert response.json()["error"]["message"] == "HTTP 403: Only buyers may submit purchase requests"


async def test_protected_resource_metadata(auth_server: AuthServer, agent_url: str) -> None:
    async with httpx.AsyncClient() as http:
        for path in ("/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"):
            response = await http.get(agent_url + path)
            assert response.status_code == 200, path
            document = response.json()
            assert document["resource"] == f"{agent_url}/mcp"
            assert document["authorization_servers"] == [auth_server.issuer]
            assert document["scopes_supported"] == ["assets:read", "budget:admin", "mcp", "purchases:write"]
            assert document["bearer_methods_supported"] == ["header"]
        assert (
            await http.get(agent_url + "/.well-known/oauth-protected-resource/elsewhere")
        ).status_code == 404


@pytest.mark.parametrize("mode", MODES)
async def test_per_caller_lists_and_hidden_is_unknown(
    auth_server: AuthServer, agent_url: str, mode: str
) -> None:
    resource = f"{agent_url}/mcp"
    admin = auth_server.issue(subject="root", audience=resource, scope="mcp budget:admin", roles=("admin",))
    alice = auth_server.issue(subject="alice", audience=resource, scope="mcp", roles=("buyer",))
    async with bearer_client(agent_url, mode, admin) as client:
        assert [t.uri_template for t in (await client.list_resource_templates()).resource_templates] == [
            "budget://{department}"
        ]
        assert [p.name for p in (await client.list_prompts()).prompts] == ["escalation_note"]
        assert "20000" in (await client.read_resource("budget://design")).contents[0].text
    async with bearer_client(agent_url, mode, alice) as client:
        assert (await client.list_resource_templates()).resource_templates == []
        assert (await client.list_prompts()).prompts == []
        errors = []
        for uri in ("budget://design", "nothing://here"):  # hidden, and truly unknown: the same answer
            with pytest.raises(Exception) as caught:
                await client.read_resource(uri)
            errors.append(str(caught.value).replace(uri, "<uri>"))
        assert errors[0] == errors[1]
        errors = []
        for name in ("escalation_note", "no_such_prompt"):
            with pytest.raises(Exception) as caught:
                await client.get_prompt(name, {"department": "design"})
            errors.append(str(caught.value).replace(name, "<name>"))
        assert errors[0] == errors[1]


async def test_keys_rotate(auth_server: AuthServer, agent_url: str) -> None:
    await asyncio.sleep(0.6)  # the verifier fetches keys again for an unknown key id at most every 0.5 s here
    fetches = auth_server.jwks_fetches
    auth_server.rotate()
    token = auth_server.issue(audience=f"{agent_url}/mcp")
    response = await _post(agent_url, token)
    assert response.status_code == 200, response.text
    assert auth_server.jwks_fetches == fetches + 1  # a new key id fetched the keys again, once


@pytest.mark.parametrize("mode", MODES)
async def test_a_capability_rate_limit_is_retryable(
    auth_server: AuthServer, agent_url: str, mode: str
) -> None:
    token = auth_server.issue(subject=f"quota-{mode}", audience=f"{agent_url}/mcp", scope="mcp")
    async with bearer_client(agent_url, mode, token) as client:
        results = [await client.call_tool("quota_probe", {}) for _ in range(3)]
    assert [r.is_error for r in results] == [False, False, True]
    meta = results[2].meta
    assert meta["agentmw/retryable"] is True and 0 < meta["agentmw/retryAfter"] <= 60
    assert "Rate limit of 2 per 60 s for quota_probe reached" in results[2].content[0].text
