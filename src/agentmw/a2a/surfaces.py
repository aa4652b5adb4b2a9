"""A2UI on A2A (docs/a2ui.md): the extension on the card, its activation, and surfaces as data parts.

The card declares ``https://a2ui.org/a2a-extension/a2ui/v0.9`` (``required: false``) when a skill says it
answers with A2UI (``@skill(output_modes=(..., a2ui.MIME_TYPE))``). A client activates it by naming the URI in
the ``A2A-Extensions`` header (``X-A2A-Extensions`` in 0.3), in the message's ``extensions``, or by sending
``metadata.a2uiClientCapabilities`` with a ``v0.9`` entry; the response then names it in ``A2A-Extensions``.
A surface then goes out as a ``WORKING`` status update whose message holds one data part per A2UI message,
``metadata.mimeType`` (and ``mediaType``) ``application/json+a2ui``, as the A2UI A2A extension specifies.
A task whose client did not activate it gets no surfaces: a client that cannot draw them is not sent them.
Activation is kept per task (the conversation's replies and streams go on carrying surfaces), but a read of
the task (``GetTask``, ``ListTasks``, ``CancelTask``'s answer) decides per request: without the header, the task
comes back without its A2UI parts (:func:`without_surfaces`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from ..a2ui import BASIC_CATALOG_ID, CLIENT_CAPABILITIES_KEY, EXTENSION_URI, MIME_TYPE, VERSION

if TYPE_CHECKING:
    from .._wiring import FaceHost
    from ..messages import Message

__all__ = ["card_extension", "declares_a2ui", "requested", "shown", "surface_parts", "without_surfaces"]

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


def _is_surface(part: Any) -> bool:
    if not isinstance(part, Mapping):
        return False
    metadata = part.get("metadata")
    return part.get("mediaType") == MIME_TYPE or (
        isinstance(metadata, Mapping) and metadata.get("mimeType") == MIME_TYPE
    )


def _plain(message: Any) -> Any:
    """``message`` without its A2UI parts; None when they were all it held (a message has at least one part)."""
    if not isinstance(message, Mapping):
        return message
    parts = message.get("parts")
    if not isinstance(parts, list) or not any(_is_surface(p) for p in parts):
        return message
    kept = [p for p in parts if not _is_surface(p)]
    return {**message, "parts": kept} if kept else None


def without_surfaces(task: dict[str, Any]) -> dict[str, Any]:
    """The A2A 1.0 task dict as a client that did not activate A2UI reads it: no A2UI data part in its
    status message, history or artifacts (``task`` itself when it has none)."""
    out = task
    status = task.get("status")
    if isinstance(status, Mapping) and "message" in status:
        message = _plain(status["message"])
        if message is not status["message"]:
            kept = {k: v for k, v in status.items() if k != "message"}
            out = {**out, "status": kept if message is None else {**kept, "message": message}}
    for key in ("history", "artifacts"):
        items = task.get(key)
        if isinstance(items, list):
            plain = [_plain(item) for item in items]
            if any(a is not b for a, b in zip(plain, items, strict=True)):
                out = {**out, key: [item for item in plain if item is not None]}
    return out
