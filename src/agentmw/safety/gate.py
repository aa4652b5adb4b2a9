"""Human gates: a person approves the exact action before it runs.

``@human_gate`` marks a function; before every call the pipeline asks for approval of a summary of the
exact action (function, arguments, side effects), bound to a hash of the arguments. Where the caller
can be asked (MCP elicitation or ``input_required``, an A2A ``INPUT_REQUIRED`` follow-up, an AG-UI
interrupt) the question goes in-band. Where it cannot, an *approval* is recorded: a different person
decides it at ``/approvals/<id>``, and the caller repeats the call naming the approval id. An approval
is single-use, expires, is bound to its requester, to the argument hash and to the protocol it was issued
for. Out-of-band approval needs the app's authentication (see :mod:`agentmw.approvals`). Approvals are
records in the agent's shared state, so one created on a replica can be decided on another and used on a
third.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from .._codec import from_json, to_json
from ..errors import SafetyViolation
from ..state import Conflict, State, StoreLimits, resolve_state

__all__ = ["Approval", "ApprovalProblem", "Approvals", "GateSpec", "arguments_hash", "describe", "human_gate"]

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
    canonical = json.dumps(
        {"capability": capability, "arguments": arguments}, sort_keys=True, separators=(",", ":"), default=str
    )
    return hashlib.sha256(canonical.encode()).hexdigest()


def describe(capability: str, arguments: Mapping[str, Any], side_effects: str) -> str:
    shown = ", ".join(f"{k}={json.dumps(v, default=str, ensure_ascii=False)}" for k, v in arguments.items())
    text = f"Run {capability}({shown})"
    return f"{text}. Side effects: {side_effects}" if side_effects else text


class ApprovalProblem(SafetyViolation):
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
        return {
            "id": self.id,
            "capability": self.capability,
            "summary": self.summary,
            "arguments": self.arguments,
            "argumentsHash": self.arguments_hash,
            "protocol": self.face,
            "requestedBy": self.requested_by,
            "status": self.status,
            "decidedBy": self.decided_by,
            "note": self.note,
            "expiresAt": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.expires_at)),
        }

    def to_dict(self) -> dict[str, Any]:
        """The stored form (strict JSON): every field."""
        return {
            "id": self.id,
            "capability": self.capability,
            "argumentsHash": self.arguments_hash,
            "summary": self.summary,
            "arguments": to_json(self.arguments),
            "face": self.face,
            "requestedBy": self.requested_by,
            "expiresAt": self.expires_at,
            "status": self.status,
            "decidedBy": self.decided_by,
            "note": self.note,
            "createdAt": self.created_at,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Approval:
        return cls(
            id=data["id"],
            capability=data["capability"],
            arguments_hash=data["argumentsHash"],
            summary=data["summary"],
            arguments=from_json(data["arguments"]),
            face=data["face"],
            requested_by=data["requestedBy"],
            expires_at=float(data["expiresAt"]),
            status=data["status"],
            decided_by=data.get("decidedBy"),
            note=data.get("note") or "",
            created_at=float(data.get("createdAt") or 0.0),
        )


NAMESPACE = "approvals"


class Approvals:
    """Out-of-band approvals, as records in the agent's shared state (namespace ``"approvals"``).

    Any replica can show, decide or use an approval another created. Each change is a compare-and-set
    on the record's version, so of racing deciders exactly one decides, and of racing retries exactly one
    uses an approval (it is single-use). An approval expires at its gate's ``ttl_seconds``; the records are
    at most ``max_records`` (past it the least recently written go), each kept at most ``max_age`` seconds.

    Args:
        max_records: approvals kept at most.
        state: a :class:`agentmw.state.State`, or a callable returning one (opened on first use); default:
            a private in-memory one (this process only).
        max_age: how long a record is kept after its last write (a gate's ``ttl_seconds`` beyond it is cut
            to it).
    """

    def __init__(
        self,
        max_records: int = 10_000,
        *,
        state: State | Callable[[], State] | None = None,
        max_age: float = 7 * 24 * 3600.0,
    ) -> None:
        self.max_records = max_records
        self.max_age = max_age
        self._source = state
        self._state: State | None = None

    @property
    def state(self) -> State:
        if self._state is None:
            source = resolve_state(self._source)
            source.limit(NAMESPACE, StoreLimits(max_count=self.max_records, max_age=self.max_age))
            self._state = source
        return self._state

    async def count(self) -> int:
        """Approvals stored (expired ones included until they are pruned)."""
        page = await self.state.scan(NAMESPACE, limit=1, total=True)
        return page.total or 0

    async def create(
        self,
        capability: str,
        arguments: Mapping[str, Any],
        summary: str,
        face: str,
        requested_by: str,
        ttl: float,
    ) -> Approval:
        now = time.time()
        approval = Approval(
            id=f"appr-{os.urandom(9).hex()}",
            capability=capability,
            arguments_hash=arguments_hash(capability, arguments),
            summary=summary,
            arguments=dict(arguments),
            face=face,
            requested_by=requested_by,
            expires_at=now + min(ttl, self.max_age),
        )
        await self.state.put(NAMESPACE, approval.id, approval.to_dict(), expected_version=0)
        return approval

    async def _read(self, approval_id: str) -> tuple[Approval, int] | None:
        if not isinstance(approval_id, str) or not approval_id or len(approval_id) > 200:
            return None
        found = await self.state.get(NAMESPACE, approval_id)
        if found is None:
            return None
        approval = Approval.from_dict(found.value)
        if approval.expires_at < time.time():
            try:  # forgotten at its expiry, whatever its status
                await self.state.delete(NAMESPACE, approval_id, expected_version=found.version)
            except Conflict:
                pass
            return None
        return approval, found.version

    async def get(self, approval_id: str) -> Approval | None:
        """The approval, or None when unknown or expired."""
        found = await self._read(approval_id)
        return found[0] if found is not None else None

    async def _change(self, approval_id: str, change: Callable[[Approval], bool], unknown: str) -> Approval:
        """Read, check and write back with compare-and-set, again while another write wins the race.
        ``change`` raises ApprovalProblem, or returns whether it changed the approval."""
        while True:
            found = await self._read(approval_id)
            if found is None:
                raise ApprovalProblem(unknown)
            approval, version = found
            if not change(approval):
                return approval
            try:
                await self.state.put(NAMESPACE, approval_id, approval.to_dict(), expected_version=version)
            except Conflict:
                continue
            return approval

    async def decide(self, approval_id: str, approver: str, approve: bool, note: str = "") -> Approval:
        def decide(approval: Approval) -> bool:
            if approval.status != "pending":
                raise ApprovalProblem(f"approval {approval_id} is already {approval.status}")
            approval.status = "approved" if approve else "rejected"
            approval.decided_by = approver
            approval.note = note
            return True

        return await self._change(approval_id, decide, f"approval {approval_id} is unknown or expired")

    async def consume(
        self, approval_id: str, capability: str, arguments: Mapping[str, Any], face: str, requester: str
    ) -> Approval:
        """The decided approval for exactly this call by its requester, marked used if it approved;
        ApprovalProblem otherwise."""
        digest = arguments_hash(capability, arguments)

        def use(approval: Approval) -> bool:
            if approval.requested_by != requester:
                raise ApprovalProblem(
                    f"approval {approval_id} was requested by another caller; an approval works "
                    "only for the caller who asked for it"
                )
            if approval.capability != capability or approval.arguments_hash != digest:
                raise ApprovalProblem(
                    f"approval {approval_id} was given for another action, not these arguments"
                )
            if approval.face != face:
                raise ApprovalProblem(
                    f"approval {approval_id} was issued over {approval.face} and is only valid there"
                )
            if approval.status == "used":
                raise ApprovalProblem(f"approval {approval_id} was already used; approvals are single-use")
            if approval.status == "pending":
                raise ApprovalProblem(f"approval {approval_id} is still waiting for a decision")
            if approval.status == "approved":
                approval.status = "used"
                return True
            return False

        return await self._change(
            approval_id, use, f"approval {approval_id} is unknown or expired; ask for a new one"
        )
