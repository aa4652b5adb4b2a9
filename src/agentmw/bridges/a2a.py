"""A remote A2A agent as capabilities of the agent: each remote skill one capability (docs/bridges.md).

The peer is spoken to with agentmw's own A2A 1.0 JSON-RPC over ``httpx`` (the ``a2a`` extra): the card, then
``SendStreamingMessage`` and ``SubscribeToTask`` when the card offers streaming (``SendMessage`` and
``GetTask`` otherwise). Remote task states map onto the outcome table; every remote text is framed as
untrusted; the remote task and context ids are journaled, so a replayed execution resumes the same remote task
instead of starting another. A call cancelled on agentmw's side (A2A ``CancelTask``, MCP
``notifications/cancelled``, an AG-UI disconnect) sends ``CancelTask`` for the remote task, bounded.

Pinned to ``version="0.3"`` (explicitly: a 1.0 pin never falls back), the bridge speaks A2A 0.3 JSON-RPC
(``message/send``, ``message/stream``, ``tasks/get``, ``tasks/cancel``, ``tasks/resubscribe``; ``kind`` on
objects and parts, lowercase states); its answers are translated to the 1.0 shapes at the wire, so everything
past :meth:`A2APeer._call` and :meth:`A2APeer._stream` is one code path.
"""

from __future__ import annotations

import asyncio
import codecs
import json
import logging
import math
import re
import uuid
from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict

from ..capability import Capability, build_capability
from ..content import Text
from ..context import Context
from ..egress import EgressRefused
from ..errors import NeedsInput, Permanent, Rejected, Retryable
from ..lifecycle.cadence import Cadence
from ..lifecycle.cancel import left_for_another
from ..messages import Artifact, Data, File, Message, decode_base64
from ..state import StoreLimits
from ._peer import BridgeError, Peer, VersionMismatch, safe_name

if TYPE_CHECKING:
    import httpx

__all__ = ["A2A_VERSION", "A2A_VERSIONS", "A2APeer", "RemoteData"]

logger = logging.getLogger("agentmw.bridges")

A2A_VERSION = "1.0"
"""The A2A protocol version a bridge speaks to its peers by default. A constant: never "latest"."""

A2A_VERSIONS = (A2A_VERSION, "0.3")
"""The versions a bridge can be pinned to; each pin is exact (a peer offering only the other one is refused)."""

TASKS_NS = "bridges.a2a.tasks"
_TASK_TTL = 24 * 3600.0
_SETTLED = frozenset(
    {
        "TASK_STATE_COMPLETED",
        "TASK_STATE_FAILED",
        "TASK_STATE_CANCELED",
        "TASK_STATE_REJECTED",
        "TASK_STATE_INPUT_REQUIRED",
        "TASK_STATE_AUTH_REQUIRED",
    }
)
_TERMINAL = frozenset(
    {"TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED", "TASK_STATE_REJECTED"}
)
_UNSUPPORTED_OPERATION = -32004
_TASK_NOT_FOUND = -32001
_TASK_NOT_CANCELABLE = -32002
# A cancel passed on to the peer is bounded as a local cancel's confirmation is: the caller's CancelTask (or
# the face's own cancel) waits for it, and must learn soon that nothing more will happen.
CANCEL_SECONDS = Cadence().cancel_wait_seconds
_MAX_CUTS = 5
# A remote task, context or artifact id: the peer chooses it, the bridge quotes it to models and keys state by it,
# so it must be an identifier (UUIDs and the like), not text that could carry instructions.
_REMOTE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:\-]{0,127}")


class RemoteData(BaseModel):
    """A data part for the remote agent: any JSON object."""

    model_config = ConfigDict(extra="allow")


class _Unreachable(Exception):
    """The peer could not be reached, or broke the connection: a transport failure (the breaker counts it)."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class _Malformed(_Unreachable):
    """The peer answered something that is not A2A 1.0 (wrong shapes, ids that are not ids, too large)."""


class _RpcError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


@dataclass(slots=True)
class _Task:
    """What the bridge knows of one remote task, built from its events; JSON for the journal."""

    id: str | None = None
    context_id: str | None = None
    state: str = "TASK_STATE_SUBMITTED"
    status: dict[str, Any] | None = None
    artifacts: dict[str, dict[str, Any]] = field(default_factory=dict)
    reply: dict[str, Any] | None = None
    seen: set[str] = field(default_factory=set)
    said: int = 0
    skill: str = ""  # the bridged skill, named in the frame of each remote text (not journaled)

    @property
    def settled(self) -> bool:
        return self.state in _SETTLED

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "contextId": self.context_id,
            "state": self.state,
            "status": self.status,
            "artifacts": list(self.artifacts.values()),
            "reply": self.reply,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any], skill: str = "") -> _Task:
        return cls(
            id=data.get("id"),
            context_id=data.get("contextId"),
            state=data.get("state") or "",
            status=data.get("status"),
            artifacts={a.get("artifactId") or str(i): a for i, a in enumerate(data.get("artifacts") or [])},
            reply=data.get("reply"),
            skill=skill,
        )


_LINE_END = re.compile(r"\r\n|\r|\n")


async def _lines(response: httpx.Response, limit: int) -> AsyncIterator[str]:
    """The lines of an event stream (CR, LF or CRLF), each at most ``limit`` characters: httpx's own
    ``aiter_lines`` would gather a line that never ends until memory runs out."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    pending = ""
    async for chunk in response.aiter_bytes():
        pending += decoder.decode(chunk)
        held = pending.endswith("\r")  # its LF may be in the next chunk: one line end, not two
        lines = _LINE_END.split(pending[:-1] if held else pending)
        pending = lines.pop() + ("\r" if held else "")
        for line in lines:
            yield line
        if len(pending) > limit:
            raise _Malformed(f"an event is too large (over {limit} bytes)")
    pending += decoder.decode(b"", final=True)
    for line in _LINE_END.split(pending.rstrip("\r\n")) if pending.rstrip("\r\n") else ():
        yield line


def _obj(value: Any, what: str) -> dict[str, Any]:
    """A JSON object of the peer's (None: an empty one), or :class:`_Malformed`."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _Malformed(f"its {what} is not a JSON object")
    return value


def _objs(value: Any, what: str) -> Iterator[dict[str, Any]]:
    """The objects of a JSON array of the peer's (None: none), or :class:`_Malformed`."""
    if value is None:
        return
    if not isinstance(value, list):
        raise _Malformed(f"its {what} is not a JSON array")
    for item in value:
        yield _obj(item, f"{what} entry")


def _remote_id(value: Any, what: str) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str) or _REMOTE_ID.fullmatch(value) is None:
        raise _Malformed(f"its {what} is not an identifier")
    return value


def _parts_of(message: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    if not isinstance(message, dict):
        return []
    parts = message.get("parts")
    return [p for p in parts if isinstance(p, dict)] if isinstance(parts, list) else []


def _text_of(message: Mapping[str, Any] | None) -> str:
    return "\n".join(p["text"] for p in _parts_of(message) if isinstance(p.get("text"), str))


def _data_of(message: Mapping[str, Any] | None) -> dict[str, Any] | None:
    for part in _parts_of(message):
        data = part.get("data")
        if isinstance(data, dict):
            return data
    return None


def _wire_part(part: Any) -> dict[str, Any]:
    if isinstance(part, Text):
        return {"text": part.text}
    if isinstance(part, Data):
        out: dict[str, Any] = {"data": part.data}
        if part.media_type:
            out["mediaType"] = part.media_type
        return out
    out = {"raw": part.base64} if part.data is not None else {"url": part.url}
    if part.name:
        out["filename"] = part.name
    if part.media_type:
        out["mediaType"] = part.media_type
    return out


def _answer_parts(content: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """A person's answer as message parts: its text (a single string answer) and its data."""
    content = dict(content or {})
    parts: list[dict[str, Any]] = []
    strings = [v for v in content.values() if isinstance(v, str)]
    if len(content) == 1 and strings:
        parts.append({"text": strings[0]})
    if content:
        parts.append({"data": content})
    return parts or [{"text": ""}]


# --- A2A 0.3 at the wire: requests translated from the 1.0 shapes, answers back into them ------------------
_METHODS_03 = {
    "SendMessage": "message/send",
    "SendStreamingMessage": "message/stream",
    "GetTask": "tasks/get",
    "CancelTask": "tasks/cancel",
    "SubscribeToTask": "tasks/resubscribe",
}
_ROLES_03 = {"ROLE_USER": "user", "ROLE_AGENT": "agent"}


def _part_03(part: Mapping[str, Any]) -> dict[str, Any]:
    if "text" in part:
        return {"kind": "text", "text": part["text"]}
    if "data" in part:
        return {"kind": "data", "data": part["data"]}
    file: dict[str, Any] = {"bytes": part["raw"]} if "raw" in part else {"uri": part.get("url")}
    if part.get("filename"):
        file["name"] = part["filename"]
    if part.get("mediaType"):
        file["mimeType"] = part["mediaType"]
    return {"kind": "file", "file": file}


def _message_03(message: Mapping[str, Any]) -> dict[str, Any]:
    out = {key: value for key, value in message.items() if key not in ("role", "parts")}
    out["kind"] = "message"
    out["role"] = _ROLES_03.get(str(message.get("role")), "user")
    out["parts"] = [_part_03(p) for p in message.get("parts") or ()]
    return out


def _params_03(method: str, params: Mapping[str, Any]) -> dict[str, Any]:
    if "message" not in params:
        return dict(params)  # {"id": …}: the same in both versions
    out: dict[str, Any] = {"message": _message_03(params["message"])}
    configuration = dict(params.get("configuration") or {})
    if "returnImmediately" in configuration:  # 0.3 says it the other way round
        configuration["blocking"] = not configuration.pop("returnImmediately")
    if configuration:
        out["configuration"] = configuration
    return out


def _state_10(state: Any) -> Any:
    if not isinstance(state, str):
        return state  # not a state: _status refuses it
    if state == "unknown":
        return "TASK_STATE_UNSPECIFIED"
    return "TASK_STATE_" + state.upper().replace("-", "_")


def _part_10(part: Any) -> Any:
    if not isinstance(part, dict):
        return part  # not a part: dropped later, as a 1.0 one is
    kind = part.get("kind")
    out: dict[str, Any] = {}
    if kind == "text" and isinstance(part.get("text"), str):
        out["text"] = part["text"]
    elif kind == "data" and "data" in part:
        out["data"] = part["data"]
    elif kind == "file" and isinstance(part.get("file"), dict):
        file = part["file"]
        if isinstance(file.get("bytes"), str):
            out["raw"] = file["bytes"]
        elif isinstance(file.get("uri"), str):
            out["url"] = file["uri"]
        if isinstance(file.get("name"), str):
            out["filename"] = file["name"]
        if isinstance(file.get("mimeType"), str):
            out["mediaType"] = file["mimeType"]
    return out  # a kind this bridge does not know: an empty part, which carries nothing on


def _parts_10(parts: Any) -> Any:
    return [_part_10(p) for p in parts] if isinstance(parts, list) else parts


def _message_10(message: Any) -> Any:
    if not isinstance(message, dict):
        return message
    out = {key: value for key, value in message.items() if key not in ("kind", "role", "parts")}
    out["role"] = "ROLE_AGENT" if message.get("role") == "agent" else "ROLE_USER"
    out["parts"] = _parts_10(message.get("parts"))
    return out


def _status_10(status: Any) -> Any:
    if not isinstance(status, dict):
        return status
    out = dict(status)
    if "state" in status:
        out["state"] = _state_10(status["state"])
    if "message" in status:
        out["message"] = _message_10(status["message"])
    return out


def _artifact_10(artifact: Any) -> Any:
    if not isinstance(artifact, dict):
        return artifact
    return {**artifact, "parts": _parts_10(artifact.get("parts"))}


def _task_10(task: Any) -> Any:
    if not isinstance(task, dict):
        return task
    out = {key: value for key, value in task.items() if key != "kind"}
    out["status"] = _status_10(task.get("status"))
    if isinstance(task.get("history"), list):
        out["history"] = [_message_10(m) for m in task["history"]]
    if isinstance(task.get("artifacts"), list):
        out["artifacts"] = [_artifact_10(a) for a in task["artifacts"]]
    return out


def _event_10(result: Mapping[str, Any]) -> dict[str, Any]:
    """A 0.3 ``message/send`` result or stream event (a bare object with its ``kind``) as a 1.0 StreamResponse."""
    kind = result.get("kind")
    if kind == "task":
        return {"task": _task_10(result)}
    if kind == "message":
        return {"message": _message_10(result)}
    if kind == "status-update":
        update = {key: value for key, value in result.items() if key not in ("kind", "final")}
        return {"statusUpdate": {**update, "status": _status_10(result.get("status"))}}
    if kind == "artifact-update":
        update = {key: value for key, value in result.items() if key != "kind"}
        return {"artifactUpdate": {**update, "artifact": _artifact_10(result.get("artifact"))}}
    raise _Malformed("it answered an object of no A2A 0.3 kind")


class A2APeer(Peer):
    """A remote A2A agent whose skills become capabilities of the agent (``agent.bridge(A2APeer(...))``).

    Each remote skill becomes a tool (MCP) and a skill (A2A card, AG-UI agent) with the same function; the
    peer also gets one ``<name>.await_task`` tool that waits a bounded time for a remote task (or answers its
    question), so a model loop never blocks on a long remote task.

    Args:
        url: the peer's base URL (its card is at ``/.well-known/agent-card.json``), or the card's own URL.
        version: the A2A version the peer must offer: :data:`A2A_VERSION` (``"1.0"``), or ``"0.3"`` for the
            agents that still speak it (their card's 0.3 interface: ``url``/``preferredTransport`` or a
            ``supportedInterfaces`` entry of ``protocolVersion`` 0.3). Checked at start; never downgraded.
        skills: the remote skill ids to bridge (default: all the card lists).
        wait_seconds: how long a call from a model (MCP) waits for the remote task before answering with a task
            handle; A2A and AG-UI callers follow the remote task to its end.
        max_wait_seconds: the longest wait ``await_task`` accepts.
        transport: an ``httpx`` transport for the peer's requests (mTLS, a proxy).
        Every other argument is :class:`~agentmw.bridges.Peer`'s.
    """

    protocol = "A2A"

    def __init__(
        self,
        url: str,
        version: str = A2A_VERSION,
        *,
        skills: list[str] | None = None,
        wait_seconds: float = 10.0,
        max_wait_seconds: float = 60.0,
        transport: httpx.AsyncBaseTransport | None = None,
        **options: Any,
    ) -> None:
        super().__init__(url, **options)
        if version not in A2A_VERSIONS:
            raise ValueError(
                f"A2APeer speaks A2A {A2A_VERSION} (or 0.3, pinned explicitly); version {version!r} is not "
                "one it can pin"
            )
        self.version = version
        self.skills = list(skills) if skills is not None else None
        self.wait_seconds = wait_seconds
        self.max_wait_seconds = max_wait_seconds
        self.transport = transport
        self.card: dict[str, Any] = {}
        self.endpoint = ""
        self.streaming = False
        self._http: httpx.AsyncClient | None = None
        self._http_loop: Any = None
        self._cancels: set[asyncio.Task[None]] = set()  # remote cancels under way (held: never collected)

    # --- wire ----------------------------------------------------------------------------------------
    def _client(self) -> httpx.AsyncClient:
        import httpx

        loop = asyncio.get_running_loop()
        if self._http is None or self._http_loop is not loop:
            self._http = httpx.AsyncClient(
                transport=self.transport, timeout=self.timeout, follow_redirects=False
            )
            self._http_loop = loop
        return self._http

    def _headers(self, headers: Mapping[str, str], stream: bool = False) -> dict[str, str]:
        out = {**headers, "A2A-Version": self.version, "content-type": "application/json"}
        out["accept"] = "text/event-stream" if stream else "application/json"
        return out

    @property
    def legacy(self) -> bool:
        """Whether the bridge speaks A2A 0.3 (pinned so) rather than 1.0."""
        return self.version != A2A_VERSION

    def _body(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if self.legacy:
            method, params = _METHODS_03[method], _params_03(method, params)
        return {"jsonrpc": "2.0", "id": uuid.uuid4().hex, "method": method, "params": params}

    def _answer(self, method: str, result: dict[str, Any]) -> dict[str, Any]:
        """A result as the 1.0 shapes the rest of the bridge reads."""
        if not self.legacy:
            return result
        if method in ("GetTask", "CancelTask"):
            return _task_10(result)  # type: ignore[no-any-return]
        return _event_10(result)

    async def _call(self, method: str, params: dict[str, Any], headers: Mapping[str, str]) -> dict[str, Any]:
        import httpx

        body = self._body(method, params)
        try:  # one answer, whole, within the timeout: a peer trickling bytes trips no per-read timeout
            async with (
                asyncio.timeout(self.timeout),
                self._client().stream(
                    "POST", self.endpoint, json=body, headers=self._headers(headers)
                ) as response,
            ):
                content = await self._read(response)
        except TimeoutError as exc:
            raise _Unreachable(f"no whole answer within {self.timeout:g} s") from exc
        except httpx.TransportError as exc:
            raise _Unreachable(f"{type(exc).__name__}: {exc}") from exc
        return self._answer(
            method, self._rpc_result(response.status_code, content, _retry_after(response.headers))
        )

    async def _read(self, response: httpx.Response) -> bytes:
        """The body, up to ``max_response_bytes``: a larger one is the peer's fault, and is not read further."""
        chunks: list[bytes] = []
        size = 0
        async for chunk in response.aiter_bytes():
            size += len(chunk)
            if size > self.max_response_bytes:
                raise _Malformed(f"its answer is too large (over {self.max_response_bytes} bytes)")
            chunks.append(chunk)
        return b"".join(chunks)

    def _rpc_result(self, status: int, content: bytes, retry_after: float | None = None) -> dict[str, Any]:
        if status in (401, 403):
            raise Permanent(f"The A2A peer {self.name} refused the bridge's credential (HTTP {status}).")
        if status >= 500 or status in (408, 429):  # down, overloaded or shedding load: a transport failure
            raise _Unreachable(f"HTTP {status}", retry_after)
        try:
            answer = json.loads(content)
        except (ValueError, RecursionError) as exc:  # RecursionError: nested deeper than the decoder goes
            raise _Malformed(f"HTTP {status}: not JSON") from exc
        if not isinstance(answer, dict):
            raise _Malformed(f"HTTP {status}: not a JSON-RPC response")
        error = answer.get("error")
        if isinstance(error, dict):
            code = error.get("code")
            raise _RpcError(
                code if isinstance(code, int) and not isinstance(code, bool) else 0,
                str(error.get("message") or ""),
            )
        result = answer.get("result")
        if not isinstance(result, dict):
            raise _Malformed(f"HTTP {status}: a JSON-RPC response without a result")
        return result

    async def _stream(
        self, method: str, params: dict[str, Any], headers: Mapping[str, str]
    ) -> AsyncIterator[dict[str, Any]]:
        """The results of a streaming JSON-RPC call, one per SSE event; :class:`_Unreachable` when it is cut."""
        import httpx

        body = self._body(method, params)
        timeout = httpx.Timeout(self.timeout, read=max(self.timeout, 60.0))
        try:
            async with self._client().stream(
                "POST", self.endpoint, json=body, timeout=timeout, headers=self._headers(headers, stream=True)
            ) as response:
                if not response.headers.get("content-type", "").startswith("text/event-stream"):
                    content = await self._read(response)
                    yield self._answer(
                        method,
                        self._rpc_result(response.status_code, content, _retry_after(response.headers)),
                    )
                    return
                data: list[str] = []
                size = 0
                async for line in _lines(response, self.max_response_bytes):
                    if line.startswith("data:"):
                        data.append(line[5:].lstrip())
                        size += len(line)
                        if size > self.max_response_bytes:
                            raise _Malformed(f"an event is too large (over {self.max_response_bytes} bytes)")
                    elif not line and data:
                        text, data, size = "\n".join(data), [], 0
                        yield self._answer(method, self._rpc_result(200, text.encode()))
        except httpx.TransportError as exc:
            raise _Unreachable(f"{type(exc).__name__}: {exc}") from exc

    # --- start ---------------------------------------------------------------------------------------
    async def _connect(self) -> list[Capability]:
        import httpx

        url = self.url if self.url.endswith(".json") else f"{self.url}/.well-known/agent-card.json"
        await self.allow.acheck(url, "A2A card")
        try:
            async with self._client().stream("GET", url, headers={"A2A-Version": self.version}) as response:
                content = await self._read(response) if response.status_code == 200 else b""
        except httpx.TransportError as exc:
            raise BridgeError(
                f"A2A peer at {self.url} could not be reached: {type(exc).__name__}: {exc}"
            ) from exc
        except _Malformed as exc:
            raise BridgeError(f"A2A peer at {self.url}: {exc}") from exc
        if response.status_code != 200:
            raise BridgeError(f"A2A peer at {self.url}: its card answered HTTP {response.status_code}")
        try:
            card = json.loads(content)
        except (ValueError, RecursionError) as exc:
            raise BridgeError(f"A2A peer at {self.url}: its card is not JSON") from exc
        if not isinstance(card, dict):
            raise BridgeError(f"A2A peer at {self.url}: its card is not a JSON object")
        self.card = card
        if self.name is None:
            self.name = safe_name(str(card.get("name") or "") or (httpx.URL(self.url).host or "peer"))
        interfaces = [i for i in card.get("supportedInterfaces") or [] if isinstance(i, dict)]
        offered = sorted(
            {str(i.get("protocolVersion")) for i in interfaces if i.get("protocolVersion")}
            | ({str(card["protocolVersion"])} if card.get("protocolVersion") else set())
        )
        pinned = [i for i in interfaces if _major_minor(i.get("protocolVersion")) == self.version]
        if self.legacy and _major_minor(card.get("protocolVersion")) == self.version:
            # a 0.3 card: its main interface (url, preferredTransport), then its additionalInterfaces
            main = {"url": card.get("url"), "protocolBinding": card.get("preferredTransport") or "JSONRPC"}
            extra = [
                {"url": i.get("url"), "protocolBinding": i.get("transport")}
                for i in card.get("additionalInterfaces") or []
                if isinstance(i, dict)
            ]
            pinned += [main, *extra]
        if not pinned:
            raise VersionMismatch(self.name, "A2A", self.version, offered or "no version")
        jsonrpc = [
            i for i in pinned if i.get("protocolBinding") == "JSONRPC" and isinstance(i.get("url"), str)
        ]
        if not jsonrpc:
            bindings = sorted({str(i.get("protocolBinding")) for i in pinned})
            raise BridgeError(
                f"A2A peer {self.name!r} offers A2A {self.version} only over {bindings}; the bridge "
                "needs the JSONRPC binding"
            )
        self.endpoint = await self.allow.acheck(self._same_origin(url, jsonrpc[0]["url"]), "A2A interface")
        self.streaming = bool((card.get("capabilities") or {}).get("streaming"))
        remote = {
            s["id"]: s
            for s in card.get("skills") or []
            if isinstance(s, dict) and isinstance(s.get("id"), str)
        }
        chosen = self.skills if self.skills is not None else list(remote)
        missing = [s for s in chosen if s not in remote]
        if missing:
            raise BridgeError(
                f"A2A peer {self.name!r} has no skill {missing[0]!r}; its card lists {sorted(remote)}"
            )
        capabilities: list[Capability] = []
        for skill_id in chosen:
            capabilities.extend(self._skill_capabilities(remote[skill_id]))
        capabilities.append(self._await_capability())
        return capabilities

    def _same_origin(self, card_url: str, interface: str) -> str:
        """The card's interface URL, if it is where the card came from (scheme, host and port), or its host is
        one the operator named in ``allow_hosts``. Anything else would send the bridge's credential to a server
        the card chose; an ``https`` card never sends it over plain ``http``."""
        try:
            card, there = urlsplit(card_url), urlsplit(interface)
            same = (card.scheme, card.hostname, card.port) == (there.scheme, there.hostname, there.port)
        except ValueError as exc:
            raise EgressRefused(f"A2A interface url {interface!r} is malformed") from exc
        if same:
            return interface
        if card.scheme == "https" and there.scheme != "https":
            raise BridgeError(
                f"A2A peer {self.name!r}: its card (https) names an interface over {there.scheme}; "
                "the bridge's credential never goes over plain http"
            )
        if there.hostname and self.allow.names(there.hostname):
            return interface
        raise BridgeError(
            f"A2A peer {self.name!r}: its card names an interface on another origin "
            f"({there.scheme}://{there.netloc}) than the card's own; name that host in "
            "Egress(allow_hosts=...) to use it"
        )

    def _skill_capabilities(self, skill: Mapping[str, Any]) -> list[Capability]:
        skill_id = skill["id"]
        shown = safe_name(skill_id)  # the peer's id, as it may appear in the agent's own words
        what = f"skill {shown}"
        description = self.describe(str(skill.get("description") or ""), what)

        async def remote_skill(ctx: Context, text: str = "", data: RemoteData | None = None) -> Any:
            return await self.run(ctx, skill_id, text, data.model_dump() if data is not None else None)

        name = f"{self.prefix}{safe_name(skill_id)}"
        contract = (
            f"Runs the skill {shown!r} of the remote A2A agent {self.name}. Give the request as `text`, "
            f"structured input as `data`. What the agent says of it:\n{description}"
        )
        options: dict[str, Any] = {
            "name": name,
            "title": f"{self.name}: {safe_name(str(skill.get('name') or skill_id))}",
            "contract": contract,
            "summary": description or f"{shown} (remote A2A agent {self.name})",
            "tags": tuple(safe_name(str(t)) for t in skill.get("tags") or () if isinstance(t, str)),
        }
        tool = build_capability("tool", remote_skill, **options)
        tool.meta["agentmw/bridge"] = {"protocol": "A2A", "peer": self.name, "skill": skill_id}
        as_skill = build_capability("skill", remote_skill, **options)
        as_skill.meta["agentmw/bridge"] = tool.meta["agentmw/bridge"]
        return [tool, as_skill]

    @property
    def await_name(self) -> str:
        return f"{self.prefix}{self.name}.await_task"

    def _await_capability(self) -> Capability:
        async def await_task(
            ctx: Context,
            task_id: str,
            answer: str | None = None,
            data: RemoteData | None = None,
            wait_seconds: float = 10.0,
        ) -> Any:
            """Wait a bounded time for a remote task this caller started, or answer its question.

            Args:
                task_id: the task handle a bridged call answered with.
                answer: the answer to the remote agent's question, when it asked one.
                data: a structured answer, when the question asked for one.
                wait_seconds: how long to wait for the task before answering with its state.
            """
            return await self.resume(
                ctx, task_id, answer, data.model_dump() if data is not None else None, wait_seconds
            )

        return build_capability(
            "tool",
            await_task,
            name=self.await_name,
            title=f"{self.name}: wait for a remote task",
            contract=f"Waits up to `wait_seconds` for a task of the remote A2A agent {self.name} "
            "that an earlier call answered with a task handle, or sends it the answer "
            "to its question (`answer`, or `data`). Answers with the task's result, "
            "its question, or its state if it is still working.",
        )

    # --- calls ---------------------------------------------------------------------------------------
    def _can_ask(self, ctx: Context) -> bool:
        """Callers that keep a task open (A2A, AG-UI) are asked the remote's question in-band; a model (MCP)
        gets it as a normal result and answers with ``await_task``."""
        return ctx.face in ("a2a", "agui") and ctx.supports("elicitation")

    async def run(self, ctx: Context, skill: str, text: str, data: dict[str, Any] | None) -> Any:
        """One bridged call of ``skill``: send, follow, map the remote task's end onto an outcome."""
        headers = await self.outbound_headers(ctx, f"skill {safe_name(skill)}")
        parts: list[dict[str, Any]] = [{"text": text}] if text else []
        if data:
            parts.append({"data": data})
        for first in ctx.messages[:1]:  # files reach the remote agent as they came (A2A, AG-UI)
            parts.extend(_wire_part(f) for f in first.files)
        if not parts:
            parts.append({"text": ""})
        step = f"bridge:{self.name}:{skill}"
        # a replay (another replica, a restart, an answer) finds the remote task in the journal: never a second one
        message_id = await ctx.once(f"{step}:message", _new_id)
        wait = None if ctx.face in ("a2a", "agui") else self.wait_seconds
        message = {"messageId": message_id, "role": "ROLE_USER", "parts": parts, "metadata": {"skill": skill}}
        live: list[_Task] = []  # the remote task this call is following, latest last: cancelled with the call
        try:
            return await self._run(ctx, skill, headers, step, message, wait, live)
        except asyncio.CancelledError as exc:
            # the caller cancelled (CancelTask, notifications/cancelled, an AG-UI disconnect): stopping only
            # the wait would leave the remote task running, so the peer is told, bounded. A shutdown, or an
            # execution carried on by another replica, leaves it running for the replay to find.
            if live and not left_for_another(exc):
                await self._cancel_remote(headers, live[-1])
            raise

    async def _run(
        self,
        ctx: Context,
        skill: str,
        headers: Mapping[str, str],
        step: str,
        message: dict[str, Any],
        wait: float | None,
        live: list[_Task],
    ) -> Any:
        found = await ctx.once(f"{step}:send", self._send, ctx, headers, message, wait, skill, live)
        task = _Task.from_json(found, skill)
        live.append(task)
        rounds = 0
        while True:
            if task.state == "TASK_STATE_INPUT_REQUIRED" and self._can_ask(ctx):
                rounds += 1
                question = _text_of(task.status) or "The remote agent needs more input."
                schema = _data_of(task.status) or {}
                if not (isinstance(schema.get("properties"), dict) and schema.get("type") == "object"):
                    schema = {
                        "type": "object",
                        "properties": {"answer": {"type": "string"}},
                        "required": ["answer"],
                    }
                answer = await ctx.ask(
                    self.frame(question, f"skill {safe_name(skill)}"), schema, key=f"{step}:input-{rounds}"
                )
                if not answer.accepted:
                    raise Rejected(
                        f"The question of the remote A2A agent {self.name} was {answer.action}d; its "
                        f"task {task.id} stays open."
                    )
                follow = {
                    "messageId": await ctx.once(f"{step}:answer-{rounds}-id", _new_id),
                    "role": "ROLE_USER",
                    "parts": _answer_parts(answer.content),
                    "taskId": task.id,
                    "contextId": task.context_id,
                }
                task = _Task.from_json(
                    await ctx.once(
                        f"{step}:answer-{rounds}", self._send, ctx, headers, follow, wait, skill, live
                    ),
                    skill,
                )
                live.append(task)
                continue
            if not task.settled and wait is None:
                task = await self._follow_sent(ctx, headers, task, None)
                continue
            return await self._settle(ctx, skill, task)

    async def resume(
        self, ctx: Context, task_id: str, answer: str | None, data: dict[str, Any] | None, wait_seconds: float
    ) -> Any:
        """``await_task``: the same caller waits for (or answers) a remote task it was handed."""
        assert self.agent is not None
        record = await self.agent.state.get_key(TASKS_NS, f"{self.name}:{task_id}")
        if not isinstance(record, dict) or record.get("caller") != (ctx.caller or "anonymous"):
            raise Rejected(
                f"Unknown task {task_id!r}: only a task handle this caller received from the A2A peer "
                f"{self.name} can be awaited."
            )
        skill = str(record.get("skill"))
        headers = await self.outbound_headers(ctx, f"skill {safe_name(skill)} (task {task_id})")
        wait = max(0.0, min(float(wait_seconds), self.max_wait_seconds))
        if answer is not None or data:
            parts = ([{"text": answer}] if answer is not None else []) + ([{"data": data}] if data else [])
            message = {
                "messageId": await ctx.once(f"bridge:{self.name}:await:{task_id}:id", _new_id),
                "role": "ROLE_USER",
                "parts": parts,
                "taskId": task_id,
                "contextId": record.get("contextId"),
            }
            found = await ctx.once(
                f"bridge:{self.name}:await:{task_id}", self._send, ctx, headers, message, wait, skill
            )
            task = _Task.from_json(found, skill)
        else:
            task = await self._follow_sent(
                ctx, headers, _Task(id=task_id, context_id=record.get("contextId"), skill=skill), wait
            )
        return await self._settle(ctx, skill, task)

    async def _send(
        self,
        ctx: Context,
        headers: Mapping[str, str],
        message: dict[str, Any],
        wait: float | None,
        skill: str,
        live: list[_Task] | None = None,
    ) -> dict[str, Any]:
        """Send ``message`` and follow its task until it settles (or ``wait`` passes); the task as JSON.
        ``live`` gets the task being followed, so a cancelled caller can cancel it on the peer."""
        self.check_breaker()
        task = _Task(id=message.get("taskId"), context_id=message.get("contextId"), skill=skill)
        if live is not None:
            live.append(task)
        if (
            self.retries
        ):  # a retried send carries its messageId as the idempotency key: agentmw peers run it once
            message = {
                **message,
                "metadata": {**message.get("metadata", {}), "idempotencyKey": message["messageId"]},
            }
        params: dict[str, Any] = {"message": message, "configuration": {"historyLength": 0}}
        try:
            task = await self._attempts(ctx, headers, params, task, wait)
        except BaseException:
            self.breaker.abandon()  # cancelled, or failed on our side: a trial call it was is given up
            raise
        self.breaker.record(True)  # the peer answered: a failed task is its answer, not a fault of the peer
        return task.to_json()

    async def _attempts(
        self,
        ctx: Context,
        headers: Mapping[str, str],
        params: dict[str, Any],
        task: _Task,
        wait: float | None,
    ) -> _Task:
        attempt = 0
        while True:
            try:
                if self.streaming:
                    return await self._follow(
                        ctx, headers, task, wait, first=self._stream("SendStreamingMessage", params, headers)
                    )
                # the task id at once (then GetTask): a blocking send that is cut, or cancelled, would leave
                # a remote task the bridge cannot name, to re-read or to cancel
                params["configuration"]["returnImmediately"] = True
                result = await self._call("SendMessage", params, headers)
                if "message" in result:
                    task.reply, task.state = _obj(result["message"], "message"), "TASK_STATE_COMPLETED"
                    return task
                await self._apply(ctx, task, {"task": result.get("task")})
                return task if task.settled else await self._follow(ctx, headers, task, wait)
            except _Unreachable as exc:
                # a malformed answer is never retried: the same request gets the same answer
                if not isinstance(exc, _Malformed) and task.id is None and attempt < self.retries:
                    attempt += 1
                    await asyncio.sleep(min(0.25 * 2**attempt, 4.0))
                    continue
                raise await self._fault(ctx, exc, task) from None
            except _RpcError as exc:
                raise await self._fault(ctx, exc, task) from None

    async def _follow_sent(
        self, ctx: Context, headers: Mapping[str, str], task: _Task, wait: float | None
    ) -> _Task:
        """:meth:`_follow` for a task sent before (``await_task``, a replayed execution): the peer's faults
        mapped, and counted by the breaker, as they are for a send."""
        self.check_breaker()
        try:
            task = await self._follow(ctx, headers, task, wait)
        except (_Unreachable, _RpcError) as exc:
            raise await self._fault(ctx, exc, task) from None
        except BaseException:
            self.breaker.abandon()  # cancelled, or failed on our side: a trial call it was is given up
            raise
        self.breaker.record(True)
        return task

    async def _cancel_remote(self, headers: Mapping[str, str], task: _Task) -> None:
        """Pass a cancel on: ``CancelTask`` for the remote task, shielded from a second cancel and bounded by
        :data:`CANCEL_SECONDS`, so the local cancel is never held long. A task already ended, or not named
        yet by the peer, has nothing to cancel."""
        if task.id is None or task.state in _TERMINAL or task.reply is not None:
            return
        job = asyncio.ensure_future(self._send_cancel(dict(headers), task.id))
        self._cancels.add(job)
        job.add_done_callback(self._cancels.discard)
        try:
            await asyncio.shield(job)
        except asyncio.CancelledError:
            pass  # cancelled again: the cancel goes on, bounded, without this caller

    async def _send_cancel(self, headers: Mapping[str, str], task_id: str) -> None:
        try:
            async with asyncio.timeout(CANCEL_SECONDS):
                found = await self._call("CancelTask", {"id": task_id}, headers)
            status = found.get("status")
            state = status.get("state") if isinstance(status, dict) else None
            logger.info("A2A peer %s: task %s cancelled (%s)", self.name, task_id, state)
        except _RpcError as exc:
            level = logging.INFO if exc.code == _TASK_NOT_CANCELABLE else logging.WARNING
            logger.log(level, "A2A peer %s: task %s was not cancelled: %s", self.name, task_id, exc)
        except (_Unreachable, TimeoutError) as exc:
            logger.warning("A2A peer %s: task %s could not be cancelled: %s", self.name, task_id, exc)
        except Exception:
            logger.exception("A2A peer %s: cancelling task %s failed", self.name, task_id)

    async def _fault(self, ctx: Context, exc: _Unreachable | _RpcError, task: _Task) -> Exception:
        """A failed exchange with the peer as the caller's outcome; the breaker counts it if it is the peer's.
        A transport failure after the peer named its task leaves that task running there: the caller gets
        its handle to read it back, rather than a call to repeat (which would start the skill again)."""
        if isinstance(exc, _RpcError):
            # only the peer's own faults count against it: a request it refuses (bad params, unknown task,
            # unsupported content) is the caller's, and must not let one caller cut the peer off for all
            self.breaker.record(exc.code not in (-32603, -32006))
            return self._rpc_failure(exc, task.id, task.skill)
        self.breaker.record(False)
        if isinstance(exc, _Malformed):
            return Permanent(
                f"The A2A peer {self.name} answered something that is not A2A {self.version}: {exc}."
            )
        retry_after = exc.retry_after if exc.retry_after is not None else 5
        if task.id is None or task.reply is not None:
            return Retryable(
                f"The A2A peer {self.name} could not be reached ({exc}).", retry_after=retry_after
            )
        await self._remember(ctx, task.skill, task)
        return Retryable(
            f"The A2A peer {self.name} could not be reached ({exc}) while it had task {task.id}, which may "
            f"still run there. Do not repeat the call: call {self.await_name} with task_id={task.id!r} to "
            "read the task's result once the peer is back.",
            retry_after=retry_after,
            data={
                "peer": self.name,
                "skill": task.skill,
                "taskId": task.id,
                "contextId": task.context_id,
                "awaitWith": self.await_name,
            },
        )

    def _rpc_failure(self, exc: _RpcError, task_id: str | None, skill: str) -> Exception:
        text = self.frame(exc.message, f"skill {safe_name(skill)} error" if skill else "error")
        if exc.code == _TASK_NOT_FOUND:
            return Rejected(f"The A2A peer {self.name} does not know the task {task_id}: {text}")
        if exc.code in (-32600, -32601, -32602, -32005, -32008, -32009, _UNSUPPORTED_OPERATION):
            return Rejected(f"The A2A peer {self.name} refused the request ({exc.code}): {text}")
        return Permanent(f"The A2A peer {self.name} failed ({exc.code}): {text}")

    async def _follow(
        self,
        ctx: Context,
        headers: Mapping[str, str],
        task: _Task,
        wait: float | None,
        first: AsyncIterator[dict[str, Any]] | None = None,
    ) -> _Task:
        """Follow the task's events until it settles or ``wait`` passes. A cut stream is recovered by
        resubscribing (the task snapshot first, then live events), or by reading the task back; the events
        already seen are recognised by their message and artifact ids, so none is lost or repeated."""
        try:
            async with asyncio.timeout(wait):
                await self._follow_until_settled(ctx, headers, task, first)
        except TimeoutError:
            pass  # still working: the caller gets a task handle
        return task

    async def _follow_until_settled(
        self,
        ctx: Context,
        headers: Mapping[str, str],
        task: _Task,
        first: AsyncIterator[dict[str, Any]] | None,
    ) -> None:
        cuts = 0
        stream = first
        subscribed = False
        partial = False  # what was folded since the last whole snapshot may miss events lost at a cut
        delay = 0.2
        while not task.settled:
            if stream is None and (not self.streaming or cuts > 1):
                # no stream to follow (or it keeps breaking): read the task back, with backoff
                try:
                    found = await self._call("GetTask", {"id": task.id}, headers)
                except _Malformed:
                    raise
                except _Unreachable:
                    cuts += 1
                    if cuts > _MAX_CUTS:
                        raise
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, 5.0)
                    continue
                await self._apply(ctx, task, {"task": found})
                partial = False
                if not task.settled:
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, 5.0)
                continue
            if stream is None:
                stream = self._stream("SubscribeToTask", {"id": task.id}, headers)
                subscribed = True
            try:
                async for event in stream:
                    await self._apply(ctx, task, event)
                    if task.settled:
                        break
                else:
                    if not task.settled:
                        raise _Unreachable("the stream ended before the task settled")
            except _Malformed:
                # an event garbled on the way (or one the peer got wrong) after the task was named: the
                # task is read back; a peer whose task itself is malformed fails there, as not A2A
                if task.id is None:
                    raise
                cuts, partial = max(cuts + 1, 2), True
                logger.info(
                    "A2A peer %s: an event of task %s was malformed; reading it back", self.name, task.id
                )
            except _Unreachable:
                cuts += 1
                if task.id is None or cuts > _MAX_CUTS:
                    raise
                partial = True
                if self.legacy:
                    # a2a-sdk 0.3 folds each event into its store once per subscriber: a resubscribe would
                    # double every chunk appended after it, so a 0.3 task is read back with tasks/get instead
                    cuts = max(cuts, 2)
                logger.info("A2A peer %s: the stream of task %s was cut; recovering it", self.name, task.id)
            except _RpcError as exc:
                # a task that went terminal meanwhile, or whose stream the peer no longer keeps (0.3 answers
                # -32602 or -32001 to tasks/resubscribe then), cannot be subscribed to: read it back
                if task.id is None or not (subscribed or exc.code == _UNSUPPORTED_OPERATION):
                    raise
                cuts = max(cuts, 2)
            finally:
                await stream.aclose()  # type: ignore[attr-defined]
                stream = None
        if partial and task.reply is None:
            # events sent while the stream was down are not replayed by every peer (a 0.3 resubscribe starts
            # with the next live event, not the task): the settled task is read back whole, so no artifact
            # chunk is lost
            await self._reread(ctx, headers, task)

    async def _reread(self, ctx: Context, headers: Mapping[str, str], task: _Task) -> None:
        delay = 0.2
        for attempt in range(_MAX_CUTS + 1):
            try:
                found = await self._call("GetTask", {"id": task.id}, headers)
            except _Malformed:
                raise
            except _Unreachable:
                if attempt == _MAX_CUTS:
                    raise
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)
                continue
            await self._apply(ctx, task, {"task": found})
            return

    async def _apply(self, ctx: Context, task: _Task, event: Mapping[str, Any]) -> None:
        """Fold one StreamResponse into ``task``; status messages not seen before become progress."""
        if "task" in event:
            snapshot = _obj(event["task"], "task")
            task.id = _remote_id(snapshot.get("id"), "task id") or task.id
            task.context_id = _remote_id(snapshot.get("contextId"), "context id") or task.context_id
            for message in _objs(snapshot.get("history"), "task history"):
                if message.get("role") == "ROLE_AGENT":
                    await self._said(ctx, task, message)
            for artifact in _objs(snapshot.get("artifacts"), "artifacts"):
                task.artifacts[
                    _remote_id(artifact.get("artifactId"), "artifact id") or str(len(task.artifacts))
                ] = artifact
            await self._status(ctx, task, _obj(snapshot.get("status"), "task status"))
        elif "statusUpdate" in event:
            update = _obj(event["statusUpdate"], "status update")
            task.id = _remote_id(update.get("taskId"), "task id") or task.id
            task.context_id = _remote_id(update.get("contextId"), "context id") or task.context_id
            await self._status(ctx, task, _obj(update.get("status"), "task status"))
        elif "artifactUpdate" in event:
            update = _obj(event["artifactUpdate"], "artifact update")
            artifact = _obj(update.get("artifact"), "artifact")
            key = _remote_id(artifact.get("artifactId"), "artifact id") or str(len(task.artifacts))
            known = task.artifacts.get(key)
            if update.get("append") and known is not None:
                task.artifacts[key] = {**known, "parts": [*_parts_of(known), *_parts_of(artifact)]}
            else:
                task.artifacts[key] = artifact
        elif "message" in event:
            task.reply, task.state = _obj(event["message"], "message"), "TASK_STATE_COMPLETED"
        else:
            raise _Malformed("it answered neither a task, an update nor a message")

    async def _status(self, ctx: Context, task: _Task, status: Mapping[str, Any]) -> None:
        if status.get("state"):
            if not isinstance(status["state"], str):
                raise _Malformed("its task state is not a string")
            task.state = status["state"]
        message = status.get("message")
        task.status = message if isinstance(message, dict) else None
        if task.status is not None and task.state == "TASK_STATE_WORKING":
            await self._said(ctx, task, task.status)

    async def _said(self, ctx: Context, task: _Task, message: Mapping[str, Any]) -> None:
        key = message.get("messageId") or json.dumps(message.get("parts"), sort_keys=True)
        if key in task.seen:
            return
        task.seen.add(key)
        text = _text_of(message)
        if text:
            task.said += 1
            await ctx.progress(
                task.said,
                None,
                self.frame(text, f"skill {safe_name(task.skill)} status" if task.skill else "status"),
            )

    # --- outcomes ------------------------------------------------------------------------------------
    def _parts(self, parts: Any, what: str) -> list[Any]:
        out: list[Any] = []
        text: list[str] = []  # adjacent text parts (an artifact's chunks) are one text: framed as one

        def flush() -> None:
            if text:
                out.append(Text(self.frame("".join(text), what)))
                text.clear()

        for part in parts if isinstance(parts, list) else ():
            if not isinstance(part, dict):
                continue  # not a part: nothing of it reaches the caller
            if isinstance(part.get("text"), str):
                text.append(part["text"])
                continue
            flush()
            if "data" in part:
                out.append(Data(part["data"], part.get("mediaType") or None))
            elif isinstance(part.get("raw"), str):
                try:
                    raw = decode_base64(part["raw"])
                except ValueError:
                    continue
                out.append(File(data=raw, name=_file_name(part), media_type=_media_type(part)))
            elif isinstance(part.get("url"), str):
                out.append(File(url=part["url"], name=_file_name(part), media_type=_media_type(part)))
        flush()
        return out

    async def _settle(self, ctx: Context, skill: str, task: _Task) -> Any:
        what = f"skill {safe_name(skill)}"
        state = task.state
        said = _text_of(task.status)
        if state == "TASK_STATE_COMPLETED":
            if task.reply is not None:
                return Message(tuple(self._parts(task.reply.get("parts"), what)) or (Text(""),))
            artifacts = []
            for artifact in task.artifacts.values():
                parts = self._parts(artifact.get("parts"), what)
                if parts:
                    artifacts.append(
                        Artifact(
                            tuple(parts),
                            name=safe_name(str(artifact.get("name") or "result")),
                            metadata={"remoteArtifactId": artifact.get("artifactId")},
                        )
                    )
            if artifacts:
                return artifacts
            return Message((Text(self.frame(said, what)),)) if said else None
        data = {"peer": self.name, "skill": skill, "taskId": task.id, "contextId": task.context_id}
        reason = self.frame(said, what) if said else "(no reason given)"
        if state == "TASK_STATE_FAILED":
            hint = _data_of(task.status) or {}
            if hint.get("retryable") is True:
                raise Retryable(
                    f"The remote A2A agent {self.name} failed: {reason}",
                    retry_after=hint.get("retryAfterSeconds"),
                    data=data,
                )
            raise Permanent(f"The remote A2A agent {self.name} failed: {reason}", data=data)
        if state == "TASK_STATE_REJECTED":
            raise Rejected(f"The remote A2A agent {self.name} rejected the request: {reason}", data=data)
        if state == "TASK_STATE_CANCELED":
            raise Permanent(
                f"The remote A2A agent {self.name} canceled its task {task.id}: {reason}", data=data
            )
        if state == "TASK_STATE_AUTH_REQUIRED":
            raise NeedsInput(
                f"The remote A2A agent {self.name} needs authentication the bridge's credential does "
                f"not give (task {task.id}): {reason}",
                data=data,
            )
        # input-required for a caller that cannot be asked in-band, or still working: a normal answer with a handle
        await self._remember(ctx, skill, task)
        if state == "TASK_STATE_INPUT_REQUIRED":
            text = (
                f"The remote A2A agent {self.name} needs input before it can go on with task {task.id}. Its "
                f"question:\n{reason}\nTo answer, call {self.await_name} with task_id={task.id!r} and answer=..."
            )
            status = "input-required"
        else:
            text = (
                f"The remote A2A agent {self.name} is still working on task {task.id}. Call {self.await_name} "
                f"with task_id={task.id!r} to wait for its result."
            )
            status = "working"
        return [
            Artifact(
                (
                    Text(text),
                    Data(
                        {
                            "status": status,
                            **data,
                            "awaitWith": self.await_name,
                            "answerSchema": _data_of(task.status),
                        }
                    ),
                ),
                name="remote-task",
            )
        ]

    async def _remember(self, ctx: Context, skill: str, task: _Task) -> None:
        """Bind the task handle to this caller, so only it can await or answer the remote task."""
        assert self.agent is not None
        state = self.agent.state
        state.limit(TASKS_NS, StoreLimits(max_count=100_000, max_age=_TASK_TTL))
        await state.set_key(
            TASKS_NS,
            f"{self.name}:{task.id}",
            {"caller": ctx.caller or "anonymous", "skill": skill, "contextId": task.context_id},
            _TASK_TTL,
        )


_MEDIA_TYPE = re.compile(r"[A-Za-z0-9][A-Za-z0-9!#$&^_.+\-]{0,63}/[A-Za-z0-9][A-Za-z0-9!#$&^_.+\-]{0,63}")


def _file_name(part: Mapping[str, Any]) -> str | None:
    """A remote file's name, reduced to safe characters (it reaches models and clients outside any frame)."""
    name = part.get("filename")
    return safe_name(name, 128) if isinstance(name, str) and name else None


def _media_type(part: Mapping[str, Any]) -> str | None:
    """A remote media type, if it is one (``type/subtype``, no parameters); anything else is dropped."""
    value = part.get("mediaType")
    return value if isinstance(value, str) and _MEDIA_TYPE.fullmatch(value) else None


def _retry_after(headers: Mapping[str, str]) -> float | None:
    """A ``Retry-After`` in seconds (the date form is not read), bounded: a peer cannot park its callers."""
    try:
        seconds = float(headers.get("retry-after") or "")
    except ValueError:
        return None
    return min(max(seconds, 0.0), 300.0) if math.isfinite(seconds) else None


def _major_minor(version: Any) -> str:
    parts = str(version or "").split(".")
    return ".".join(parts[:2]) if len(parts) >= 2 else str(version or "")


async def _new_id() -> str:
    return uuid.uuid4().hex
