"""A poison pill (issue 25, "Done when"): a skill whose one-time step kills the process that runs it
(``os._exit``). Two agent processes on one SQLite file, each restarted when it dies (as a supervisor would), with
short leases and ``Limits.max_recovery_attempts=2``: the task is taken over at most that many times, then ends as a
dead letter, FAILED with a message that says it was given up, on every replica, and nothing dies any more."""

from __future__ import annotations

import asyncio
import contextlib
import time
from pathlib import Path

import pytest

from tests.faults._harness import AUTH, a2a_get, client, logs, servers
from tests.helpers.a2a_raw import V1, send_message
from tests.waiting import eventually, stays

pytestmark = pytest.mark.timeout(170)
LIMIT = 2


async def test_a_poison_pill_ends_as_a_dead_letter_after_the_recovery_limit(tmp_path: Path) -> None:
    env = {"AGENTMW_FAULTS_FAST": "1", "AGENTMW_FAULTS_MAX_RECOVERIES": str(LIMIT)}
    with servers(tmp_path, f"sqlite:///{tmp_path / 'state.db'}", extra_env=env) as made:
        deaths: list[float] = []
        supervising = True

        async def supervise() -> None:
            while supervising:
                for server in made:
                    if not server.alive:
                        deaths.append(time.monotonic())
                        await asyncio.to_thread(server.start)
                await asyncio.sleep(0.05)

        supervisor = asyncio.create_task(supervise())
        try:
            async with client() as http:
                body = send_message([{"data": {"label": "pill"}}], metadata={"skill": "poison"})
                body["params"]["configuration"] = {"returnImmediately": True}
                answer = await http.post(f"{made[0].url}/a2a", json=body, headers={**V1, **AUTH})
                assert answer.status_code == 200, answer.text
                task_id = answer.json()["result"]["task"]["id"]
                seen: list[str] = []

                async def dead_letter() -> dict | None:
                    for server in made:
                        if not server.alive:
                            continue
                        with contextlib.suppress(Exception):
                            task = await a2a_get(http, server.url, task_id)
                            seen.append(task["status"]["state"])
                            if task["status"]["state"] == "TASK_STATE_FAILED":
                                return task
                    return None

                failed = await eventually(
                    dead_letter,
                    lambda: (
                        f"the poison pill to be given up ({len(deaths)} deaths, states {seen[-5:]}):\n{logs(made)}"
                    ),
                    timeout=120,
                    interval=0.3,
                )
                text = str(failed["status"])
                assert "given up" in text and "recover" in text, text
                assert len(deaths) <= LIMIT + 1, f"{len(deaths)} replica deaths for a limit of {LIMIT}"
                died = len(deaths)
                await stays(lambda: len(deaths) == died, "no replica dies after the dead letter", seconds=6)
                for server in made:  # every replica tells the caller the same
                    got = await a2a_get(http, server.url, task_id)
                    assert got["status"]["state"] == "TASK_STATE_FAILED", got
        finally:
            supervising = False
            await supervisor
