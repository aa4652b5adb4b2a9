"""The example page in headless Chromium (Playwright): type a request, see the tool cards, approve, see the answer.

Twice: in this process without telemetry (the page shows no trace), and as a user runs it with
``OTEL_TRACES_EXPORTER=console``, in its own process: the page then shows each run's trace id, and that trace is
the one the console exporter printed.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

from tests.chromium import run_browser_script
from tests.conftest import serve
from tests.example_process import example_process


def _drive_page(url: str, shot: Path) -> dict[str, Any]:
    """Runs tests/agui/browser.mjs against the page at ``url``; its JSON result."""
    return run_browser_script("browser.mjs", url, str(shot))


def _assert_the_workflow(result: dict[str, Any]) -> None:
    assert result["problems"] == []
    assert [t["name"] for t in result["tools"]] == [
        "search_assets",
        "department_budget",
        "submit_purchase_request",
    ]
    assert all(not t["loading"] and t["result"] for t in result["tools"][:2])
    assert result["tools"][2]["loading"] is True, "the gated call waits for the approval, shown as loading"
    assert "understand the request" in result["steps"][0]
    assert result["message"].startswith(
        'Run submit_purchase_request(request={"sku": "MON-27", "quantity": 2, '
    )
    assert result["message"].endswith(
        "Side effects: Creates a purchase request that reserves the department's budget"
    )
    assert result["action"]["function"] == "submit_purchase_request"
    assert result["action"]["arguments"]["request"]["quantity"] == 2
    assert result["toolsAfter"][-1] == "submit_purchase_request"
    assert result["answer"].startswith("Submitted PR-") and "898.00" in result["answer"]
    assert result["state"]["receipt"]["status"] == "submitted"


def test_page_streams_a_run_and_takes_an_approval(tmp_path, monkeypatch) -> None:
    import examples.fastapi_app.main as example

    engineering = example.BUDGETS["engineering"]
    monkeypatch.setattr(engineering, "spent", engineering.spent)
    shot = tmp_path / "page.png"
    with serve(example.app) as url:
        result = _drive_page(url, shot)
    _assert_the_workflow(result)
    if example.agent.telemetry is None:  # OTEL_TRACES_EXPORTER unset, as in every test run but by hand
        assert result["tracesBefore"] == result["traces"] == [], "no telemetry: no trace id is shown"
    assert shot.exists()
    if os.environ.get("AGENTMW_SCREENSHOT"):
        shutil.copy(shot, os.environ["AGENTMW_SCREENSHOT"])


def console_spans(log: Path) -> list[dict[str, Any]]:
    """The spans the console exporter printed (one JSON object a line) among the process's output."""
    spans = []
    for line in log.read_text(errors="replace").splitlines():
        if line.startswith("{"):
            spans.append(json.loads(line))
    return spans


def test_page_shows_each_runs_trace_when_tracing(tmp_path) -> None:
    folder = tmp_path / "traced"
    with example_process(folder, {"OTEL_TRACES_EXPORTER": "console"}) as url:
        result = _drive_page(url, tmp_path / "page.png")
    _assert_the_workflow(result)
    [trace] = result["tracesBefore"]  # the first run's, shown as it started
    assert re.fullmatch("[0-9a-f]{32}", trace) and trace != "0" * 32, trace
    assert result["traces"] == [trace, trace], "the resume is a run of its own, in the same trace"
    # the console exporter printed the trace the page shows (the process has stopped: every span is out)
    spans = [s for s in console_spans(folder / "replica0.log") if s["context"]["trace_id"] == f"0x{trace}"]
    named = [(s["name"], s["kind"].removeprefix("SpanKind.")) for s in spans]
    assert named.count(("invoke_agent procurement_assistant", "SERVER")) == 2, named
    assert {
        ("invoke_agent procurement_assistant", "INTERNAL"),
        ("execute_tool search_assets", "INTERNAL"),
        ("execute_tool department_budget", "INTERNAL"),
        ("execute_tool submit_purchase_request", "INTERNAL"),
    } <= set(named), named
    gated = next(s for s in spans if s["name"] == "execute_tool submit_purchase_request")
    assert [e["name"] for e in gated["events"]][-1] == "agentmw.gate.decided"
    assert gated["attributes"]["agentmw.outcome.status"] == "completed"
    assert spans[0]["resource"]["attributes"]["service.name"] == "procurement-assistant"
