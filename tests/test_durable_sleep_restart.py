"""A durable sleep across a real process death: an A2A task sleeps (``ctx.sleep``) on process A, A is killed with
SIGKILL in the middle of the sleep, process B takes the task over (its orphan sweep) and wakes at the wake-up time
A recorded, not a full sleep after the take-over; the step before the sleep is not done again. Real ``uvicorn``
processes (``tests/sleep_app.py``) on one SQLite file."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentmw.journal import Journal
from agentmw.state import SQLiteState
from tests.conftest import free_port
from tests.helpers.a2a_raw import V1, send_message
from tests.waiting import eventually, wait_until

ROOT = Path(__file__).resolve().parent.parent
SLEEP = 8.0


class Process:
    """``uvicorn tests.sleep_app:app`` on its own port."""

    def __init__(self, folder: Path, store: str, name: str) -> None:
        self.port = free_port()
        self.log = folder / f"{name}.log"
        env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTMW_")}
        env.update({"AGENTMW_STORE": store, "PYTHONUNBUFFERED": "1"})
        with open(self.log, "w") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "uvicorn", "tests.sleep_app:app", "--app-dir", str(ROOT)]
                + ["--host", "127.0.0.1", "--port", str(self.port), "--log-level", "warning"],
                cwd=folder,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        wait_until(
            self._serves, lambda: f"{name} to serve:\n{self.log.read_text()}", timeout=60, interval=0.1
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _serves(self) -> bool:
        if self.process.poll() is not None:
            raise RuntimeError(f"the server exited:\n{self.log.read_text()}")
        try:
            return httpx.get(f"{self.url}/health", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=10)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[tuple[Process, Process, Path]]:
    db = tmp_path / "sleep.db"
    made: list[Process] = []
    try:
        made.append(Process(tmp_path, f"sqlite:///{db}", "a"))
        made.append(Process(tmp_path, f"sqlite:///{db}", "b"))
        yield made[0], made[1], db
    finally:
        for process in made:
            process.stop()


async def rpc(http: httpx.AsyncClient, url: str, body: dict[str, Any]) -> dict[str, Any]:
    response = await http.post(f"{url}/a2a", json=body, headers=V1)
    assert response.status_code == 200, response.text
    reply = response.json()
    assert "error" not in reply, reply
    return dict(reply["result"])


async def test_a_sleep_outlives_its_process_and_wakes_at_the_recorded_time(
    pair: tuple[Process, Process, Path],
) -> None:
    a, b, db = pair
    async with httpx.AsyncClient(timeout=15) as http:
        body = send_message([{"data": {"seconds": SLEEP}}], metadata={"skill": "nap"})
        body["params"]["configuration"] = {"returnImmediately": True}
        task = (await rpc(http, a.url, body))["task"]
        task_id = task["id"]

        store = SQLiteState(db)
        try:

            async def recorded_wake() -> float | None:
                journal = await Journal.load(store, task_id)
                if journal is None:
                    return None
                for step in journal.steps:
                    if step.get("k") == "agentmw.sleep:1":
                        return float(step["v"])
                return None

            wake = await eventually(recorded_wake, "A to record the sleep's wake-up time", timeout=30)
            began = next(s for s in (await Journal.load(store, task_id)).steps if s.get("k") == "began")  # type: ignore[union-attr]
        finally:
            await store.close()
        assert wake > time.time() + 2, "the test needs time left in the sleep to kill A in it"
        await eventually(lambda: time.time() >= wake - SLEEP + 2.0, "2 s of the sleep to pass", timeout=10)
        a.kill()  # SIGKILL, in the middle of the sleep
        killed = time.time()

        async def finished() -> dict[str, Any] | None:
            found = await rpc(
                http, b.url, {"jsonrpc": "2.0", "id": 2, "method": "GetTask", "params": {"id": task_id}}
            )
            return found if found["status"]["state"] == "TASK_STATE_COMPLETED" else None

        done = await eventually(finished, "B to take the task over and finish it", timeout=60, interval=0.2)

    result = next(
        part["data"] for artifact in done.get("artifacts", []) for part in artifact["parts"] if "data" in part
    )
    assert result["pid"] == b.process.pid  # B finished it
    assert result["began"] == a.process.pid == int(began["v"])  # the step before the sleep was not done again
    assert result["woke"] >= wake  # never before the recorded time
    # at the recorded time: a sleep started over at the take-over would wake at least 8 s after the kill
    assert result["woke"] < wake + 1.5, (result["woke"] - wake, killed)
