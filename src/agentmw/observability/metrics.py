"""The business metrics: kept in-process for the Prometheus text endpoint, mirrored to OpenTelemetry metrics.

The in-process registry needs no dependency: counters and histograms are dicts keyed by their label values,
written by the telemetry hook; gauges are read when the metrics are collected. ``MetricsApp`` serves them in
the Prometheus text exposition format (version 0.0.4) for ``GET``; docs/observability.md lists every metric.
"""

from __future__ import annotations

import inspect
import math
from bisect import bisect_left
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from .._types import Receive, Scope, Send
from .bounds import MAX_SERIES, OTHER, label

if TYPE_CHECKING:
    from .telemetry import Telemetry

__all__ = ["DEFAULT_BUCKETS", "Counter", "Gauge", "Histogram", "MetricsApp", "Registry"]

# seconds: a tool answering in a millisecond and a skill waiting minutes for a person both land in a bucket
DEFAULT_BUCKETS: tuple[float, ...] = (
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
    300.0,
    3600.0,
)

Labels = tuple[str, ...]


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _number(value: float) -> str:
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value == int(value) and abs(value) < 1e15:
        return str(int(value))
    return repr(float(value))


def _labels(names: Sequence[str], values: Sequence[str], extra: str = "") -> str:
    parts = [f'{name}="{_escape(value)}"' for name, value in zip(names, values, strict=True)]
    if extra:
        parts.append(extra)
    return "{" + ",".join(parts) + "}" if parts else ""


def _series(table: dict[Labels, Any], values: Labels) -> Labels:
    """The key a new label set is counted under: its bounded values (``bounds.label``), or all ``_OTHER`` once the
    metric holds ``MAX_SERIES`` sets, so no traffic can grow a metric without limit (docs/observability.md)."""
    if values in table:
        return values
    values = tuple(label(value) for value in values)
    if values in table or len(table) < MAX_SERIES:
        return values
    return (OTHER,) * len(values)


class Counter:
    kind = "counter"

    def __init__(self, name: str, help: str, labels: Sequence[str] = ()) -> None:
        self.name = name
        self.help = help
        self.labels = tuple(labels)
        self.values: dict[Labels, float] = {}

    def inc(self, values: Labels = (), amount: float = 1.0) -> None:
        values = _series(self.values, values)
        self.values[values] = self.values.get(values, 0.0) + amount

    def value(self, *values: str) -> float:
        return self.values.get(tuple(values), 0.0)

    def render(self) -> list[str]:
        return [
            f"{self.name}_total{_labels(self.labels, key)} {_number(v)}" for key, v in self.values.items()
        ]


class Histogram:
    kind = "histogram"

    def __init__(
        self, name: str, help: str, labels: Sequence[str] = (), buckets: Sequence[float] = DEFAULT_BUCKETS
    ) -> None:
        self.name = name
        self.help = help
        self.labels = tuple(labels)
        self.buckets = tuple(sorted(buckets))
        self.values: dict[
            Labels, list[float]
        ] = {}  # per bucket counts (not cumulative), then +Inf, sum, count

    def observe(self, values: Labels, amount: float) -> None:
        row = self.values.get(values)
        if row is None:
            values = _series(self.values, values)
            row = self.values.get(values)
            if row is None:
                row = self.values[values] = [0.0] * (len(self.buckets) + 3)
        row[bisect_left(self.buckets, amount)] += 1
        row[-2] += amount
        row[-1] += 1

    def count(self, *values: str) -> int:
        row = self.values.get(tuple(values))
        return int(row[-1]) if row else 0

    def render(self) -> list[str]:
        lines = []
        for key, row in self.values.items():
            running = 0.0
            for bound, amount in zip((*self.buckets, math.inf), row, strict=False):
                running += amount
                le = 'le="' + _number(bound) + '"'
                lines.append(f"{self.name}_bucket{_labels(self.labels, key, le)} {_number(running)}")
            lines.append(f"{self.name}_sum{_labels(self.labels, key)} {_number(row[-2])}")
            lines.append(f"{self.name}_count{_labels(self.labels, key)} {_number(row[-1])}")
        return lines


Reader = Callable[[], Iterable[tuple[Labels, float]] | Awaitable[Iterable[tuple[Labels, float]]]]


class Gauge:
    """A value read when the metrics are collected: ``read()`` gives ``(label values, value)`` pairs. ``kind``
    is ``counter`` for a total kept elsewhere (the push sender's failures)."""

    def __init__(
        self, name: str, help: str, labels: Sequence[str], read: Reader, kind: str = "gauge"
    ) -> None:
        self.name = name
        self.help = help
        self.labels = tuple(labels)
        self.read = read
        self.kind = kind
        self.last: list[tuple[Labels, float]] = []

    async def collect(self) -> list[tuple[Labels, float]]:
        found = self.read()
        if inspect.isawaitable(found):
            found = await found
        self.last = list(found)
        return self.last

    def render(self) -> list[str]:
        suffix = "_total" if self.kind == "counter" else ""
        return [f"{self.name}{suffix}{_labels(self.labels, key)} {_number(v)}" for key, v in self.last]


class Registry:
    """The metrics of one agent's telemetry."""

    def __init__(self) -> None:
        self.metrics: list[Counter | Histogram | Gauge] = []

    def add(self, metric: Any) -> Any:
        self.metrics.append(metric)
        return metric

    async def exposition(self) -> bytes:
        """Every metric in the Prometheus text format (gauges read now)."""
        lines: list[str] = []
        for metric in self.metrics:
            if isinstance(metric, Gauge):
                await metric.collect()
            name = (
                metric.name + "_total" if metric.kind == "counter" else metric.name
            )  # as 0.0.4 names a counter
            lines.append(f"# HELP {name} {_escape(metric.help)}")
            lines.append(f"# TYPE {name} {metric.kind}")
            lines.extend(metric.render())
        return ("\n".join(lines) + "\n").encode()


class MetricsApp:
    """``agent.metrics_app``: ``GET`` (or ``HEAD``) answers the Prometheus text; mount it where you choose."""

    CONTENT_TYPE = b"text/plain; version=0.0.4; charset=utf-8"

    def __init__(self, telemetry: Telemetry) -> None:
        self.telemetry = telemetry

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        if scope["method"] not in ("GET", "HEAD"):
            await send(
                {
                    "type": "http.response.start",
                    "status": 405,
                    "headers": [(b"allow", b"GET, HEAD"), (b"content-length", b"0")],
                }
            )
            await send({"type": "http.response.body", "body": b""})
            return
        body = await self.telemetry.registry.exposition()
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [
                    (b"content-type", self.CONTENT_TYPE),
                    (b"content-length", str(len(body)).encode()),
                    (b"cache-control", b"no-store"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": b"" if scope["method"] == "HEAD" else body})
