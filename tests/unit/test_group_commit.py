"""The task writer's group commit (``lifecycle.Commits`` over ``WriteBehind``), with no server: on a real SQLite
file and the memory state.

- concurrent waiters share batches (fewer ``put_many`` than records), and each is woken only once its own
  record is in the store;
- a write the store refuses is kept and tried again (never dropped); its waiter gets ``StoreUnavailable``
  after its timeout, and the record is written once the store takes writes again;
- a record that cannot be encoded is given up, its waiter told, and the writer goes on;
- a flush writes at once even while the writer would wait for company, and a batch tried again counts once.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from agentmw.errors import StoreUnavailable
from agentmw.lifecycle import Commits, Handle, TaskRecord, WriteBehind
from agentmw.state import MemoryState, SQLiteState, State
from tests.waiting import eventually

NS = "t.tasks"


class Refusing:
    """Wraps a real state: while ``down``, every write raises StoreUnavailable (as a full or locked store's
    does); ``batches`` counts the put_many calls that reached the state."""

    def __init__(self, state: State) -> None:
        self.state = state
        self.down = False
        self.batches: list[int] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.state, name)

    async def put_many(self, items: Any) -> Any:
        if self.down:
            raise StoreUnavailable("the test's store refuses writes")
        self.batches.append(len(items))
        return await self.state.put_many(items)

    async def put(self, *args: Any, **kwargs: Any) -> Any:
        if self.down:
            raise StoreUnavailable("the test's store refuses writes")
        return await self.state.put(*args, **kwargs)

    async def append(self, *args: Any, **kwargs: Any) -> Any:
        if self.down:
            raise StoreUnavailable("the test's store refuses writes")
        return await self.state.append(*args, **kwargs)


@pytest.fixture(params=["memory", "sqlite"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    state: State = MemoryState() if request.param == "memory" else SQLiteState(tmp_path / "group.db")
    yield Refusing(state)
    await state.close()


def commits_of(store: Any, delay: float = 0.0) -> Commits[Handle]:
    async def nothing(*_: Any) -> None:
        return None

    return Commits(
        store,
        tasks=NS,
        events="t.events",
        replica="r1",
        label="TEST",
        present=nothing,
        adopt=nothing,
        pushed=lambda _id: None,
        delay=lambda: delay,
        stop=lambda: False,
    )


def settled(task_id: str, state: str = "TASK_STATE_COMPLETED") -> Handle:
    return Handle(TaskRecord(task_id, "c", "o", state=state), dirty=True)


async def test_concurrent_waiters_share_batches_and_wake_once_their_record_is_stored(store: Any) -> None:
    commits = commits_of(store)

    async def request(n: int) -> None:
        # half settle for good (their one final write), half are published and stay interrupted
        handle = settled(f"t{n}") if n % 2 else settled(f"t{n}", "TASK_STATE_INPUT_REQUIRED")
        if n % 2 == 0:
            handle.published = True
        commits.schedule(handle)
        await commits.committed(f"t{n}", 10.0)
        found = await store.state.get(NS, f"t{n}")
        assert found is not None and found.value["state"] == handle.record.state  # woken after the commit
        assert f"t{n}" not in commits.unwritten

    await asyncio.gather(*(request(n) for n in range(40)))
    assert commits.writes == 40 and commits.pending == 0
    assert sum(store.batches) == 40 and len(store.batches) < 40, store.batches  # grouped
    assert max(store.batches) > 1


async def test_a_refused_write_is_kept_retried_and_its_waiter_told_in_bounded_time(store: Any) -> None:
    commits = commits_of(store)
    store.down = True
    handle = settled("kept")
    commits.schedule(handle)
    loop = asyncio.get_running_loop()
    started = loop.time()
    with pytest.raises(StoreUnavailable) as refused:
        await commits.committed("kept", 0.5)
    assert loop.time() - started < 3.0
    assert refused.value.retry_after is not None
    assert "kept" in commits.unwritten and commits.pending == 1 and commits.failures >= 1
    assert await store.state.get(NS, "kept") is None
    await eventually(lambda: commits.failures >= 3, "the write to be tried again")
    assert commits.pending == 1  # tried again, counted once
    store.down = False
    await commits.committed("kept", 10.0)
    found = await store.state.get(NS, "kept")
    assert found is not None and found.value["state"] == "TASK_STATE_COMPLETED"
    assert commits.failures == 0 and commits.failing_since is None and commits.pending == 0
    assert commits.writes == 1


async def test_a_refused_handle_keeps_its_events_and_record_for_the_next_try(store: Any) -> None:
    commits = commits_of(store)
    handle = settled("followed", "TASK_STATE_WORKING")
    handle.published = True
    handle.events = [{"n": 1}, {"n": 2}]
    store.down = True
    commits.schedule(handle)
    await eventually(lambda: commits.failures >= 2, "the write to be refused")
    assert handle.events == [{"n": 1}, {"n": 2}] and handle.dirty
    store.down = False
    await commits.committed("followed", 10.0)
    logged = await store.state.read("t.events", "followed", 0, 10)
    assert [event for _, event in logged] == [{"n": 1}, {"n": 2}]  # each appended once
    found = await store.state.get(NS, "followed")
    assert found is not None and found.value["log_id"] == logged[-1][0]


async def test_a_record_that_cannot_be_encoded_is_given_up_and_the_writer_goes_on(store: Any) -> None:
    commits = commits_of(store)
    bad = Handle(TaskRecord("bad", "c", "o", state="TASK_STATE_WORKING", metadata={"s": {1, 2}}), dirty=True)
    bad.published = True
    commits.schedule(bad)
    with pytest.raises(RuntimeError, match="cannot be stored"):
        await commits.committed("bad", 10.0)
    good = settled("good")
    commits.schedule(good)
    await commits.committed("good", 10.0)
    assert await store.state.get(NS, "good") is not None and await store.state.get(NS, "bad") is None
    assert commits.failures == 0 and commits.pending == 0


async def test_a_flush_writes_at_once_and_a_batch_tried_again_counts_once() -> None:
    written: list[list[int]] = []
    failing = [True]
    writer: WriteBehind[int]

    async def write(batch: list[int]) -> None:
        if failing[0]:
            failing[0] = False
            writer.again(batch)  # refused once: the same items, queued again
            return
        written.append(batch)
        writer.done(len(batch))

    writer = WriteBehind(write, lambda: 60.0, "test-writer")  # would wait a minute for company
    for n in range(3):
        writer.add(n)
    assert writer.pending == 3
    await asyncio.wait_for(writer.flush(), 5)
    assert written == [[0, 1, 2]] and writer.pending == 0
    writer.close()
    assert writer.task is not None
    await asyncio.wait_for(writer.task, 5)
