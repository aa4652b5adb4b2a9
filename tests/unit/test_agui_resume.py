"""The AG-UI resume decision as a table (``agentmw.agui.resume``): every case is reachable, the order of the
rows is what decides between cases, and each case has its handler in ``Runs``."""

from __future__ import annotations

import itertools

from agentmw.agui.resume import RESUME_CASES, resume_case
from agentmw.agui.runs import Runs

FACTS = ("complete", "cancelled", "parked", "arguments", "here", "journaled", "expired")


def every_combination() -> list[dict[str, bool]]:
    return [
        dict(zip(FACTS, values, strict=True))
        for values in itertools.product((False, True), repeat=len(FACTS))
    ]


def test_every_case_is_reachable_and_names_only_known_facts() -> None:
    chosen = {resume_case(facts).name for facts in every_combination()}
    assert chosen == {case.name for case in RESUME_CASES}
    for case in RESUME_CASES:
        assert set(case.when) <= set(FACTS), case.name
        assert len(case.reason) > 40, case.name  # each says why


def test_the_last_case_matches_always_and_names_are_unique() -> None:
    assert RESUME_CASES[-1].when == {}
    assert len({case.name for case in RESUME_CASES}) == len(RESUME_CASES)


def test_each_case_but_invalid_has_its_handler() -> None:
    for case in RESUME_CASES:
        if case.name != "invalid":
            assert callable(getattr(Runs, f"_resume_{case.name}", None)), case.name


def test_the_order_decides() -> None:
    every = dict.fromkeys(FACTS, True)
    assert resume_case({**every, "complete": False}).name == "invalid"  # refused before anything else
    assert resume_case(every).name == "cancel_parked"  # a cancel wins over any answer
    assert resume_case({**every, "parked": False}).name == "cancel_elsewhere"
    assert resume_case({**every, "cancelled": False}).name == "arguments"  # nothing ran yet
    # the coroutine waiting here gets the answers even when the interrupt looks expired: its own wait ends it
    assert resume_case({**every, "cancelled": False, "arguments": False}).name == "answer_here"
    elsewhere = {**every, "cancelled": False, "arguments": False, "here": False, "parked": False}
    assert resume_case(elsewhere).name == "expired"
    assert resume_case({**elsewhere, "expired": False}).name == "replay"
    assert resume_case({**elsewhere, "expired": False, "journaled": False}).name == "lost"
    assert resume_case({**elsewhere, "journaled": False}).name == "lost"  # nothing to replay, late or not
