"""mcp/_wire.py without a server: the status table of both eras, the error body, the response that turns from
JSON into SSE, and the header map. Written from the survivors of a mutation run (docs/testing.md); the ASGI
messages are compared whole."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from agentmw._transport import SSE_HEADERS
from agentmw.mcp import _wire
from agentmw.mcp._wire import (
    Exchange,
    encode_or_error,
    error_body,
    header_map,
    json_response,
    plain_response,
    sse_frame,
    status_for,
)


class Recorder:
    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []

    async def __call__(self, message: dict[str, Any]) -> None:
        self.messages.append(message)


def test_versions_codes_and_meta_keys() -> None:
    assert _wire.HANDSHAKE_VERSIONS == ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
    assert _wire.STATELESS_VERSIONS == ("2026-07-28",)
    assert _wire.LATEST_HANDSHAKE == "2025-11-25"
    assert (
        _wire.SESSION_NOT_FOUND,
        _wire.RESOURCE_NOT_FOUND_2025,
        _wire.HEADER_MISMATCH,
        _wire.MISSING_CAPABILITY,
        _wire.UNSUPPORTED_VERSION,
    ) == (-32001, -32002, -32020, -32021, -32022)
    assert (
        _wire.META_VERSION,
        _wire.META_CAPABILITIES,
        _wire.META_LOG_LEVEL,
        _wire.META_SERVER_INFO,
        _wire.META_SUBSCRIPTION,
    ) == (
        "io.modelcontextprotocol/protocolVersion",
        "io.modelcontextprotocol/clientCapabilities",
        "io.modelcontextprotocol/logLevel",
        "io.modelcontextprotocol/serverInfo",
        "io.modelcontextprotocol/subscriptionId",
    )


@pytest.mark.parametrize(
    ("code", "stateless"),
    [
        (-32700, 400),
        (-32600, 400),
        (-32602, 400),
        (-32020, 400),
        (-32021, 400),
        (-32022, 400),
        (-32601, 404),
        (-32603, 200),
        (-32001, 200),
        (-32002, 200),
        (0, 200),
        (12345, 200),
    ],
)
def test_status_for(code: int, stateless: int) -> None:
    assert status_for(code, True) == stateless
    assert status_for(code, False) == 200


def test_error_body() -> None:
    assert error_body(1, -32602, "bad") == {
        "jsonrpc": "2.0",
        "id": 1,
        "error": {"code": -32602, "message": "bad"},
    }
    assert error_body(None, -1, "x", {"k": 1}) == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -1, "message": "x", "data": {"k": 1}},
    }
    assert error_body("a", -1, "x", 0)["error"]["data"] == 0


async def test_plain_and_json_responses() -> None:
    send = Recorder()
    await plain_response(send, 202)
    assert send.messages == [
        {"type": "http.response.start", "status": 202, "headers": [(b"content-length", b"0")]},
        {"type": "http.response.body", "body": b""},
    ]
    send = Recorder()
    await plain_response(send, 405, [(b"allow", b"GET")], b"no")
    assert send.messages == [
        {
            "type": "http.response.start",
            "status": 405,
            "headers": [(b"allow", b"GET"), (b"content-length", b"2")],
        },
        {"type": "http.response.body", "body": b"no"},
    ]
    send = Recorder()
    await json_response(send, 200, {"a": 1})
    assert send.messages[1] == {"type": "http.response.body", "body": b'{"a":1}'}


def test_sse_frame() -> None:
    assert sse_frame({"a": 1}) == b'event: message\ndata: {"a":1}\n\n'
    assert sse_frame([1], "7") == b"id: 7\nevent: message\ndata: [1]\n\n"


def test_encode_or_error(caplog: pytest.LogCaptureFixture) -> None:
    ok = {"jsonrpc": "2.0", "id": 1, "result": {"x": 1}}
    assert encode_or_error(ok) == (b'{"jsonrpc":"2.0","id":1,"result":{"x":1}}', None)
    error = {"jsonrpc": "2.0", "id": 2, "error": {"code": -32601, "message": "no"}}
    assert encode_or_error(error) == (
        b'{"jsonrpc":"2.0","id":2,"error":{"code":-32601,"message":"no"}}',
        -32601,
    )
    assert encode_or_error({"jsonrpc": "2.0", "id": 2, "error": {"message": "no code"}})[1] == 0
    assert encode_or_error({"jsonrpc": "2.0", "id": 2, "error": "odd"})[1] is None
    with caplog.at_level(logging.WARNING, logger="agentmw"):
        body, code = encode_or_error({"jsonrpc": "2.0", "id": "r9", "result": {"x": float("nan")}})
    assert code == -32603
    assert body == (
        b'{"jsonrpc":"2.0","id":"r9","error":{"code":-32603,"message":"Internal error: the result '
        b'could not be written as JSON (NaN or infinity)"}}'
    )
    assert [r.getMessage() for r in caplog.records] == [
        "MCP result for request 'r9' could not be written as JSON"
    ]


async def test_a_quiet_exchange_answers_plain_json_with_the_mapped_status() -> None:
    send = Recorder()
    exchange = Exchange(send, [(b"mcp-session-id", b"s")], stateless=True)
    assert (exchange.streaming, exchange.closed, exchange.stateless) == (False, False, True)
    await exchange.finish({"jsonrpc": "2.0", "id": 1, "error": {"code": -32601, "message": "no"}})
    body = b'{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"no"}}'
    assert send.messages == [
        {
            "type": "http.response.start",
            "status": 404,
            "headers": [
                (b"content-type", b"application/json"),
                (b"mcp-session-id", b"s"),
                (b"content-length", str(len(body)).encode()),
            ],
        },
        {"type": "http.response.body", "body": body},
    ]
    assert exchange.closed is True
    await exchange.finish({"jsonrpc": "2.0", "id": 1, "result": {}})  # a second answer is dropped
    await exchange.message({"jsonrpc": "2.0", "method": "late"})
    await exchange.keepalive()
    assert len(send.messages) == 2


async def test_status_of_a_result_and_of_the_handshake_era() -> None:
    send = Recorder()
    await Exchange(send, stateless=True).finish({"jsonrpc": "2.0", "id": 1, "result": {}})
    assert send.messages[0]["status"] == 200
    assert send.messages[0]["headers"][0] == (b"content-type", b"application/json")
    send = Recorder()
    await Exchange(send, stateless=False).finish(
        {"jsonrpc": "2.0", "id": 1, "error": {"code": -32601, "message": "no"}}
    )
    assert send.messages[0]["status"] == 200


async def test_a_message_commits_the_exchange_to_sse() -> None:
    send = Recorder()
    exchange = Exchange(send, [(b"x-h", b"v")], stateless=False)
    await exchange.message({"jsonrpc": "2.0", "method": "notifications/progress"})
    await exchange.keepalive()
    await exchange.message({"jsonrpc": "2.0", "method": "m2"})
    await exchange.finish({"jsonrpc": "2.0", "id": 3, "result": {"ok": True}})
    assert exchange.streaming is True and exchange.closed is True
    assert send.messages == [
        {"type": "http.response.start", "status": 200, "headers": [*SSE_HEADERS, (b"x-h", b"v")]},
        {
            "type": "http.response.body",
            "body": b'event: message\ndata: {"jsonrpc":"2.0","method":"notifications/progress"}\n\n',
            "more_body": True,
        },
        {"type": "http.response.body", "body": b": ping\n\n", "more_body": True},
        {
            "type": "http.response.body",
            "body": b'event: message\ndata: {"jsonrpc":"2.0","method":"m2"}\n\n',
            "more_body": True,
        },
        {
            "type": "http.response.body",
            "body": b'event: message\ndata: {"jsonrpc":"2.0","id":3,"result":{"ok":true}}\n\n',
            "more_body": False,
        },
    ]


async def test_a_keepalive_alone_commits_to_sse() -> None:
    send = Recorder()
    exchange = Exchange(send, stateless=True)
    await exchange.keepalive()
    await exchange.start_stream()  # once only
    assert send.messages == [
        {"type": "http.response.start", "status": 200, "headers": list(SSE_HEADERS)},
        {"type": "http.response.body", "body": b": ping\n\n", "more_body": True},
    ]


def test_header_map() -> None:
    headers, repeated = header_map(
        {
            "headers": [
                (b"accept", b"a"),
                (b"x-one", b"\xe9"),
                (b"accept", b"b"),
                (b"accept", b"c"),
                (b"mcp-method", b"m"),
                (b"mcp-method", b"n"),
            ]
        }
    )
    assert headers == {"accept": "a, b, c", "x-one": "\u00e9", "mcp-method": "m, n"}
    assert repeated == {"accept", "mcp-method"}
    assert header_map({"headers": [(b"a", b"1"), (b"b", b"2")]}) == ({"a": "1", "b": "2"}, None)
    assert header_map({"headers": []}) == ({}, None)
