"""The official ``@ag-ui/client`` HttpAgent (Node 20) against agentmw: every scenario, zero rejections and zero
warnings, and every event checked against the protocol's models."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from pydantic import TypeAdapter

from tests import agui_app
from tests.conftest import require_tool, serve
from tests.waiting import wait_until

HARNESS = Path(__file__).parent / "agui" / "harness.mjs"
SETUP = "run `scripts/setup` (or `scripts/test`, which runs it) to install it"


def harness_node() -> str:
    """The machine's Node (>= 20) with the pinned ``@ag-ui/client`` in ``tests/agui``; skips when absent."""
    node = require_tool(
        "Node (>= 20, with npm)",
        shutil.which("node"),
        "install Node >= 20 with npm, then run `scripts/setup`",
    )
    require_tool("The AG-UI client npm package", HARNESS.parent / "node_modules" / "@ag-ui" / "client", SETUP)
    return node


@pytest.fixture(scope="module")
def url():
    harness_node()
    _, app = agui_app.build()
    with serve(app) as base:
        yield base


def drive(url: str, skill: str, steps: list[dict], thread: str) -> list[dict]:
    node = harness_node()
    scenario = {"url": f"{url}/agui/{skill}", "threadId": thread, "steps": steps}
    run = subprocess.run(
        [node, str(HARNESS), json.dumps(scenario)],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=HARNESS.parent,
    )
    assert run.returncode == 0, run.stderr
    output = json.loads(run.stdout.strip().splitlines()[-1])
    assert output["warnings"] == [], output["warnings"]
    events = TypeAdapter(__import__("ag_ui.core", fromlist=["Event"]).Event)
    for step in output["steps"]:
        assert "rejected" not in step, step.get("rejected")
        for event in step["events"]:
            events.validate_python(event)  # every event is a valid AG-UI 1.0 event
    return output["steps"]


def types(step: dict) -> list[str]:
    return [e["type"] for e in step["events"]]


def test_streamed_text(url: str) -> None:
    [step] = drive(url, "chat", [{"runId": "r-text", "say": "hello there"}], "t-text")
    kinds = types(step)
    assert kinds[:2] == ["RUN_STARTED", "STATE_SNAPSHOT"] and kinds[-1] == "RUN_FINISHED"
    assert step["events"][0]["protocolVersion"] == "1.0"
    assert kinds.count("TEXT_MESSAGE_START") == 1 and kinds.count("TEXT_MESSAGE_END") == 1
    text = "".join(e["delta"] for e in step["events"] if e["type"] == "TEXT_MESSAGE_CONTENT")
    assert text == "You said: hello there "
    assert step["messages"][-1]["content"] == "You said: hello there "


def test_steps_tool_calls_reasoning_and_state(url: str) -> None:
    [step] = drive(url, "planner", [{"runId": "r-plan", "say": "buy a monitor"}], "t-plan")
    kinds = types(step)
    assert kinds.index("STEP_STARTED") < kinds.index("TOOL_CALL_START") < kinds.index("STEP_FINISHED")
    assert "REASONING_MESSAGE_CONTENT" in kinds
    results = [e for e in step["events"] if e["type"] == "TOOL_CALL_RESULT"]
    assert [r["metadata"]["isError"] for r in results] == [False, True]
    starts = [e for e in step["events"] if e["type"] == "TOOL_CALL_START"]
    assert [s["toolCallName"] for s in starts] == ["lookup", "lookup"]
    deltas = [e for e in step["events"] if e["type"] == "STATE_DELTA"]
    assert deltas and step["state"] == {"cart": [{"sku": "MON-27", "price": 449.0}], "total": 449.0}
    assert "ACTIVITY_SNAPSHOT" in kinds
    assert step["events"][-1]["type"] == "RUN_FINISHED" and step["events"][-1]["outcome"] == {
        "type": "success"
    }


def test_interrupt_and_resume(url: str) -> None:
    steps = drive(
        url,
        "approval",
        [
            {"runId": "r-ask", "say": "laptop"},
            {"runId": "r-yes", "resume": "resolve", "payload": {"approved": True}},
        ],
        "t-approve",
    )
    asked, resumed = steps
    final = asked["events"][-1]
    assert final["outcome"]["type"] == "interrupt"
    [interrupt] = final["outcome"]["interrupts"]
    assert interrupt["reason"] == "confirmation" and interrupt["message"] == "Buy laptop for 449.00?"
    assert interrupt["responseSchema"]["x-action"] == {"function": "buy", "item": "laptop"}
    assert interrupt["expiresAt"].endswith("Z")
    assert types(asked)[-3:] == ["STATE_SNAPSHOT", "MESSAGES_SNAPSHOT", "RUN_FINISHED"]
    assert resumed["events"][-1]["outcome"] == {"type": "success"}
    assert resumed["messages"][-1]["content"] == "laptop: bought"
    assert resumed["pendingInterrupts"] == []


def test_cancelled_resume_executes_nothing(url: str) -> None:
    steps = drive(
        url,
        "approval",
        [
            {"runId": "r-ask2", "say": "phone"},
            {"runId": "r-no", "resume": "cancel"},
        ],
        "t-cancel-resume",
    )
    assert steps[1]["events"][-1]["outcome"] == {"type": "cancelled"}
    assert "approval:phone:asked" in agui_app.log
    assert not any(entry.startswith(("approval:phone:yes", "approval:phone:no")) for entry in agui_app.log)


def test_errors_end_with_run_error(url: str) -> None:
    [step] = drive(url, "boom", [{"runId": "r-boom", "say": "x"}], "t-boom")
    assert step["runError"]["code"] == "FAILED"
    assert "secrets" not in step["runError"]["message"]
    assert types(step)[-1] == "RUN_ERROR"


def test_abort_cancels_the_coroutine(url: str) -> None:
    drive(url, "slow", [{"runId": "r-slow", "say": "abort-me", "abortAfter": "ACTIVITY_SNAPSHOT"}], "t-slow")
    wait_until(lambda: "slow:abort-me:cancelled" in agui_app.log, "the coroutine to be cancelled", timeout=3)
    assert "slow:abort-me:cancelled" in agui_app.log
