"""The Postgres store beyond the shared contract: its URLs, schemas, large bus messages, ids in commit order, a
schema made by processes starting at once, and faults of a real server (stopped, killed, read-only, a full disk,
a lock held past the command timeout), each raised as StoreUnavailable and recovered from without help."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator

import asyncpg
import pytest

from agentmw.errors import ConfigurationError, StoreUnavailable
from agentmw.state import ANY, Conflict, State, StoreLimits, open_state, parse_store_url
from agentmw.state.postgres import PostgresState
from tests.state._postgres import PostgresServer
from tests.state.conftest import postgres_binaries
from tests.waiting import eventually

pytestmark = pytest.mark.timeout(120)


def schema() -> str:
    return f"t{uuid.uuid4().hex[:12]}"


@pytest.fixture
async def stores(postgres_url: str) -> AsyncIterator[list[PostgresState]]:
    made: list[PostgresState] = []
    yield made
    for store in made:
        await store.close()


@pytest.fixture
def server() -> Iterator[PostgresServer]:
    """A server of this test's own, to stop, kill and start again."""
    own = PostgresServer(postgres_binaries())
    try:
        yield own
    finally:
        own.close()


# --- URLs -------------------------------------------------------------------------------------------------


async def test_urls(postgres_url: str) -> None:
    name = schema()
    store = open_state(f"{postgres_url}?schema={name}&pool_size=3&command_timeout=2.5")
    assert isinstance(store, PostgresState)
    assert (store.schema, store.pool_size, store.command_timeout) == (name, 3, 2.5)
    try:
        assert await store.put("tasks", "t", {"x": 1}, expected_version=None) == 1
    finally:
        await store.close()
    other = open_state(postgres_url.replace("postgresql://", "postgres://") + f"?schema={name}")
    try:
        assert (await other.get("tasks", "t")) == ({"x": 1}, 1)  # the same schema, through the other scheme
    finally:
        await other.close()
    default = parse_store_url("postgresql://app@db.internal:5433/app?sslmode=require")
    assert default.kind == "postgres" and default.options == {}
    assert default.client_url == "postgresql://app@db.internal:5433/app?sslmode=require"
    assert open_state("postgresql://app@db.internal/app").schema == "agentmw"  # type: ignore[attr-defined]
    for bad, problem in (
        ("postgresql://app:s3cret@db:five/app", "the port is a number"),
        ("postgresql://db/app?schema=Has-Caps", "a schema is 1-32 lower-case letters"),
        ("postgresql://db/app?schema=1st", "a schema is 1-32 lower-case letters"),
        ("postgresql://db/app?pool_size=0", "pool_size is an integer above 0"),
        ("postgresql://db/app?command_timeout=soon", "command_timeout is a number of seconds above 0"),
        ("postgresql://db/app#x", "no fragment"),
    ):
        with pytest.raises(ConfigurationError) as refused:
            parse_store_url(bad)
        assert problem in str(refused.value) and "s3cret" not in str(refused.value)


def test_asyncpg_is_imported_lazily() -> None:
    code = (
        "import sys, agentmw, agentmw.state; from agentmw.state import open_state, check_store; "
        "open_state('memory://'); check_store('postgresql://db/app'); print('asyncpg' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# --- what only Postgres has to show ---------------------------------------------------------------------


async def test_schemas_keep_agents_apart(postgres_url: str, stores: list[PostgresState]) -> None:
    one, two = PostgresState(postgres_url, schema=schema()), PostgresState(postgres_url, schema=schema())
    stores += [one, two]
    await one.put("tasks", "t", {"agent": 1}, expected_version=None)
    assert await two.get("tasks", "t") is None
    assert await two.put("tasks", "t", {"agent": 2}, expected_version=None) == 1
    assert await one.set_if_absent("idem", "k", {"x": 1}, ttl=5)
    assert await two.set_if_absent("idem", "k", {"x": 2}, ttl=5)
    await one.append("runs", "r", {"x": 1})
    assert await two.read("runs", "r") == []
    async with two.subscribe("tasks") as sub:
        await one.publish("tasks", {"x": 1})
        assert await sub.get(timeout=0.3) is None
    conn = await asyncpg.connect(postgres_url)
    try:
        tables = {
            r[0]
            for r in await conn.fetch(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = $1", one.schema
            )
        }
    finally:
        await conn.close()
    assert tables == {"meta", "records", "keys", "logs", "entries", "bus"}


async def test_large_bus_messages_arrive_whole_and_in_order(
    postgres_url: str, stores: list[PostgresState]
) -> None:
    name = schema()
    a, b = PostgresState(postgres_url, schema=name), PostgresState(postgres_url, schema=name)
    stores += [a, b]
    big = "é" * 5000  # 10,000 bytes: past a notification's 8,000
    channel = "c" * 1024  # the longest channel, which alone nearly fills a payload
    async with a.subscribe("events", channel) as sub:
        sent = []
        for n in range(12):
            message = {"n": n, "text": big if n % 3 == 1 else "small"}
            sent.append(("events" if n % 2 else channel, message))
            await b.publish(*sent[-1])
        got = [await sub.get(timeout=5) for _ in sent]
        assert got == sent
        assert await sub.get(timeout=0.2) is None


async def test_concurrent_appends_are_read_in_commit_order(
    postgres_url: str, stores: list[PostgresState]
) -> None:
    """Appenders on four connections race on one log while a reader on a fifth tails it: ids increase in the
    order the reader meets them and none is missed, so no smaller id ever commits after a larger one was read."""
    name = schema()
    writers = [PostgresState(postgres_url, schema=name) for _ in range(4)]
    reader = PostgresState(postgres_url, schema=name)
    stores += [*writers, reader]
    seen: list[int] = []

    async def follow() -> None:
        async for event_id, _ in reader.tail("runs", "hot", wait=1):
            seen.append(event_id)
            if len(seen) == 200:
                return

    async def write(store: State, w: int) -> list[int]:
        return [await store.append("runs", "hot", {"w": w, "n": n}) for n in range(50)]

    follower = asyncio.ensure_future(follow())
    appended = await asyncio.gather(*(write(s, w) for w, s in enumerate(writers)))
    await asyncio.wait_for(follower, 20)
    assert seen == sorted(seen) and set(seen) == {i for ids in appended for i in ids}
    assert [e["n"] for _, e in await reader.read("runs", "hot", limit=1000) if e["w"] == 2] == list(range(50))


async def test_ids_are_never_reused_when_a_log_is_gone(open_postgres: State) -> None:
    first = await open_postgres.append("few", "a", {"n": 0})
    for n in range(3):  # max_count=1: each new log drops the others, "a" among them
        await open_postgres.append("few", f"other{n}", {"n": n})
    assert await open_postgres.read("few", "a") == []
    again = await open_postgres.append("few", "a", {"n": 1})
    assert again > first and await open_postgres.read("few", "a") == [(again, {"n": 1})]


@pytest.fixture
async def open_postgres(postgres_url: str, stores: list[PostgresState]) -> State:
    store = PostgresState(postgres_url, schema=schema(), limits={"few": StoreLimits(max_count=1)})
    stores.append(store)
    return store


async def test_processes_starting_at_once_make_the_schema_once(postgres_url: str) -> None:
    name = schema()
    code = (
        "import asyncio, sys\n"
        "from agentmw.state.postgres import PostgresState\n"
        "async def main():\n"
        f"    store = PostgresState({postgres_url!r}, schema={name!r})\n"
        "    try:\n"
        "        print(await store.put('race', 'k', {'by': sys.argv[1]}, expected_version=-1))\n"
        "    finally:\n"
        "        await store.close()\n"
        "asyncio.run(main())\n"
    )

    def race() -> tuple[list[subprocess.Popen[bytes]], list[tuple[bytes, bytes]]]:
        processes = [
            subprocess.Popen(
                [sys.executable, "-c", code, str(i)], stdout=subprocess.PIPE, stderr=subprocess.PIPE
            )
            for i in range(6)
        ]
        return processes, [p.communicate(timeout=60) for p in processes]

    processes, results = await asyncio.to_thread(race)
    assert [p.returncode for p in processes] == [0] * 6, [err.decode()[-2000:] for _, err in results]
    assert sorted(int(out) for out, _ in results) == [1, 2, 3, 4, 5, 6]


# --- faults of a real server ------------------------------------------------------------------------------


async def unavailable(call: asyncio.Future | object, within: float) -> StoreUnavailable:
    started = time.monotonic()
    with pytest.raises(StoreUnavailable) as raised:
        await call  # type: ignore[misc]
    assert time.monotonic() - started < within, (
        f"the fault took {time.monotonic() - started:.1f} s to surface"
    )
    return raised.value


async def test_a_stopped_server_is_unavailable_then_recovered_from(server: PostgresServer) -> None:
    store = PostgresState(server.url, schema="faults", command_timeout=2, connect_timeout=2)
    watcher = PostgresState(server.url, schema="faults", command_timeout=2, connect_timeout=2)
    try:
        await store.put("tasks", "t", {"n": 0}, expected_version=None)
        async with watcher.subscribe("events") as sub:
            reader = asyncio.ensure_future(watcher.read("runs", "r", block=30))
            await asyncio.sleep(0.2)
            await asyncio.to_thread(server.stop)
            fault = await unavailable(store.put("tasks", "t", {"n": 1}, expected_version=1), within=5)
            assert "Postgres" in str(fault) and fault.retry_after
            await unavailable(store.get("tasks", "t"), within=5)
            await unavailable(store.append("runs", "r", {"n": 0}), within=5)
            await unavailable(store.set_if_absent("lease", "l", {"owner": "a"}, ttl=5), within=5)
            await asyncio.to_thread(server.start)

            async def back() -> bool:
                try:
                    return await store.get("tasks", "t") == ({"n": 0}, 1)
                except StoreUnavailable:
                    return False

            await eventually(back, "the store to reconnect by itself", timeout=10)
            assert await store.put("tasks", "t", {"n": 1}, expected_version=1) == 2
            # the listener reconnected too: the blocked reader and the subscription work across the restart
            appended = await store.append("runs", "r", {"n": 1})
            assert await asyncio.wait_for(reader, 10) == [(appended, {"n": 1})]

            async def delivered() -> bool:
                await store.publish("events", {"after": "restart"})
                return await sub.get(timeout=0.3) == ("events", {"after": "restart"})

            await eventually(delivered, "the subscription to listen again", timeout=10)
    finally:
        await store.close()
        await watcher.close()


async def test_acknowledged_writes_survive_a_kill_9_of_the_server(server: PostgresServer) -> None:
    store = PostgresState(server.url, schema="crash", command_timeout=2, connect_timeout=2)
    acknowledged: dict[str, int] = {}
    ids: list[int] = []
    stop = asyncio.Event()

    async def write(w: int) -> None:
        n = 0
        while not stop.is_set():
            try:
                version = await store.put("tasks", f"w{w}", {"n": n}, expected_version=-1)
                acknowledged[f"w{w}"] = n
                ids.append(await store.append("runs", "log", {"w": w, "n": n}))
                assert version > 0
            except StoreUnavailable:
                await asyncio.sleep(0.05)
            n += 1

    try:
        writers = [asyncio.ensure_future(write(w)) for w in range(4)]
        await eventually(lambda: len(ids) >= 100, "the writers to get going", timeout=20)
        await asyncio.to_thread(server.kill)
        await asyncio.sleep(0.3)
        stop.set()
        await asyncio.gather(*writers)
        await asyncio.to_thread(server.start)  # crash recovery replays the WAL

        async def back() -> bool:
            try:
                return await store.get("tasks", "w0") is not None
            except StoreUnavailable:
                return False

        await eventually(back, "the store to reconnect", timeout=15)
        for key, n in acknowledged.items():
            found = await store.get("tasks", key)
            assert found is not None and found.value["n"] >= n, (key, n, found)
        kept = {i for i, _ in await store.read("runs", "log", limit=1000)}
        assert set(ids) - kept == set(), "an acknowledged append was lost"
    finally:
        await store.close()


async def test_a_read_only_server_refuses_writes_as_unavailable(server: PostgresServer) -> None:
    store = PostgresState(server.url, schema="ro", command_timeout=2)
    admin = await asyncpg.connect(server.url)
    try:
        await store.put("tasks", "t", {"n": 0}, expected_version=None)
        await admin.execute("ALTER SYSTEM SET default_transaction_read_only = on")
        await admin.execute("SELECT pg_reload_conf()")

        async def refused() -> bool:
            try:
                await store.put("tasks", "probe", {"n": 1}, expected_version=ANY)
            except StoreUnavailable as fault:
                return "read-only" in str(fault)
            return False

        await eventually(refused, "writes to be refused", timeout=10)
        assert (await store.get("tasks", "t")) == ({"n": 0}, 1)  # reads go on, nothing was written
        await unavailable(store.put("tasks", "t", {"n": 1}, expected_version=1), within=3)
        await unavailable(store.append("runs", "r", {"n": 1}), within=3)
        await unavailable(store.set_key("lease", "k", {"owner": "a"}, ttl=5), within=3)
        assert (await store.get("tasks", "t")) == ({"n": 0}, 1)
        await admin.execute("ALTER SYSTEM RESET default_transaction_read_only")
        await admin.execute("SELECT pg_reload_conf()")

        async def writable() -> bool:
            try:
                return await store.put("tasks", "t", {"n": 2}, expected_version=1) == 2
            except StoreUnavailable:
                return False

        await eventually(writable, "writes to be taken again", timeout=10)
    finally:
        await admin.close()
        await store.close()


async def test_a_full_disk_is_unavailable_and_nothing_is_written(
    postgres_url: str, stores: list[PostgresState]
) -> None:
    """The server's own disk_full error (SQLSTATE 53100), raised by a trigger on the records table."""
    store = PostgresState(postgres_url, schema=schema())
    stores.append(store)
    await store.put("tasks", "t", {"n": 0}, expected_version=None)
    admin = await asyncpg.connect(postgres_url)
    try:
        await admin.execute(
            f"CREATE FUNCTION {store.schema}.no_space() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
            "RAISE EXCEPTION 'could not extend file: No space left on device' USING ERRCODE = 'disk_full'; END $$; "
            f"CREATE TRIGGER no_space BEFORE INSERT OR UPDATE ON {store.schema}.records "
            f"FOR EACH ROW EXECUTE FUNCTION {store.schema}.no_space()"
        )
        fault = await unavailable(store.put("tasks", "t", {"n": 1}, expected_version=1), within=3)
        assert "out of resources" in str(fault)
        await unavailable(store.put_many([("tasks", "u", {"n": 1}, None), ("tasks", "t", {}, 1)]), within=3)
        await admin.execute(f"DROP TRIGGER no_space ON {store.schema}.records")
    finally:
        await admin.close()
    assert await store.get("tasks", "u") is None and (await store.get("tasks", "t")) == ({"n": 0}, 1)
    assert await store.put("tasks", "t", {"n": 1}, expected_version=1) == 2


async def test_a_lock_held_past_the_command_timeout(postgres_url: str, stores: list[PostgresState]) -> None:
    store = PostgresState(postgres_url, schema=schema(), command_timeout=0.5)
    stores.append(store)
    await store.put("tasks", "t", {"n": 0}, expected_version=None)
    admin = await asyncpg.connect(postgres_url)
    try:
        blocker = admin.transaction()
        await blocker.start()
        await admin.execute(f"LOCK TABLE {store.schema}.records IN ACCESS EXCLUSIVE MODE")
        fault = await unavailable(store.put("tasks", "t", {"n": 1}, expected_version=1), within=2)
        assert "in time" in str(fault)
        await blocker.rollback()
    finally:
        await admin.close()
    assert await store.put("tasks", "t", {"n": 1}, expected_version=1) == 2
    with pytest.raises(Conflict):
        await store.put("tasks", "t", {"n": 1}, expected_version=1)


async def test_a_server_down_at_the_first_call(server: PostgresServer) -> None:
    await asyncio.to_thread(server.stop)
    store = PostgresState(server.url, schema="late", connect_timeout=1)
    try:
        await unavailable(store.get("tasks", "t"), within=3)
        with pytest.raises(StoreUnavailable):
            async with store.subscribe("x"):
                pass
        await unavailable(store.read("runs", "r", block=5), within=3)
        await asyncio.to_thread(server.start)
        assert await store.put("tasks", "t", {"n": 0}, expected_version=None) == 1
    finally:
        await store.close()


async def test_many_subscriptions_and_blocked_reads_start_at_once(
    postgres_url: str, stores: list[PostgresState]
) -> None:
    """Their LISTENs share one connection, which runs one statement at a time: none may collide."""
    name = schema()
    store, other = PostgresState(postgres_url, schema=name), PostgresState(postgres_url, schema=name)
    stores += [store, other]

    async def one(i: int) -> tuple[object, object]:
        async with store.subscribe(f"c{i}") as sub:
            reader = asyncio.ensure_future(store.read("runs", f"l{i}", block=5))
            await eventually(lambda: f"c{i}" in store._hub.channels, "the subscription to be live")
            await other.publish(f"c{i}", {"i": i})
            appended = await other.append("runs", f"l{i}", {"i": i})
            return await sub.get(timeout=5), (await reader) == [(appended, {"i": i})]

    results = await asyncio.gather(*(one(i) for i in range(30)))
    assert results == [((f"c{i}", {"i": i}), True) for i in range(30)]
