"""Deploys under a parked execution (issue 25, "Done when"): an A2A task parks on a question of ``parked`` on
two agent processes (one SQLite file); both are stopped and started as a new deploy, and the answer comes. A deploy
that changed the function (another step before the question) fails the task clearly, "replay diverged"; one that
removed it fails it with a message naming the function, never the untrue "the agent lost this task"."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.faults._harness import AUTH, a2a_get, a2a_send, client, logs, screen, servers
from tests.helpers.a2a_raw import V1, send_message

pytestmark = pytest.mark.timeout(170)


@pytest.mark.parametrize("deploy", ["v2", "gone"])
async def test_a_deploy_under_a_parked_task_fails_it_clearly(tmp_path: Path, deploy: str) -> None:
    with servers(
        tmp_path, f"sqlite:///{tmp_path / 'state.db'}", extra_env={"AGENTMW_FAULTS_VERSION": "v1"}
    ) as made:
        async with client() as http:
            ack, _ = await a2a_send(http, made[0].url, "parked", "deploy")
            assert ack.state == "TASK_STATE_INPUT_REQUIRED", ack
            for server in made:  # the new deploy: every process stopped, then started on the new code
                server.stop()
            for server in made:
                server.extra_env["AGENTMW_FAULTS_VERSION"] = deploy
                server.start()
            body = send_message([{"data": {"go": True}}], taskId=ack.id)
            response = await http.post(f"{made[1].url}/a2a", json=body, headers={**V1, **AUTH})
            screen(response, response.text)
            reply = response.json()
            if "error" in reply:
                text = str(reply["error"])
            else:
                task = reply["result"]["task"]
                assert task["status"]["state"] == "TASK_STATE_FAILED", f"{task['status']}\n{logs(made)}"
                text = str(task["status"])
            again = await a2a_get(http, made[0].url, ack.id)  # the other replica says the same
            assert again["status"]["state"] == "TASK_STATE_FAILED", again["status"]
    assert "lost" not in text, text
    if deploy == "v2":
        assert "diverged" in text, text
    else:
        assert "parked" in text, text
