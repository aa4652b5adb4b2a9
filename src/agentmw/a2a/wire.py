"""A2A wire facts: error codes, states, and the 1.0 <-> 0.3 shapes of messages, parts and tasks."""

from __future__ import annotations

import base64
import os
import time
from typing import Any, Final, Literal

from .._transport import ProtocolError
from ..content import Audio, EmbeddedResource, Image, ResourceLink, Text
from ..errors import StoreUnavailable, retry_after_header
from ..messages import Artifact, Data, File, Message, decode_base64

__all__ = [
    "STATE_TO_V03",
    "A2AError",
    "StoreUnavailableError",
    "artifact_to_wire",
    "event_to_v03",
    "limit_parts",
    "message_from_v03",
    "message_from_wire",
    "message_to_v03",
    "message_to_wire",
    "new_id",
    "now_iso",
    "parts_from_outcome",
    "parts_to_wire",
    "task_to_v03",
    "validate_message",
]

TASK_NOT_FOUND: Final = -32001
TASK_NOT_CANCELABLE: Final = -32002
PUSH_NOT_SUPPORTED: Final = -32003
UNSUPPORTED_OPERATION: Final = -32004
CONTENT_TYPE_NOT_SUPPORTED: Final = -32005
EXTENDED_CARD_NOT_CONFIGURED: Final = -32007
VERSION_NOT_SUPPORTED: Final = -32009
PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600
METHOD_NOT_FOUND: Final = -32601
INVALID_PARAMS: Final = -32602
INTERNAL_ERROR: Final = -32603

_REASONS: Final = {
    TASK_NOT_FOUND: ("TASK_NOT_FOUND", 404, "NOT_FOUND"),
    TASK_NOT_CANCELABLE: ("TASK_NOT_CANCELABLE", 400, "FAILED_PRECONDITION"),
    PUSH_NOT_SUPPORTED: ("PUSH_NOTIFICATION_NOT_SUPPORTED", 400, "FAILED_PRECONDITION"),
    UNSUPPORTED_OPERATION: ("UNSUPPORTED_OPERATION", 400, "FAILED_PRECONDITION"),
    CONTENT_TYPE_NOT_SUPPORTED: ("CONTENT_TYPE_NOT_SUPPORTED", 400, "INVALID_ARGUMENT"),
    EXTENDED_CARD_NOT_CONFIGURED: ("EXTENDED_AGENT_CARD_NOT_CONFIGURED", 400, "FAILED_PRECONDITION"),
    VERSION_NOT_SUPPORTED: ("VERSION_NOT_SUPPORTED", 400, "FAILED_PRECONDITION"),
    PARSE_ERROR: ("PARSE_ERROR", 400, "INVALID_ARGUMENT"),
    INVALID_REQUEST: ("INVALID_REQUEST", 400, "INVALID_ARGUMENT"),
    METHOD_NOT_FOUND: ("METHOD_NOT_FOUND", 404, "NOT_FOUND"),
    INVALID_PARAMS: ("INVALID_PARAMS", 400, "INVALID_ARGUMENT"),
    INTERNAL_ERROR: ("INTERNAL_ERROR", 500, "INTERNAL"),
}
ERROR_INFO: Final = "type.googleapis.com/google.rpc.ErrorInfo"


class A2AError(ProtocolError):
    """An A2A error: rendered as a JSON-RPC error, or as a google.rpc Status on the HTTP+JSON binding."""

    def __init__(self, code: int, message: str, metadata: dict[str, Any] | None = None) -> None:
        super().__init__(code, message, status=_REASONS.get(code, ("", 500, ""))[1])
        self.metadata = metadata or {}

    @classmethod
    def of(cls, error: ProtocolError) -> A2AError:
        """A transport-level error (parse, envelope, body size) in A2A's shape."""
        if isinstance(error, A2AError):
            return error
        converted = cls(error.code, error.message)
        converted.status = error.status or converted.status  # a body over the limit stays 413
        return converted

    @property
    def reason(self) -> str:
        return _REASONS.get(self.code, ("UNKNOWN_ERROR", 500, "UNKNOWN"))[0]

    @property
    def http_status(self) -> int:
        return self.status or 500

    def details(self) -> list[dict[str, Any]]:
        return [
            {
                "@type": ERROR_INFO,
                "reason": self.reason,
                "domain": "a2a-protocol.org",
                "metadata": {k: str(v) for k, v in self.metadata.items()},
            }
        ]

    def jsonrpc(self, request_id: Any) -> dict[str, Any]:
        return {
            "jsonrpc": "2.0",
            "id": request_id,
            "error": {"code": self.code, "message": self.message, "data": self.details()},
        }

    body = jsonrpc

    def rest(self) -> dict[str, Any]:
        status = _REASONS.get(self.code, ("", 500, "UNKNOWN"))[2]
        return {
            "error": {
                "code": self.http_status,
                "status": status,
                "message": self.message,
                "details": self.details(),
            }
        }


RETRY_INFO: Final = "type.googleapis.com/google.rpc.RetryInfo"


class StoreUnavailableError(A2AError):
    """The agent's store is unavailable (:class:`~agentmw.errors.StoreUnavailable`): the same request may
    succeed later. JSON-RPC: ``-32603`` (the code the spec allows for a server-side failure) whose
    ``google.rpc`` details say so: an ``ErrorInfo`` (reason ``STORE_UNAVAILABLE``, metadata ``retryable:
    "true"`` and ``retryAfterSeconds``) and a ``RetryInfo`` (``retryDelay``); HTTP+JSON: 503 ``UNAVAILABLE``
    with the same details. Both with ``Retry-After``."""

    def __init__(self, fault: StoreUnavailable) -> None:
        super().__init__(INTERNAL_ERROR, fault.message)
        self.retry_after = fault.retry_after if fault.retry_after is not None else 1.0
        self.status = 503
        self.headers = [retry_after_header(self.retry_after)]

    @property
    def reason(self) -> str:
        return "STORE_UNAVAILABLE"

    def details(self) -> list[dict[str, Any]]:
        seconds = f"{self.retry_after:g}"
        return [
            {
                "@type": ERROR_INFO,
                "reason": self.reason,
                "domain": "agentmw",
                "metadata": {"retryable": "true", "retryAfterSeconds": seconds},
            },
            {"@type": RETRY_INFO, "retryDelay": f"{seconds}s"},
        ]

    def rest(self) -> dict[str, Any]:
        return {
            "error": {
                "code": 503,
                "status": "UNAVAILABLE",
                "message": self.message,
                "details": self.details(),
            }
        }


_second: list[Any] = [-1, ""]


def now_iso() -> str:
    """The current UTC time as ISO-8601 with milliseconds and ``Z`` (formatted once per second)."""
    now = time.time()
    whole = int(now)
    if whole != _second[0]:
        _second[0], _second[1] = whole, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole))
    return f"{_second[1]}.{int((now - whole) * 1000):03d}Z"


_VARIANT = "89ab89ab89ab89ab"
_tails: list[str] = []  # the random end of the next ids: "-vxxx-xxxxxxxxxxxx", 64 made at a time
_clock: list[Any] = [
    0,
    0,
    "",
]  # the last id's millisecond, its sequence within it, and its text up to the sequence


def _more_tails() -> None:
    pool = os.urandom(8 * 64).hex()
    _tails[:] = [
        f"-{_VARIANT[int(pool[at], 16)]}{pool[at + 1 : at + 4]}-{pool[at + 4 : at + 16]}"
        for at in range(len(pool) - 16, -1, -16)
    ]  # popped from the end: the pool's order


def new_id() -> str:
    """A time-ordered UUID (version 7, RFC 9562): ids that clients may parse as UUIDs must be valid ones.

    Time-ordered because task ids are the keys of the task records: SQLite's B-tree then appends each new
    record instead of splitting a page at a random place, which makes a new task's write about three times
    cheaper. 62 random bits (and 12 of sequence within a millisecond, so the ids of one process are strictly
    increasing) keep them unguessable, and a task id is only ever resolved for the caller that owns it. The
    random ends are made from ``os.urandom`` 64 ids at a time (one system call per 64: a call that releases the
    GIL is costly when the store's thread wants it), so an id is one clock read and one format."""
    ms = time.time_ns() // 1_000_000
    clock = _clock
    if ms > clock[0]:
        clock[0], clock[1] = ms, 0
        t = f"{ms & 0xFFFFFFFFFFFF:012x}"
        clock[2] = f"{t[:8]}-{t[8:]}-7"
    else:  # the same millisecond (or a clock that stepped back): the sequence goes on, carrying into the time
        clock[1] += 1
        if clock[1] > 0xFFF:
            clock[0], clock[1] = clock[0] + 1, 0
            t = f"{clock[0] & 0xFFFFFFFFFFFF:012x}"
            clock[2] = f"{t[:8]}-{t[8:]}-7"
    if not _tails:
        _more_tails()
    return f"{clock[2]}{clock[1]:03x}{_tails.pop()}"


def limit_parts(message: Any, max_parts: int) -> None:
    """-32602 when ``message`` (1.0 or 0.3) holds more than ``max_parts`` parts: checked before any part is read,
    so a message of 300,000 parts costs one ``len`` (``A2ASettings.max_parts``)."""
    parts = message.get("parts") if isinstance(message, dict) else None
    if isinstance(parts, list) and len(parts) > max_parts:
        raise A2AError(
            INVALID_PARAMS,
            f"message.parts holds {len(parts)} parts; at most {max_parts} are accepted",
            {"field": "message.parts", "limit": max_parts},
        )


def validate_message(message: Any) -> dict[str, Any]:
    """A 1.0 Message, checked; raises -32602 naming what is wrong."""
    if not isinstance(message, dict):
        raise A2AError(INVALID_PARAMS, "params.message must be an object")
    if not isinstance(message.get("messageId"), str) or not message["messageId"]:
        raise A2AError(INVALID_PARAMS, "message.messageId is required")
    if message.get("role") not in ("ROLE_USER", "ROLE_AGENT"):
        raise A2AError(INVALID_PARAMS, "message.role must be ROLE_USER or ROLE_AGENT")
    parts = message.get("parts")
    if not isinstance(parts, list) or not parts:
        raise A2AError(INVALID_PARAMS, "message.parts must hold at least one part")
    for index, part in enumerate(parts):
        if not isinstance(part, dict):
            raise A2AError(INVALID_PARAMS, f"message.parts[{index}] must be an object")
        kinds = [k for k in ("text", "raw", "url", "data") if k in part]
        if len(kinds) != 1:
            raise A2AError(
                INVALID_PARAMS, f"message.parts[{index}] must have exactly one of text, raw, url, data"
            )
        if kinds[0] in ("text", "raw", "url") and not isinstance(part[kinds[0]], str):
            raise A2AError(INVALID_PARAMS, f"message.parts[{index}].{kinds[0]} must be a string")
    for key in ("taskId", "contextId"):
        if key in message and not isinstance(message[key], str):
            raise A2AError(INVALID_PARAMS, f"message.{key} must be a string")
    if "metadata" in message and not isinstance(message["metadata"], dict):
        raise A2AError(INVALID_PARAMS, "message.metadata must be an object")
    return message


def message_from_wire(message: dict[str, Any]) -> Message:
    """A checked 1.0 message as an :class:`agentmw.Message`; a ``raw`` part that is not base64 is -32602."""
    parts: list[Any] = []
    for index, part in enumerate(message["parts"]):
        if "text" in part:  # a text part's metadata, media type and filename are not kept
            parts.append(Text(part["text"]))
            continue
        metadata = part.get("metadata") if isinstance(part.get("metadata"), dict) else None
        media = (
            part.get("mediaType") if isinstance(part.get("mediaType"), str) and part["mediaType"] else None
        )
        name = part.get("filename") if isinstance(part.get("filename"), str) and part["filename"] else None
        if "data" in part:
            parts.append(Data(part["data"], media, metadata))
        elif "url" in part:
            parts.append(File(url=part["url"], name=name, media_type=media, metadata=metadata))
        else:
            try:
                raw = decode_base64(part["raw"])
            except ValueError:
                raise A2AError(INVALID_PARAMS, f"message.parts[{index}].raw must be base64") from None
            parts.append(File(data=raw, name=name, media_type=media, metadata=metadata))
    role: Literal["user", "agent"] = "user" if message.get("role") == "ROLE_USER" else "agent"
    refs = message.get("referenceTaskIds")
    extensions = message.get("extensions")
    return Message(
        tuple(parts),
        role,
        message.get("messageId"),
        message.get("taskId"),
        message.get("contextId"),
        dict(message.get("metadata") or {}),
        tuple(r for r in refs if isinstance(r, str)) if isinstance(refs, list) else (),
        tuple(e for e in extensions if isinstance(e, str)) if isinstance(extensions, list) else (),
    )


def parts_to_wire(parts: Any) -> list[dict[str, Any]]:
    """agentmw parts (messages.py) as 1.0 parts: text, ``raw`` base64 or ``url`` with filename and media type,
    ``data``."""
    out: list[dict[str, Any]] = []
    for part in parts:
        if isinstance(part, Text):
            wire: dict[str, Any] = {"text": part.text}
        elif isinstance(part, Data):
            wire = {"data": part.data, "mediaType": part.media_type or "application/json"}
        else:
            wire = {"url": part.url} if part.url is not None else {"raw": part.base64}
            if part.name:
                wire["filename"] = part.name
            if part.media_type:
                wire["mediaType"] = part.media_type
        if not isinstance(part, Text) and part.metadata:
            wire["metadata"] = dict(part.metadata)
        out.append(wire)
    return out


def message_to_wire(message: Message, task_id: str | None, context_id: str | None) -> dict[str, Any]:
    """A skill's reply as a 1.0 agent message, placed in the task (or only the context, for a reply with no
    task); its own ids are kept when it set them."""
    out: dict[str, Any] = {
        "messageId": message.message_id or new_id(),
        "role": "ROLE_AGENT",
        "parts": parts_to_wire(message.parts),
    }
    if task_id is not None:
        out["taskId"] = task_id
    if context_id is not None:
        out["contextId"] = context_id
    if message.metadata:
        out["metadata"] = dict(message.metadata)
    if message.reference_task_ids:
        out["referenceTaskIds"] = list(message.reference_task_ids)
    if message.extensions:
        out["extensions"] = list(message.extensions)
    return out


def artifact_to_wire(artifact: Artifact) -> dict[str, Any]:
    out: dict[str, Any] = {"artifactId": artifact.artifact_id, "parts": parts_to_wire(artifact.parts)}
    if artifact.name:
        out["name"] = artifact.name
    if artifact.description:
        out["description"] = artifact.description
    if artifact.metadata:
        out["metadata"] = dict(artifact.metadata)
    return out


def agent_message(task_id: str, context_id: str, parts: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "messageId": new_id(),
        "role": "ROLE_AGENT",
        "taskId": task_id,
        "contextId": context_id,
        "parts": parts,
    }


def parts_from_outcome(value: Any, content: list[Any], structured: Any) -> list[dict[str, Any]]:
    """An outcome as A2A parts: structured data as a data part, text as text, media as raw bytes."""
    if structured is not None:
        return [{"data": structured, "mediaType": "application/json"}]
    parts: list[dict[str, Any]] = []
    for item in content:
        if isinstance(item, Text):
            parts.append({"text": item.text})
        elif isinstance(item, (Image, Audio)):
            parts.append({"raw": item.base64, "mediaType": item.mime_type})
        elif isinstance(item, ResourceLink):
            part: dict[str, Any] = {"url": item.uri, "filename": item.name}
            if item.mime_type:
                part["mediaType"] = item.mime_type
            parts.append(part)
        elif isinstance(item, EmbeddedResource):
            if item.blob is not None:
                blob = item.blob if isinstance(item.blob, str) else base64.b64encode(item.blob).decode()
                parts.append({"raw": blob, "mediaType": item.mime_type or "application/octet-stream"})
            else:
                parts.append({"text": item.text or "", "mediaType": item.mime_type or "text/plain"})
    return parts or [{"text": ""}]


# --- 0.3 shapes ----------------------------------------------------------------------------------------

STATE_TO_V03: Final = {
    "TASK_STATE_SUBMITTED": "submitted",
    "TASK_STATE_WORKING": "working",
    "TASK_STATE_INPUT_REQUIRED": "input-required",
    "TASK_STATE_AUTH_REQUIRED": "auth-required",
    "TASK_STATE_COMPLETED": "completed",
    "TASK_STATE_CANCELED": "canceled",
    "TASK_STATE_FAILED": "failed",
    "TASK_STATE_REJECTED": "rejected",
    "TASK_STATE_UNSPECIFIED": "unknown",
}
_ROLE_TO_V03: Final = {"ROLE_USER": "user", "ROLE_AGENT": "agent"}


def part_from_v03(part: Any, index: int) -> dict[str, Any]:
    if not isinstance(part, dict):
        raise A2AError(INVALID_PARAMS, f"message.parts[{index}] must be an object")
    kind = part.get("kind")
    out: dict[str, Any]
    if kind == "text" and isinstance(part.get("text"), str):
        out = {"text": part["text"]}
    elif kind == "data" and "data" in part:
        out = {"data": part["data"]}
    elif kind == "file" and isinstance(part.get("file"), dict):
        file = part["file"]
        if isinstance(file.get("bytes"), str):
            out = {"raw": file["bytes"]}
        elif isinstance(file.get("uri"), str):
            out = {"url": file["uri"]}
        else:
            raise A2AError(INVALID_PARAMS, f"message.parts[{index}].file needs bytes or uri")
        if file.get("mimeType"):
            out["mediaType"] = file["mimeType"]
        if file.get("name"):
            out["filename"] = file["name"]
    else:
        raise A2AError(INVALID_PARAMS, f"message.parts[{index}] is not a valid 0.3 part")
    if isinstance(part.get("metadata"), dict):
        out["metadata"] = part["metadata"]
    return out


def message_from_v03(message: Any) -> dict[str, Any]:
    if not isinstance(message, dict):
        raise A2AError(INVALID_PARAMS, "params.message must be an object")
    raw_role = message.get("role")
    role = {"user": "ROLE_USER", "agent": "ROLE_AGENT"}.get(raw_role) if isinstance(raw_role, str) else None
    if role is None:
        raise A2AError(INVALID_PARAMS, "message.role must be 'user' or 'agent'")
    parts = message.get("parts")
    if not isinstance(parts, list) or not parts:
        raise A2AError(INVALID_PARAMS, "message.parts must hold at least one part")
    out = {
        "messageId": message.get("messageId"),
        "role": role,
        "parts": [part_from_v03(p, i) for i, p in enumerate(parts)],
    }
    for key in ("taskId", "contextId", "metadata"):
        if key in message:
            out[key] = message[key]
    return validate_message(out)


def part_to_v03(part: dict[str, Any]) -> dict[str, Any]:
    if "text" in part:
        out: dict[str, Any] = {"kind": "text", "text": part["text"]}
    elif "data" in part:
        out = {"kind": "data", "data": part["data"]}
    else:
        file: dict[str, Any] = {"bytes": part["raw"]} if "raw" in part else {"uri": part["url"]}
        if part.get("mediaType"):
            file["mimeType"] = part["mediaType"]
        if part.get("filename"):
            file["name"] = part["filename"]
        out = {"kind": "file", "file": file}
    if part.get("metadata"):
        out["metadata"] = part["metadata"]
    return out


def message_to_v03(message: dict[str, Any]) -> dict[str, Any]:
    out = {
        "kind": "message",
        "messageId": message["messageId"],
        "role": _ROLE_TO_V03[message["role"]],
        "parts": [part_to_v03(p) for p in message["parts"]],
    }
    for key in ("taskId", "contextId", "metadata"):
        if key in message:
            out[key] = message[key]
    return out


def status_to_v03(status: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"state": STATE_TO_V03[status["state"]]}
    if status.get("message"):
        out["message"] = message_to_v03(status["message"])
    if status.get("timestamp"):
        out["timestamp"] = status["timestamp"]
    return out


def artifact_to_v03(artifact: dict[str, Any]) -> dict[str, Any]:
    return {**artifact, "parts": [part_to_v03(p) for p in artifact["parts"]]}


def task_to_v03(task: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {
        "kind": "task",
        "id": task["id"],
        "contextId": task["contextId"],
        "status": status_to_v03(task["status"]),
    }
    if "history" in task:
        out["history"] = [message_to_v03(m) for m in task["history"]]
    if task.get("artifacts"):
        out["artifacts"] = [artifact_to_v03(a) for a in task["artifacts"]]
    if task.get("metadata"):
        out["metadata"] = task["metadata"]
    return out


def event_to_v03(event: dict[str, Any], terminal_states: frozenset[str]) -> dict[str, Any]:
    if "task" in event:
        return task_to_v03(event["task"])
    if "message" in event:
        return message_to_v03(event["message"])
    if "statusUpdate" in event:
        update = event["statusUpdate"]
        return {
            "kind": "status-update",
            "taskId": update["taskId"],
            "contextId": update["contextId"],
            "status": status_to_v03(update["status"]),
            "final": update["status"]["state"] in terminal_states,
        }
    update = event["artifactUpdate"]
    return {
        "kind": "artifact-update",
        "taskId": update["taskId"],
        "contextId": update["contextId"],
        "artifact": artifact_to_v03(update["artifact"]),
        "append": update.get("append", False),
        "lastChunk": update.get("lastChunk", True),
    }
