"""A task that settles for good before anything of it was written waits for its one write as encoded bytes
(``TaskRegistry._final``), not as its handle, record and messages. Through a real A2A endpoint on the memory
and SQLite states: nothing of the task stays alive, a lookup before the write lands still finds it, a repeat
is answered from it, a handle made of it (by a lookup, before or while the write is on its way) is written
in its place or after it, never twice at version 1, and a record that cannot be encoded takes the handle's
path as before. Then what a hostile review found: a handle kept after its write conflicted or failed, a writer
killed by a record it could not read, plain bytes taken as encoded, a subclass given what it cannot read, and
a message-only reply recorded on another task's messageId entry."""

from __future__ import annotations

import asyncio
import gc
import logging
from typing import Any

import pytest
from starlette.applications import Starlette

from agentmw import Agent, AgentMiddleware, Message
from agentmw._transport import loads
from agentmw.a2a.settings import A2ASettings
from agentmw.lifecycle import TaskRecord
from agentmw.settings import Limits
from agentmw.state import MemoryState, SQLiteState, encode, encoded, encoded_bytes
from agentmw.tasks import registry as registry_module
from agentmw.tasks.registry import LiveTask, TaskRegistry
from agentmw.testing import A2ATestClient
from tests.waiting import eventually

# a caller of its own: anonymous callers share one identity, so their repeats are never de-duplicated
CALLER = {"authorization": "Bearer repeater"}


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Any) -> str:
    return "memory://" if request.param == "memory" else f"sqlite:///{tmp_path}/final.db"


@pytest.fixture
def slow_writer(monkeypatch: pytest.MonkeyPatch) -> None:
    """The writer waits for company far longer than a test takes: only a flush (or a follower) writes."""
    monkeypatch.setattr(registry_module, "WRITE_DELAY_SECONDS", 30.0)


def app_of(store: str, **settings: Any) -> tuple[Starlette, Agent]:
    # these tests are about the write that follows an answer: write-behind, the opt-in (the default is
    # write-through, where the answer waits for the write: test_an_answer_waits_for_the_write_without_write_behind)
    agent = Agent("final", store=store, a2a=A2ASettings(**{"write_behind": True, **settings}))

    @agent.skill
    async def echo(text: str) -> str:
        """Echo."""
        return f"echo: {text}"

    app = Starlette()
    app.add_middleware(AgentMiddleware, agent=agent)
    return app, agent


def registry_of(agent: Agent) -> TaskRegistry:
    return agent.a2a_app.ops.tasks.registry  # type: ignore[no-any-return]


async def sent(a2a: A2ATestClient, agent: Agent) -> tuple[dict[str, Any], TaskRegistry]:
    """A blocking send's task, and the registry whose writer still holds its final write."""
    return (await a2a.send("hi", skill="echo"))["task"], registry_of(agent)


async def completed_here(agent: Agent, record: TaskRecord) -> tuple[TaskRegistry, LiveTask]:
    """A task of this process that completes at once, as a skill's run would end it."""
    registry = registry_of(agent)
    await registry.ready()
    live = registry.open(record)
    registry.status(live, "TASK_STATE_COMPLETED", None)
    return registry, live


def handles_of(task_id: str) -> list[LiveTask]:
    gc.collect()
    return [o for o in gc.get_objects() if type(o) is LiveTask and o.record.id == task_id]


async def test_a_settled_task_waits_for_its_write_as_bytes_alone(store: str, slow_writer: None) -> None:
    app, agent = app_of(store)
    async with A2ATestClient(app, headers=CALLER) as a2a:
        task = (await a2a.send("hi", skill="echo"))["task"]
        registry = registry_of(agent)
        raw = encoded_bytes(registry.unwritten[task["id"]])
        assert raw is not None and loads(raw)["state"] == "TASK_STATE_COMPLETED"
        assert handles_of(task["id"]) == []  # nothing of the task is kept for the write
        assert registry.writes == 0 and await agent.state.get("a2a.tasks", task["id"]) is None

        # a lookup before the write lands finds it, as it was answered
        assert await a2a.get(task["id"]) == task
        await registry.flush()
        stored = await agent.state.get("a2a.tasks", task["id"])
        assert stored is not None and stored.version == 1 and stored.value["state"] == "TASK_STATE_COMPLETED"
        assert "replica" not in stored.value and stored.value["history"][0]["parts"] == [{"text": "hi"}]
        assert registry.writes == 1 and task["id"] not in registry.unwritten
        assert await a2a.get(task["id"]) == task


async def test_a_repeat_while_the_write_is_pending_gets_the_same_task_written_once(
    store: str, slow_writer: None
) -> None:
    app, agent = app_of(store)
    async with A2ATestClient(app, headers=CALLER) as a2a:
        message = a2a.message("hi", skill="echo")
        first = (await a2a.send(message=message))["task"]
        again = (await a2a.send(message=message))["task"]
        assert again == first
        registry = registry_of(agent)
        await registry.flush()
        assert registry.writes == 1
        assert (await agent.state.get("a2a.tasks", first["id"])).version == 1  # type: ignore[union-attr]


@pytest.mark.parametrize("publish", [False, True])
async def test_a_handle_made_before_the_write_is_written_in_its_place(
    store: str, slow_writer: None, publish: bool, caplog: pytest.LogCaptureFixture
) -> None:
    app, agent = app_of(store)
    async with A2ATestClient(app, headers=CALLER) as a2a:
        task, registry = await sent(a2a, agent)
        handle = registry.local(task["id"])
        assert handle is not None and handle is registry.local(task["id"])  # made once
        assert handle.record.state == "TASK_STATE_COMPLETED" and handle.version == 0
        if publish:
            registry.publish(handle)  # as a push config added now does
        with caplog.at_level(logging.INFO, logger="agentmw"):
            await registry.flush()
        assert not handle.superseded and handle.version == 1 and not handle.dirty, caplog.text
        assert "already in the state" not in caplog.text and "another replica" not in caplog.text
        assert registry.writes == 1 and not registry.unwritten and registry.backlog == 0
        assert await a2a.get(task["id"]) == task


@pytest.mark.parametrize("publish", [False, True])
async def test_a_handle_made_while_the_write_is_on_its_way_follows_it(
    store: str, slow_writer: None, publish: bool, caplog: pytest.LogCaptureFixture
) -> None:
    app, agent = app_of(store)
    async with A2ATestClient(app, headers=CALLER) as a2a:
        task, registry = await sent(a2a, agent)
        handles: list[LiveTask] = []
        put_many = agent.state.put_many

        async def looked_up_meanwhile(items: Any) -> Any:
            handle = registry.local(task["id"])  # a GetTask, or a push config, while the write is on its way
            assert handle is not None
            handles.append(handle)
            if publish:
                registry.publish(handle)
            return await put_many(items)

        agent.state.put_many = looked_up_meanwhile  # type: ignore[method-assign]
        with caplog.at_level(logging.INFO, logger="agentmw"):
            await registry.flush()
            await registry.flush()  # the published handle's own write, queued during the first
        [handle] = handles
        assert not handle.superseded and not handle.dirty, caplog.text
        assert handle.version == (2 if publish else 1)
        assert "already in the state" not in caplog.text and "another replica" not in caplog.text
        assert registry.writes == (2 if publish else 1) and not registry.unwritten and registry.backlog == 0
        stored = await agent.state.get("a2a.tasks", task["id"])
        assert stored is not None and stored.version == handle.version


async def test_an_answer_waits_for_the_write_without_write_behind(store: str, slow_writer: None) -> None:
    app, agent = app_of(store, write_behind=False)
    async with A2ATestClient(app, headers=CALLER) as a2a:
        task = (await a2a.send("hi", skill="echo"))["task"]
        stored = await agent.state.get("a2a.tasks", task["id"])
        assert stored is not None and stored.value["state"] == "TASK_STATE_COMPLETED"


async def test_a_record_that_cannot_be_encoded_takes_the_handle_path(
    store: str, slow_writer: None, caplog: pytest.LogCaptureFixture
) -> None:
    app, agent = app_of(store)
    async with A2ATestClient(app, headers=CALLER):
        registry, live = await completed_here(
            agent, TaskRecord(id="bad-1", context_id="c", owner="o", metadata={"tags": {"a", "b"}})
        )
        assert registry.unwritten["bad-1"] is live  # a set is not JSON: the writer says so, as before
        with caplog.at_level(logging.ERROR, logger="agentmw"):
            await registry.flush()
        assert "bad-1 could not be written" in caplog.text
        assert await agent.state.get("a2a.tasks", "bad-1") is None


def test_only_the_built_in_states_take_encoded_values() -> None:
    from agentmw.state.base import State

    assert State.accepts_encoded is False
    assert MemoryState.accepts_encoded and SQLiteState.accepts_encoded
    from agentmw.state.redis import RedisState

    assert RedisState.accepts_encoded


async def test_an_encoded_value_is_checked_when_encoded_and_stored_as_it_is(tmp_path: Any) -> None:
    with pytest.raises(TypeError):
        encoded({"x": {1, 2}})  # type: ignore[dict-item]
    with pytest.raises(ValueError):
        encoded({"x": float("nan")})
    value = encoded({"a": [1, "é"]})
    gc.collect()
    assert not gc.is_tracked(value)  # what a pending write keeps costs the collector nothing
    for state in (MemoryState(), SQLiteState(tmp_path / "encoded.db")):
        assert await state.put("ns", "k", value, expected_version=0) == 1  # type: ignore[arg-type]
        assert await state.put_many([("ns", f"m{i}", encoded({"i": i}), 0) for i in range(3)]) == [1, 1, 1]
        assert (await state.get("ns", "k")).value == {"a": [1, "é"]}  # type: ignore[union-attr]
        assert (await state.get("ns", "m2")).value == {"i": 2}  # type: ignore[union-attr]
        await state.close()


async def test_the_message_id_table_holds_nothing_the_collector_walks(store: str) -> None:
    """Remembered for an hour, a2a_max_message_ids of them: plain tuples, which the collector stops tracking."""
    app, agent = app_of(store)
    async with A2ATestClient(app, headers=CALLER) as a2a:
        for i in range(3):
            await a2a.send(f"hi {i}", skill="echo")
        table = agent.a2a_app.ops.tasks._messages
        assert len(table) == 3
        for _ in range(3):  # a tuple is untracked once a collection finds only untracked things in it
            gc.collect()
        slots = list(table._entries.values())
        assert [gc.is_tracked(slot) for slot in slots] == [False] * 3, slots


@pytest.mark.parametrize("value", [b'{"a": 1}', b"not json", (object(), b"{}"), ("x", b"{}")])
async def test_bytes_or_a_lookalike_are_never_taken_as_encoded(value: Any) -> None:
    """Only what encoded() made skips the checks: raw bytes stay refused, as every non-dict is."""
    state = MemoryState()
    for write in (
        lambda: state.put("ns", "k", value, expected_version=None),
        lambda: state.put_many([("ns", "k", value, None)]),
        lambda: state.append("ns", "log", value),
    ):
        with pytest.raises(TypeError):
            await write()
    assert encoded_bytes(value) is None
    with pytest.raises(TypeError):
        encode(value)


def test_a_subclass_of_a_built_in_state_is_given_dicts_unless_it_says_otherwise() -> None:
    class Audited(MemoryState):
        async def put_many(self, items: Any) -> Any:  # reads what it is given
            return await super().put_many(items)

    class Declared(MemoryState):
        accepts_encoded = True

    assert MemoryState.accepts_encoded and not Audited.accepts_encoded and Declared.accepts_encoded


async def test_the_registry_asks_its_state_of_the_moment(store: str, slow_writer: None) -> None:
    """A registry whose state is swapped for one that takes dicts only (TaskManager.store = ...) gives it dicts."""
    app, agent = app_of(store)

    class DictsOnly(MemoryState):
        async def put_many(self, items: Any) -> Any:
            assert all(type(value) is dict for _, _, value, _ in items), items
            return await super().put_many(items)

    async with A2ATestClient(app, headers=CALLER) as a2a:
        registry = registry_of(agent)
        await registry.ready()
        registry.state = DictsOnly()
        task = (await a2a.send("hi", skill="echo"))["task"]
        assert type(registry.unwritten[task["id"]]) is LiveTask
        await registry.flush()
        assert (await registry.state.get("a2a.tasks", task["id"])) is not None


@pytest.mark.parametrize("how", ["conflict", "failure"])
async def test_a_handle_made_while_a_final_write_conflicts_or_fails_is_not_kept(
    store: str, slow_writer: None, how: str, caplog: pytest.LogCaptureFixture
) -> None:
    app, agent = app_of(store)
    async with A2ATestClient(app, headers=CALLER) as a2a:
        task, registry = await sent(a2a, agent)
        state = agent.state
        put_many, put = state.put_many, state.put
        handles: list[LiveTask] = []

        async def meanwhile(items: Any) -> Any:
            handles.append(registry.local(task["id"]))  # type: ignore[arg-type]  # a GetTask meanwhile
            if how == "conflict":  # another replica wrote this id first
                await put(
                    "a2a.tasks",
                    task["id"],
                    {"id": task["id"], "context_id": "x", "owner": "o", "state": "TASK_STATE_FAILED"},
                    expected_version=0,
                )
                return await put_many(items)
            raise OSError("the store is down")

        async def down(*args: Any, **kwargs: Any) -> Any:
            raise OSError("the store is down")

        state.put_many = meanwhile  # type: ignore[method-assign]
        if how == "failure":
            state.put = down  # type: ignore[method-assign]
        with caplog.at_level(logging.WARNING, logger="agentmw"):
            if how == "failure":  # the store refuses it: kept and tried again (issue 25), never dropped
                flushed = asyncio.ensure_future(registry.flush())
                await eventually(lambda: registry.commits.failures >= 2, "the write to be refused twice")
                assert not flushed.done() and task["id"] in registry.unwritten and registry.backlog == 1
                state.put_many, state.put = put_many, put  # type: ignore[method-assign]  # the store is back
                await asyncio.wait_for(flushed, 10)
            else:
                await asyncio.wait_for(registry.flush(), 10)
        state.put_many, state.put = put_many, put  # type: ignore[method-assign]
        assert not registry.unwritten and registry.backlog == 0
        [handle, *_] = handles
        if how == "conflict":  # the other record stands, here too
            assert handle.superseded and handle.record.state == "TASK_STATE_FAILED"
            assert "already in the state" in caplog.text
        else:
            assert "the store refused" in caplog.text and "tried again" in caplog.text
            assert "the store takes A2A task records again" in caplog.text
            stored = await state.get("a2a.tasks", task["id"])
            assert stored is not None and stored.value["state"] == "TASK_STATE_COMPLETED"
            assert not handle.superseded and handle.version == stored.version == 1
            assert registry.commits.failures == 0


async def test_the_writer_outlives_a_record_it_cannot_read_after_a_conflict(
    store: str, slow_writer: None, caplog: pytest.LogCaptureFixture
) -> None:
    app, agent = app_of(store)
    async with A2ATestClient(app, headers=CALLER) as a2a:
        task, registry = await sent(a2a, agent)
        other = (await a2a.send("again", skill="echo"))["task"]
        other_handle = registry.local(other["id"])  # written in the same round as the final
        state = agent.state
        put_many, put, get = state.put_many, state.put, state.get

        async def unreadable(*args: Any, **kwargs: Any) -> Any:
            raise OSError("the store blinked")

        async def meanwhile(items: Any) -> Any:
            registry.local(task["id"])
            await put(
                "a2a.tasks",
                task["id"],
                {"id": task["id"], "context_id": "x", "owner": "o", "state": "TASK_STATE_FAILED"},
                expected_version=0,
            )
            state.get = unreadable  # type: ignore[method-assign]
            return await put_many(items)

        state.put_many = meanwhile  # type: ignore[method-assign]
        with caplog.at_level(logging.ERROR, logger="agentmw"):
            await asyncio.wait_for(registry.flush(), 10)
        state.put_many, state.get = put_many, get  # type: ignore[method-assign]
        assert "could not be read" in caplog.text
        assert registry.backlog == 0 and not registry.unwritten
        assert other_handle is not None and not other_handle.queued and not other_handle.dirty
        assert (await state.get("a2a.tasks", other["id"])) is not None
        await asyncio.wait_for(registry.flush(), 10)  # and the writer still writes


async def test_the_handle_of_a_final_write_is_never_written_again(
    store: str, slow_writer: None, caplog: pytest.LogCaptureFixture
) -> None:
    """As a blocking send whose caller left does (settled: publish), once the write has landed too."""
    app, agent = app_of(store)
    async with A2ATestClient(app, headers=CALLER):
        registry, live = await completed_here(agent, TaskRecord(id="once-1", context_id="c", owner="o"))
        assert live.handed_over and encoded_bytes(registry.unwritten["once-1"]) is not None
        with caplog.at_level(logging.INFO, logger="agentmw"):
            await registry.flush()
            registry.publish(live)
            await registry.persist(live)
            await registry.flush()
        assert registry.writes == 1 and not registry.unwritten and registry.backlog == 0
        assert "another replica" not in caplog.text and "already in the state" not in caplog.text
        assert (await agent.state.get("a2a.tasks", "once-1")).version == 1  # type: ignore[union-attr]


async def test_a_reply_is_recorded_on_its_own_task_s_entry_only() -> None:
    """M's entry is forgotten (a2a_max_message_ids=1) while M's task runs, and a repeat of M starts a second
    task: when the first task replies with a message, that reply is not put on the second task's entry."""
    agent = Agent("replies", store="memory://", limits=Limits(max_message_ids=1))
    gates: list[asyncio.Event] = []

    @agent.skill
    async def answer(text: str) -> Message | str:
        """Answers the first message with a message, the others with a task."""
        gate = asyncio.Event()
        gates.append(gate)
        number = len(gates)
        await gate.wait()
        return Message(f"reply #{number}") if number == 1 else f"task #{number}"

    async def started(count: int) -> None:
        await eventually(lambda: len(gates) >= count, f"{count} calls to start")

    app = Starlette()
    app.add_middleware(AgentMiddleware, agent=agent)
    async with A2ATestClient(app, headers=CALLER) as a2a:
        message = a2a.message("hi", skill="answer")
        first = asyncio.create_task(a2a.send(message=message))
        await started(1)
        other = asyncio.create_task(a2a.send("other", skill="answer"))  # pushes M's entry out
        await started(2)
        second = asyncio.create_task(a2a.send(message=message))  # M again, forgotten: a new task
        await started(3)
        gates[0].set()
        assert list(await first) == ["message"]
        gates[2].set()
        task = (await second)["task"]
        gates[1].set()
        await other
        again = await a2a.send(message=message)  # a repeat: what the second one got, a task
        assert list(again) == ["task"] and again["task"]["id"] == task["id"], again
