"""Bounds on what a client can put into telemetry: span names, attribute values and metric label values.

A tracing backend groups spans by name and a metrics backend keeps one series per label set, so a value a
client chooses (an unknown tool's name, a made-up method, a 20,000-character request id) must never become one
as it is. The rules (docs/observability.md, "Bounded names"):

- a span name, or a label, is built only from names the server serves (a registered capability, a method it
  implements); anything else is :data:`OTHER`, as the OpenTelemetry conventions spell an unknown HTTP method;
- an attribute value a client chose keeps at most :data:`MAX_ATTRIBUTE` characters;
- a metric keeps at most :data:`MAX_SERIES` label sets; later new ones are counted under :data:`OTHER` labels.
"""

from __future__ import annotations

from collections.abc import Container
from typing import Any, Final

__all__ = ["MAX_ATTRIBUTE", "MAX_LABEL", "MAX_SERIES", "OTHER", "attribute", "known", "label"]

OTHER: Final = "_OTHER"
MAX_ATTRIBUTE: Final = 256
MAX_LABEL: Final = 128
MAX_SERIES: Final = 1000


def known(name: Any, served: Container[str]) -> str:
    """``name`` when the server serves it, else :data:`OTHER`: what a span name or a label may contain."""
    return name if isinstance(name, str) and name in served else OTHER


def attribute(value: Any, limit: int = MAX_ATTRIBUTE) -> str:
    """An attribute value from the request, as a string of at most ``limit`` characters."""
    text = value if isinstance(value, str) else str(value)
    return text if len(text) <= limit else text[:limit]


def label(value: Any) -> str:
    """A metric label value: at most :data:`MAX_LABEL` characters (longer ones are :data:`OTHER`, never a prefix
    that several values would share)."""
    text = value if isinstance(value, str) else str(value)
    return text if len(text) <= MAX_LABEL else OTHER
