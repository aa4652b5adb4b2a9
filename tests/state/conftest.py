"""Fixtures for the state contract: every backend, on real components (a SQLite file, a redis-server, a
PostgreSQL server of the tests' own, tests/state/_postgres.py)."""

from __future__ import annotations

import shutil
import socket
import subprocess
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agentmw.state import MemoryState, SQLiteState, State
from tests.conftest import free_port, require_tool
from tests.state._postgres import SETUP as POSTGRES_SETUP
from tests.state._postgres import PostgresServer, binaries
from tests.waiting import wait_until

BACKENDS = ["memory", "sqlite", "redis", "postgres"]
SHARED = ["sqlite", "redis", "postgres"]  # backends where two instances share one store (processes, replicas)
SETUP = "run scripts/setup (as root it installs Debian's redis-server)"

Open = Callable[..., Awaitable[State]]


def _ping(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")
    except OSError:
        return False


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real redis-server on a free port, with no persistence, for the whole session."""
    binary = require_tool("redis-server", shutil.which("redis-server"), SETUP)
    folder = tmp_path_factory.mktemp("redis")
    port = free_port()
    process = subprocess.Popen(
        [
            binary,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(folder),
            "--daemonize",
            "no",
            "--loglevel",
            "warning",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:

        def up() -> bool:
            if _ping(port):
                return True
            if process.poll() is not None:
                _, err = process.communicate(timeout=5)
                raise RuntimeError(f"redis-server did not start: {err.decode(errors='replace')}")
            return False

        wait_until(up, "redis-server to start", timeout=10, interval=0.02)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def postgres_binaries() -> Path:
    """The folder of Debian's PostgreSQL server binaries (skipped, or failed under CI=true, without them)."""
    found = binaries()
    require_tool("postgres", found / "postgres" if found else None, POSTGRES_SETUP)
    assert found is not None
    return found


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """A real PostgreSQL server on a free port (its own data folder, default durability), for the session."""
    server = PostgresServer(postgres_binaries())
    try:
        yield server
    finally:
        server.close()


@pytest.fixture(scope="session")
def postgres_url(postgres_server: PostgresServer) -> str:
    """``postgresql://agentmw@127.0.0.1:<port>/agentmw``: give each test a ``?schema=`` of its own."""
    return postgres_server.url


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
async def open_store(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Open]:
    """``await open_store(**options)``: a store of the backend under test. Every call on SQLite, Redis or
    Postgres gives another instance (its own connections) on the same file, prefix or schema; memory gives the
    same one."""
    made: list[State] = []
    prefix = f"t{uuid.uuid4().hex[:12]}"
    memory: list[MemoryState] = []
    url = request.getfixturevalue(f"{backend}_url") if backend in ("redis", "postgres") else ""

    async def make(**options: Any) -> State:
        store: State
        if backend == "memory":
            if memory and not options:
                return memory[0]
            store = MemoryState(**options)
            memory.append(store)
        elif backend == "sqlite":
            store = SQLiteState(tmp_path / "state.db", **options)
        elif backend == "postgres":
            from agentmw.state.postgres import PostgresState

            store = PostgresState(url, schema=prefix, **options)
        else:
            from agentmw.state.redis import RedisState

            store = RedisState(url, prefix=prefix, **options)
        made.append(store)
        return store

    yield make
    for store in made:
        await store.close()


@pytest.fixture
async def state(open_store: Open) -> State:
    return await open_store()
