"""The pipeline's stages as span events, the gauges, the log record's trace id, and telemetry without the API.

With the real OpenTelemetry SDK (tests/observability/app.py's ``Kit``), over real sockets: a roots refusal, a
deadline and an out-of-band gate are events on the invocation's span; the pending approvals, the push delivery
failures and the bridge breaker state are gauges in both the Prometheus text (parsed by ``prometheus_client``)
and OpenTelemetry; an AG-UI run ending in ``RUN_ERROR`` fails its span; the log record carries the invocation
span's trace id.
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from opentelemetry.trace import StatusCode
from starlette.applications import Starlette
from starlette.requests import HTTPConnection, Request
from starlette.responses import JSONResponse
from starlette.routing import Mount, Route

from agentmw import Agent, AgentMiddleware
from agentmw.a2a.push import PushPolicy
from agentmw.a2a.settings import A2ASettings
from agentmw.observability.telemetry import mcp_server_error
from agentmw.safety import RootedPath, human_gate
from tests.conftest import serve
from tests.observability.app import Kit
from tests.test_observability_traces import a2a_message, prometheus, stateless_call
from tests.waiting import eventually


def identify(connection: HTTPConnection) -> str | None:
    _, _, token = connection.headers.get("authorization", "").partition(" ")
    return token or None


def build(kit: Kit, root: Path) -> tuple[Agent, Starlette]:
    agent = Agent(
        "stages",
        store="memory://",
        telemetry=kit.telemetry,
        roots=[str(root)],
        identify=identify,
        a2a=A2ASettings(push=PushPolicy(allow_private=True, max_attempts=1)),
    )

    @agent.tool
    async def read(path: RootedPath) -> str:
        """Read a file inside the roots."""
        return Path(path).read_text()

    @agent.tool(read_only=True, timeout=0.2)
    async def slow() -> str:
        """Never finishes in time."""
        await asyncio.sleep(30)
        return "late"

    @agent.tool
    @human_gate(side_effects="orders the item")
    async def order(item: str) -> str:
        """Order an item (a person approves first)."""
        return f"{item}: ordered"

    @agent.skill
    async def note(text: str) -> str:
        """Take a note."""
        return f"noted: {text}"

    @agent.skill
    async def broken(text: str) -> str:
        """Always fails."""
        raise RuntimeError("the ledger is down")

    app = Starlette(routes=[Mount("/metrics", agent.metrics_app)])
    app.add_middleware(AgentMiddleware, agent=agent)
    return agent, app


@pytest.fixture
def kit() -> Kit:
    return Kit()


@pytest.fixture
def served(kit: Kit, tmp_path: Path) -> Iterator[str]:
    (tmp_path / "inside.txt").write_text("hello")
    _, app = build(kit, tmp_path)
    with serve(app) as url:
        yield url


def call(url: str, name: str, arguments: dict, token: str | None = None) -> dict:
    """A stateless MCP ``tools/call`` whose HTTP status is the face's business (a refusal may be a 400)."""
    headers = {"authorization": f"Bearer {token}"} if token else {}
    try:
        return stateless_call(url, name, arguments, headers=headers)
    except AssertionError:
        return stateless_call(url, name, arguments, headers=headers, status=400)


def otel_value(kit: Kit, name: str) -> list[tuple[dict, float]]:
    return [(dict(point.attributes), point.value) for point in kit.metric(name)]


def test_roots_refusal_and_deadline_are_events_on_the_invocation_span(kit: Kit, served: str) -> None:
    reply = call(served, "read", {"path": "/etc/passwd"}, token="ann")
    assert reply["result"]["isError"] is True and "outside the allowed roots" in json.dumps(reply)
    reply = call(served, "slow", {}, token="ann")
    assert reply["result"]["isError"] is True
    refused = kit.one("execute_tool read")
    assert [e.name for e in refused.events] == ["agentmw.validation", "agentmw.roots.refused"]
    assert refused.events[1].attributes["agentmw.parameter"] == "path"
    assert refused.attributes["error.type"] == "root_violation"
    assert refused.status.status_code is StatusCode.ERROR
    late = kit.one("execute_tool slow")
    assert [e.name for e in late.events] == ["agentmw.validation", "agentmw.deadline.exceeded"]
    assert late.events[1].attributes["agentmw.timeout_s"] == 0.2
    assert late.attributes["error.type"] == "timeout" and late.attributes["agentmw.outcome.retryable"] is True
    samples = prometheus(served)["agentmw_invocation_outcomes_total"]
    refusal = (
        ("capability", "read"),
        ("code", "root_violation"),
        ("protocol", "mcp"),
        ("status", "rejected"),
    )
    assert samples[refusal] == 1
    assert (
        samples[(("capability", "slow"), ("code", "timeout"), ("protocol", "mcp"), ("status", "failed"))] == 1
    )


def test_an_out_of_band_gate_is_asked_and_counted_as_pending(kit: Kit, served: str) -> None:
    reply = call(served, "order", {"item": "desk"}, token="ann")  # a stateless client cannot be asked in band
    approval = reply["result"]["_meta"]["agentmw/approval"]["id"]
    gated = kit.one("execute_tool order")
    [asked] = [e for e in gated.events if e.name == "agentmw.gate.asked"]
    assert asked.attributes["agentmw.gate.mode"] == "out_of_band"
    assert asked.attributes["agentmw.approval.id"] == approval
    assert gated.attributes["agentmw.outcome.status"] == "awaiting_approval"
    assert prometheus(served)["agentmw_approvals_pending"][()] == 1
    assert otel_value(kit, "agentmw.approvals.pending") == [({}, 1)]


def test_the_log_record_carries_the_invocation_spans_trace(
    kit: Kit, served: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="agentmw.invocations"):
        call(served, "read", {"path": "inside.txt"}, token="ann")
    [record] = [r for r in caplog.records if r.name == "agentmw.invocations"]
    fields = record.agentmw  # type: ignore[attr-defined]
    span = kit.one("execute_tool read")
    assert fields["trace_id"] == format(span.context.trace_id, "032x")
    assert fields["span_id"] == format(span.context.span_id, "016x")
    assert fields["caller_hash"] == span.attributes["agentmw.caller.hash"] and "ann" not in json.dumps(fields)
    assert fields["outcome"] == "completed" and "arguments" not in fields


async def test_a_push_given_up_on_is_counted(kit: Kit, served: str) -> None:
    refused: list[str] = []

    async def receiver(request: Request) -> JSONResponse:
        refused.append(request.headers.get("traceparent", ""))
        return JSONResponse({"error": "gone"}, status_code=410)  # a refusal: no retry

    with serve(Starlette(routes=[Route("/hook", receiver, methods=["POST"])])) as hook:
        message = {**a2a_message("x"), "metadata": {"skill": "note"}, "parts": [{"data": {"text": "x"}}]}
        async with httpx.AsyncClient(timeout=30) as client:
            response = await client.post(
                f"{served}/a2a",
                headers={"A2A-Version": "1.0"},
                json={
                    "jsonrpc": "2.0",
                    "id": str(uuid.uuid4()),
                    "method": "SendMessage",
                    "params": {
                        "message": message,
                        "configuration": {
                            "taskPushNotificationConfig": {"url": f"{hook}/hook", "token": "t"}
                        },
                    },
                },
            )
        assert response.status_code == 200, response.text
        await eventually(
            lambda: prometheus(served)["agentmw_push_delivery_failures_total"][()] >= 1,
            "a push given up on",
            timeout=10,
        )
    assert refused and all(value.startswith("00-") for value in refused)  # each attempt carried a traceparent
    assert otel_value(kit, "agentmw.push.delivery_failures")[0][1] >= 1


def test_an_agui_run_that_ends_in_run_error_fails_its_span_and_is_counted(kit: Kit, served: str) -> None:
    body = {
        "threadId": "t-e",
        "runId": "r-e",
        "messages": [{"id": "u-e", "role": "user", "content": "x"}],
        "state": {},
        "tools": [],
        "context": [],
        "forwardedProps": {},
    }
    response = httpx.post(f"{served}/agui/broken", json=body, timeout=30)
    events = [json.loads(line[5:]) for line in response.text.splitlines() if line.startswith("data:")]
    assert events[0]["type"] == "RUN_STARTED" and events[-1]["type"] == "RUN_ERROR", events
    code = events[-1].get("code", "ERROR")
    [run] = [s for s in kit.named("invoke_agent broken", 2) if s.kind.name == "SERVER"]
    assert run.attributes["error.type"] == code and run.status.status_code is StatusCode.ERROR
    assert events[0]["metadata"]["traceId"] == format(run.context.trace_id, "032x")
    assert prometheus(served)["agentmw_protocol_errors_total"][(("code", code), ("protocol", "agui"))] == 1


def test_only_internal_and_server_range_codes_are_mcp_server_errors() -> None:
    assert [mcp_server_error(code) for code in (-32603, -32000, -32099, -32042)] == [True] * 4
    assert [mcp_server_error(code) for code in (-32700, -32600, -32601, -32602, -32002, -32100)] == [
        False
    ] * 6
