"""Unit tests of the AG-UI ``Sequencer`` (``agentmw.agui.sequence``) without I/O.

Every emitted frame is checked for its framing (``id: N\\ndata: {...}\\n\\n``, N rising by one), decoded
with a strict JSON parser (no NaN), validated against the ``ag_ui.core`` event models, and the whole
stream is run through a checker that mirrors the client's ``verify.ts`` rules.
"""

from __future__ import annotations

import json
import math
import random
import re
import time
from typing import Any

import pytest
from ag_ui.core import Event
from pydantic import TypeAdapter

from agentmw.agui.sequence import PROTOCOL_VERSION, SequenceError, Sequencer
from agentmw.events import (
    Progress,
    ReasoningDelta,
    StateChanged,
    StepFinished,
    StepStarted,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
)

EVENT: TypeAdapter[Any] = TypeAdapter(Event)
FRAME = re.compile(rb"id: (\d+)\ndata: ([^\r\n]*)\n\n")


def _no_constants(name: str) -> Any:
    raise AssertionError(f"{name} is not JSON")


def strict_json(raw: bytes) -> Any:
    return json.loads(raw, parse_constant=_no_constants)


def decode(frames: list[tuple[int, bytes]], first: int = 1) -> list[dict[str, Any]]:
    """The events of ``frames``, after checking framing, numbering and each event's model."""
    events = []
    for index, (seq, frame) in enumerate(frames):
        assert seq == first + index
        match = FRAME.fullmatch(frame)
        assert match is not None, frame
        assert int(match.group(1)) == seq
        event = strict_json(match.group(2))
        EVENT.validate_python(event)
        assert isinstance(event["timestamp"], int)
        events.append(event)
    return events


def check_stream(events: list[dict[str, Any]]) -> None:
    """The client's sequence rules (verify.ts), as the sequencer's docstring states them."""
    assert events and events[0]["type"] in ("RUN_STARTED", "RUN_ERROR")
    text: set[str] = set()
    tools: set[str] = set()
    steps: set[str] = set()
    reasoning: set[str] = set()
    reasoning_messages: set[str] = set()
    ended = False
    last_ts = 0
    for event in events:
        kind = event["type"]
        assert not ended, f"{kind} after the run ended"
        assert event["timestamp"] >= last_ts
        last_ts = event["timestamp"]
        if kind == "RUN_STARTED":
            assert event is events[0]
        elif kind == "TEXT_MESSAGE_START":
            assert event["messageId"] not in text
            text.add(event["messageId"])
        elif kind in ("TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END"):
            assert event["messageId"] in text
            if kind == "TEXT_MESSAGE_END":
                text.discard(event["messageId"])
        elif kind == "TOOL_CALL_START":
            assert event["toolCallId"] not in tools
            tools.add(event["toolCallId"])
        elif kind in ("TOOL_CALL_ARGS", "TOOL_CALL_END"):
            assert event["toolCallId"] in tools
            if kind == "TOOL_CALL_END":
                tools.discard(event["toolCallId"])
        elif kind == "STEP_STARTED":
            assert event["stepName"] not in steps
            steps.add(event["stepName"])
        elif kind == "STEP_FINISHED":
            assert event["stepName"] in steps
            steps.discard(event["stepName"])
        elif kind == "REASONING_START":
            assert event["messageId"] not in reasoning
            reasoning.add(event["messageId"])
        elif kind == "REASONING_MESSAGE_START":
            assert event["messageId"] in reasoning and event["messageId"] not in reasoning_messages
            reasoning_messages.add(event["messageId"])
        elif kind in ("REASONING_MESSAGE_CONTENT", "REASONING_MESSAGE_END"):
            assert event["messageId"] in reasoning_messages
            if kind == "REASONING_MESSAGE_END":
                reasoning_messages.discard(event["messageId"])
        elif kind == "REASONING_END":
            assert event["messageId"] in reasoning and event["messageId"] not in reasoning_messages
            reasoning.discard(event["messageId"])
        elif kind == "RUN_FINISHED":
            assert not (text or tools or steps or reasoning or reasoning_messages), (
                "left open at RUN_FINISHED"
            )
            ended = True
        elif kind == "RUN_ERROR":
            ended = True
    assert ended, "the run has no terminal event"


def run_input(**extra: Any) -> dict[str, Any]:
    """A valid ``RunAgentInput``, as the endpoint passes it to ``start``."""
    return {
        "threadId": "thread-1",
        "runId": "run-1",
        "state": {},
        "messages": [],
        "tools": [],
        "context": [],
        "forwardedProps": {},
        **extra,
    }


def seq(**kwargs: Any) -> Sequencer:
    return Sequencer("thread-1", "run-1", kwargs.pop("messages", []), **kwargs)


def types(events: list[dict[str, Any]]) -> list[str]:
    return [e["type"] for e in events]


def run(s: Sequencer, first: int = 1) -> list[dict[str, Any]]:
    events = decode(s.take(), first)
    check_stream(events)
    return events


# --- lifecycle ------------------------------------------------------------------------------------


def test_start_and_finish() -> None:
    s = seq()
    s.start(run_input())
    s.finish()
    events = run(s)
    assert types(events) == ["RUN_STARTED", "RUN_FINISHED"]
    assert {k: v for k, v in events[0].items() if k != "timestamp"} == {
        "type": "RUN_STARTED",
        "threadId": "thread-1",
        "runId": "run-1",
        "protocolVersion": PROTOCOL_VERSION,
        "input": run_input(),
    }
    assert PROTOCOL_VERSION == "1.0"
    assert {k: v for k, v in events[1].items() if k != "timestamp"} == {
        "type": "RUN_FINISHED",
        "threadId": "thread-1",
        "runId": "run-1",
        "outcome": {"type": "success"},
    }
    assert s.ended and s.take() == []


def test_start_without_input_and_finish_with_result_and_outcome() -> None:
    s = seq()
    s.start()
    s.finish({"type": "cancelled"}, result={"total": 3})
    events = run(s)
    assert "input" not in events[0]
    assert events[1]["outcome"] == {"type": "cancelled"} and events[1]["result"] == {"total": 3}


def test_timestamps_are_milliseconds_now() -> None:
    before = int(time.time() * 1000)
    s = seq()
    s.start()
    s.finish()
    events = run(s)
    after = int(time.time() * 1000)
    assert all(before <= e["timestamp"] <= after for e in events)


def test_sequence_numbers_rise_from_first_seq_across_takes() -> None:
    s = seq(first_seq=41)
    s.start()
    s.text("a")
    first = s.take()
    assert [n for n, _ in first] == [42, 43, 44]
    s.apply(StepStarted("x"))
    s.finish()
    second = s.take()
    assert [n for n, _ in second] == [45, 46, 47, 48]
    events = decode(first, 42) + decode(second, 45)
    check_stream(events)
    assert s.seq == 48


def test_frames_are_id_and_data_lines_with_lf() -> None:
    s = seq()
    s.start()
    s.text("line1\nline2\r\n")
    frames = s.take()
    for number, frame in frames:
        assert frame.startswith(b"id: %d\ndata: {" % number) and frame.endswith(b"}\n\n")
        assert frame.count(b"\n") == 3 and b"\r" not in frame
    assert strict_json(frames[-1][1].split(b"data: ", 1)[1])["delta"] == "line1\nline2\r\n"


def test_nothing_before_start() -> None:
    s = seq()
    for act in (
        lambda: s.text("x"),
        lambda: s.apply(StepStarted("a")),
        lambda: s.finish(),
        lambda: s.state_snapshot({}),
        lambda: s.apply(ToolCallFinished("c", "t", "x", False)),
    ):
        with pytest.raises(SequenceError, match="before RUN_STARTED"):
            act()
    assert s.take() == [] and s.seq == 0


def test_start_twice_is_refused() -> None:
    s = seq()
    s.start()
    with pytest.raises(SequenceError, match="RUN_STARTED while a run is open"):
        s.start()
    assert types(decode(s.take())) == ["RUN_STARTED"]


def test_nothing_after_finish() -> None:
    s = seq()
    s.start()
    s.finish()
    for act in (
        lambda: s.text("x"),
        lambda: s.apply(StepStarted("a")),
        lambda: s.finish(),
        lambda: s.state_snapshot({}),
        lambda: s.apply(ReasoningDelta("r")),
    ):
        with pytest.raises(SequenceError, match="after the run ended"):
            act()
    s.error("late")  # a terminal event after the end is dropped, not raised
    assert types(run(s)) == ["RUN_STARTED", "RUN_FINISHED"]


# --- errors ---------------------------------------------------------------------------------------


def test_error_ends_the_run() -> None:
    s = seq()
    s.start()
    s.apply(StepStarted("work"))
    s.error("boom", "FAILED")
    s.error("again", "FAILED")  # ignored
    with pytest.raises(SequenceError, match="after the run ended"):
        s.text("more")
    events = run(s)
    assert types(events) == ["RUN_STARTED", "STEP_STARTED", "RUN_ERROR"]
    assert {k: v for k, v in events[-1].items() if k != "timestamp"} == {
        "type": "RUN_ERROR",
        "message": "boom",
        "code": "FAILED",
    }
    assert s.ended


def test_error_without_code_or_message() -> None:
    s = seq()
    s.start()
    s.error("")
    events = run(s)
    assert events[-1]["message"] == "error" and "code" not in events[-1]


def test_error_before_start_is_allowed() -> None:
    s = seq()
    s.error("bad input", "INVALID")
    events = run(s)
    assert types(events) == ["RUN_ERROR"] and events[0]["code"] == "INVALID"


# --- text -----------------------------------------------------------------------------------------


def test_text_is_wrapped_in_one_message() -> None:
    messages: list[dict[str, Any]] = []
    s = seq(messages=messages)
    s.start()
    s.text("Hel")
    s.text("")  # nothing
    s.apply(TextDelta("lo"))
    s.apply(TextDelta(""))
    s.finish()
    events = run(s)
    assert types(events) == [
        "RUN_STARTED",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "RUN_FINISHED",
    ]
    ids = {e["messageId"] for e in events[1:5]}
    assert len(ids) == 1
    assert events[1]["role"] == "assistant"
    assert [e["delta"] for e in events[2:4]] == ["Hel", "lo"]
    assert messages == [{"id": ids.pop(), "role": "assistant", "content": "Hello"}]


def test_empty_text_opens_nothing() -> None:
    s = seq()
    s.start()
    s.text("")
    s.finish()
    assert types(run(s)) == ["RUN_STARTED", "RUN_FINISHED"]


def test_a_tool_call_splits_text_into_two_messages() -> None:
    messages: list[dict[str, Any]] = []
    s = seq(messages=messages)
    s.start()
    s.text("before")
    s.apply(ToolCallStarted("call-1", "lookup", {"q": "x"}))
    s.apply(ToolCallFinished("call-1", "lookup", "found", False))
    s.text("after")
    s.finish()
    events = run(s)
    assert types(events) == [
        "RUN_STARTED",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
        "TOOL_CALL_RESULT",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "RUN_FINISHED",
    ]
    first_text = events[1]["messageId"]
    assert events[4]["parentMessageId"] == first_text
    assert events[8]["messageId"] != first_text
    assert [m["role"] for m in messages] == ["assistant", "assistant", "tool", "assistant"]
    assert [m.get("content") for m in messages] == ["before", None, "found", "after"]


# --- reasoning ------------------------------------------------------------------------------------

REASONING_OPEN = ["REASONING_START", "REASONING_MESSAGE_START", "REASONING_MESSAGE_CONTENT"]
REASONING_CLOSE = ["REASONING_MESSAGE_END", "REASONING_END"]


def test_reasoning_is_one_message() -> None:
    s = seq()
    s.start()
    s.apply(ReasoningDelta("think"))
    s.apply(ReasoningDelta(""))
    s.apply(ReasoningDelta("ing"))
    s.finish()
    events = run(s)
    assert types(events) == [
        "RUN_STARTED",
        *REASONING_OPEN,
        "REASONING_MESSAGE_CONTENT",
        *REASONING_CLOSE,
        "RUN_FINISHED",
    ]
    assert len({e["messageId"] for e in events[1:-1]}) == 1
    assert events[2]["role"] == "reasoning"
    assert [e["delta"] for e in events if e["type"] == "REASONING_MESSAGE_CONTENT"] == ["think", "ing"]


@pytest.mark.parametrize(
    ("event", "expected"),
    [
        (StepStarted("s"), ["STEP_STARTED"]),
        (ToolCallStarted("c1", "t", {}), ["TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END"]),
        (TextDelta("hi"), ["TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT"]),
    ],
)
def test_reasoning_is_closed_before(event: Any, expected: list[str]) -> None:
    s = seq()
    s.start()
    s.apply(ReasoningDelta("hmm"))
    s.apply(event)
    s.apply(ReasoningDelta("again"))  # a new thought
    s.finish()
    events = run(s)
    kinds = types(events)
    assert kinds[: 1 + len(REASONING_OPEN) + len(REASONING_CLOSE) + len(expected)] == [
        "RUN_STARTED",
        *REASONING_OPEN,
        *REASONING_CLOSE,
        *expected,
    ]
    reasoning_ids = [e["messageId"] for e in events if e["type"] == "REASONING_START"]
    assert len(reasoning_ids) == 2 and reasoning_ids[0] != reasoning_ids[1]


def test_reasoning_is_closed_before_a_step_finishes() -> None:
    s = seq()
    s.start()
    s.apply(StepStarted("s"))
    s.apply(ReasoningDelta("hmm"))
    s.apply(StepFinished("s"))
    s.finish()
    assert types(run(s)) == [
        "RUN_STARTED",
        "STEP_STARTED",
        *REASONING_OPEN,
        *REASONING_CLOSE,
        "STEP_FINISHED",
        "RUN_FINISHED",
    ]


def test_reasoning_and_text_are_closed_at_the_end_text_first() -> None:
    s = seq()
    s.start()
    s.text("a")
    s.apply(ReasoningDelta("r"))
    s.finish()
    assert types(run(s))[-4:] == ["TEXT_MESSAGE_END", *REASONING_CLOSE, "RUN_FINISHED"]


# --- steps ----------------------------------------------------------------------------------------


def test_steps_open_once_finish_once_and_close_at_the_end() -> None:
    s = seq()
    s.start()
    s.apply(StepStarted("outer"))
    s.apply(StepStarted("outer"))  # already open: nothing
    s.apply(StepFinished("never-started"))  # not open: nothing
    s.apply(StepStarted("inner"))
    s.apply(StepStarted("third"))
    s.apply(StepFinished("inner"))
    s.apply(StepFinished("inner"))  # already finished: nothing
    s.finish()
    events = run(s)
    assert [(e["type"], e.get("stepName")) for e in events] == [
        ("RUN_STARTED", None),
        ("STEP_STARTED", "outer"),
        ("STEP_STARTED", "inner"),
        ("STEP_STARTED", "third"),
        ("STEP_FINISHED", "inner"),
        ("STEP_FINISHED", "third"),
        ("STEP_FINISHED", "outer"),
        ("RUN_FINISHED", None),
    ]


# --- tool calls -----------------------------------------------------------------------------------


def test_tool_call_events_and_messages() -> None:
    messages: list[dict[str, Any]] = []
    s = seq(messages=messages)
    s.start()
    s.apply(ToolCallStarted("call-7", "lookup", {"sku": "A", "ratio": math.nan, "n": [math.inf]}))
    s.apply(ToolCallFinished("call-7", "lookup", "oops", True))
    s.finish()
    events = run(s)
    start, args, end, result = events[1:5]
    assert {k: v for k, v in start.items() if k != "timestamp"} == {
        "type": "TOOL_CALL_START",
        "toolCallId": "call-7",
        "toolCallName": "lookup",
    }
    assert strict_json(args["delta"].encode()) == {"sku": "A", "ratio": None, "n": [None]}
    assert end["toolCallId"] == "call-7"
    assert result["toolCallId"] == "call-7" and result["content"] == "oops" and result["role"] == "tool"
    assert result["metadata"] == {"isError": True}
    assert messages[0]["role"] == "assistant"
    assert messages[0]["toolCalls"] == [
        {"id": "call-7", "type": "function", "function": {"name": "lookup", "arguments": args["delta"]}}
    ]
    assert messages[1] == {
        "id": result["messageId"],
        "role": "tool",
        "content": "oops",
        "toolCallId": "call-7",
        "error": "oops",
    }


def test_tool_result_without_error() -> None:
    messages: list[dict[str, Any]] = []
    s = seq(messages=messages)
    s.start()
    s.apply(ToolCallStarted("c", "t", {}))
    s.apply(ToolCallFinished("c", "t", "", False))
    s.finish()
    events = run(s)
    assert events[4]["metadata"] == {"isError": False}
    assert "error" not in messages[-1]


# --- state and progress ---------------------------------------------------------------------------


def test_state_delta_and_progress() -> None:
    s = seq()
    s.start()
    s.apply(StateChanged([], {}))  # an empty patch is nothing
    s.apply(StateChanged([{"op": "add", "path": "/a", "value": math.nan}], {"a": math.nan}))
    s.apply(Progress(1, None, None))
    s.apply(Progress(2, 3, "two of three"))
    s.finish()
    events = run(s)
    assert types(events) == [
        "RUN_STARTED",
        "STATE_DELTA",
        "ACTIVITY_SNAPSHOT",
        "ACTIVITY_SNAPSHOT",
        "RUN_FINISHED",
    ]
    assert events[1]["delta"] == [{"op": "add", "path": "/a", "value": None}]
    assert events[2]["content"] == {"progress": 1} and events[2]["activityType"] == "progress"
    assert events[3]["content"] == {"progress": 2, "total": 3, "message": "two of three"}
    assert events[2]["messageId"] == events[3]["messageId"] and events[3]["replace"] is True


def test_snapshots() -> None:
    messages = [{"id": "u1", "role": "user", "content": "hi"}]
    s = seq(messages=messages)
    s.start()
    s.state_snapshot({"x": 1})
    s.snapshot({"y": [1, math.inf]})
    s.finish()
    events = run(s)
    assert types(events) == [
        "RUN_STARTED",
        "STATE_SNAPSHOT",
        "STATE_SNAPSHOT",
        "MESSAGES_SNAPSHOT",
        "RUN_FINISHED",
    ]
    assert events[1]["snapshot"] == {"x": 1}
    assert events[2]["snapshot"] == {"y": [1, None]}
    assert events[3]["messages"] == messages


# --- NaN never leaves as non-JSON -----------------------------------------------------------------


def test_nan_in_a_result_or_input_is_null() -> None:
    s = seq()
    s.start(run_input(forwardedProps={"x": math.nan}))
    s.finish(result={"score": math.nan, "hi": math.inf, "lo": -math.inf, "ok": 1.5, "list": [math.nan]})
    frames = s.take()
    assert all(b"NaN" not in f and b"Infinity" not in f for _, f in frames)
    events = decode(frames)
    check_stream(events)
    assert events[0]["input"] == run_input(forwardedProps={"x": None})
    assert events[1]["result"] == {"score": None, "hi": None, "lo": None, "ok": 1.5, "list": [None]}


def test_lone_surrogates_are_written_as_escapes() -> None:
    s = seq()
    s.start()
    s.text("bad \ud800 text")
    s.finish(result={"k": "\udfff"})
    frames = s.take()
    for _, frame in frames:
        frame.decode("utf-8")
    events = decode(frames)
    check_stream(events)
    assert events[2]["delta"] == "bad \ud800 text"


# --- interrupts -----------------------------------------------------------------------------------


def test_interrupt_shape() -> None:
    messages: list[dict[str, Any]] = []
    s = seq(messages=messages)
    s.start()
    s.apply(StepStarted("ask"))
    s.text("Let me ask.")
    s.apply(ReasoningDelta("need approval"))
    interrupt = {
        "id": "int-1",
        "reason": "confirmation",
        "message": "Delete x?",
        "responseSchema": {"type": "object", "properties": {"approved": {"type": "boolean"}}},
        "expiresAt": "2030-01-01T00:00:00Z",
    }
    s.interrupt([interrupt], {"count": 1, "ratio": math.nan})
    events = run(s)
    assert types(events)[-7:] == [
        "TEXT_MESSAGE_END",
        *REASONING_CLOSE,
        "STEP_FINISHED",
        "STATE_SNAPSHOT",
        "MESSAGES_SNAPSHOT",
        "RUN_FINISHED",
    ]
    assert events[-3]["snapshot"] == {"count": 1, "ratio": None}
    assert (
        events[-2]["messages"]
        == messages
        == [{"id": events[-7]["messageId"], "role": "assistant", "content": "Let me ask."}]
    )
    assert events[-1]["outcome"] == {"type": "interrupt", "interrupts": [interrupt]}
    assert s.ended


# --- any mix of core events stays valid -----------------------------------------------------------


@pytest.mark.parametrize("seed", range(40))
def test_random_runs_are_always_valid(seed: int) -> None:
    rng = random.Random(seed)
    messages: list[dict[str, Any]] = []
    s = seq(messages=messages, first_seq=rng.randrange(0, 1000))
    first = s.seq + 1
    s.start(run_input(state={"seed": seed}))
    started: list[str] = []
    for i in range(rng.randrange(0, 40)):
        choice = rng.randrange(8)
        if choice == 0:
            s.apply(TextDelta(rng.choice(["", "a", "b c", "\n"])))
        elif choice == 1:
            s.apply(StepStarted(rng.choice("xyz")))
        elif choice == 2:
            s.apply(StepFinished(rng.choice("xyz")))
        elif choice == 3:
            s.apply(ReasoningDelta(rng.choice(["", "r", "s"])))
        elif choice == 4:
            call_id = f"call-{i}"
            started.append(call_id)
            s.apply(ToolCallStarted(call_id, "tool", {"i": i, "f": rng.choice([1.0, math.nan])}))
        elif choice == 5 and started:
            s.apply(ToolCallFinished(rng.choice(started), "tool", "out", rng.random() < 0.5))
        elif choice == 6:
            s.apply(StateChanged([{"op": "replace", "path": "/i", "value": i}], {"i": i}))
        else:
            s.apply(Progress(i, None if i % 2 else 40, None))
    ending = rng.randrange(3)
    if ending == 0:
        s.finish(result={"v": rng.choice([1, math.nan])})
    elif ending == 1:
        s.error("failed", "FAILED")
    else:
        s.interrupt([{"id": "i1", "reason": "input_required"}], {"s": seed})
    events = decode(s.take(), first)
    check_stream(events)
    text_ids = [e["messageId"] for e in events if e["type"] == "TEXT_MESSAGE_END"]
    if ending != 1:
        assert [m["id"] for m in messages if m["role"] == "assistant" and "content" in m] == text_ids
