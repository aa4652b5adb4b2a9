"""AG-UI take-overs are safe, and reach their followers by themselves (docs/durability.md, docs/agui.md).

- An execution that parks while the orphan sweep reads leases (the reads slowed, so it happens every time) is not
  taken for an orphan: its interrupt is still answered, rather than "The AG-UI run of this execution ended".
- A client following, on replica B, a run of replica A that dies gets the rest of the run from B's take-over
  with no other AG-UI request reaching B (the follow timer sweeps; keep-alives alone would wait forever).
Two apps on a shared SQLite file (Redis when installed) on loopback; one in-process app for the race.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import httpx
import pytest

from agentmw import Context, Limits
from agentmw.cli import main
from agentmw.journal import RetryRefused, retry
from agentmw.state import Json, MemoryState, open_state
from tests import agui_app
from tests.state.conftest import redis_url  # noqa: F401  (the session's redis-server fixture)
from tests.test_agui_replicas import (
    EFFECTS,
    LEASE,
    LOOPS,
    events,
    frames,
    frames_at_least,
    gate,
    read_journal,
    read_record,
    replicas,
    run_body,
    store_url,  # noqa: F401  (the fixture: a SQLite file, or a real redis-server)
)
from tests.test_recovery import SlowLeases
from tests.waiting import eventually


def racing_app(state: SlowLeases, opened: asyncio.Event) -> tuple[Any, Any]:
    agent, app = agui_app.build(store=state)

    @agent.skill
    async def parcel(item: str, ctx: Context) -> str:
        """A step, a slow step, then a question."""
        await ctx.once("weigh", EFFECTS.update, [f"weigh {item}"])
        await ctx.once("wrap", _after, opened, f"wrap {item}")
        answer = await ctx.ask("Where to?", {"type": "object", "properties": {"to": {"type": "string"}}})
        await ctx.once("send", EFFECTS.update, [f"send {answer.content['to']}"])
        return f"{item} to {answer.content['to']}"

    return agent, app


async def _after(opened: asyncio.Event, what: str) -> None:
    await opened.wait()
    EFFECTS.update([what])


async def _journal(state: MemoryState, agent: Any) -> tuple[str, Json, int] | None:
    record = await state.get("agui.threads", "t-race")
    execution = (record.value.get("execution") or {}) if record is not None else {}
    if not execution.get("id"):
        return None
    found = await state.get("journal", execution["id"])
    return None if found is None else (execution["id"], found.value, found.version)


async def test_a_run_that_parks_while_the_sweep_reads_leases_keeps_its_interrupt() -> None:
    EFFECTS.clear()
    state = SlowLeases()
    opened = asyncio.Event()
    agent, app = racing_app(state, opened)
    runs = agent.agui_app.lifecycle
    runs.sweep_seconds = 0.0  # every request sweeps (in the background)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1", timeout=20) as http:
        body = run_body("t-race", "run-1", None, arguments={"item": "lamp"})
        asking = asyncio.create_task(http.post("/agui/parcel", json=body))
        running = await eventually(lambda: _journal(state, agent), "the first step to be recorded")
        execution_id, value, seen = running
        assert value["status"] == "running" and value["stepCount"] == 1

        state.hold.clear()  # the next sweep's scan sees it running; its lease read waits
        assert (await http.get("/agui/parcel/capabilities")).status_code == 200  # this request sweeps
        await asyncio.wait_for(state.held.wait(), 5)
        opened.set()  # the step ends; the run asks, and parks (its lease given up) before the lease read
        asked = frames((await asyncio.wait_for(asking, 10)).text)
        assert asked[-1]["type"] == "RUN_FINISHED" and asked[-1]["outcome"]["type"] == "interrupt", asked[-1]
        parked = await _journal(state, agent)
        assert parked is not None and parked[1]["status"] == "parked" and parked[2] > seen
        runs.sweep_seconds = 3600.0
        state.hold.set()  # the sweep goes on: it found the execution without a lease, at the version it saw
        await eventually(
            lambda: not any(t.get_name() == "agui-sweep" for t in runs.background.tasks), "the sweep"
        )
        after = await _journal(state, agent)
        assert after is not None and after[1]["status"] == "parked" and after[2] == parked[2]  # left alone

        [interrupt] = asked[-1]["outcome"]["interrupts"]
        resume = {
            **run_body("t-race", "run-2", None),
            "resume": [{"interruptId": interrupt["id"], "status": "resolved", "payload": {"to": "Oslo"}}],
        }
        done = frames((await http.post("/agui/parcel", json=resume)).text)
        assert done[-1]["type"] == "RUN_FINISHED" and done[-1]["outcome"] == {"type": "success"}, done[-1]
        assert EFFECTS == {"weigh lamp": 1, "wrap lamp": 1, "send Oslo": 1}
        final = await state.get("journal", execution_id)
        assert final is not None and final.value["status"] == "completed" and final.value["attempts"] == 0


@pytest.mark.parametrize("limit", [100, 0], ids=["taken-over", "dead-letter"])
async def test_a_follower_of_a_dead_replicas_run_gets_its_end_without_other_traffic(
    store_url: str,  # noqa: F811
    limit: int,
) -> None:
    """With ``Limits(max_recovery_attempts=0)`` the take-over gives the execution up at once: the follower gets
    ``RUN_ERROR`` (``RECOVERY_EXHAUSTED``) instead, and nothing runs again."""
    EFFECTS.clear()
    agui_app.log.clear()
    gate("lone:b").set()
    gate("lone:a")  # A never passes its gate: it dies there
    frozen = threading.Event()
    with replicas(store_url, limits=Limits(max_recovery_attempts=limit)) as r:
        a, b = (agent.agui_app.lifecycle for agent in r.agents)
        a.lease_seconds = b.lease_seconds = LEASE
        b.sweep_seconds = 0.2
        async with httpx.AsyncClient(timeout=30) as http:
            body = run_body("t-lone", "r-lone", None, detached=True, arguments={"label": "lone"})
            async with http.stream("POST", f"{r.a}/agui/steps", json=body) as response:
                async for _, event in events(response.aiter_lines()):
                    if event["type"] == "TEXT_MESSAGE_CONTENT":
                        break  # then leave: the run is detached
            await eventually(lambda: "steps:lone:a:waiting" in agui_app.log, "the run to wait at A's gate")
            await eventually(
                lambda: frames_at_least(store_url, "r-lone", 4), "A to log the run's first events", timeout=10
            )
            got: list[dict] = []
            async with http.stream(
                "GET", f"{r.b}/agui/steps/runs/r-lone/events", params={"after": 0}
            ) as tail:
                assert tail.status_code == 200
                lines = events(tail.aiter_lines())
                async for _, event in lines:  # B follows A's run from the shared log
                    got.append(event)
                    if event["type"] == "TEXT_MESSAGE_CONTENT":
                        break
                LOOPS["a"].call_soon_threadsafe(frozen.wait)  # A stops dead: no renewal, no write, ever
                started = time.monotonic()
                try:
                    # the only request B gets is this follow: its timer sweeps, finds A's lease expired, takes
                    # the run over, and the events reach this stream from the log
                    async for _, event in lines:
                        got.append(event)
                        if event["type"] in ("RUN_FINISHED", "RUN_ERROR"):
                            break
                finally:
                    frozen.set()
            assert time.monotonic() - started >= LEASE / 3
            kinds = [e["type"] for e in got]
            record = await read_record(store_url, "t-lone")
            journal = await read_journal(store_url, record["execution"]["id"])
            assert kinds[0] == "RUN_STARTED", kinds
            if limit:
                assert kinds[-1] == "RUN_FINISHED", kinds
                assert got[-1]["result"] == {"result": ["lone:one@a", "lone:two@a", "lone:three@b"]}
                assert EFFECTS == {"lone:one": 1, "lone:two": 1, "lone:three": 1}
                assert journal["status"] == "completed" and journal["attempts"] == 1
            else:
                assert kinds[-1] == "RUN_ERROR" and got[-1]["code"] == "RECOVERY_EXHAUSTED", got[-1]
                assert "given up after 0 recoveries" in got[-1]["message"]
                assert EFFECTS == {"lone:one": 1, "lone:two": 1}  # nothing ran again
                assert journal["status"] == "dead" and "given up" in journal["reason"]
                await _retry_is_refused(store_url, record["execution"]["id"])


async def _retry_is_refused(url: str, execution_id: str) -> None:
    """An operator's retry of an AG-UI dead letter is refused, saying why, rather than revived and then ended by
    the next sweep (no run carries it): the journal stays dead, through the API and the command line."""
    state = open_state(url)
    try:
        with pytest.raises(RetryRefused, match="AG-UI run's") as refused:
            await retry(state, execution_id)
        assert "start a new run" in str(refused.value)
    finally:
        await state.close()
    code = await asyncio.to_thread(main, ["executions", "retry", execution_id, "--store", url])
    assert code == 1
    journal = await read_journal(url, execution_id)
    assert journal["status"] == "dead" and not journal.get("retried"), journal


async def test_a_replica_that_closes_hands_its_runs_over_at_once(store_url: str) -> None:  # noqa: F811
    """``Runs.close()`` on A (a replica shutting down) while its detached run waits mid-execution: the run is not
    ended, its lease is given up, and B's follow timer takes it over long before the lease would have expired;
    the follower on B gets the rest of the same run, each step done once."""
    EFFECTS.clear()
    agui_app.log.clear()
    gate("shut:b").set()
    gate("shut:a")  # A never passes its gate: it is closed while waiting there
    with replicas(store_url) as r:
        a, b = (agent.agui_app.lifecycle for agent in r.agents)
        a.lease_seconds = b.lease_seconds = 600.0  # a take-over can only come from A giving the lease up
        b.sweep_seconds = 0.2
        async with httpx.AsyncClient(timeout=60) as http:
            body = run_body("t-shut", "r-shut", None, detached=True, arguments={"label": "shut"})
            async with http.stream("POST", f"{r.a}/agui/steps", json=body) as response:
                async for _, event in events(response.aiter_lines()):
                    if event["type"] == "TEXT_MESSAGE_CONTENT":
                        break  # then leave: the run is detached
            await eventually(lambda: "steps:shut:a:waiting" in agui_app.log, "the run to wait at A's gate")
            await eventually(
                lambda: frames_at_least(store_url, "r-shut", 4), "A to log the run's first events", timeout=10
            )
            got: list[dict] = []
            async with http.stream(
                "GET", f"{r.b}/agui/steps/runs/r-shut/events", params={"after": 0}
            ) as tail:
                assert tail.status_code == 200
                lines = events(tail.aiter_lines())
                async for _, event in lines:
                    got.append(event)
                    if event["type"] == "TEXT_MESSAGE_CONTENT":
                        break
                closing = asyncio.run_coroutine_threadsafe(a.close(), LOOPS["a"])
                await asyncio.wait_for(asyncio.wrap_future(closing), 30)
                async for _, event in lines:
                    got.append(event)
                    if event["type"] in ("RUN_FINISHED", "RUN_ERROR"):
                        break
        kinds = [e["type"] for e in got]
        assert kinds[0] == "RUN_STARTED" and kinds[-1] == "RUN_FINISHED", kinds
        assert "RUN_FINISHED" not in kinds[:-1] and "RUN_ERROR" not in kinds, kinds
        assert got[-1]["result"] == {"result": ["shut:one@a", "shut:two@a", "shut:three@b"]}
        assert EFFECTS == {"shut:one": 1, "shut:two": 1, "shut:three": 1}
        record = await read_record(store_url, "t-shut")
        journal = await read_journal(store_url, record["execution"]["id"])
        assert journal["status"] == "completed" and journal["attempts"] == 1


class RefusingEnds(MemoryState):
    """A store that refuses a run's last log entry (its end) while ``refuse`` is set: a store fault at the end."""

    def __init__(self) -> None:
        super().__init__()
        self.refuse = False
        self.refused = 0

    async def append(self, ns: str, log: str, event: Any) -> int:
        if ns == "agui.events" and self.refuse and isinstance(event, dict) and event.get("end"):
            self.refused += 1
            raise ConnectionError("the store is down")
        return await super().append(ns, log, event)


async def test_run_finished_goes_out_once_the_runs_end_is_logged() -> None:
    """The acknowledgement (RUN_FINISHED) of a run whose end the store refuses for a while waits until the end
    is logged (retried), so a reconnect on any replica reads the same end instead of waiting forever."""
    state = RefusingEnds()
    agent, app = agui_app.build(store=state)

    @agent.skill
    async def quick(ctx: Context) -> str:
        """One answer."""
        return "done"

    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1", timeout=20) as http:
        state.refuse = True
        sending = asyncio.create_task(http.post("/agui/quick", json=run_body("t-end", "r-end", None)))
        await eventually(lambda: state.refused >= 2, "the end to be refused, then tried again")
        assert not sending.done()  # no acknowledgement while the end is not logged
        state.refuse = False
        sent = frames((await asyncio.wait_for(sending, 10)).text)
        assert sent[-1]["type"] == "RUN_FINISHED", sent[-1]
        logged = await state.read("agui.events", "r-end", 0)
        assert logged and logged[-1][1].get("end") is True
        again = frames((await http.get("/agui/quick/runs/r-end/events", params={"after": 0})).text)
        assert again[-1]["type"] == "RUN_FINISHED" and again[-1]["runId"] == "r-end", again[-1]


async def test_a_follower_of_a_run_whose_end_was_never_logged_gets_a_retryable_end(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The store refuses a run's end throughout: the live client still gets its end (after a bounded wait), and a
    reconnect on another replica, which the log can never tell the end, gets a retryable RUN_ERROR in bounded
    time instead of pings forever."""
    import agentmw.agui.runs as runs_module

    monkeypatch.setattr(runs_module, "FINAL_ACK_WAIT_SECONDS", 0.2)
    monkeypatch.setattr(runs_module, "FINAL_LOG_SECONDS", 0.3)
    monkeypatch.setattr(runs_module, "TAIL_WAIT", 0.2)
    state = RefusingEnds()
    built = [agui_app.build(store=state) for _ in range(2)]
    for agent, _ in built:

        @agent.skill
        async def quick(ctx: Context) -> str:
            """One answer."""
            return "done"

    (_, app_a), (_, app_b) = built
    state.refuse = True
    async with (
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app_a), base_url="http://127.0.0.1", timeout=20
        ) as a,
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app_b), base_url="http://127.0.0.1", timeout=20
        ) as b,
    ):
        sent = frames((await a.post("/agui/quick", json=run_body("t-never", "r-never", None))).text)
        assert sent[-1]["type"] == "RUN_FINISHED", sent[-1]
        await eventually(lambda: state.refused >= 2, "the end to be refused, and tried again")
        got = frames((await b.get("/agui/quick/runs/r-never/events", params={"after": 0})).text)
    assert got[-1]["type"] == "RUN_ERROR" and got[-1]["code"] == "RETRYABLE", got[-1]
    assert [e["type"] for e in got].count("RUN_STARTED") == 1
