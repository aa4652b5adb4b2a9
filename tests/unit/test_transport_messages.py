"""_transport.py beyond tests/unit/test_transport.py: the exact error messages every face sends (a client
reads them: they are the body of a 400/413/401/403), the identity boundary, JSON out for any value, the
ASGI messages of a JSON answer, and the SSE stream's ending. Written from the survivors of a mutation run
(docs/testing.md)."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import json
import math
import signal
import warnings
from typing import Any

import pytest
from pydantic import BaseModel

from agentmw import _transport
from agentmw._transport import (
    KEEPALIVE_SECONDS,
    SSE_HEADERS,
    ClientDisconnected,
    ProtocolError,
    classify_rpc,
    dumps,
    dumps_finite,
    identity_error,
    loads,
    read_body,
    send_bytes,
    send_json,
    sse_comment,
    sse_data,
    stream_sse,
    to_json_text,
)
from agentmw.identity import Forbidden, Unauthenticated
from tests.waiting import eventually


def refused(call: Any, *args: Any, **kwargs: Any) -> ProtocolError:
    with pytest.raises(ProtocolError) as info:
        call(*args, **kwargs)
    return info.value


# --- the constants faces send ----------------------------------------------------------------------------


def test_codes_and_headers() -> None:
    assert (
        _transport.PARSE_ERROR,
        _transport.INVALID_REQUEST,
        _transport.METHOD_NOT_FOUND,
        _transport.INVALID_PARAMS,
        _transport.INTERNAL_ERROR,
    ) == (-32700, -32600, -32601, -32602, -32603)
    assert SSE_HEADERS == (
        (b"content-type", b"text/event-stream"),
        (b"cache-control", b"no-cache, no-transform"),
        (b"x-accel-buffering", b"no"),
    )
    assert KEEPALIVE_SECONDS == 15.0


def test_protocol_error_fields_and_body() -> None:
    error = ProtocolError(-32602, "bad", {"field": "x"}, status=400, headers=[(b"a", b"b")])
    assert (str(error), error.code, error.message, error.data, error.status, error.headers) == (
        "bad",
        -32602,
        "bad",
        {"field": "x"},
        400,
        [(b"a", b"b")],
    )
    assert error.request_id is None
    assert error.body(3) == {
        "jsonrpc": "2.0",
        "id": 3,
        "error": {"code": -32602, "message": "bad", "data": {"field": "x"}},
    }
    plain = ProtocolError(-32600, "x")
    assert (plain.data, plain.status, plain.headers) == (None, None, None)
    assert plain.body("r") == {"jsonrpc": "2.0", "id": "r", "error": {"code": -32600, "message": "x"}}
    assert ProtocolError(1, "f", False).body(None)["error"]["data"] is False  # only None is absent


# --- the identity boundary -------------------------------------------------------------------------------


def test_unauthenticated_is_401_with_its_challenge() -> None:
    error = identity_error(Unauthenticated("token expired", challenge='Bearer realm="x"'))
    assert (error.code, error.message, error.status) == (-32600, "token expired", 401)
    assert error.headers == [(b"www-authenticate", b'Bearer realm="x"')]
    default = identity_error(Unauthenticated())
    assert (default.message, default.headers) == (
        "Authentication required",
        [(b"www-authenticate", b"Bearer")],
    )
    empty = identity_error(Unauthenticated(""))
    assert empty.message == "Authentication required"
    odd = identity_error(Unauthenticated("x", challenge="Bearer \u2603"))
    assert odd.headers == [(b"www-authenticate", b"Bearer ?")]  # latin-1, never an encoding error


def test_forbidden_is_403() -> None:
    error = identity_error(Forbidden("not yours"))
    assert (error.code, error.message, error.status, error.headers) == (-32600, "not yours", 403, None)
    assert identity_error(Forbidden()).message == "Forbidden"
    assert identity_error(PermissionError()).status == 403


# --- bodies ----------------------------------------------------------------------------------------------


def receiving(*messages: dict[str, Any]) -> Any:
    queue = list(messages)

    async def receive() -> dict[str, Any]:
        return queue.pop(0)

    return receive


async def test_read_body_messages() -> None:
    error = None
    try:
        await read_body(receiving({"type": "http.request", "body": b"x" * 11}), 10)
    except ProtocolError as exc:
        error = exc
    assert error is not None
    assert (error.code, error.message, error.status) == (
        -32600,
        "Request body too large (the limit is 10 bytes)",
        413,
    )
    with pytest.raises(ClientDisconnected):
        await read_body(
            receiving({"type": "http.request", "body": b"a", "more_body": True}, {"type": "http.disconnect"}),
            10,
        )
    # a chunk with no body key, then the end
    assert (
        await read_body(
            receiving({"type": "http.request", "more_body": True}, {"type": "http.request", "body": b"ab"}),
            10,
        )
        == b"ab"
    )
    assert await read_body(receiving({"type": "http.request"}), 0) == b""
    three = await read_body(
        receiving(
            {"type": "http.request", "body": b"a", "more_body": True},
            {"type": "http.request", "body": b"b", "more_body": True},
            {"type": "http.request", "body": b"c", "more_body": False},
        ),
        3,
    )
    assert three == b"abc"


# --- strict JSON in: the messages ------------------------------------------------------------------------


@pytest.mark.parametrize("raw", [b"NaN", b"1e400", b"{", b'{"a":1} x', b"\xff", "[Infinity]", "1 2"])
def test_a_parse_error_says_so(raw: bytes | str) -> None:
    error = refused(loads, raw)
    assert (error.code, error.message, error.status) == (
        -32700,
        "Parse error: the body is not valid JSON",
        400,
    )


def test_the_cause_of_a_parse_error_is_kept() -> None:
    assert str(refused(loads, b"NaN").__cause__) == "NaN is not JSON"
    assert str(refused(loads, b"-Infinity").__cause__) == "-Infinity is not JSON"
    assert str(refused(loads, b"1e999").__cause__) == "number out of range"
    assert str(refused(loads, b"[1] [2]").__cause__) == "extra data after the JSON value"


def test_too_deep_with_a_surrogate_says_nested_too_deeply() -> None:
    raw = b"[" * 50_000 + b'"\\ud800"' + b"]" * 50_000
    try:
        value = loads(raw)
    except ProtocolError as error:
        assert (error.code, error.status) == (-32700, 400)
        assert error.message in (
            "Parse error: the body is not valid JSON",
            "Parse error: the body is nested too deeply",
        )
    else:
        while isinstance(value, list):
            value = value[0]
        assert value == "\ufffd"


def test_surrogates_are_replaced_only_when_there_is_one() -> None:
    assert loads(b'{"\\ud800k": ["\\udfff", 1.5, {"x": "\\uD83D"}]}') == {
        "\ufffdk": ["\ufffd", 1.5, {"x": "\ufffd"}]
    }
    assert loads(b'"\\ud83d\\ude00"') == "\U0001f600"  # a pair is a character
    assert loads(b'"\\uDBFF\\uDFFF"') == "\U0010ffff"
    assert loads(b'"\\ud7ff\\ue000"') == "\ud7ff\ue000"
    assert loads(b'"\\uDC00"') == "\ufffd"
    assert loads(b'"\\uDAFF"') == "\ufffd"
    assert loads('"\\uDEAD"') == "\ufffd"
    assert loads('"\\udead"') == "\ufffd"
    assert loads('["\ud800", "\udfff"]') == ["\ufffd", "\ufffd"]
    assert loads(b" \t\r\n[1] \t\r\n") == [1]
    assert loads(" 7 ") == 7
    assert loads(bytearray(b'"\\ud800"')) == "\ufffd"
    assert loads(bytearray(b"[true]")) == [True]


def test_replace_surrogates_walks_every_container() -> None:
    value = {"a\ud800": ["\udc00", {"b": "\udbff"}, 3, None, 1.5], "k": ("\ud800",)}
    assert _transport._replace_surrogates(value) == {
        "a\ufffd": ["\ufffd", {"b": "\ufffd"}, 3, None, 1.5],
        "k": ("\ud800",),
    }  # tuples never come from JSON


def test_skip_ws() -> None:
    assert _transport._skip_ws("  \t\n\rx", 0) == 5
    assert _transport._skip_ws("x  ", 1) == 3
    assert _transport._skip_ws("\u00a0x", 0) == 0  # only JSON's four whitespace characters


# --- strict JSON out -------------------------------------------------------------------------------------


def test_dumps_exact_bytes() -> None:
    assert dumps({"a": [1, "é", None, True]}) == '{"a":[1,"é",null,true]}'.encode()
    assert dumps("a\ud800") == b'"a\\ud800"'
    assert dumps({"k": "é\udc00"}) == b'{"k":"\\u00e9\\udc00"}'


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (float("nan"), b"null"),
        ([1.5, float("inf"), -math.inf], b"[1.5,null,null]"),
        ({"a": float("nan"), "b": {"c": [float("inf")]}}, b'{"a":null,"b":{"c":[null]}}'),
        ((1, float("nan")), b"[1,null]"),
        ({float("nan"): 1, 2.5: 2, float("inf"): 3}, b'{"nan":1,"2.5":2,"inf":3}'),
    ],
)
def test_dumps_finite(value: Any, expected: bytes) -> None:
    assert dumps_finite(value) == expected


class Point(BaseModel):
    x: float
    label: str = "p"


@dataclasses.dataclass
class Pair:
    a: int
    b: float


def test_finite_reads_models() -> None:
    assert _transport._finite(Point(x=float("nan"))) == {"x": None, "label": "p"}
    assert _transport._finite([Point(x=1.0)]) == [{"x": 1.0, "label": "p"}]
    assert _transport._finite("s") == "s" and _transport._finite(3) == 3


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({"a": 1}, '{"a":1}'),
        ([1, float("nan")], "[1,null]"),
        ("é", '"é"'),
        (3, "3"),
        (2.5, "2.5"),
        (float("inf"), "null"),
        (True, "true"),
        (None, "null"),
        (Point(x=float("nan")), '{"x":null,"label":"p"}'),
        (Pair(1, 2.5), '{"a":1,"b":2.5}'),
        ((1, 2), "[1,2]"),
    ],
)
def test_to_json_text(value: Any, expected: str) -> None:
    assert to_json_text(value) == expected


# --- the JSON-RPC envelope: the messages -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "flags", "code", "message"),
    [
        ([], {}, -32600, "Batches are not supported"),
        ([{"jsonrpc": "2.0", "id": 1, "method": "m"}], {}, -32600, "Batches are not supported"),
        ("x", {}, -32600, "Expected a JSON-RPC 2.0 message object"),
        ({"id": 1, "method": "m"}, {}, -32600, "Expected a JSON-RPC 2.0 message object"),
        ({"jsonrpc": "2.0", "id": 1.5, "method": "m"}, {}, -32600, "The id must be a string or an integer"),
        ({"jsonrpc": "2.0", "id": None, "method": "m"}, {}, -32600, "The id must be a string or an integer"),
        ({"jsonrpc": "2.0", "id": 1, "method": "m", "params": [1]}, {}, -32602, "params must be an object"),
        ({"jsonrpc": "2.0", "method": "m", "params": [1]}, {}, -32600, "params must be an object"),
        (
            {"jsonrpc": "2.0", "method": "m"},
            {"notifications": False},
            -32600,
            "Expected a JSON-RPC request with an id",
        ),
        ({"jsonrpc": "2.0", "id": 1, "method": 5}, {}, -32600, "method must be a string"),
        ({"jsonrpc": "2.0", "id": 1, "method": None}, {}, -32600, "method must be a string"),
        ({"jsonrpc": "2.0", "id": 1}, {}, -32600, "Expected a JSON-RPC request"),
        ({"jsonrpc": "2.0", "id": 1, "result": 1}, {}, -32600, "Expected a JSON-RPC request"),
        ({"jsonrpc": "2.0", "result": 1}, {"responses": True}, -32600, "Expected a JSON-RPC request"),
        (
            {"jsonrpc": "2.0", "id": None, "result": 1},
            {"responses": True, "null_id": True},
            -32600,
            "Expected a JSON-RPC request",
        ),
        (
            {"jsonrpc": "2.0", "id": 1, "result": 1, "error": {}},
            {"responses": True},
            -32600,
            "Expected a JSON-RPC request",
        ),
        ({"jsonrpc": "2.0", "id": 1}, {"responses": True}, -32600, "Expected a JSON-RPC request"),
    ],
)
def test_classify_rpc_refusals(body: Any, flags: dict[str, bool], code: int, message: str) -> None:
    error = refused(classify_rpc, body, **flags)
    assert (error.code, error.message, error.status) == (code, message, 400)


def test_classify_rpc_accepts() -> None:
    error_response = {"jsonrpc": "2.0", "id": "r", "error": {"code": 1, "message": "x"}}
    message = classify_rpc(error_response, responses=True)
    assert (message.kind, message.id, message.method, message.params, message.body) == (
        "response",
        "r",
        None,
        None,
        error_response,
    )
    notification = classify_rpc({"jsonrpc": "2.0", "method": "n", "params": {"a": 1}}, notifications=True)
    assert (notification.kind, notification.id, notification.method, notification.params) == (
        "notification",
        None,
        "n",
        {"a": 1},
    )
    null_request = classify_rpc({"jsonrpc": "2.0", "id": None, "method": "m", "params": {}}, null_id=True)
    assert (null_request.kind, null_request.id, null_request.params) == ("request", None, {})
    # a request is a request even where responses are admitted
    assert (
        classify_rpc({"jsonrpc": "2.0", "id": 2, "method": "m", "result": 1}, responses=True).kind
        == "request"
    )


def test_valid_id() -> None:
    assert _transport._valid_id(None, True) is True
    assert _transport._valid_id(None, False) is False
    assert _transport._valid_id("a", False) is True
    assert _transport._valid_id(0, False) is True
    assert _transport._valid_id(True, True) is False
    assert _transport._valid_id(1.0, True) is False


# --- JSON and SSE out ------------------------------------------------------------------------------------


class Recorder:
    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []

    async def __call__(self, message: dict[str, Any]) -> None:
        self.messages.append(message)


async def test_send_bytes_exact_messages() -> None:
    send = Recorder()
    await send_bytes(send, 404, b"gone", [(b"x-a", b"1")])
    assert send.messages == [
        {
            "type": "http.response.start",
            "status": 404,
            "headers": [(b"x-a", b"1"), (b"content-length", b"4")],
        },
        {"type": "http.response.body", "body": b"gone"},
    ]
    send = Recorder()
    await send_bytes(send, 204, b"")
    assert send.messages[0] == {
        "type": "http.response.start",
        "status": 204,
        "headers": [(b"content-length", b"0")],
    }


async def test_send_json_exact_messages() -> None:
    send = Recorder()
    await send_json(send, 201, {"a": "é"}, [(b"x-b", b"2")])
    body = '{"a":"é"}'.encode()
    assert send.messages == [
        {
            "type": "http.response.start",
            "status": 201,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"x-b", b"2"),
            ],
        },
        {"type": "http.response.body", "body": body},
    ]
    send = Recorder()
    await send_json(send, 200, [])
    assert send.messages[0]["headers"] == [(b"content-type", b"application/json"), (b"content-length", b"2")]


def test_sse_data_and_comment_exact() -> None:
    assert sse_data({"a": 1}) == b'data: {"a":1}\n\n'
    assert sse_data([1], event="message") == b"event: message\ndata: [1]\n\n"
    assert sse_data("x", event_id=0) == b'id: 0\ndata: "x"\n\n'
    assert sse_data(None, event="e", event_id="s-1") == b"id: s-1\nevent: e\ndata: null\n\n"
    assert sse_comment() == b": ping\n\n"
    assert sse_comment("hello") == b": hello\n\n"


# --- shutdown --------------------------------------------------------------------------------------------


def test_shutting_down_reads_sse_starlette_and_uvicorn(monkeypatch: pytest.MonkeyPatch) -> None:
    from sse_starlette.sse import AppStatus

    class Server:
        should_exit = False

        def handle_exit(self, *args: Any) -> None:
            self.should_exit = True

    monkeypatch.setattr(AppStatus, "should_exit", False)
    server = Server()
    previous = signal.getsignal(signal.SIGTERM)
    try:
        signal.signal(signal.SIGTERM, server.handle_exit)
        assert _transport.shutting_down() is False
        assert _transport._uvicorn_exiting() is False
        server.should_exit = True
        assert _transport._uvicorn_exiting() is True
        assert _transport.shutting_down() is True
        server.should_exit = False
        monkeypatch.setattr(AppStatus, "should_exit", True)
        assert _transport.shutting_down() is True
    finally:
        signal.signal(signal.SIGTERM, previous)
    monkeypatch.setattr(AppStatus, "should_exit", False)
    assert _transport._uvicorn_exiting() is False  # a plain handler has no server behind it


async def test_wait_for_exit_returns_once_shutting_down(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []

    def fake() -> bool:
        calls.append(1)
        return len(calls) >= 3

    monkeypatch.setattr(_transport, "shutting_down", fake)
    await asyncio.wait_for(_transport.wait_for_exit(poll=0.001), 5)
    assert len(calls) == 3


# --- stream_sse ------------------------------------------------------------------------------------------


async def frames_of(*items: bytes) -> Any:
    for item in items:
        yield item


def http_receive(disconnect: asyncio.Event | None = None) -> Any:
    async def receive() -> dict[str, Any]:
        if disconnect is None:
            await asyncio.Event().wait()
        await disconnect.wait()
        return {"type": "http.disconnect"}

    return receive


SCOPE = {
    "type": "http",
    "asgi": {"version": "3.0", "spec_version": "2.4"},
    "http_version": "1.1",
    "method": "GET",
    "path": "/",
    "headers": [],
}


def body_of(messages: list[dict[str, Any]]) -> bytes:
    return b"".join(m.get("body", b"") for m in messages if m["type"] == "http.response.body")


async def test_stream_sse_completes_with_headers_and_frames() -> None:
    send = Recorder()
    done = await asyncio.wait_for(
        stream_sse(
            SCOPE,
            http_receive(),
            send,
            frames_of(b"data: 1\n\n", b"data: 2\n\n"),
            headers=[(b"x-h", b"v")],
            status=201,
        ),
        10,
    )
    assert done is True
    start = send.messages[0]
    assert start["type"] == "http.response.start" and start["status"] == 201
    assert start["headers"][:4] == [*SSE_HEADERS, (b"x-h", b"v")]
    assert body_of(send.messages) == b"data: 1\n\ndata: 2\n\n"


async def test_stream_sse_first_frames_go_out_with_the_headers() -> None:
    send = Recorder()
    release = asyncio.Event()

    async def slow() -> Any:
        await release.wait()
        yield b"data: later\n\n"

    task = asyncio.ensure_future(stream_sse(SCOPE, http_receive(), send, slow(), first=b"data: now\n\n"))
    for _ in range(100):
        await asyncio.sleep(0)
        if len(send.messages) >= 2:
            break
    assert send.messages[:2] == [
        {"type": "http.response.start", "status": 200, "headers": list(SSE_HEADERS)},
        {"type": "http.response.body", "body": b"data: now\n\n", "more_body": True},
    ]
    release.set()
    assert await asyncio.wait_for(task, 10) is True
    assert [m["type"] for m in send.messages].count("http.response.start") == 1  # the second start is dropped
    assert body_of(send.messages) == b"data: now\n\ndata: later\n\n"


async def test_stream_sse_client_leaving_is_not_completed_and_runs_on_disconnect() -> None:
    send = Recorder()
    gone = asyncio.Event()
    seen: list[str] = []

    async def endless() -> Any:
        yield b"data: 1\n\n"
        gone.set()
        await asyncio.Event().wait()
        yield b"never"

    async def on_disconnect() -> None:
        seen.append("async")

    done = await asyncio.wait_for(
        stream_sse(SCOPE, http_receive(gone), send, endless(), on_disconnect=on_disconnect), 10
    )
    assert done is False
    assert seen == ["async"]

    sync_seen: list[str] = []
    gone2 = asyncio.Event()

    async def endless2() -> Any:
        yield b"data: 1\n\n"
        gone2.set()
        await asyncio.Event().wait()
        yield b"never"

    done = await asyncio.wait_for(
        stream_sse(
            SCOPE, http_receive(gone2), Recorder(), endless2(), on_disconnect=lambda: sync_seen.append("sync")
        ),
        10,
    )
    assert done is False and sync_seen == ["sync"]


async def test_stream_sse_a_broken_connection_is_not_completed() -> None:
    async def broken(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body":
            raise OSError("connection reset")

    assert (
        await asyncio.wait_for(stream_sse(SCOPE, http_receive(), broken, frames_of(b"data: 1\n\n")), 10)
        is False
    )


async def test_started_drops_only_the_start() -> None:
    send = Recorder()
    wrapped = _transport._started(send)
    await wrapped({"type": "http.response.start", "status": 200, "headers": []})
    await wrapped({"type": "http.response.body", "body": b"x"})
    assert send.messages == [{"type": "http.response.body", "body": b"x"}]


def test_rpc_message_slots() -> None:
    body = {"jsonrpc": "2.0"}
    message = _transport.RpcMessage("request", 1, "m", {"p": 1}, body)
    assert (message.kind, message.id, message.method, message.params, message.body) == (
        "request",
        1,
        "m",
        {"p": 1},
        body,
    )
    assert json.loads(dumps(body)) == body


# --- more edges: models in a stream's NaN fallback, odd keys, the keep-alive, shutdown ---------------------


class Stamped(BaseModel):
    when: datetime.datetime
    x: float


def test_finite_dumps_models_in_json_mode() -> None:
    value = {"bad": float("nan"), "m": Stamped(when=datetime.datetime(2024, 1, 2, 3, 4, 5), x=float("inf"))}
    assert dumps_finite(value) == b'{"bad":null,"m":{"when":"2024-01-02T03:04:05","x":null}}'


def test_finite_keeps_keys_json_writes_itself() -> None:
    assert dumps_finite({True: 1, None: 2, 3: float("nan"), "s": 4}) == b'{"true":1,"null":2,"3":null,"s":4}'


def test_notification_keeps_its_body() -> None:
    body = {"jsonrpc": "2.0", "method": "n"}
    assert classify_rpc(body).body is body


def test_to_json_text_of_plain_values_never_goes_through_pydantic() -> None:
    assert to_json_text("a\ud800") == '"a\\ud800"'
    assert to_json_text({"s": "\udc00"}) == '{"s":"\\udc00"}'


def test_to_json_text_builds_its_adapter_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_transport, "_any_adapter", None)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an adapter of the wrong type would still write it, with a warning
        assert to_json_text(Point(x=1.0)) == '{"x":1.0,"label":"p"}'
    adapter = _transport._any_adapter
    assert adapter is not None
    assert to_json_text(Pair(1, 2.0)) == '{"a":1,"b":2.0}'
    assert _transport._any_adapter is adapter


async def test_wait_for_exit_polls_every_quarter_second_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    slept: list[float] = []
    answers = iter([False, False, True])

    async def fake_sleep(seconds: float) -> None:
        slept.append(seconds)

    monkeypatch.setattr(_transport, "shutting_down", lambda: next(answers))
    monkeypatch.setattr(_transport.asyncio, "sleep", fake_sleep)
    await _transport.wait_for_exit()
    assert slept == [0.25, 0.25]


async def test_stream_sse_sends_keepalive_comments() -> None:
    send = Recorder()
    gone = asyncio.Event()

    async def quiet() -> Any:
        yield b"data: 1\n\n"
        await asyncio.Event().wait()
        yield b"never"

    task = asyncio.ensure_future(stream_sse(SCOPE, http_receive(gone), send, quiet(), keepalive=1))
    await eventually(
        lambda: b": ping\n\n" in [m.get("body") for m in send.messages],
        lambda: f"a keep-alive: {send.messages}",
        timeout=10,
        interval=0.05,
    )
    gone.set()
    assert await asyncio.wait_for(task, 10) is False
    bodies = [m.get("body") for m in send.messages if m["type"] == "http.response.body"]
    assert bodies[0] == b"data: 1\n\n"
    assert set(bodies[1:]) <= {b": ping\n\n", b""}


async def test_stream_sse_ended_by_shutdown_is_not_completed(monkeypatch: pytest.MonkeyPatch) -> None:
    from sse_starlette.sse import AppStatus

    monkeypatch.setattr(AppStatus, "should_exit", True)

    async def endless() -> Any:
        yield b"data: 1\n\n"
        await asyncio.Event().wait()
        yield b"never"

    assert await asyncio.wait_for(stream_sse(SCOPE, http_receive(), Recorder(), endless()), 10) is False


def test_a_body_the_decoder_takes_but_too_deep_to_clean_is_a_parse_error() -> None:
    # 700 levels decode (the C decoder's limit is the recursion limit, 1,000) but replacing the lone surrogate
    # walks them in Python, two frames a level: refused, never a RecursionError out of the transport
    deep = b"[" * 700 + b'"\\ud800"' + b"]" * 700
    error = refused(loads, deep)
    assert (error.code, error.message, error.status) == (
        -32700,
        "Parse error: the body is nested too deeply",
        400,
    )
    value = loads(b"[" * 700 + b'"x"' + b"]" * 700)  # without a surrogate: nothing to clean
    for _ in range(700):
        value = value[0]
    assert value == "x"
