"""How the MCP face renders what the core hands back: a tool's outcome as its ``CallToolResult``, and a client's
answer to a question as the core's value. Below the method handlers (``methods.py``) and the tasks
(``tasks.py``), which both use them."""

from __future__ import annotations

from typing import Any

from ..context import Answer, Ask, InputRequest, ListRoots, Root, Sample, Sampled
from ..outcomes import Outcome, Status
from ._host import McpHost
from ._wire import INVALID_PARAMS, JsonRpcError
from .convert import content_block, input_request

__all__ = ["META_APPROVAL_ID", "META_REJECTED", "bridged", "parse_input_response", "tool_result"]

META_APPROVAL_ID = "agentmw/approvalId"
META_REJECTED = "agentmw/rejected"
"""In a tool error's ``_meta``: the call was refused and nothing ran (a bridged peer rejected it)."""


def bridged(cap: Any) -> bool:
    """Whether ``cap`` stands for a remote peer's capability (``agent.bridge(...)``, agentmw.bridges)."""
    return "agentmw/bridge" in cap.meta


def parse_input_response(request: InputRequest, raw: Any) -> Any | None:
    """A client's answer as the core's value, or None when it does not answer ``request``."""
    if not isinstance(raw, dict):
        return None
    if isinstance(request, Ask):
        action = raw.get("action")
        if action not in ("accept", "decline", "cancel"):
            return None
        content = raw.get("content")
        return Answer(action=action, content=content if isinstance(content, dict) else None)
    if isinstance(request, Sample):
        content = raw.get("content")
        blocks = content if isinstance(content, list) else [content]
        texts = [b.get("text", "") for b in blocks if isinstance(b, dict) and b.get("type") == "text"]
        if not texts and not isinstance(content, (dict, list)):
            return None
        return Sampled(text="".join(texts), model=raw.get("model"), raw=raw)
    if isinstance(request, ListRoots):
        roots = raw.get("roots")
        if not isinstance(roots, list):
            return None
        return [Root(uri=r["uri"], name=r.get("name")) for r in roots if isinstance(r, dict) and "uri" in r]
    return None


def _approval_fallback(outcome: Outcome, agent_path: str) -> dict[str, Any]:
    """A gated call this client cannot approve in-band: the approval id, and where a person decides it."""
    approval = (outcome.data or {})["approval"]
    text = (
        f"Approval required before this runs: {approval['summary']}.\n"
        f"Nothing has been executed. A person must approve it: approval id {approval['id']}, decided at "
        f"POST {agent_path}/{approval['id']} (see GET for the details). Then call this tool again with "
        f'the same arguments and _meta {{"{META_APPROVAL_ID}": "{approval["id"]}"}}. '
        f"The approval expires at {approval['expiresAt']} and works once."
    )
    return {
        "content": [{"type": "text", "text": text}],
        "isError": True,
        "_meta": {"agentmw/approval": approval},
    }


def _needs_input_fallback(outcome: Outcome) -> dict[str, Any]:
    """No way to ask this caller: say so plainly, with the questions, as a tool error (see docs/context.md)."""
    questions = {key: input_request(req) for key, req in (outcome.pending or {}).items()}
    lines = [f"- {r['params'].get('message', r['method'])}" for r in questions.values()]
    missing = outcome.data if outcome.code == "missing_capability" else "elicitation"
    text = (
        f"Input required before this tool can continue, but this client cannot be asked "
        f"(it did not declare the {missing} capability):\n" + "\n".join(lines)
    )
    return {
        "content": [{"type": "text", "text": text}],
        "isError": True,
        "_meta": {"agentmw/inputRequests": questions},
    }


def tool_result(outcome: Outcome, agent: McpHost, *, remote: bool = False) -> dict[str, Any]:
    """A tool's outcome as its ``CallToolResult``; raises the JSON-RPC error a call answers instead.

    ``remote``: the tool is a bridged peer's (:func:`bridged`). Its refusal (the peer rejected the call, or the
    bridge refused to send it) is a tool error the model reads, as the spec wants input and business-rule
    errors to be, not a JSON-RPC error that clients keep from the model; its text is the bridge's, with the
    peer's own words already framed as untrusted data (``Peer.frame``). A local ``Rejected`` stays -32602.
    """
    status = outcome.status
    if status == "completed":
        result: dict[str, Any] = {"content": [content_block(p) for p in outcome.content]}
        if outcome.structured is not None:
            result["structuredContent"] = outcome.structured
        result["isError"] = False
        return result
    if outcome.status == Status.AWAITING_APPROVAL:
        return _approval_fallback(outcome, agent.approvals_path)
    if status == "needs_input" or outcome.code == "missing_capability":
        return _needs_input_fallback(outcome)
    refused = status == "rejected" and outcome.code == "rejected"
    if refused and not remote:  # the function raised Rejected: a protocol error
        raise JsonRpcError(INVALID_PARAMS, outcome.message or "Request rejected", outcome.data)
    result = {
        "content": [content_block(p) for p in outcome.content] or [{"type": "text", "text": outcome.message}],
        "isError": True,
    }
    meta: dict[str, Any] = {META_REJECTED: True} if refused else {}
    if outcome.retryable:
        meta["agentmw/retryable"] = True
        if outcome.retry_after is not None:
            meta["agentmw/retryAfter"] = outcome.retry_after
    if meta:
        result["_meta"] = meta
    return result
