"""A text-only A2A 0.3 client, as google-adk's ``RemoteA2aAgent`` is one: a2a-sdk 0.3's own ``Client`` (and its
``ClientTaskManager``) sending each user turn as one text part, with no metadata, on the task the previous turn
left waiting for input. Run by the 0.3 venv's python (``.deps/a2a03``; tests/test_a2a_text_clients.py).

Reads ``{"url": <base url>, "turns": [<text>, ...], "streaming": bool}`` on stdin and prints one JSON object:
per turn, the events the client yielded and the task it assembled; then what ``get_task`` returns.
"""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from typing import Any

import httpx
from a2a.client import ClientConfig, ClientFactory
from a2a.types import Message, Part, Role, Task, TaskQueryParams, TextPart


def texts(parts: Any) -> list[str]:
    return [p.root.text for p in parts or [] if p.root.kind == "text"]


def summary(task: Task) -> dict[str, Any]:
    return {
        "id": task.id,
        "context_id": task.context_id,
        "state": task.status.state.value,
        "status_text": "\n".join(texts(task.status.message.parts if task.status.message else [])),
        "artifacts": [
            {
                "id": a.artifact_id,
                "name": a.name,
                "parts": [p.root.model_dump(mode="json", exclude_none=True) for p in a.parts],
            }
            for a in task.artifacts or []
        ],
    }


async def turn(client: Any, text: str, task: Task | None) -> tuple[dict[str, Any], Task | None]:
    message = Message(
        role=Role.user,
        message_id=str(uuid.uuid4()),
        parts=[Part(root=TextPart(text=text))],
        task_id=task.id if task is not None and task.status.state.value == "input-required" else None,
        context_id=task.context_id if task is not None else None,
    )
    events: list[dict[str, Any]] = []
    last = None
    async for item in client.send_message(message):
        if isinstance(item, Message):
            events.append({"kind": "message", "text": "".join(texts(item.parts))})
            continue
        last, update = item
        entry: dict[str, Any] = {
            "kind": update.kind if update is not None else "task",
            "state": last.status.state.value,
        }
        if update is not None and update.kind == "artifact-update":
            entry |= {"append": update.append, "last_chunk": update.last_chunk}
        events.append(entry)
    return {"events": events, "task": summary(last) if last else None}, last


async def main() -> None:
    request = json.load(sys.stdin)
    async with httpx.AsyncClient(timeout=30) as http:
        client = await ClientFactory.connect(
            request["url"],
            client_config=ClientConfig(streaming=bool(request.get("streaming")), httpx_client=http),
            relative_card_path="/.well-known/agent.json",  # the 0.3 card's name (0.3.26 reads agent-card.json)
        )
        turns = []
        task: Task | None = None
        for text in request["turns"]:
            got, task = await turn(client, text, task)
            turns.append(got)
        stored = summary(await client.get_task(TaskQueryParams(id=task.id))) if task else None
    print(json.dumps({"turns": turns, "get": stored}))


asyncio.run(main())
