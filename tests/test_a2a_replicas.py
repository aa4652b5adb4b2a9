"""A2A across replicas: several apps from ``tests/a2a_app.py``, each with its own Agent and its own state instance
on one shared backend (a SQLite file; a real ``redis-server`` when installed), in one process.

Each replica's state is its own connection, so what one replica writes reaches another only through the backend
(SQLite: another connection's commit, noticed by polling ``data_version``; Redis: the server), as it would across
processes. What crosses: records (GetTask, ListTasks), event logs (SubscribeToTask on a replica that does not run
the task), the bus (CancelTask), leases (one push sender per task, taken over when its holder stops).
"""

from __future__ import annotations

import asyncio
import json
import re
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from agentmw import Agent, Context
from agentmw.a2a import registry as registry_module
from agentmw.journal import JOURNAL_NS
from agentmw.lifecycle import RESTART_REASON
from agentmw.state import MemoryState, State, open_state
from tests import a2a_app
from tests.conftest import serve
from tests.state.conftest import redis_url  # noqa: F401  (a fixture: a real redis-server for the session)
from tests.waiting import eventually, stays

V1 = {"a2a-version": "1.0"}
TICK = 0.03  # seconds between two steps of the `ticker` skill


@pytest.fixture(params=["sqlite", "redis"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The URL of the shared backend: a SQLite file, or a prefix of its own on a real redis-server."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/shared.db"
    return f"{request.getfixturevalue('redis_url')}?prefix=a2a{uuid.uuid4().hex[:10]}"


Replica = tuple[Agent, Starlette]
HOLDS: dict[
    str, tuple[int, asyncio.Event]
] = {}  # a ticker's label -> the step after which it waits for the event


async def forget_journals(state: State) -> None:
    """Every journal in ``state`` is gone (expired, or wiped by an operator): a parked coroutine has nothing
    left to resume from. Agent(store=...) keeps tasks and journals in one store, so this is how a test meets a
    task whose execution cannot come back."""
    while True:
        page = await state.scan(JOURNAL_NS, limit=100)
        if not page.items:
            return
        for item in page.items:
            await state.delete(JOURNAL_NS, item.key)


@pytest.fixture
async def replicas(backend: str) -> AsyncIterator[Callable[..., list[Replica]]]:
    """``replicas(n, **a2a_settings)``: n replicas, each its own Agent and its own state instance on
    ``backend``, where its tasks and journals live, so a replica can resume another's task."""
    made: list[Agent] = []

    def make(n: int = 3, **settings: Any) -> list[Replica]:
        out = []
        for index in range(n):
            agent, app = a2a_app.build(open_state(backend))
            for name, value in settings.items():
                setattr(agent.a2a, name, value)
            add_durable_skills(agent, hang=index == 0)

            @agent.skill
            async def ticker(count: int, label: str, ctx: Context) -> str:
                """Report each step, a little apart.

                Summary:
                    Steps, in order.
                """
                a2a_app.log.append(f"{label}:started")
                hold = HOLDS.get(label)
                try:
                    for step in range(1, count + 1):
                        await asyncio.sleep(TICK)
                        await ctx.progress(step, count, "step")
                        if hold is not None and step == hold[0]:
                            await hold[1].wait()
                except asyncio.CancelledError:
                    a2a_app.log.append(f"{label}:cancelled")
                    raise
                return f"{label}: {count} steps"

            made.append(agent)
            out.append((agent, app))
        return out

    yield make
    for agent in made:
        ops = agent.a2a_app.ops
        await ops.tasks.close()
        await ops.tasks.state.close()
        await agent.state.close()


effects: list[str] = []  # one entry per one-time step actually done, by any replica


def effect(name: str) -> str:
    effects.append(name)
    return name


stalled: list[str] = []  # labels of `steps` runs parked for good on the first replica


def add_durable_skills(agent: Agent, *, hang: bool) -> None:
    """Skills whose side effects are one-time steps (ctx.once), counted in ``effects``."""

    @agent.skill
    async def ledger(item: str, ctx: Context) -> str:
        """Debit, report, ask where to credit, credit.

        Summary:
            A transfer approved by a person.
        """
        debit = await ctx.once("debit", effect, f"debit {item}")
        await ctx.progress(1, 2, "debited")
        answer = await ctx.ask(
            f"Credit {item} to?",
            {"type": "object", "properties": {"to": {"type": "string"}}, "required": ["to"]},
        )
        credit = await ctx.once("credit", effect, f"credit {item} to {answer.content['to']}")
        return f"{debit}; {credit}"

    @agent.skill
    async def steps(label: str, count: int, ctx: Context) -> dict[str, list[str]]:
        """One-time steps, a little apart; on the first replica it stalls after the second.

        Summary:
            Steps done once each.
        """
        done = []
        for step in range(count):
            done.append(await ctx.once(f"step-{step}", effect, f"{label}:{step}"))
            if hang and step == 1:
                stalled.append(label)  # the test "kills" the replica only once it is parked here, a point
                await asyncio.Event().wait()  # a real kill -9 may also hit: the first replica stalls for good
            await asyncio.sleep(TICK)
        return {"done": done}


def client(app: Starlette, who: str = "alice") -> httpx.AsyncClient:
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app),
        base_url="http://127.0.0.1:8000",
        headers={**V1, "authorization": f"Bearer {who}"},
        timeout=30,
    )


async def rpc(http: httpx.AsyncClient, method: str, params: dict) -> dict:
    response = await http.post("/a2a", json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
    assert response.status_code == 200, response.text
    return response.json()


async def stream(http: httpx.AsyncClient, method: str, params: dict) -> list[dict]:
    """A JSON-RPC stream's events (the ASGI transport hands the body over once the stream has ended)."""
    response = await http.post("/a2a", json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
    assert response.status_code == 200, response.text
    return [json.loads(line[5:])["result"] for line in response.text.splitlines() if line.startswith("data:")]


def msg(skill: str, data: dict | None = None, text: str | None = None, **extra: Any) -> dict:
    parts: list[dict] = []
    if data is not None:
        parts.append({"data": data})
    if text is not None:
        parts.append({"text": text})
    return {
        "messageId": f"m-{uuid.uuid4()}",
        "role": "ROLE_USER",
        "parts": parts,
        "metadata": {"skill": skill},
        **extra,
    }


def step_of(event_or_task: dict) -> int:
    """The step a ticker's status says it reached ("step (3/12)"; 0 before the first)."""
    status = event_or_task.get("status") or event_or_task.get("statusUpdate", {}).get("status") or {}
    for part in (status.get("message") or {}).get("parts", []):
        found = re.fullmatch(r"step \((\d+)/\d+\)", part.get("text", ""))
        if found:
            return int(found.group(1))
    return 0


async def test_send_on_a_then_get_and_list_on_b(replicas) -> None:
    (a, app_a), (b, app_b), (_, app_c) = replicas(3)
    b.a2a = replace(b.a2a, write_behind=False)  # B answers only once its write has landed
    async with (
        client(app_a) as on_a,
        client(app_b) as on_b,
        client(app_b, "bob") as bob_on_b,
        client(app_c) as on_c,
    ):
        # write-behind (the default): the answer precedes the one write; a flush makes it visible everywhere
        sent = (await rpc(on_a, "SendMessage", {"message": msg("echo", text="hi")}))["result"]["task"]
        assert sent["status"]["state"] == "TASK_STATE_COMPLETED"
        await a.a2a_app.ops.tasks.flush()
        got = (await rpc(on_b, "GetTask", {"id": sent["id"]}))["result"]
        assert got == sent  # the same task, read from the state by another replica
        assert a.a2a_app.ops.tasks.registry.writes == 1, "a fast task is written once"
        # durable answers: what B answered, C reads at once
        durable = (await rpc(on_b, "SendMessage", {"message": msg("add", data={"a": 2, "b": 3})}))["result"][
            "task"
        ]
        assert (await rpc(on_c, "GetTask", {"id": durable["id"]}))["result"]["artifacts"] == durable[
            "artifacts"
        ]
        # owner scoping holds across replicas
        assert (await rpc(bob_on_b, "GetTask", {"id": sent["id"]}))["error"]["code"] == -32001
        listed = (await rpc(on_c, "ListTasks", {"pageSize": 1}))["result"]
        assert listed["totalSize"] == 2 and [t["id"] for t in listed["tasks"]] == [durable["id"]]
        second = (await rpc(on_c, "ListTasks", {"pageSize": 1, "pageToken": listed["nextPageToken"]}))[
            "result"
        ]
        assert [t["id"] for t in second["tasks"]] == [sent["id"]] and second["nextPageToken"] == ""
        assert (await rpc(bob_on_b, "ListTasks", {}))["result"]["totalSize"] == 0


async def test_subscribe_on_c_to_a_task_streaming_on_a(replicas) -> None:
    (a, app_a), _, (c, app_c) = replicas(3)
    count = 12
    label = f"follow-{uuid.uuid4().hex[:6]}"
    async with client(app_a) as on_a, client(app_c) as on_c:
        streaming = asyncio.create_task(
            stream(
                on_a,
                "SendStreamingMessage",
                {"message": msg("ticker", data={"count": count, "label": label})},
            )
        )
        live = await eventually(
            lambda: next(
                (
                    t
                    for t in a.a2a_app.ops.tasks.live.values()
                    if t.record.skill == "ticker"
                    and step_of({"status": {"message": t.record.status_message}}) >= 3
                ),
                None,
            ),
            "the task on A to reach step 3",
        )
        task_id = live.record.id
        assert c.a2a_app.ops.tasks.live.get(task_id) is None  # C does not run it
        followed = await stream(on_c, "SubscribeToTask", {"id": task_id})
        on_a_events = await streaming
    first, rest = followed[0]["task"], followed[1:]
    assert first["id"] == task_id and first["status"]["state"] == "TASK_STATE_WORKING"
    steps = [
        step_of(e)
        for e in rest
        if "statusUpdate" in e and e["statusUpdate"]["status"]["state"] == "TASK_STATE_WORKING"
    ]
    start = step_of(first)
    assert steps == list(range(start + 1, count + 1)), f"in order, no gaps, none twice after {start}: {steps}"
    kinds = [next(iter(e)) for e in rest[len(steps) :]]
    assert (
        kinds == ["artifactUpdate", "statusUpdate"]
        and rest[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
    )
    assert rest[-len(kinds) :] == on_a_events[-len(kinds) :]  # the same events the stream on A sent


async def test_cancel_on_b_reaches_the_coroutine_on_a(replicas, backend: str) -> None:
    (_, app_a), (b, app_b), (_, app_c) = replicas(3)
    label = f"cancel-{uuid.uuid4().hex[:6]}"
    async with client(app_a) as on_a, client(app_b) as on_b, client(app_c) as on_c:
        task = (
            await rpc(
                on_a,
                "SendMessage",
                {"message": msg("slow", text=label), "configuration": {"returnImmediately": True}},
            )
        )["result"]["task"]
        await eventually(lambda: f"{label}:started" in a2a_app.log, "the skill to start on A")
        assert b.a2a_app.ops.tasks.live.get(task["id"]) is None
        sent = time.monotonic()
        canceled = (await rpc(on_b, "CancelTask", {"id": task["id"]}))["result"]
        answered = time.monotonic() - sent
        assert canceled["status"]["state"] == "TASK_STATE_CANCELED"
        assert f"{label}:cancelled" in a2a_app.log  # its finally ran on A before B answered
        poll = 0.05 if backend.startswith("sqlite") else 0.0  # the bus's latency across connections
        assert answered < 0.1 + 2 * poll + 0.5, f"CancelTask took {answered:.3f} s"  # slack: a loaded machine
        assert (await rpc(on_c, "GetTask", {"id": task["id"]}))["result"]["status"][
            "state"
        ] == "TASK_STATE_CANCELED"
        assert (await rpc(on_c, "CancelTask", {"id": task["id"]}))["error"][
            "code"
        ] == -32002  # not cancelable now


async def test_a_follow_up_on_another_replica_fails_cleanly_once_the_journal_is_gone(replicas) -> None:
    (a, app_a), (_, app_b), _ = replicas(3)
    async with client(app_a) as on_a, client(app_b) as on_b:
        parked = (await rpc(on_a, "SendMessage", {"message": msg("approve", data={"item": "pc"})}))["result"][
            "task"
        ]
        assert parked["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        await a.a2a_app.ops.tasks.flush()
        await forget_journals(a.state)
        answer = {**msg("approve", data={"approved": True}), "taskId": parked["id"]}
        refused = await asyncio.wait_for(rpc(on_b, "SendMessage", {"message": answer}), 10)
        assert refused["error"]["code"] == -32004  # nothing to replay on B: a clean error, never a hang
        assert (await rpc(on_b, "GetTask", {"id": parked["id"]}))["result"]["status"][
            "state"
        ] == "TASK_STATE_FAILED"
        # the coroutine parked on A is stopped through the bus, and A answers with the failed task too
        await eventually(
            lambda: a.a2a_app.ops.tasks.live.get(parked["id"]) is None, "A to let go of the task"
        )
        assert (await rpc(on_a, "GetTask", {"id": parked["id"]}))["result"]["status"][
            "state"
        ] == "TASK_STATE_FAILED"


async def test_a_task_waiting_for_arguments_continues_on_any_replica(replicas) -> None:
    (a, app_a), (_, app_b), _ = replicas(3)
    async with client(app_a) as on_a, client(app_b) as on_b:
        waiting = (await rpc(on_a, "SendMessage", {"message": msg("add", data={"a": 1})}))["result"]["task"]
        assert waiting["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        await a.a2a_app.ops.tasks.flush()
        more = {**msg("add", data={"b": 41}), "taskId": waiting["id"]}
        done = (await rpc(on_b, "SendMessage", {"message": more}))["result"]["task"]
        assert done["status"]["state"] == "TASK_STATE_COMPLETED"
        assert done["artifacts"][0]["parts"][0]["data"]["result"] == 42


class Receiver:
    """A webhook that records every push it gets."""

    def __init__(self) -> None:
        self.events: list[dict] = []

        async def hook(request: Request) -> JSONResponse:
            self.events.append(await request.json())
            return JSONResponse({})

        self.app = Starlette(routes=[Route("/hook", hook, methods=["POST"])])


async def test_pushes_are_delivered_once_and_in_order_by_one_replica(replicas) -> None:
    (a, app_a), (b, app_b), _ = replicas(3)
    receiver = Receiver()
    count = 5
    with serve(receiver.app) as url:
        async with client(app_a) as on_a, client(app_b) as on_b:
            task = (
                await rpc(
                    on_a,
                    "SendMessage",
                    {
                        "message": msg(
                            "ticker", data={"count": count, "label": f"push-{uuid.uuid4().hex[:6]}"}
                        ),
                        "configuration": {
                            "returnImmediately": True,
                            "taskPushNotificationConfig": {"url": f"{url}/hook", "token": "t"},
                        },
                    },
                )
            )["result"]["task"]
            # B could send them too: it is told to, and it finds the config through the state
            configs = (await rpc(on_b, "ListTaskPushNotificationConfigs", {"taskId": task["id"]}))["result"]
            assert [c["url"] for c in configs["configs"]] == [f"{url}/hook"]
            b.a2a_app.ops.push.watch(task["id"])
            await eventually(
                lambda: any(
                    e.get("statusUpdate", {}).get("status", {}).get("state") == "TASK_STATE_COMPLETED"
                    for e in receiver.events
                ),
                "the final push",
                timeout=15,
            )
            await stays(  # a second sender, were there one, would send again meanwhile
                lambda: len(receiver.events) == len({json.dumps(e, sort_keys=True) for e in receiver.events}),
                "each event once",
                seconds=0.2,
            )
    events = receiver.events
    steps = [step_of(e) for e in events if "statusUpdate" in e and step_of(e)]
    assert steps == list(range(1, count + 1)), steps
    assert len(events) == len({json.dumps(e, sort_keys=True) for e in events}), "each event once"
    assert [next(iter(e)) for e in events][-2:] == ["artifactUpdate", "statusUpdate"]
    senders = [agent.a2a_app.ops.push.delivered for agent in (a, b)]
    assert sum(senders) == len(events) and 0 in senders, f"one replica sent them all: {senders}"


async def test_a_push_sender_that_dies_is_taken_over_from_the_last_delivered_event(replicas) -> None:
    (a, app_a), (b, _), _ = replicas(3)
    for agent in (a, b):
        agent.a2a.push.lease_seconds = (
            1.5  # long enough that a loaded CI machine never lets a live sender lapse
        )
    receiver = Receiver()
    # the ticker holds after step 4 until A's sender is gone: however slow the machine, B has steps to send
    # (timing alone once let A send every push before it died, leaving B nothing to take over)
    count = 24
    label = f"takeover-{uuid.uuid4().hex[:6]}"
    resume = asyncio.Event()
    HOLDS[label] = (4, resume)
    with serve(receiver.app) as url:
        async with client(app_a) as on_a:
            task = (
                await rpc(
                    on_a,
                    "SendMessage",
                    {
                        "message": msg("ticker", data={"count": count, "label": label}),
                        "configuration": {
                            "returnImmediately": True,
                            "taskPushNotificationConfig": {"url": f"{url}/hook"},
                        },
                    },
                )
            )["result"]["task"]
            await eventually(lambda: a.a2a_app.ops.push.workers, "A to send the pushes")
            b.a2a_app.ops.push.watch(task["id"])  # refused (A holds the lease); B now watches for orphans
            await eventually(lambda: len(receiver.events) >= 3, "a few pushes from A")
            # A's sender dies without giving the lease back, between two events (dying between a delivery
            # and its record would send that one event again: at least once, at a crash)
            state = a.a2a_app.ops.tasks.state

            async def caught_up() -> bool:
                log = [event_id for event_id, _ in await state.read("a2a.events", task["id"], 0, 100)]
                found = await state.get("a2a.push", task["id"])
                return (
                    3 <= len(receiver.events) <= len(log)
                    and found.value["delivered"] == log[len(receiver.events) - 1]
                )

            await eventually(caught_up, "A's sender to catch up", timeout=5, interval=0.001)
            await a.a2a_app.ops.push.close()
            from_a = a.a2a_app.ops.push.delivered
            resume.set()
            await eventually(
                lambda: any(
                    e.get("statusUpdate", {}).get("status", {}).get("state") == "TASK_STATE_COMPLETED"
                    for e in receiver.events
                ),
                "the final push",
                timeout=15,
            )
            # the receiver records an event before it answers, and B counts a push once the answer is back:
            # B's sender ends after it has counted and recorded the final push (reading B's count as soon as
            # the receiver had it once found two pushes counted by neither replica: A's in flight, and this one)
            await eventually(
                lambda: task["id"] not in b.a2a_app.ops.push.workers, "B's sender to end", timeout=15
            )
    from_b = b.a2a_app.ops.push.delivered
    sent = [json.dumps(e, sort_keys=True) for e in receiver.events]
    duplicates = len(sent) - len(set(sent))
    steps = [step_of(e) for e in receiver.events if "statusUpdate" in e and step_of(e)]
    assert sorted(set(steps)) == list(range(1, count + 1)) and steps == sorted(steps), steps
    # the documented bound (docs/a2a.md, "Push notifications, once"): the one event in flight when A died may
    # have reached the receiver without A counting it, and is then sent again by B; nothing else is sent twice
    assert duplicates <= 1, f"at most the event in flight when A died is sent again: {steps}"
    assert from_a >= 3 and from_b > 0 and len(receiver.events) - from_a - from_b in (0, 1), (
        len(receiver.events),
        from_a,
        from_b,
        duplicates,
    )
    assert len(receiver.events) - from_a - from_b <= duplicates  # an uncounted push is one B sent again


async def test_tasks_survive_a_restart_and_one_whose_journal_is_gone_fails(
    tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.setattr(registry_module, "HEARTBEAT_SECONDS", 0.3)
    url = f"sqlite:///{tmp_path}/restart.db"
    agent, app = a2a_app.build(open_state(url))
    async with client(app) as http:
        done = (await rpc(http, "SendMessage", {"message": msg("echo", text="kept")}))["result"]["task"]
        parked = (await rpc(http, "SendMessage", {"message": msg("approve", data={"item": "pc"})}))["result"][
            "task"
        ]
    tasks = agent.a2a_app.ops.tasks
    await tasks.flush()
    # a crash: the process is cut off its file with the coroutine parked; its heartbeat is never renewed again
    shared = tasks.state
    await forget_journals(shared)
    tasks.store = MemoryState()
    await tasks.close()
    await shared.close()
    restarted, app2 = a2a_app.build(open_state(url))
    try:
        async with client(app2) as http:
            again = (await rpc(http, "GetTask", {"id": done["id"]}))["result"]
            assert again == done

            async def lost_task() -> dict[str, Any] | None:  # once the heartbeat of its process expired
                got = (await rpc(http, "GetTask", {"id": parked["id"]}))["result"]
                return None if got["status"]["state"] == parked["status"]["state"] else got

            lost = await eventually(
                lost_task, "the parked task's heartbeat to expire", timeout=0.4, interval=0.05
            )
            assert lost["status"]["state"] == "TASK_STATE_FAILED"
            assert lost["status"]["message"]["parts"][0]["text"] == RESTART_REASON
    finally:
        await restarted.a2a_app.ops.tasks.close()
        await restarted.a2a_app.ops.tasks.state.close()


# --- executions that survive their replica (journal replay, docs/durability.md) --------------------------


def states_of(events: list[dict]) -> list[str]:
    return [e["statusUpdate"]["status"]["state"] if "statusUpdate" in e else next(iter(e)) for e in events]


async def test_a_follow_up_on_b_resumes_a_task_parked_on_a(replicas) -> None:
    (a, app_a), (b, app_b), (_c, app_c) = replicas(3)
    item = f"pc-{uuid.uuid4().hex[:6]}"
    receiver = Receiver()
    with serve(receiver.app) as url:
        async with client(app_a) as on_a, client(app_b) as on_b, client(app_c) as on_c:
            parked = (
                await rpc(
                    on_a,
                    "SendMessage",
                    {
                        "message": msg("ledger", data={"item": item}),
                        "configuration": {"taskPushNotificationConfig": {"url": f"{url}/hook"}},
                    },
                )
            )["result"]["task"]
            assert parked["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
            assert effects.count(f"debit {item}") == 1
            await a.a2a_app.ops.tasks.flush()
            following = asyncio.create_task(stream(on_c, "SubscribeToTask", {"id": parked["id"]}))
            await eventually(lambda: len(receiver.events) >= 3, "A's pushes up to the question")
            answer = {**msg("ledger", data={"to": "bob"}), "taskId": parked["id"]}
            done = (await asyncio.wait_for(rpc(on_b, "SendMessage", {"message": answer}), 15))["result"][
                "task"
            ]
            assert done["status"]["state"] == "TASK_STATE_COMPLETED", done["status"]
            assert done["artifacts"][0]["parts"][0]["text"] == f"debit {item}; credit {item} to bob"
            # the debit was replayed from the journal, not done again; the credit was done once, on B
            assert effects.count(f"debit {item}") == 1 and effects.count(f"credit {item} to bob") == 1
            followed = await asyncio.wait_for(following, 15)
            # the coroutine parked on A let go (told over the bus); A now reads the task from the state
            await eventually(
                lambda: a.a2a_app.ops.tasks.live.get(parked["id"]) is None, "A to let go of the task"
            )
            got = (await rpc(on_a, "GetTask", {"id": parked["id"]}))["result"]
            assert got["status"]["state"] == "TASK_STATE_COMPLETED" and got["artifacts"] == done["artifacts"]
            await eventually(
                lambda: "TASK_STATE_COMPLETED" in states_of(receiver.events), "the final push", timeout=15
            )
            settled = len(receiver.events)
            await stays(  # a repeated push would arrive meanwhile
                lambda: len(receiver.events) == settled, "no push after the final one", seconds=0.2
            )
    # C followed from the parked task on, in order, with no gaps and nothing twice (the replayed progress
    # update "debited" is not sent again)
    assert followed[0]["task"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert states_of(followed[1:]) == ["TASK_STATE_WORKING", "artifactUpdate", "TASK_STATE_COMPLETED"]
    # the pushes go on where A's stopped: each once, in order
    assert states_of(receiver.events) == [
        "TASK_STATE_WORKING",
        "TASK_STATE_WORKING",
        "TASK_STATE_INPUT_REQUIRED",
        "TASK_STATE_WORKING",
        "artifactUpdate",
        "TASK_STATE_COMPLETED",
    ]
    texts = [
        p.get("text")
        for e in receiver.events
        if "statusUpdate" in e
        for p in (e["statusUpdate"]["status"].get("message") or {}).get("parts", [])
    ]
    assert texts.count("debited (1/2)") == 1, texts
    assert b.a2a_app.ops.tasks.live.get(parked["id"]) is None  # B's handle is gone with the task's end


async def test_a_parked_task_resumes_after_a_restart(backend: str) -> None:
    item = f"desk-{uuid.uuid4().hex[:6]}"
    agent, app = a2a_app.build(open_state(backend))
    agent._state = open_state(backend)
    add_durable_skills(agent, hang=False)
    async with client(app) as http:
        parked = (await rpc(http, "SendMessage", {"message": msg("ledger", data={"item": item})}))["result"][
            "task"
        ]
    assert parked["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    await agent.a2a_app.ops.tasks.close()  # a shutdown: the parked task is left for the next process
    await agent.a2a_app.ops.tasks.state.close()
    await agent.state.close()
    restarted, app2 = a2a_app.build(open_state(backend))
    restarted._state = open_state(backend)
    add_durable_skills(restarted, hang=False)
    try:
        async with client(app2) as http:
            again = (await rpc(http, "GetTask", {"id": parked["id"]}))["result"]
            assert again["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", again["status"]
            answer = {**msg("ledger", data={"to": "carol"}), "taskId": parked["id"]}
            done = (await rpc(http, "SendMessage", {"message": answer}))["result"]["task"]
        assert done["status"]["state"] == "TASK_STATE_COMPLETED", done["status"]
        assert done["artifacts"][0]["parts"][0]["text"] == f"debit {item}; credit {item} to carol"
        assert effects.count(f"debit {item}") == 1 and effects.count(f"credit {item} to carol") == 1
    finally:
        await restarted.a2a_app.ops.tasks.close()
        await restarted.a2a_app.ops.tasks.state.close()
        await restarted.state.close()


async def test_a_killed_replicas_running_task_is_taken_over_and_completes_once(replicas, monkeypatch) -> None:
    monkeypatch.setattr(registry_module, "HEARTBEAT_SECONDS", 0.3)
    monkeypatch.setattr(registry_module, "LEASE_SECONDS", 0.6)
    monkeypatch.setattr(registry_module, "SWEEP_SECONDS", 0.1)
    monkeypatch.setattr(registry_module, "RETRY_TAKE_OVER_SECONDS", 0.1)
    (a, app_a), (_b, app_b), _ = replicas(3)
    label = f"kill-{uuid.uuid4().hex[:6]}"
    async with client(app_a) as on_a, client(app_b) as on_b:
        task = (
            await rpc(
                on_a,
                "SendMessage",
                {
                    "message": msg("steps", data={"label": label, "count": 4}),
                    "configuration": {"returnImmediately": True},
                },
            )
        )["result"]["task"]
        await eventually(lambda: f"{label}:1" in effects and label in stalled, "A to do two steps and stall")
        # A dies: its coroutine stops with nothing written or released, its heartbeat and listener stop
        registry = a.a2a_app.ops.tasks.registry
        registry.closing = True
        live = registry.live.get(task["id"])
        assert live is not None and live.runner is not None
        live.runner.cancel()
        for background in list(registry._background):
            background.cancel()

        done: dict[str, Any] = {}

        async def finished() -> bool:  # GetTask on B: its first use sweeps for orphans, and a read of a lost
            nonlocal done  # task takes it over
            done = (await rpc(on_b, "GetTask", {"id": task["id"]}))["result"]
            return done["status"]["state"] in (
                "TASK_STATE_COMPLETED",
                "TASK_STATE_FAILED",
                "TASK_STATE_CANCELED",
            )

        await eventually(
            finished, lambda: f"B to finish the task: {done['status']}", timeout=15, interval=0.05
        )
        assert done["status"]["state"] == "TASK_STATE_COMPLETED", done["status"]
    assert done["artifacts"][0]["parts"][0]["data"]["done"] == [f"{label}:{n}" for n in range(4)]
    assert [e for e in effects if e.startswith(f"{label}:")] == [f"{label}:{n}" for n in range(4)], (
        "each step done once: the two A did were replayed from the journal"
    )
