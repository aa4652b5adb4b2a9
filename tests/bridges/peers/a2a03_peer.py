"""A remote A2A **0.3** agent for the bridge tests, built only from a2a-sdk 0.3.26's server classes, as the agents
in the field that pin ``a2a-sdk<1.0`` (agno, strands, BeeAI) are built.

``AgentExecutor`` + ``DefaultRequestHandler`` + ``InMemoryTaskStore`` + ``A2AStarletteApplication`` (JSON-RPC at
``/a2a``, the card at ``/.well-known/agent-card.json``), with the control routes of
tests/bridges/peers/control.py. It runs in its own venv (``.deps/a2a03``: a2a-sdk 0.3 and 1.x cannot share one),
started by tests/bridges/test_a2a03_bridge.py as ``<that python> -m uvicorn --factory
tests.bridges.peers.a2a03_peer:create_app`` with ``$PEER_BASE_URL`` naming its own address. The card is a 0.3
card: ``url``, ``preferredTransport`` ``JSONRPC``, ``protocolVersion`` ``0.3.0``, no ``supportedInterfaces``.

**Choosing a skill**, as tests/bridges/peers/a2a_peer.py chooses: ``metadata.skill``, else a leading
``/<id>``, else ``echo``; a follow-up on a task that waits for input answers its question.

**Skills:** ``echo`` (a text artifact, the text received), ``ask`` (``input-required`` "Which jurisdiction?",
then "Reviewed for <answer>"), ``slow`` (six ``working`` steps of 0.5 s, "step k of 6", each a chunk of one
artifact, then completed; ``tasks/cancel`` stops it), ``files`` (a file artifact, report.txt, and a data
artifact ``{"total": 42}``), ``inject`` (a text artifact that tries a prompt injection).

**Controls:** ``GET /_test/counter`` is ``{"count", "resumes", "cancels", "tasks"}`` (control.py);
``POST /_test/cut`` cuts the next event stream after its second event.
"""

from __future__ import annotations

import asyncio
import base64
import os
import re
from typing import Any

from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.apps import A2AStarletteApplication
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentSkill,
    DataPart,
    FilePart,
    FileWithBytes,
    Part,
    TaskState,
    TextPart,
)
from a2a.utils import get_message_text, new_task
from starlette.applications import Starlette

from tests.bridges.peers.a2a03_skills import (
    ASK_QUESTION,
    FILE_BYTES,
    INJECTION,
    SKILLS,
    SLOW_STEP_SECONDS,
    SLOW_STEPS,
)
from tests.bridges.peers.control import Counter, StreamCut, control_routes

_PREFIX = re.compile(r"^/([A-Za-z0-9_-]+)(?:\s+|$)")


def text(value: str) -> Part:
    return Part(root=TextPart(text=value))


def choose_skill(metadata: dict[str, Any], said: str) -> tuple[str, str]:
    named = metadata.get("skill")
    match = _PREFIX.match(said)
    if isinstance(named, str) and named:
        if match and match.group(1) == named:
            return named, said[match.end() :]
        return named, said
    if match:
        return match.group(1), said[match.end() :]
    return "echo", said


class PeerExecutor(AgentExecutor):
    def __init__(self, counter: Counter) -> None:
        self.counter = counter

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        message = context.message
        assert message is not None
        task = context.current_task
        if task is not None and task.status.state == TaskState.input_required:
            self.counter.resumes += 1
            updater = TaskUpdater(event_queue, task.id, task.context_id)
            answer = get_message_text(message).strip()
            await updater.add_artifact([text(f"Reviewed for {answer}")], name="review")
            await updater.complete()
            return
        if task is None:
            task = new_task(message)
            await event_queue.enqueue_event(task)
            self.counter.tasks.append(task.id)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        skill, said = choose_skill(message.metadata or {}, get_message_text(message))
        self.counter.count += 1
        if skill == "echo":
            await updater.add_artifact([text(said)], name="echo")
            await updater.complete()
        elif skill == "ask":
            await updater.requires_input(updater.new_agent_message([text(ASK_QUESTION)]), final=True)
        elif skill == "slow":
            artifact_id = f"{task.id}-progress"
            for step in range(1, SLOW_STEPS + 1):
                await updater.start_work(updater.new_agent_message([text(f"step {step} of {SLOW_STEPS}")]))
                await updater.add_artifact(
                    [text(f"chunk {step}\n")],
                    artifact_id=artifact_id,
                    name="progress",
                    append=step > 1,
                    last_chunk=step == SLOW_STEPS,
                )
                await asyncio.sleep(SLOW_STEP_SECONDS)
            await updater.complete()
        elif skill == "files":
            raw = base64.b64encode(FILE_BYTES).decode()
            await updater.add_artifact(
                [
                    Part(
                        root=FilePart(
                            file=FileWithBytes(bytes=raw, mime_type="text/plain", name="report.txt")
                        )
                    )
                ],
                name="report.txt",
            )
            await updater.add_artifact([Part(root=DataPart(data={"total": 42}))], name="totals")
            await updater.complete()
        elif skill == "inject":
            await updater.add_artifact([text(INJECTION)], name="notes")
            await updater.complete()
        else:
            await updater.reject(updater.new_agent_message([text(f"Unknown skill: {skill}")]))

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        self.counter.cancels += 1
        task = context.current_task
        if task is None or context.task_id is None:
            return
        await TaskUpdater(event_queue, context.task_id, task.context_id).cancel()


def agent_card(base_url: str) -> AgentCard:
    return AgentCard(
        name="bridge-test-peer-03",
        description="A remote A2A 0.3 agent the bridge tests call.",
        version="1.0.0",
        url=f"{base_url}/a2a",
        preferred_transport="JSONRPC",
        protocol_version="0.3.0",
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain", "application/json"],
        capabilities=AgentCapabilities(streaming=True),
        skills=[
            AgentSkill(id=skill, name=skill, description=description, tags=["bridge-test"])
            for skill, description in SKILLS.items()
        ],
    )


def build(base_url: str) -> tuple[StreamCut, Counter]:
    counter = Counter()
    handler = DefaultRequestHandler(agent_executor=PeerExecutor(counter), task_store=InMemoryTaskStore())
    a2a = A2AStarletteApplication(agent_card=agent_card(base_url), http_handler=handler)
    cut = StreamCut(None)
    app = Starlette(routes=control_routes(counter, cut))
    a2a.add_routes_to_app(app, rpc_url="/a2a")
    cut.app = app
    return cut, counter


def create_app() -> Any:
    """The uvicorn factory: ``$PEER_BASE_URL`` (required)."""
    app, _ = build(os.environ["PEER_BASE_URL"])
    return app
