"""OpenTelemetry spans: a server span per request, a span per invocation, and the context that crosses faces.

Imported only when a :class:`~agentmw.observability.Telemetry` traces (the ``otel`` extra installed and a
tracer configured): nothing here runs, or is imported, otherwise. Attribute names follow the OpenTelemetry
semantic conventions for MCP and GenAI tool execution where they exist; docs/observability.md lists them all.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.trace import Link, NonRecordingSpan, SpanContext, SpanKind, StatusCode

from .._version import __version__
from .bounds import attribute

__all__ = ["TRACER_NAME", "Tracing"]

TRACER_NAME = "agentmw"
_ANCHORS = 10_000  # tasks and threads whose first span is remembered for their follow-ups (this process)
_OPERATION = {
    "tool": "execute_tool",
    "skill": "invoke_agent",
    "resource": "read_resource",
    "prompt": "get_prompt",
}


class _Headers:
    """The ``traceparent``/``tracestate`` of an ASGI scope's headers, as a propagator's carrier."""

    __slots__ = ("found",)

    def __init__(self, scope: Mapping[str, Any] | None) -> None:
        self.found: dict[str, str] = {}
        for name, value in (scope or {}).get("headers") or ():
            if name in (b"traceparent", b"tracestate", b"baggage"):
                self.found[name.decode()] = value.decode("latin-1")


class Tracing:
    """The spans of one agent's telemetry."""

    def __init__(self, tracer_provider: Any = None) -> None:
        provider = tracer_provider or trace.get_tracer_provider()
        self.tracer = provider.get_tracer(TRACER_NAME, __version__)
        self.anchors: OrderedDict[tuple[str, str], SpanContext] = OrderedDict()

    # --- context in -----------------------------------------------------------------------------------------
    def _parent(
        self, scope: Mapping[str, Any] | None, meta: Any, follows: tuple[str, str] | None, links: list[Link]
    ) -> Any:
        """The parent context of a server span: the MCP ``_meta`` trace context, else the HTTP ``traceparent``
        (unless an outer instrumentation's span is current: it already continues that), else the span that
        began the task or thread this request follows; ``links`` gets the transport's and the follower's."""
        parent = None
        ambient = trace.get_current_span().get_span_context().is_valid
        headers = None if ambient else _Headers(scope).found
        if isinstance(meta, dict) and "traceparent" in meta:
            extracted = propagate.extract({k: v for k, v in meta.items() if isinstance(v, str)})
            found = trace.get_current_span(extracted).get_span_context()
            if found.is_valid:
                parent = extracted
                transport = (
                    trace.get_current_span(propagate.extract(headers)).get_span_context() if headers else None
                )
                if transport is not None and transport.is_valid and transport.trace_id != found.trace_id:
                    links.append(Link(transport, {"agentmw.link": "transport"}))
        if parent is None and headers:
            extracted = propagate.extract(headers)
            if trace.get_current_span(extracted).get_span_context().is_valid:
                parent = extracted
        anchor = self.anchors.get(follows) if follows is not None else None
        if anchor is not None:
            kind = follows[0]  # type: ignore[index]
            links.append(Link(anchor, {"agentmw.link": "follows", "agentmw.follows": kind}))
            if parent is None and not ambient:
                parent = trace.set_span_in_context(NonRecordingSpan(anchor))
        return parent

    @contextmanager
    def server(
        self,
        name: str,
        scope: Mapping[str, Any] | None,
        attributes: dict[str, Any],
        *,
        meta: Any = None,
        follows: tuple[str, str] | None = None,
        expected: type[BaseException] | None = None,
    ) -> Iterator[Any]:
        """A SERVER span, current while the request is served; the caller sets the outcome's attributes (an
        ``expected`` exception, a protocol error it answered, is not recorded as an exception)."""
        links: list[Link] = []
        parent = self._parent(scope, meta, follows, links)
        client = (scope or {}).get("client")
        if client:
            attributes["client.address"] = client[0]
            attributes["client.port"] = client[1]
        span = self.tracer.start_span(
            name, context=parent, kind=SpanKind.SERVER, attributes=attributes, links=links
        )
        token = otel_context.attach(trace.set_span_in_context(span))
        try:
            yield span
        except Exception as exc:
            if expected is None or not isinstance(exc, expected):
                span.record_exception(exc)
                span.set_status(StatusCode.ERROR, type(exc).__name__)
            raise
        finally:
            otel_context.detach(token)
            span.end()

    @staticmethod
    def error(span: Any, description: str) -> None:
        span.set_status(StatusCode.ERROR, description)

    def anchor(self, kind: str, key: str, first: bool = False) -> None:
        """Remember the current span as the start of task or thread ``key``: its follow-ups link back to it
        (``first``: only if nothing began it yet)."""
        if first and (kind, key) in self.anchors:
            return
        span = trace.get_current_span()
        found = span.get_span_context()
        if found.is_valid:
            span.set_attribute(f"{kind}.{'task' if kind == 'a2a' else 'thread'}.id", attribute(key))
            anchors = self.anchors
            anchors[(kind, key)] = found
            anchors.move_to_end((kind, key))
            if len(anchors) > _ANCHORS:
                anchors.popitem(last=False)

    # --- context out ----------------------------------------------------------------------------------------
    def headers(self, follows: tuple[str, str] | None = None) -> dict[str, str]:
        """``traceparent`` (and ``tracestate``) for an outbound request: the current span's, else the span
        that
        began ``follows`` (a push sent later, from another task)."""
        carrier: dict[str, str] = {}
        if trace.get_current_span().get_span_context().is_valid:
            propagate.inject(carrier)
        elif follows is not None and follows in self.anchors:
            propagate.inject(carrier, trace.set_span_in_context(NonRecordingSpan(self.anchors[follows])))
        return carrier

    @contextmanager
    def client(self, name: str, follows: tuple[str, str] | None, attributes: dict[str, Any]) -> Iterator[Any]:
        """A CLIENT span for an outbound request made outside any request (a push), under the span that began
        ``follows``; its context is what the request carries."""
        parent = None
        anchor = self.anchors.get(follows) if follows is not None else None
        if anchor is not None and not trace.get_current_span().get_span_context().is_valid:
            parent = trace.set_span_in_context(NonRecordingSpan(anchor))
        with self.tracer.start_as_current_span(
            name, context=parent, kind=SpanKind.CLIENT, attributes=attributes
        ) as span:
            yield span

    @staticmethod
    def current() -> dict[str, str] | None:
        """The current span's ids, for a client to see (AG-UI ``RUN_STARTED`` metadata)."""
        found = trace.get_current_span().get_span_context()
        if not found.is_valid:
            return None
        carrier: dict[str, str] = {}
        propagate.inject(carrier)
        return {
            "traceId": format(found.trace_id, "032x"),
            "spanId": format(found.span_id, "016x"),
            "traceparent": carrier.get("traceparent", ""),
        }

    # --- invocations ----------------------------------------------------------------------------------------
    def start_invocation(self, invocation: Any) -> None:
        capability = invocation.capability
        operation = _OPERATION.get(capability.kind, capability.kind)
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": operation,
            "agentmw.capability.kind": capability.kind,
            "agentmw.capability.name": capability.name,
            "agentmw.protocol": invocation.protocol,
        }
        if capability.kind == "tool":
            attributes["gen_ai.tool.name"] = capability.name
            attributes["gen_ai.tool.type"] = "function"
        elif capability.kind == "skill":
            attributes["gen_ai.agent.name"] = capability.name
        elif capability.kind == "prompt":
            attributes["gen_ai.prompt.name"] = capability.name
        caller = invocation.data.get("caller_hash")
        if caller:
            attributes["agentmw.caller.hash"] = caller
        if invocation.idempotency_key is not None:
            attributes["agentmw.idempotency_key.present"] = True
        span = self.tracer.start_span(
            f"{operation} {capability.name}", kind=SpanKind.INTERNAL, attributes=attributes
        )
        invocation.data["span"] = span
        invocation.data["otel_token"] = otel_context.attach(trace.set_span_in_context(span))

    @staticmethod
    def stage(invocation: Any, name: str, attributes: Mapping[str, Any]) -> None:
        span = invocation.data.get("span")
        if span is not None:
            span.add_event(name, {k: v for k, v in attributes.items() if v is not None})

    @staticmethod
    def end_invocation(invocation: Any, outcome: Any) -> None:
        span = invocation.data.pop("span", None)
        if span is None:
            return
        span.set_attribute("agentmw.outcome.status", str(outcome.status))
        if outcome.code:
            span.set_attribute("agentmw.outcome.code", str(outcome.code))
        if outcome.status in ("failed", "rejected"):
            span.set_attribute("error.type", str(outcome.code or outcome.status))
            if outcome.retryable:
                span.set_attribute("agentmw.outcome.retryable", True)
            span.set_status(StatusCode.ERROR, str(outcome.code or outcome.status))
        token = invocation.data.pop("otel_token", None)
        if token is not None:
            otel_context.detach(token)  # OpenTelemetry logs a token of another context rather than raising
        span.end()
