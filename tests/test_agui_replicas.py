"""AG-UI across replicas: two apps, each with its own Agent and its own state instance on one shared store
(a SQLite file; Redis when ``redis-server`` is installed), served on loopback. A run on A is reconnected,
refused, cancelled and arbitrated through B; an interrupt asked on A is answered on B, or after a restart; a run
whose replica died is taken over. ``EFFECTS`` counts the side effects of the ``ctx.once`` steps, in all
replicas: none may run twice."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import subprocess
import threading
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentmw import Context
from agentmw.agui.settings import AguiSettings
from agentmw.journal import JOURNAL_NS
from agentmw.state import open_state
from tests import agui_app
from tests.conftest import serve
from tests.state.conftest import redis_url  # noqa: F401  (the session's redis-server fixture)
from tests.waiting import eventually, wait_until

GATES: dict[str, threading.Event] = {}
EFFECTS: collections.Counter[str] = collections.Counter()  # side effects done, by name, in every replica
LOOPS: dict[str, asyncio.AbstractEventLoop] = {}  # each replica's event loop, by replica name
LEASE = 1.5  # seconds: the journal lease of the take-over test (its replica dies; the other waits this long)


def effect(what: str, replica: str) -> str:
    EFFECTS[what] += 1
    return f"{what}@{replica}"


def build(store: str, name: str = "a", **settings: object) -> tuple[Any, Any]:
    agent, app = agui_app.build(store=store, **settings)

    @agent.skill
    async def gated(count: int, gate: str, ctx: Context) -> str:
        """Say ``count`` words, wait until the test opens the gate, then say five more."""
        for i in range(count):
            await ctx.say(f"{i} ")
        agui_app.log.append(f"gated:{gate}:waiting")
        while not GATES[gate].is_set():
            await asyncio.sleep(0.005)
        for i in range(5):
            await ctx.say(f"after{i} ")
        return "done"

    @agent.skill
    async def transfer(amount: int, ctx: Context) -> dict:
        """Debit once, ask where to, credit once; progress, text and state on the way."""
        await ctx.progress(1, 2, "debiting")
        debit = await ctx.once("debit", effect, "debit", name)
        ctx.state["debited"] = amount
        await ctx.say(f"debited {amount} ")
        answer = await ctx.ask(
            f"Transfer {amount} to whom?",
            {"type": "object", "properties": {"to": {"type": "string"}}, "required": ["to"]},
        )
        to = answer.content["to"]
        credit = await ctx.once("credit", effect, f"credit {to}", name)
        ctx.state["credited"] = to
        await ctx.say(f"credited {to} ")
        return {"debit": debit, "credit": credit}

    @agent.skill
    async def steps(label: str, ctx: Context) -> list:
        """Two one-time steps, wait at this replica's gate, a third step."""
        LOOPS[name] = asyncio.get_running_loop()
        await ctx.say("before ")
        done = [
            await ctx.once("one", effect, f"{label}:one", name),
            await ctx.once("two", effect, f"{label}:two", name),
        ]
        agui_app.log.append(f"steps:{label}:{name}:waiting")
        while not GATES[f"{label}:{name}"].is_set():
            await asyncio.sleep(0.005)
        done.append(await ctx.once("three", effect, f"{label}:three", name))
        await ctx.say("after ")
        return done

    return agent, app


@pytest.fixture(autouse=True)
def fresh_log() -> None:
    agui_app.log.clear()
    EFFECTS.clear()


@pytest.fixture(params=["sqlite", "redis"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'agui.db'}"
    url = request.getfixturevalue("redis_url")
    return f"{url}?prefix=agui{uuid.uuid4().hex[:8]}"


class Replicas:
    def __init__(self, a: str, b: str, agents: list[Any]) -> None:
        self.a = a
        self.b = b
        self.agents = agents


@contextlib.contextmanager
def replicas(store: str, **settings: object) -> Iterator[Replicas]:
    first, app_a = build(store, "a", **settings)
    second, app_b = build(store, "b", **settings)
    try:
        with serve(app_a) as a, serve(app_b) as b:
            yield Replicas(a, b, [first, second])
    finally:
        for agent in (first, second):
            close_state(agent)


def close_state(agent: Any) -> None:
    """Close the store the agent opened in its server's loop (now gone)."""
    if agent._state is not None:
        closer = threading.Thread(target=_close, args=(agent._state,))
        closer.start()
        closer.join(10)


def _close(state: Any) -> None:
    with contextlib.suppress(Exception):
        asyncio.run(state.close())


def run_body(thread: str, run: str, text: str | None = "hi", **props: object) -> dict:
    messages = [] if text is None else [{"id": f"u-{run}", "role": "user", "content": text}]
    state = props.pop("state", {})
    return {
        "threadId": thread,
        "runId": run,
        "messages": messages,
        "state": state,
        "tools": [],
        "context": [],
        "forwardedProps": props,
    }


def frames(text: str) -> list[dict]:
    return [json.loads(line[5:]) for line in text.splitlines() if line.startswith("data:")]


async def events(lines: AsyncIterator[str], until: Any = None) -> AsyncIterator[tuple[int | None, dict]]:
    """(sequence number or None, event) per SSE event of a stream."""
    seq: int | None = None
    async for line in lines:
        if line.startswith("id: "):
            seq = int(line[4:])
        elif line.startswith("data:"):
            yield seq, json.loads(line[5:])
            seq = None


def gate(name: str) -> threading.Event:
    GATES[name] = threading.Event()
    return GATES[name]


async def start_detached(
    http: httpx.AsyncClient,
    url: str,
    thread: str,
    run: str,
    count: int,
    name: str,
    headers: dict | None = None,
) -> None:
    """Start ``gated`` on a replica, detached; leave after the third event."""
    body = run_body(thread, run, None, detached=True, arguments={"count": count, "gate": name})
    async with http.stream("POST", f"{url}/agui/gated", json=body, headers=headers) as response:
        assert response.status_code == 200
        lines = events(response.aiter_lines())
        async for seq, _ in lines:
            if seq == 3:
                break  # then leave: the run is detached
    await eventually(lambda: f"gated:{name}:waiting" in agui_app.log, "the run to wait at its gate")


async def test_reconnect_on_the_other_replica_gets_the_rest_then_the_live_tail(store_url: str) -> None:
    opened = gate("inside")
    with replicas(store_url) as r:
        async with httpx.AsyncClient(timeout=20) as http:
            await start_detached(http, r.a, "t-in", "r-in", 10, "inside")
            got: list[tuple[int | None, dict]] = []
            async with http.stream("GET", f"{r.b}/agui/gated/runs/r-in/events", params={"after": 3}) as tail:
                assert tail.status_code == 200
                async for seq, event in events(tail.aiter_lines()):
                    got.append((seq, event))
                    if event.get("delta") == "9 ":
                        assert not opened.is_set()
                        opened.set()  # what follows is live, made after this replica started tailing
                    if event["type"] in ("RUN_FINISHED", "RUN_ERROR"):
                        break
            ids = [seq for seq, _ in got]
            assert ids == list(range(4, 4 + len(got))), ids  # exactly the rest: no gap, nothing twice
            text = "".join(e["delta"] for _, e in got if e["type"] == "TEXT_MESSAGE_CONTENT")
            assert text == "".join(f"{i} " for i in range(10)) + "".join(f"after{i} " for i in range(5))
            assert got[-1][1]["type"] == "RUN_FINISHED" and got[-1][1]["outcome"] == {"type": "success"}
            local = r.agents[0].agui_app.runs["r-in"]
            assert local.sequencer.seq == ids[-1]
            # Once it ended, a reconnect on B with Last-Event-ID gets exactly the last events.
            last = await http.get(
                f"{r.b}/agui/gated/runs/r-in/events", headers={"last-event-id": str(ids[-1] - 2)}
            )
            assert [e["type"] for e in frames(last.text)] == ["TEXT_MESSAGE_END", "RUN_FINISHED"]
            nothing = await http.get(f"{r.b}/agui/gated/runs/r-in/events", params={"after": ids[-1]})
            assert nothing.status_code == 200 and frames(nothing.text) == []


async def test_reconnect_beyond_the_kept_events_starts_with_snapshots(store_url: str) -> None:
    opened = gate("beyond")
    with replicas(
        store_url, agui=AguiSettings(buffer_events=8)
    ) as r:  # the log keeps at most 8 batches of 16 frames
        async with httpx.AsyncClient(timeout=20) as http:
            await start_detached(http, r.a, "t-be", "r-be", 400, "beyond")

            got: list[tuple[int | None, dict]] = []
            async with http.stream("GET", f"{r.b}/agui/gated/runs/r-be/events", params={"after": 3}) as tail:
                async for seq, event in events(tail.aiter_lines()):
                    got.append((seq, event))
                    if event.get("delta") == "399 ":
                        opened.set()
                    if event["type"] in ("RUN_FINISHED", "RUN_ERROR"):
                        break
            assert [e["type"] for _, e in got[:2]] == ["STATE_SNAPSHOT", "MESSAGES_SNAPSHOT"]
            assert got[0][0] is None and got[1][0] is None  # not events of the run: no sequence numbers
            ids = [seq for seq, _ in got[2:]]
            assert ids[0] > 4 and ids == list(range(ids[0], ids[0] + len(ids)))  # what the log holds, no gap
            assert len(ids) <= 8 * 16 + 5 + 3  # bounded by the log; then the live tail
            text = "".join(e["delta"] for _, e in got if e["type"] == "TEXT_MESSAGE_CONTENT")
            assert text.endswith("399 " + "".join(f"after{i} " for i in range(5)))
            assert got[-1][1]["type"] == "RUN_FINISHED"


async def test_a_duplicate_run_id_is_refused_on_every_replica_and_runs_once(store_url: str) -> None:
    with replicas(store_url) as r:
        async with httpx.AsyncClient(timeout=20) as http:
            async with http.stream(
                "POST", f"{r.a}/agui/slow", json=run_body("t-dup", "r-dup", "dup")
            ) as first:
                lines = events(
                    first.aiter_lines()
                )  # held: a dropped iterator would close the stream (and cancel)
                async for _, event in lines:
                    if event["type"] == "ACTIVITY_SNAPSHOT":
                        break
                same_thread = await http.post(f"{r.b}/agui/slow", json=run_body("t-dup", "r-dup", "dup"))
                other_thread = await http.post(f"{r.b}/agui/slow", json=run_body("t-dup2", "r-dup", "dup"))
                again_a = await http.post(f"{r.a}/agui/slow", json=run_body("t-dup3", "r-dup", "dup"))
                assert (same_thread.status_code, other_thread.status_code, again_a.status_code) == (
                    409,
                    409,
                    409,
                )
                cancel = await http.post(f"{r.b}/agui/slow/runs/r-dup/cancel")
                assert cancel.status_code == 200
            assert agui_app.log.count("slow:dup:started") == 1
            after_end = await http.post(f"{r.b}/agui/chat", json=run_body("t-dup4", "r-dup"))
            assert after_end.status_code == 409
            assert agui_app.log.count("slow:dup:started") == 1


async def test_another_callers_run_and_thread_are_not_found_on_the_other_replica(store_url: str) -> None:
    alice, bob = {"authorization": "Bearer alice"}, {"authorization": "Bearer bob"}
    gate("owner").set()
    with replicas(store_url) as r:
        async with httpx.AsyncClient(timeout=20) as http:
            await start_detached(http, r.a, "t-own", "r-own", 3, "owner", headers=alice)
            assert (await http.get(f"{r.b}/agui/gated/runs/r-own/events", headers=bob)).status_code == 404
            assert (await http.post(f"{r.b}/agui/gated/runs/r-own/cancel", headers=bob)).status_code == 404
            body = run_body("t-own", "r-own-bob", "hi", arguments={"count": 1, "gate": "owner"})
            assert (await http.post(f"{r.b}/agui/gated", json=body, headers=bob)).status_code == 404
            mine = await http.get(f"{r.b}/agui/gated/runs/r-own/events", headers=alice)
            assert mine.status_code == 200 and frames(mine.text)[-1]["type"] == "RUN_FINISHED"
            assert (await http.get(f"{r.b}/agui/gated/runs/nope/events", headers=alice)).status_code == 404


@pytest.mark.parametrize("detached", [False, True])
async def test_cancel_on_the_other_replica_stops_the_coroutine(store_url: str, detached: bool) -> None:
    with replicas(store_url) as r:
        async with httpx.AsyncClient(timeout=20) as http:
            body = run_body("t-can", "r-can", "far", detached=detached)
            finished: dict | None = None
            async with http.stream("POST", f"{r.a}/agui/slow", json=body) as stream:
                lines = events(stream.aiter_lines())
                async for _, event in lines:
                    if event["type"] == "ACTIVITY_SNAPSHOT":
                        break
                started = time.monotonic()
                cancel = await http.post(f"{r.b}/agui/slow/runs/r-can/cancel")
                elapsed = time.monotonic() - started
                assert cancel.status_code == 200 and cancel.json()["outcome"] == "cancelled", cancel.text
                assert "slow:far:cancelled" in agui_app.log  # its except/finally ran before the answer
                async for _, event in lines:
                    if event["type"] == "RUN_FINISHED":
                        finished = event
                        break
            assert finished is not None and finished["outcome"] == {"type": "cancelled"}
            # 100 ms plus the bus (SQLite polls every 50 ms), with room for a loaded 2-core machine.
            assert elapsed < 1.0, f"the cancel took {elapsed:.3f} s"
            assert (await http.post(f"{r.b}/agui/slow/runs/r-can/cancel")).status_code == 409
            assert (await http.post(f"{r.a}/agui/slow/runs/r-can/cancel")).status_code == 409


async def test_the_state_version_is_arbitrated_across_replicas(store_url: str) -> None:
    with replicas(store_url) as r:
        async with httpx.AsyncClient(timeout=20) as http:
            first = frames((await http.post(f"{r.a}/agui/planner", json=run_body("t-st", "s1"))).text)
            assert first[-1]["type"] == "RUN_FINISHED"
            state = {"cart": [{"sku": "MON-27", "price": 449.0}], "total": 449.0}
            stale = frames(
                (
                    await http.post(
                        f"{r.b}/agui/planner", json=run_body("t-st", "s2", state={"cart": []}, stateVersion=0)
                    )
                ).text
            )
            assert [e["type"] for e in stale] == ["RUN_STARTED", "STATE_SNAPSHOT", "RUN_ERROR"]
            assert stale[1]["snapshot"] == state and stale[-1]["code"] == "STATE_VERSION_CONFLICT"
            same = frames((await http.post(f"{r.b}/agui/chat", json=run_body("t-st2", "s3"))).text)
            assert same[-1]["type"] == "RUN_FINISHED"
            version = (await read_record(store_url, "t-st"))["version"]
            # Two replicas write the same version at once: exactly one wins, the other sees its state.
            racing = await asyncio.gather(
                *(
                    http.post(
                        f"{url}/agui/planner",
                        json=run_body("t-st", f"race-{name}", state={"who": name}, stateVersion=version),
                    )
                    for name, url in (("a", r.a), ("b", r.b))
                )
            )
            outcomes = [frames(response.text) for response in racing]
            won = [o for o in outcomes if o[-1]["type"] == "RUN_FINISHED"]
            lost = [o for o in outcomes if o[-1].get("code") == "STATE_VERSION_CONFLICT"]
            assert len(won) == 1 and len(lost) == 1, [o[-1] for o in outcomes]
            assert lost[0][1]["snapshot"]["who"] == won[0][1]["snapshot"]["who"]


async def read_record(store_url: str, thread: str) -> dict:
    state = open_state(store_url)
    try:
        found = await state.get("agui.threads", thread)
        assert found is not None
        return found.value
    finally:
        await state.close()


async def test_a_resume_on_the_other_replica_replays_there_and_arguments_resume_anywhere(
    store_url: str,
) -> None:
    with replicas(store_url) as r:
        async with httpx.AsyncClient(timeout=20) as http:
            asked = frames(
                (
                    await http.post(
                        f"{r.a}/agui/approval", json=run_body("t-ask", "q1", None, arguments={"item": "desk"})
                    )
                ).text
            )
            [interrupt] = asked[-1]["outcome"]["interrupts"]
            resume = {
                **run_body("t-ask", "q2", None),
                "resume": [{"interruptId": interrupt["id"], "status": "resolved", "payload": True}],
            }
            done = frames((await asyncio.wait_for(http.post(f"{r.b}/agui/approval", json=resume), 10)).text)
            assert done[-1]["type"] == "RUN_FINISHED" and done[-1]["outcome"] == {"type": "success"}, done[-1]
            assert "".join(e.get("delta", "") for e in done) == "desk: bought"
            # B replayed the function: the code before the question ran again there (it is not a journaled step)
            assert agui_app.log == ["approval:desk:asked", "approval:desk:asked", "approval:desk:yes"]
            again = frames(
                (
                    await http.post(
                        f"{r.b}/agui/approval",
                        json=run_body("t-ask", "q3", None, arguments={"item": "chair"}),
                    )
                ).text
            )
            assert again[-1]["type"] == "RUN_FINISHED" and again[-1]["outcome"]["type"] == "interrupt"
            # A resume whose journal is gone (it expired) is a clean error, at once, and closes the interrupt.
            record = await read_record(store_url, "t-ask")
            await drop(store_url, JOURNAL_NS, record["execution"]["id"])
            [chair] = again[-1]["outcome"]["interrupts"]
            lost = frames(
                (
                    await asyncio.wait_for(
                        http.post(
                            f"{r.a}/agui/approval",
                            json={
                                **run_body("t-ask", "q4", None),
                                "resume": [
                                    {"interruptId": chair["id"], "status": "resolved", "payload": True}
                                ],
                            },
                        ),
                        10,
                    )
                ).text
            )
            assert lost[-1]["type"] == "RUN_ERROR" and lost[-1]["code"] == "RESUME_LOST"
            assert "approval:chair:yes" not in agui_app.log
            fresh = frames(
                (
                    await http.post(
                        f"{r.a}/agui/approval", json=run_body("t-ask", "q5", None, arguments={"item": "lamp"})
                    )
                ).text
            )
            assert fresh[-1]["type"] == "RUN_FINISHED" and fresh[-1]["outcome"]["type"] == "interrupt"
            # Missing arguments hold no coroutine: asked on A, answered on B.
            missing = frames((await http.post(f"{r.a}/agui/chat", json=run_body("t-args", "m1", None))).text)
            [need] = missing[-1]["outcome"]["interrupts"]
            answer = {
                **run_body("t-args", "m2", None),
                "resume": [{"interruptId": need["id"], "status": "resolved", "payload": {"text": "there"}}],
            }
            done = frames((await http.post(f"{r.b}/agui/chat", json=answer)).text)
            assert done[-1]["type"] == "RUN_FINISHED"
            assert "".join(e.get("delta", "") for e in done) == "You said: there "


async def drop(store_url: str, ns: str, key: str) -> None:
    state = open_state(store_url)
    try:
        assert await state.delete(ns, key)
    finally:
        await state.close()


async def read_events(response: Any) -> list[tuple[int | None, dict]]:
    return [item async for item in events(response.aiter_lines())]


def check_resumed_transfer(got: list[tuple[int | None, dict]], replica: str) -> None:
    """The resume of ``transfer`` (asked on A, 5 debited) as a new run: numbered from 1 with no gap, and none of
    what the asking run delivered (its progress, text and state delta) sent again."""
    ids = [seq for seq, _ in got]
    assert ids == list(range(1, len(got) + 1)), ids
    kinds = [event["type"] for _, event in got]
    assert kinds[:2] == ["RUN_STARTED", "STATE_SNAPSHOT"] and got[1][1]["snapshot"] == {"debited": 5}
    assert "ACTIVITY_SNAPSHOT" not in kinds  # the progress before the question was delivered already
    text = "".join(e.get("delta", "") for _, e in got if e["type"] == "TEXT_MESSAGE_CONTENT")
    assert text == "credited bob "
    assert [e["delta"] for _, e in got if e["type"] == "STATE_DELTA"] == [
        [{"op": "add", "path": "/credited", "value": "bob"}]
    ]
    finished = got[-1][1]
    assert finished["type"] == "RUN_FINISHED" and finished["outcome"] == {"type": "success"}, finished
    assert finished["result"] == {"debit": "debit@a", "credit": f"credit bob@{replica}"}


def transfer_resume(thread: str, run: str, interrupt: dict, state: dict | None = None) -> dict:
    return {
        **run_body(thread, run, None, state=state or {"debited": 5}),
        "resume": [{"interruptId": interrupt["id"], "status": "resolved", "payload": {"to": "bob"}}],
    }


async def test_an_interrupt_asked_on_a_is_resumed_on_b_and_no_step_runs_twice(store_url: str) -> None:
    with replicas(store_url) as r:
        async with httpx.AsyncClient(timeout=20) as http:
            asked = frames(
                (
                    await http.post(
                        f"{r.a}/agui/transfer", json=run_body("t-tr", "tr1", None, arguments={"amount": 5})
                    )
                ).text
            )
            assert asked[-1]["type"] == "RUN_FINISHED" and asked[-1]["outcome"]["type"] == "interrupt", asked[
                -1
            ]
            assert "ACTIVITY_SNAPSHOT" in [e["type"] for e in asked]
            [interrupt] = asked[-1]["outcome"]["interrupts"]
            assert EFFECTS == {"debit": 1}
            record = await read_record(store_url, "t-tr")
            assert record["execution"]["id"].startswith("agui:") and record["execution"]["startState"] == {}
            async with http.stream(
                "POST", f"{r.b}/agui/transfer", json=transfer_resume("t-tr", "tr2", interrupt)
            ) as resumed:
                assert resumed.status_code == 200
                got = await read_events(resumed)
            check_resumed_transfer(got, "b")
            assert EFFECTS == {"debit": 1, "credit bob": 1}  # the debit was not done again on B
            record = await read_record(store_url, "t-tr")
            assert record["state"] == {"debited": 5, "credited": "bob"} and record["running"] is None
            assert record["interrupts"] == {} and "startState" not in record["execution"]
            # Any replica reconnects to the resumed run; A, whose parked coroutine is now stale, runs the next
            # turn (its stale coroutine is cancelled, and does nothing more).
            again = await http.get(f"{r.a}/agui/transfer/runs/tr2/events", params={"after": 0})
            assert [e["type"] for e in frames(again.text)] == [e["type"] for _, e in got]
            following = frames(
                (
                    await http.post(
                        f"{r.a}/agui/transfer",
                        json=run_body(
                            "t-tr",
                            "tr3",
                            None,
                            state={"debited": 5, "credited": "bob"},
                            arguments={"amount": 1},
                        ),
                    )
                ).text
            )
            assert following[-1]["type"] == "RUN_FINISHED" and following[-1]["outcome"]["type"] == "interrupt"
            assert EFFECTS == {"debit": 2, "credit bob": 1}
            # A cancelled resume ends the execution for good, wherever it was parked.
            [second] = following[-1]["outcome"]["interrupts"]
            cancel = {
                **run_body("t-tr", "tr4", None, state={"debited": 1, "credited": "bob"}),
                "resume": [{"interruptId": second["id"], "status": "cancelled"}],
            }
            ended = frames((await http.post(f"{r.b}/agui/transfer", json=cancel)).text)
            assert ended[-1]["type"] == "RUN_FINISHED" and ended[-1]["outcome"] == {"type": "cancelled"}
            journal = await read_journal(store_url, (await read_record(store_url, "t-tr"))["execution"]["id"])
            assert journal["status"] == "canceled"
            assert EFFECTS == {"debit": 2, "credit bob": 1}


async def read_journal(store_url: str, execution_id: str) -> dict:
    state = open_state(store_url)
    try:
        found = await state.get(JOURNAL_NS, execution_id)
        assert found is not None
        return found.value
    finally:
        await state.close()


async def test_an_interrupt_resumes_after_a_restart(store_url: str) -> None:
    """A fresh Agent and app on the same store is the restarted process: the parked coroutine is gone."""
    before, app = build(store_url, "a")
    try:
        with serve(app) as url:
            async with httpx.AsyncClient(timeout=20) as http:
                asked = frames(
                    (
                        await http.post(
                            f"{url}/agui/transfer",
                            json=run_body("t-re", "re1", None, arguments={"amount": 5}),
                        )
                    ).text
                )
    finally:
        close_state(before)
    [interrupt] = asked[-1]["outcome"]["interrupts"]
    after, app = build(store_url, "b")
    try:
        with serve(app) as url:
            async with httpx.AsyncClient(timeout=20) as http:
                async with http.stream(
                    "POST", f"{url}/agui/transfer", json=transfer_resume("t-re", "re2", interrupt)
                ) as resumed:
                    got = await read_events(resumed)
                check_resumed_transfer(got, "b")
                assert EFFECTS == {"debit": 1, "credit bob": 1}
                # the same answer again: the interrupt is closed (nothing runs twice)
                late = frames(
                    (
                        await http.post(
                            f"{url}/agui/transfer",
                            json=transfer_resume("t-re", "re3", interrupt, {"debited": 5, "credited": "bob"}),
                        )
                    ).text
                )
                assert late[-1]["type"] == "RUN_ERROR" and late[-1]["code"] == "INVALID_RESUME"
                assert EFFECTS == {"debit": 1, "credit bob": 1}
    finally:
        close_state(after)


async def logged_frames(store_url: str, run_id: str) -> int:
    state = open_state(store_url)
    try:
        return sum(
            len(entry.get("frames") or []) for _, entry in await state.read("agui.events", run_id, 0, 1000)
        )
    finally:
        await state.close()


async def frames_at_least(store_url: str, run_id: str, count: int) -> bool:
    return await logged_frames(store_url, run_id) >= count


async def test_a_run_whose_replica_died_is_taken_over(store_url: str) -> None:
    gate("died:b").set()
    gate("died:a")  # A never passes its gate: it dies there
    frozen = threading.Event()
    with replicas(store_url) as r:
        a, b = (agent.agui_app.lifecycle for agent in r.agents)
        a.lease_seconds = b.lease_seconds = LEASE
        b.sweep_seconds = 0.1
        async with httpx.AsyncClient(timeout=20) as http:
            body = run_body("t-die", "r-die", None, detached=True, arguments={"label": "died"})
            async with http.stream("POST", f"{r.a}/agui/steps", json=body) as response:
                async for _, event in events(response.aiter_lines()):
                    if event["type"] == "TEXT_MESSAGE_CONTENT":
                        break  # then leave: the run is detached
            await eventually(lambda: "steps:died:a:waiting" in agui_app.log, "the run to wait at A's gate")
            await eventually(  # RUN_STARTED, STATE_SNAPSHOT, the text's start and content
                lambda: frames_at_least(store_url, "r-die", 4), "A to log the run's first events", timeout=10
            )
            LOOPS["a"].call_soon_threadsafe(
                frozen.wait
            )  # A stops dead: it renews and writes nothing any more
            try:
                started = time.monotonic()

                async def taken_over() -> bool:
                    if (await read_record(store_url, "t-die"))["running"] is None:
                        return True
                    assert (await http.get(f"{r.b}/agui/steps/capabilities")).status_code == 200  # B sweeps
                    return False

                await eventually(
                    taken_over, "the run of the dead replica to be taken over", timeout=20, interval=0.1
                )
                assert time.monotonic() - started >= LEASE / 3  # B waited for A's lease to expire
                reconnect = await http.get(f"{r.b}/agui/steps/runs/r-die/events", params={"after": 0})
                got = [
                    (int(line[4:]), None) for line in reconnect.text.splitlines() if line.startswith("id: ")
                ]
                run = frames(reconnect.text)
                assert [seq for seq, _ in got] == list(
                    range(1, len(run) + 1)
                )  # one numbering, no gap, nothing twice
                kinds = [e["type"] for e in run]
                assert kinds[0] == "RUN_STARTED" and kinds.count("TEXT_MESSAGE_START") == 1
                assert kinds.count("TEXT_MESSAGE_END") == 1 and kinds[-1] == "RUN_FINISHED"
                assert (
                    "".join(e.get("delta", "") for e in run if e["type"] == "TEXT_MESSAGE_CONTENT")
                    == "before after "
                )
                assert run[-1]["outcome"] == {"type": "success"}
                assert run[-1]["result"] == {"result": ["died:one@a", "died:two@a", "died:three@b"]}
                assert EFFECTS == {"died:one": 1, "died:two": 1, "died:three": 1}  # no step done twice
                assert (
                    await read_journal(store_url, (await read_record(store_url, "t-die"))["execution"]["id"])
                )["status"] == "completed"
                # the thread is not stuck in progress: B runs its next turn
                gate("next:b").set()
                following = frames(
                    (
                        await http.post(
                            f"{r.b}/agui/steps",
                            json=run_body("t-die", "r-die2", None, arguments={"label": "next"}),
                        )
                    ).text
                )
                assert following[-1]["type"] == "RUN_FINISHED" and following[-1]["outcome"] == {
                    "type": "success"
                }
            finally:
                frozen.set()


# --- the official client -----------------------------------------------------------------------------

HARNESS = Path(__file__).parent / "agui"
RECONNECT = """
import { runHttpRequest, transformHttpEventStream, verifyEvents } from "@ag-ui/client";
const warnings = [];
console.warn = (...args) => { warnings.push(args.map(String).join(" ")); };
const events = [];
const [url, after] = [process.argv[1], process.argv[2]];
transformHttpEventStream(runHttpRequest(() => fetch(`${url}?after=${after}`, {
  method: "GET", headers: { accept: "text/event-stream" } })))
  .pipe(verifyEvents(false))
  .subscribe({
    next: (event) => events.push(event),
    error: (error) => { process.stdout.write(JSON.stringify({ error: String(error), events, warnings }) + "\\n"); },
    complete: () => { process.stdout.write(JSON.stringify({ events, warnings }) + "\\n"); },
  });
"""


def test_the_official_client_starts_on_one_replica_and_replays_through_the_other(tmp_path: Path) -> None:
    from tests.test_agui_client import drive, harness_node

    node = harness_node()
    opened = gate("official")
    store = f"sqlite:///{tmp_path / 'agui.db'}"
    with replicas(store) as r:
        [step] = drive(
            r.a,
            "gated",
            [
                {
                    "runId": "r-off",
                    "abortAfter": "TEXT_MESSAGE_CONTENT",
                    "forwardedProps": {"detached": True, "arguments": {"count": 3, "gate": "official"}},
                }
            ],
            "t-off",
        )
        kinds = [e["type"] for e in step["events"]]
        # It aborted mid-run (the client reports that as its own RUN_ERROR "abort"); the detached run goes on.
        assert "TEXT_MESSAGE_CONTENT" in kinds and "RUN_FINISHED" not in kinds
        assert step["events"][-1]["type"] == "RUN_ERROR" and step["events"][-1]["code"] == "abort"
        wait_until(lambda: "gated:official:waiting" in agui_app.log, "the run to wait at its gate")
        opened.set()
        done = subprocess.run(
            [node, "--input-type=module", "-e", RECONNECT, f"{r.b}/agui/gated/runs/r-off/events", "0"],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=HARNESS,
            check=False,
        )
    assert done.returncode == 0, done.stderr
    output = json.loads(done.stdout.strip().splitlines()[-1])
    assert "error" not in output and output["warnings"] == [], output
    kinds = [e["type"] for e in output["events"]]
    assert kinds[0] == "RUN_STARTED" and kinds[-1] == "RUN_FINISHED"
    text = "".join(e["delta"] for e in output["events"] if e["type"] == "TEXT_MESSAGE_CONTENT")
    assert text == "0 1 2 " + "".join(f"after{i} " for i in range(5))
