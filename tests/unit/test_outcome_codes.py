"""Outcome statuses and codes are enums: every one the source writes is a member, so a face that maps them
(docs/context.md, "Outcomes") cannot meet one it was never told about."""

from __future__ import annotations

import re
from pathlib import Path

from agentmw.runtime import Code, Outcome, Status

SOURCE = Path(__file__).resolve().parents[2] / "src" / "agentmw"
CALL = re.compile(
    r"\bOutcome\((?:[^()]|\((?:[^()]|\([^()]*\))*\))*\)"
)  # an Outcome(...), nested calls inside
LITERAL = re.compile(r"\b(status|code)=\"([a-z_]+)\"")


def written() -> dict[str, set[str]]:
    found: dict[str, set[str]] = {"status": set(), "code": set()}
    for path in SOURCE.rglob("*.py"):
        for call in CALL.finditer(path.read_text(encoding="utf-8")):
            for match in LITERAL.finditer(call.group(0)):
                found[match.group(1)].add(match.group(2))
    return found


def test_every_status_and_code_the_source_writes_is_a_member() -> None:
    found = written()
    assert found["code"], "the scan found no codes: the pattern no longer matches how outcomes are made"
    assert found["status"] <= {s.value for s in Status}
    assert found["code"] <= {c.value for c in Code}


def test_awaiting_approval_is_its_own_status_that_asks() -> None:
    assert Status.AWAITING_APPROVAL.asks and Status.NEEDS_INPUT.asks
    assert not any(s.asks for s in (Status.COMPLETED, Status.FAILED, Status.REJECTED, Status.CANCELED))
    assert Status.AWAITING_APPROVAL == "awaiting_approval"  # a plain string on the wire and in the state


def test_an_outcome_read_back_from_the_state_has_the_enum_status() -> None:
    outcome = Outcome(status=Status.AWAITING_APPROVAL, message="Buy 3 laptops")
    data = outcome.to_dict()
    assert data["status"] == "awaiting_approval"
    back = Outcome.from_dict(data)
    assert back.status is Status.AWAITING_APPROVAL and back.message == "Buy 3 laptops"
