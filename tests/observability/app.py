"""The agent the observability tests drive: a plain tool, a gated tool, a skill that asks, a failing tool."""

from __future__ import annotations

import contextlib
from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Mount, Route

from agentmw import Agent, AgentMiddleware, Context, Rejected
from agentmw.a2a.push import PushPolicy
from agentmw.a2a.settings import A2ASettings
from agentmw.observability import Telemetry
from agentmw.safety.gate import human_gate
from tests.waiting import wait_until


class Kit:
    """A real OpenTelemetry SDK with in-memory exporters, and the Telemetry that records to it."""

    def __init__(self, **options: Any) -> None:
        self.spans = InMemorySpanExporter()
        tracer_provider = TracerProvider()
        tracer_provider.add_span_processor(SimpleSpanProcessor(self.spans))
        self.reader = InMemoryMetricReader()
        self.telemetry = Telemetry(
            tracer_provider=tracer_provider,
            meter_provider=MeterProvider(metric_readers=[self.reader]),
            **options,
        )

    def finished(self) -> list[ReadableSpan]:
        return list(self.spans.get_finished_spans())

    def named(self, name: str, at_least: int = 0) -> list[ReadableSpan]:
        """The finished spans called ``name``, once there are ``at_least`` (a server span ends just after its
        response is sent: a client can read the response first)."""
        found: list[ReadableSpan] = []

        def enough() -> bool:
            found[:] = [s for s in self.finished() if s.name == name]
            return len(found) >= at_least

        with contextlib.suppress(AssertionError):  # the caller checks what was found
            wait_until(enough, f"{at_least} {name} spans", timeout=5)
        return found

    def one(self, name: str) -> ReadableSpan:
        found = self.named(name, 1)
        assert len(found) == 1, (name, [s.name for s in self.finished()])
        return found[0]

    def metric(self, name: str) -> list[Any]:
        """The data points of one OpenTelemetry metric, as the SDK's reader collects them now."""
        data = self.reader.get_metrics_data()
        return [
            point
            for resource in data.resource_metrics
            for scope in resource.scope_metrics
            for metric in scope.metrics
            if metric.name == name
            for point in metric.data.data_points
        ]


def build(telemetry: Telemetry | None, **settings: Any) -> tuple[Agent, Starlette]:
    agent = Agent(
        "obs-test",
        store="memory://",
        telemetry=telemetry,
        a2a=A2ASettings(push=PushPolicy(allow_private=True, max_attempts=1)),
        **settings,
    )

    @agent.tool
    async def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    @agent.tool
    @human_gate(side_effects="orders the item")
    async def buy(item: str) -> str:
        """Buy an item (a person approves first)."""
        return f"{item}: bought"

    @agent.tool
    async def refuse(reason: str) -> str:
        """Always refuses."""
        raise Rejected(f"no: {reason}")

    @agent.skill
    async def approve(item: str, ctx: Context) -> str:
        """Ask a person to approve the purchase of an item."""
        ok = await ctx.confirm(f"Buy {item}?", details={"item": item})
        return f"{item}: {'approved' if ok else 'declined'}"

    async def health(request: Any) -> PlainTextResponse:
        return PlainTextResponse("ok")

    app = Starlette(
        routes=[
            Route("/health", health),
            *([Mount("/metrics", agent.metrics_app)] if telemetry is not None else []),
        ]
    )
    app.add_middleware(AgentMiddleware, agent=agent)
    return agent, app
