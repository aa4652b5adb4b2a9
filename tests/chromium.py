"""Run one of the Node scripts in ``tests/agui/`` that drive headless Chromium with playwright-core.

The test is skipped (failed under ``CI=true``) when Node, playwright-core or Chromium is missing, with the
command that installs it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

from tests.conftest import require_tool

__all__ = ["run_browser_script"]

SCRIPTS = Path(__file__).parent / "agui"
SETUP = "run `scripts/setup` (or `scripts/test`, which runs it) to install it"


def run_browser_script(name: str, *args: str, timeout: float = 120) -> dict[str, Any]:
    """Runs ``tests/agui/<name>`` with ``args``; the JSON object its last line prints."""
    node = require_tool(
        "Node (>= 20, with npm)",
        shutil.which("node"),
        "install Node >= 20 with npm, then run `scripts/setup`",
    )
    require_tool("playwright-core", SCRIPTS / "node_modules" / "playwright-core", SETUP)
    chromium = require_tool(
        "Chromium",
        os.environ.get("CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium",
        "run `scripts/setup` as root (it installs Debian's chromium package), or set CHROMIUM to a Chromium binary",
    )
    run = subprocess.run(
        [node, str(SCRIPTS / name), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=SCRIPTS,
        env={**os.environ, "CHROMIUM": chromium},
        check=False,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    result: dict[str, Any] = json.loads(run.stdout.strip().splitlines()[-1])
    return result
