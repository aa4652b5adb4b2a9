"""A task that settles for good before anything of it was written waits for its one write as encoded bytes
(``TaskRegistry._final``), not as its handle, record and messages. Through a real A2A endpoint on the memory
and SQLite states: nothing of the task stays alive, a lookup before the write lands still finds it, a repeat
is answered from it, a handle made of it (by a lookup, before or while the write is on its way) is written
in its place or after it, never twice at version 1, and a record that cannot be encoded takes the handle's
path as before."""

from __future__ import annotations

import gc
import logging
from typing import Any

import pytest
from starlette.applications import Starlette

from agentmw import Agent, AgentMiddleware
from agentmw.a2a.settings import A2ASettings
from agentmw._transport import loads
from agentmw.state import MemoryState, SQLiteState, encode
from agentmw.tasks import registry as registry_module
from agentmw.tasks.registry import LiveTask, TaskRegistry
from agentmw.testing import A2ATestClient


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Any) -> str:
    return "memory://" if request.param == "memory" else f"sqlite:///{tmp_path}/final.db"


@pytest.fixture
def slow_writer(monkeypatch: pytest.MonkeyPatch) -> None:
    """The writer waits for company far longer than a test takes: only a flush (or a follower) writes."""
    monkeypatch.setattr(registry_module, "WRITE_DELAY_SECONDS", 30.0)


def app_of(store: str, **settings: Any) -> tuple[Starlette, Agent]:
    agent = Agent("final", store=store, a2a=A2ASettings(**settings))

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


def handles_of(task_id: str) -> list[LiveTask]:
    gc.collect()
    return [o for o in gc.get_objects() if type(o) is LiveTask and o.record.id == task_id]


async def test_a_settled_task_waits_for_its_write_as_bytes_alone(store: str, slow_writer: None) -> None:
    app, agent = app_of(store)
    async with A2ATestClient(app) as a2a:
        task = (await a2a.send("hi", skill="echo"))["task"]
        registry = registry_of(agent)
        pending = registry.unwritten[task["id"]]
        assert type(pending) is bytes and loads(pending)["state"] == "TASK_STATE_COMPLETED"
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


async def test_a_repeat_while_the_write_is_pending_gets_the_same_task_written_once(store: str,
                                                                                     slow_writer: None) -> None:
    app, agent = app_of(store)
    async with A2ATestClient(app) as a2a:
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
        store: str, slow_writer: None, publish: bool, caplog: pytest.LogCaptureFixture) -> None:
    app, agent = app_of(store)
    async with A2ATestClient(app) as a2a:
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
        store: str, slow_writer: None, publish: bool, caplog: pytest.LogCaptureFixture) -> None:
    app, agent = app_of(store)
    async with A2ATestClient(app) as a2a:
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
    async with A2ATestClient(app) as a2a:
        task = (await a2a.send("hi", skill="echo"))["task"]
        stored = await agent.state.get("a2a.tasks", task["id"])
        assert stored is not None and stored.value["state"] == "TASK_STATE_COMPLETED"


async def test_a_record_that_cannot_be_encoded_takes_the_handle_path(store: str, slow_writer: None,
                                                                    caplog: pytest.LogCaptureFixture) -> None:
    app, agent = app_of(store)
    async with A2ATestClient(app):
        registry = registry_of(agent)
        await registry.ready()
        from agentmw.stores.base import TaskRecord

        live = registry.open(TaskRecord(id="bad-1", context_id="c", owner="o", metadata={"tags": {"a", "b"}}))
        registry.status(live, "TASK_STATE_COMPLETED", None)
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
        encode({"x": {1, 2}})  # type: ignore[dict-item]
    with pytest.raises(ValueError):
        encode({"x": float("nan")})
    for state in (MemoryState(), SQLiteState(tmp_path / "encoded.db")):
        assert await state.put("ns", "k", encode({"a": [1, "é"]}), expected_version=0) == 1  # type: ignore[arg-type]
        assert await state.put_many([("ns", f"m{i}", encode({"i": i}), 0) for i in range(3)]) == [1, 1, 1]
        assert (await state.get("ns", "k")).value == {"a": [1, "é"]}  # type: ignore[union-attr]
        assert (await state.get("ns", "m2")).value == {"i": 2}  # type: ignore[union-attr]
        await state.close()


async def test_the_message_id_table_holds_nothing_the_collector_walks(store: str) -> None:
    """Remembered for an hour, a2a_max_message_ids of them: plain tuples, which the collector stops tracking."""
    app, agent = app_of(store)
    async with A2ATestClient(app) as a2a:
        for i in range(3):
            await a2a.send(f"hi {i}", skill="echo")
        table = agent.a2a_app.ops.tasks._messages
        assert len(table) == 3
        for _ in range(3):  # a tuple is untracked once a collection finds only untracked things in it
            gc.collect()
        slots = list(table._entries.values())
        assert [gc.is_tracked(slot) for slot in slots] == [False] * 3, slots
