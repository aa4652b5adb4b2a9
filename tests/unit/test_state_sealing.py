"""Unit tests of ``requestState`` sealing (``agentmw.mcp._state``): signed, bound to one call, expiring."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from types import SimpleNamespace
from typing import Any

import pytest

from agentmw.mcp import _state
from agentmw.settings import Timing

SECRET = b"k" * 32
TARGET = "tools/call:book"
ARGS = {"city": "Oslo", "nights": 2}


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def sealed(
    answers: dict[str, Any] | None = None,
    *,
    target: str = TARGET,
    arguments: Any = ARGS,
    ttl: float = 60,
    secret: bytes = SECRET,
) -> str:
    return _state.seal(
        secret,
        target=target,
        digest=_state.arguments_digest(arguments),
        answers={"q": {"action": "accept"}} if answers is None else answers,
        ttl=ttl,
    )


def opened(
    state: Any, *, target: str = TARGET, arguments: Any = ARGS, secret: bytes = SECRET
) -> dict[str, Any]:
    return _state.unseal(secret, state, target=target, digest=_state.arguments_digest(arguments))


def resign(payload: dict[str, Any], secret: bytes = SECRET) -> str:
    raw = json.dumps(payload, separators=(",", ":")).encode()
    return f"{b64(raw)}.{b64(hmac.new(secret, raw, hashlib.sha256).digest())}"


def payload_of(state: str) -> dict[str, Any]:
    return json.loads(unb64(state.split(".")[0]))


# --- the round trip -------------------------------------------------------------------------------


def test_round_trip() -> None:
    answers = {"confirm-1": {"action": "accept", "content": {"approved": True}}, "ask-2": "text é"}
    state = sealed(answers)
    assert isinstance(state, str) and state.count(".") == 1
    assert all(c.isalnum() or c in "-_." for c in state)  # URL-safe, unpadded
    assert opened(state) == answers


def test_each_seal_is_unique() -> None:
    assert sealed() != sealed()
    assert payload_of(sealed())["n"] != payload_of(sealed())["n"]


def test_empty_answers_round_trip() -> None:
    assert opened(sealed({})) == {}


def test_arguments_digest_is_canonical() -> None:
    assert _state.arguments_digest({"a": 1, "b": 2}) == _state.arguments_digest({"b": 2, "a": 1})
    assert _state.arguments_digest({"a": 1}) != _state.arguments_digest({"a": 2})
    assert _state.arguments_digest(None) != _state.arguments_digest({})
    assert len(_state.arguments_digest(ARGS)) == 32
    assert opened(sealed(arguments={"nights": 2, "city": "Oslo"})) == {"q": {"action": "accept"}}


def test_non_dict_answers_open_as_empty() -> None:
    state = resign({"t": TARGET, "d": _state.arguments_digest(ARGS), "a": ["x"], "e": int(time.time()) + 60})
    assert opened(state) == {}


# --- refusals -------------------------------------------------------------------------------------


def refusal(state: Any, **kwargs: Any) -> str:
    with pytest.raises(ValueError) as info:
        opened(state, **kwargs)
    return str(info.value)


def test_wrong_mac_on_a_well_formed_state() -> None:
    state = sealed()
    body, mac = state.split(".")
    flipped = bytes([unb64(mac)[0] ^ 1]) + unb64(mac)[1:]
    assert "integrity" in refusal(f"{body}.{b64(flipped)}")
    assert "integrity" in refusal(f"{body}.{b64(b'x' * 32)}")
    assert "integrity" in refusal(f"{body}.")  # an empty MAC


def test_tampered_payload_keeps_no_mac() -> None:
    state = sealed({"q": "no"})
    data = payload_of(state)
    data["a"] = {"q": "yes"}
    forged = f"{b64(json.dumps(data, separators=(',', ':')).encode())}.{state.split('.')[1]}"
    assert "integrity" in refusal(forged)


def test_another_secret_is_refused() -> None:
    assert "integrity" in refusal(sealed(secret=b"other-secret"))
    assert "integrity" in refusal(sealed(), secret=b"other-secret")
    forged = resign(
        {"t": TARGET, "d": _state.arguments_digest(ARGS), "a": {"q": 1}, "e": int(time.time()) + 60},
        secret=b"guess",
    )
    assert "integrity" in refusal(forged)


def test_expired_is_refused() -> None:
    assert "expired" in refusal(sealed(ttl=-5))


def test_expiry_with_the_clock_moved(monkeypatch: pytest.MonkeyPatch) -> None:
    now = time.time()
    state = sealed(ttl=30)
    monkeypatch.setattr(_state.time, "time", lambda: now + 20)
    assert opened(state) == {"q": {"action": "accept"}}
    monkeypatch.setattr(_state.time, "time", lambda: now + 32)
    assert "expired" in refusal(state)


def test_missing_expiry_is_expired() -> None:
    state = resign({"t": TARGET, "d": _state.arguments_digest(ARGS), "a": {}})
    assert "expired" in refusal(state)


def test_other_target_is_refused() -> None:
    assert "another request" in refusal(sealed(), target="tools/call:cancel")
    assert "another request" in refusal(sealed(target="prompts/get:book"))


@pytest.mark.parametrize(
    "arguments",
    [{"city": "Oslo", "nights": 3}, {"city": "Oslo"}, {}, None, {"city": "Oslo", "nights": 2, "extra": 1}],
)
def test_other_arguments_are_refused(arguments: Any) -> None:
    assert "another request" in refusal(sealed(), arguments=arguments)


@pytest.mark.parametrize(
    "state",
    [
        None,
        1,
        [],
        {"a": 1},
        b"a.b",
        "",
        "nodot",
        "a.b.c",
        "..",
        "abc.d!ef",
        "é.é",
        "a.b=",
        "x" * 5 + ".abc",
    ],
)
def test_malformed(state: Any) -> None:
    message = refusal(state)
    assert message in ("requestState is malformed", "requestState failed its integrity check")


@pytest.mark.parametrize("state", [None, 1, "", "nodot", "a.b.c", "é.é", "x" * 5 + ".abc"])
def test_malformed_shapes_say_malformed(state: Any) -> None:
    assert refusal(state) == "requestState is malformed"


# --- expiry() (the used-state table) --------------------------------------------------------------


def test_expiry_reads_the_claim() -> None:
    before = time.time()
    claim = _state.expiry(sealed(ttl=100))
    assert claim is not None and before + 98 <= claim <= time.time() + 100
    assert _state.expiry(resign({"e": True})) is None
    assert _state.expiry(resign({"e": "1"})) is None


@pytest.mark.parametrize(
    "state", [None, 1, "", "a.b.c", "nodot", "!!!.x", f"{b64(b'[1]')}.x", f"{b64(b'not json')}.x"]
)
def test_expiry_of_malformed_is_none(state: Any) -> None:
    assert _state.expiry(state) is None


# --- seal_round / open_round with a fake agent ----------------------------------------------------


class FakeAgent(SimpleNamespace):
    async def signing_secret(self) -> bytes:
        return self.secret

    def find_resource(self, uri: str) -> tuple[Any, dict[str, str]] | None:
        if uri.startswith("files://"):
            return object(), {"path": uri[len("files://") :]}
        if uri == "static://x":
            return object(), {}
        return None


def agent(**kwargs: Any) -> FakeAgent:
    return FakeAgent(
        secret=kwargs.get("secret", SECRET), timing=Timing(input_state_ttl_seconds=kwargs.get("ttl", 60.0))
    )


async def test_round_trip_for_a_tool() -> None:
    a = agent()
    state = await _state.seal_round(a, "tools/call:book", ARGS, {"q": 1})
    params = {"name": "book", "arguments": dict(ARGS), "requestState": state}
    assert _state.open_round(a, "tools/call", params, "tools/call:book") == {"q": 1}


async def test_round_for_a_tool_bound_to_its_arguments() -> None:
    a = agent()
    state = await _state.seal_round(a, "tools/call:book", ARGS, {"q": 1})
    with pytest.raises(ValueError, match="another request"):
        _state.open_round(
            a, "tools/call", {"arguments": {**ARGS, "nights": 9}, "requestState": state}, "tools/call:book"
        )
    with pytest.raises(ValueError, match="another request"):
        _state.open_round(a, "tools/call", {"arguments": ARGS, "requestState": state}, "tools/call:other")


async def test_round_for_a_prompt() -> None:
    a = agent()
    state = await _state.seal_round(a, "prompts/get:greet", {"name": "Ada"}, {"k": "v"})
    params = {"name": "greet", "arguments": {"name": "Ada"}, "requestState": state}
    assert _state.open_round(a, "prompts/get", params, "prompts/get:greet") == {"k": "v"}


async def test_round_for_a_resource_is_bound_to_its_uri_variables() -> None:
    a = agent()
    state = await _state.seal_round(a, "resources/read:files://a.txt", {"path": "a.txt"}, {"k": 1})
    params = {"uri": "files://a.txt", "requestState": state}
    assert _state.open_round(a, "resources/read", params, "resources/read:files://a.txt") == {"k": 1}
    # the same target name with other variables (not reachable through the target, but bound anyway)
    with pytest.raises(ValueError, match="another request"):
        _state.open_round(
            a,
            "resources/read",
            {"uri": "files://b.txt", "requestState": state},
            "resources/read:files://a.txt",
        )


async def test_round_for_an_unknown_resource_binds_to_none() -> None:
    a = agent()
    state = await _state.seal_round(a, "resources/read:gone://x", None, {"k": 1})
    assert _state.open_round(
        a, "resources/read", {"uri": "gone://x", "requestState": state}, "resources/read:gone://x"
    ) == {"k": 1}
    with pytest.raises(ValueError, match="another request"):
        _state.open_round(
            a, "resources/read", {"uri": "static://x", "requestState": state}, "resources/read:gone://x"
        )


async def test_round_uses_the_agents_ttl_and_secret() -> None:
    with pytest.raises(ValueError, match="expired"):
        _state.open_round(
            agent(),
            "tools/call",
            {"arguments": ARGS, "requestState": await _state.seal_round(agent(ttl=-1), TARGET, ARGS, {})},
            TARGET,
        )
    other = agent(secret=b"another")
    state = await _state.seal_round(other, TARGET, ARGS, {})
    with pytest.raises(ValueError, match="integrity"):
        _state.open_round(agent(), "tools/call", {"arguments": ARGS, "requestState": state}, TARGET)


def test_round_without_a_state_is_malformed() -> None:
    with pytest.raises(ValueError, match="malformed"):
        _state.open_round(agent(), "tools/call", {"arguments": ARGS}, TARGET)
