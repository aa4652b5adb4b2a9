"""a2a/wire.py, function by function: the checks of a 1.0 message, the 0.3 <-> 1.0 conversions, the error
shapes of both bindings. Written from the survivors of a mutation run (docs/testing.md): every expected
value is exact, and the error messages are asserted word for word, since they are what a client reads
(A2A answers -32602 "naming what is wrong")."""

from __future__ import annotations

import re
import time
import uuid
from typing import Any

import pytest

from agentmw._transport import ProtocolError
from agentmw.a2a import wire
from agentmw.a2a.wire import (
    A2AError,
    agent_message,
    artifact_to_v03,
    artifact_to_wire,
    event_to_v03,
    message_from_v03,
    message_from_wire,
    message_to_v03,
    message_to_wire,
    new_id,
    now_iso,
    part_from_v03,
    part_to_v03,
    parts_from_outcome,
    parts_to_wire,
    status_to_v03,
    task_to_v03,
    validate_message,
)
from agentmw.content import Audio, EmbeddedResource, Image, ResourceLink, Text
from agentmw.messages import Artifact, Data, File, Message

TERMINAL = frozenset(
    {"TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED", "TASK_STATE_REJECTED"}
)


def refused(call: Any, *args: Any) -> str:
    with pytest.raises(A2AError) as info:
        call(*args)
    assert info.value.code == -32602
    assert info.value.status == 400
    return info.value.message


# --- error codes and shapes ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "reason", "status", "rest"),
    [
        (-32001, "TASK_NOT_FOUND", 404, "NOT_FOUND"),
        (-32002, "TASK_NOT_CANCELABLE", 400, "FAILED_PRECONDITION"),
        (-32003, "PUSH_NOTIFICATION_NOT_SUPPORTED", 400, "FAILED_PRECONDITION"),
        (-32004, "UNSUPPORTED_OPERATION", 400, "FAILED_PRECONDITION"),
        (-32005, "CONTENT_TYPE_NOT_SUPPORTED", 400, "INVALID_ARGUMENT"),
        (-32007, "EXTENDED_AGENT_CARD_NOT_CONFIGURED", 400, "FAILED_PRECONDITION"),
        (-32009, "VERSION_NOT_SUPPORTED", 400, "FAILED_PRECONDITION"),
        (-32700, "PARSE_ERROR", 400, "INVALID_ARGUMENT"),
        (-32600, "INVALID_REQUEST", 400, "INVALID_ARGUMENT"),
        (-32601, "METHOD_NOT_FOUND", 404, "NOT_FOUND"),
        (-32602, "INVALID_PARAMS", 400, "INVALID_ARGUMENT"),
        (-32603, "INTERNAL_ERROR", 500, "INTERNAL"),
    ],
)
def test_each_code_has_its_reason_status_and_rest_status(
    code: int, reason: str, status: int, rest: str
) -> None:
    error = A2AError(code, "what went wrong", {"taskId": "t1", "n": 3})
    assert (error.code, error.message, error.status) == (code, "what went wrong", status)
    assert error.reason == reason
    assert error.http_status == status
    details = [
        {
            "@type": "type.googleapis.com/google.rpc.ErrorInfo",
            "reason": reason,
            "domain": "a2a-protocol.org",
            "metadata": {"taskId": "t1", "n": "3"},
        }
    ]
    assert error.details() == details
    assert error.jsonrpc(7) == {
        "jsonrpc": "2.0",
        "id": 7,
        "error": {"code": code, "message": "what went wrong", "data": details},
    }
    assert error.body(None) == error.jsonrpc(None)
    assert error.rest() == {
        "error": {"code": status, "status": rest, "message": "what went wrong", "details": details}
    }


def test_an_unknown_code_is_a_500_unknown_error() -> None:
    error = A2AError(-1, "odd")
    assert error.status == 500
    assert error.metadata == {}
    assert error.reason == "UNKNOWN_ERROR"
    assert error.http_status == 500
    assert error.details()[0]["metadata"] == {}
    assert error.rest() == {
        "error": {"code": 500, "status": "UNKNOWN", "message": "odd", "details": error.details()}
    }


def test_http_status_falls_back_to_500_when_cleared() -> None:
    error = A2AError(-32602, "bad")
    error.status = None
    assert error.http_status == 500
    assert error.rest()["error"]["code"] == 500


def test_of_converts_a_transport_error_and_keeps_its_status() -> None:
    too_big = ProtocolError(-32600, "Request body too large (the limit is 10 bytes)", status=413)
    converted = A2AError.of(too_big)
    assert type(converted) is A2AError
    assert (converted.code, converted.message, converted.status) == (-32600, too_big.message, 413)
    plain = A2AError.of(ProtocolError(-32700, "Parse error"))
    assert (plain.code, plain.message, plain.status) == (-32700, "Parse error", 400)
    same = A2AError(-32001, "gone")
    assert A2AError.of(same) is same


def test_now_iso_is_utc_with_milliseconds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(wire, "_second", [-1, ""])
    monkeypatch.setattr(time, "time", lambda: 1_700_000_000.25)
    assert now_iso() == "2023-11-14T22:13:20.250Z"
    monkeypatch.setattr(time, "time", lambda: 1_700_000_000.9999)
    assert now_iso() == "2023-11-14T22:13:20.999Z"
    monkeypatch.setattr(time, "time", lambda: 1_700_000_001.5)
    assert now_iso() == "2023-11-14T22:13:21.500Z"  # the next second is formatted again
    assert wire._second == [1_700_000_001, "2023-11-14T22:13:21"]


def test_new_id_is_a_time_ordered_version_7_uuid() -> None:
    first, second = new_id(), new_id()
    assert uuid.UUID(first).version == 7 and str(uuid.UUID(first)) == first
    assert first < second


# --- validate_message ------------------------------------------------------------------------------------

GOOD = {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}


def test_a_valid_message_is_returned_as_it_is() -> None:
    message = {
        **GOOD,
        "role": "ROLE_AGENT",
        "taskId": "t",
        "contextId": "c",
        "metadata": {"k": 1},
        "parts": [{"text": "a"}, {"raw": "AA=="}, {"url": "https://x"}, {"data": {"k": [1]}}, {"data": None}],
    }
    assert validate_message(message) is message


@pytest.mark.parametrize(
    ("message", "error"),
    [
        (None, "params.message must be an object"),
        ([GOOD], "params.message must be an object"),
        ({**GOOD, "messageId": None}, "message.messageId is required"),
        ({**GOOD, "messageId": 5}, "message.messageId is required"),
        ({**GOOD, "messageId": ""}, "message.messageId is required"),
        ({"role": "ROLE_USER", "parts": [{"text": "x"}]}, "message.messageId is required"),
        ({**GOOD, "role": "user"}, "message.role must be ROLE_USER or ROLE_AGENT"),
        ({**GOOD, "role": None}, "message.role must be ROLE_USER or ROLE_AGENT"),
        ({**GOOD, "role": "ROLE_UNSPECIFIED"}, "message.role must be ROLE_USER or ROLE_AGENT"),
        ({**GOOD, "parts": []}, "message.parts must hold at least one part"),
        ({**GOOD, "parts": {"text": "x"}}, "message.parts must hold at least one part"),
        ({"messageId": "m", "role": "ROLE_USER"}, "message.parts must hold at least one part"),
        ({**GOOD, "parts": [{"text": "x"}, "y"]}, "message.parts[1] must be an object"),
        ({**GOOD, "parts": [{}]}, "message.parts[0] must have exactly one of text, raw, url, data"),
        (
            {**GOOD, "parts": [{"text": "a", "raw": "AA=="}]},
            "message.parts[0] must have exactly one of text, raw, url, data",
        ),
        (
            {**GOOD, "parts": [{"text": "a"}, {"url": "u", "data": {}}]},
            "message.parts[1] must have exactly one of text, raw, url, data",
        ),
        (
            {**GOOD, "parts": [{"mediaType": "text/plain"}]},
            "message.parts[0] must have exactly one of text, raw, url, data",
        ),
        ({**GOOD, "parts": [{"text": 1}]}, "message.parts[0].text must be a string"),
        ({**GOOD, "parts": [{"text": "a"}, {"raw": b"x"}]}, "message.parts[1].raw must be a string"),
        ({**GOOD, "parts": [{"url": None}]}, "message.parts[0].url must be a string"),
        ({**GOOD, "taskId": 1}, "message.taskId must be a string"),
        ({**GOOD, "taskId": None}, "message.taskId must be a string"),
        ({**GOOD, "contextId": ["c"]}, "message.contextId must be a string"),
        ({**GOOD, "metadata": []}, "message.metadata must be an object"),
        ({**GOOD, "metadata": None}, "message.metadata must be an object"),
    ],
)
def test_validate_message_names_what_is_wrong(message: Any, error: str) -> None:
    assert refused(validate_message, message) == error


# --- message_from_wire -----------------------------------------------------------------------------------


def test_message_from_wire_reads_every_part_and_field() -> None:
    message = message_from_wire(
        {
            "messageId": "m1",
            "role": "ROLE_USER",
            "taskId": "t1",
            "contextId": "c1",
            "metadata": {"k": "v"},
            "referenceTaskIds": ["t0", 5, "t9"],
            "extensions": ["https://ext", None],
            "parts": [
                {"text": "hello", "metadata": {"ignored": True}},
                {"data": {"a": 1}, "mediaType": "application/vnd.x+json", "metadata": {"m": 1}},
                {"data": [1], "mediaType": "", "metadata": "no"},
                {
                    "url": "https://x/f.pdf",
                    "filename": "f.pdf",
                    "mediaType": "application/pdf",
                    "metadata": {"u": 1},
                },
                {"url": "https://x/g", "filename": "", "mediaType": 5},
                {"raw": "aGk=", "filename": "hi.txt", "mediaType": "text/plain", "metadata": {"n": 2}},
                {"raw": "aGk", "filename": 3},
            ],
        }
    )
    assert message == Message(
        (
            Text("hello"),
            Data({"a": 1}, "application/vnd.x+json", {"m": 1}),
            Data([1], None, None),
            File(url="https://x/f.pdf", name="f.pdf", media_type="application/pdf", metadata={"u": 1}),
            File(url="https://x/g"),
            File(data=b"hi", name="hi.txt", media_type="text/plain", metadata={"n": 2}),
            File(data=b"hi"),
        ),
        "user",
        "m1",
        "t1",
        "c1",
        {"k": "v"},
        ("t0", "t9"),
        ("https://ext",),
    )


def test_message_from_wire_defaults() -> None:
    message = message_from_wire(
        {
            "messageId": "m2",
            "role": "ROLE_AGENT",
            "parts": [{"text": ""}],
            "referenceTaskIds": "t0",
            "extensions": {"x": 1},
        }
    )
    assert message == Message((Text(""),), "agent", "m2", None, None, {}, (), ())
    assert message_from_wire({"messageId": "m", "parts": [{"text": "x"}]}).role == "agent"


def test_message_from_wire_refuses_raw_that_is_not_base64() -> None:
    assert (
        refused(
            message_from_wire,
            {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "a"}, {"raw": "!!not base64!!"}]},
        )
        == "message.parts[1].raw must be base64"
    )


# --- 1.0 writers -----------------------------------------------------------------------------------------


def test_parts_to_wire_writes_every_kind() -> None:
    parts = [
        Text("t"),
        Data({"x": 1}),
        Data([2], "application/vnd.y", {"m": 1}),
        File(url="https://u", name="u.txt", media_type="text/plain", metadata={"k": 1}),
        File(data=b"hi"),
        File(data=b"hi", name="", media_type=""),
    ]
    assert parts_to_wire(parts) == [
        {"text": "t"},
        {"data": {"x": 1}, "mediaType": "application/json"},
        {"data": [2], "mediaType": "application/vnd.y", "metadata": {"m": 1}},
        {"url": "https://u", "filename": "u.txt", "mediaType": "text/plain", "metadata": {"k": 1}},
        {"raw": "aGk="},
        {"raw": "aGk="},
    ]
    assert parts_to_wire([]) == []


def test_message_to_wire_keeps_ids_and_optional_fields() -> None:
    message = Message(
        (Text("x"),),
        "agent",
        "mine",
        metadata={"a": 1},
        reference_task_ids=("t0",),
        extensions=("https://e",),
    )
    assert message_to_wire(message, "t1", "c1") == {
        "messageId": "mine",
        "role": "ROLE_AGENT",
        "parts": [{"text": "x"}],
        "taskId": "t1",
        "contextId": "c1",
        "metadata": {"a": 1},
        "referenceTaskIds": ["t0"],
        "extensions": ["https://e"],
    }
    bare = message_to_wire(Message((Text("y"),)), None, None)
    assert set(bare) == {"messageId", "role", "parts"}
    assert uuid.UUID(bare["messageId"]).version == 7
    assert bare["role"] == "ROLE_AGENT" and bare["parts"] == [{"text": "y"}]
    only_context = message_to_wire(Message((Text("y"),), message_id="m"), None, "c")
    assert only_context == {
        "messageId": "m",
        "role": "ROLE_AGENT",
        "parts": [{"text": "y"}],
        "contextId": "c",
    }


def test_artifact_to_wire() -> None:
    full = Artifact((Text("a"),), name="n", description="d", metadata={"k": 1}, artifact_id="a1")
    assert artifact_to_wire(full) == {
        "artifactId": "a1",
        "parts": [{"text": "a"}],
        "name": "n",
        "description": "d",
        "metadata": {"k": 1},
    }
    bare = Artifact((Text("a"),), artifact_id="a2")
    assert artifact_to_wire(bare) == {"artifactId": "a2", "parts": [{"text": "a"}]}


def test_agent_message() -> None:
    out = agent_message("t", "c", [{"text": "x"}])
    assert uuid.UUID(out["messageId"]).version == 7
    assert {k: v for k, v in out.items() if k != "messageId"} == {
        "role": "ROLE_AGENT",
        "taskId": "t",
        "contextId": "c",
        "parts": [{"text": "x"}],
    }


def test_parts_from_outcome() -> None:
    assert parts_from_outcome("ignored", [Text("x")], {"k": 1}) == [
        {"data": {"k": 1}, "mediaType": "application/json"}
    ]
    assert parts_from_outcome(None, [], None) == [{"text": ""}]
    content = [
        Text("hello"),
        Image(b"\x89PNG", "image/png"),
        Audio("AAAA", "audio/ogg"),
        ResourceLink("https://r/x", "x.txt", "text/plain"),
        ResourceLink("https://r/y", "y"),
        EmbeddedResource("res://a", blob=b"\x00\x01", mime_type="application/x-bin"),
        EmbeddedResource("res://b", blob="AAE="),
        EmbeddedResource("res://c", text="body", mime_type="text/markdown"),
        EmbeddedResource("res://d"),
    ]
    assert parts_from_outcome(None, content, None) == [
        {"text": "hello"},
        {"raw": "iVBORw==", "mediaType": "image/png"},
        {"raw": "AAAA", "mediaType": "audio/ogg"},
        {"url": "https://r/x", "filename": "x.txt", "mediaType": "text/plain"},
        {"url": "https://r/y", "filename": "y"},
        {"raw": "AAE=", "mediaType": "application/x-bin"},
        {"raw": "AAE=", "mediaType": "application/octet-stream"},
        {"text": "body", "mediaType": "text/markdown"},
        {"text": "", "mediaType": "text/plain"},
    ]


# --- 0.3 in ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("part", "expected"),
    [
        ({"kind": "text", "text": "hi"}, {"text": "hi"}),
        ({"kind": "text", "text": ""}, {"text": ""}),
        ({"kind": "text", "text": "hi", "metadata": {"m": 1}}, {"text": "hi", "metadata": {"m": 1}}),
        ({"kind": "text", "text": "hi", "metadata": "no"}, {"text": "hi"}),
        ({"kind": "data", "data": {"k": [1]}}, {"data": {"k": [1]}}),
        ({"kind": "data", "data": None}, {"data": None}),
        ({"kind": "file", "file": {"bytes": "aGk="}}, {"raw": "aGk="}),
        ({"kind": "file", "file": {"bytes": "aGk=", "uri": "https://ignored"}}, {"raw": "aGk="}),
        ({"kind": "file", "file": {"bytes": 5, "uri": "https://u"}}, {"url": "https://u"}),
        (
            {
                "kind": "file",
                "file": {"uri": "https://u", "mimeType": "text/plain", "name": "u.txt"},
                "metadata": {"a": 1},
            },
            {"url": "https://u", "mediaType": "text/plain", "filename": "u.txt", "metadata": {"a": 1}},
        ),
        ({"kind": "file", "file": {"bytes": "aGk=", "mimeType": "", "name": ""}}, {"raw": "aGk="}),
    ],
)
def test_part_from_v03(part: dict[str, Any], expected: dict[str, Any]) -> None:
    assert part_from_v03(part, 0) == expected


@pytest.mark.parametrize(
    ("part", "error"),
    [
        ("text", "message.parts[3] must be an object"),
        (None, "message.parts[3] must be an object"),
        ({"text": "no kind"}, "message.parts[3] is not a valid 0.3 part"),
        ({"kind": "text"}, "message.parts[3] is not a valid 0.3 part"),
        ({"kind": "text", "text": 1}, "message.parts[3] is not a valid 0.3 part"),
        ({"kind": "data"}, "message.parts[3] is not a valid 0.3 part"),
        ({"kind": "file"}, "message.parts[3] is not a valid 0.3 part"),
        ({"kind": "file", "file": "https://u"}, "message.parts[3] is not a valid 0.3 part"),
        ({"kind": "image", "text": "x"}, "message.parts[3] is not a valid 0.3 part"),
        ({"kind": "file", "file": {}}, "message.parts[3].file needs bytes or uri"),
        ({"kind": "file", "file": {"bytes": 1, "uri": 2}}, "message.parts[3].file needs bytes or uri"),
    ],
)
def test_part_from_v03_refusals(part: Any, error: str) -> None:
    assert refused(part_from_v03, part, 3) == error


def test_message_from_v03_converts_and_validates() -> None:
    message = {
        "kind": "message",
        "messageId": "m1",
        "role": "user",
        "taskId": "t1",
        "contextId": "c1",
        "metadata": {"k": 1},
        "extra": "dropped",
        "parts": [{"kind": "text", "text": "hi"}, {"kind": "data", "data": {"x": 1}}],
    }
    assert message_from_v03(message) == {
        "messageId": "m1",
        "role": "ROLE_USER",
        "taskId": "t1",
        "contextId": "c1",
        "metadata": {"k": 1},
        "parts": [{"text": "hi"}, {"data": {"x": 1}}],
    }
    agent = message_from_v03({"messageId": "m2", "role": "agent", "parts": [{"kind": "text", "text": "x"}]})
    assert agent == {"messageId": "m2", "role": "ROLE_AGENT", "parts": [{"text": "x"}]}


@pytest.mark.parametrize(
    ("message", "error"),
    [
        ("m", "params.message must be an object"),
        (None, "params.message must be an object"),
        (
            {"messageId": "m", "parts": [{"kind": "text", "text": "x"}]},
            "message.role must be 'user' or 'agent'",
        ),
        (
            {"messageId": "m", "role": "ROLE_USER", "parts": [{"kind": "text", "text": "x"}]},
            "message.role must be 'user' or 'agent'",
        ),
        (
            {"messageId": "m", "role": ["user"], "parts": [{"kind": "text", "text": "x"}]},
            "message.role must be 'user' or 'agent'",
        ),
        ({"messageId": "m", "role": "user", "parts": []}, "message.parts must hold at least one part"),
        (
            {"messageId": "m", "role": "user", "parts": {"kind": "text"}},
            "message.parts must hold at least one part",
        ),
        ({"messageId": "m", "role": "user"}, "message.parts must hold at least one part"),
        (
            {"messageId": "m", "role": "user", "parts": [{"kind": "text", "text": "x"}, {"kind": "nope"}]},
            "message.parts[1] is not a valid 0.3 part",
        ),
        ({"role": "user", "parts": [{"kind": "text", "text": "x"}]}, "message.messageId is required"),
        (
            {"messageId": "m", "role": "user", "taskId": 3, "parts": [{"kind": "text", "text": "x"}]},
            "message.taskId must be a string",
        ),
        (
            {"messageId": "m", "role": "user", "metadata": [], "parts": [{"kind": "text", "text": "x"}]},
            "message.metadata must be an object",
        ),
    ],
)
def test_message_from_v03_refusals(message: Any, error: str) -> None:
    assert refused(message_from_v03, message) == error


# --- 0.3 out ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("part", "expected"),
    [
        ({"text": "hi"}, {"kind": "text", "text": "hi"}),
        ({"text": "hi", "metadata": {"m": 1}}, {"kind": "text", "text": "hi", "metadata": {"m": 1}}),
        ({"text": "hi", "metadata": {}}, {"kind": "text", "text": "hi"}),
        ({"data": {"a": 1}, "mediaType": "application/json"}, {"kind": "data", "data": {"a": 1}}),
        ({"raw": "aGk="}, {"kind": "file", "file": {"bytes": "aGk="}}),
        (
            {"raw": "aGk=", "mediaType": "text/plain", "filename": "hi.txt"},
            {"kind": "file", "file": {"bytes": "aGk=", "mimeType": "text/plain", "name": "hi.txt"}},
        ),
        (
            {"url": "https://u", "mediaType": "", "filename": ""},
            {"kind": "file", "file": {"uri": "https://u"}},
        ),
        ({"url": "https://u", "filename": "u"}, {"kind": "file", "file": {"uri": "https://u", "name": "u"}}),
    ],
)
def test_part_to_v03(part: dict[str, Any], expected: dict[str, Any]) -> None:
    assert part_to_v03(part) == expected


MESSAGE = {
    "messageId": "m1",
    "role": "ROLE_AGENT",
    "taskId": "t1",
    "contextId": "c1",
    "metadata": {"k": 1},
    "referenceTaskIds": ["t0"],
    "parts": [{"text": "x"}],
}
MESSAGE_V03 = {
    "kind": "message",
    "messageId": "m1",
    "role": "agent",
    "parts": [{"kind": "text", "text": "x"}],
    "taskId": "t1",
    "contextId": "c1",
    "metadata": {"k": 1},
}


def test_message_to_v03() -> None:
    assert message_to_v03(MESSAGE) == MESSAGE_V03
    assert message_to_v03({"messageId": "m", "role": "ROLE_USER", "parts": [{"data": 1}]}) == {
        "kind": "message",
        "messageId": "m",
        "role": "user",
        "parts": [{"kind": "data", "data": 1}],
    }


@pytest.mark.parametrize(
    ("state", "v03"),
    [
        ("TASK_STATE_SUBMITTED", "submitted"),
        ("TASK_STATE_WORKING", "working"),
        ("TASK_STATE_INPUT_REQUIRED", "input-required"),
        ("TASK_STATE_AUTH_REQUIRED", "auth-required"),
        ("TASK_STATE_COMPLETED", "completed"),
        ("TASK_STATE_CANCELED", "canceled"),
        ("TASK_STATE_FAILED", "failed"),
        ("TASK_STATE_REJECTED", "rejected"),
        ("TASK_STATE_UNSPECIFIED", "unknown"),
    ],
)
def test_status_to_v03_states(state: str, v03: str) -> None:
    assert status_to_v03({"state": state}) == {"state": v03}


def test_status_to_v03_message_and_timestamp() -> None:
    status = {"state": "TASK_STATE_WORKING", "message": MESSAGE, "timestamp": "2024-01-01T00:00:00.000Z"}
    assert status_to_v03(status) == {
        "state": "working",
        "message": MESSAGE_V03,
        "timestamp": "2024-01-01T00:00:00.000Z",
    }
    assert status_to_v03({"state": "TASK_STATE_WORKING", "message": None, "timestamp": ""}) == {
        "state": "working"
    }


def test_artifact_to_v03_keeps_every_other_field() -> None:
    artifact = {
        "artifactId": "a1",
        "name": "n",
        "description": "d",
        "metadata": {"k": 1},
        "parts": [{"text": "a"}, {"raw": "aGk="}],
    }
    assert artifact_to_v03(artifact) == {
        "artifactId": "a1",
        "name": "n",
        "description": "d",
        "metadata": {"k": 1},
        "parts": [{"kind": "text", "text": "a"}, {"kind": "file", "file": {"bytes": "aGk="}}],
    }
    assert artifact["parts"][0] == {"text": "a"}  # the 1.0 artifact is not changed


def test_task_to_v03() -> None:
    task = {
        "id": "t1",
        "contextId": "c1",
        "status": {"state": "TASK_STATE_COMPLETED"},
        "history": [MESSAGE],
        "artifacts": [{"artifactId": "a1", "parts": [{"text": "a"}]}],
        "metadata": {"m": 1},
    }
    assert task_to_v03(task) == {
        "kind": "task",
        "id": "t1",
        "contextId": "c1",
        "status": {"state": "completed"},
        "history": [MESSAGE_V03],
        "artifacts": [{"artifactId": "a1", "parts": [{"kind": "text", "text": "a"}]}],
        "metadata": {"m": 1},
    }
    bare = {
        "id": "t2",
        "contextId": "c2",
        "status": {"state": "TASK_STATE_SUBMITTED"},
        "artifacts": [],
        "metadata": {},
    }
    assert task_to_v03(bare) == {
        "kind": "task",
        "id": "t2",
        "contextId": "c2",
        "status": {"state": "submitted"},
    }
    empty_history = {**bare, "history": []}
    assert task_to_v03(empty_history)["history"] == []


def test_event_to_v03_every_kind() -> None:
    task = {"id": "t1", "contextId": "c1", "status": {"state": "TASK_STATE_WORKING"}}
    assert event_to_v03({"task": task}, TERMINAL) == task_to_v03(task)
    assert event_to_v03({"message": MESSAGE}, TERMINAL) == MESSAGE_V03
    update = {"taskId": "t1", "contextId": "c1", "status": {"state": "TASK_STATE_WORKING"}}
    assert event_to_v03({"statusUpdate": update}, TERMINAL) == {
        "kind": "status-update",
        "taskId": "t1",
        "contextId": "c1",
        "status": {"state": "working"},
        "final": False,
    }
    done = {**update, "status": {"state": "TASK_STATE_COMPLETED"}}
    assert event_to_v03({"statusUpdate": done}, TERMINAL)["final"] is True
    chunk = {"taskId": "t1", "contextId": "c1", "artifact": {"artifactId": "a", "parts": [{"text": "x"}]}}
    assert event_to_v03({"artifactUpdate": chunk}, TERMINAL) == {
        "kind": "artifact-update",
        "taskId": "t1",
        "contextId": "c1",
        "artifact": {"artifactId": "a", "parts": [{"kind": "text", "text": "x"}]},
        "append": False,
        "lastChunk": True,
    }
    appended = {**chunk, "append": True, "lastChunk": False}
    out = event_to_v03({"artifactUpdate": appended}, TERMINAL)
    assert (out["append"], out["lastChunk"]) == (True, False)


def test_round_trip_through_0_3() -> None:
    message = {
        "messageId": "m1",
        "role": "ROLE_USER",
        "taskId": "t",
        "contextId": "c",
        "metadata": {"k": 1},
        "parts": [
            {"text": "a", "metadata": {"p": 1}},
            {"data": {"x": 1}},
            {"raw": "aGk=", "mediaType": "text/plain", "filename": "hi.txt"},
            {"url": "https://u"},
        ],
    }
    assert message_from_v03(message_to_v03(message)) == message


def test_v03_error_messages_follow_one_pattern() -> None:
    # the index in a part's error is the part's position, for every refusal
    for index in (0, 1, 12):
        assert re.fullmatch(rf"message\.parts\[{index}\] .*", refused(part_from_v03, {"kind": "?"}, index))


def test_new_id_is_the_millisecond_a_sequence_and_8_random_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    pool = bytes(range(256)) * 4
    monkeypatch.setattr(wire, "_tails", [])
    monkeypatch.setattr(wire, "_clock", [0, 0, ""])
    monkeypatch.setattr(wire.os, "urandom", lambda n: pool[:n])
    monkeypatch.setattr(wire.time, "time_ns", lambda: 1_700_000_000_123 * 1_000_000 + 999)
    # 1700000000123 ms is 0x18bcfe5687b; the version nibble 7, then the sequence in that millisecond; the
    # variant from the first random hex digit, then the next 15 of the pool's 8 bytes for this id
    assert new_id() == "018bcfe5-687b-7000-8001-020304050607"
    assert new_id() == "018bcfe5-687b-7001-8809-0a0b0c0d0e0f"
    assert len(wire._tails) == 62  # 64 made, 2 used
    ids = [new_id() for _ in range(100)]  # past a refill (the pool repeats): the sequence keeps them distinct
    assert ids[-1] == "018bcfe5-687b-7065-a829-2a2b2c2d2e2f"
    assert len(set(ids)) == 100 and ids == sorted(ids)
    assert all(uuid.UUID(i).version == 7 and i[19] in "89ab" for i in ids)
    wire._clock[1] = 0xFFF  # a full millisecond carries into the next one
    assert new_id().startswith("018bcfe5-687c-7000-")
