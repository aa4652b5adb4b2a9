"""Unit tests of ``agentmw._transport`` without I/O: strict JSON in and out, the JSON-RPC envelope,
the body reader (driven by a fake ``receive``) and SSE framing."""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Iterable
from typing import Any

import pytest

from agentmw._transport import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    PARSE_ERROR,
    ClientDisconnected,
    ProtocolError,
    classify_rpc,
    compact_encoder,
    dumps,
    dumps_finite,
    loads,
    read_body,
    read_json,
    request_id_of,
    sse_comment,
    sse_data,
)

# --- loads: strict JSON in --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw",
    [
        b"NaN",
        b"Infinity",
        b"-Infinity",
        b"[NaN]",
        b'{"a": Infinity}',
        b'{"a": [1, -Infinity]}',
        b"1e400",
        b"-1e400",
        b'{"x": 1e999}',
        b"[1.5e308, 2e308]",
        b"\xff",
        b'"\xff"',
        b'"\xc3"',
        b'{"a": "\xe9"}',  # not UTF-8 (latin-1, truncated sequence)
        b'"\xed\xa0\x80"',  # CESU-8 / WTF-8: an encoded surrogate is not valid UTF-8
        b'"\xed\xa0\xbd\xed\xb8\x80"',  # CESU-8 form of U+1F600
        b'{"a": 1} {"b": 2}',
        b"1 2",
        b'{"a": 1}x',
        b"[1]]",
        b'{"a":1}\x00',
        b"",
        b"   ",
        b"{bad",
        b"[1,]",
        b"{'a': 1}",
        b'"\\x41"',
        b"01",
        b"+1",
        b".5",
        b"1" * 5000,  # an integer past Python's digit limit
    ],
)
def test_loads_refuses_with_a_parse_error(raw: bytes) -> None:
    with pytest.raises(ProtocolError) as info:
        loads(raw)
    assert info.value.code == PARSE_ERROR == -32700
    assert info.value.status == 400
    assert info.value.body(None) == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32700, "message": info.value.message},
    }


@pytest.mark.parametrize("raw", ["NaN", "[Infinity]", "1e400", '{"a": 1} 2'])
def test_loads_refuses_str_input_too(raw: str) -> None:
    with pytest.raises(ProtocolError) as info:
        loads(raw)
    assert (info.value.code, info.value.status) == (PARSE_ERROR, 400)


def test_loads_too_deep_is_a_parse_error() -> None:
    with pytest.raises(ProtocolError) as info:
        loads(b"[" * 100_000 + b"]" * 100_000)
    assert info.value.code == PARSE_ERROR


def test_loads_deep_body_with_a_surrogate_is_a_value_or_a_parse_error() -> None:
    raw = b"[" * 700 + b'"\\ud800"' + b"]" * 700
    leaked = False
    try:
        value = loads(raw)
    except ProtocolError as exc:
        assert exc.code == PARSE_ERROR
    except RecursionError:
        leaked = True  # reported below, outside the handler: a 1,400-frame traceback takes pytest seconds to format
    else:
        for _ in range(700):
            value = value[0]
        assert value == "\ufffd"
    if leaked:
        pytest.fail("RecursionError escaped loads()", pytrace=False)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (b'{"a": 1, "b": [true, false, null], "c": "x"}', {"a": 1, "b": [True, False, None], "c": "x"}),
        (b"  \r\n\t[1, 2.5, -3e2]\n ", [1, 2.5, -300.0]),
        (b"1e-400", 0.0),
        (b"1.7976931348623157e308", 1.7976931348623157e308),
        (b'"caf\xc3\xa9 \xf0\x9f\x98\x80"', "café 😀"),
        (b'"\\u00e9"', "é"),
        (b"0", 0),
        (b"null", None),
    ],
)
def test_loads_accepts_valid_json(raw: bytes, expected: Any) -> None:
    assert loads(raw) == expected
    assert loads(raw.decode()) == expected
    assert loads(bytearray(raw)) == expected


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (b'"\\ud800"', "\ufffd"),
        (b'"\\udfff"', "\ufffd"),
        (b'"a\\uD800b"', "a\ufffdb"),  # upper-case escape
        (b'"\\udc00\\ud800"', "\ufffd\ufffd"),  # reversed pair: two lone halves
        (b'"\\ud83d\\ude00"', "😀"),  # a valid pair is kept
        (b'"\\ud83d\\ude00\\ud83d"', "😀\ufffd"),
        (b'{"\\ud800k": "v\\udc01"}', {"\ufffdk": "v\ufffd"}),  # keys too
        (
            b'{"a": [{"b": ["\\ud800", 1, {"\\udbff": null}]}]}',
            {"a": [{"b": ["\ufffd", 1, {"\ufffd": None}]}]},
        ),
        (b'"\\\\ud800"', "\\ud800"),  # an escaped backslash: the text \ud800, not a surrogate
    ],
)
def test_loads_replaces_lone_surrogate_escapes(raw: bytes, expected: Any) -> None:
    value = loads(raw)
    assert value == expected
    dumps(value).decode("utf-8")  # everything loads returns can be written as UTF-8


def test_loads_replaces_raw_surrogates_in_str_input() -> None:
    assert loads('{"k\ud800": ["\udfff"]}') == {"k\ufffd": ["\ufffd"]}


def test_loads_replaces_lone_surrogate_escapes_in_str_input() -> None:
    assert loads('{"a": "\\ud800"}') == {"a": "\ufffd"}


# --- dumps / dumps_finite: strict JSON out -------------------------------------------------------------


def test_dumps_is_compact_utf8() -> None:
    assert dumps({"a": [1, "é", None]}) == '{"a":[1,"é",null]}'.encode()


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, {"a": [1, math.nan]}, [{"x": -math.inf}]])
def test_dumps_refuses_nan_and_infinities(value: Any) -> None:
    with pytest.raises(ValueError):
        dumps(value)


@pytest.mark.parametrize("value", ["\ud800", "a\udfffé", {"k\ud800": ["x\udc00"]}, ["😀", "\ud83d"]])
def test_dumps_escapes_lone_surrogates(value: Any) -> None:
    raw = dumps(value)
    text = raw.decode("utf-8")  # valid UTF-8: never a UnicodeEncodeError
    assert "\\ud" in text.lower()
    assert json.loads(raw) == value  # the escape round-trips to the very same string


def test_dumps_refuses_a_value_that_contains_itself_or_nests_too_deeply() -> None:
    """The encoder keeps no record of the containers it is in (it is faster so): a cycle must still end in
    ValueError, as deep nesting does, and never loop or escape as RecursionError."""
    loop: dict[str, Any] = {}
    loop["self"] = loop
    circle: list[Any] = [{"a": 1}]
    circle[0]["b"] = circle
    deep: list[Any] = []
    for _ in range(100_000):
        deep = [deep]
    for value in (loop, circle, deep):
        with pytest.raises(ValueError, match="contains itself"):
            dumps(value)
    assert dumps({"a": [1, {"b": [2]}], "c": loop["self"] is loop}) == b'{"a":[1,{"b":[2]}],"c":true}'


def test_a_cycle_is_a_value_error_with_a_raised_recursion_limit_too() -> None:
    """On 3.11 the C encoder recurses as deep as sys.setrecursionlimit allows: far enough to overflow the C
    stack (a crash) before RecursionError, so a raised limit keeps the circular check."""
    loop: dict[str, Any] = {}
    loop["self"] = loop
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(200_000)
    try:
        with pytest.raises(ValueError):
            dumps(loop)
    finally:
        sys.setrecursionlimit(limit)


@pytest.mark.parametrize("ensure_ascii", [False, True])
def test_compact_encoder_matches_the_json_module(ensure_ascii: bool) -> None:
    encode = compact_encoder(ensure_ascii=ensure_ascii, default=None)
    shared = {"x": 'é\n"', "n": [1, -2.5, 1e300, True, False, None], "t": (1, 2), "k": {"1": {}}}
    value = {"a": shared, "b": [shared, shared], 7: "int key", 1.5: "float key"}  # shared, not a cycle
    assert encode(value) == json.dumps(value, ensure_ascii=ensure_ascii, separators=(",", ":"))
    with pytest.raises(TypeError, match="set"):
        encode({"s": {1}})
    with pytest.raises(ValueError):
        encode([math.nan])


def test_dumps_uses_str_for_unknown_objects() -> None:
    class Thing:
        def __str__(self) -> str:
            return "thing"

    assert dumps({"t": Thing()}) == b'{"t":"thing"}'


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (
            {"a": math.nan, "b": [math.inf, -math.inf, 1.5], "c": (math.nan,)},
            {"a": None, "b": [None, None, 1.5], "c": [None]},
        ),
        (math.nan, None),
        ({"ok": 1}, {"ok": 1}),
    ],
)
def test_dumps_finite_writes_null_for_nan(value: Any, expected: Any) -> None:
    assert json.loads(dumps_finite(value)) == expected


def test_dumps_finite_never_raises_for_a_nan_key() -> None:
    value = loads(dumps_finite({math.nan: 1, "a": math.inf}))  # strict JSON, whatever the key becomes
    assert value["a"] is None and len(value) == 2


def test_dumps_finite_handles_models_and_surrogates() -> None:
    from pydantic import BaseModel

    class M(BaseModel):
        x: float
        s: str

    raw = dumps_finite({"m": M(x=math.nan, s="\ud800"), "y": math.inf})
    assert json.loads(raw.decode("utf-8")) == {"m": {"x": None, "s": "\ud800"}, "y": None}


# --- the JSON-RPC envelope ---------------------------------------------------------------------------


def _refused(body: Any, **flags: bool) -> ProtocolError:
    with pytest.raises(ProtocolError) as info:
        classify_rpc(body, **flags)
    assert info.value.status == 400
    return info.value


def test_classify_request() -> None:
    body = {"jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": {"a": 1}}
    message = classify_rpc(body)
    assert (message.kind, message.id, message.method, message.params) == (
        "request",
        7,
        "tools/list",
        {"a": 1},
    )
    assert message.body is body
    message = classify_rpc({"jsonrpc": "2.0", "id": "x", "method": "m"})
    assert (message.kind, message.id, message.params) == ("request", "x", None)
    assert classify_rpc({"jsonrpc": "2.0", "id": 0, "method": "m"}).id == 0
    assert classify_rpc({"jsonrpc": "2.0", "id": -5, "method": "m"}).id == -5
    assert classify_rpc({"jsonrpc": "2.0", "id": "", "method": "m"}).id == ""


def test_classify_notification() -> None:
    message = classify_rpc({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"p": 1}})
    assert (message.kind, message.id, message.method, message.params) == (
        "notification",
        None,
        "notifications/progress",
        {"p": 1},
    )
    error = _refused({"jsonrpc": "2.0", "method": "n"}, notifications=False)
    assert error.code == INVALID_REQUEST


def test_classify_batches_refused() -> None:
    error = _refused([{"jsonrpc": "2.0", "id": 1, "method": "m"}])
    assert error.code == INVALID_REQUEST and "Batch" in error.message
    assert _refused([]).code == INVALID_REQUEST
    assert _refused([], responses=True).code == INVALID_REQUEST


@pytest.mark.parametrize(
    "body",
    [
        None,
        1,
        "x",
        {},
        {"id": 1, "method": "m"},
        {"jsonrpc": "1.0", "id": 1, "method": "m"},
        {"jsonrpc": 2.0, "id": 1, "method": "m"},
        {"jsonrpc": "2.0", "id": 1},
    ],
)
def test_classify_not_a_message(body: Any) -> None:
    assert _refused(body).code == INVALID_REQUEST


@pytest.mark.parametrize("bad_id", [1.5, 1.0, True, False, [], [1], {}, {"a": 1}])
def test_classify_bad_id_types(bad_id: Any) -> None:
    for flags in ({}, {"null_id": True}, {"responses": True}):
        error = _refused({"jsonrpc": "2.0", "id": bad_id, "method": "m"}, **flags)
        assert error.code == INVALID_REQUEST
    assert _refused({"jsonrpc": "2.0", "id": bad_id, "result": {}}, responses=True).code == INVALID_REQUEST


def test_classify_null_id() -> None:
    assert _refused({"jsonrpc": "2.0", "id": None, "method": "m"}).code == INVALID_REQUEST
    message = classify_rpc({"jsonrpc": "2.0", "id": None, "method": "m"}, null_id=True)
    assert (message.kind, message.id) == ("request", None)


@pytest.mark.parametrize("params", [[1, 2], [], "x", 1, True])
def test_classify_params_must_be_an_object(params: Any) -> None:
    assert _refused({"jsonrpc": "2.0", "id": 1, "method": "m", "params": params}).code == INVALID_PARAMS
    assert _refused({"jsonrpc": "2.0", "method": "m", "params": params}).code == INVALID_REQUEST


def test_classify_params_null_is_absent() -> None:
    assert classify_rpc({"jsonrpc": "2.0", "id": 1, "method": "m", "params": None}).params is None


@pytest.mark.parametrize("method", [1, None, [], {"a": 1}, True])
def test_classify_method_must_be_a_string(method: Any) -> None:
    error = _refused({"jsonrpc": "2.0", "id": 1, "method": method})
    assert error.code == INVALID_REQUEST and "method" in error.message
    assert (
        _refused({"jsonrpc": "2.0", "id": 1, "method": method, "result": 1}, responses=True).code
        == INVALID_REQUEST
    )


def test_classify_responses_only_when_allowed() -> None:
    result = {"jsonrpc": "2.0", "id": 3, "result": {"ok": True}}
    error = {"jsonrpc": "2.0", "id": "r", "error": {"code": 1, "message": "x"}}
    assert _refused(result).code == INVALID_REQUEST
    assert _refused(error).code == INVALID_REQUEST
    message = classify_rpc(result, responses=True)
    assert (message.kind, message.id, message.method, message.params) == ("response", 3, None, None)
    assert classify_rpc(error, responses=True).kind == "response"
    assert classify_rpc({"jsonrpc": "2.0", "id": 4, "result": None}, responses=True).kind == "response"


@pytest.mark.parametrize(
    "body",
    [
        {"jsonrpc": "2.0", "id": 1, "result": 1, "error": {"code": 1, "message": "x"}},  # both
        {"jsonrpc": "2.0", "id": 1},  # neither
        {"jsonrpc": "2.0", "result": 1},  # no id
        {"jsonrpc": "2.0", "id": None, "result": 1},  # null id
    ],
)
def test_classify_malformed_responses(body: dict[str, Any]) -> None:
    assert _refused(body, responses=True, null_id=True).code == INVALID_REQUEST


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({"id": 5}, 5),
        ({"id": "a"}, "a"),
        ({"id": 0}, 0),
        ({"id": ""}, ""),
        ({"id": 1.5}, None),
        ({"id": 1.0}, None),
        ({"id": True}, None),
        ({"id": []}, None),
        ({"id": {}}, None),
        ({"id": None}, None),
        ({}, None),
        ([{"id": 1}], None),
        ("x", None),
        (None, None),
        (7, None),
    ],
)
def test_request_id_of(body: Any, expected: Any) -> None:
    assert request_id_of(body) == expected
    assert type(request_id_of(body)) is type(expected)


# --- the body reader ------------------------------------------------------------------------------


def fake_receive(messages: Iterable[dict[str, Any]]):
    queue = list(messages)
    calls = {"n": 0}

    async def receive() -> dict[str, Any]:
        calls["n"] += 1
        if not queue:
            raise AssertionError("read_body read past the last message")
        return queue.pop(0)

    receive.calls = calls  # type: ignore[attr-defined]
    return receive


def chunks(*parts: bytes) -> list[dict[str, Any]]:
    return [
        {"type": "http.request", "body": part, "more_body": i < len(parts) - 1}
        for i, part in enumerate(parts)
    ]


async def test_read_body_single_and_several_chunks() -> None:
    assert await read_body(fake_receive(chunks(b'{"a":1}')), 100) == b'{"a":1}'
    assert await read_body(fake_receive(chunks(b"ab", b"", b"cd", b"e")), 100) == b"abcde"


async def test_read_body_empty() -> None:
    assert await read_body(fake_receive([{"type": "http.request"}]), 10) == b""
    assert await read_body(fake_receive(chunks(b"", b"")), 10) == b""


async def test_read_body_limit_is_inclusive() -> None:
    assert await read_body(fake_receive(chunks(b"12345", b"67890")), 10) == b"1234567890"


async def test_read_body_past_the_limit_is_413_and_stops_reading() -> None:
    receive = fake_receive([*chunks(b"123456", b"78901"), {"type": "http.request", "body": b"never"}])
    with pytest.raises(ProtocolError) as info:
        await read_body(receive, 10)
    assert (info.value.code, info.value.status) == (INVALID_REQUEST, 413)
    assert "10 bytes" in info.value.message
    assert receive.calls["n"] == 2  # type: ignore[attr-defined]
    with pytest.raises(ProtocolError) as info:
        await read_body(fake_receive(chunks(b"x" * 11)), 10)
    assert info.value.status == 413


async def test_read_body_disconnect_is_an_exception() -> None:
    with pytest.raises(ClientDisconnected):
        await read_body(fake_receive([{"type": "http.disconnect"}]), 10)
    receive = fake_receive(
        [{"type": "http.request", "body": b"abc", "more_body": True}, {"type": "http.disconnect"}]
    )
    with pytest.raises(ClientDisconnected):
        await read_body(receive, 10)


async def test_read_json_is_strict() -> None:
    assert await read_json(fake_receive(chunks(b'{"a":', b" [1]}")), 100) == {"a": [1]}
    with pytest.raises(ProtocolError) as info:
        await read_json(fake_receive(chunks(b'{"a":', b" NaN}")), 100)
    assert (info.value.code, info.value.status) == (PARSE_ERROR, 400)


# --- SSE framing --------------------------------------------------------------------------------


def test_sse_data_framing() -> None:
    assert sse_data({"a": 1}) == b'data: {"a":1}\n\n'
    assert sse_data({"a": 1}, event="message") == b'event: message\ndata: {"a":1}\n\n'
    assert sse_data([1], event="message", event_id=7) == b"id: 7\nevent: message\ndata: [1]\n\n"
    assert sse_data("x", event_id="s-1") == b'id: s-1\ndata: "x"\n\n'
    assert sse_data(None, event_id=0) == b"id: 0\ndata: null\n\n"


def test_sse_data_never_holds_a_raw_newline_or_cr() -> None:
    frame = sse_data({"t": "line1\nline2\r\nline3\u2028", "s": "\ud800"})
    head, payload = frame[:-2], frame[-2:]
    assert payload == b"\n\n"
    assert head.startswith(b"data: ") and b"\n" not in head and b"\r" not in head
    assert json.loads(head[len(b"data: ") :]) == {"t": "line1\nline2\r\nline3\u2028", "s": "\ud800"}


def test_sse_data_refuses_nan() -> None:
    with pytest.raises(ValueError):
        sse_data({"x": math.nan})


def test_sse_comment() -> None:
    assert sse_comment() == b": ping\n\n"
    assert sse_comment("hi") == b": hi\n\n"
