"""Every method and header rule, with malformed input: the protocol's error, the right status, no 500."""

from __future__ import annotations

import json

import httpx
import pytest

from agentmw.testing import McpError, McpTestClient, parse_sse
from tests.wire_app import app

ACCEPT = "application/json, text/event-stream"
MODERN = "2026-07-28"
META = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}}


def http() -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1:8000")


def modern_headers(method: str, name: str | None = None, **extra: str) -> dict[str, str]:
    headers = {
        "accept": ACCEPT,
        "content-type": "application/json",
        "mcp-protocol-version": MODERN,
        "mcp-method": method,
    }
    if name is not None:
        headers["mcp-name"] = name
    headers.update(extra)
    return headers


def modern_body(method: str, params: dict | None = None, request_id: object = 1) -> str:
    return json.dumps(
        {"jsonrpc": "2.0", "id": request_id, "method": method, "params": {"_meta": META, **(params or {})}}
    )


# --- transport security, both eras ----------------------------------------------------------------


@pytest.mark.parametrize("version", [None, MODERN])
async def test_foreign_host_gets_421_and_foreign_origin_403(version: str | None) -> None:
    headers = {"accept": ACCEPT, "content-type": "application/json"}
    if version:
        headers["mcp-protocol-version"] = version
    async with http() as client:
        bad_host = await client.post("/mcp", content="{}", headers={**headers, "host": "evil.example.com"})
        assert bad_host.status_code == 421
        bad_origin = await client.post(
            "/mcp", content="{}", headers={**headers, "origin": "http://evil.example.com"}
        )
        assert bad_origin.status_code == 403
        configured = await client.post(
            "/mcp",
            content="{}",
            headers={**headers, "host": "api.example.com", "origin": "https://api.example.com"},
        )
        assert configured.status_code not in (403, 421)


async def test_body_limit_content_type_and_verbs() -> None:
    async with http() as client:
        big = await client.post(
            "/mcp",
            content=b"[" + b"1," * (3 * 1024 * 1024) + b"1]",
            headers={"accept": ACCEPT, "content-type": "application/json"},
        )
        assert big.status_code == 413
        text = await client.post(
            "/mcp", content="hi", headers={"accept": ACCEPT, "content-type": "text/plain"}
        )
        assert text.status_code == 400
        put = await client.put("/mcp", content="{}", headers={"content-type": "application/json"})
        assert put.status_code == 405 and put.headers["allow"] == "GET, POST, DELETE"
        modern_get = await client.get("/mcp", headers={"accept": ACCEPT, "mcp-protocol-version": MODERN})
        assert modern_get.status_code == 405 and modern_get.headers["allow"] == "POST"
        modern_delete = await client.delete("/mcp", headers={"mcp-protocol-version": MODERN})
        assert modern_delete.status_code == 405


async def test_other_paths_pass_through_to_the_host_app() -> None:
    async with http() as client:
        assert (await client.get("/elsewhere")).status_code == 404
        assert (await client.get("/mcp/extra")).status_code == 404


# --- handshake era --------------------------------------------------------------------------------


async def test_handshake_negotiates_and_issues_a_session() -> None:
    async with McpTestClient(app, era="2024-11-05") as mcp:
        assert mcp.era == "2024-11-05" and mcp.session_id
        assert await mcp.request("ping") == {}
    async with McpTestClient(app, era="2031-01-01") as mcp:  # unknown offer: counter with the newest
        assert mcp.era == "2025-11-25"


async def test_handshake_session_rules() -> None:
    async with McpTestClient(app, era="2025-11-25") as mcp, http() as client:
        base = {"accept": ACCEPT, "content-type": "application/json"}
        body = json.dumps({"jsonrpc": "2.0", "id": 7, "method": "tools/list"})
        missing = await client.post("/mcp", content=body, headers=base)
        assert missing.status_code == 400 and missing.json() == {
            "jsonrpc": "2.0",
            "id": None,
            "error": {"code": -32600, "message": missing.json()["error"]["message"]},
        }
        unknown = await client.post("/mcp", content=body, headers={**base, "mcp-session-id": "nope"})
        assert unknown.status_code == 404
        other_user = await client.post(
            "/mcp",
            content=body,
            headers={**base, "mcp-session-id": mcp.session_id, "authorization": "Bearer someone-else"},
        )
        assert other_user.status_code == 404, "a session is bound to the credential that opened it"
        session = {**base, "mcp-session-id": mcp.session_id}
        no_sse = await client.post("/mcp", content=body, headers={**session, "accept": "application/json"})
        assert no_sse.status_code == 406
        parse = await client.post("/mcp", content="{nope", headers=session)
        assert parse.status_code == 400 and parse.json()["error"]["code"] == -32700
        batch = await client.post("/mcp", content="[" + body + "]", headers=session)
        assert batch.status_code == 400 and batch.json()["error"]["code"] == -32600
        shapeless = await client.post(
            "/mcp", content='{"jsonrpc":"2.0","id":true,"method":"x"}', headers=session
        )
        assert shapeless.status_code == 400
        note = await client.post(
            "/mcp", content='{"jsonrpc":"2.0","method":"notifications/foo"}', headers=session
        )
        assert note.status_code == 202 and note.content == b""
        reply = await client.post("/mcp", content='{"jsonrpc":"2.0","id":"x","result":{}}', headers=session)
        assert reply.status_code == 202
        get_no_sse = await client.get(
            "/mcp", headers={"accept": "application/json", "mcp-session-id": mcp.session_id}
        )
        assert get_no_sse.status_code == 406
        get_no_session = await client.get("/mcp", headers={"accept": "text/event-stream"})
        assert get_no_session.status_code == 400
        ended = await client.delete("/mcp", headers={"mcp-session-id": mcp.session_id})
        assert ended.status_code == 200
        gone = await client.post("/mcp", content=body, headers=session)
        assert gone.status_code == 404
        mcp.session_id = None


@pytest.mark.parametrize(
    ("method", "params", "code"),
    [
        ("no/such/method", {}, -32601),
        ("tools/call", {"name": "nope", "arguments": {}}, -32602),
        ("tools/call", {"arguments": {}}, -32602),
        ("tools/call", {"name": "add", "arguments": [1, 2]}, -32602),
        ("tools/list", {"cursor": "page-2"}, -32602),
        ("resources/read", {"uri": "test://missing"}, -32002),
        ("resources/read", {}, -32602),
        ("prompts/get", {"name": "nope"}, -32602),
        ("logging/setLevel", {"level": "loud"}, -32602),
        ("resources/subscribe", {}, -32602),
        (
            "completion/complete",
            {"ref": {"type": "ref/other"}, "argument": {"name": "a", "value": ""}},
            -32602,
        ),
        ("initialize", {"protocolVersion": 5}, -32602),
    ],
)
async def test_handshake_method_errors(method: str, params: dict, code: int) -> None:
    async with McpTestClient(app, era="2025-11-25") as mcp:
        with pytest.raises(McpError) as info:
            await mcp.request(method, params)
        assert info.value.code == code
        assert info.value.status == 200
        if code == -32002:
            assert info.value.data == {"uri": "test://missing"}


async def test_handshake_tool_results() -> None:
    async with McpTestClient(app, era="2025-11-25") as mcp:
        assert await mcp.call_tool("add", {"a": 2, "b": 3}) == {
            "content": [{"type": "text", "text": '{"result":5}'}],
            "structuredContent": {"result": 5},
            "isError": False,
        }
        bad = await mcp.call_tool("add", {"a": "two", "b": 3})
        assert bad["isError"] is True and "a: Input should be a valid integer" in bad["content"][0]["text"]


# --- stateless era --------------------------------------------------------------------------------


async def test_stateless_results_carry_the_2026_fields() -> None:
    async with McpTestClient(app) as mcp:
        tools = await mcp.request("tools/list")
        assert [t["name"] for t in tools["tools"]] == ["add", "regional", "slow"]
        assert tools["resultType"] == "complete" and tools["ttlMs"] == 0 and tools["cacheScope"] == "private"
        assert tools["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "wire-test"
        call = await mcp.call_tool("add", {"a": 1, "b": 2})
        assert call["structuredContent"] == {"result": 3} and call["resultType"] == "complete"
        assert "ttlMs" not in call
        discover = await mcp.request("server/discover")
        assert discover["supportedVersions"] == [MODERN] and "tools" in discover["capabilities"]


async def test_stateless_never_issues_sessions() -> None:
    async with http() as client:
        response = await client.post(
            "/mcp", content=modern_body("tools/list"), headers=modern_headers("tools/list")
        )
        assert response.status_code == 200 and "mcp-session-id" not in response.headers


@pytest.mark.parametrize(
    ("body", "headers", "status", "code"),
    [
        ("{bad", modern_headers("tools/list"), 400, -32700),
        ('[{"jsonrpc":"2.0","id":1,"method":"tools/list"}]', modern_headers("tools/list"), 400, -32600),
        ('{"jsonrpc":"2.0","id":1,"result":{}}', modern_headers("tools/list"), 400, -32600),
        ('{"jsonrpc":"2.0","id":null,"method":"tools/list"}', modern_headers("tools/list"), 400, -32600),
        (
            json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}),
            modern_headers("tools/list"),
            400,
            -32602,
        ),
        (
            json.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "tools/list",
                    "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": MODERN}},
                }
            ),
            modern_headers("tools/list"),
            400,
            -32602,
        ),
        (modern_body("tools/list"), modern_headers("TOOLS/LIST"), 400, -32020),
        (modern_body("tools/list"), {**modern_headers("tools/list"), "mcp-method": ""}, 400, -32020),
        (
            modern_body("tools/call", {"name": "add", "arguments": {"a": 1, "b": 1}}),
            modern_headers("tools/call", "other"),
            400,
            -32020,
        ),
        (
            modern_body("tools/call", {"name": "add", "arguments": {"a": 1, "b": 1}}),
            modern_headers("tools/call"),
            400,
            -32020,
        ),
        (
            modern_body("tools/call", {"name": "regional", "arguments": {"region": "eu"}}),
            modern_headers("tools/call", "regional"),
            400,
            -32020,
        ),
        (
            modern_body("tools/call", {"name": "regional", "arguments": {"region": "eu"}}),
            modern_headers("tools/call", "regional", **{"mcp-param-region": "us"}),
            400,
            -32020,
        ),
        (
            modern_body("tools/call", {"name": "regional", "arguments": {}}),
            modern_headers("tools/call", "regional", **{"mcp-param-region": "us"}),
            400,
            -32020,
        ),
        (modern_body("initialize"), modern_headers("initialize"), 404, -32601),
        (modern_body("ping"), modern_headers("ping"), 404, -32601),
        (modern_body("logging/setLevel", {"level": "info"}), modern_headers("logging/setLevel"), 404, -32601),
        (modern_body("nope/nope"), modern_headers("nope/nope"), 404, -32601),
        (modern_body("tools/call", {"name": "nope"}), modern_headers("tools/call", "nope"), 400, -32602),
        (
            modern_body("resources/read", {"uri": "x://y"}),
            modern_headers("resources/read", "x://y"),
            400,
            -32602,
        ),
        (
            modern_body("tools/call", {"name": "add", "arguments": {}, "requestState": "forged.state"}),
            modern_headers("tools/call", "add"),
            400,
            -32602,
        ),
        (
            modern_body("tools/call", {"name": "add", "arguments": {}, "inputResponses": [1]}),
            modern_headers("tools/call", "add"),
            400,
            -32602,
        ),
    ],
)
async def test_stateless_ladder(body: str, headers: dict, status: int, code: int) -> None:
    async with http() as client:
        response = await client.post("/mcp", content=body, headers=headers)
        assert response.status_code == status, response.text
        assert response.json()["error"]["code"] == code
        request_id = (
            json.loads(body)["id"]
            if body.startswith("{")
            and '"method"' in body
            and '"id":null' not in body
            and json.loads(body).get("method")
            else None
        )
        assert response.json()["id"] == request_id


async def test_unsupported_version_names_the_supported_ones() -> None:
    async with http() as client:
        body = json.dumps(
            {
                "jsonrpc": "2.0",
                "id": 3,
                "method": "tools/list",
                "params": {"_meta": {**META, "io.modelcontextprotocol/protocolVersion": "2099-01-01"}},
            }
        )
        response = await client.post(
            "/mcp",
            content=body,
            headers={**modern_headers("tools/list"), "mcp-protocol-version": "2099-01-01"},
        )
        assert response.status_code == 400
        assert response.json()["error"]["code"] == -32022
        assert response.json()["error"]["data"] == {"supported": [MODERN], "requested": "2099-01-01"}


async def test_duplicate_routing_header_is_a_mismatch() -> None:
    async with http() as client:
        headers = [(k, v) for k, v in modern_headers("tools/list").items()] + [("mcp-method", "tools/list")]
        response = await client.post("/mcp", content=modern_body("tools/list"), headers=headers)
        assert response.status_code == 400 and response.json()["error"]["code"] == -32020


async def test_mirrored_headers_accept_base64_and_matching_params() -> None:
    async with http() as client:
        headers = modern_headers(
            "tools/call", "=?base64?cmVnaW9uYWw=?=", **{"mcp-param-region": "=?base64?w6l1?="}
        )
        response = await client.post(
            "/mcp",
            content=modern_body("tools/call", {"name": "regional", "arguments": {"region": "éu", "n": 2}}),
            headers=headers,
        )
        assert response.status_code == 200, response.text
        assert response.json()["result"]["content"][0]["text"] == "éu:2"


async def test_stateless_notifications() -> None:
    async with http() as client:
        accepted = await client.post(
            "/mcp",
            content='{"jsonrpc":"2.0","method":"notifications/progress"}',
            headers=modern_headers("notifications/progress"),
        )
        assert accepted.status_code == 202
        removed = await client.post(
            "/mcp",
            content='{"jsonrpc":"2.0","method":"notifications/initialized"}',
            headers=modern_headers("notifications/initialized"),
        )
        assert removed.status_code == 404 and removed.json()["error"]["code"] == -32601


async def test_progress_streams_as_sse_then_the_result() -> None:
    from tests import wire_app

    wire_app.events["sse"] = __import__("anyio").Event()
    wire_app.events["sse"].set()
    async with http() as client:
        response = await client.post(
            "/mcp",
            content=modern_body(
                "tools/call",
                {"name": "slow", "arguments": {"tag": "sse"}, "_meta": {**META, "progressToken": "p1"}},
            ),
            headers=modern_headers("tools/call", "slow"),
        )
        assert response.headers["content-type"] == "text/event-stream"
        assert response.headers["x-accel-buffering"] == "no"
        messages = parse_sse(response.text)
        assert messages[0]["method"] == "notifications/progress"
        assert messages[0]["params"] == {
            "progressToken": "p1",
            "progress": 1,
            "total": 2,
            "message": "waiting",
        }
        assert messages[-1]["result"]["content"][0]["text"] == "released"


async def test_a_bug_of_ours_is_a_protocol_error_not_a_500(monkeypatch: pytest.MonkeyPatch) -> None:
    from agentmw.mcp import methods

    def broken(call, params):
        raise RuntimeError("secret internals /etc/passwd")

    monkeypatch.setitem(methods.HANDLERS, "tools/list", broken)
    async with http() as client:
        response = await client.post(
            "/mcp", content=modern_body("tools/list"), headers=modern_headers("tools/list")
        )
    assert response.status_code == 200
    assert response.json()["error"] == {"code": -32603, "message": "Internal error"}
    assert "secret" not in response.text


async def test_function_exceptions_are_sanitized() -> None:
    from agentmw import Agent

    agent = Agent()

    @agent.tool
    async def explode() -> str:
        raise ValueError("db password=hunter2\nTraceback (most recent call last): ...")

    @agent.resource("x://boom")
    def boom() -> str:
        raise KeyError("internal")

    async with McpTestClient(agent.asgi(), era="2025-11-25") as mcp:
        result = await mcp.call_tool("explode")
        assert result["isError"] is True
        assert result["content"] == [
            {
                "type": "text",
                "text": "explode failed with an internal error (ValueError); "
                "details are in the server log. This failure is "
                "permanent: repeating the same call will not help.",
            }
        ]
        with pytest.raises(McpError) as info:
            await mcp.request("resources/read", {"uri": "x://boom"})
        assert info.value.code == -32603 and "Traceback" not in info.value.message
