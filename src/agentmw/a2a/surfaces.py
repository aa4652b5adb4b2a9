"""A2UI on A2A (docs/a2ui.md): the extension on the card, its activation, and surfaces as data parts.

The card declares ``https://a2ui.org/a2a-extension/a2ui/v0.9`` (``required: false``) when a skill says it
answers with A2UI (``@skill(output_modes=(..., a2ui.MIME_TYPE))``). A client activates it by naming the URI in
the ``A2A-Extensions`` header (``X-A2A-Extensions`` in 0.3), in the message's ``extensions``, or by sending
``metadata.a2uiClientCapabilities`` with a ``v0.9`` entry; the response then names it in ``A2A-Extensions``.
A surface then goes out as a ``WORKING`` status update whose message holds one data part per A2UI message,
``metadata.mimeType`` (and ``mediaType``) ``application/json+a2ui``, as the A2UI A2A extension specifies.
A task whose client did not activate it gets no surfaces: a client that cannot draw them is not sent them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from ..a2ui import BASIC_CATALOG_ID, CLIENT_CAPABILITIES_KEY, EXTENSION_URI, MIME_TYPE, VERSION

if TYPE_CHECKING:
    from .._wiring import FaceHost
    from ..messages import Message

__all__ = ["card_extension", "declares_a2ui", "requested", "shown", "surface_parts"]

_HEADERS = (b"a2a-extensions", b"x-a2a-extensions")


def declares_a2ui(agent: FaceHost) -> bool:
    """Whether a skill answers with A2UI: its ``output_modes`` name the A2UI media type."""
    return any(MIME_TYPE in cap.output_modes for cap in agent.skills.values())


def card_extension() -> dict[str, Any]:
    """The card's ``capabilities.extensions`` entry (params as the official ``a2ui-a2a`` package writes them)."""
    return {
        "uri": EXTENSION_URI,
        "description": "Agent-driven UI: A2UI v0.9 surfaces of the basic catalog, as data parts.",
        "required": False,
        "params": {"supportedCatalogIds": [BASIC_CATALOG_ID]},
    }


def requested(scope: Mapping[str, Any]) -> bool:
    """Whether the request's ``A2A-Extensions`` (or 0.3 ``X-A2A-Extensions``) header names the extension."""
    for name, value in scope.get("headers", ()):
        if name in _HEADERS and EXTENSION_URI in (
            u.strip() for u in bytes(value).decode("latin-1").split(",")
        ):
            return True
    return False


def shown(messages: Iterable[Message]) -> bool:
    """Whether the task's client activated A2UI in one of its messages (the header's activation is kept in
    the message's ``extensions``, so a follow-up or a take-over elsewhere still knows it)."""
    for message in messages:
        if EXTENSION_URI in message.extensions:
            return True
        capabilities = (message.metadata or {}).get(CLIENT_CAPABILITIES_KEY)
        if isinstance(capabilities, Mapping) and isinstance(capabilities.get(VERSION), Mapping):
            return True
    return False


def surface_parts(messages: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One A2A 1.0 data part per A2UI message."""
    return [{"data": dict(m), "mediaType": MIME_TYPE, "metadata": {"mimeType": MIME_TYPE}} for m in messages]
