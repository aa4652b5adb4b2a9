"""Content parts a capability may return, protocol-neutral.

A function returns plain values (str, numbers, models, dicts) in the common case. When it needs
media or several parts it returns one of these, or a list of them; each face renders them onto its
wire (MCP content blocks, A2A parts, AG-UI messages).
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any, Literal

from ._codec import storable

__all__ = ["Audio", "Content", "EmbeddedResource", "Image", "PromptMessage", "ResourceLink", "Text"]


def _b64(data: bytes | str) -> str:
    return data if isinstance(data, str) else base64.b64encode(data).decode("ascii")


@dataclass(frozen=True, slots=True)
class Text:
    text: str


@dataclass(frozen=True, slots=True)
class Image:
    """An image; ``data`` is raw bytes or an already base64-encoded string."""

    data: bytes | str
    mime_type: str = "image/png"

    @property
    def base64(self) -> str:
        return _b64(self.data)


@dataclass(frozen=True, slots=True)
class Audio:
    data: bytes | str
    mime_type: str = "audio/wav"

    @property
    def base64(self) -> str:
        return _b64(self.data)


@dataclass(frozen=True, slots=True)
class ResourceLink:
    uri: str
    name: str
    mime_type: str | None = None
    description: str | None = None


@dataclass(frozen=True, slots=True)
class EmbeddedResource:
    """A resource's contents inline: ``text`` for text, ``blob`` (bytes or base64) for binary."""

    uri: str
    text: str | None = None
    blob: bytes | str | None = None
    mime_type: str | None = None


Content = Text | Image | Audio | ResourceLink | EmbeddedResource
CONTENT_TYPES: tuple[type, ...] = (Text, Image, Audio, ResourceLink, EmbeddedResource)


@dataclass(frozen=True, slots=True)
class PromptMessage:
    """One message of a rendered prompt."""

    role: Literal["user", "assistant"]
    content: Content | str
    meta: dict[str, Any] = field(default_factory=dict)


storable(
    Text, Image, Audio, ResourceLink, EmbeddedResource, PromptMessage
)  # kept in stored outcomes (_codec)
