"""a2a-sdk 0.3's own client (``ClientFactory.connect``, its ``Client`` and task manager) against agentmw's 0.3
JSON-RPC face. Run by the 0.3 venv's python (``.deps/a2a03``, made by scripts/setup-tools).

Reads ``{"url": <base url>, "scenario": <name>}`` on stdin and prints one JSON object: what the client saw,
in its own types (``model_dump`` in 0.3 field names), and what ``get_task`` returns afterwards.
"""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from typing import Any

import httpx
from a2a.client import ClientConfig, ClientFactory
from a2a.types import DataPart, Message, Part, Role, Task, TaskIdParams, TaskQueryParams, TextPart


def text_message(text: str, skill: str, task: Task | None = None) -> Message:
    return Message(
        role=Role.user,
        message_id=str(uuid.uuid4()),
        parts=[Part(root=TextPart(text=text))],
        metadata={"skill": skill},
        task_id=task.id if task else None,
        context_id=task.context_id if task else None,
    )


def summary(task: Task) -> dict[str, Any]:
    return {
        "id": task.id,
        "context_id": task.context_id,
        "state": task.status.state.value,
        "status_text": "".join(
            p.root.text
            for p in (task.status.message.parts if task.status.message else [])
            if p.root.kind == "text"
        ),
        "history": [m.role.value for m in task.history or []],
        "artifacts": [
            {"id": a.artifact_id, "text": "".join(p.root.text for p in a.parts if p.root.kind == "text")}
            for a in task.artifacts or []
        ],
    }


async def collect(client: Any, message: Message, stop_at: str | None = None) -> dict[str, Any]:
    """Every (task, update) the client yields; stops reading after a status of ``stop_at``."""
    seen: list[dict[str, Any]] = []
    task = None
    async for item in client.send_message(message):
        if isinstance(item, Message):
            seen.append({"message": "".join(p.root.text for p in item.parts if p.root.kind == "text")})
            continue
        task, update = item
        kind = update.kind if update is not None else "task"
        entry: dict[str, Any] = {"kind": kind, "state": task.status.state.value}
        if kind == "artifact-update":
            entry |= {"append": update.append, "last_chunk": update.last_chunk}
        seen.append(entry)
        if stop_at is not None and task.status.state.value == stop_at:
            break
    return {"events": seen, "task": summary(task) if task else None, "raw": task}


async def main() -> None:
    request = json.load(sys.stdin)
    url, scenario = request["url"], request["scenario"]
    out: dict[str, Any] = {}
    async with httpx.AsyncClient(timeout=30) as http:
        for streaming in (False, True):
            client = await ClientFactory.connect(
                url,
                # polling: a non-blocking send (the "wait" skill never ends, so a blocking one would never return)
                client_config=ClientConfig(
                    streaming=streaming, polling=scenario == "cancel", httpx_client=http
                ),
                relative_card_path=request.get("card_path"),
            )
            mode = "stream" if streaming else "blocking"
            if scenario == "send":
                got = await collect(client, text_message("hi", "echo"))
            elif scenario == "followup":
                asked = await collect(client, text_message("invoice 7", "approve"))
                answer = Message(
                    role=Role.user,
                    message_id=str(uuid.uuid4()),
                    parts=[Part(root=DataPart(data={"approved": True}))],
                    task_id=asked["raw"].id,
                    context_id=asked["raw"].context_id,
                )
                got = await collect(client, answer)
                got["asked"] = asked["task"]
                got["asked_events"] = asked["events"]
            elif scenario == "chunks":
                got = await collect(client, text_message("go", "report"))
            elif scenario == "cancel":
                got = await collect(client, text_message("forever", "wait"), stop_at="working")
                if not streaming:  # a non-blocking send answers at once, maybe before the skill started
                    got["sent"] = got["task"]
                canceled = await client.cancel_task(TaskIdParams(id=got["raw"].id))
                got["canceled"] = summary(canceled)
            else:
                raise SystemExit(f"unknown scenario {scenario!r}")
            raw = got.pop("raw")
            got["get"] = summary(await client.get_task(TaskQueryParams(id=raw.id))) if raw else None
            got["card_url"] = client._card.url  # which endpoint the client chose from the card
            out[mode] = got
    print(json.dumps(out))


asyncio.run(main())
