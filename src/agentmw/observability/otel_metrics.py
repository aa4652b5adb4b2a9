"""The business metrics as OpenTelemetry instruments (imported only when a meter provider is configured).

Names follow OpenTelemetry's style (dots, units apart); docs/observability.md pairs each with its Prometheus
name.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from opentelemetry.metrics import CallbackOptions, Observation

if TYPE_CHECKING:
    from .telemetry import Telemetry

__all__ = ["Instruments"]


class Instruments:
    def __init__(self, meter: Any, telemetry: Telemetry) -> None:
        self.telemetry = telemetry
        self.duration = meter.create_histogram(
            "agentmw.invocation.duration",
            unit="s",
            description="End-to-end latency of an invocation",
            explicit_bucket_boundaries_advisory=list(telemetry.duration.buckets),
        )
        self.outcomes = meter.create_counter(
            "agentmw.invocation.outcomes", unit="{invocation}", description="Invocations by final status"
        )
        self.protocol_errors = meter.create_counter(
            "agentmw.protocol.errors", unit="{error}", description="Protocol errors answered, by code"
        )
        self.idempotency = meter.create_counter(
            "agentmw.idempotency.lookups",
            unit="{call}",
            description="Calls with an idempotency key: hit or miss",
        )
        self.in_flight = meter.create_up_down_counter(
            "agentmw.in_flight", unit="{invocation}", description="Invocations running now"
        )
        self.parked = meter.create_up_down_counter(
            "agentmw.parked", unit="{invocation}", description="Invocations waiting for an answer"
        )
        meter.create_observable_gauge(
            "agentmw.approvals.pending",
            [self._approvals],
            unit="{approval}",
            description="Out-of-band approvals waiting for a decision",
        )
        meter.create_observable_counter(
            "agentmw.push.delivery_failures",
            [self._push_failures],
            unit="{push}",
            description="A2A push notifications given up on",
        )
        meter.create_observable_gauge(
            "agentmw.executions",
            [self._executions],
            unit="{execution}",
            description="Journaled executions in the store by status: running, parked, dead",
        )
        for name, field, unit, description in (
            (
                "agentmw.execution.takeovers",
                "takeovers",
                "{execution}",
                "Executions taken over after their replica died",
            ),
            (
                "agentmw.execution.dead_letters",
                "dead_letters",
                "{execution}",
                "Executions given up as dead letters",
            ),
            (
                "agentmw.step.retries",
                "retries",
                "{try}",
                "Tries of a step with a retry policy beyond its first",
            ),
            (
                "agentmw.step.given_up",
                "gave_up",
                "{step}",
                "Steps with a retry policy that failed after their tries",
            ),
        ):
            meter.create_observable_counter(
                name, [self._durability(field)], unit=unit, description=description
            )
        meter.create_observable_gauge(
            "agentmw.bridge.breaker.state",
            [self._breakers],
            unit="1",
            description="Circuit breaker per bridged peer: 0 closed, 1 half-open, 2 open",
        )

    def record(self, invocation: Any, outcome: Any, elapsed: float, hit: str | None, parked: int) -> None:
        capability = invocation.capability
        attributes = {
            "agentmw.capability.name": capability.name,
            "agentmw.capability.kind": capability.kind,
            "agentmw.protocol": invocation.protocol,
        }
        self.duration.record(elapsed, attributes)
        self.outcomes.add(
            1,
            {
                **attributes,
                "agentmw.outcome.status": str(outcome.status),
                "agentmw.outcome.code": str(outcome.code or ""),
            },
        )
        self.in_flight.add(-1)
        if parked:
            self.parked.add(-parked)
        if hit is not None:
            self.idempotency.add(1, {"agentmw.idempotency.result": hit})

    def _approvals(self, options: CallbackOptions) -> Iterator[Observation]:
        yield Observation(
            self.telemetry.approvals_pending
        )  # as last counted (after a gated call, or a scrape)

    def _push_failures(self, options: CallbackOptions) -> Iterator[Observation]:
        for _, value in self.telemetry.pushes("failed"):
            yield Observation(value)

    def _executions(self, options: CallbackOptions) -> Iterator[Observation]:
        for (
            status,
            count,
        ) in self.telemetry.executions.items():  # as last counted (an invocation's end, a scrape)
            yield Observation(count, {"agentmw.execution.status": status})

    def _durability(self, field: Any) -> Callable[[CallbackOptions], Iterator[Observation]]:
        def read(options: CallbackOptions) -> Iterator[Observation]:
            for _, value in self.telemetry.durability(field):
                yield Observation(value)

        return read

    def _breakers(self, options: CallbackOptions) -> Iterator[Observation]:
        for (peer, protocol), value in self.telemetry.breakers():
            yield Observation(value, {"agentmw.bridge.peer": peer, "agentmw.bridge.protocol": protocol})
