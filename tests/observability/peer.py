"""A peer for the bridged-call trace test: an agentmw agent with telemetry, in its own uvicorn process.

Its spans go to the JSON-lines file named by ``$OBS_SPANS_FILE`` (one object per finished span), so the test
can see that the peer's server span continues the trace of the call that reached it through a bridge.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from agentmw import Agent, AgentMiddleware
from agentmw.observability import Telemetry


class JsonLines(SpanExporter):
    def __init__(self, path: str) -> None:
        self.path = path

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        with open(self.path, "a", encoding="utf-8") as out:
            out.writelines(
                json.dumps(
                    {
                        "name": span.name,
                        "kind": span.kind.name,
                        "trace_id": format(span.context.trace_id, "032x"),
                        "span_id": format(span.context.span_id, "016x"),
                        "parent_id": format(span.parent.span_id, "016x") if span.parent else None,
                    }
                )
                + "\n"
                for span in spans
            )
        return SpanExportResult.SUCCESS


def create_app() -> Any:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(JsonLines(os.environ["OBS_SPANS_FILE"])))
    agent = Agent("traced-peer", store="memory://", telemetry=Telemetry(tracer_provider=provider))

    @agent.tool
    async def shout(text: str) -> str:
        """Say it louder."""
        return text.upper()

    @agent.skill
    async def review(text: str) -> str:
        """Review a contract."""
        return f"reviewed: {text}"

    async def health(request: Any) -> PlainTextResponse:
        return PlainTextResponse("ok")

    app = Starlette(routes=[Route("/health", health)])
    app.add_middleware(AgentMiddleware, agent=agent)
    return app
