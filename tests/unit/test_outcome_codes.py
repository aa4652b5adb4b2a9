"""Outcome statuses and codes are enums: every one the source writes is a member, so a face that maps them
(docs/context.md, "Outcomes") cannot meet one it was never told about."""

from __future__ import annotations

import re
from pathlib import Path

from agentmw.outcomes import Code, Outcome, Status

SOURCE = Path(__file__).resolve().parents[2] / "src" / "agentmw"
CALL = re.compile(
    r"\bOutcome\((?:[^()]|\((?:[^()]|\([^()]*\))*\))*\)"
)  # an Outcome(...), nested calls inside
LITERAL = re.compile(r"\b(status|code)=\"([a-z_]+)\"")
# an outcome's code or status compared with a string: ``outcome.code == "x"``, ``code in ("x", "y")``
COMPARED = re.compile(r"\b(outcome\.code|outcome\.status|(?<![.\w])code)\s*(?:==|!=)\s*\"([a-z_]+)\"")
COMPARED_IN = re.compile(
    r"\b(outcome\.code|outcome\.status|(?<![.\w])code)\s+(?:not\s+)?in\s+[({]((?:\s*\"[a-z_]+\"\s*,?)+)[)}]"
)


def written(text: str) -> dict[str, set[str]]:
    """The statuses and codes ``Outcome(...)`` calls in ``text`` write as string literals."""
    found: dict[str, set[str]] = {"status": set(), "code": set()}
    for call in CALL.finditer(text):
        for match in LITERAL.finditer(call.group(0)):
            found[match.group(1)].add(match.group(2))
    return found


def compared(text: str) -> dict[str, set[str]]:
    """The string literals ``text`` compares an outcome's code or status with."""
    found: dict[str, set[str]] = {"status": set(), "code": set()}
    for match in COMPARED.finditer(text):
        found["status" if match.group(1).endswith("status") else "code"].add(match.group(2))
    for match in COMPARED_IN.finditer(text):
        kind = "status" if match.group(1).endswith("status") else "code"
        found[kind].update(re.findall(r'"([a-z_]+)"', match.group(2)))
    return found


def sources() -> list[str]:
    return [path.read_text(encoding="utf-8") for path in SOURCE.rglob("*.py")]


def test_the_scans_see_what_they_look_for() -> None:
    sample = """Outcome(status="failed", code="busy", message=f("x"))
if outcome.code == "taken_over" or code in ("execution_busy", "unknown_execution"): ...
if outcome.status != "completed": ..."""
    assert written(sample) == {"status": {"failed"}, "code": {"busy"}}
    assert compared(sample) == {
        "status": {"completed"},
        "code": {"taken_over", "execution_busy", "unknown_execution"},
    }


def test_no_outcome_is_made_with_a_literal_status_or_code() -> None:
    """Outcomes are made with the enums, so mypy checks every status and code an outcome is given."""
    for text in sources():
        assert written(text) == {"status": set(), "code": set()}


def test_every_status_and_code_the_source_compares_with_is_a_member() -> None:
    """Kept while some modules still compare an outcome's code with a string (issue 23)."""
    found: dict[str, set[str]] = {"status": set(), "code": set()}
    for text in sources():
        for kind, values in compared(text).items():
            found[kind] |= values
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
