"""Blocking A2A ``SendMessage`` to an echo skill: agentmw and a2a-sdk 1.3.0's own server beside a floor.

All are driven in-process through ASGI, so the numbers are each server's own cost per request. agentmw runs
once per state backend (``--store memory,sqlite,redis``, the default: all three side by side; SQLite on a
temporary file, Redis on a ``redis-server`` started on a free port with no persistence, or ``--redis URL``).
Run ``python bench/a2a_send_message.py`` (``--quick`` for a short run); it prints a Markdown table.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
import uuid
from contextlib import AsyncExitStack
from typing import Any

from _driver import Driver, best_rate, lifespan
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from state_ops import redis_server

HEADERS = [(b"content-type", b"application/json"), (b"a2a-version", b"1.0")]


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime())


async def floor_endpoint(request: Request) -> JSONResponse:
    """The same work by hand: parse, check the message, echo it into a completed task."""
    body = await request.json()
    message = (body.get("params") or {}).get("message") if isinstance(body, dict) else None
    if body.get("method") != "SendMessage" or not isinstance(message, dict) or not message.get("parts"):
        return JSONResponse(
            {"jsonrpc": "2.0", "id": body.get("id"), "error": {"code": -32602, "message": "bad"}}
        )
    text = "".join(p.get("text", "") for p in message["parts"])
    task_id, context_id = str(uuid.uuid4()), message.get("contextId") or str(uuid.uuid4())
    task = {
        "id": task_id,
        "contextId": context_id,
        "status": {"state": "TASK_STATE_COMPLETED", "timestamp": now()},
        "history": [{**message, "taskId": task_id, "contextId": context_id}],
        "artifacts": [{"artifactId": str(uuid.uuid4()), "parts": [{"text": f"echo: {text}"}]}],
    }
    return JSONResponse({"jsonrpc": "2.0", "id": body["id"], "result": {"task": task}})


def floor_app() -> Any:
    return Starlette(routes=[Route("/a2a", floor_endpoint, methods=["POST"])])


def agentmw_app(store: str = "memory://", write_behind: bool = False) -> Any:
    from agentmw import Agent, AgentMiddleware
    from agentmw.a2a import A2ASettings

    agent = Agent("bench", store=store, a2a=A2ASettings(write_behind=write_behind))

    @agent.skill
    async def echo(text: str) -> str:
        """Echo."""
        return f"echo: {text}"

    app = Starlette()
    app.add_middleware(AgentMiddleware, agent=agent)
    app.state.agent = agent
    return app


def sdk_app() -> Any:
    from a2a.helpers.proto_helpers import get_message_text, new_task_from_user_message
    from a2a.server.agent_execution import AgentExecutor
    from a2a.server.request_handlers import DefaultRequestHandler
    from a2a.server.routes import create_jsonrpc_routes
    from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
    from a2a.types.a2a_pb2 import AgentCapabilities, AgentCard, AgentInterface, AgentSkill, Part

    class Echo(AgentExecutor):
        async def execute(self, context: Any, event_queue: Any) -> None:
            task = context.current_task or new_task_from_user_message(context.message)
            await event_queue.enqueue_event(task)
            updater = TaskUpdater(event_queue, task.id, task.context_id)
            await updater.add_artifact([Part(text="echo: " + get_message_text(context.message))])
            await updater.complete()

        async def cancel(self, context: Any, event_queue: Any) -> None:
            """Never called: this benchmark does not cancel."""

    card = AgentCard(
        name="bench",
        description="echo",
        version="1",
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        capabilities=AgentCapabilities(streaming=True),
        supported_interfaces=[
            AgentInterface(
                url="http://127.0.0.1:8000/a2a", protocol_binding="JSONRPC", protocol_version="1.0"
            )
        ],
        skills=[AgentSkill(id="echo", name="echo", description="echo", tags=["echo"])],
    )
    handler = DefaultRequestHandler(agent_executor=Echo(), task_store=InMemoryTaskStore(), agent_card=card)
    return Starlette(routes=create_jsonrpc_routes(handler, rpc_url="/a2a"))


def body(i: int, round_: int = -1) -> bytes:
    # Every message id is new: agentmw deduplicates a repeated messageId, which would skip the work.
    return json.dumps(
        {
            "jsonrpc": "2.0",
            "id": i,
            "method": "SendMessage",
            "params": {
                "message": {
                    "messageId": f"m-{round_}-{i}",
                    "role": "ROLE_USER",
                    "parts": [{"text": f"hello {i}"}],
                },
                "configuration": {},
            },
        }
    ).encode()


async def concurrent_rate(driver: Driver, bodies: list[bytes], clients: int) -> float:
    """Requests per second of ``bodies`` posted by ``clients`` concurrent callers, each posting its next
    request as soon as the last one answered (a server under concurrent load, where group commit can batch
    the writes of requests in flight together)."""
    pending = iter(bodies)

    async def client() -> None:
        for request in pending:
            status, _, _ = await driver.post(request, HEADERS)
            assert status == 200, status

    start = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(clients)))
    return len(bodies) / (time.perf_counter() - start)


class Target:
    """One server under measurement: set up once, then driven one batch per round, in turn with the others."""

    def __init__(self, name: str, factory: Any, n: int, clients: int = 1) -> None:
        self.name, self.factory, self.n = name, factory, n
        self.clients = clients
        self.best = 0.0
        self.sent = 0

    async def start(self, stack: AsyncExitStack) -> None:
        self.app = self.factory()
        await lifespan(stack, self.app)
        self.driver = Driver(self.app, "/a2a")
        status, _, reply = await self.driver.post(body(0), HEADERS)
        task = json.loads(reply)["result"]["task"]
        assert status == 200 and task["status"]["state"] == "TASK_STATE_COMPLETED", reply
        assert task["artifacts"][0]["parts"][0]["text"] == "echo: hello 0", reply

    async def round(self, round_: int) -> None:
        bodies = [body(i, round_) for i in range(self.n)]
        rate = (
            await best_rate(self.driver, [bodies], HEADERS)
            if self.clients == 1
            else await concurrent_rate(self.driver, bodies, self.clients)
        )
        self.best = max(self.best, rate)
        self.sent += self.n

    async def finish(self) -> None:
        agent = getattr(self.app.state, "agent", None)
        if agent is not None:  # every task written, once each: the benchmark checks the writes it claims
            tasks = agent.a2a_app.ops.tasks
            await tasks.flush()
            written = tasks.registry.writes
            assert written == 1 + self.sent, f"{written} writes for {1 + self.sent} tasks"
            await tasks.close()
            await agent.state.close()


async def measure(targets: list[Target], rounds: int) -> None:
    """Every target runs one batch per round, in turn: a machine that slows down for a while (another process,
    a CPU that throttles) slows every row alike, so the ratios hold even when the absolute numbers move."""
    async with AsyncExitStack() as stack:
        for target in targets:
            await target.start(stack)
        for round_ in range(rounds):
            for target in targets:
                await target.round(round_)
        for target in targets:
            await target.finish()


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument(
        "--store",
        default="memory,sqlite,redis",
        help="the state backends agentmw runs on, comma-separated: memory, sqlite, redis",
    )
    parser.add_argument("--redis", default=os.environ.get("AGENTMW_BENCH_REDIS"), help="a Redis URL to use")
    parser.add_argument("--no-sdk", action="store_true", help="leave out a2a-sdk's server (slow to measure)")
    parser.add_argument(
        "--write-behind", action="store_true", help="also each backend with the opt-in write-behind"
    )
    parser.add_argument(
        "--sqlite-options", default="", help='appended to the SQLite URL, e.g. "?synchronous=normal"'
    )
    parser.add_argument(
        "--clients",
        type=int,
        default=1,
        help="concurrent callers (1, the default: one request at a time, each waiting for the last)",
    )
    args = parser.parse_args()
    stores = [name.strip() for name in args.store.split(",") if name.strip()]
    unknown = set(stores) - {"memory", "sqlite", "redis"}
    if unknown:
        parser.error(f"unknown store {', '.join(sorted(unknown))}: use memory, sqlite, redis")
    n, rounds = (1000, 4) if args.quick else (5000, 6)
    folder = tempfile.mkdtemp()
    with redis_server(args.redis if "redis" in stores else "unused") as redis_url:
        clients = max(1, args.clients)
        targets = [Target("bare Starlette floor", floor_app, n, clients)]
        for name in stores:
            if name == "memory":
                url = "memory://"
            elif name == "sqlite":
                url = f"sqlite:///{folder}/bench-{uuid.uuid4().hex[:8]}.db{args.sqlite_options}"
            elif redis_url is None:
                print(
                    "redis-server is not installed: no Redis row (scripts/setup installs it)", file=sys.stderr
                )
                continue
            else:
                url = f"{redis_url}?prefix=bench{uuid.uuid4().hex[:8]}"
            targets.append(Target(f"agentmw, {name} state", lambda url=url: agentmw_app(url), n, clients))
            if args.write_behind:
                targets.append(
                    Target(
                        f"agentmw, {name} state, write-behind",
                        lambda url=url: agentmw_app(url, write_behind=True),
                        n,
                        clients,
                    )
                )
        if not args.no_sdk:
            targets.append(Target("a2a-sdk 1.3.0", sdk_app, max(n // 5, 500), clients))
        await measure(targets, rounds)
        results = [(target.name, target.best) for target in targets]
    floor = results[0][1]
    print(
        f"Blocking `SendMessage` to an echo skill, requests per second, in-process ASGI, {max(1, args.clients)} "
        f"concurrent caller(s), best of {rounds} rounds taken in turn\n"
    )
    print("| server | req/s | ratio to floor |")
    print("|---|---:|---:|")
    for name, rps in results:
        print(f"| {name} | {rps:,.0f} | {rps / floor:.2f}× |")


if __name__ == "__main__":
    asyncio.run(main())
