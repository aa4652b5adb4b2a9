"""Postgres faults under load (issue 25, "Done when"; the backend of ``src/agentmw/state/postgres.py``): two agent
processes on one real PostgreSQL server of the test's own, loaded through every face while the server is stopped
(a fast shutdown) or killed (``SIGKILL`` of the postmaster and its children: crash recovery from its WAL) for 3 s
and started again on the same data and port. Postgres keeps what it committed, so: 0 acknowledged results lost, 0
HTTP 5xx, 0 tracebacks, 0 hangs, every error marked retryable, recovery by itself (``tests/faults/_harness.py``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.faults._harness import logs, servers, under_fault
from tests.state._postgres import PostgresServer
from tests.state.conftest import postgres_binaries

pytestmark = pytest.mark.timeout(170)


@pytest.fixture
def postgres() -> Iterator[PostgresServer]:
    server = PostgresServer(postgres_binaries())
    try:
        yield server
    finally:
        server.close()


@pytest.mark.parametrize("how", ["stop", "kill"])
async def test_postgres_restart_loses_no_acknowledged_result(
    tmp_path: Path, postgres: PostgresServer, how: str
) -> None:
    down = postgres.stop if how == "stop" else postgres.kill
    with servers(tmp_path, f"{postgres.url}?schema=faults") as made:
        run = await under_fault(f"postgres {how} 3 s", [s.url for s in made], down, postgres.start, hold=3.0)
    assert run.tally.acks, run.failures()
    assert not run.missing, f"{run.failures()}\n{logs(made)}"
    assert not run.tally.bad(), f"{run.failures()}\n{logs(made)}"
