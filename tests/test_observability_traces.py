"""Traces and metrics with the real OpenTelemetry SDK and its in-memory exporters, over real sockets.

Each test drives one face with a real client and checks that the spans form one trace, with the right parents
and links, and that the metrics (OpenTelemetry's and the Prometheus text, parsed by prometheus_client)
count it.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx
import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from opentelemetry.trace import SpanKind, StatusCode
from prometheus_client.parser import text_string_to_metric_families
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from tests.conftest import serve
from tests.observability.app import Kit, build
from tests.waiting import eventually

MODERN = "2026-07-28"
TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE}-{PARENT}-01"
OTHER = f"00-{'1' * 32}-{'2' * 16}-01"  # a transport's context, distinct from the message's


def hex_trace(span: Any) -> str:
    return format(span.context.trace_id, "032x")


def hex_span(span_context: Any) -> str:
    return format(span_context.span_id, "016x")


def prometheus(url: str) -> dict[str, Any]:
    """The /metrics text, parsed by the real prometheus_client parser: {sample: {labels: value}}."""
    text = httpx.get(f"{url}/metrics/").text
    samples: dict[str, dict[tuple, float]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = sample.value
    return samples


def stateless_call(
    url: str,
    name: str,
    arguments: dict,
    meta: dict | None = None,
    headers: dict | None = None,
    status: int = 200,
) -> dict:
    body = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {
            "name": name,
            "arguments": arguments,
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": MODERN,
                "io.modelcontextprotocol/clientCapabilities": {},
                **(meta or {}),
            },
        },
    }
    response = httpx.post(
        f"{url}/mcp",
        content=json.dumps(body),
        headers={
            "content-type": "application/json",
            "accept": "application/json, text/event-stream",
            "mcp-protocol-version": MODERN,
            "mcp-method": "tools/call",
            "mcp-name": name,
            **(headers or {}),
        },
    )
    assert response.status_code == status, response.text
    return response.json()


@pytest.fixture
def kit() -> Kit:
    return Kit()


@pytest.fixture
def served(kit: Kit):
    agent, app = build(kit.telemetry)
    with serve(app) as url:
        yield agent, url


# --- MCP ---------------------------------------------------------------------------------------------------


def test_mcp_call_continues_the_meta_trace_and_links_the_transport(kit: Kit, served) -> None:
    _, url = served
    reply = stateless_call(url, "add", {"a": 2, "b": 3}, {"traceparent": TRACEPARENT}, {"traceparent": OTHER})
    assert reply["result"]["structuredContent"] == {"result": 5}
    server = kit.one("tools/call add")
    invocation = kit.one("execute_tool add")
    assert server.kind is SpanKind.SERVER and invocation.kind is SpanKind.INTERNAL
    assert hex_trace(server) == TRACE and hex_span(server.parent) == PARENT and server.parent.is_remote
    assert [hex_span(link.context) for link in server.links] == ["2" * 16]  # the HTTP traceparent, linked
    assert invocation.parent.span_id == server.context.span_id and hex_trace(invocation) == TRACE
    assert server.attributes["mcp.method.name"] == "tools/call"
    assert server.attributes["gen_ai.tool.name"] == "add" and server.attributes["jsonrpc.request.id"] == "7"
    assert server.attributes["mcp.protocol.version"] == MODERN
    assert invocation.attributes["gen_ai.operation.name"] == "execute_tool"
    assert invocation.attributes["agentmw.outcome.status"] == "completed"
    assert [e.name for e in invocation.events] == ["agentmw.validation"]
    assert invocation.events[0].attributes["agentmw.valid"] is True
    [duration] = kit.metric("agentmw.invocation.duration")
    assert duration.count == 1 and duration.attributes["agentmw.capability.name"] == "add"
    samples = prometheus(url)
    key = (("capability", "add"), ("code", ""), ("protocol", "mcp"), ("status", "completed"))
    assert samples["agentmw_invocation_outcomes_total"][key] == 1
    assert (
        samples["agentmw_invocation_duration_seconds_count"][
            (("capability", "add"), ("kind", "tool"), ("protocol", "mcp"))
        ]
        == 1
    )
    assert samples["agentmw_in_flight"][()] == 0


def test_mcp_failures_and_idempotency_hits_are_spans_and_metrics(kit: Kit, served) -> None:
    _, url = served
    bad = stateless_call(url, "add", {"a": "x", "b": 1})
    assert bad["result"]["isError"] is True or "error" in bad
    key = {"agentmw/idempotencyKey": "k-1"}
    first = stateless_call(url, "add", {"a": 1, "b": 1}, key)
    again = stateless_call(url, "add", {"a": 1, "b": 1}, key)
    assert first["result"] == again["result"]
    refused = stateless_call(url, "refuse", {"reason": "policy"}, status=400)
    assert refused["error"]["code"] == -32602  # Rejected is a protocol error on MCP
    invalid = [
        s for s in kit.named("execute_tool add") if s.attributes["agentmw.outcome.status"] == "rejected"
    ]
    assert len(invalid) == 1 and invalid[0].status.status_code is StatusCode.ERROR
    assert invalid[0].attributes["error.type"] == "invalid_arguments"
    hits = [
        s for s in kit.named("execute_tool add") if any(e.name == "agentmw.idempotency.hit" for e in s.events)
    ]
    assert len(hits) == 1
    server = kit.one("tools/call refuse")
    assert server.attributes["rpc.response.status_code"] == "-32602"
    # the MCP conventions: -32602 is the caller's mistake, not a server error (the invocation span shows it)
    assert server.status.status_code is StatusCode.UNSET and "error.type" not in server.attributes
    [refusal] = kit.named("execute_tool refuse")
    assert refusal.status.status_code is StatusCode.ERROR and refusal.attributes["error.type"] == "rejected"
    samples = prometheus(url)
    assert samples["agentmw_idempotency_lookups_total"] == {(("result", "hit"),): 1, (("result", "miss"),): 1}
    assert samples["agentmw_protocol_errors_total"][(("code", "-32602"), ("protocol", "mcp"))] == 1
    rejected = (
        ("capability", "add"),
        ("code", "invalid_arguments"),
        ("protocol", "mcp"),
        ("status", "rejected"),
    )
    assert samples["agentmw_invocation_outcomes_total"][rejected] == 1
    assert {
        p.attributes["agentmw.idempotency.result"]: p.value for p in kit.metric("agentmw.idempotency.lookups")
    } == {"hit": 1, "miss": 1}


async def test_mcp_gate_asked_and_decided_in_band(kit: Kit, served) -> None:
    _, url = served
    asked: list[str] = []

    async def approve(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"approved": True})

    http = httpx2.AsyncClient(timeout=30)
    async with Client(
        streamable_http_client(f"{url}/mcp", http_client=http),
        mode="legacy",
        cache=None,
        elicitation_callback=approve,
    ) as client:
        result = await client.call_tool("buy", {"item": "laptop"})
    assert not result.is_error and asked
    invocation = kit.one("execute_tool buy")
    names = [e.name for e in invocation.events]
    assert names == [
        "agentmw.validation",
        "agentmw.gate.asked",
        "agentmw.input.asked",
        "agentmw.input.answered",
        "agentmw.gate.decided",
    ]
    assert invocation.events[-1].attributes["agentmw.gate.approved"] is True
    server = kit.one("tools/call buy")
    assert invocation.parent.span_id == server.context.span_id
    assert server.attributes["mcp.session.id"]
    assert prometheus(url)["agentmw_parked"][()] == 0


# --- A2A ----------------------------------------------------------------------------------------------------


def a2a(url: str, method: str, params: dict, headers: dict | None = None) -> dict:
    response = httpx.post(
        f"{url}/a2a",
        json={"jsonrpc": "2.0", "id": str(uuid.uuid4()), "method": method, "params": params},
        headers={"A2A-Version": "1.0", **(headers or {})},
        timeout=30,
    )
    assert response.status_code == 200, response.text
    return response.json()


def a2a_message(text: str, task_id: str | None = None, **data: Any) -> dict:
    parts: list[dict] = [{"text": text}]
    if data:
        parts.append({"data": data})
    message: dict = {
        "messageId": str(uuid.uuid4()),
        "role": "ROLE_USER",
        "parts": parts,
        "metadata": {"skill": "approve"},
    }
    if task_id:
        message["taskId"] = task_id
    return message


def test_a2a_task_across_a_follow_up_is_one_trace(kit: Kit, served) -> None:
    _, url = served
    first = a2a(url, "SendMessage", {"message": a2a_message("laptop")}, {"traceparent": TRACEPARENT})
    task = first["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert prometheus(url)["agentmw_parked"][()] == 1
    done = a2a(
        url,
        "SendMessage",
        {
            "message": a2a_message("yes", task["id"], approved=True),
            "configuration": {"returnImmediately": False},
        },
    )
    assert done["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED", done
    opened, follow_up = sorted(kit.named("SendMessage", 2), key=lambda s: s.start_time)
    invocation = kit.one("invoke_agent approve")
    assert hex_trace(opened) == hex_trace(follow_up) == hex_trace(invocation) == TRACE
    assert hex_span(opened.parent) == PARENT
    assert (
        invocation.parent.span_id == opened.context.span_id
    )  # the task runs under the request that began it
    # the follow-up came without a traceparent: it continues the task's trace and links back to where it began
    assert follow_up.parent.span_id == opened.context.span_id
    assert [link.context.span_id for link in follow_up.links] == [opened.context.span_id]
    assert follow_up.links[0].attributes["agentmw.link"] == "follows"
    assert opened.attributes["a2a.task.id"] == task["id"] == follow_up.attributes["a2a.task.id"]
    assert [e.name for e in invocation.events][1:] == ["agentmw.input.asked", "agentmw.input.answered"]
    samples = prometheus(url)
    assert samples["agentmw_parked"][()] == 0 and samples["agentmw_in_flight"][()] == 0
    key = (("capability", "approve"), ("code", ""), ("protocol", "a2a"), ("status", "completed"))
    assert samples["agentmw_invocation_outcomes_total"][key] == 1


async def test_push_notification_carries_the_tasks_traceparent(kit: Kit, served) -> None:
    _, url = served
    received: list[dict] = []

    async def hook(request: Request) -> JSONResponse:
        received.append(dict(request.headers))
        return JSONResponse({})

    with serve(Starlette(routes=[Route("/hook", hook, methods=["POST"])])) as receiver:
        message = {
            "messageId": str(uuid.uuid4()),
            "role": "ROLE_USER",
            "parts": [{"data": {"a": 1, "b": 2}}],
            "metadata": {"skill": "approve"},
        }
        first = a2a(
            url,
            "SendMessage",
            {
                "message": a2a_message("desk"),
                "configuration": {"taskPushNotificationConfig": {"url": f"{receiver}/hook", "token": "t"}},
            },
            {"traceparent": TRACEPARENT},
        )
        del message
        task_id = first["result"]["task"]["id"]
        await eventually(lambda: received, "a push notification")
    pushes = kit.named("A2A push", 1)
    assert pushes and all(p.kind is SpanKind.CLIENT for p in pushes)
    opened = kit.one("SendMessage")
    traceparent = received[0]["traceparent"]
    version, trace_id, parent_id, _flags = traceparent.split("-")
    assert trace_id == TRACE and version == "00"
    assert parent_id in {hex_span(p.context) for p in pushes}  # the push's own span is the receiver's parent
    assert all(
        p.parent.span_id == opened.context.span_id for p in pushes
    )  # under the span that began the task
    assert pushes[0].attributes["a2a.task.id"] == task_id
    assert prometheus(url)["agentmw_push_deliveries_total"][()] >= 1


# --- AG-UI --------------------------------------------------------------------------------------------------


def agui(url: str, body: dict, headers: dict | None = None) -> list[dict]:
    response = httpx.post(f"{url}/agui/approve", json=body, headers=headers or {}, timeout=30)
    assert response.status_code == 200, response.text
    return [json.loads(line[5:]) for line in response.text.splitlines() if line.startswith("data:")]


def run_body(thread: str, run: str, **extra: Any) -> dict:
    return {
        "threadId": thread,
        "runId": run,
        "messages": [{"id": f"u-{run}", "role": "user", "content": "chair"}],
        "state": {},
        "tools": [],
        "context": [],
        "forwardedProps": {},
        **extra,
    }


def test_agui_run_with_an_interrupt_and_a_resume_is_one_trace(kit: Kit, served) -> None:
    _, url = served
    asked = agui(url, run_body("t-1", "r-1"), {"traceparent": TRACEPARENT})
    assert asked[0]["type"] == "RUN_STARTED" and asked[-1]["outcome"]["type"] == "interrupt"
    assert asked[0]["metadata"]["traceId"] == TRACE
    [interrupt] = asked[-1]["outcome"]["interrupts"]
    resumed = agui(
        url,
        run_body(
            "t-1",
            "r-2",
            resume=[{"interruptId": interrupt["id"], "status": "resolved", "payload": {"approved": True}}],
        ),
    )
    assert resumed[-1]["outcome"] == {"type": "success"}
    assert resumed[0]["metadata"]["traceId"] == TRACE  # the resume joins the run's trace
    spans = kit.named("invoke_agent approve", 3)  # two runs and the one invocation they carry
    runs = sorted([s for s in spans if s.kind is SpanKind.SERVER], key=lambda s: s.start_time)
    [invocation] = [s for s in spans if s.kind is SpanKind.INTERNAL]
    assert len(runs) == 2
    opened, resume = runs
    assert hex_span(opened.parent) == PARENT and hex_trace(resume) == TRACE
    assert resume.parent.span_id == opened.context.span_id
    assert [link.context.span_id for link in resume.links] == [opened.context.span_id]
    assert resume.attributes["agui.resume"] is True
    assert asked[0]["metadata"]["spanId"] == hex_span(opened.context)
    assert invocation.parent.span_id == opened.context.span_id
    assert invocation.attributes["agentmw.outcome.status"] == "completed"
    assert "agentmw.input.answered" in [e.name for e in invocation.events]
    key = (("capability", "approve"), ("code", ""), ("protocol", "agui"), ("status", "completed"))
    assert prometheus(url)["agentmw_invocation_outcomes_total"][key] == 1


# --- one interaction, three faces ---------------------------------------------------------------------------


def test_one_interaction_across_mcp_a2a_and_agui_shares_one_root(kit: Kit, served) -> None:
    _, url = served
    headers = {"traceparent": TRACEPARENT}
    stateless_call(url, "add", {"a": 1, "b": 2}, headers=headers)
    a2a(url, "SendMessage", {"message": a2a_message("lamp")}, headers)
    agui(url, run_body("t-x", "r-x"), headers)
    for name in ("tools/call add", "SendMessage", "invoke_agent approve"):
        kit.named(name, 1)
    servers = [s for s in kit.finished() if s.kind is SpanKind.SERVER]
    assert {s.name for s in servers} == {"tools/call add", "SendMessage", "invoke_agent approve"}
    assert {hex_trace(s) for s in kit.finished()} == {TRACE}
    assert {hex_span(s.parent) for s in servers} == {PARENT}  # one root: the caller's span
