"""The ``agentmw`` command: inspect, lint (every code on a deliberately bad app), call over each face, serve."""

from __future__ import annotations

import asyncio
import io
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from agentmw import Agent, skill, tool
from agentmw.cli import main
from agentmw.cli.lint import EXTENSION_RULES, RULES, lint_agent
from agentmw.safety import RootedPath
from agentmw.testing import A2ATestClient, AguiTestClient
from tests.cli_apps import bad_app
from tests.conftest import free_port
from tests.helpers.mcp_raw import initialize_request
from tests.replicas import _stop, wait_healthy
from tests.waiting import wait_until

ROOT = Path(__file__).resolve().parent.parent
DEMO = "tests.cli_apps.demo_app:app"
EXAMPLE = "examples.fastapi_app.main:app"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# --- lint ----------------------------------------------------------------------------------------------


def test_lint_reports_every_code_on_the_bad_app(capsys) -> None:
    code, out, _ = run(capsys, "lint", "tests.cli_apps.bad_app:app", "--json")
    report = json.loads(out)
    found = {(f["code"], f["level"], f["name"]) for f in report["findings"]}
    assert found == bad_app.EXPECTED
    # the bad app breaks every rule but those of the protocols' extensions, which tests/test_cli_extensions.py's apps
    # break: together every rule there is
    assert {c for c, _, _ in found} == set(RULES) - EXTENSION_RULES
    assert code == 1 and report["errors"] == sum(level == "error" for _, level, _ in bad_app.EXPECTED)
    for finding in report["findings"]:
        assert finding["message"] and finding["fix"], finding
        assert finding["source"].startswith(os.path.join("tests", "cli_apps", "bad_app.py") + ":"), finding


def test_lint_text_output_ignores_and_strictness(capsys) -> None:
    code, out, _ = run(capsys, "lint", "tests.cli_apps.bad_app:app")
    assert code == 1
    assert "AMW004 error: tool delete_records may change things" in out
    assert "    fix: @tool(read_only=True) if it changes nothing" in out
    assert out.rstrip().endswith("9 errors, 7 warnings in bad (tests.cli_apps.bad_app:app)")
    errors = sorted({c for c, level, _ in bad_app.EXPECTED if level == "error"})
    ignores = [arg for c in errors for arg in ("--ignore", c)]
    assert run(capsys, "lint", "tests.cli_apps.bad_app:app", *ignores)[0] == 0  # only warnings left
    assert run(capsys, "lint", "tests.cli_apps.bad_app:app", "--strict", *ignores)[0] == 1
    code, out, _ = run(
        capsys, "lint", "tests.cli_apps.bad_app:app", "--json", "--ignore", "AMW005:fetch_page"
    )
    names = {(f["code"], f["name"]) for f in json.loads(out)["findings"]}
    assert ("AMW005", "fetch_page") not in names and ("AMW005", "shout") in names


def test_lint_baseline_catches_a_renamed_capability(capsys, tmp_path: Path) -> None:
    code, out, _ = run(capsys, "inspect", DEMO, "--json")
    snapshot = tmp_path / "names.json"
    snapshot.write_text(out)
    assert run(capsys, "lint", DEMO, "--baseline", str(snapshot))[0] == 0  # same names: nothing gone
    report = json.loads(out)
    report["capabilities"][0]["mcp"]["tool"]["name"] = "plus"  # as if `add` used to be called `plus`
    snapshot.write_text(json.dumps(report))
    code, out, _ = run(capsys, "lint", DEMO, "--json", "--baseline", str(snapshot))
    [finding] = json.loads(out)["findings"]
    assert code == 1 and (finding["code"], finding["kind"], finding["name"]) == ("AMW009", "tool", "plus")
    plain = tmp_path / "plain.json"
    plain.write_text(json.dumps({"skill": ["approve", "retired"]}))
    code, out, _ = run(capsys, "lint", DEMO, "--json", "--baseline", str(plain))
    assert [f["name"] for f in json.loads(out)["findings"]] == ["retired"]


def _summarised(fn, summary: str):
    """``fn`` with a docstring: its contract, then ``summary`` as its Summary: section."""
    contract = fn.__name__.replace("_", " ").capitalize() + ", as the tests need it."
    fn.__doc__ = f"{contract}\n\nSummary:\n    {summary}\n"
    return fn


def _rule_cases(lenient: bool) -> list:
    """Capabilities meeting AMW004, AMW005, AMW006 and AMW010 each in an allowed way (``lenient``), or not."""
    if lenient:

        def charge(amount: int, idempotency_key: str) -> int:
            return amount

        def resize(path: RootedPath) -> int:
            return 0

        async def review(a: int, b: int, note: str) -> int:  # more than the one tool it groups
            return a + b
    else:

        def charge(amount: int) -> int:
            return amount

        def resize(path: Path) -> int:
            return 0

        async def review(a: int, b: int) -> int:
            return a + b

    async def transfer(amount: int) -> int:
        return amount

    async def fetch_text(url: str) -> str:
        return url

    async def add_up(a: int, b: int) -> int:
        return a + b

    summed = tool(read_only=True, open_world=False)(_summarised(add_up, "Adds numbers."))
    return [
        tool(open_world=False)(_summarised(charge, "Takes payments.")),  # side effects: an idempotency key
        tool(open_world=False, idempotent=lenient or None)(_summarised(transfer, "Moves money.")),  # declared
        tool(read_only=True, untrusted=lenient)(_summarised(fetch_text, "Reads the web.")),  # outside text
        tool(read_only=True, open_world=False)(_summarised(resize, "Measures files.")),  # a RootedPath
        summed,
        skill(tools=(summed,))(_summarised(review, "Reviews sums for other agents.")),  # not a copy of add_up
    ]


def test_lint_accepts_every_way_of_meeting_a_rule() -> None:
    assert lint_agent(Agent("good", include=_rule_cases(lenient=True))) == []
    caught = {(f.code, f.name) for f in lint_agent(Agent("bad", include=_rule_cases(lenient=False)))}
    assert caught == {
        ("AMW004", "charge"),
        ("AMW004", "transfer"),
        ("AMW005", "fetch_text"),
        ("AMW006", "resize"),
        ("AMW010", "review"),
    }


def test_the_example_and_the_demo_lint_clean(capsys) -> None:
    for target in (EXAMPLE, DEMO):
        code, out, _ = run(capsys, "lint", target, "--strict")
        assert code == 0 and out.startswith("0 errors, 0 warnings"), out


def test_agentmw_is_a_console_script_whose_exit_status_fails_ci() -> None:
    from importlib.metadata import entry_points

    [script] = entry_points(group="console_scripts", name="agentmw")
    assert script.value == "agentmw.cli:main"
    command = Path(sys.executable).parent / "agentmw"  # what `pip install agentmw` puts beside python
    env = {**os.environ, "AGENTMW_STORE": "memory://"}
    bad = subprocess.run(
        [str(command), "lint", "tests.cli_apps.bad_app:app"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert bad.returncode == 1 and "AMW004 error: tool delete_records" in bad.stdout, bad.stderr
    clean = subprocess.run(
        [str(command), "lint", DEMO, "--strict"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert clean.returncode == 0 and clean.stdout.startswith("0 errors, 0 warnings"), clean.stderr


# --- inspect -------------------------------------------------------------------------------------------


async def _card_and_agui(app) -> tuple[dict, dict]:
    async with A2ATestClient(app) as a2a, AguiTestClient(app) as agui:
        return await a2a.card(), await agui.capabilities("approve_purchase")


def test_inspect_json_shows_what_each_face_shows(capsys) -> None:
    code, out, _ = run(capsys, "inspect", EXAMPLE, "--json")
    assert code == 0
    report = json.loads(out)
    assert report["agent"]["name"] == "procurement-assistant"
    assert report["agent"]["paths"] == {
        "mcp": "/mcp",
        "a2a": "/a2a",
        "card": "/.well-known/agent-card.json",
        "agui": "/agui",
        "approvals": "/approvals",
    }
    assert "AgentMiddleware" in report["resolvedFrom"]
    caps = {c["name"]: c for c in report["capabilities"]}
    assert set(caps) == {
        "search_assets",
        "department_budget",
        "submit_purchase_request",
        "read_policy",
        "supplier_notes",
        "purchase_justification",
        "approve_purchase",
        "procurement_assistant",
        "set_budget",
        "purchase_approval",
        "decide_purchase_approval",
        "approval-card",
        "purchase-requests",
    }
    search = caps["search_assets"]
    assert search["kinds"] == ["tool"] and search["exposure"] == "decorated"
    assert search["route"] == {"methods": ["GET"], "path": "/assets"}
    tool = search["mcp"]["tool"]
    assert tool["description"].startswith("Search the IT asset catalog by free text and category.")
    assert "Summary" not in tool["description"]  # the model reads the contract, not the summary
    assert tool["inputSchema"]["properties"]["limit"]["maximum"] == 50
    assert tool["outputSchema"]["properties"]["result"]["type"] == "array"
    assert tool["annotations"]["readOnlyHint"] is True
    assert search["a2a"] == {"groupedBy": ["procurement_assistant"]} and search["agui"] is None
    assert search["policy"] == {"timeout": 10}
    assert caps["submit_purchase_request"]["policy"]["gated"] is True
    budget = caps["department_budget"]
    assert (
        budget["kinds"] == ["tool", "resource"]
        and budget["mcp"]["resourceTemplate"]["uriTemplate"] == "budget://{department}"
    )
    assert caps["purchase_justification"]["mcp"]["prompt"]["arguments"][0]["name"] == "sku"
    approve = caps["approve_purchase"]
    assert approve["mcp"] == {}
    assert (
        approve["a2a"]["skill"]["description"]
        == "Gets a purchase request approved or declined by the budget admin; long-running."
    )
    assert approve["a2a"]["groups"] == ["department_budget"]
    assert approve["agui"]["path"] == "/agui/approve_purchase"
    # the same entries a client reads from the faces
    from examples.fastapi_app.main import app

    card, agui = asyncio.run(_card_and_agui(app))
    assert approve["a2a"]["skill"] == next(s for s in card["skills"] if s["id"] == "approve_purchase")
    assert approve["agui"]["capabilities"] == agui
    assert report["card"]["name"] == card["name"] and "skills" not in report["card"]


def test_inspect_text_names_the_contract_and_the_summary(capsys) -> None:
    code, out, _ = run(capsys, "inspect", EXAMPLE)
    assert code == 0
    assert "search_assets  (tool; decorated; GET /assets)  examples/fastapi_app/main.py:" in out
    assert "    contract (the model reads this):\n      Search the IT asset catalog" in out
    assert (
        "    summary (the scheduler reads this on the card):\n      Gets a purchase request approved" in out
    )
    assert "  AG-UI agent POST /agui/procurement_assistant" in out


@pytest.mark.parametrize(
    ("spec", "how", "mcp_path"),
    [
        ("tests.cli_apps.demo_app:app", "app.add_middleware(AgentMiddleware) on FastAPI", "/mcp"),
        ("tests.cli_apps.demo_app:agent", "an Agent, served alone (agent.asgi())", "/mcp"),
        ("tests.cli_apps.demo_app:build", "app.add_middleware(AgentMiddleware) on FastAPI", "/mcp"),
        ("tests.cli_apps.demo_app", "app.add_middleware(AgentMiddleware) on FastAPI", "/mcp"),
        ("tests.cli_apps.mounted:app", "agent.asgi() mounted at '/agent'", "/agent/mcp"),
    ],
)
def test_targets_name_the_agent_in_several_ways(capsys, spec: str, how: str, mcp_path: str) -> None:
    code, out, _ = run(capsys, "inspect", spec, "--json")
    report = json.loads(out)
    assert code == 0 and report["resolvedFrom"] == how and report["agent"]["paths"]["mcp"] == mcp_path
    assert report["agent"]["name"] == "demo"
    code, out, _ = run(capsys, "call", spec, "add", '{"a": 2, "b": 40}')  # through the app, under its prefix
    assert code == 0 and json.loads(out)["structuredContent"] == {"result": 42}


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("tests.cli_apps.nowhere:app", "cannot import 'tests.cli_apps.nowhere': no such module"),
        ("tests.cli_apps.demo_app:missing", "has no attribute 'missing'"),
        ("tests.cli_apps.demo_app:log", "carries no agentmw Agent"),
        ("tests.cli_apps", "holds 0 Agent objects"),
    ],
)
def test_a_target_without_an_agent_is_a_usage_error(capsys, spec: str, message: str) -> None:
    code, _, err = run(capsys, "inspect", spec)
    assert code == 2 and message in err, err


# --- call ----------------------------------------------------------------------------------------------


def test_call_over_mcp(capsys) -> None:
    code, out, _ = run(capsys, "call", DEMO, "add", '{"a": 1, "b": 2}')
    result = json.loads(out)
    assert code == 0 and result["structuredContent"] == {"result": 3} and result["isError"] is False
    code, out, _ = run(capsys, "call", DEMO, "add", '{"a": "one"}')  # invalid arguments: the pipeline refuses
    assert code == 1 and json.loads(out)["isError"] is True
    code, _, err = run(capsys, "call", DEMO, "nothing", "{}")
    assert code == 2 and "no tool, prompt or resource 'nothing'" in err
    code, _, err = run(capsys, "call", DEMO, "add", "{not json")
    assert code == 2 and err.startswith("agentmw: arguments:")


def test_call_over_a2a(capsys) -> None:
    code, out, _ = run(capsys, "call", DEMO, "chat", '"hello"')  # a skill: A2A by default; a string is text
    task = json.loads(out)["task"]
    assert code == 0 and task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert task["artifacts"][0]["parts"] == [{"text": "You said: hello"}]
    code, out, _ = run(capsys, "call", DEMO, "approve", '{"item": "laptop"}', "--protocol", "a2a")
    task = json.loads(out)["task"]
    assert code == 3 and task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert (
        task["status"]["message"]["parts"][0]["text"]
        == "Approve laptop?\nReply with yes or no (or a data part matching the schema)."
    )


def test_call_over_agui(capsys) -> None:
    code, out, _ = run(capsys, "call", DEMO, "chat", '"hello"', "--protocol", "agui", "--events")
    result = json.loads(out)
    assert code == 0 and result["text"] == "You said: hello" and result["outcome"] == {"type": "success"}
    assert result["events"][0]["type"] == "RUN_STARTED" and result["events"][-1]["type"] == "RUN_FINISHED"
    code, out, _ = run(capsys, "call", DEMO, "approve", '{"item": "phone"}', "--protocol", "agui")
    result = json.loads(out)
    assert code == 3 and result["interrupts"][0]["message"] == "Approve phone?"
    code, _, err = run(capsys, "call", DEMO, "add", "{}", "--protocol", "agui")
    assert code == 2 and "no skill 'add' is served over AG-UI" in err


def test_call_a_prompt_a_resource_and_a_grouped_tool_over_a2a(capsys) -> None:
    code, out, _ = run(
        capsys, "call", EXAMPLE, "purchase_justification", '{"sku": "MON-27", "reason": "reviews"}'
    )
    assert code == 0 and "buying MON-27: reviews" in json.loads(out)["messages"][0]["content"]["text"]
    code, out, _ = run(capsys, "call", EXAMPLE, "purchase_justification", '{"sku": "MON-27"}')
    assert code == 1 and json.loads(out)["error"]["code"] == -32602  # a missing argument, refused
    code, out, _ = run(capsys, "call", EXAMPLE, "budget://engineering")
    [content] = json.loads(out)["contents"]
    assert code == 0 and json.loads(content["text"])["department"] == "engineering"
    code, out, _ = run(capsys, "call", EXAMPLE, "search_assets", '{"query": "laptop"}', "--protocol", "a2a")
    task = json.loads(out)["task"]  # through procurement_assistant, the skill that groups it
    assert code == 0 and task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert {a["sku"] for a in task["artifacts"][0]["parts"][0]["data"]["result"]} >= {"LPT-14", "LPT-13"}


def test_call_shows_progress_for_work_longer_than_a_second(capsys) -> None:
    code, out, err = run(capsys, "call", DEMO, "slow_count", '{"steps": 4, "pause": 0.4}')
    assert code == 0 and json.loads(out)["structuredContent"] == {"result": 4}
    lines = [line for line in err.splitlines() if line.startswith("agentmw: calling slow_count...")]
    assert lines and any(": step " in line for line in lines), err
    code, out, err = run(capsys, "call", DEMO, "add", '{"a": 1, "b": 1}')
    assert code == 0 and err == ""  # quick work shows nothing


def test_call_a_gated_route_with_headers(capsys) -> None:
    code, out, _ = run(
        capsys,
        "call",
        EXAMPLE,
        "submit_purchase_request",
        '{"request": {"sku": "MON-27", "quantity": 1, "department": "engineering", '
        '"justification": "A second screen for reviews"}}',
    )
    assert code == 1 and json.loads(out)["error"]["message"] == (  # HTTP 401: the tool's scope (auth.md)
        "Authentication required: tool submit_purchase_request needs the scope(s) purchases:write"
    )
    code, out, _ = run(
        capsys,
        "call",
        EXAMPLE,
        "submit_purchase_request",
        '{"request": {"sku": "MON-27", "quantity": 1, "department": "engineering", '
        '"justification": "A second screen for reviews"}}',
        "-H",
        "Authorization: Bearer demo-token",
    )
    result = json.loads(out)
    assert (
        code == 3 and result["_meta"]["agentmw/approval"]["status"] == "pending"
    )  # a person must approve it
    assert result["_meta"]["agentmw/approval"]["requestedBy"] == "alice"


# --- serve ---------------------------------------------------------------------------------------------


def _message(data: dict, **extra: object) -> dict:
    return {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"data": data}], **extra}


async def _rpc(http: httpx2.AsyncClient, url: str, method: str, params: dict) -> dict:
    response = await http.post(
        f"{url}/a2a",
        json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params},
        headers={"a2a-version": "1.0"},
    )
    reply = response.json()
    assert "result" in reply, reply
    return reply["result"]


def test_serve_refuses_workers_without_a_shared_store(capsys, monkeypatch) -> None:
    monkeypatch.setenv("AGENTMW_STORE", "memory://")
    code, _, err = run(capsys, "serve", DEMO, "--workers", "2")
    assert code == 2 and "would each keep their own tasks" in err


async def _exercise(url: str) -> None:
    """The official MCP client, then an A2A question answered on new connections spread over the workers."""
    http = httpx2.AsyncClient(timeout=30)
    async with Client(
        streamable_http_client(f"{url}/mcp", http_client=http), mode="auto", cache=None
    ) as client:
        tools = {t.name for t in (await client.list_tools()).tools}
        assert tools == {"add", "slow_count"}
        result = await client.call_tool("add", {"a": 20, "b": 22})
        assert result.structured_content == {"result": 42}
    async with httpx2.AsyncClient(timeout=10) as plain:
        card = (await plain.get(f"{url}/.well-known/agent-card.json")).json()
        assert [s["id"] for s in card["skills"]] == ["approve", "hold", "chat"]
        task = (
            await _rpc(
                plain,
                url,
                "SendMessage",
                {"message": _message({"item": "desk"}, metadata={"skill": "approve"})},
            )
        )["task"]
        assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    for _ in range(6):  # every worker reads the task from the shared store
        async with httpx2.AsyncClient(timeout=10) as fresh:
            seen = await _rpc(fresh, url, "GetTask", {"id": task["id"]})
        assert seen["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    async with httpx2.AsyncClient(timeout=10) as fresh:
        done = (
            await _rpc(
                fresh, url, "SendMessage", {"message": _message({"approved": True}, taskId=task["id"])}
            )
        )["task"]
    assert done["status"]["state"] == "TASK_STATE_COMPLETED"
    assert done["artifacts"][0]["parts"] == [{"text": "desk: approved"}]


def test_serve_with_workers_answers_the_official_mcp_client(tmp_path: Path) -> None:
    port = free_port()
    log = tmp_path / "serve.log"
    env = {**os.environ, "AGENTMW_STORE": ""}
    with log.open("w") as out:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "agentmw.cli",
                "serve",
                DEMO,
                "--port",
                str(port),
                "--workers",
                "2",
                "--store",
                f"sqlite:///{tmp_path / 'agentmw.db'}",
                "--log-level",
                "warning",
            ],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        url = f"http://127.0.0.1:{port}"
        wait_healthy(url, process, log, timeout=40)
        asyncio.run(_exercise(url))
    finally:
        _stop(process, group=True)
    banner = log.read_text()
    assert f"MCP   http://127.0.0.1:{port}/mcp" in banner and "2 workers" in banner, banner
    assert (tmp_path / "agentmw.db").exists()  # the workers shared the store given


def test_serve_an_agent_alone_in_one_process(tmp_path: Path) -> None:
    import httpx

    port = free_port()
    log = tmp_path / "serve.log"
    with log.open("w") as out:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "agentmw.cli",
                "serve",
                "tests.cli_apps.demo_app:agent",
                "--port",
                str(port),
                "--log-level",
                "warning",
            ],
            cwd=ROOT,
            env={**os.environ, "AGENTMW_STORE": "memory://"},
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        url = f"http://127.0.0.1:{port}"
        initialize = initialize_request(client="test", request_id=1)

        def initialized() -> httpx.Response | None:
            try:
                return httpx.post(
                    f"{url}/mcp",
                    json=initialize,
                    timeout=5,
                    headers={"accept": "application/json, text/event-stream"},
                )
            except httpx.TransportError:
                assert process.poll() is None, log.read_text()
                return None

        answer = wait_until(
            initialized, lambda: f"the server to answer:\n{log.read_text()}", timeout=30, interval=0.1
        )
        assert answer.status_code == 200 and answer.headers["mcp-session-id"]
        assert '"protocolVersion":"2025-11-25"' in answer.text.replace(" ", "")
    finally:
        _stop(process, group=True)
    assert (
        "serving demo (2 tools, 3 skills) from tests.cli_apps.demo_app:agent, store memory://"
        in log.read_text()
    )


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_redraws_one_line_on_a_terminal_and_clears_it() -> None:
    from agentmw.cli.progress import Progress

    terminal = _Terminal()
    with Progress("working", stream=terminal, delay=0.05, interval=0.02) as progress:
        progress.update("half")
        wait_until(lambda: "half" in terminal.getvalue(), "a progress line to be drawn", timeout=5)
    text = terminal.getvalue()
    assert text.startswith("\r\x1b[K") and "agentmw: working... 0s: half" in text and "\n" not in text
    assert text.endswith("\r\x1b[K")  # the line is gone when the work is done
    quiet = _Terminal()
    with Progress("quick", stream=quiet, delay=5):
        pass
    assert quiet.getvalue() == ""
