"""The example's approval card rendered as a host renders an MCP App: headless Chromium, a sandboxed iframe, the
official AppBridge (@modelcontextprotocol/ext-apps) speaking the extension's postMessage protocol, and the
official TypeScript MCP client performing on the served example the ``tools/call`` the card sends (host.mjs).
The decision is then checked on the server: at ``/approvals/<id>``, and by the requester's retry."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import httpx
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.conftest import require_tool

HOST = Path(__file__).parent / "mcp_apps"
SETUP = "run `scripts/setup` (it runs `npm ci` in tests/mcp_apps)"
ORDER = {
    "request": {
        "sku": "MON-27",
        "quantity": 2,
        "department": "engineering",
        "justification": "Two monitors for the <b>new</b> pairing station",  # shown as text, never as markup
    }
}


def host(url: str, token: str, tool: str, arguments: dict[str, Any], click: str | None) -> dict[str, Any]:
    """Runs tests/mcp_apps/host.mjs: the call, the card rendered with its input and result, the click (None:
    none, what the card shows)."""
    node = require_tool("Node (>= 20, with npm)", shutil.which("node"), "install Node >= 20, then " + SETUP)
    for package in ("playwright-core", "@modelcontextprotocol/ext-apps", "@modelcontextprotocol/client"):
        require_tool(package, HOST / "node_modules" / package, SETUP)
    chromium = require_tool(
        "Chromium",
        os.environ.get("CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium",
        "run `scripts/setup` as root (it installs Debian's chromium package), or set CHROMIUM to a Chromium binary",
    )
    spec = {"url": url, "token": token, "tool": tool, "arguments": arguments, "click": click}
    run = subprocess.run(
        [node, str(HOST / "host.mjs"), json.dumps(spec)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=HOST,
        env={**os.environ, "CHROMIUM": chromium},
        check=False,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    shown: dict[str, Any] = json.loads(run.stdout.strip().splitlines()[-1])
    assert shown["problems"] == [], shown["problems"]
    return shown


async def approval_record(url: str, approval_id: str) -> dict[str, Any]:
    """The approval as the server keeps it, read where a budget admin reads it."""
    async with httpx.AsyncClient(base_url=url, headers={"authorization": "Bearer admin-token"}) as http:
        response = await http.get(f"/approvals/{approval_id}")
        assert response.status_code == 200, response.text
        record: dict[str, Any] = response.json()
        return record


def as_alice(url: str) -> Client:
    http = httpx2.AsyncClient(headers={"authorization": "Bearer demo-token"}, timeout=30)
    return Client(streamable_http_client(f"{url}/mcp", http_client=http), mode="2026-07-28", cache=None)


async def test_the_requester_sees_the_card_waiting_for_a_budget_admin_without_buttons(
    example_url: str,
) -> None:
    shown = host(example_url, "demo-token", "submit_purchase_request", ORDER, None)
    assert shown["extensions"]["io.modelcontextprotocol/ui"] == {}  # beside any other extension the app has
    assert shown["ui"] == {"resourceUri": "ui://procurement/approval.html"}
    assert shown["resourceMeta"] == {"ui": {"prefersBorder": True}}
    approval = shown["result"]["_meta"]["agentmw/approval"]
    assert shown["result"]["isError"] is True and approval["status"] == "pending"
    assert shown["appInfo"] == {"name": "procurement-approval-card", "version": "1.0.0"}  # ui/initialize
    before = shown["before"]
    assert before["status"] == "pending" and before["title"] == f"Purchase approval {approval['id']}"
    assert before["summary"].startswith("Run submit_purchase_request(")
    assert "MON-27" in before["details"] and "Requested byalice" in before["details"]
    assert "Two monitors for the <b>new</b> pairing station" in before["details"]
    assert shown["sizes"], "the card reports its size (ui/notifications/size-changed)"
    # her card decides nothing: no Approve or Reject (only purchase_approval's card, a budget admin's, has them)
    assert before["buttons"] is False and "Waiting for a budget admin" in before["waiting"]
    assert shown["bridgeCalls"] == [] and shown["relayed"] == [] and shown["after"] is None
    record = await approval_record(example_url, approval["id"])
    assert record["status"] == "pending" and record["decidedBy"] is None


async def test_a_budget_admin_approves_in_the_card_and_the_server_records_it(example_url: str) -> None:
    async with as_alice(example_url) as alice:
        waiting = await alice.call_tool("submit_purchase_request", ORDER)
    approval_id = waiting.meta["agentmw/approval"]["id"]
    shown = host(example_url, "admin-token", "purchase_approval", {"approval_id": approval_id}, "approve")
    assert shown["before"]["buttons"] is True and shown["before"]["waiting"] is None
    assert shown["result"]["isError"] is False and shown["result"]["structuredContent"]["status"] == "pending"
    assert shown["before"]["status"] == "pending" and "Requested byalice" in shown["before"]["details"]
    assert shown["relayed"] == [
        {
            "name": "decide_purchase_approval",
            "arguments": {"approval_id": approval_id, "approve": True, "note": ""},
        }
    ]
    assert shown["after"]["status"] == "approved" and shown["after"]["error"] == ""
    assert "Decided bybudget-admin" in shown["after"]["details"]
    record = await approval_record(example_url, approval_id)
    assert record["status"] == "approved" and record["decidedBy"] == "budget-admin"
    async with as_alice(example_url) as alice:  # the requester retries with the approval: it runs, once
        done = await alice.call_tool(
            "submit_purchase_request", ORDER, meta={"agentmw/approvalId": approval_id}
        )
    assert done.is_error is False and done.structured_content["status"] == "submitted"


async def test_a_budget_admin_rejects_in_the_card(example_url: str) -> None:
    async with as_alice(example_url) as alice:
        waiting = await alice.call_tool("submit_purchase_request", ORDER)
        approval_id = waiting.meta["agentmw/approval"]["id"]
        shown = host(example_url, "admin-token", "purchase_approval", {"approval_id": approval_id}, "reject")
        assert shown["after"]["status"] == "rejected"
        assert (await approval_record(example_url, approval_id))["status"] == "rejected"
        refused = await alice.call_tool(
            "submit_purchase_request", ORDER, meta={"agentmw/approvalId": approval_id}
        )
    assert refused.is_error is True and "rejected" in refused.content[0].text
