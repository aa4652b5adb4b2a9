"""Human gates: a person approves the exact action before it runs.

``@human_gate`` marks a function; before every call the pipeline asks for approval of a summary of the
exact action (function, arguments, side effects), bound to a hash of the arguments. Where the caller
can be asked (MCP elicitation or ``input_required``, an A2A ``INPUT_REQUIRED`` follow-up, an AG-UI
interrupt) the question goes in-band. Where it cannot, an *approval* is recorded: a different person
decides it at ``/approvals/<id>``, and the caller repeats the call naming the approval id. An approval
is single-use, expires, is bound to its requester, to the argument hash and to the protocol it was issued
for. Out-of-band approval needs the app's authentication (see :mod:`agentmw.approvals`).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from .._bounded import BoundedTable

__all__ = ["GateSpec", "human_gate", "Approval", "Approvals", "ApprovalProblem", "arguments_hash", "describe"]

F = TypeVar("F", bound=Callable[..., Any])
GATE_MARK = "__agentmw_gate__"


@dataclass(frozen=True, slots=True)
class GateSpec:
    side_effects: str = ""
    ttl_seconds: float = 900.0


def human_gate(fn: Any = None, /, *, side_effects: str = "", ttl_seconds: float = 900.0) -> Any:
    """Require a person's approval of the exact action before each call (stack with ``@tool``/``@skill``)."""
    spec = GateSpec(side_effects=side_effects, ttl_seconds=ttl_seconds)

    def mark(f: F) -> F:
        setattr(f, GATE_MARK, spec)
        return f

    return mark(fn) if fn is not None else mark


def arguments_hash(capability: str, arguments: Mapping[str, Any]) -> str:
    canonical = json.dumps({"capability": capability, "arguments": arguments}, sort_keys=True,
                           separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


def describe(capability: str, arguments: Mapping[str, Any], side_effects: str) -> str:
    shown = ", ".join(f"{k}={json.dumps(v, default=str, ensure_ascii=False)}" for k, v in arguments.items())
    text = f"Run {capability}({shown})"
    return f"{text}. Side effects: {side_effects}" if side_effects else text


class ApprovalProblem(ValueError):
    """An approval id that cannot authorize this call (unknown, expired, used, other arguments or protocol)."""


@dataclass(slots=True)
class Approval:
    id: str
    capability: str
    arguments_hash: str
    summary: str
    arguments: dict[str, Any]
    face: str
    requested_by: str
    expires_at: float
    status: Literal["pending", "approved", "rejected", "used"] = "pending"
    decided_by: str | None = None
    note: str = ""
    created_at: float = field(default_factory=time.time)

    def public(self) -> dict[str, Any]:
        return {"id": self.id, "capability": self.capability, "summary": self.summary, "arguments": self.arguments,
                "argumentsHash": self.arguments_hash, "protocol": self.face, "requestedBy": self.requested_by,
                "status": self.status, "decidedBy": self.decided_by, "note": self.note,
                "expiresAt": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.expires_at))}


class Approvals:
    """Out-of-band approvals, in memory (they are short-lived and single-use)."""

    def __init__(self, max_records: int = 10_000) -> None:
        # bounded: at most max_records, each forgotten at its own expiry (docs/limits.md)
        self.records: BoundedTable[str, Approval] = BoundedTable(max_records, 900.0, clock=time.time)

    def create(self, capability: str, arguments: Mapping[str, Any], summary: str, face: str, requested_by: str,
               ttl: float) -> Approval:
        now = time.time()
        approval = Approval(id=f"appr-{os.urandom(9).hex()}", capability=capability,
                            arguments_hash=arguments_hash(capability, arguments), summary=summary,
                            arguments=dict(arguments), face=face, requested_by=requested_by, expires_at=now + ttl)
        self.records.put(approval.id, approval, ttl)
        return approval

    def get(self, approval_id: str) -> Approval | None:
        approval = self.records.get(approval_id)
        if approval is not None and approval.expires_at < time.time() and approval.status in ("pending", "approved"):
            del self.records[approval_id]
            return None
        return approval

    def decide(self, approval_id: str, approver: str, approve: bool, note: str = "") -> Approval:
        approval = self.get(approval_id)
        if approval is None:
            raise ApprovalProblem(f"approval {approval_id} is unknown or expired")
        if approval.status != "pending":
            raise ApprovalProblem(f"approval {approval_id} is already {approval.status}")
        approval.status = "approved" if approve else "rejected"
        approval.decided_by = approver
        approval.note = note
        return approval

    def consume(self, approval_id: str, capability: str, arguments: Mapping[str, Any], face: str,
                requester: str) -> Approval:
        """The decided approval for exactly this call by its requester, marked used if it approved;
        ApprovalProblem otherwise."""
        approval = self.get(approval_id)
        if approval is None:
            raise ApprovalProblem(f"approval {approval_id} is unknown or expired; ask for a new one")
        if approval.requested_by != requester:
            raise ApprovalProblem(f"approval {approval_id} was requested by another caller; an approval works only "
                                  "for the caller who asked for it")
        if approval.capability != capability or approval.arguments_hash != arguments_hash(capability, arguments):
            raise ApprovalProblem(f"approval {approval_id} was given for another action, not these arguments")
        if approval.face != face:
            raise ApprovalProblem(f"approval {approval_id} was issued over {approval.face} and is only valid there")
        if approval.status == "used":
            raise ApprovalProblem(f"approval {approval_id} was already used; approvals are single-use")
        if approval.status == "pending":
            raise ApprovalProblem(f"approval {approval_id} is still waiting for a decision")
        if approval.status == "approved":
            approval.status = "used"
        return approval
