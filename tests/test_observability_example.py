"""The example app's traces (examples/fastapi_app), exported with the real OpenTelemetry SDK's in-memory exporter,
and the span trees docs/observability.md shows: each test runs one of the example's approval workflows over a
real socket, renders the spans it made and compares them with the tree in the doc, so the doc cannot drift.

- the purchase approval workflow (``approve_purchase``) as an A2A task: asked, then answered on a follow-up;
- the page's workflow (``procurement_assistant`` over AG-UI): the gated ``submit_purchase_request`` interrupts
  the run, and a resume approves it.

Also: without the OpenTelemetry SDK, ``OTEL_TRACES_EXPORTER=console`` serves untraced and says why.
"""

from __future__ import annotations

import json
import logging
import re
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import jsonpatch
import pytest
from opentelemetry.trace import SpanKind

from tests.conftest import serve
from tests.observability.app import Kit

DOC = Path(__file__).resolve().parent.parent / "docs" / "observability.md"
TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CLIENT_SPAN = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE}-{CLIENT_SPAN}-01"
# Attributes that change from run to run (or name the connection) are shown as a placeholder, or not at all.
PLACEHOLDERS = {
    "a2a.task.id": "‹task id›",
    "a2a.context.id": "‹context id›",
    "agentmw.approval.id": "‹approval id›",
}
HIDDEN = ("client.", "network.", "jsonrpc.request.id")


@pytest.fixture
def traced(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Kit, str]]:
    """The example, served on a socket, with a Telemetry on the SDK's in-memory exporter; the module's agent gets
    its hooks and budgets back after the test."""
    import examples.fastapi_app.main as example

    kit = Kit()
    monkeypatch.setattr(example.agent, "telemetry", None)
    monkeypatch.setattr(example.agent, "_hooks", None)
    example.agent.use(kit.telemetry)
    for budget in example.BUDGETS.values():  # the workflows spend; other tests read the budgets
        monkeypatch.setattr(budget, "spent", budget.spent)
    with serve(example.app) as url:
        yield kit, url


# --- the rendering the doc shows ------------------------------------------------------------------------------


def _value(key: str, value: Any, labels: dict[str, str]) -> str:
    if key in PLACEHOLDERS:
        return PLACEHOLDERS[key]
    if isinstance(value, str) and value in labels:
        return labels[value]
    if isinstance(value, bool):
        return str(value).lower()
    return ",".join(map(str, value)) if isinstance(value, tuple) else str(value)


def _attributes(attributes: Any, labels: dict[str, str]) -> list[str]:
    return [f"{k}={_value(k, v, labels)}" for k, v in attributes.items() if not k.startswith(HIDDEN)]


def _wrapped(indent: str, head: str, items: list[str], width: int = 110) -> list[str]:
    """``head`` then ``items``, two spaces apart, over as many lines of ``width`` as they need (a continued
    event or link is indented by two more)."""
    lines, line = [], ""
    for word in [head, *items] if head else items:
        if line and len(indent) + len(line) + 2 + len(word) > width:
            lines.append(indent + line)
            line = "  " * bool(head) + word
        else:
            line = f"{line}  {word}" if line else word
    lines.append(indent + line)
    return lines


def render(spans: list[Any], labels: dict[str, str] | None = None) -> str:
    """One trace as a tree: each span numbered in start order, with its kind, attributes, events and links;
    nothing that differs between runs (span ids, durations, task ids) is shown, and ``labels`` name the values
    a test made unique (thread and run ids)."""
    labels = labels or {}
    [trace_id] = {span.context.trace_id for span in spans}
    spans = sorted(spans, key=lambda s: s.start_time)
    number = {span.context.span_id: index for index, span in enumerate(spans, 1)}
    children: dict[int | None, list[Any]] = {}
    for span in spans:
        parent = span.parent.span_id if span.parent is not None else None
        children.setdefault(parent if parent in number else None, []).append(span)
    shown_id = format(trace_id, "032x")
    lines = [f"trace {shown_id if shown_id == TRACE else '‹the trace id RUN_STARTED carries›'}"]

    def show(span: Any, lead: str, branch: str, rest: str) -> None:
        title = f"{lead}{branch}#{number[span.context.span_id]} {span.name}"
        lines.append(f"{title:<52} {span.kind.name}")
        body = lead + rest
        if span.parent is not None and span.parent.span_id not in number:
            lines.append(f"{body}    parent: {format(span.parent.span_id, '016x')} (the client's span)")
        words = span.name.split()  # attributes that only repeat the span's name are left out
        shown = [item for item in _attributes(span.attributes, labels) if item.partition("=")[2] not in words]
        if shown:
            lines.extend(_wrapped(f"{body}    ", "", shown))
        for event in span.events:
            lines.extend(
                _wrapped(f"{body}    ", f"event {event.name}", _attributes(event.attributes, labels))
            )
        for link in span.links:
            target = number.get(link.context.span_id, "?")
            lines.extend(_wrapped(f"{body}    ", f"link → #{target}", _attributes(link.attributes, labels)))
        kids = children.get(span.context.span_id, [])
        for index, child in enumerate(kids):
            last = index == len(kids) - 1
            show(child, body, "└── " if last else "├── ", "    " if last else "│   ")

    for root in children[None]:
        show(root, "", "", "")
    return "\n".join(lines)


def documented(name: str) -> str | None:
    """The tree docs/observability.md shows under ``<!-- trace: name -->``."""
    found = re.search(rf"<!-- trace: {re.escape(name)} -->\n```text\n(.*?)\n```", DOC.read_text(), re.DOTALL)
    return found.group(1) if found else None


def assert_documented(name: str, spans: list[Any], labels: dict[str, str] | None = None) -> None:
    shown = render(spans, labels)
    assert shown == documented(name), (
        f"docs/observability.md's trace {name!r} (under <!-- trace: {name} -->) "
        f"is out of date; it is now:\n{shown}"
    )


# --- the purchase approval workflow, an A2A task -------------------------------------------------------------


def a2a(url: str, message: dict, headers: dict[str, str]) -> dict:
    response = httpx.post(
        f"{url}/a2a",
        timeout=30,
        headers={"A2A-Version": "1.0", **headers},
        json={
            "jsonrpc": "2.0",
            "id": str(uuid.uuid4()),
            "method": "SendMessage",
            "params": {"message": message},
        },
    )
    assert response.status_code == 200, response.text
    return response.json()["result"]["task"]


def test_the_purchase_approval_workflow_over_a2a_is_one_trace(traced: tuple[Kit, str]) -> None:
    kit, url = traced
    admin = {"authorization": "Bearer admin-token"}
    asked = a2a(
        url,
        {
            "messageId": str(uuid.uuid4()),
            "role": "ROLE_USER",
            "metadata": {"skill": "approve_purchase"},
            "parts": [{"data": {"request_id": "PR-1001", "department": "engineering", "total": 898.0}}],
        },
        {**admin, "traceparent": TRACEPARENT},
    )
    assert asked["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", asked
    done = a2a(
        url,
        {
            "messageId": str(uuid.uuid4()),
            "role": "ROLE_USER",
            "taskId": asked["id"],
            "parts": [{"data": {"approved": True, "note": "ok"}}],
        },
        admin,
    )  # no traceparent
    assert done["status"]["state"] == "TASK_STATE_COMPLETED", done
    assert done["artifacts"][0]["parts"][0]["data"]["approved"] is True
    opened, follow_up = sorted(kit.named("SendMessage", 2), key=lambda s: s.start_time)
    spans = kit.finished()
    assert {format(s.context.trace_id, "032x") for s in spans} == {TRACE}
    [invocation] = kit.named("invoke_agent approve_purchase")
    assert opened.attributes["a2a.task.id"] == follow_up.attributes["a2a.task.id"] == asked["id"]
    assert invocation.parent.span_id == follow_up.parent.span_id == opened.context.span_id
    assert [link.context.span_id for link in follow_up.links] == [opened.context.span_id]
    assert_documented("approve_purchase over A2A", spans)


# --- the page's workflow: an AG-UI run, interrupted by the gate, resumed with the approval ------------------


def agui(url: str, body: dict) -> list[dict]:
    response = httpx.post(
        f"{url}/agui/procurement_assistant",
        json=body,
        timeout=30,
        headers={"authorization": "Bearer demo-token", "accept": "text/event-stream"},
    )
    assert response.status_code == 200, response.text
    return [json.loads(line[5:]) for line in response.text.splitlines() if line.startswith("data:")]


def run_body(thread: str, run: str, state: dict, **extra: Any) -> dict:
    return {
        "threadId": thread,
        "runId": run,
        "state": state,
        "tools": [],
        "context": [],
        "forwardedProps": {},
        "messages": [{"id": "user-1", "role": "user", "content": "Buy 2 monitors for engineering"}],
        **extra,
    }


def state_after(events: list[dict], state: dict) -> dict:
    """The shared state as a client holds it after ``events`` (a resume sends it back, as the page does)."""
    for event in events:
        if event["type"] == "STATE_SNAPSHOT":
            state = event["snapshot"]
        elif event["type"] == "STATE_DELTA":
            state = jsonpatch.apply_patch(state, event["delta"])
    return state


def test_the_pages_workflow_over_agui_is_one_trace(traced: tuple[Kit, str]) -> None:
    kit, url = traced
    # unique ids, as the page makes them (the example's agent, and its threads, outlive this test); shown as
    # thread-1, run-1 and run-2
    thread, first, second = (f"{name}-{uuid.uuid4()}" for name in ("thread", "run", "run"))
    labels = {thread: "thread-1", first: "run-1", second: "run-2"}
    asked = agui(
        url, run_body(thread, first, {})
    )  # the page sends no traceparent: the run's span is the root
    assert asked[0]["type"] == "RUN_STARTED" and asked[-1]["outcome"]["type"] == "interrupt", asked[-1]
    [interrupt] = asked[-1]["outcome"]["interrupts"]
    resumed = agui(
        url,
        run_body(
            thread,
            second,
            state_after(asked, {}),
            resume=[{"interruptId": interrupt["id"], "status": "resolved", "payload": {"approved": True}}],
        ),
    )
    assert resumed[-1]["outcome"] == {"type": "success"}, resumed[-1]
    answer = "".join(e["delta"] for e in resumed if e["type"] == "TEXT_MESSAGE_CONTENT")
    assert answer.startswith("Submitted PR-"), answer
    runs = sorted(
        (s for s in kit.named("invoke_agent procurement_assistant", 3) if s.kind is SpanKind.SERVER),
        key=lambda s: s.start_time,
    )
    assert len(runs) == 2
    spans = kit.finished()
    trace_id = format(runs[0].context.trace_id, "032x")
    # what the page shows: each run's RUN_STARTED carries the trace, the same for the run and its resume
    assert asked[0]["metadata"]["traceId"] == resumed[0]["metadata"]["traceId"] == trace_id
    assert asked[0]["metadata"]["spanId"] == format(runs[0].context.span_id, "016x")
    flags = format(runs[0].context.trace_flags, "02x")
    assert asked[0]["metadata"]["traceparent"] == f"00-{trace_id}-{asked[0]['metadata']['spanId']}-{flags}"
    assert {format(s.context.trace_id, "032x") for s in spans} == {trace_id}
    assert runs[0].parent is None and runs[1].parent.span_id == runs[0].context.span_id
    assert_documented("procurement_assistant over AG-UI", spans, labels)


# --- no SDK ---------------------------------------------------------------------------------------------------


def test_without_the_sdk_the_example_serves_untraced_and_says_why(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import examples.fastapi_app.main as example

    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "console")
    monkeypatch.setitem(sys.modules, "opentelemetry.sdk.trace", None)  # as if opentelemetry-sdk were absent
    with caplog.at_level(logging.WARNING, "examples.fastapi_app"):
        assert example._telemetry() is None
    [record] = caplog.records
    assert (
        "needs the OpenTelemetry SDK" in record.getMessage()
        and "serving without traces" in record.getMessage()
    )
    assert "example-otel" in record.getMessage()
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "none")
    assert example._telemetry() is None
