"""Observability and hooks (docs/observability.md): ``agent.use(hook)`` runs code around every invocation;
:class:`Telemetry`, built on it, adds OpenTelemetry traces, the business metrics (also as Prometheus text) and
one log record per invocation. Nothing here is imported by agentmw unless an agent uses it."""

from .hooks import Hook, Invocation, Listing, current_invocation
from .telemetry import Telemetry

__all__ = ["Hook", "Invocation", "Listing", "Telemetry", "current_invocation"]
