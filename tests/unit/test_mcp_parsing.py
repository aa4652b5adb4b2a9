"""Unit tests of the stateless-era request parser (``agentmw.mcp.stateless.parse_request``) without I/O.

``parse_request`` runs the SDK's check ladder in order and raises the first failure; these tests build
requests that fail two checks at once to pin the order, and check that the error carries the request's
id once the JSON-RPC envelope was found valid (None before).
"""

from __future__ import annotations

import base64
from typing import Annotated, Any

import pytest
from pydantic import Field

from agentmw import Agent
from agentmw._transport import ProtocolError
from agentmw.mcp._wire import status_for
from agentmw.mcp.endpoint import Incoming
from agentmw.mcp.stateless import StatelessRequest, decode_header, parse_request

MODERN = "2026-07-28"
V = "io.modelcontextprotocol/protocolVersion"
CAPS = "io.modelcontextprotocol/clientCapabilities"
LEVEL = "io.modelcontextprotocol/logLevel"
META = {V: MODERN, CAPS: {}}

MISMATCH, UNSUPPORTED, INVALID_PARAMS, NOT_FOUND, INVALID_REQUEST = -32020, -32022, -32602, -32601, -32600

agent = Agent("t")


@agent.tool
async def regional(
    region: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})], n: int = 1
) -> str:
    """Echo the region."""
    return f"{region}:{n}"


@agent.tool
async def counted(
    count: Annotated[int, Field(json_schema_extra={"x-mcp-header": "Count"})] = 0,
    flag: Annotated[bool, Field(json_schema_extra={"x-mcp-header": "Flag"})] = False,
) -> str:
    """Mirror an integer and a boolean."""
    return f"{count}:{flag}"


@agent.tool
async def add(a: int, b: int) -> int:
    """Add."""
    return a + b


def incoming(
    method: str | None = "tools/list",
    name: str | None = None,
    *,
    version: str | None = MODERN,
    extra: list[tuple[str, str]] | None = None,
) -> Incoming:
    headers: list[tuple[bytes, bytes]] = [
        (b"accept", b"application/json, text/event-stream"),
        (b"content-type", b"application/json"),
    ]
    if version is not None:
        headers.append((b"mcp-protocol-version", version.encode()))
    if method is not None:
        headers.append((b"mcp-method", method.encode()))
    if name is not None:
        headers.append((b"mcp-name", name.encode()))
    for key, value in extra or ():
        headers.append((key.encode(), value.encode("utf-8")))
    return Incoming({"type": "http", "method": "POST", "headers": headers})


def body(
    method: str = "tools/list", params: dict[str, Any] | None = None, request_id: Any = 1, meta: Any = META
) -> dict[str, Any]:
    full: dict[str, Any] = {} if meta is None else {"_meta": meta}
    full.update(params or {})
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": full}


def refused(
    inc: Incoming, message: Any, code: int, *, status: int, request_id: Any = 1, match: str | None = None
) -> ProtocolError:
    with pytest.raises(ProtocolError) as info:
        parse_request(agent, inc, message)
    exc = info.value
    assert exc.code == code, exc.message
    assert (exc.status or status_for(exc.code, True)) == status
    assert exc.request_id == request_id
    assert type(exc.request_id) is type(request_id)
    assert exc.body(exc.request_id)["id"] == request_id
    if match is not None:
        assert match in exc.message, exc.message
    return exc


# --- a valid request ------------------------------------------------------------------------------


def test_valid_request_is_parsed() -> None:
    message = body(
        "tools/call",
        {"name": "add", "arguments": {"a": 1, "b": 2}},
        request_id="r-1",
        meta={**META, CAPS: {"elicitation": {}}, LEVEL: "warning"},
    )
    request = parse_request(agent, incoming("tools/call", "add"), message)
    assert isinstance(request, StatelessRequest)
    assert (request.id, request.method, request.version) == ("r-1", "tools/call", MODERN)
    assert request.params is message["params"]
    assert request.capabilities == {"elicitation": {}}
    assert request.log_level == "warning"


def test_header_whitespace_is_ignored() -> None:
    request = parse_request(agent, incoming(" tools/list ", version=f" {MODERN} "), body())
    assert request is not None and (request.version, request.log_level) == (MODERN, None)


def test_a_repeated_other_header_is_fine() -> None:
    inc = incoming(extra=[("x-trace", "a"), ("x-trace", "b")])
    assert parse_request(agent, inc, body()) is not None


def test_unknown_methods_are_left_to_dispatch() -> None:
    request = parse_request(agent, incoming("nope/nope"), body("nope/nope"))
    assert request is not None and request.method == "nope/nope"


# --- the envelope: errors carry the request's id when it has a valid one (issue 22, item 3) ---------------


@pytest.mark.parametrize(
    "message",
    [
        [body()],
        {"jsonrpc": "2.0", "id": 1, "result": {}},  # a response: its id is one of the server's, never echoed
        {"jsonrpc": "2.0", "id": None, "method": "tools/list", "params": {"_meta": META}},
        {"jsonrpc": "2.0", "id": 1.5, "method": "tools/list", "params": {"_meta": META}},
        {"jsonrpc": "2.0", "id": True, "method": "tools/list", "params": {"_meta": META}},
        {"jsonrpc": "2.0", "id": [1], "method": "tools/list", "params": {"_meta": META}},
        "tools/list",
        None,
    ],
)
def test_invalid_envelope_without_a_valid_request_id_is_invalid_request_with_a_null_id(message: Any) -> None:
    refused(incoming(), message, INVALID_REQUEST, status=400, request_id=None)


@pytest.mark.parametrize(
    "message",
    [
        {"jsonrpc": "2.0", "id": 1, "method": 5},
        {"id": 1, "method": "tools/list", "params": {"_meta": META}},
    ],
)
def test_invalid_envelope_of_a_request_with_a_valid_id_is_invalid_request_with_that_id(message: Any) -> None:
    refused(incoming(), message, INVALID_REQUEST, status=400, request_id=1)


def test_params_not_an_object_is_invalid_params_with_the_request_id() -> None:
    refused(
        incoming(),
        {"jsonrpc": "2.0", "id": 4, "method": "tools/list", "params": [1]},
        INVALID_PARAMS,
        status=400,
        request_id=4,
    )


# --- the ladder, one step at a time ---------------------------------------------------------------


@pytest.mark.parametrize("header", ["mcp-protocol-version", "mcp-method", "mcp-name"])
def test_repeated_routing_header(header: str) -> None:
    value = {"mcp-protocol-version": MODERN, "mcp-method": "tools/call", "mcp-name": "add"}[header]
    inc = incoming("tools/call", "add", extra=[(header, value)])
    refused(
        inc,
        body("tools/call", {"name": "add", "arguments": {"a": 1, "b": 1}}),
        MISMATCH,
        status=400,
        match=f"{header} header appears more than once",
    )


@pytest.mark.parametrize("meta", [None, [], "x", 1, [META]])
def test_meta_missing_or_not_an_object(meta: Any) -> None:
    refused(incoming(), body(meta=meta), INVALID_PARAMS, status=400, match="params._meta must be an object")


def test_params_absent_is_meta_missing() -> None:
    refused(
        incoming(),
        {"jsonrpc": "2.0", "id": 9, "method": "tools/list"},
        INVALID_PARAMS,
        status=400,
        request_id=9,
        match="_meta must be an object",
    )


@pytest.mark.parametrize(
    ("meta", "missing"),
    [
        ({CAPS: {}}, V),
        ({V: MODERN}, CAPS),
        ({}, f"{V}, {CAPS}"),
    ],
)
def test_meta_missing_keys(meta: dict[str, Any], missing: str) -> None:
    refused(
        incoming(),
        body(meta=meta),
        INVALID_PARAMS,
        status=400,
        match=f"missing the required key(s): {missing}",
    )


@pytest.mark.parametrize(
    ("header", "meta_version"),
    [
        (MODERN, "2025-06-18"),
        (None, MODERN),
        ("2099-01-01", MODERN),
        (MODERN, 20260728),
        (MODERN, None),
    ],
)
def test_version_header_must_match_meta(header: str | None, meta_version: Any) -> None:
    refused(
        incoming(version=header),
        body(meta={V: meta_version, CAPS: {}}),
        MISMATCH,
        status=400,
        match="MCP-Protocol-Version header does not match",
    )


@pytest.mark.parametrize("header", [None, "", "TOOLS/LIST", "tools/call", "tools/list/x"])
def test_method_header_must_match(header: str | None) -> None:
    refused(
        incoming(header), body("tools/list"), MISMATCH, status=400, match="Mcp-Method header does not match"
    )


@pytest.mark.parametrize(
    ("method", "params", "name"),
    [
        ("tools/call", {"name": "add", "arguments": {"a": 1, "b": 1}}, None),
        ("tools/call", {"name": "add", "arguments": {"a": 1, "b": 1}}, "other"),
        ("tools/call", {"name": "add", "arguments": {"a": 1, "b": 1}}, "ADD"),
        ("tools/call", {"name": "add", "arguments": {"a": 1, "b": 1}}, "=?base64?b3RoZXI=?="),  # "other"
        ("tools/call", {"name": "add", "arguments": {"a": 1, "b": 1}}, "=?base64?!!!!?="),  # malformed base64
        ("tools/call", {"name": "add", "arguments": {"a": 1, "b": 1}}, "=?base64?/w==?="),  # not UTF-8
        ("prompts/get", {"name": "greet"}, "great"),
        ("resources/read", {"uri": "x://y"}, "x://z"),
        ("resources/read", {"uri": "x://y"}, None),
    ],
)
def test_name_header_must_match(method: str, params: dict[str, Any], name: str | None) -> None:
    key = "uri" if method == "resources/read" else "name"
    refused(
        incoming(method, name),
        body(method, params),
        MISMATCH,
        status=400,
        match=f"Mcp-Name header does not match params.{key}",
    )


@pytest.mark.parametrize(
    ("method", "params", "name"),
    [
        ("tools/call", {"name": "add", "arguments": {"a": 1, "b": 1}}, "add"),
        ("tools/call", {"name": "add", "arguments": {"a": 1, "b": 1}}, "=?base64?YWRk?="),
        ("tools/call", {"name": "add", "arguments": {"a": 1, "b": 1}}, " add "),
        ("prompts/get", {"name": "grüß"}, "=?base64?" + base64.b64encode("grüß".encode()).decode() + "?="),
        ("resources/read", {"uri": "x://y"}, "x://y"),
        ("tools/call", {"arguments": {}}, None),  # no name: nothing to mirror (dispatch refuses it)
        ("tools/list", {"name": "ignored"}, None),  # Mcp-Name only for the three named methods
    ],
)
def test_name_header_matches(method: str, params: dict[str, Any], name: str | None) -> None:
    assert parse_request(agent, incoming(method, name), body(method, params)) is not None


@pytest.mark.parametrize("version", ["2099-01-01", "2025-06-18", "2026-07-28x", ""])
def test_unsupported_version(version: str) -> None:
    exc = refused(
        incoming(version=version),
        body(meta={V: version, CAPS: {}}),
        UNSUPPORTED,
        status=400,
        match="Unsupported protocol version",
    )
    assert exc.data == {"supported": [MODERN], "requested": version}


@pytest.mark.parametrize("caps", [None, [], "all", 1, True])
def test_capabilities_must_be_an_object(caps: Any) -> None:
    refused(
        incoming(), body(meta={V: MODERN, CAPS: caps}), INVALID_PARAMS, status=400, match="clientCapabilities"
    )


@pytest.mark.parametrize(
    "method",
    [
        "initialize",
        "ping",
        "logging/setLevel",
        "resources/subscribe",
        "resources/unsubscribe",
        "notifications/initialized",
        "notifications/roots/list_changed",
        "notifications/elicitation/complete",
    ],
)
def test_removed_methods_are_not_found(method: str) -> None:
    refused(
        incoming(method),
        body(method, {"level": "info"} if method == "logging/setLevel" else None),
        NOT_FOUND,
        status=404,
        match=f"{method} is not part of {MODERN}",
    )


@pytest.mark.parametrize("level", ["verbose", "INFO", 3, "", True])
def test_bad_log_level(level: Any) -> None:
    refused(
        incoming(), body(meta={**META, LEVEL: level}), INVALID_PARAMS, status=400, match="Unknown log level"
    )


@pytest.mark.parametrize("level", [[], {}, ["info"], {"level": "info"}])
def test_unhashable_log_level_is_invalid_params(level: Any) -> None:
    refused(
        incoming(), body(meta={**META, LEVEL: level}), INVALID_PARAMS, status=400, match="Unknown log level"
    )


@pytest.mark.parametrize(
    "level", ["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"]
)
def test_good_log_levels(level: str) -> None:
    request = parse_request(agent, incoming(), body(meta={**META, LEVEL: level}))
    assert request is not None and request.log_level == level


def test_null_log_level_is_absent() -> None:
    request = parse_request(agent, incoming(), body(meta={**META, LEVEL: None}))
    assert request is not None and request.log_level is None


@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({}, "needs a 'notifications' object"),
        ({"notifications": None}, "needs a 'notifications' object"),
        ({"notifications": ["toolsListChanged"]}, "needs a 'notifications' object"),
        ({"notifications": {"resourceSubscriptions": "x://y"}}, "resourceSubscriptions must be a list"),
        ({"notifications": {"resourceSubscriptions": ["x://y", 1]}}, "resourceSubscriptions must be a list"),
        (
            {"notifications": {"resourceSubscriptions": {"x://y": True}}},
            "resourceSubscriptions must be a list",
        ),
    ],
)
def test_listen_params(params: dict[str, Any], match: str) -> None:
    refused(
        incoming("subscriptions/listen"),
        body("subscriptions/listen", params),
        INVALID_PARAMS,
        status=400,
        match=match,
    )


@pytest.mark.parametrize(
    "notifications",
    [
        {},
        {"toolsListChanged": True},
        {"resourceSubscriptions": []},
        {"resourceSubscriptions": None},
        {"resourceSubscriptions": ["x://y", "x://z"], "promptsListChanged": True},
    ],
)
def test_listen_params_valid(notifications: dict[str, Any]) -> None:
    request = parse_request(
        agent,
        incoming("subscriptions/listen"),
        body("subscriptions/listen", {"notifications": notifications}, request_id=3),
    )
    assert request is not None and (request.id, request.method) == (3, "subscriptions/listen")


# --- Mcp-Param-* headers (tools/call only) ----------------------------------------------------------


def _regional(arguments: dict[str, Any]) -> dict[str, Any]:
    return body("tools/call", {"name": "regional", "arguments": arguments})


@pytest.mark.parametrize(
    ("arguments", "headers", "match"),
    [
        ({"region": "eu"}, [], "Mcp-Param-Region header is missing for argument 'region'"),
        (
            {"region": "eu"},
            [("mcp-param-region", "us")],
            "Mcp-Param-Region header does not match the argument 'region'",
        ),
        ({"region": "eu"}, [("mcp-param-region", "EU")], "does not match"),
        (
            {},
            [("mcp-param-region", "us")],
            "Mcp-Param-Region header is present but the argument 'region' is not",
        ),
        (
            {"region": "eu"},
            [("mcp-param-region", "eu"), ("mcp-param-region", "eu")],
            "appears more than once",
        ),
        ({"region": "eu"}, [("mcp-param-region", "=?base64?!!?=")], "malformed base64 value"),
        ({"region": "eu"}, [("mcp-param-region", "=?base64?dXM=?=")], "does not match"),  # "us"
    ],
)
def test_param_header_refusals(arguments: dict[str, Any], headers: list[tuple[str, str]], match: str) -> None:
    refused(
        incoming("tools/call", "regional", extra=headers),
        _regional(arguments),
        MISMATCH,
        status=400,
        match=match,
    )


@pytest.mark.parametrize(
    ("arguments", "headers"),
    [
        ({"region": "eu"}, [("mcp-param-region", "eu")]),
        ({"region": "eu", "n": 2}, [("mcp-param-region", " eu ")]),
        ({"region": "éu"}, [("mcp-param-region", "=?base64?w6l1?=")]),
    ],
)
def test_param_header_accepted(arguments: dict[str, Any], headers: list[tuple[str, str]]) -> None:
    assert (
        parse_request(agent, incoming("tools/call", "regional", extra=headers), _regional(arguments))
        is not None
    )


@pytest.mark.parametrize(
    ("arguments", "headers", "ok"),
    [
        ({"count": 3}, [("mcp-param-count", "3")], True),
        ({"count": 3}, [("mcp-param-count", "3.0")], True),
        ({"count": 3}, [("mcp-param-count", "4")], False),
        ({"count": 3}, [("mcp-param-count", "three")], False),
        ({"flag": True}, [("mcp-param-flag", "true")], True),
        ({"flag": False}, [("mcp-param-flag", "false")], True),
        ({"flag": True}, [("mcp-param-flag", "True")], False),
        ({}, [], True),
    ],
)
def test_param_header_rendering(arguments: dict[str, Any], headers: list[tuple[str, str]], ok: bool) -> None:
    inc = incoming("tools/call", "counted", extra=headers)
    message = body("tools/call", {"name": "counted", "arguments": arguments})
    if ok:
        assert parse_request(agent, inc, message) is not None
    else:
        refused(inc, message, MISMATCH, status=400, match="does not match")


def test_param_headers_ignored_for_other_tools_and_methods() -> None:
    inc = incoming("tools/call", "add", extra=[("mcp-param-region", "us")])
    assert (
        parse_request(agent, inc, body("tools/call", {"name": "add", "arguments": {"a": 1, "b": 2}}))
        is not None
    )
    inc = incoming("tools/call", "unknown", extra=[("mcp-param-region", "us")])
    assert parse_request(agent, inc, body("tools/call", {"name": "unknown"})) is not None


# --- the order of the ladder ----------------------------------------------------------------------


def test_order_repeated_header_before_meta() -> None:
    inc = incoming(extra=[("mcp-method", "tools/list")])
    refused(inc, body(meta=None), MISMATCH, status=400, match="appears more than once")


def test_order_meta_before_version_mismatch() -> None:
    refused(incoming(version="2099-01-01"), body(meta=None), INVALID_PARAMS, status=400)
    refused(
        incoming(version="2099-01-01"),
        body(meta={V: MODERN}),
        INVALID_PARAMS,
        status=400,
        match="missing the required key(s)",
    )


def test_order_version_mismatch_before_method_mismatch() -> None:
    refused(
        incoming("other", version="2099-01-01"), body(), MISMATCH, status=400, match="MCP-Protocol-Version"
    )


def test_order_method_mismatch_before_name_mismatch() -> None:
    refused(
        incoming("tools/list", "other"),
        body("tools/call", {"name": "add"}),
        MISMATCH,
        status=400,
        match="Mcp-Method",
    )


def test_order_name_mismatch_before_unsupported_version() -> None:
    refused(
        incoming("tools/call", "other", version="2099-01-01"),
        body("tools/call", {"name": "add"}, meta={V: "2099-01-01", CAPS: {}}),
        MISMATCH,
        status=400,
        match="Mcp-Name",
    )


def test_order_unsupported_version_before_param_headers_and_capabilities() -> None:
    refused(
        incoming("tools/call", "regional", version="2099-01-01"),
        body(
            "tools/call", {"name": "regional", "arguments": {"region": "eu"}}, meta={V: "2099-01-01", CAPS: 1}
        ),
        UNSUPPORTED,
        status=400,
    )


def test_order_param_headers_before_capabilities() -> None:
    refused(
        incoming("tools/call", "regional"),
        body("tools/call", {"name": "regional", "arguments": {"region": "eu"}}, meta={V: MODERN, CAPS: 1}),
        MISMATCH,
        status=400,
        match="Mcp-Param-Region",
    )


def test_order_capabilities_before_removed_method() -> None:
    refused(
        incoming("initialize"),
        body("initialize", meta={V: MODERN, CAPS: []}),
        INVALID_PARAMS,
        status=400,
        match="clientCapabilities",
    )


def test_order_removed_method_before_log_level() -> None:
    refused(incoming("ping"), body("ping", meta={**META, LEVEL: "loud"}), NOT_FOUND, status=404)


def test_order_log_level_before_listen_params() -> None:
    refused(
        incoming("subscriptions/listen"),
        body("subscriptions/listen", meta={**META, LEVEL: "loud"}),
        INVALID_PARAMS,
        status=400,
        match="Unknown log level",
    )


def test_error_keeps_a_string_id() -> None:
    refused(
        incoming("tools/list"),
        body(meta=None, request_id="abc"),
        INVALID_PARAMS,
        status=400,
        request_id="abc",
    )
    refused(incoming("tools/list"), body(meta=None, request_id=0), INVALID_PARAMS, status=400, request_id=0)


# --- notifications --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "method", ["notifications/progress", "notifications/cancelled", "notifications/whatever"]
)
def test_notification_accepted(method: str) -> None:
    assert parse_request(agent, incoming(method), {"jsonrpc": "2.0", "method": method}) is None
    # no _meta needed, and the method header is not checked for a notification
    assert (
        parse_request(agent, incoming(None), {"jsonrpc": "2.0", "method": method, "params": {"x": 1}}) is None
    )


@pytest.mark.parametrize(
    "method",
    [
        "notifications/initialized",
        "notifications/roots/list_changed",
        "notifications/elicitation/complete",
        "ping",
    ],
)
def test_removed_notification_refused(method: str) -> None:
    refused(
        incoming(method),
        {"jsonrpc": "2.0", "method": method},
        NOT_FOUND,
        status=404,
        request_id=None,
        match="is not part of",
    )


@pytest.mark.parametrize("version", [None, "2099-01-01", "2025-06-18"])
def test_notification_with_unsupported_version(version: str | None) -> None:
    exc = refused(
        incoming("notifications/progress", version=version),
        {"jsonrpc": "2.0", "method": "notifications/progress"},
        UNSUPPORTED,
        status=400,
        request_id=None,
    )
    assert exc.data == {"supported": [MODERN], "requested": version or ""}


def test_notification_with_bad_params() -> None:
    refused(
        incoming("notifications/progress"),
        {"jsonrpc": "2.0", "method": "notifications/progress", "params": [1]},
        INVALID_REQUEST,
        status=400,
        request_id=None,
    )


# --- decode_header --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, None),
        ("plain", "plain"),
        ("  padded \t", "padded"),
        ("", ""),
        ("=?base64?cmVnaW9uYWw=?=", "regional"),
        ("  =?base64?w6l1?=  ", "éu"),
        ("=?base64??=", ""),
        ("=?base64?cmVnaW9uYWw?=", None),  # missing padding: not valid base64
        ("=?base64?!!!?=", None),
        ("=?base64?/w==?=", None),  # 0xff is not UTF-8
        ("=?base64?abc", "=?base64?abc"),  # not the wrapping: taken literally
        ("=?other?eA==?=", "=?other?eA==?="),
        ("=?", "=?"),
    ],
)
def test_decode_header(value: str | None, expected: str | None) -> None:
    assert decode_header(value) == expected
