"""SQLite on the event loop: reads and short writes on the loop's connection, the thread when the write lock
is taken (each operation still done exactly once), long operations and checkpoints on the thread."""

from __future__ import annotations

import asyncio
import os
import sqlite3
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from agentmw.state import ANY, Conflict, SQLiteState, StoreLimits
from tests.waiting import stays

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SQLiteState]:
    state = SQLiteState(
        tmp_path / "loop.db", synchronous="NORMAL"
    )  # the loop path: FULL writes on the thread
    await state.get("warm", "up")  # the first call opens both connections, on the thread
    yield state
    await state.close()


def count_thread_calls(state: SQLiteState) -> list[Any]:
    calls: list[Any] = []
    run = state._run

    async def counted(fn: Callable[[sqlite3.Connection], Any]) -> Any:
        calls.append(fn)
        return await run(fn)

    state._run = counted  # type: ignore[method-assign]
    return calls


async def every_short_operation(state: SQLiteState) -> None:
    await state.put("tasks", "t", {"n": 1}, expected_version=ANY)
    found = await state.get("tasks", "t")
    assert found is not None
    await state.put("tasks", "t", {"n": 2}, expected_version=found.version)
    with pytest.raises(Conflict):
        await state.put("tasks", "t", {"n": 3}, expected_version=found.version)
    assert len(await state.put_many([("tasks", "a", {}, ANY), ("tasks", "b", {}, ANY)])) == 2
    await state.scan("tasks", limit=10)
    assert await state.set_if_absent("idem", "k", {"x": 1}, ttl=5)
    assert await state.get_key("idem", "k") == {"x": 1}
    assert await state.renew("idem", "k", "nobody", ttl=5) is False
    assert await state.delete_key("idem", "k")
    event_id = await state.append("runs", "r", {"n": 1})
    assert len(await state.append_many([("runs", "r", {"n": 2}), ("runs", "r", {"n": 3})])) == 2
    assert len(await state.read("runs", "r", after_id=event_id - 1)) == 3
    await state.publish("bus", {"hello": 1})
    assert await state.delete("tasks", "t")


async def test_short_operations_stay_on_the_loop(store: SQLiteState) -> None:
    calls = count_thread_calls(store)
    await every_short_operation(store)
    assert len(calls) == 4  # the first write of each namespace and kind prunes it: on the thread
    calls.clear()
    await every_short_operation(store)  # within the second: no prune is due
    assert calls == [] and store.fallbacks == 0


async def test_synchronous_full_writes_on_the_thread(tmp_path: Path) -> None:
    state = SQLiteState(tmp_path / "full.db", synchronous="FULL")
    try:
        await state.put("tasks", "t", {}, expected_version=None)
        calls = count_thread_calls(state)
        await state.get("tasks", "t")
        assert calls == []  # reads still on the loop
        await state.put("tasks", "t", {}, expected_version=1)
        await state.append("runs", "r", {})
        assert len(calls) == 2
    finally:
        await state.close()


async def test_long_operations_go_to_the_thread(store: SQLiteState) -> None:
    calls = count_thread_calls(store)
    await store.scan("tasks", where={"owner": "a"})
    await store.scan("tasks", total=True)
    await store.read("runs", "r", limit=500)
    await store.put_many([("tasks", f"k{i}", {}, ANY) for i in range(65)])
    await store.append_many([("runs", "r", {"i": i}) for i in range(65)])
    assert len(calls) == 5


async def test_prunes_go_to_the_thread(tmp_path: Path) -> None:
    state = SQLiteState(
        tmp_path / "prune.db", limits={"few": StoreLimits(max_count=40)}, synchronous="NORMAL"
    )  # a prune every 2 writes; NORMAL: the others stay on the loop
    try:
        await state.get("warm", "up")
        calls = count_thread_calls(state)
        for i in range(10):
            await state.put("few", f"k{i}", {}, expected_version=None)
        assert 4 <= len(calls) <= 6
    finally:
        await state.close()


@pytest.fixture
def locker(store: SQLiteState) -> Any:
    """Another connection to the file (another process, as far as SQLite knows) that can hold the write lock."""
    other = sqlite3.connect(store.path, isolation_level=None, check_same_thread=False)
    yield other
    if other.in_transaction:
        other.execute("ROLLBACK")
    other.close()


async def test_lock_taken_reads_stay_writes_wait_on_the_thread(store: SQLiteState, locker: Any) -> None:
    await store.put("tasks", "t", {"n": 1}, expected_version=None)
    await store.append("runs", "r", {"n": 0})
    locker.execute("BEGIN IMMEDIATE")
    locker.execute("INSERT INTO state_keys (ns, key, expires, body) VALUES ('x', 'y', 1e12, '{}')")
    calls = count_thread_calls(store)
    assert await store.get("tasks", "t") == ({"n": 1}, 1)  # WAL: a reader does not wait for the writer
    assert len(await store.read("runs", "r")) == 1 and calls == []

    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0.01)

    beat = asyncio.ensure_future(ticker())
    writes = asyncio.gather(
        store.put("tasks", "t", {"n": 2}, expected_version=1),
        store.put_many([("tasks", "t", {"n": 3}, 2), ("tasks", "u", {}, None)]),
        store.append_many([("runs", "r", {"n": 1}), ("runs", "r", {"n": 2})]),
        store.set_if_absent("idem", "k", {}, ttl=5),
    )
    await stays(lambda: not writes.done(), "the writes wait for the lock", seconds=0.3)
    assert not writes.done() and ticks >= 10  # the loop runs while the writes wait for the lock
    locker.execute("COMMIT")
    version, many, ids, took = await asyncio.wait_for(writes, 10)
    beat.cancel()
    assert version == 2 and many == [3, 1] and len(ids) == 2 and took is True
    assert store.fallbacks == 3 and len(calls) == 4  # set_if_absent: the first of its namespace, a prune
    assert [e["n"] for _, e in await store.read("runs", "r")] == [0, 1, 2]  # each done once
    assert await store.get("tasks", "t") == ({"n": 3}, 3)


class _BusyAt:
    """A stand-in for the loop's connection that fails with SQLITE_BUSY at its n-th statement."""

    def __init__(self, db: sqlite3.Connection, n: int) -> None:
        self.db, self.n = db, n

    @property
    def in_transaction(self) -> bool:
        return self.db.in_transaction

    def execute(self, sql: str, *args: Any) -> Any:
        self.n -= 1
        if self.n == 0:
            error = sqlite3.OperationalError("database is locked")
            error.sqlite_errorcode = 5  # type: ignore[attr-defined]
            raise error
        return self.db.execute(sql, *args)


@pytest.mark.parametrize("at", [1, 2, 3, 4, 5])  # BEGIN, each of the three items, COMMIT
async def test_busy_in_the_middle_of_a_transaction_is_retried_whole(store: SQLiteState, at: int) -> None:
    await store.put("tasks", "a", {"n": 0}, expected_version=None)
    await store.append("runs", "warm", {})  # the first write of each namespace prunes it, on the thread
    real = store._ldb
    assert real is not None
    store._ldb = _BusyAt(real, at)  # type: ignore[assignment]
    try:
        results = await store.put_many(
            [("tasks", "a", {"n": 1}, 1), ("tasks", "b", {}, None), ("tasks", "a", {"n": 2}, 2)]
        )
    finally:
        store._ldb = real
    assert results == [2, 1, 3] and store.fallbacks == 1
    assert not real.in_transaction
    assert await store.get("tasks", "a") == ({"n": 2}, 3)

    store._ldb = _BusyAt(real, at)  # type: ignore[assignment]
    try:
        ids = await store.append_many([("runs", "r", {"n": n}) for n in range(3)])
    finally:
        store._ldb = real
    assert store.fallbacks == 2 and not real.in_transaction
    assert [e for _, e in await store.read("runs", "r")] == [{"n": n} for n in range(3)]
    assert [i for i, _ in await store.read("runs", "r")] == ids


async def test_checkpoints_run_on_the_thread_and_bound_the_wal(store: SQLiteState) -> None:
    calls = count_thread_calls(store)
    for i in range(3000):
        await store.put("tasks", f"k{i % 500}", {"i": i, "pad": "x" * 200}, expected_version=ANY)
        if i % 200 == 0:
            await asyncio.sleep(0)  # let a checkpoint run
    assert store._checkpointer is not None
    await store._checkpointer
    assert len(calls) >= 3000 // 256 - 1  # a passive checkpoint every 256 writes, and nothing else
    await store.put("tasks", "last", {}, expected_version=ANY)
    assert os.path.getsize(store.path + "-wal") < 8 * 1024 * 1024  # without checkpoints: about 25 MB


async def test_a_store_used_from_another_loop_thread_uses_the_thread(store: SQLiteState) -> None:
    await store.put("tasks", "t", {}, expected_version=None)

    def elsewhere() -> Any:
        return asyncio.run(store.get("tasks", "t"))

    calls = count_thread_calls(store)
    assert (await asyncio.to_thread(elsewhere)) == ({}, 1)
    assert len(calls) == 1
