"""`agentmw executions list|show` never let a client's text drive the operator's terminal: an AG-UI threadId (any 1-960
characters, part of the execution id), an answer or a step's value may hold escape sequences (clear screen, window
title, OSC 52 clipboard writes); found by a review."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from agentmw.cli import main
from agentmw.journal import JOURNAL_NS
from agentmw.state import SQLiteState

EVIL = "agui:0123456789abcdef:t\x1b[2J\x1b]0;pwned\x07"


def test_no_raw_control_characters_reach_the_terminal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    asyncio.run(_store(tmp_path / "esc.db"))
    url = f"sqlite:///{tmp_path / 'esc.db'}"
    for argv in (["executions", "list", "--store", url], ["executions", "show", EVIL, "--store", url]):
        assert main(argv) == 0
        out = capsys.readouterr()
        assert "\x1b" not in out.out + out.err and "\x07" not in out.out + out.err, repr(out.out)


async def _store(db: Path) -> None:
    store = SQLiteState(db)
    record = {
        "format": 1,
        "status": "parked",
        "run": {
            "kind": "skill",
            "name": "chat",
            "arguments": {},
            "caller": "a",
            "face": "agui",
            "supports": [],
        },
        "steps": [{"t": "once", "k": "s", "v": "\x1b[31mred\x1b[0m"}],
        "delivered": 0,
        "owner": "x",
        "updatedAt": 1.0,
    }
    await store.put(JOURNAL_NS, EVIL, record, expected_version=None)
    await store.close()


def test_json_output_escapes_them_and_stays_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    asyncio.run(_store(tmp_path / "esc.db"))
    url = f"sqlite:///{tmp_path / 'esc.db'}"
    assert main(["executions", "list", "--json", "--store", url]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out
    assert [e["id"] for e in json.loads(out)["executions"]] == [EVIL]  # whole, for a program to read


def test_a_bad_cursor_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    asyncio.run(_store(tmp_path / "esc.db"))
    assert (
        main(["executions", "list", "--cursor", "garbage", "--store", f"sqlite:///{tmp_path / 'esc.db'}"])
        == 2
    )
    err = capsys.readouterr().err
    assert "could not be used" not in err and err.count("\n") == 1, err
