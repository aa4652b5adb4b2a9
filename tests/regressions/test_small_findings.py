"""Smaller findings: reasoning messages close, A2A ids are UUIDs, a missing policy is a clean error."""

from __future__ import annotations

import json
import logging
import time
import uuid

import pytest

from agentmw.a2a.wire import new_id
from agentmw.agui.sequence import Sequencer
from agentmw.events import (
    ReasoningDelta,
    StepFinished,
    StepStarted,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
)
from agentmw.testing import McpTestClient


def events_of(sequencer: Sequencer) -> list[dict]:
    return [json.loads(frame.split(b"data: ", 1)[1]) for _, frame in sequencer.take()]


def assert_reasoning_closed_before(events: list[dict], kind: str) -> None:
    """Every reasoning message that started before the last ``kind`` event ended before it."""
    at = max(i for i, e in enumerate(events) if e["type"] == kind)
    before = [e["type"] for e in events[:at]]
    assert before.count("REASONING_START") == before.count("REASONING_END") >= 1, before
    assert before.count("REASONING_MESSAGE_START") == before.count("REASONING_MESSAGE_END"), before


# --- ctx.reason(): one reasoning message per thought, never open across steps or tool calls -------------------


@pytest.mark.parametrize(
    ("event", "kind"),
    [
        (StepStarted("next"), "STEP_STARTED"),
        (StepFinished("outer"), "STEP_FINISHED"),
        (ToolCallStarted("call-1", "lookup", {"sku": "MON-27"}), "TOOL_CALL_START"),
        (TextDelta("Here is the answer."), "TEXT_MESSAGE_START"),
    ],
)
def test_an_open_reasoning_message_ends_when_the_work_moves_on(event, kind: str) -> None:
    sequencer = Sequencer("t", "r", [])
    sequencer.start()
    sequencer.apply(StepStarted("outer"))
    sequencer.apply(ReasoningDelta("I should price the monitor "))
    sequencer.apply(ReasoningDelta("first."))
    sequencer.apply(event)
    events = events_of(sequencer)
    assert_reasoning_closed_before(events, kind)
    contents = [e["delta"] for e in events if e["type"] == "REASONING_MESSAGE_CONTENT"]
    assert contents == ["I should price the monitor ", "first."], "one thought stays one message"


def test_reasoning_after_a_step_or_a_tool_call_is_a_new_message() -> None:
    sequencer = Sequencer("t", "r", [])
    sequencer.start()
    with_ids = []
    sequencer.apply(StepStarted("understand"))
    sequencer.apply(ReasoningDelta("Looking for 2 monitors."))
    sequencer.apply(StepFinished("understand"))
    sequencer.apply(StepStarted("find"))
    sequencer.apply(ReasoningDelta("The catalog should have one."))
    sequencer.apply(ToolCallStarted("call-1", "search_assets", {"category": "monitor"}))
    sequencer.apply(ToolCallFinished("call-1", "search_assets", "[]", False))
    sequencer.apply(ReasoningDelta("Nothing found."))
    sequencer.finish()
    events = events_of(sequencer)
    for event in events:
        if event["type"].startswith("REASONING"):
            with_ids.append((event["type"], event["messageId"]))
    starts = [i for t, i in with_ids if t == "REASONING_START"]
    assert len(starts) == len(set(starts)) == 3
    for message_id in starts:  # each message opens, streams and closes in order, before anything else opens
        kinds = [t for t, i in with_ids if i == message_id]
        assert kinds == [
            "REASONING_START",
            "REASONING_MESSAGE_START",
            "REASONING_MESSAGE_CONTENT",
            "REASONING_MESSAGE_END",
            "REASONING_END",
        ]
    order = [e["type"] for e in events]
    assert order.index("REASONING_END") < order.index("STEP_FINISHED")
    second_end = [i for i, t in enumerate(order) if t == "REASONING_END"][1]
    assert second_end < order.index("TOOL_CALL_START")
    assert order[-3:] == ["REASONING_END", "STEP_FINISHED", "RUN_FINISHED"]


# --- A2A ids are valid UUIDs ---------------------------------------------------------------------------


def test_a2a_ids_are_time_ordered_version_7_uuids() -> None:
    before = time.time_ns() // 1_000_000
    ids = [
        new_id() for _ in range(20000)
    ]  # more than 4096 in a millisecond carries the sequence into the time
    after = time.time_ns() // 1_000_000
    assert len(set(ids)) == len(ids)
    assert ids == sorted(ids)  # strictly increasing: a new task's record is appended to SQLite's B-tree
    for value in ids:
        parsed = uuid.UUID(value)
        assert parsed.version == 7 and parsed.variant == uuid.RFC_4122 and str(parsed) == value
    assert before <= uuid.UUID(ids[0]).int >> 80 <= uuid.UUID(ids[-1]).int >> 80 <= after + 10
    random_bits = {uuid.UUID(value).int & ((1 << 62) - 1) for value in ids}
    assert len(random_bits) == len(ids)  # 62 random bits each: not guessable from a neighbour


# --- the example's read_policy: a missing file is a clean Permanent error ----------------------------------


@pytest.mark.parametrize("path", ["missing.md", "drafts/missing.md", "."])
async def test_example_missing_policy_is_a_clean_error_without_a_traceback(path: str, caplog) -> None:
    from examples.fastapi_app.main import app

    caplog.set_level(logging.DEBUG, logger="agentmw")
    async with McpTestClient(app) as mcp:
        result = await mcp.call_tool("read_policy", {"path": path})
    text = result["content"][0]["text"]
    assert result["isError"] is True
    assert text.startswith("There is no policy document") and "purchasing.md" in text
    assert "repeating the same call will not help" in text
    assert "/" not in text.split("'")[1] or text.split("'")[1] == path, "no server path is shown"
    assert not [r for r in caplog.records if r.exc_info], "no traceback is logged"
