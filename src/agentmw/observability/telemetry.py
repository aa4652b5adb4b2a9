"""``Telemetry``: traces, business metrics and one log record per invocation, built on the hooks.

``Agent(telemetry=Telemetry(...))`` (or ``agent.use(Telemetry())``) turns it on; without it nothing here is
imported and a call pays one ``None`` check. Traces need the ``otel`` extra (``opentelemetry-api``) and a
tracer: the one given, or the global one once an SDK is installed; the Prometheus text
(``agent.metrics_app``) needs nothing. docs/observability.md has the spans, the metrics and the log record.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from typing import TYPE_CHECKING, Any, Literal, Protocol

from .._transport import ProtocolError
from ..safety.gate import NAMESPACE as APPROVALS_NAMESPACE
from .bounds import OTHER, attribute, known, label
from .hooks import Hook, Invocation
from .logs import InvocationLog
from .metrics import DEFAULT_BUCKETS, Counter, Gauge, Histogram, Registry

if TYPE_CHECKING:
    from ..outcomes import Outcome
    from ..state import State

__all__ = ["Observed", "Telemetry"]

logger = logging.getLogger("agentmw.observability")

_UNSET: Any = object()
_BREAKER = {"closed": 0.0, "half-open": 1.0, "open": 2.0}
EXECUTION_STATUSES = ("running", "parked", "dead")
"""The journaled executions counted by ``agentmw_executions`` (the unfinished ones, and the dead letters)."""
EXECUTIONS_REFRESH = 5.0
"""Seconds between two counts of the executions made by an invocation's end (a scrape always counts anew)."""
_A2A_SEND = frozenset(
    {"SendMessage", "SendStreamingMessage", "message/send", "message/stream", "send", "stream"}
)
# The method names the faces serve (mcp/methods.py HANDLERS; a2a/params.py OPERATION_OF_METHOD, its operations, and
# 0.3): a span is named after one of them only (bounds.py). Listed here, not imported, since a cross-cutting module
# never imports a face; tests/unit/test_telemetry_method_names.py checks they agree with the faces' tables.
_MCP_METHODS = frozenset(
    {
        "tools/list",
        "tools/call",
        "resources/list",
        "resources/templates/list",
        "resources/read",
        "prompts/list",
        "prompts/get",
        "completion/complete",
        "tasks/get",
        "tasks/update",
        "tasks/cancel",
        "tasks/result",
        "tasks/list",
        "skills/list",
        "skills/get",
        "resources/directory/read",
    }
)
_A2A_V10 = {
    "SendMessage": "send",
    "SendStreamingMessage": "stream",
    "GetTask": "get",
    "ListTasks": "list",
    "CancelTask": "cancel",
    "SubscribeToTask": "subscribe",
    "CreateTaskPushNotificationConfig": "push_create",
    "GetTaskPushNotificationConfig": "push_get",
    "ListTaskPushNotificationConfigs": "push_list",
    "DeleteTaskPushNotificationConfig": "push_delete",
    "GetExtendedAgentCard": "card",
}
_A2A_V03 = frozenset(
    {
        "message/send",
        "message/stream",
        "tasks/get",
        "tasks/cancel",
        "tasks/resubscribe",
        "tasks/pushNotificationConfig/set",
        "tasks/pushNotificationConfig/get",
        "tasks/pushNotificationConfig/list",
        "tasks/pushNotificationConfig/delete",
        "agent/getAuthenticatedExtendedCard",
    }
)

_A2A_METHODS = frozenset({*_A2A_V10, *_A2A_V10.values(), *_A2A_V03})
"""Every A2A method name the endpoint serves: 1.0 and 0.3 JSON-RPC methods, HTTP+JSON operations."""


class _Pending(Protocol):
    @property
    def state(self) -> State: ...


class _Pushed(Protocol):
    """The A2A push sender's counts (``a2a/push.py``)."""

    @property
    def delivered(self) -> int: ...
    @property
    def failed(self) -> int: ...


class _Breaker(Protocol):
    @property
    def state(self) -> str: ...


class _Peer(Protocol):
    """A bridged peer as the breaker gauge labels it (``bridges/_peer.py``)."""

    @property
    def name(self) -> str | None: ...
    @property
    def url(self) -> str: ...
    @property
    def protocol(self) -> str: ...
    @property
    def breaker(self) -> _Breaker: ...


class Observed(Protocol):
    """What telemetry reads from the agent it serves (``agent.py`` binds itself): its name and where the pending
    approvals are; when collected, the A2A push sender (None until the A2A face is built) and the bridged
    peers."""

    @property
    def name(self) -> str: ...
    @property
    def approvals(self) -> _Pending: ...
    @property
    def push_sender(self) -> _Pushed | None: ...
    @property
    def bridged_peers(self) -> Sequence[_Peer]: ...


def mcp_server_error(code: Any) -> bool:
    """Whether a JSON-RPC error code marks an MCP server span as failed: the MCP conventions count only
    ``-32603`` and the server-error range ``-32000``..``-32099``; a caller's mistake (``-32602`` invalid
    params, ``-32601``, ``-32002`` resource not found, ``-32700``, ``-32600``) is the request's fault."""
    return isinstance(code, int) and (code == -32603 or -32099 <= code <= -32000) and code != -32002


class Telemetry(Hook):
    """Traces, metrics and logs for one agent.

    Args:
        tracer_provider: an OpenTelemetry ``TracerProvider``; default: the global one, once an SDK set it.
        meter_provider: an OpenTelemetry ``MeterProvider`` the metrics are also recorded to; default: the
            global
            one, once an SDK set it (the Prometheus text never needs one).
        traces: False turns spans off; True makes them with the global provider even before an SDK is set.
        logs: one record per invocation on the ``agentmw.invocations`` logger (INFO; failures at WARNING).
        log_arguments: also log the validated arguments, with ``redact`` applied; off by default.
        redact: the argument names whose values are replaced by ``"[redacted]"`` (any depth, case-insensitive,
            a name containing one of them counts), or a function ``(arguments) -> arguments``.
        caller_key: the key of the caller hash (BLAKE2b): give one to keep identities unguessable from logs.
        buckets: the latency histogram's bucket bounds, in seconds.
    """

    def __init__(
        self,
        *,
        tracer_provider: Any = None,
        meter_provider: Any = None,
        traces: bool | None = None,
        logs: bool = True,
        log_arguments: bool = False,
        redact: Iterable[str] | Callable[[Mapping[str, Any]], Any] | None = None,
        caller_key: bytes | str = b"",
        buckets: Iterable[float] = DEFAULT_BUCKETS,
    ) -> None:
        self.agent: Observed | None = None
        self._tracer_provider = tracer_provider
        self._meter_provider = meter_provider
        self._traces_wanted = traces
        self._tracing: Any = _UNSET
        self._otel: Any = _UNSET
        self.log = InvocationLog(log_arguments=log_arguments, redact=redact) if logs else None
        self._caller_key = caller_key.encode() if isinstance(caller_key, str) else caller_key
        self._caller_hashes: dict[str, str] = {}
        self.in_flight = 0
        self.parked = 0
        self.approvals_pending = 0
        self.executions: dict[str, int] = dict.fromkeys(EXECUTION_STATUSES, 0)  # as last counted
        self._executions_counted = 0.0  # time.monotonic() of that count
        self._counting: asyncio.Task[None] | None = None  # a count under way, beside the invocations
        registry = self.registry = Registry()
        self.duration = registry.add(
            Histogram(
                "agentmw_invocation_duration_seconds",
                "End-to-end latency of an invocation, by capability and protocol",
                ("capability", "kind", "protocol"),
                tuple(buckets),
            )
        )
        self.outcomes = registry.add(
            Counter(
                "agentmw_invocation_outcomes",
                "Invocations by final status (agentmw.runtime.Status) and code",
                ("capability", "protocol", "status", "code"),
            )
        )
        self.protocol_errors = registry.add(
            Counter(
                "agentmw_protocol_errors",
                "Protocol errors answered, by protocol and the protocol's own code",
                ("protocol", "code"),
            )
        )
        self.idempotency = registry.add(
            Counter(
                "agentmw_idempotency_lookups",
                "Calls with an idempotency key: hit (the first outcome returned again) or miss (it ran)",
                ("result",),
            )
        )
        registry.add(
            Gauge(
                "agentmw_in_flight",
                "Invocations running now in this process",
                (),
                lambda: [((), float(self.in_flight))],
            )
        )
        registry.add(
            Gauge(
                "agentmw_parked",
                "Invocations in this process waiting for an answer (a question or a confirmation)",
                (),
                lambda: [((), float(self.parked))],
            )
        )
        registry.add(
            Gauge(
                "agentmw_approvals_pending",
                "Out-of-band approvals waiting for a decision (all replicas)",
                (),
                self._approvals,
            )
        )
        registry.add(
            Gauge(
                "agentmw_push_delivery_failures",
                "A2A push notifications given up on (this process)",
                (),
                lambda: self.pushes("failed"),
                kind="counter",
            )
        )
        registry.add(
            Gauge(
                "agentmw_push_deliveries",
                "A2A push notifications delivered (this process)",
                (),
                lambda: self.pushes("delivered"),
                kind="counter",
            )
        )
        registry.add(
            Gauge(
                "agentmw_executions",
                "Journaled executions in the store by status (all replicas): running, parked, dead (dead letters)",
                ("status",),
                self._executions_now,
            )
        )
        registry.add(
            Gauge(
                "agentmw_execution_takeovers",
                "Executions taken over by this process after their replica died or lost them",
                (),
                lambda: self.durability("takeovers"),
                kind="counter",
            )
        )
        registry.add(
            Gauge(
                "agentmw_execution_dead_letters",
                "Executions this process gave up as dead letters (past Limits.max_recovery_attempts)",
                (),
                lambda: self.durability("dead_letters"),
                kind="counter",
            )
        )
        registry.add(
            Gauge(
                "agentmw_step_retries",
                "Tries of a step (ctx.once, ctx.call with retry=) beyond its first, in this process",
                (),
                lambda: self.durability("retries"),
                kind="counter",
            )
        )
        registry.add(
            Gauge(
                "agentmw_steps_given_up",
                "Steps with a retry policy that still failed after more than one try, in this process",
                (),
                lambda: self.durability("gave_up"),
                kind="counter",
            )
        )
        registry.add(
            Gauge(
                "agentmw_bridge_breaker_state",
                "Each bridged peer's circuit breaker: 0 closed, 1 half-open, 2 open",
                ("peer", "protocol"),
                self.breakers,
            )
        )

    def bind(self, agent: Observed) -> None:
        if self.agent is not None and self.agent is not agent:
            raise ValueError("a Telemetry serves one agent")
        self.agent = agent

    # --- what is on -----------------------------------------------------------------------------------------
    @property
    def tracing(self) -> Any:
        """The :class:`~agentmw.observability.tracing.Tracing`, or None when spans are off (resolved once)."""
        found = self._tracing
        if found is _UNSET:
            found = self._tracing = self._resolve_tracing()
        return found

    def _resolve_tracing(self) -> Any:
        if self._traces_wanted is False:
            return None
        try:
            from opentelemetry import trace
        except ImportError:
            if self._traces_wanted:
                logger.warning("traces need the otel extra: pip install 'agentmw[otel]'")
            return None
        if (
            self._tracer_provider is None
            and not self._traces_wanted
            and isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)
        ):
            return None  # no SDK configured: no tracer, no cost
        from .tracing import Tracing  # it imports opentelemetry (the otel extra)

        return Tracing(self._tracer_provider)

    @property
    def otel(self) -> Any:
        """The OpenTelemetry instruments the metrics are mirrored to, or None."""
        found = self._otel
        if found is _UNSET:
            found = self._otel = self._resolve_otel()
        return found

    def _resolve_otel(self) -> Any:
        try:
            from opentelemetry import metrics
        except ImportError:
            return None
        provider = self._meter_provider
        if provider is None:
            provider = metrics.get_meter_provider()
            if type(provider).__name__ in ("_ProxyMeterProvider", "NoOpMeterProvider"):
                return None
        from .otel_metrics import Instruments  # it imports opentelemetry (the otel extra)

        return Instruments(provider.get_meter("agentmw"), self)

    # --- the hook -------------------------------------------------------------------------------------------
    def before(self, invocation: Invocation) -> None:  # type: ignore[override]
        self.in_flight += 1
        caller = invocation.caller
        if caller:
            invocation.data["caller_hash"] = self.caller_hash(caller)
        tracing = self.tracing
        if tracing is not None:
            tracing.start_invocation(invocation)
        otel = self.otel
        if otel is not None:
            otel.in_flight.add(1)

    def stage(self, invocation: Invocation, name: str, attributes: Mapping[str, Any]) -> None:
        if name == "agentmw.input.asked":
            self._park(invocation, 1)
        elif name in ("agentmw.input.answered", "agentmw.input.withdrawn"):
            self._park(invocation, -1)
        elif name == "agentmw.idempotency.hit":
            invocation.data["idempotency_hit"] = True
        if "span" in invocation.data:
            self.tracing.stage(invocation, name, attributes)

    def _park(self, invocation: Invocation, step: int) -> None:
        self.parked += step
        invocation.data["parked"] = invocation.data.get("parked", 0) + step
        otel = self.otel
        if otel is not None:
            otel.parked.add(step)

    def after(  # type: ignore[override]
        self, invocation: Invocation, outcome: Outcome
    ) -> Awaitable[None] | None:
        """Sync (no coroutine per call); a gated call's outcome also recounts the pending approvals."""
        self.in_flight -= 1
        left = invocation.data.get("parked", 0)
        if left:
            self.parked -= left
        elapsed = invocation.elapsed
        capability = invocation.capability
        status, code = str(outcome.status), str(outcome.code or "")
        labels = (capability.name, capability.kind, invocation.protocol)
        self.duration.observe(labels, elapsed)
        self.outcomes.inc((capability.name, invocation.protocol, status, code))
        hit = None
        if invocation.idempotency_key is not None and capability.side_effects:
            hit = "hit" if invocation.data.get("idempotency_hit") else "miss"
            self.idempotency.inc((hit,))
        otel = self.otel
        if otel is not None:
            otel.record(invocation, outcome, elapsed, hit, left)
        if self.log is not None:
            self.log.record(invocation, outcome, elapsed, self._trace_ids(invocation))
        if "span" in invocation.data:
            self.tracing.end_invocation(invocation, outcome)
        if time.monotonic() - self._executions_counted >= EXECUTIONS_REFRESH and self._counting is None:
            self._count_in_background()
        return self._refresh_approvals() if capability.gate is not None else None

    def _count_in_background(self) -> None:
        """Recount the executions (for the OpenTelemetry gauge) beside the invocations, never in their way."""
        self._executions_counted = time.monotonic()
        try:
            task = asyncio.get_running_loop().create_task(self.refresh_executions())
        except RuntimeError:  # no loop: a scrape counts them
            return
        self._counting = task
        task.add_done_callback(self._counted)

    def _counted(self, task: asyncio.Task[None]) -> None:
        self._counting = None

    def caller_hash(self, caller: str) -> str:
        found = self._caller_hashes.get(caller)
        if found is None:
            found = hashlib.blake2b(caller.encode(), key=self._caller_key, digest_size=8).hexdigest()
            if len(self._caller_hashes) > 10_000:
                self._caller_hashes.clear()
            self._caller_hashes[caller] = found
        return found

    @staticmethod
    def _trace_ids(invocation: Invocation) -> tuple[str, str] | None:
        span = invocation.data.get("span")
        if span is None:
            return None
        found = span.get_span_context()
        return format(found.trace_id, "032x"), format(found.span_id, "016x")

    # --- the faces ------------------------------------------------------------------------------------------
    def protocol_error(self, protocol: str, code: Any) -> None:
        """A protocol-level error answered (a JSON-RPC code, an A2A error, an AG-UI ``RUN_ERROR`` code or
        status)."""
        code = label(code)  # the protocol's own codes; a tool's made-up one is bounded as well
        self.protocol_errors.inc((protocol, code))
        otel = self.otel
        if otel is not None:
            otel.protocol_errors.add(1, {"agentmw.protocol": protocol, "agentmw.error.code": code})

    async def serve_mcp(
        self,
        call: Any,
        method: str,
        params: Any,
        request_id: Any,
        run: Callable[[], Awaitable[dict[str, Any]]],
    ) -> dict[str, Any]:
        """One MCP request (``mcp/methods.dispatch``), under its server span when tracing."""
        tracing = self.tracing
        if tracing is None:
            try:
                return await run()
            except ProtocolError as exc:
                self.protocol_error("mcp", exc.code)
                raise
        params = params if isinstance(params, dict) else {}
        name = known(method, _MCP_METHODS)  # names of what the server serves only (bounds.py)
        attributes: dict[str, Any] = {
            "mcp.method.name": name if name != OTHER else attribute(method),
            "mcp.protocol.version": call.version,
            "network.transport": "tcp",
            "network.protocol.name": "http",
        }
        if request_id is not None:
            attributes["jsonrpc.request.id"] = attribute(request_id)
        target = params.get("name")
        agent = call.agent
        if method == "tools/call" and isinstance(target, str):
            if target in agent.tools:
                name = f"{method} {target}"
            attributes["gen_ai.tool.name"] = attribute(target)
            attributes["gen_ai.operation.name"] = "execute_tool"
        elif method == "prompts/get" and isinstance(target, str):
            if target in agent.prompts:
                name = f"{method} {target}"
            attributes["gen_ai.prompt.name"] = attribute(target)
        elif method == "resources/read" and isinstance(params.get("uri"), str):
            attributes["mcp.resource.uri"] = attribute(params["uri"])
        for key, value in call.scope.get("headers") or ():
            if key == b"mcp-session-id":
                attributes["mcp.session.id"] = value.decode("latin-1")
        with tracing.server(
            name, call.scope, attributes, meta=params.get("_meta"), expected=ProtocolError
        ) as span:
            try:
                result = await run()
            except ProtocolError as exc:
                self.protocol_error("mcp", exc.code)
                span.set_attribute("rpc.response.status_code", str(exc.code))
                if mcp_server_error(exc.code):
                    span.set_attribute("error.type", str(exc.code))
                    tracing.error(span, exc.message)
                raise
            if result.get("isError") is True:
                span.set_attribute("error.type", "tool_error")
                tracing.error(span, "tool_error")
            return result

    def serving_a2a(self, scope: Any, method: str, request_id: Any, params: Any) -> Any:
        """The server span of one A2A request (a context manager; a no-op when not tracing)."""
        tracing = self.tracing
        if tracing is None:
            return nullcontext()
        params = params if isinstance(params, dict) else {}
        message = params.get("message") if isinstance(params.get("message"), dict) else {}
        task_id = message.get("taskId") or params.get("id") or params.get("taskId")
        name = known(method, _A2A_METHODS)  # names of what the server serves only (bounds.py)
        attributes: dict[str, Any] = {
            "a2a.method.name": name if name != OTHER else attribute(method),
            "network.protocol.name": "http",
            "gen_ai.agent.name": self.agent.name if self.agent else "",
        }
        if method in _A2A_SEND:
            attributes["gen_ai.operation.name"] = "invoke_agent"
        if request_id is not None:
            attributes["jsonrpc.request.id"] = attribute(request_id)
        follows = None
        if isinstance(task_id, str) and task_id:
            attributes["a2a.task.id"] = attribute(task_id)
            follows = ("a2a", task_id)
        if isinstance(message.get("contextId"), str):
            attributes["a2a.context.id"] = attribute(message["contextId"])
        return self._served(tracing, "a2a", name, scope, attributes, follows)

    def serving_agui(self, scope: Any, skill: str, run_input: Any) -> Any:
        """The server span of one AG-UI run (a context manager; a no-op when not tracing)."""
        tracing = self.tracing
        if tracing is None:
            return nullcontext()
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": skill,
            "agui.thread.id": attribute(run_input.thread_id),
            "agui.run.id": attribute(run_input.run_id),
            "network.protocol.name": "http",
        }
        resume = getattr(run_input, "resume", None)
        if resume:
            attributes["agui.resume"] = True
        return self._served(
            tracing, "agui", f"invoke_agent {skill}", scope, attributes, ("agui", run_input.thread_id)
        )

    @contextmanager
    def _served(
        self,
        tracing: Any,
        protocol: str,
        name: str,
        scope: Any,
        attributes: dict[str, Any],
        follows: tuple[str, str] | None,
    ) -> Iterator[Any]:
        with tracing.server(name, scope, attributes, follows=follows, expected=ProtocolError) as span:
            try:
                yield span
            except ProtocolError as exc:
                span.set_attribute("rpc.response.status_code", str(exc.code))
                span.set_attribute("error.type", str(exc.code))
                tracing.error(span, exc.message)
                raise

    def run_error(self, span: Any, code: str) -> None:
        """An AG-UI run that ended with ``RUN_ERROR`` ``code`` (or ``refused``, before it started): counted, and
        its server span (None when not tracing) failed."""
        self.protocol_error("agui", code)
        if span is not None:
            span.set_attribute("error.type", code)
            self.tracing.error(span, code)

    def anchor(self, kind: str, key: str, first: bool = False) -> None:
        """The current span begins task or thread ``key`` (its follow-ups and pushes link back to it)."""
        tracing = self.tracing
        if tracing is not None:
            tracing.anchor(kind, key, first)

    def run_metadata(self) -> dict[str, Any] | None:
        """What an AG-UI ``RUN_STARTED`` carries: the run's trace (None when not tracing)."""
        tracing = self.tracing
        return tracing.current() if tracing is not None else None

    def outbound_headers(self) -> dict[str, str]:
        """``traceparent`` for an outbound bridge call, from the current span (empty when not tracing)."""
        tracing = self.tracing
        return tracing.headers() if tracing is not None else {}

    @contextmanager
    def pushing(self, task_id: Any, url: str) -> Iterator[dict[str, str]]:
        """A push notification's CLIENT span, under the span that began the task; yields the headers to
        send."""
        tracing = self.tracing
        if tracing is None:
            yield {}
            return
        follows = ("a2a", task_id) if isinstance(task_id, str) else None
        with tracing.client(
            "A2A push",
            follows,
            {"a2a.task.id": str(task_id), "url.full": attribute(url), "http.request.method": "POST"},
        ):
            yield tracing.headers(follows)

    # --- gauges read when collected -------------------------------------------------------------------------
    async def _approvals(self) -> list[tuple[tuple[str, ...], float]]:
        await self._refresh_approvals()
        return [((), float(self.approvals_pending))]

    async def _refresh_approvals(self) -> None:
        agent = self.agent
        if agent is None:
            return
        try:
            page = await agent.approvals.state.scan(
                APPROVALS_NAMESPACE, where={"status": "pending"}, limit=1, total=True
            )
        except Exception:
            logger.exception("the pending approvals could not be counted")
            return
        self.approvals_pending = page.total or 0

    async def _executions_now(self) -> list[tuple[tuple[str, ...], float]]:
        await self.refresh_executions()
        return [((status,), float(count)) for status, count in self.executions.items()]

    async def refresh_executions(self) -> None:
        """Count the journaled executions in the agent's store by status (:data:`EXECUTION_STATUSES`), for
        ``agentmw_executions`` and ``agentmw.executions``; a store that cannot be read keeps the last count."""
        self._executions_counted = time.monotonic()
        agent = self.agent
        if agent is None:
            return
        from ..journal import JOURNAL_NS  # the journal only once executions are counted

        try:
            state = getattr(agent, "state", None)
            if state is None:
                return
            for status in EXECUTION_STATUSES:
                page = await state.scan(JOURNAL_NS, where={"status": status}, limit=1, total=True)
                self.executions[status] = page.total or 0
        except Exception:
            logger.exception("the journaled executions could not be counted")

    @staticmethod
    def durability(
        field: Literal["takeovers", "dead_letters", "retries", "gave_up"],
    ) -> list[tuple[tuple[str, ...], float]]:
        """This process's take-overs and dead letters (``agentmw.journal.STATS``) and step retries
        (``agentmw.retries.STATS``), as a counter gauge reads them."""
        if field in ("takeovers", "dead_letters"):
            from ..journal import STATS

            return [((), float(STATS.get(field, 0)))]
        from ..retries import STATS as RETRIES

        return [((), float(RETRIES.retries if field == "retries" else RETRIES.gave_up))]

    def pushes(self, field: Literal["delivered", "failed"]) -> list[tuple[tuple[str, ...], float]]:
        """The A2A push notifications this process ``"delivered"`` or gave up on (``"failed"``), as a gauge reads."""
        sender = self.agent.push_sender if self.agent is not None else None
        if sender is None:
            return [((), 0.0)]
        return [((), float(sender.delivered if field == "delivered" else sender.failed))]

    def breakers(self) -> list[tuple[tuple[str, ...], float]]:
        """Each bridged peer's breaker state by ``(peer, protocol)``: 0 closed, 1 half-open, 2 open."""
        peers = self.agent.bridged_peers if self.agent is not None else ()
        return [
            ((peer.name or peer.url, peer.protocol.lower()), _BREAKER.get(peer.breaker.state, 2.0))
            for peer in peers
        ]
