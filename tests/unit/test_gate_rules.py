"""safety/gate.py: the argument hash an approval is bound to, the summary a person approves, the gate mark,
and every transition of an out-of-band approval (pending -> approved/rejected -> used), with the exact
refusals a caller reads (``ApprovalProblem`` is returned to the client as the reason). Written from the
survivors of a mutation run (docs/testing.md). Time is moved by patching ``time.time``, never slept."""

from __future__ import annotations

import datetime
import hashlib
import re
from typing import Any

import pytest

from agentmw.safety import gate
from agentmw.safety.gate import (
    GATE_MARK,
    Approval,
    ApprovalProblem,
    Approvals,
    GateSpec,
    arguments_hash,
    describe,
    human_gate,
)

T0 = 1_700_000_000.0


class Clock:
    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.now = T0
        monkeypatch.setattr(gate.time, "time", lambda: self.now)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    return Clock(monkeypatch)


# --- the hash, the summary, the mark ---------------------------------------------------------------------


def test_arguments_hash_is_sha256_of_the_canonical_form() -> None:
    canonical = '{"arguments":{"a":[1,"\\u00e9"],"b":2},"capability":"pay"}'
    assert (
        arguments_hash("pay", {"b": 2, "a": [1, "\u00e9"]}) == hashlib.sha256(canonical.encode()).hexdigest()
    )
    assert arguments_hash("pay", {"b": 2, "a": [1, "\u00e9"]}) == arguments_hash(
        "pay", {"a": [1, "\u00e9"], "b": 2}
    )
    when = datetime.date(2024, 1, 2)
    assert (
        arguments_hash("x", {"d": when})
        == hashlib.sha256(b'{"arguments":{"d":"2024-01-02"},"capability":"x"}').hexdigest()
    )
    assert arguments_hash("pay", {}) != arguments_hash("pax", {})


def test_describe_is_the_exact_action() -> None:
    assert (
        describe("pay", {"to": "b\u00f6b", "amount": 5, "memo": None}, "Sends money")
        == 'Run pay(to="b\u00f6b", amount=5, memo=null). Side effects: Sends money'
    )
    assert describe("noop", {}, "") == "Run noop()"
    assert describe("at", {"d": datetime.date(2024, 1, 2)}, "") == 'Run at(d="2024-01-02")'


def test_human_gate_marks_with_its_spec() -> None:
    def f() -> None: ...

    assert human_gate(f) is f
    assert getattr(f, GATE_MARK) == GateSpec(side_effects="", ttl_seconds=900.0)

    def g() -> None: ...

    marked = human_gate(side_effects="Deletes", ttl_seconds=30)(g)
    assert marked is g and getattr(g, GATE_MARK) == GateSpec(side_effects="Deletes", ttl_seconds=30)
    assert GATE_MARK == "__agentmw_gate__"
    assert GateSpec() == GateSpec("", 900.0)


# --- the records -----------------------------------------------------------------------------------------


def make(**changes: Any) -> Approval:
    values = {
        "id": "appr-1",
        "capability": "pay",
        "arguments_hash": "h",
        "summary": "Run pay()",
        "arguments": {"to": "bob"},
        "face": "mcp",
        "requested_by": "alice",
        "expires_at": T0 + 60,
        "created_at": T0,
    }
    return Approval(**{**values, **changes})


def test_public_view() -> None:
    approval = make(status="approved", decided_by="carol", note="ok")
    assert approval.public() == {
        "id": "appr-1",
        "capability": "pay",
        "summary": "Run pay()",
        "arguments": {"to": "bob"},
        "argumentsHash": "h",
        "protocol": "mcp",
        "requestedBy": "alice",
        "status": "approved",
        "decidedBy": "carol",
        "note": "ok",
        "expiresAt": "2023-11-14T22:14:20Z",
    }


def test_stored_form_round_trips() -> None:
    approval = make(status="rejected", decided_by="carol", note="no", arguments={"b": b"\x00", "t": (1, 2)})
    data = approval.to_dict()
    assert set(data) == {
        "id",
        "capability",
        "argumentsHash",
        "summary",
        "arguments",
        "face",
        "requestedBy",
        "expiresAt",
        "status",
        "decidedBy",
        "note",
        "createdAt",
    }
    assert (
        data["id"],
        data["capability"],
        data["argumentsHash"],
        data["summary"],
        data["face"],
        data["requestedBy"],
        data["expiresAt"],
        data["status"],
        data["decidedBy"],
        data["note"],
        data["createdAt"],
    ) == ("appr-1", "pay", "h", "Run pay()", "mcp", "alice", T0 + 60, "rejected", "carol", "no", T0)
    assert Approval.from_dict(data) == approval
    sparse = {k: v for k, v in data.items() if k not in ("decidedBy", "note", "createdAt")}
    back = Approval.from_dict(sparse)
    assert (back.decided_by, back.note, back.created_at) == (None, "", 0.0)


# --- the transitions -------------------------------------------------------------------------------------


async def test_create_records_a_pending_approval(clock: Clock) -> None:
    approvals = Approvals()
    approval = await approvals.create("pay", {"to": "bob"}, 'Run pay(to="bob")', "mcp", "alice", 60)
    assert re.fullmatch(r"appr-[0-9a-f]{18}", approval.id)
    assert (
        approval.capability,
        approval.arguments_hash,
        approval.arguments,
        approval.face,
        approval.requested_by,
        approval.expires_at,
        approval.status,
        approval.decided_by,
        approval.note,
    ) == (
        "pay",
        arguments_hash("pay", {"to": "bob"}),
        {"to": "bob"},
        "mcp",
        "alice",
        T0 + 60,
        "pending",
        None,
        "",
    )
    assert await approvals.get(approval.id) == approval
    assert await approvals.count() == 1
    other = await approvals.create("pay", {"to": "bob"}, "s", "mcp", "alice", 60)
    assert other.id != approval.id
    assert await approvals.count() == 2


async def test_a_gate_ttl_is_cut_to_the_record_age(clock: Clock) -> None:
    approvals = Approvals(max_age=100)
    assert (await approvals.create("pay", {}, "s", "mcp", "alice", 1000)).expires_at == T0 + 100
    assert (await approvals.create("pay", {}, "s", "mcp", "alice", 10)).expires_at == T0 + 10
    assert Approvals().max_records == 10_000 and Approvals().max_age == 7 * 24 * 3600.0


async def test_decide_then_consume_once(clock: Clock) -> None:
    approvals = Approvals()
    approval = await approvals.create("pay", {"to": "bob"}, "s", "mcp", "alice", 60)
    decided = await approvals.decide(approval.id, "carol", True, "fine")
    assert (decided.status, decided.decided_by, decided.note) == ("approved", "carol", "fine")
    stored = await approvals.get(approval.id)
    assert (stored.status, stored.decided_by, stored.note) == ("approved", "carol", "fine")
    used = await approvals.consume(approval.id, "pay", {"to": "bob"}, "mcp", "alice")
    assert used.status == "used"
    assert (await approvals.get(approval.id)).status == "used"
    with pytest.raises(ApprovalProblem) as info:
        await approvals.consume(approval.id, "pay", {"to": "bob"}, "mcp", "alice")
    assert str(info.value) == f"approval {approval.id} was already used; approvals are single-use"
    with pytest.raises(ApprovalProblem) as info:
        await approvals.decide(approval.id, "carol", False)
    assert str(info.value) == f"approval {approval.id} is already used"


async def test_a_rejection_is_returned_and_stays_rejected(clock: Clock) -> None:
    approvals = Approvals()
    approval = await approvals.create("pay", {}, "s", "a2a", "alice", 60)
    rejected = await approvals.decide(approval.id, "carol", False)
    assert (rejected.status, rejected.decided_by, rejected.note) == ("rejected", "carol", "")
    consumed = await approvals.consume(approval.id, "pay", {}, "a2a", "alice")
    assert consumed.status == "rejected"  # the caller learns it was rejected; nothing runs
    assert (await approvals.get(approval.id)).status == "rejected"
    with pytest.raises(ApprovalProblem) as info:
        await approvals.decide(approval.id, "dave", True)
    assert str(info.value) == f"approval {approval.id} is already rejected"


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            ("pay", {"to": "bob"}, "mcp", "mallory"),
            "approval {id} was requested by another caller; an approval works only for the caller who asked for it",
        ),
        (
            ("pay", {"to": "eve"}, "mcp", "alice"),
            "approval {id} was given for another action, not these arguments",
        ),
        (
            ("pax", {"to": "bob"}, "mcp", "alice"),
            "approval {id} was given for another action, not these arguments",
        ),
        (("pay", {"to": "bob"}, "a2a", "alice"), "approval {id} was issued over mcp and is only valid there"),
    ],
)
async def test_consume_refusals_leave_the_approval_usable(
    clock: Clock, call: tuple[Any, ...], message: str
) -> None:
    approvals = Approvals()
    approval = await approvals.create("pay", {"to": "bob"}, "s", "mcp", "alice", 60)
    await approvals.decide(approval.id, "carol", True)
    with pytest.raises(ApprovalProblem) as info:
        await approvals.consume(approval.id, *call)
    assert str(info.value) == message.format(id=approval.id)
    assert (await approvals.consume(approval.id, "pay", {"to": "bob"}, "mcp", "alice")).status == "used"


async def test_a_pending_approval_cannot_be_used(clock: Clock) -> None:
    approvals = Approvals()
    approval = await approvals.create("pay", {}, "s", "mcp", "alice", 60)
    with pytest.raises(ApprovalProblem) as info:
        await approvals.consume(approval.id, "pay", {}, "mcp", "alice")
    assert str(info.value) == f"approval {approval.id} is still waiting for a decision"
    assert (await approvals.get(approval.id)).status == "pending"


@pytest.mark.parametrize("approval_id", ["appr-nope", "", "x" * 201, None, 5])
async def test_unknown_ids(clock: Clock, approval_id: Any) -> None:
    approvals = Approvals()
    assert await approvals.get(approval_id) is None
    with pytest.raises(ApprovalProblem) as info:
        await approvals.decide(approval_id, "carol", True)
    assert str(info.value) == f"approval {approval_id} is unknown or expired"
    with pytest.raises(ApprovalProblem) as info:
        await approvals.consume(approval_id, "pay", {}, "mcp", "alice")
    assert str(info.value) == f"approval {approval_id} is unknown or expired; ask for a new one"


async def test_a_long_id_within_the_bound_is_looked_up(clock: Clock) -> None:
    approvals = Approvals()
    approval = await approvals.create("pay", {}, "s", "mcp", "alice", 60)
    record = await approvals.state.get(gate.NAMESPACE, approval.id)
    long_id = "a" * 200
    await approvals.state.put(gate.NAMESPACE, long_id, {**record.value, "id": long_id}, expected_version=0)
    assert (await approvals.get(long_id)).id == long_id


@pytest.mark.parametrize("status", ["pending", "approved", "rejected", "used"])
async def test_an_approval_is_forgotten_at_its_expiry_whatever_its_status(clock: Clock, status: str) -> None:
    approvals = Approvals()
    approval = await approvals.create("pay", {}, "s", "mcp", "alice", 60)
    if status != "pending":
        await approvals.decide(approval.id, "carol", status != "rejected")
    if status == "used":
        await approvals.consume(approval.id, "pay", {}, "mcp", "alice")
    clock.now = T0 + 60  # at the expiry itself: still valid
    assert (await approvals.get(approval.id)).status == status
    clock.now = T0 + 60.001
    assert await approvals.get(approval.id) is None
    assert await approvals.state.get(gate.NAMESPACE, approval.id) is None  # deleted, not only hidden
    with pytest.raises(ApprovalProblem) as info:
        await approvals.consume(approval.id, "pay", {}, "mcp", "alice")
    assert str(info.value) == f"approval {approval.id} is unknown or expired; ask for a new one"


async def test_an_expired_approval_cannot_be_decided(clock: Clock) -> None:
    approvals = Approvals()
    approval = await approvals.create("pay", {}, "s", "mcp", "alice", 5)
    clock.now = T0 + 6
    with pytest.raises(ApprovalProblem) as info:
        await approvals.decide(approval.id, "carol", True)
    assert str(info.value) == f"approval {approval.id} is unknown or expired"


async def test_a_state_source_is_opened_once(clock: Clock) -> None:
    from agentmw.state import MemoryState

    opened: list[MemoryState] = []

    def source() -> MemoryState:
        opened.append(MemoryState())
        return opened[-1]

    approvals = Approvals(max_records=3, state=source, max_age=50)
    assert approvals.state is approvals.state is opened[0]
    assert len(opened) == 1
    limits = opened[0].limits(gate.NAMESPACE)
    assert (limits.max_count, limits.max_age) == (3, 50)
    shared = MemoryState()
    assert Approvals(state=shared).state is shared


async def test_count_of_no_approvals_is_zero() -> None:
    assert await Approvals().count() == 0


async def test_an_id_past_the_bound_is_never_looked_up(clock: Clock) -> None:
    approvals = Approvals()
    approval = await approvals.create("pay", {}, "s", "mcp", "alice", 60)
    record = await approvals.state.get(gate.NAMESPACE, approval.id)
    too_long = "a" * 201
    await approvals.state.put(gate.NAMESPACE, too_long, {**record.value, "id": too_long}, expected_version=0)
    assert await approvals.get(too_long) is None


async def test_a_new_approval_never_overwrites_one_with_the_same_id(
    clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agentmw.state import Conflict

    approvals = Approvals()
    monkeypatch.setattr(gate.os, "urandom", lambda n: b"\x00" * n)
    first = await approvals.create("pay", {"to": "bob"}, "s", "mcp", "alice", 60)
    with pytest.raises(Conflict):
        await approvals.create("pay", {"to": "eve"}, "s", "mcp", "mallory", 60)
    assert (await approvals.get(first.id)).requested_by == "alice"


async def test_a_decision_that_loses_a_race_is_read_again_and_retried(clock: Clock) -> None:
    from agentmw.state import Conflict, MemoryState

    class Racing(MemoryState):
        """The first compare-and-set of an existing record loses to another writer."""

        lost = 0

        async def put(self, ns: str, key: str, value: Any, *, expected_version: int | None) -> int:
            if expected_version and not self.lost:
                self.lost += 1
                raise Conflict(ns, key, expected_version, expected_version + 1)
            return await super().put(ns, key, value, expected_version=expected_version)

    approvals = Approvals(state=Racing())
    approval = await approvals.create("pay", {}, "s", "mcp", "alice", 60)
    decided = await approvals.decide(approval.id, "carol", True)
    assert decided is not None and decided.status == "approved"
    assert approvals.state.lost == 1
    assert (await approvals.get(approval.id)).status == "approved"
