"""One module-level app served by one event loop after another, as FastAPI users test it (a test client per
test, each with its own loop): a task answered on the second loop is found there. Before, the group-commit
writer that the first loop's end had cancelled counted as stopped for good, so nothing more was written and
every later task was "not found"."""

from __future__ import annotations

import asyncio

from agentmw import Agent, skill
from agentmw.testing import A2ATestClient


@skill
async def echo(text: str) -> str:
    """Say it back.

    Summary:
        Says the text back.
    """
    return text


def test_a_task_of_a_second_event_loop_is_stored_and_found() -> None:
    agent = Agent("loops", store="memory://", include=[echo])
    app = agent.asgi()

    async def send_and_get(text: str) -> str:
        async with A2ATestClient(app) as client:
            sent = await client.send(text)
            task = sent.get("task", sent)
            found = await client.get(task["id"])
            return str(found["status"]["state"])

    for n in range(3):  # each asyncio.run ends its loop, cancelling what it still runs
        assert asyncio.run(send_and_get(f"hello {n}")) == "TASK_STATE_COMPLETED"
