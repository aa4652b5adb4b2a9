"""Hooks around every invocation, the Prometheus text, the invocation log, and the cost of having none."""

from __future__ import annotations

import logging
import subprocess
import sys
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from agentmw import Agent, Rejected
from agentmw.observability import Hook, Invocation, Listing, Telemetry
from agentmw.runtime import Outcome, Status
from agentmw.testing import McpError, McpTestClient


def agent_with(*hooks: Any, **settings: Any) -> Agent:
    agent = Agent("hooks", store="memory://", **settings)

    @agent.tool
    async def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    @agent.tool
    async def login(user: str, password: str) -> str:
        """Log in."""
        return f"hello {user}"

    for hook in hooks:
        agent.use(hook)
    return agent


async def call(agent: Agent, name: str, arguments: dict) -> dict:
    async with McpTestClient(agent.asgi()) as client:
        return await client.request("tools/call", {"name": name, "arguments": arguments})


class Recorder(Hook):
    def __init__(self) -> None:
        self.seen: list[tuple[str, str, Any]] = []

    async def before(self, invocation: Invocation) -> None:
        self.seen.append(("before", invocation.name, dict(invocation.arguments)))

    async def after(self, invocation: Invocation, outcome: Outcome) -> None:
        self.seen.append(("after", invocation.name, outcome.status))


async def test_before_and_after_run_around_every_invocation_in_order() -> None:
    first, second = Recorder(), Recorder()
    order: list[str] = []
    first.before = lambda inv: order.append("first.before")  # type: ignore[method-assign]
    second.before = lambda inv: order.append("second.before")  # type: ignore[method-assign]
    first.after = lambda inv, out: order.append("first.after")  # type: ignore[method-assign]
    second.after = lambda inv, out: order.append("second.after")  # type: ignore[method-assign]
    agent = agent_with(first, second)
    result = await call(agent, "add", {"a": 1, "b": 2})
    assert result["structuredContent"] == {"result": 3}
    assert order == ["first.before", "second.before", "second.after", "first.after"]


async def test_before_sees_validated_arguments_and_after_sees_the_outcome() -> None:
    recorder = Recorder()
    agent = agent_with(recorder)
    await call(agent, "add", {"a": 1, "b": 2})
    await call(agent, "add", {"a": "x", "b": 2})
    assert recorder.seen[0] == ("before", "add", {"a": 1, "b": 2})
    assert recorder.seen[1] == ("after", "add", Status.COMPLETED)
    assert recorder.seen[3] == ("after", "add", Status.REJECTED)  # invalid arguments: refused after before


async def test_a_before_hook_denies_with_a_taxonomy_error_and_nothing_runs() -> None:
    ran: list[int] = []

    class Deny(Hook):
        async def before(self, invocation: Invocation) -> None:
            if invocation.arguments.get("a") == 13:
                raise Rejected("13 is not allowed here")

    recorder = Recorder()
    agent = agent_with(Deny(), recorder)
    original = agent.tools["add"].fn

    async def counting(a: int, b: int) -> int:
        ran.append(a)
        return await original(a, b)

    agent.tools["add"].fn = counting
    with pytest.raises(McpError, match="13 is not allowed here"):  # Rejected: MCP's protocol error
        await call(agent, "add", {"a": 13, "b": 1})
    assert ran == []  # nothing ran
    assert recorder.seen == [("after", "add", Status.REJECTED)]  # every hook's after sees the denial


async def test_a_failing_before_hook_fails_closed_and_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    class Broken(Hook):
        async def before(self, invocation: Invocation) -> None:
            raise RuntimeError("the policy service is down")

    agent = agent_with(Broken())
    with caplog.at_level(logging.ERROR, logger="agentmw.hooks"):
        result = await call(agent, "add", {"a": 1, "b": 2})
    assert result["isError"] is True and "was not run" in result["content"][0]["text"]
    assert "the policy service is down" not in str(
        result
    )  # the caller learns nothing of the hook's internals
    assert any("refused" in r.getMessage() and r.exc_info for r in caplog.records)


async def test_a_failing_after_hook_is_logged_and_the_outcome_stands(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Broken(Hook):
        async def after(self, invocation: Invocation, outcome: Outcome) -> None:
            raise RuntimeError("audit sink unavailable")

    agent = agent_with(Broken())
    with caplog.at_level(logging.ERROR, logger="agentmw.hooks"):
        result = await call(agent, "add", {"a": 1, "b": 2})
    assert result["structuredContent"] == {"result": 3}
    assert any("outcome stands" in r.getMessage() for r in caplog.records)


async def test_listing_hooks_filter_what_a_caller_is_shown() -> None:
    class HideLogin(Hook):
        def listing(self, listing: Listing) -> list[dict]:
            return [item for item in listing.items if item.get("name") != "login"]

    agent = agent_with(HideLogin())
    async with McpTestClient(agent.asgi()) as client:
        tools = await client.request("tools/list", {})
    assert [t["name"] for t in tools["tools"]] == ["add"]

    class Broken(Hook):
        def listing(self, listing: Listing) -> list[dict]:
            raise RuntimeError("boom")

    async with McpTestClient(agent_with(Broken()).asgi()) as client:
        assert (await client.request("tools/list", {}))["tools"] == []  # fails closed: nothing shown


async def test_prometheus_text_parses_with_prometheus_client() -> None:
    telemetry = Telemetry(traces=False)
    agent = agent_with(telemetry=telemetry)
    for a in range(3):
        await call(agent, "add", {"a": a, "b": 1})
    await call(agent, "add", {"a": "x", "b": 1})
    with pytest.raises(McpError, match="Unknown tool"):
        await call(agent, "nope", {})
    text = (await telemetry.registry.exposition()).decode()
    families = list(text_string_to_metric_families(text))
    kinds = {f.name: f.type for f in families}
    assert kinds["agentmw_invocation_duration_seconds"] == "histogram"
    assert (
        kinds["agentmw_invocation_outcomes"] == "counter"
        and kinds["agentmw_push_delivery_failures"] == "counter"
    )
    assert len(families) == len(kinds)  # each metric is one family
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value for f in families for s in f.samples}
    labels = (("capability", "add"), ("kind", "tool"), ("protocol", "mcp"))
    assert samples[("agentmw_invocation_duration_seconds_count", labels)] == 4
    assert (
        samples[
            (
                "agentmw_invocation_duration_seconds_bucket",
                (*labels[:1], ("kind", "tool"), ("le", "+Inf"), ("protocol", "mcp")),
            )
        ]
        == 4
    )
    assert (
        samples[
            (
                "agentmw_invocation_outcomes_total",
                (("capability", "add"), ("code", ""), ("protocol", "mcp"), ("status", "completed")),
            )
        ]
        == 3
    )
    assert samples[("agentmw_protocol_errors_total", (("code", "-32602"), ("protocol", "mcp")))] == 1
    assert samples[("agentmw_in_flight", ())] == 0
    assert samples[("agentmw_approvals_pending", ())] == 0
    assert ("agentmw_push_delivery_failures_total", ()) in samples


async def test_one_log_record_per_invocation_arguments_only_when_asked_and_redacted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.INFO, logger="agentmw.invocations"):
        await call(
            agent_with(telemetry=Telemetry(traces=False)), "login", {"user": "ann", "password": "hunter2"}
        )
        await call(
            agent_with(telemetry=Telemetry(traces=False, log_arguments=True)),
            "login",
            {"user": "ann", "password": "hunter2"},
        )
    records = [r for r in caplog.records if r.name == "agentmw.invocations"]
    plain, logged = [r.agentmw for r in records]  # type: ignore[attr-defined]
    assert "arguments" not in plain and "hunter2" not in str(plain)
    assert logged["arguments"] == {"user": "ann", "password": "[redacted]"}
    for fields in (plain, logged):
        assert (
            fields["capability"] == "login"
            and fields["protocol"] == "mcp"
            and fields["outcome"] == "completed"
        )
        assert fields["duration_ms"] >= 0 and len(fields["caller_hash"]) == 16 and "trace_id" in fields
    assert "hunter2" not in caplog.text


def one_call_in_a_fresh_interpreter(setup: str, agent_options: str, then: str, report: str) -> str:
    """What a new Python prints after ``setup``, one MCP call to an agent made with ``agent_options``, ``then``
    (awaited code, after the call) and ``report`` (an expression printed last)."""
    code = (
        "import asyncio, sys\n"
        f"{setup}"
        "from agentmw import Agent\n"
        "from agentmw.testing import McpTestClient\n"
        f"agent = Agent('plain', store='memory://'{agent_options})\n"
        "@agent.tool\n"
        "async def add(a: int, b: int) -> int:\n"
        "    '''Add.'''\n"
        "    return a + b\n"
        "async def main():\n"
        "    async with McpTestClient(agent.asgi()) as c:\n"
        "        r = await c.request('tools/call', {'name': 'add', 'arguments': {'a': 1, 'b': 2}})\n"
        "        assert r['structuredContent'] == {'result': 3}\n"
        f"{then}"
        "asyncio.run(main())\n"
        f"print({report})\n"
    )
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout


def test_an_agent_without_telemetry_imports_neither_opentelemetry_nor_the_observability_package() -> None:
    out = one_call_in_a_fresh_interpreter(
        "",
        "",
        "",
        "sorted(m for m in sys.modules if m.startswith(('opentelemetry', 'agentmw.observability')))",
    )
    assert out.strip() == "[]"
    assert agent_with()._hooks is None


def test_without_opentelemetry_a_telemetry_still_counts_and_makes_no_span() -> None:
    out = one_call_in_a_fresh_interpreter(
        "sys.modules['opentelemetry'] = None  # as if opentelemetry-api were not installed\n"
        "from agentmw.observability import Telemetry\n"
        "telemetry = Telemetry()\n",
        ", telemetry=telemetry",
        "    print((await telemetry.registry.exposition()).decode())\n",
        "(telemetry.tracing, telemetry.otel, sorted(m for m in sys.modules"
        " if m.startswith('opentelemetry') and sys.modules[m] is not None))",
    )
    text, _, last = out.strip().rpartition("\n")
    assert (
        last == "(None, None, [])"
    )  # no tracer, no OpenTelemetry metrics, nothing of opentelemetry imported
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }
    key = (("capability", "add"), ("code", ""), ("protocol", "mcp"), ("status", "completed"))
    assert samples[("agentmw_invocation_outcomes_total", key)] == 1


async def test_the_audit_log_example_records_every_call_and_refuses_denied_callers(tmp_path) -> None:
    import json as _json

    from examples.audit_hook import AuditLog

    path = tmp_path / "audit.jsonl"
    agent = agent_with(
        AuditLog(path, deny_callers={"mallory"}), identify=lambda request: request.headers.get("x-user")
    )
    async with McpTestClient(agent.asgi(), headers={"x-user": "ann"}) as client:
        await client.request("tools/call", {"name": "login", "arguments": {"user": "ann", "password": "pw"}})
    async with McpTestClient(agent.asgi(), headers={"x-user": "mallory"}) as client:
        with pytest.raises(McpError, match="mallory may not call add"):
            await client.request("tools/call", {"name": "add", "arguments": {"a": 1, "b": 2}})
    ann, mallory = [_json.loads(line) for line in path.read_text().splitlines()]
    assert ann["caller"] == "ann" and ann["capability"] == "login" and ann["outcome"] == "completed"
    assert ann["arguments"] == {"user": "ann", "password": "[redacted]"} and ann["protocol"] == "mcp"
    assert (
        mallory["caller"] == "mallory" and mallory["outcome"] == "rejected" and mallory["code"] == "rejected"
    )
