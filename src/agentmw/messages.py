"""Messages in, artifacts out: what a skill receives and what it answers with, protocol-neutral.

A skill that needs more than its arguments declares parameters with these types (analysed once, at
registration; see docs/skill.md):

- ``Message``: the message that opened the work (its text, files, data parts, metadata and ids);
- ``File``, ``File | None`` or ``list[File]``: the file parts of the work's messages;
- ``ctx.message`` and ``ctx.messages`` give the same raw view, follow-ups included.

It answers with a plain value (one artifact), a :class:`Message` (a message-only reply where the protocol
allows one), ``None`` (the task completes with a status message and no artifact), one or several
:class:`Artifact` objects, or artifact chunks yielded from an ``async def`` generator. Each face renders
them onto its wire; the faces hold the wire shapes, this module only the neutral types.
"""

from __future__ import annotations

import base64
import binascii
import typing
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from ._codec import storable
from ._transport import to_json_text
from .content import Audio, EmbeddedResource, Image, ResourceLink, Text
from .safety.framing import frame_text

__all__ = [
    "MESSAGE_TYPES",
    "Artifact",
    "Data",
    "File",
    "Message",
    "MessageParam",
    "Part",
    "bind_message_params",
    "content_of",
    "decode_base64",
    "framed",
    "is_answer",
    "merge_chunk",
    "message_param_of",
    "part_to_json",
]


def decode_base64(value: str) -> bytes:
    """Standard or URL-safe base64, padding optional (as ProtoJSON accepts it); ValueError otherwise."""
    text = value.strip()
    text += "=" * (-len(text) % 4)
    try:
        if "-" in text or "_" in text:
            return base64.urlsafe_b64decode(text)
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ValueError("not valid base64") from exc


@dataclass(frozen=True, slots=True)
class File:
    """A file part: its bytes inline (``data``) or a ``url``, with an optional file name and media type."""

    data: bytes | None = None
    url: str | None = None
    name: str | None = None
    media_type: str | None = None
    metadata: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        if (self.data is None) == (self.url is None):
            raise ValueError("a File has either data (bytes) or a url, not both and not neither")
        if self.data is not None and not isinstance(self.data, (bytes, bytearray, memoryview)):
            raise TypeError("File.data must be bytes; pass a url=... for a link")
        if self.data is not None and not isinstance(self.data, bytes):
            object.__setattr__(self, "data", bytes(self.data))

    @property
    def base64(self) -> str | None:
        return base64.b64encode(self.data).decode("ascii") if self.data is not None else None


@dataclass(frozen=True, slots=True)
class Data:
    """A data part: any JSON value (usually an object), with an optional media type."""

    data: Any
    media_type: str | None = None
    metadata: Mapping[str, Any] | None = None


Part = Text | File | Data
_PART_TYPES = frozenset({Text, File, Data})


def _part(value: Any) -> Part:
    if isinstance(value, (Text, File, Data)):
        return value
    if isinstance(value, str):
        return Text(value)
    if isinstance(value, (Image, Audio)):
        raw = value.data if isinstance(value.data, bytes) else decode_base64(value.data)
        return File(data=raw, media_type=value.mime_type)
    if isinstance(value, ResourceLink):
        return File(url=value.uri, name=value.name, media_type=value.mime_type)
    if isinstance(value, EmbeddedResource):
        if value.blob is not None:
            raw = value.blob if isinstance(value.blob, bytes) else decode_base64(value.blob)
            return File(data=raw, name=value.uri, media_type=value.mime_type)
        return Text(value.text or "")
    if isinstance(value, Mapping):
        return Data(dict(value))
    raise TypeError(f"{type(value).__name__} is not a message part: use str, Text, File, Data (or a dict)")


def _parts(value: Any) -> tuple[Part, ...]:
    if type(value) is tuple and all(type(v) in _PART_TYPES for v in value):
        return value  # parts already (a message read off the wire): nothing to convert
    if isinstance(value, (str, Text, File, Data, Image, Audio, ResourceLink, EmbeddedResource, Mapping)):
        return (_part(value),)
    return tuple(_part(v) for v in value)


@dataclass(frozen=True, slots=True)
class Message:
    """One message: parts (text, files, data), who sent it, and the ids that place it.

    As a return value, a skill's ``Message`` is a reply: on A2A a message-only answer with no task (when
    the skill's return annotation names ``Message`` and nobody has seen the task yet), else the task's
    final status message. Parts may be given as ``str``, :class:`Text`, :class:`File`, :class:`Data`,
    a ``dict`` (a data part) or media content (``Image``, ``ResourceLink``, ...), one or a list.
    """

    parts: tuple[Part, ...]
    role: Literal["user", "agent"] = "agent"
    message_id: str | None = None
    task_id: str | None = None
    context_id: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    reference_task_ids: tuple[str, ...] = ()
    extensions: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "parts", _parts(self.parts))
        if not self.parts:
            raise ValueError("a Message needs at least one part")

    @property
    def text(self) -> str:
        """Its text parts, joined with newlines."""
        return "\n".join(p.text for p in self.parts if isinstance(p, Text))

    @property
    def files(self) -> list[File]:
        return [p for p in self.parts if isinstance(p, File)]

    @property
    def data_parts(self) -> list[Data]:
        return [p for p in self.parts if isinstance(p, Data)]

    @property
    def data(self) -> dict[str, Any]:
        """Its object data parts merged into one dict (later parts win)."""
        merged: dict[str, Any] = {}
        for part in self.parts:
            if isinstance(part, Data) and isinstance(part.data, dict):
                merged.update(part.data)
        return merged


@dataclass(frozen=True, slots=True)
class Artifact:
    """One output of a task: parts with a name and a description.

    Streamed in chunks, the chunks share an ``artifact_id``: the first has ``append=False``, the next ones
    ``append=True``, and the last ``last_chunk=True`` (A2A ``TaskArtifactUpdateEvent.append`` and
    ``lastChunk``). A whole artifact is one chunk: the defaults. Without an ``artifact_id`` one is made.
    """

    parts: tuple[Part, ...]
    name: str | None = None
    description: str | None = None
    metadata: Mapping[str, Any] | None = None
    artifact_id: str | None = None
    append: bool = False
    last_chunk: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "parts", _parts(self.parts))
        if not self.parts:
            raise ValueError("an Artifact needs at least one part")
        if self.artifact_id is None:
            if self.append:
                raise ValueError("an appended chunk must name the artifact_id of the artifact it continues")
            object.__setattr__(self, "artifact_id", str(uuid.uuid4()))

    @property
    def text(self) -> str:
        """Its text parts, joined (no separator: chunks of one text concatenate)."""
        return "".join(p.text for p in self.parts if isinstance(p, Text))


MESSAGE_TYPES: tuple[type, ...] = (Message, Artifact, File, Data)


def is_answer(value: Any) -> bool:
    """A value a face renders as messages and artifacts: a Message, an Artifact, or a list of Artifacts."""
    if isinstance(value, (Message, Artifact)):
        return True
    return isinstance(value, (list, tuple)) and bool(value) and all(isinstance(v, Artifact) for v in value)


def merge_chunk(artifacts: list[Artifact], chunk: Artifact) -> None:
    """Fold ``chunk`` into ``artifacts`` (an append extends the artifact with the same id)."""
    if chunk.append:
        for index, existing in enumerate(artifacts):
            if existing.artifact_id == chunk.artifact_id:
                artifacts[index] = Artifact(
                    existing.parts + chunk.parts,
                    existing.name or chunk.name,
                    existing.description or chunk.description,
                    existing.metadata or chunk.metadata,
                    existing.artifact_id,
                    last_chunk=chunk.last_chunk,
                )
                return
    artifacts.append(chunk)


def framed(value: Any, source: str, budget: int) -> Any:
    """``value`` (a Message, an Artifact or a list of Artifacts) with its text parts framed as untrusted
    (safety/framing.py): what an ``untrusted`` capability answers reaches no face unframed."""
    if isinstance(value, (list, tuple)):
        return [framed(v, source, budget) for v in value]
    parts = tuple(Text(frame_text(p.text, source, budget)) if isinstance(p, Text) else p for p in value.parts)
    return replace(value, parts=parts)


# --- as neutral content (MCP content blocks, AG-UI text and activities) ----------------------------------


def _content_of_part(part: Part) -> Any:
    if isinstance(part, Text):
        return part
    if isinstance(part, Data):
        return Text(to_json_text(part.data))
    if part.url is not None:
        return ResourceLink(part.url, part.name or part.url, part.media_type)
    media = part.media_type or "application/octet-stream"
    if media.startswith("image/"):
        return Image(part.data or b"", media)
    if media.startswith("audio/"):
        return Audio(part.data or b"", media)
    return EmbeddedResource(f"file:///{part.name or 'file'}", blob=part.data, mime_type=media)


def content_of(value: Any) -> list[Any]:
    """Content parts (:mod:`agentmw.content`) for a Message, an Artifact, a part, or a list of them."""
    if isinstance(value, (Message, Artifact)):
        return [_content_of_part(p) for p in value.parts]
    if isinstance(value, (File, Data)):
        return [_content_of_part(value)]
    out: list[Any] = []
    for item in value:
        out.extend(content_of(item))
    return out


def part_to_json(part: Part) -> dict[str, Any]:
    """A part as plain JSON for faces with no part type of their own (AG-UI activities)."""
    if isinstance(part, Text):
        return {"type": "text", "text": part.text}
    if isinstance(part, Data):
        out: dict[str, Any] = {"type": "data", "data": part.data}
    else:
        out = {"type": "file"}
        if part.url is not None:
            out["url"] = part.url
        else:
            out["data"] = part.base64
        if part.name:
            out["name"] = part.name
    if part.media_type:
        out["mediaType"] = part.media_type
    return out


# --- typed parameters ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MessageParam:
    """A parameter agentmw fills from the messages: ``message``, one ``file`` or ``files`` (a list)."""

    name: str
    kind: Literal["message", "file", "files"]
    required: bool
    has_default: bool = False


def message_param_of(name: str, annotation: Any, has_default: bool) -> MessageParam | None:
    """The message parameter ``annotation`` declares, or None (analysed once, at registration)."""
    optional = False
    origin = typing.get_origin(annotation)
    if origin is typing.Union or (origin is not None and getattr(origin, "__name__", "") == "UnionType"):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) != 1 or len(args) == len(typing.get_args(annotation)):
            return None
        annotation, optional = args[0], True
        origin = typing.get_origin(annotation)
    if annotation is Message:
        return MessageParam(name, "message", False)
    if annotation is File:
        return MessageParam(name, "file", not (optional or has_default), has_default)
    if origin in (list, tuple, Sequence, Iterable, typing.Sequence) and typing.get_args(annotation)[:1] == (
        File,
    ):
        return MessageParam(name, "files", False)
    return None


def _plain(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    return dump(mode="json") if callable(dump) else value


def bind_message_params(
    params: Sequence[MessageParam],
    kwargs: dict[str, Any],
    messages: Sequence[Message],
    arguments: Mapping[str, Any],
) -> str | None:
    """Fill the message parameters of one call; a reason when a required one cannot be filled.

    Without messages (an MCP tool call, a direct call), a ``Message`` parameter receives a message with one
    data part that holds the arguments, and file parameters receive nothing.
    """
    files = [f for m in messages for f in m.files]
    for param in params:
        if param.kind == "message":
            kwargs[param.name] = (
                messages[0]
                if messages
                else Message((Data({k: _plain(v) for k, v in arguments.items()}),), role="user")
            )
        elif param.kind == "files":
            kwargs[param.name] = files
        elif files:
            kwargs[param.name] = files[0]
        elif param.required:
            return f"{param.name}: a file is required; send it as a file part of the message"
        elif not param.has_default:
            kwargs[param.name] = None
    return None


storable(File, Data, Message, Artifact)  # an outcome stored under an idempotency key keeps them (_codec)
