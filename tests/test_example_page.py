"""The example page in headless Chromium (Playwright): type a request, see the tool cards, approve, see the answer."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

from tests.conftest import require_tool, serve

SCRIPT = Path(__file__).parent / "agui" / "browser.mjs"
SETUP = "run `scripts/setup` (or `scripts/test`, which runs it) to install it"


def test_page_streams_a_run_and_takes_an_approval(tmp_path, monkeypatch) -> None:
    import examples.fastapi_app.main as example

    node = require_tool("Node (>= 20, with npm)", shutil.which("node"),
                        "install Node >= 20 with npm, then run `scripts/setup`")
    require_tool("playwright-core", SCRIPT.parent / "node_modules" / "playwright-core", SETUP)
    chromium = require_tool(
        "Chromium", os.environ.get("CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium",
        "run `scripts/setup` as root (it installs Debian's chromium package), or set CHROMIUM to a Chromium binary")
    engineering = example.BUDGETS["engineering"]
    monkeypatch.setattr(engineering, "spent", engineering.spent)
    shot = tmp_path / "page.png"
    with serve(example.app) as url:
        run = subprocess.run([node, str(SCRIPT), url, str(shot)], capture_output=True, text=True, timeout=120,
                             cwd=SCRIPT.parent, env={**os.environ, "CHROMIUM": chromium})
    assert run.returncode == 0, run.stderr[-3000:]
    result = json.loads(run.stdout.strip().splitlines()[-1])
    assert result["problems"] == []
    assert [t["name"] for t in result["tools"]] == ["search_assets", "department_budget", "submit_purchase_request"]
    assert all(not t["loading"] and t["result"] for t in result["tools"][:2])
    assert result["tools"][2]["loading"] is True, "the gated call waits for the approval, shown as loading"
    assert "understand the request" in result["steps"][0]
    assert result["message"].startswith('Run submit_purchase_request(request={"sku": "MON-27", "quantity": 2, ')
    assert result["message"].endswith("Side effects: Creates a purchase request that reserves the department's budget")
    assert result["action"]["function"] == "submit_purchase_request"
    assert result["action"]["arguments"]["request"]["quantity"] == 2
    assert result["toolsAfter"][-1] == "submit_purchase_request"
    assert result["answer"].startswith("Submitted PR-") and "898.00" in result["answer"]
    assert result["state"]["receipt"]["status"] == "submitted"
    assert shot.exists()
    if os.environ.get("AGENTMW_SCREENSHOT"):
        shutil.copy(shot, os.environ["AGENTMW_SCREENSHOT"])
