"""The ``agentmw`` command as a new user meets it (docs/cli.md): every mistake is one clear line on stderr and a
non-zero exit status, never a traceback; a tool that asks a question exits 3 with the question; a tool that
runs only as a task is called as one and followed to its end."""

from __future__ import annotations

import json
import textwrap
import uuid
from pathlib import Path

import pytest

from agentmw.cli import main

APP = '''
import asyncio
from agentmw import Agent, Context

agent = Agent("review", "0.1")


@agent.tool(read_only=True)
def add(a: int, b: int) -> int:
    """Adds two numbers."""
    return a + b


@agent.tool(read_only=True)
async def who(ctx: Context) -> str:
    """Asks a name."""
    answer = await ctx.ask("Name?", {"type": "object", "properties": {"name": {"type": "string"}}})
    return str((answer.content or {}).get("name"))


@agent.tool(task="required", read_only=True)
async def reindex(n: int, ctx: Context) -> str:
    """Reindexes, as a task only."""
    await ctx.progress(1, 2, "halfway")
    await asyncio.sleep(0.3)
    return f"reindexed {n}"


@agent.tool(task="required", read_only=True)
async def onboard(ctx: Context) -> str:
    """Asks a name, as a task only."""
    answer = await ctx.ask("Name?", {"type": "object", "properties": {"name": {"type": "string"}}})
    return str((answer.content or {}).get("name"))


def broken_factory():
    raise RuntimeError("the database is down")


async def broken_async_factory():
    raise RuntimeError("the database is down, asynchronously")
'''


@pytest.fixture
def modules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Write modules named uniquely (no import cache between tests) into a directory on the path."""
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("AGENTMW_STORE", "memory://")

    def write(source: str) -> str:
        name = f"review_{uuid.uuid4().hex[:10]}"
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(source))
        return name

    return write


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def assert_clear_error(code: int, err: str, *expected: str) -> None:
    assert code == 2, err
    assert "Traceback" not in err and err.startswith("agentmw: "), err
    for text in expected:
        assert text in err, err


@pytest.mark.parametrize("command", ["inspect", "lint", "call", "serve"])
def test_a_module_that_fails_to_import_is_a_clear_usage_error(capsys, modules, command: str) -> None:
    missing = modules("import a_package_nobody_installed\n")
    broken = modules("def oops(:\n    pass\n")
    raising = modules("raise RuntimeError('config file not found')\n")
    extra = ["add", "{}"] if command == "call" else []
    code, _, err = run(capsys, command, f"{missing}:app", *extra)
    assert_clear_error(code, err, "a_package_nobody_installed", f"{missing}.py:1")
    code, _, err = run(capsys, command, f"{broken}:app", *extra)
    assert_clear_error(code, err, "SyntaxError", f"{broken}.py:1")
    code, _, err = run(capsys, command, f"{raising}:app", *extra)
    assert_clear_error(code, err, "RuntimeError: config file not found", f"{raising}.py:1")


def test_an_app_factory_that_raises_is_a_clear_usage_error(capsys, modules) -> None:
    app = modules(APP)
    code, _, err = run(capsys, "inspect", f"{app}:broken_factory")
    assert_clear_error(code, err, "RuntimeError: the database is down", f"{app}.py:")
    code, _, err = run(capsys, "lint", f"{app}:broken_async_factory")
    assert_clear_error(code, err, "the database is down, asynchronously")


def test_wrong_targets_names_and_arguments(capsys, modules) -> None:
    app = modules(APP)
    two = modules("from agentmw import Agent\na = Agent('a', '1')\nb = Agent('b', '1')\n")
    code, _, err = run(capsys, "inspect", two)
    assert_clear_error(code, err, "2 Agent objects", f"{two}:ATTR")
    code, _, err = run(capsys, "inspect", "no_such_module_at_all:app")
    assert_clear_error(code, err, "no such module")
    code, _, err = run(capsys, "call", f"{app}:agent", "add", "{not json")
    assert_clear_error(code, err, "arguments:")
    code, _, err = run(capsys, "call", f"{app}:agent", "add", "[1, 2]")
    assert_clear_error(code, err, "a JSON object")
    code, _, err = run(capsys, "call", f"{app}:agent", "nothing_by_that_name", "{}")
    assert_clear_error(code, err, "nothing_by_that_name")
    code, _, err = run(capsys, "call", f"{app}:agent", "add", "{}", "--protocol", "a2a")
    assert_clear_error(code, err, "no skill 'add'")
    code, out, err = run(capsys, "call", f"{app}:agent", "add", '{"a": "x", "b": 1}')
    assert code == 1 and json.loads(out)["isError"] is True and "Traceback" not in err


def test_call_of_a_tool_that_asks_exits_3_saying_it_needs_an_answer(capsys, modules) -> None:
    app = modules(APP)
    code, out, err = run(capsys, "call", f"{app}:agent", "who", "{}")
    assert code == 3, (out, err)  # asked, not failed: nobody at a CLI can answer
    error = json.loads(out)["error"]
    assert "elicitation" in error["message"] and error["data"]["requiredCapabilities"] == {"elicitation": {}}
    assert "Traceback" not in err


def test_call_of_a_task_only_tool_follows_the_task(capsys, modules) -> None:
    app = modules(APP)
    code, out, err = run(capsys, "call", f"{app}:agent", "reindex", '{"n": 7}')
    assert code == 0, (out, err)
    task = json.loads(out)
    assert task["status"] == "completed" and task["result"]["content"][0]["text"] == "reindexed 7"
    code, out, err = run(capsys, "call", f"{app}:agent", "onboard", "{}")
    assert code == 3, (out, err)
    task = json.loads(out)
    assert task["status"] == "input_required" and "Name?" in json.dumps(task["inputRequests"])


def test_serve_refuses_several_workers_on_a_store_given_in_code_that_is_memory(capsys, modules) -> None:
    app = modules(
        "from agentmw import Agent\nfrom agentmw.state.memory import MemoryState\n"
        "agent = Agent('m', '1', store='memory://')\n"
    )
    code, _, err = run(capsys, "serve", f"{app}:agent", "--workers", "2")
    assert_clear_error(code, err, "memory://", "--store")
    code, _, err = run(capsys, "serve", f"{app}:agent", "--workers", "0")
    assert_clear_error(code, err, "--workers")
