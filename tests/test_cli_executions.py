"""``agentmw executions``: list, show, cancel, retry and resume against a real SQLite file and a real redis-server,
with executions made by real agents: running (a live holder), parked, dead (a dead letter), finished."""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from agentmw import Agent, Context
from agentmw.cli import main
from agentmw.errors import Permanent
from agentmw.journal import JOURNAL_NS, LEASE_NS, Journal, orphaned, resume
from agentmw.retries import RetryPolicy
from agentmw.runtime import invoke
from agentmw.settings import Limits
from agentmw.state import State, open_state
from tests.helpers.channels import Parking
from tests.state.conftest import redis_url  # noqa: F401  (a fixture: a real redis-server for the session)
from tests.waiting import eventually

ROOT = Path(__file__).resolve().parent.parent
LEASE = 0.3


@dataclass
class Fleet:
    """One store, the URL the CLI is given, an agent on it, and the executions it made."""

    url: str
    state: State
    agent: Agent
    hanging: list[asyncio.Task[Any]] = field(default_factory=list)


def make_agent(state: State) -> Agent:
    agent = Agent("ops-test", store=state, code_version="v7", limits=Limits(max_recovery_attempts=1))

    @agent.skill
    async def order(item: str, ctx: Context) -> str:
        """Charges (retried), then asks where to ship."""
        await ctx.once("charge", lambda: f"charged {item}", retry=RetryPolicy(attempts=2))
        answer = await ctx.ask("Where to?")
        return f"{item} to {answer.content}"

    @agent.skill
    async def quick(ctx: Context) -> str:
        """One step, then done."""
        return str(await ctx.once("stamp", lambda: "stamped"))

    @agent.skill
    async def broken(ctx: Context) -> str:
        """One step, then a permanent failure."""
        await ctx.once("try", lambda: 1)
        raise Permanent("the warehouse is closed")

    @agent.skill
    async def stuck(ctx: Context) -> str:
        """One step, then a wait that never ends (its replica dies in it)."""
        await ctx.once("begin", lambda: "begun")
        fleet_reached.set()
        await asyncio.Event().wait()
        return "never"

    return agent


fleet_reached = asyncio.Event()


async def start(agent: Agent, name: str, arguments: dict[str, Any], execution_id: str) -> Any:
    cap = agent.skills[name]
    ctx = Context(cap, Parking(), caller="alice", agent=agent, face="a2a")
    return await invoke(
        cap, arguments, ctx, journal=Journal.for_agent(agent, execution_id, lease_seconds=LEASE)
    )


async def hang(agent: Agent, execution_id: str, *, resume_it: bool = False) -> asyncio.Task[Any]:
    """An execution of ``stuck`` running on this replica (holding its lease), once it reached its wait."""
    global fleet_reached
    fleet_reached = asyncio.Event()
    if resume_it:
        task = asyncio.create_task(resume(agent, execution_id, lease_seconds=LEASE, wait=5))
    else:
        task = asyncio.create_task(start(agent, "stuck", {}, execution_id))
    await asyncio.wait_for(fleet_reached.wait(), 10)
    return task


async def die(task: asyncio.Task[Any]) -> None:
    """The replica running ``task`` dies: its lease is neither renewed nor released."""
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def populate(agent: Agent) -> list[asyncio.Task[Any]]:
    """e-parked (waiting on an answer), e-done (completed), e-failed, e-dead (a dead letter after one take-over),
    e-running (held by a live coroutine here)."""
    parked = await start(agent, "order", {"item": "desk"}, "e-parked")
    assert parked.status == "needs_input"
    assert (await start(agent, "quick", {}, "e-done")).status == "completed"
    assert (await start(agent, "broken", {}, "e-failed")).status == "failed"
    await die(await hang(agent, "e-dead"))
    await eventually(lambda: _orphaned(agent, "e-dead"), "e-dead's lease to expire")
    await die(await hang(agent, "e-dead", resume_it=True))  # take-over 1, dies again
    await eventually(lambda: _orphaned(agent, "e-dead"), "e-dead's lease to expire again")
    dead = await resume(agent, "e-dead", lease_seconds=LEASE, wait=5)  # past the limit of 1
    assert dead.status == "failed" and dead.code == "recovery_exhausted"
    return [await hang(agent, "e-running")]


async def _orphaned(agent: Agent, execution_id: str) -> bool:
    return execution_id in await orphaned(agent)


@pytest.fixture(params=["sqlite", "redis"])
async def fleet(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Fleet]:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'ops.db'}"
    else:
        url = f"{request.getfixturevalue('redis_url')}?prefix=ops{uuid.uuid4().hex[:10]}"
    state = open_state(url)
    agent = make_agent(state)
    made = Fleet(url, state, agent)
    made.hanging = await populate(agent)
    yield made
    for task in made.hanging:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    await state.close()


async def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """``agentmw ARGV`` in a thread of its own (it runs its own event loop), as a console script would."""
    code = await asyncio.to_thread(main, list(argv))
    out, err = capsys.readouterr()
    return code, out, err


async def test_list_shows_every_execution_with_its_status(
    fleet: Fleet, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = await cli(capsys, "executions", "list", "--store", fleet.url, "--json")
    assert code == 0, err
    found = {e["id"]: e for e in json.loads(out)["executions"]}
    assert {k: v["status"] for k, v in found.items()} == {
        "e-parked": "parked",
        "e-done": "completed",
        "e-failed": "failed",
        "e-dead": "dead",
        "e-running": "running",
    }
    assert found["e-dead"]["attempts"] == 1 and "given up after 1 recoveries" in found["e-dead"]["reason"]
    assert found["e-failed"]["reason"] and "warehouse is closed" in found["e-failed"]["reason"]
    assert all(e["codeVersion"] == "v7" and e["name"] for e in found.values())
    assert found["e-running"]["holder"] and found["e-parked"]["holder"] is None
    assert found["e-done"]["steps"] == 1

    code, out, _ = await cli(capsys, "executions", "list", "--store", fleet.url)
    assert code == 0
    header, *rows = out.splitlines()
    assert header.split()[:3] == ["ID", "STATUS", "FUNCTION"] and "TAKE-OVERS" in header
    assert len(rows) == 5 and any(r.startswith("e-dead") and " dead " in r for r in rows)


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        ("running", {"e-running"}),
        ("parked", {"e-parked"}),
        ("dead", {"e-dead"}),
        ("finished", {"e-done", "e-failed"}),
        ("failed", {"e-failed"}),
    ],
)
async def test_list_filters_by_status(
    fleet: Fleet, capsys: pytest.CaptureFixture[str], status: str, expected: set[str]
) -> None:
    code, out, _ = await cli(capsys, "executions", "list", "--store", fleet.url, "--status", status, "--json")
    assert code == 0
    assert {e["id"] for e in json.loads(out)["executions"]} == expected


async def test_list_pages_with_a_cursor(fleet: Fleet, capsys: pytest.CaptureFixture[str]) -> None:
    seen: list[str] = []
    cursor: str | None = None
    for _ in range(10):
        extra = ["--cursor", cursor] if cursor else []
        code, out, _ = await cli(
            capsys, "executions", "list", "--store", fleet.url, "--limit", "2", "--json", *extra
        )
        assert code == 0
        page = json.loads(out)
        assert len(page["executions"]) <= 2
        seen += [e["id"] for e in page["executions"]]
        cursor = page["next"]
        if cursor is None:
            break
    assert sorted(seen) == sorted(["e-parked", "e-done", "e-failed", "e-dead", "e-running"])


async def test_show_gives_the_steps_attempts_and_reason(
    fleet: Fleet, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = await cli(capsys, "executions", "show", "e-parked", "--store", fleet.url, "--json")
    assert code == 0
    shown = json.loads(out)
    assert shown["execution"]["status"] == "parked" and shown["run"]["name"] == "order"
    assert [(s["t"], s["k"]) for s in shown["steps"]] == [("once", "charge"), ("ask", "ask-1")]

    code, out, _ = await cli(capsys, "executions", "show", "e-parked", "--store", fleet.url)
    assert code == 0
    assert "outcome       " not in out and "execution e-parked" in out and "code version  v7" in out
    assert "once  charge" in out and "waiting for ask-1" in out

    code, out, _ = await cli(capsys, "executions", "show", "e-dead", "--store", fleet.url)
    assert code == 0
    assert "take-overs    1" in out and "given up after 1 recoveries" in out
    assert "reason        Execution 'e-dead' was given up" in out


async def test_retry_makes_a_dead_letter_run_again(fleet: Fleet, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = await cli(capsys, "executions", "retry", "e-dead", "--store", fleet.url)
    assert code == 0, err
    assert "back to running" in out
    stored = await fleet.state.get(JOURNAL_NS, "e-dead")
    assert stored is not None and stored.value["status"] == "running" and stored.value["attempts"] == 0
    assert await fleet.state.get_key(LEASE_NS, "e-dead") is None
    assert "e-dead" in await orphaned(fleet.agent)  # the next sweep takes it over
    fleet.hanging.append(await hang(fleet.agent, "e-dead", resume_it=True))  # and it runs again

    code, _, err = await cli(capsys, "executions", "retry", "e-parked", "--store", fleet.url)
    assert code == 1 and "is parked, not a dead letter" in err


async def test_resume_drops_a_stuck_holders_lease(fleet: Fleet, capsys: pytest.CaptureFixture[str]) -> None:
    assert "e-running" not in await orphaned(fleet.agent)  # its holder renews its lease
    code, out, err = await cli(capsys, "executions", "resume", "e-running", "--store", fleet.url, "--json")
    assert code == 0, err
    assert json.loads(out) == {
        "id": "e-running",
        "action": "resume",
        "before": "running",
        "status": "running",
    }
    assert "e-running" in await orphaned(fleet.agent)

    code, _, err = await cli(capsys, "executions", "resume", "e-parked", "--store", fleet.url)
    assert code == 1 and "waiting for an answer" in err
    code, _, err = await cli(capsys, "executions", "resume", "e-done", "--store", fleet.url)
    assert code == 1 and "already ended (completed)" in err


async def test_cancel_ends_an_execution_for_good(fleet: Fleet, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = await cli(capsys, "executions", "cancel", "e-parked", "--store", fleet.url)
    assert code == 0, err
    assert "(status canceled)" in out
    answered = await resume(fleet.agent, "e-parked", answers={"ask-1": "Lyon"})
    assert answered.status == "canceled"

    code, _, err = await cli(capsys, "executions", "cancel", "e-done", "--store", fleet.url)
    assert code == 1 and "already ended (completed)" in err


async def test_an_unknown_execution_is_named(fleet: Fleet, capsys: pytest.CaptureFixture[str]) -> None:
    for action in ("show", "cancel", "retry", "resume"):
        code, out, err = await cli(capsys, "executions", action, "nope", "--store", fleet.url)
        assert code == 2 and out == ""
        assert "no execution 'nope' in the store" in err and "Traceback" not in err


async def test_store_errors_are_one_clear_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AGENTMW_STORE", raising=False)
    cases = [
        ((), "give the store to read"),
        (("--store", "ftp://x"), "agentmw has no ftp:// store"),
        (("--store", "memory://"), "lives inside its server's process"),
        (("--store", f"sqlite:///{tmp_path / 'missing.db'}"), "there is no SQLite store at"),
        (("--store", "redis://:hunter2@127.0.0.1:1/0"), "could not be used"),
    ]
    for extra, message in cases:
        code, out, err = await cli(capsys, "executions", "list", *extra)
        assert code == (1 if "could not be used" in message else 2), err
        assert message in err and out == "" and "Traceback" not in err
        assert "hunter2" not in err
    assert not (tmp_path / "missing.db").exists()  # nothing was created


async def test_the_store_defaults_to_agentmw_store(
    fleet: Fleet, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENTMW_STORE", fleet.url)
    code, out, _ = await cli(capsys, "executions", "list", "--status", "dead", "--json")
    assert code == 0 and [e["id"] for e in json.loads(out)["executions"]] == ["e-dead"]


async def test_the_console_script_runs_it(fleet: Fleet) -> None:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "agentmw.cli",
        "executions",
        "show",
        "e-failed",
        "--store",
        fleet.url,
        "--json",
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 0, err.decode()
    shown = json.loads(out)
    assert shown["execution"]["status"] == "failed" and shown["outcome"]["status"] == "failed"
