"""What a skill run over AG-UI sees as its messages (``ctx.messages``, ``Message`` and ``File`` parameters).

The current turn: the user messages at the end of the run's ``messages`` (after the last message of any
other role). Text content is a text part; image, audio, video and document content is a file part (inline
base64 ``data`` sources as bytes, ``url`` and ``file`` sources as URLs). The last of them also carries the
run's ``forwardedProps`` as metadata and, when ``forwardedProps.arguments`` is given, a data part with
them. A run with no user message gets one made of that data part alone.
"""

from __future__ import annotations

from typing import Any

from ..content import Text
from ..messages import Data, File, Message, decode_base64

__all__ = ["messages_from_run"]


def _part(content: dict[str, Any]) -> Any:
    kind = content.get("type")
    if kind == "text":
        return Text(str(content.get("text", "")))
    if kind == "binary":  # the older input shape: mimeType with data or url
        media = content.get("mimeType")
        if isinstance(content.get("data"), str):
            try:
                return File(
                    data=decode_base64(content["data"]), name=content.get("filename"), media_type=media
                )
            except ValueError:
                return None
        if isinstance(content.get("url"), str):
            return File(url=content["url"], name=content.get("filename"), media_type=media)
        return None
    source = content.get("source")
    if not isinstance(source, dict) or not isinstance(source.get("value"), str):
        return None
    media = source.get("mimeType")
    metadata = content.get("metadata") if isinstance(content.get("metadata"), dict) else None
    name = (metadata or {}).get("filename")
    if source.get("type") == "data":
        try:
            return File(data=decode_base64(source["value"]), name=name, media_type=media, metadata=metadata)
        except ValueError:
            return None
    extra = (
        {"provider": source["provider"]} if source.get("type") == "file" and source.get("provider") else {}
    )
    return File(
        url=source["value"], name=name, media_type=media, metadata={**(metadata or {}), **extra} or None
    )


def messages_from_run(messages: list[dict[str, Any]], forwarded: dict[str, Any]) -> list[Message]:
    turn: list[dict[str, Any]] = []
    for message in reversed(messages):
        if message.get("role") != "user":
            break
        turn.append(message)
    turn.reverse()
    out: list[Message] = []
    for index, message in enumerate(turn):
        content = message.get("content")
        if isinstance(content, str):
            parts: list[Any] = [Text(content)]
        else:
            parts = [p for p in (_part(c) for c in content or [] if isinstance(c, dict)) if p is not None]
        last = index == len(turn) - 1
        arguments = forwarded.get("arguments") if last else None
        if isinstance(arguments, dict) and arguments:
            parts.append(Data(dict(arguments)))
        if not parts:
            parts = [Text("")]
        out.append(Message(tuple(parts), "user", message.get("id"), metadata=dict(forwarded) if last else {}))
    if not out:
        arguments = forwarded.get("arguments")
        if isinstance(arguments, dict) and arguments:
            out.append(Message((Data(dict(arguments)),), "user", metadata=dict(forwarded)))
    return out
