"""mcp/_state.py beyond tests/unit/test_state_sealing.py: the exact signed payload, every refusal's message
(sent to the client as the error of its retry), the expiry edge, the caller binding and which responses a
round accepts. Written from the survivors of a mutation run (docs/testing.md). ``seal_round`` is left to
test_state_sealing.py; everything here goes through ``seal``."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from types import SimpleNamespace
from typing import Any

import pytest

from agentmw.mcp import _state

SECRET = b"s" * 32
TARGET = "tools/call:book"
ARGS = {"nights": 2, "city": "Oslo"}
T0 = 1_700_000_000.25


@pytest.fixture
def frozen(monkeypatch: pytest.MonkeyPatch) -> SimpleNamespace:
    clock = SimpleNamespace(now=T0)
    monkeypatch.setattr(_state.time, "time", lambda: clock.now)
    return clock


def unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def sign(payload: Any, secret: bytes = SECRET) -> str:
    raw = payload if isinstance(payload, bytes) else json.dumps(payload, separators=(",", ":")).encode()
    mac = hmac.new(secret, raw, hashlib.sha256).digest()
    return (
        base64.urlsafe_b64encode(raw).rstrip(b"=").decode()
        + "."
        + base64.urlsafe_b64encode(mac).rstrip(b"=").decode()
    )


def digest(arguments: Any = ARGS) -> str:
    return _state.arguments_digest(arguments)


def refusal(state: Any, *, target: str = TARGET, arguments: Any = ARGS) -> str:
    with pytest.raises(ValueError) as info:
        _state.unseal(SECRET, state, target=target, digest=digest(arguments))
    return str(info.value)


# --- the pieces ------------------------------------------------------------------------------------------


def test_arguments_digest_is_the_canonical_sha256_prefix() -> None:
    assert digest() == hashlib.sha256(b'{"city":"Oslo","nights":2}').hexdigest()[:32]
    assert digest(None) == hashlib.sha256(b"null").hexdigest()[:32]
    assert _state.arguments_digest({"when": b"x"}) == hashlib.sha256(b'{"when":"b\'x\'"}').hexdigest()[:32]


def test_base64_without_padding() -> None:
    assert _state._b64(b"\xfb\xff") == "-_8"
    assert _state._unb64("-_8") == b"\xfb\xff"
    assert _state._unb64("YQ") == b"a" and _state._unb64("YWI") == b"ab" and _state._unb64("YWJj") == b"abc"


def test_caller_tag() -> None:
    assert _state.caller_tag("alice") == hashlib.sha256(b"alice").hexdigest()[:24]
    assert _state.caller_tag(None) == _state.caller_tag("") == hashlib.sha256(b"").hexdigest()[:24]


def test_seal_writes_exactly_this_payload(frozen: SimpleNamespace) -> None:
    state = _state.seal(
        SECRET,
        target=TARGET,
        digest=digest(),
        answers={"q": {"action": "accept"}},
        ttl=60.9,
        asked=["b", "a"],
        caller="alice",
    )
    body, mac = state.split(".")
    raw = unb64(body)
    assert hmac.compare_digest(unb64(mac), hmac.new(SECRET, raw, hashlib.sha256).digest())
    assert b" " not in raw  # compact
    payload = json.loads(raw)
    assert list(payload) == ["t", "d", "a", "e", "q", "c", "n"]
    assert {k: v for k, v in payload.items() if k != "n"} == {
        "t": TARGET,
        "d": digest(),
        "a": {"q": {"action": "accept"}},
        "e": int(T0 + 60.9),
        "q": ["a", "b"],
        "c": _state.caller_tag("alice"),
    }
    assert len(payload["n"]) == 16 and int(payload["n"], 16) >= 0
    default = json.loads(
        unb64(_state.seal(SECRET, target=TARGET, digest=digest(), answers={}, ttl=1).split(".")[0])
    )
    assert (default["q"], default["c"]) == ([], _state.caller_tag(None))


# --- the checks, in order, with their messages -----------------------------------------------------------


@pytest.mark.parametrize("state", [None, 5, b"a.b", "", "nodot", "a.b.c", "...", "a!.b", "YQ.b!"])
def test_malformed(state: Any) -> None:
    assert refusal(state) == "requestState is malformed"


def test_integrity(frozen: SimpleNamespace) -> None:
    good = _state.seal(SECRET, target=TARGET, digest=digest(), answers={}, ttl=60)
    body, _ = good.split(".")
    assert refusal(body + "." + _state._b64(b"\x00" * 32)) == "requestState failed its integrity check"
    assert refusal(body + ".") == "requestState failed its integrity check"
    assert (
        refusal(sign({"t": TARGET, "d": digest(), "a": {}, "e": T0 + 60}, b"other"))
        == "requestState failed its integrity check"
    )


def test_bound_to_target_and_arguments(frozen: SimpleNamespace) -> None:
    state = sign({"t": TARGET, "d": digest(), "a": {"k": 1}, "e": T0 + 60})
    assert refusal(state, target="tools/call:other") == "requestState belongs to another request"
    assert (
        refusal(state, arguments={"city": "Rome", "nights": 2}) == "requestState belongs to another request"
    )
    assert refusal(sign({"d": digest(), "a": {}, "e": T0 + 60})) == "requestState belongs to another request"
    assert refusal(sign({"t": TARGET, "a": {}, "e": T0 + 60})) == "requestState belongs to another request"
    assert _state.unseal(SECRET, state, target=TARGET, digest=digest()) == {"k": 1}


def test_expiry_edge(frozen: SimpleNamespace) -> None:
    state = sign({"t": TARGET, "d": digest(), "a": {"k": 1}, "e": T0})
    assert _state.unseal(SECRET, state, target=TARGET, digest=digest()) == {"k": 1}  # at the second itself
    frozen.now = T0 + 0.001
    assert refusal(state) == "requestState has expired; start the request again"
    assert (
        refusal(sign({"t": TARGET, "d": digest(), "a": {}}))
        == "requestState has expired; start the request again"
    )


@pytest.mark.parametrize("answers", [None, [1], "x", 3])
def test_answers_that_are_not_an_object_are_none(frozen: SimpleNamespace, answers: Any) -> None:
    state = sign({"t": TARGET, "d": digest(), "a": answers, "e": T0 + 60})
    assert _state.unseal(SECRET, state, target=TARGET, digest=digest()) == {}


# --- open_round ------------------------------------------------------------------------------------------


class Agent(SimpleNamespace):
    def find_resource(self, uri: str) -> Any:
        self.looked_up.append(uri)
        return (object(), {"path": uri[8:]}) if uri.startswith("files://") else None


def agent() -> Agent:
    return Agent(secret=SECRET, looked_up=[])


def round_state(
    answers: Any = None,
    *,
    asked: Any = (),
    caller: str | None = None,
    arguments: Any = ARGS,
    target: str = TARGET,
) -> str:
    return _state.seal(
        SECRET,
        target=target,
        digest=digest(arguments),
        answers=answers or {},
        ttl=60,
        asked=asked,
        caller=caller,
    )


def test_open_round_adds_only_the_responses_that_were_asked() -> None:
    state = round_state({"first": 1}, asked=["q1", "q2"])
    params = {"arguments": ARGS, "requestState": state}
    assert _state.open_round(agent(), "tools/call", params, TARGET, responses={"q1": "yes", "q3": "no"}) == {
        "first": 1,
        "q1": "yes",
    }
    assert _state.open_round(agent(), "tools/call", params, TARGET, responses={}) == {"first": 1}
    assert _state.open_round(agent(), "tools/call", params, TARGET) == {"first": 1}


def test_open_round_ignores_responses_when_nothing_was_asked(frozen: SimpleNamespace) -> None:
    state = sign(
        {"t": TARGET, "d": digest(), "a": {"first": 1}, "e": T0 + 60, "q": "q1", "c": _state.caller_tag(None)}
    )
    assert _state.open_round(
        agent(), "tools/call", {"arguments": ARGS, "requestState": state}, TARGET, responses={"q1": "yes"}
    ) == {"first": 1}
    no_answers = sign({"t": TARGET, "d": digest(), "a": ["x"], "e": T0 + 60, "q": ["q1"]})
    assert _state.open_round(
        agent(),
        "tools/call",
        {"arguments": ARGS, "requestState": no_answers},
        TARGET,
        responses={"q1": "yes"},
    ) == {"q1": "yes"}


def test_open_round_is_bound_to_its_caller() -> None:
    state = round_state({"a": 1}, caller="alice")
    params = {"arguments": ARGS, "requestState": state}
    assert _state.open_round(agent(), "tools/call", params, TARGET, caller="alice") == {"a": 1}
    assert _state.open_round(agent(), "tools/call", params, TARGET) == {
        "a": 1
    }  # no caller given: not checked
    with pytest.raises(ValueError) as info:
        _state.open_round(agent(), "tools/call", params, TARGET, caller="bob")
    assert str(info.value) == "requestState was issued to another caller"
    anonymous = round_state({"a": 1})
    with pytest.raises(ValueError) as info:
        _state.open_round(
            agent(), "tools/call", {"arguments": ARGS, "requestState": anonymous}, TARGET, caller="bob"
        )
    assert str(info.value) == "requestState was issued to another caller"


def test_open_round_for_resources_binds_the_uri_variables() -> None:
    a = agent()
    target = "resources/read:files://a.txt"
    state = round_state({"k": 1}, arguments={"path": "a.txt"}, target=target)
    assert _state.open_round(
        a,
        "resources/read",
        {"uri": "files://a.txt", "requestState": state, "arguments": {"ignored": True}},
        target,
    ) == {"k": 1}
    assert a.looked_up == ["files://a.txt"]
    unknown = round_state({"k": 2}, arguments=None, target="resources/read:")
    assert _state.open_round(a, "resources/read", {"requestState": unknown}, "resources/read:") == {"k": 2}
    assert a.looked_up[-1] == ""
    tool_state = round_state({"k": 3}, arguments=None)
    assert _state.open_round(a, "tools/call", {"requestState": tool_state}, TARGET) == {"k": 3}


# --- expiry (unchecked, for the used-state table) --------------------------------------------------------


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        ({"e": 123}, 123.0),
        ({"e": 1.5}, 1.5),
        ({"e": True}, None),
        ({"e": "123"}, None),
        ({}, None),
        ([1], None),
    ],
)
def test_expiry_reads_the_claim(payload: Any, expected: float | None) -> None:
    value = _state.expiry(sign(payload, b"any secret"))
    assert value == expected and type(value) is type(expected)


@pytest.mark.parametrize("state", [None, 1, "", "a", "a.b.c", "!!.x", sign(b"not json")])
def test_expiry_of_malformed_is_none(state: Any) -> None:
    assert _state.expiry(state) is None


def test_base64_keeps_a_trailing_x() -> None:
    assert _state._b64(b"\x00\x00\x17") == "AAAX"
    assert _state._unb64("AAAX") == b"\x00\x00\x17"


def test_answers_that_are_not_json_are_sealed_as_text(frozen: SimpleNamespace) -> None:
    import datetime

    state = _state.seal(
        SECRET,
        target=TARGET,
        digest=digest(),
        ttl=60,
        answers={"when": datetime.date(2024, 1, 2), "raw": b"x"},
    )
    assert _state.unseal(SECRET, state, target=TARGET, digest=digest()) == {
        "when": "2024-01-02",
        "raw": "b'x'",
    }
