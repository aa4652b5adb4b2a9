"""The differential harness: one request sent over plain HTTP and through an agent face, and what differs.

HTTP is the reference. Each answer is reduced to an **outcome class** and, for a success, its data:

- ``ok``: HTTP 2xx, with its JSON body; MCP a result, its ``structuredContent`` (``{"result": x}`` unwrapped when
  the body is no object); A2A ``COMPLETED``, the artifact's data part; AG-UI ``RUN_FINISHED``, its ``result``.
- ``auth_refused``: HTTP 401/403; MCP the POST answered 401/403, or a tool error reading ``HTTP 401``/``403``;
  A2A ``AUTH_REQUIRED`` or a refusal reading so; AG-UI HTTP 401/403 or a ``RUN_ERROR`` reading so.
- ``not_found``: HTTP 404; elsewhere an error reading ``HTTP 404`` or "not found".
- ``invalid``: HTTP 400, 409, 422 and other 4xx; MCP JSON-RPC -32602 or a tool error reading ``Invalid ...`` or
  ``HTTP 4xx``; A2A ``INPUT_REQUIRED`` or ``REJECTED``; AG-UI an ``arguments`` interrupt, HTTP 422 or a
  ``RUN_ERROR`` reading so.
- ``retryable``: HTTP 429, 503; MCP ``_meta["agentmw/retryable"]``; A2A ``FAILED`` with ``retryable`` metadata;
  AG-UI ``RUN_ERROR`` code ``RETRYABLE``.
- ``failed``: HTTP's other 5xx; any other error elsewhere.
- ``redirect``: HTTP 3xx; an agent must refuse it, with a message naming the redirect.

The wire has no field for "not found" or "invalid" on a tool error, so those are read from the text agentmw writes
(``HTTP <status>: <detail>``, ``Invalid arguments: ...``); an error text that says nothing lands in ``failed``.

:func:`compare` lists every difference. Two of them are the issue's worst and are named so: ``BYPASS`` (served
where HTTP refuses the caller) and ``LEAK`` (more data than HTTP: a key HTTP's body does not have).
"""

from __future__ import annotations

import base64
import json
import re
import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import httpx

from agentmw.testing import (
    A2ATestClient,
    AguiHttpError,
    AguiTestClient,
    AsgiExchange,
    McpTestClient,
    parse_sse,
)

__all__ = [
    "EMBED",
    "FACES",
    "NO_BODY",
    "Case",
    "Observed",
    "Route",
    "compare",
    "dump_database",
    "http_status_class",
    "observe",
    "tool_arguments",
]

BASE_URL = "http://127.0.0.1:8000"
NO_BODY: Any = object()
EMBED = "<embedded>"
"""``Route.body`` for a handler with several body parameters: FastAPI reads the body as an object keyed by name."""

FACES = ("mcp-2025", "mcp-2026", "a2a", "agui")
MCP_ERAS = {"mcp-2025": "2025-11-25", "mcp-2026": "2026-07-28"}
OUTCOMES = ("ok", "auth_refused", "not_found", "invalid", "retryable", "failed", "redirect", "unserved")


@dataclass(frozen=True)
class Route:
    """One route of a corpus app, and the tool (or skill) an agent knows it by."""

    method: str
    path: str
    tool: str
    body: str | None = None
    """The handler's one body parameter (FastAPI reads the whole JSON body as it), :data:`EMBED`, or None."""
    skill: bool = False
    """Also a skill in the decorator build (``@skill``): compared on A2A and AG-UI as well."""
    form: bool = False
    """The body is form fields (``Form()``): HTTP sends ``case.body`` form-encoded, an agent its fields by name."""
    model: str | None = None
    """A parameter model's name (``filter_query: Annotated[FilterParams, Query()]``, a ``Form()`` model): HTTP sends
    its fields as query (or form) fields, an agent as one object argument of that name."""

    def __str__(self) -> str:
        return f"{self.method} {self.path}"


@dataclass(frozen=True)
class Case:
    """One request: who sends it, and its path, query and body values."""

    name: str
    who: str | None = None
    path: Mapping[str, Any] = field(default_factory=dict)
    query: Mapping[str, Any] = field(default_factory=dict)
    body: Any = NO_BODY
    secret: str | None = None
    """Text of an internal error that must never reach the caller (the HTTP answer is a bare 500)."""


@dataclass
class Observed:
    """What one face answered, reduced to what the differential compares."""

    face: str
    outcome: str
    data: Any = None
    text: str = ""
    status: int | None = None
    """The HTTP status of the answer itself (for MCP: of the POST carrying tools/call)."""
    challenge: str | None = None
    retry_after: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def summary(self) -> str:
        shown = json.dumps(self.data, default=str)[:400] if self.outcome == "ok" else repr(self.text[:300])
        status = f" (HTTP {self.status})" if self.status is not None else ""
        return f"{self.outcome}{status} {shown}"


# --- requests --------------------------------------------------------------------------------------------


def tool_arguments(route: Route, case: Case) -> dict[str, Any]:
    """The tool's arguments for ``case``: path and query values by name, the body under its parameter's name."""
    if route.model:
        return {**case.path, route.model: {**case.query, **({} if case.body is NO_BODY else case.body)}}
    arguments = {**case.path, **case.query}
    if case.body is not NO_BODY:
        if route.body == EMBED:
            arguments.update(case.body)
        else:
            arguments[route.body or "body"] = case.body
    return arguments


def _url(route: Route, case: Case) -> str:
    path = route.path
    for name, value in case.path.items():  # a ``{name:path}`` parameter keeps its slashes
        path = path.replace("{" + name + "}", quote(str(value), safe=""))
        path = path.replace("{" + name + ":path}", quote(str(value), safe="/"))
    return path


def http_status_class(status: int) -> str:
    if 200 <= status < 300:
        return "ok"
    if 300 <= status < 400:
        return "redirect"
    if status in (401, 403):
        return "auth_refused"
    if status == 404:
        return "not_found"
    if status in (429, 503):
        return "retryable"
    if 400 <= status < 500:
        return "invalid"
    return "failed"


def _json_or_none(response: httpx.Response) -> Any:
    if not response.content:
        return None
    try:
        return response.json()
    except ValueError:
        return response.text


async def observe_http(app: Any, route: Route, case: Case, headers: Mapping[str, str]) -> Observed:
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app, raise_app_exceptions=False),
        base_url=BASE_URL,
        follow_redirects=False,
    ) as client:
        kwargs: dict[str, Any] = {"params": dict(case.query), "headers": dict(headers)}
        if case.body is not NO_BODY:
            kwargs["data" if route.form else "json"] = case.body
        response = await client.request(route.method, _url(route, case), **kwargs)
    body = _json_or_none(response)
    detail = (
        body.get("detail") if isinstance(body, dict) and "detail" in body else body
    )  # the app's own shape
    retry_after = response.headers.get("retry-after")
    return Observed(
        "http",
        http_status_class(response.status_code),
        body,
        detail if isinstance(detail, str) else json.dumps(detail, default=str),
        response.status_code,
        response.headers.get("www-authenticate"),
        float(retry_after) if retry_after else None,
        {
            "location": response.headers.get("location"),
            "json": response.headers.get("content-type", "").startswith("application/json"),
        },
    )


# --- reading an agent's error text -------------------------------------------------------------------------

_HTTP_IN_TEXT = re.compile(r"\bHTTP (\d{3})\b")


def classify_error_text(text: str, *, retryable: bool = False, rejected: bool = False) -> str:
    """The outcome class of an agent-side error, from its retryable flag and the text agentmw wrote."""
    if retryable:
        return "retryable"
    found = _HTTP_IN_TEXT.search(text)
    if found:
        status = int(found.group(1))
        return "failed" if status == 500 else http_status_class(status)
    lowered = text.lower()
    if (
        lowered.startswith(("invalid", "missing"))
        or "invalid argument" in lowered
        or "validation error" in lowered
    ):
        return "invalid"
    if "not found" in lowered:
        return "not_found"
    if "not authenticated" in lowered or "credentials" in lowered:
        return "auth_refused"
    return "invalid" if rejected else "failed"


def _content_text(blocks: Any) -> str:
    return "\n".join(
        b.get("text", "") for b in blocks or () if isinstance(b, dict) and b.get("type") == "text"
    )


# --- MCP ------------------------------------------------------------------------------------------------


async def observe_mcp(app: Any, face: str, route: Route, case: Case, headers: Mapping[str, str]) -> Observed:
    arguments = tool_arguments(route, case)
    async with McpTestClient(app, era=MCP_ERAS[face], headers=headers) as mcp:
        params = {"name": route.tool, "arguments": arguments}
        body = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": mcp.envelope(params)}
        response = await mcp.post(body, mcp.headers_for("tools/call", params))
    challenge = response.headers.get("www-authenticate")
    if response.status_code in (401, 403):
        return Observed(
            face, "auth_refused", text=response.text, status=response.status_code, challenge=challenge
        )
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        reply = next(m for m in reversed(parse_sse(response.text)) if "id" in m and "method" not in m)
    else:
        try:
            reply = response.json()  # a JSON-RPC error may come with 400 (the stateless era) or 200
        except ValueError:
            return Observed(face, "failed", text=response.text, status=response.status_code)
    if not isinstance(reply, dict) or ("error" not in reply and "result" not in reply):
        return Observed(face, "failed", text=response.text, status=response.status_code)
    if "error" in reply:
        error = reply["error"]
        message = str(error.get("message", ""))
        if error.get("code") == -32602:
            outcome = "unserved" if message.startswith("Unknown tool") else "invalid"
        else:
            outcome = "failed"
        return Observed(
            face,
            outcome,
            text=f"{error.get('code')} {message}",
            status=response.status_code,
            extra={"error": error},
        )
    result = reply["result"]
    text = _content_text(result.get("content"))
    if not result.get("isError"):
        body = _parsed(text) if text else _resource_text(result.get("content"))
        return Observed(
            face,
            "ok",
            result.get("structuredContent", body),
            text,
            200,
            extra={"structured": "structuredContent" in result, "content": result.get("content")},
        )
    meta = result.get("_meta") or {}
    retryable = bool(meta.get("agentmw/retryable"))
    return Observed(
        face,
        classify_error_text(text, retryable=retryable),
        text=text,
        status=200,
        retry_after=meta.get("agentmw/retryAfter"),
        extra={"meta": meta},
    )


def _resource_text(blocks: Any) -> str | None:
    """The text of the embedded resources a result carries (a file or a stream the route answered with)."""
    found = [b["resource"] for b in blocks or () if isinstance(b, dict) and b.get("type") == "resource"]
    if not found:
        return None
    return "".join(r["text"] if "text" in r else base64.b64decode(r.get("blob", "")).decode() for r in found)


def _parsed(text: str) -> Any:
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


# --- A2A ------------------------------------------------------------------------------------------------


async def observe_a2a(app: Any, route: Route, case: Case, headers: Mapping[str, str]) -> Observed:
    client = A2ATestClient(app, headers=headers)
    message = client.message(data=tool_arguments(route, case), skill=route.tool)
    body = client._body("SendMessage", {"message": message})
    async with AsgiExchange(
        app, "POST", BASE_URL + client.path, headers=client.headers, body=body
    ) as exchange:
        raw = await exchange.read()
    if exchange.status in (401, 403):
        return Observed(
            "a2a",
            "auth_refused",
            text=raw.decode(errors="replace"),
            status=exchange.status,
            challenge=exchange.headers.get("www-authenticate"),
        )
    reply = json.loads(raw)
    if "error" in reply:
        error = reply["error"]
        outcome = "invalid" if error.get("code") == -32602 else "failed"
        return Observed(
            "a2a", outcome, text=f"{error.get('code')} {error.get('message')}", status=exchange.status
        )
    task = reply["result"].get("task")
    if task is None:  # a message-only reply
        parts = reply["result"]["message"].get("parts", [])
        return Observed("a2a", "ok", _data_of(parts), status=exchange.status)
    state = task["status"]["state"]
    status_parts = (task["status"].get("message") or {}).get("parts", [])
    text = "\n".join(p.get("text", "") for p in status_parts if "text" in p)
    meta = next((p["data"] for p in status_parts if isinstance(p.get("data"), dict)), {})
    if state == "TASK_STATE_COMPLETED":
        parts = [p for artifact in task.get("artifacts", []) for p in artifact.get("parts", [])]
        return Observed("a2a", "ok", _data_of(parts), text, exchange.status)
    if state == "TASK_STATE_AUTH_REQUIRED":
        return Observed("a2a", "auth_refused", text=text, status=exchange.status)
    if state == "TASK_STATE_INPUT_REQUIRED":
        return Observed("a2a", "invalid", text=text, status=exchange.status, extra={"state": state})
    outcome = classify_error_text(
        text, retryable=bool(meta.get("retryable")), rejected=state == "TASK_STATE_REJECTED"
    )
    return Observed(
        "a2a",
        outcome,
        text=text,
        status=exchange.status,
        retry_after=meta.get("retryAfterSeconds"),
        extra={"state": state},
    )


def _data_of(parts: list[dict[str, Any]]) -> Any:
    data = [p["data"] for p in parts if "data" in p]
    if len(data) == 1:
        return data[0]
    texts = [p["text"] for p in parts if "text" in p]
    return _parsed("".join(texts)) if texts else None


# --- AG-UI ----------------------------------------------------------------------------------------------

_RETRY_AFTER_TEXT = re.compile(r"Retry after (\d+(?:\.\d+)?) seconds")


async def observe_agui(app: Any, route: Route, case: Case, headers: Mapping[str, str]) -> Observed:
    client = AguiTestClient(app, headers=headers)
    try:
        run = await client.run(route.tool, arguments=tool_arguments(route, case))
    except AguiHttpError as exc:
        outcome = {401: "auth_refused", 403: "auth_refused", 404: "unserved", 422: "invalid"}.get(
            exc.status, "failed"
        )
        return Observed("agui", outcome, text=str(exc.detail), status=exc.status)
    if run.error is not None:
        text = str(run.error.get("message", ""))
        found = _RETRY_AFTER_TEXT.search(text)
        return Observed(
            "agui",
            classify_error_text(
                text,
                retryable=run.error.get("code") == "RETRYABLE",
                rejected=run.error.get("code") == "REJECTED",
            ),
            text=text,
            status=200,
            retry_after=float(found.group(1)) if found else None,
        )
    if run.interrupts:
        return Observed("agui", "invalid", text=json.dumps(run.interrupts, default=str)[:500], status=200)
    data = run.result if run.result is not None else _parsed(run.text)
    return Observed("agui", "ok", data, run.text, 200)


async def observe(app: Any, face: str, route: Route, case: Case, headers: Mapping[str, str]) -> Observed:
    if face == "http":
        return await observe_http(app, route, case, headers)
    if face in MCP_ERAS:
        return await observe_mcp(app, face, route, case, headers)
    if face == "a2a":
        return await observe_a2a(app, route, case, headers)
    return await observe_agui(app, route, case, headers)


# --- side effects ---------------------------------------------------------------------------------------


def dump_database(path: str) -> dict[str, list[tuple[Any, ...]]]:
    """Every table's rows, sorted: what a request left behind."""
    with sqlite3.connect(path) as db:
        tables = [
            r[0]
            for r in db.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' "
                "AND name NOT LIKE 'sqlite_%' ORDER BY name"
            )
        ]
        return {t: sorted(db.execute(f"SELECT * FROM {t}").fetchall(), key=repr) for t in tables}


# --- comparing ------------------------------------------------------------------------------------------


def _extra_keys(reference: Any, value: Any, where: str = "$") -> list[str]:
    """Paths of keys ``value`` has that ``reference`` lacks, anywhere in the structure."""
    found: list[str] = []
    if isinstance(reference, dict) and isinstance(value, dict):
        for key, item in value.items():
            if key not in reference:
                found.append(f"{where}.{key}")
            else:
                found += _extra_keys(reference[key], item, f"{where}.{key}")
    elif isinstance(reference, list) and isinstance(value, list):
        for index, (ref, item) in enumerate(zip(reference, value, strict=False)):
            found += _extra_keys(ref, item, f"{where}[{index}]")
    return found


def _expected_structured(http_body: Any) -> Any:
    return http_body if isinstance(http_body, dict) else {"result": http_body}


def _face_value(http: Observed, face: Observed) -> Any:
    """The face's data as the HTTP body it should equal: ``{"result": x}`` unwrapped (for an object body too, so that
    what is inside is compared: STRUCTURED names the wrapping), unless the body itself has a ``result`` key."""
    data = face.data
    body_has_result = isinstance(http.data, dict) and "result" in http.data
    if isinstance(data, dict) and set(data) == {"result"} and not body_has_result:
        return data["result"]
    return data


def compare(http: Observed, face: Observed, case: Case) -> list[str]:
    """Every way ``face`` differs from ``http``; empty when it behaves as HTTP does."""
    findings: list[str] = []
    if face.outcome == "unserved":
        return [f"UNSERVED: the agent does not serve this capability ({face.text})"]
    if http.outcome == "auth_refused" and face.outcome == "ok":
        return [f"BYPASS: served where HTTP refuses the caller with {http.status}"]
    if http.outcome == "redirect":
        if face.outcome == "ok" or "redirect" not in face.text.lower():
            findings.append(
                f"REDIRECT: HTTP answers {http.status} to {http.extra.get('location')}; the agent must "
                "refuse it with a message naming the redirect"
            )
        return findings
    if http.outcome != face.outcome:
        findings.append(f"CLASS: HTTP is {http.outcome}, the face is {face.outcome}")
    if http.outcome == "ok" and face.outcome == "ok":
        value = _face_value(http, face)
        leaked = _extra_keys(http.data, value)
        if leaked:
            findings.append(f"LEAK: more data than HTTP: {', '.join(leaked)}")
        elif value != http.data:
            findings.append("DATA: the result differs from HTTP's JSON body")
        if face.face in MCP_ERAS and http.data is not None and http.extra.get("json", True):
            if not face.extra.get("structured"):
                findings.append("STRUCTURED: no structuredContent (it must be the body, or {'result': body})")
            elif face.data != _expected_structured(http.data):
                findings.append("STRUCTURED: structuredContent is not the body (or {'result': body})")
            if _parsed(face.text) != http.data:
                findings.append(f"TEXT: the text content {face.text[:80]!r} is not the body's JSON text")
    if http.outcome == face.outcome and http.outcome not in ("ok", "failed"):
        if http.status != 422 and http.text and http.text not in face.text:
            findings.append(f"DETAIL: the app's detail {http.text!r} does not reach the caller")
        if http.challenge and face.face in MCP_ERAS and face.challenge != http.challenge:
            findings.append(f"CHALLENGE: the app's WWW-Authenticate {http.challenge!r} is {face.challenge!r}")
        if http.retry_after is not None and face.retry_after != http.retry_after:
            findings.append(
                f"RETRY_AFTER: the app's Retry-After {http.retry_after:g} is {face.retry_after!r}"
            )
    if face.outcome in ("failed", "retryable") and http.outcome == "failed":
        shown = face.text.lower()
        if "traceback" in shown or (case.secret and case.secret.lower() in shown):
            findings.append(f"REVEALS: an internal error's text reaches the caller: {face.text[:200]!r}")
    return findings
