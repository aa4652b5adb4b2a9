"""The example page draws the budget check, an A2UI surface, with the official renderer (@a2ui/lit) in headless
Chromium, and redraws it when the skill updates its data (tests/agui/a2ui_page.mjs)."""

from __future__ import annotations

import os
import shutil

from tests.chromium import run_browser_script
from tests.conftest import serve


def test_the_page_draws_the_budget_surface_and_its_update(tmp_path, monkeypatch) -> None:
    import examples.fastapi_app.main as example

    engineering = example.BUDGETS["engineering"]
    monkeypatch.setattr(engineering, "spent", engineering.spent)
    total, spent, left = engineering.total, engineering.spent, engineering.remaining
    shot = tmp_path / "a2ui.png"
    with serve(example.app) as url:
        result = run_browser_script("a2ui_page.mjs", url, str(shot))
    assert result["problems"] == []
    assert result["elements"] == 1 and result["heading"] == 1, "one <a2ui-surface>, drawn by the renderer"
    assert result["timeline"].count("surface") == 1, "the update redraws the same card, in place"
    [before] = result["before"]
    assert before.startswith("Engineering budget")
    for label, amount in (("Total", total), ("Spent", spent), ("Remaining", left), ("This request", 898.0)):
        assert f"{label} {amount:,.2f}" in before, (label, before)
    assert before.endswith("Within the remaining budget.")
    [after] = result["after"]
    assert after.startswith("Engineering budget") and f"Remaining {left:,.2f}" in after
    assert "Submitted as PR-" in after and "Within the remaining budget." not in after
    assert result["answer"].startswith("Submitted PR-")
    assert shot.exists()
    if os.environ.get("AGENTMW_SCREENSHOT"):
        shutil.copy(shot, os.environ["AGENTMW_SCREENSHOT"])
