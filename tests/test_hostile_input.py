"""Regression tests for what the fuzz run found: every malformed request gets the protocol's error, never a 500,
a broken stream, a traceback, or a run of the function."""

from __future__ import annotations

import json
import logging
from typing import Any

import httpx
import pytest
from pydantic import BaseModel, field_serializer
from starlette.applications import Starlette

from agentmw import Agent, AgentMiddleware, tool
from agentmw.a2a import A2ASettings, PushPolicy
from tests.helpers.mcp_raw import initialize, session_headers

ran: list[str] = []

MCP_HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
STATELESS = "2026-07-28"
META = {
    "io.modelcontextprotocol/protocolVersion": STATELESS,
    "io.modelcontextprotocol/clientCapabilities": {},
}


class Exploding(BaseModel):
    value: int

    @field_serializer("value")
    def _boom(self, value: int) -> int:
        raise RuntimeError("serializer failed")


def build() -> Starlette:
    agent = Agent("hostile", a2a=A2ASettings(push=PushPolicy(allow_hosts=["127.0.0.1"])))

    @agent.skill
    async def echo(text: str) -> str:
        """Echo text back.

        Summary:
            Repeats what it is told.
        """
        ran.append(text)
        return f"echo: {text}"

    @tool
    def explode() -> Exploding:
        """Return a value whose serializer raises."""
        return Exploding(value=1)

    @tool
    def nan() -> dict[str, float]:
        """Return a float that JSON cannot hold."""
        return {"x": float("nan")}

    agent.include(explode)
    agent.include(nan)
    app = Starlette()
    app.add_middleware(AgentMiddleware, agent=agent)
    return app


@pytest.fixture
def app() -> Starlette:
    ran.clear()
    return build()


def client(app: Starlette) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app, raise_app_exceptions=False),
        base_url="http://127.0.0.1:8000",
        timeout=10,
    )


def message(text: str = "hi", **extra: Any) -> dict[str, Any]:
    return {"messageId": f"m-{text}-{len(ran)}", "role": "ROLE_USER", "parts": [{"text": text}], **extra}


async def a2a(http: httpx.AsyncClient, body: bytes | str | Any, version: str = "1.0") -> httpx.Response:
    content = body if isinstance(body, (bytes, str)) else json.dumps(body)
    return await http.post(
        "/a2a", content=content, headers={"a2a-version": version, "content-type": "application/json"}
    )


def strict_json(response: httpx.Response) -> Any:
    """The body parsed as strict JSON: NaN, Infinity and lone surrogates make this fail."""
    text = response.content.decode("utf-8")  # invalid UTF-8 raises

    def no_constants(name: str) -> Any:
        raise AssertionError(f"non-JSON constant {name} in the answer")

    return json.loads(text, parse_constant=no_constants)


# --- A2A -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw",
    [
        (
            b'{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"\\ud800","role":"ROLE_USER",'
            b'"parts":[{"text":"\\udfff lone"}]}}}'
        ),
        # CESU-8: a surrogate pair encoded as two 3-byte sequences is not UTF-8
        (
            b'{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER",'
            b'"parts":[{"text":"\xed\xa0\xbd\xed\xb8\x80"}]}}}'
        ),
    ],
)
async def test_a2a_lone_surrogates_and_cesu8_never_break_the_writer(app: Starlette, raw: bytes) -> None:
    async with client(app) as http:
        response = await a2a(http, raw)
        assert response.status_code == 200
        body = strict_json(response)
        if b"\xed" in raw:
            assert body["error"]["code"] == -32700 and body["id"] is None
        else:
            task = body["result"]["task"]
            assert task["status"]["state"] == "TASK_STATE_COMPLETED"
            assert "\ufffd" in task["history"][0]["messageId"]


async def test_a2a_lone_surrogate_inside_a_stream(app: Starlette) -> None:
    raw = (
        b'{"jsonrpc":"2.0","id":7,"method":"SendStreamingMessage","params":{"message":{"messageId":"s1",'
        b'"role":"ROLE_USER","parts":[{"text":"\\ud800 stream"}]}}}'
    )
    async with client(app) as http:
        response = await a2a(http, raw)
    assert response.headers["content-type"].startswith("text/event-stream")
    events = [json.loads(line[5:]) for line in response.text.splitlines() if line.startswith("data:")]
    assert events and all(e["id"] == 7 and "result" in e for e in events)
    assert events[-1]["result"]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"


@pytest.mark.parametrize("bad_id", [1.5, [], {}, False, True, [1]])
@pytest.mark.parametrize("method", ["SendMessage", "SendStreamingMessage"])
async def test_a2a_invalid_ids_are_invalid_requests_and_nothing_runs(
    app: Starlette, bad_id: Any, method: str
) -> None:
    async with client(app) as http:
        response = await a2a(
            http, {"jsonrpc": "2.0", "id": bad_id, "method": method, "params": {"message": message("never")}}
        )
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    body = strict_json(response)
    assert body["error"]["code"] == -32600 and body["id"] is None
    assert ran == []


@pytest.mark.parametrize(
    "raw",
    [
        b'{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"x","historyLength":NaN}}',
        b'{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"x","historyLength":Infinity}}',
        b'{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"x","historyLength":-Infinity}}',
        b'{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"x","historyLength":1e400}}',
        b'{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"x"}} trailing',
        b"\xff\xfe{}",
    ],
)
async def test_a2a_non_json_numbers_and_bytes_are_parse_errors(app: Starlette, raw: bytes) -> None:
    async with client(app) as http:
        response = await a2a(http, raw)
    body = strict_json(response)
    assert response.status_code == 200 and body["error"]["code"] == -32700 and body["id"] is None


@pytest.mark.parametrize(
    "params",
    [
        {"message": None, "configuration": "x"},
        {"message": "x"},
        {"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "x"}]}, "configuration": "x"},
        {
            "message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "x"}]},
            "configuration": {"historyLength": 1.5},
        },
        {
            "message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "x"}]},
            "configuration": {"taskPushNotificationConfig": {"url": "http://[::1"}},
        },
        {
            "message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "x"}]},
            "configuration": {"taskPushNotificationConfig": {"url": "http://127.0.0.1:99999/x"}},
        },
    ],
)
async def test_a2a_bad_params_are_invalid_params(app: Starlette, params: dict[str, Any]) -> None:
    async with client(app) as http:
        response = await a2a(http, {"jsonrpc": "2.0", "id": 3, "method": "SendMessage", "params": params})
    body = strict_json(response)
    assert body["error"]["code"] == -32602, body
    assert body["id"] == 3


@pytest.mark.parametrize(
    "params",
    [
        {
            "message": {
                "kind": "message",
                "messageId": "m",
                "role": [],
                "parts": [{"kind": "text", "text": "x"}],
            }
        },
        {
            "message": {
                "kind": "message",
                "messageId": "m",
                "role": {},
                "parts": [{"kind": "text", "text": "x"}],
            }
        },
        {
            "message": {
                "kind": "message",
                "messageId": "m",
                "role": "user",
                "parts": [{"kind": "text", "text": "x"}],
            },
            "configuration": "x",
        },
        {
            "message": {
                "kind": "message",
                "messageId": "m",
                "role": "user",
                "parts": [{"kind": "text", "text": "x"}],
            },
            "configuration": {
                "pushNotificationConfig": {
                    "url": "http://127.0.0.1/x",
                    "authentication": {"schemes": {"a": 1}},
                }
            },
        },
    ],
)
async def test_a2a_v03_bad_shapes_are_invalid_params(app: Starlette, params: dict[str, Any]) -> None:
    async with client(app) as http:
        response = await a2a(
            http, {"jsonrpc": "2.0", "id": "v", "method": "message/send", "params": params}, version="0.3"
        )
    body = strict_json(response)
    assert body["error"]["code"] == -32602, body
    assert body["id"] == "v"


async def test_a2a_v03_push_set_with_bad_nested_shapes(app: Starlette) -> None:
    async with client(app) as http:
        sent = strict_json(
            await a2a(
                http,
                {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message("task")}},
            )
        )
        task_id = sent["result"]["task"]["id"]
        for nested in ("x", {"url": "http://127.0.0.1/x", "authentication": {"schemes": {"0": "x"}}}):
            response = await a2a(
                http,
                {
                    "jsonrpc": "2.0",
                    "id": 2,
                    "method": "tasks/pushNotificationConfig/set",
                    "params": {"taskId": task_id, "pushNotificationConfig": nested},
                },
                version="0.3",
            )
            assert strict_json(response)["error"]["code"] == -32602


@pytest.mark.parametrize(
    "query", ["historyLength=inf", "historyLength=1e400", "historyLength=1.5", "pageSize=NaN"]
)
async def test_a2a_rest_numbers_in_queries(app: Starlette, query: str) -> None:
    async with client(app) as http:
        response = await http.get(f"/a2a/tasks?{query}", headers={"a2a-version": "1.0"})
    assert response.status_code == 400
    assert strict_json(response)["error"]["status"] == "INVALID_ARGUMENT"


async def test_a2a_rest_body_that_is_not_json(app: Starlette) -> None:
    async with client(app) as http:
        for raw in (b'{"message": NaN}', b"\xc3\x28", b"[1,2"):
            response = await http.post("/a2a/message:send", content=raw, headers={"a2a-version": "1.0"})
            assert response.status_code == 400
            assert strict_json(response)["error"]["details"][0]["reason"] == "PARSE_ERROR"


# --- MCP -------------------------------------------------------------------------------------------


async def test_mcp_handshake_unhashable_ids_and_cancel_targets(app: Starlette) -> None:
    async with client(app) as http:
        session = session_headers(await initialize(http, request_id=1))
        for bad_id in ([], {}, 1.5, None, True):
            for shape in ({"method": "ping"}, {"result": {}}):
                response = await http.post(
                    "/mcp", headers=session, json={"jsonrpc": "2.0", "id": bad_id, **shape}
                )
                assert response.status_code == 400
                body = strict_json(response)
                assert body["error"]["code"] == -32600 and body["id"] is None
        for target in ([], {}, [1], 1.5):
            response = await http.post(
                "/mcp",
                headers=session,
                json={"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": target}},
            )
            assert response.status_code == 202


async def test_mcp_stateless_unhashable_ids(app: Starlette) -> None:
    headers = {**MCP_HEADERS, "mcp-protocol-version": STATELESS, "mcp-method": "tools/list"}
    async with client(app) as http:
        for bad_id in ([], {}, 1.5, False):
            response = await http.post(
                "/mcp",
                headers=headers,
                json={"jsonrpc": "2.0", "id": bad_id, "method": "tools/list", "params": {"_meta": META}},
            )
            assert response.status_code == 400
            assert strict_json(response)["error"]["code"] == -32600


@pytest.mark.parametrize(
    "raw",
    [
        b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":NaN}}',
        b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":1e999}}',
        b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"\xed\xa0\x80"}}',
    ],
)
async def test_mcp_parse_errors(app: Starlette, raw: bytes) -> None:
    async with client(app) as http:
        response = await http.post("/mcp", headers=MCP_HEADERS, content=raw)
    assert response.status_code == 400
    assert strict_json(response)["error"]["code"] == -32700


@pytest.mark.parametrize("era", ["handshake", "stateless"])
async def test_mcp_a_result_that_cannot_be_written_keeps_the_request_id(app: Starlette, era: str) -> None:
    async with client(app) as http:
        if era == "handshake":
            headers = session_headers(await initialize(http, request_id=1))
            meta: dict[str, Any] = {}
        else:
            headers = {**MCP_HEADERS, "mcp-protocol-version": STATELESS, "mcp-method": "tools/call"}
            meta = {"_meta": META}
        for name in ("explode", "nan"):
            call_headers = {**headers, "mcp-name": name} if era == "stateless" else headers
            response = await http.post(
                "/mcp",
                headers=call_headers,
                json={
                    "jsonrpc": "2.0",
                    "id": f"call-{name}",
                    "method": "tools/call",
                    "params": {"name": name, "arguments": {}, **meta},
                },
            )
            body = strict_json(response)
            assert body["id"] == f"call-{name}", body
            assert response.status_code in (200, 500)
            # either a tool error the model can read, or the protocol's internal error: never id null
            assert body.get("result", {}).get("isError") is True or body["error"]["code"] == -32603


# --- AG-UI -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw",
    [
        b'{"threadId":"t","runId":"r","state":{"x":NaN},"messages":[],"tools":[],"context":[],"forwardedProps":{}}',
        b'{"threadId":"t","runId":"r","state":{"x":Infinity},"messages":[],"tools":[],"context":[],"forwardedProps":{}}',
        b'{"threadId":"t","runId":"r","state":{"x":1e400},"messages":[],"tools":[],"context":[],"forwardedProps":{}}',
        b'{"threadId":"t","runId":"r","state":{},"messages":[],"tools":[],"context":[],"forwardedProps":{}}\xff',
    ],
)
async def test_agui_non_json_state_is_refused_before_any_stream(app: Starlette, raw: bytes) -> None:
    async with client(app) as http:
        response = await http.post("/agui/echo", content=raw, headers={"content-type": "application/json"})
    assert response.status_code == 422
    assert strict_json(response)["detail"][0]["type"] == "json_invalid"
    assert ran == []


async def test_agui_lone_surrogate_in_a_message_streams_valid_json(app: Starlette) -> None:
    raw = (
        b'{"threadId":"t-s","runId":"r-s","state":{"k":"\\ud800"},"tools":[],"context":[],"forwardedProps":{},'
        b'"messages":[{"id":"u1","role":"user","content":"\\udc00 hi"}]}'
    )
    async with client(app) as http:
        response = await http.post("/agui/echo", content=raw, headers={"content-type": "application/json"})
    assert response.status_code == 200
    response.content.decode("utf-8")
    events = [json.loads(line[6:]) for line in response.text.splitlines() if line.startswith("data: ")]
    assert events[-1]["type"] == "RUN_FINISHED"
    assert ran == ["\ufffd hi"]


# --- logging ---------------------------------------------------------------------------------------


async def test_malformed_requests_log_no_tracebacks(app: Starlette, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="agentmw")
    async with client(app) as http:
        await http.get("/.well-known/agent-card.json")  # the app's first request: the agent's start-up lines
        caplog.clear()
        await a2a(http, b"{nope")
        await a2a(http, {"jsonrpc": "2.0", "id": 1.5, "method": "SendMessage"})
        await a2a(
            http,
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "message/send",
                "params": {"message": {"role": [], "parts": []}},
            },
            version="0.3",
        )
        await http.post("/mcp", headers=MCP_HEADERS, content=b'{"jsonrpc":"2.0","id":[],"method":"x"}')
        await http.post("/agui/echo", content=b"{", headers={"content-type": "application/json"})
    loud = [r for r in caplog.records if r.levelno > logging.DEBUG or r.exc_info]
    assert loud == []
