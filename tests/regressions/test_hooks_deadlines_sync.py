"""A hostile review of hooks (docs/observability.md, "Hooks") and of sync functions on the worker pool
(docs/limits.md, "Sync functions"): a hanging ``before`` is bounded by the call's deadline, a listing hook's
garbage never reaches the wire, sub-calls are hooked once each, auth denials reach ``after``; more sync calls than
workers wait their turn, a waiting call past its deadline never starts, and a function that calls ``sys.exit()``
fails its call without stopping the server.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import threading
import time
import uuid
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette

from agentmw import Agent, AgentMiddleware, Context
from agentmw._executor import MAX_WORKERS
from agentmw.observability import Hook
from agentmw.testing import McpError, McpTestClient
from tests.conftest import serve
from tests.waiting import eventually, stays

# --- hooks ---------------------------------------------------------------------------------------------------


class Recorder(Hook):
    def __init__(self) -> None:
        self.seen: list[tuple[str, str, Any]] = []

    async def before(self, invocation: Any) -> None:
        self.seen.append(("before", invocation.name, invocation.parent.name if invocation.parent else None))

    async def after(self, invocation: Any, outcome: Any) -> None:
        self.seen.append(("after", invocation.name, (str(outcome.status), outcome.code)))


class Hangs(Hook):
    async def before(self, invocation: Any) -> None:
        if invocation.name.startswith("slow"):
            await asyncio.sleep(3600)


class BreaksAfter(Hook):
    def after(self, invocation: Any, outcome: Any) -> None:
        raise ValueError("the audit sink is down")


class ListsGarbage(Hook):
    def __init__(self, value: Any) -> None:
        self.value = value

    def listing(self, listing: Any) -> Any:
        return self.value(listing.items) if callable(self.value) else self.value


def hooked_agent(*hooks: Any) -> Agent:
    agent = Agent("hooks", "0.1", store="memory://")

    @agent.tool(read_only=True, timeout=0.5)
    async def slow_checked() -> str:
        """Never reached while its check hangs."""
        return "ran"

    @agent.tool(read_only=True)
    async def leaf(n: int) -> int:
        """Returns n."""
        return n

    @agent.tool(read_only=True)
    async def parent(ctx: Context) -> int:
        """Calls leaf twice."""
        return await ctx.call("leaf", {"n": 1}) + await ctx.call("leaf", {"n": 2})

    @agent.tool(read_only=True, scopes=["reports:read"])
    async def guarded() -> str:
        """Needs a scope."""
        return "secret"

    for hook in hooks:
        agent.use(hook)
    return agent


async def test_a_hanging_before_hook_is_bounded_by_the_calls_deadline(caplog) -> None:
    agent = hooked_agent(Hangs())
    async with McpTestClient(agent.asgi()) as mcp:
        started = time.monotonic()
        with caplog.at_level(logging.ERROR, logger="agentmw.hooks"):
            result = await asyncio.wait_for(mcp.call_tool("slow_checked"), 5)
        assert time.monotonic() - started < 2
        assert result["isError"] is True and "did not finish in time" in result["content"][0]["text"]
        assert "ran" not in str(result["content"])
        assert any("deadline" in r.getMessage() for r in caplog.records)
        assert (await mcp.call_tool("leaf", {"n": 4}))["structuredContent"] == {"result": 4}  # no deadline


async def test_sub_calls_are_hooked_once_each_and_a_raising_after_changes_nothing(caplog) -> None:
    recorder = Recorder()
    agent = hooked_agent(recorder, BreaksAfter())
    async with McpTestClient(agent.asgi()) as mcp:
        with caplog.at_level(logging.ERROR, logger="agentmw.hooks"):
            result = await mcp.call_tool("parent")
    assert result["structuredContent"] == {"result": 3}
    assert recorder.seen == [
        ("before", "parent", None),
        ("before", "leaf", "parent"),
        ("after", "leaf", ("completed", None)),
        ("before", "leaf", "parent"),
        ("after", "leaf", ("completed", None)),
        ("after", "parent", ("completed", None)),
    ]
    assert sum("the audit sink" in str(r.exc_info) for r in caplog.records) == 3


async def test_an_auth_denial_runs_before_then_reaches_after() -> None:
    recorder = Recorder()
    agent = hooked_agent(recorder)
    async with McpTestClient(agent.asgi()) as mcp:
        with pytest.raises(McpError) as refused:
            await mcp.call_tool("guarded")
    assert refused.value.status == 401 and "secret" not in str(refused.value.message)
    assert recorder.seen[0] == ("before", "guarded", None)
    assert recorder.seen[-1][:2] == ("after", "guarded") and recorder.seen[-1][2][0] == "rejected"


@pytest.mark.parametrize(
    "garbage",
    [
        5,
        "abc",
        [1, 2],
        {"name": "leaf"},
        [{"nope": 1}],
        lambda items: [*items, {"name": "invented", "inputSchema": {"type": "object"}}],
        lambda items: [*items, "x"],
    ],
    ids=["int", "str", "ints", "dict", "no-name", "invented-tool", "trailing-str"],
)
async def test_a_listing_hooks_garbage_never_reaches_the_wire(garbage: Any, caplog) -> None:
    agent = hooked_agent(ListsGarbage(garbage))
    async with McpTestClient(agent.asgi()) as mcp:
        with caplog.at_level(logging.ERROR, logger="agentmw.hooks"):
            tools = (await mcp.request("tools/list"))["tools"]
        assert tools == []  # fail closed, as for a listing hook that raises
        assert any("listing" in r.getMessage() for r in caplog.records)
        card = await mcp._http.get("/.well-known/agent-card.json")
        assert card.status_code == 200


async def test_a_listing_hook_may_filter_and_edit_copies() -> None:
    def keep_leaf(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{**item, "description": "edited"} for item in items if item["name"] == "leaf"]

    agent = hooked_agent(ListsGarbage(keep_leaf))
    async with McpTestClient(agent.asgi()) as mcp:
        tools = (await mcp.request("tools/list"))["tools"]
    assert [(t["name"], t["description"]) for t in tools] == [("leaf", "edited")]


# --- sync functions on the worker pool -------------------------------------------------------------------------

EXTRA = 5


class Blocker:
    """A sync tool body that holds its worker until released, and counts how many run at once."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.lock = threading.Lock()
        self.started: list[str] = []
        self.running = 0
        self.most = 0

    def __call__(self, label: str) -> str:
        with self.lock:
            self.started.append(label)
            self.running += 1
            self.most = max(self.most, self.running)
        try:
            self.release.wait(20)
        finally:
            with self.lock:
                self.running -= 1
        return label


def pool_agent(blocker: Blocker) -> Starlette:
    agent = Agent("pool", "0.1", store="memory://")

    def block(label: str) -> str:
        """Holds a worker until released."""
        return blocker(label)

    def block_briefly(label: str) -> str:
        """Holds a worker until released; its call has a deadline."""
        return blocker(label)

    def block_capped(label: str) -> str:
        """Holds a worker until released; two at a time."""
        return blocker(label)

    agent.tool(block, read_only=True)
    agent.tool(block_briefly, read_only=True, timeout=0.3)
    agent.tool(block_capped, read_only=True, max_in_flight=2)
    app = Starlette()
    app.add_middleware(AgentMiddleware, agent=agent)
    return app


async def test_more_sync_calls_than_workers_wait_and_a_waiting_call_past_its_deadline_never_starts() -> None:
    blocker = Blocker()
    app = pool_agent(blocker)
    run = uuid.uuid4().hex[:6]
    async with McpTestClient(app) as mcp:
        calls = [
            asyncio.ensure_future(mcp.call_tool("block", {"label": f"{run}-{i}"}))
            for i in range(MAX_WORKERS + EXTRA)
        ]
        try:
            await eventually(lambda: len(blocker.started) >= MAX_WORKERS - 2, "the pool to fill", timeout=10)
            await stays(
                lambda: len(blocker.started) <= MAX_WORKERS and blocker.most <= MAX_WORKERS,
                "no more calls run than the pool has workers",
                seconds=0.3,
            )
            assert len(blocker.started) <= MAX_WORKERS and blocker.most <= MAX_WORKERS
            # the pool is full: these wait for a worker, and their deadline passes while they wait
            late = await asyncio.gather(
                *(mcp.call_tool("block_briefly", {"label": f"{run}-late-{i}"}) for i in range(3))
            )
            assert all(
                r["isError"] and "did not finish within 0.3 seconds" in r["content"][0]["text"] for r in late
            )
            # a cap counts a call that waits for a worker: the third capped call is refused at once
            capped = [
                asyncio.ensure_future(mcp.call_tool("block_capped", {"label": f"{run}-cap-{i}"}))
                for i in range(3)
            ]
            done, _ = await asyncio.wait(capped, timeout=2, return_when=asyncio.FIRST_COMPLETED)
            assert len(done) == 1 and next(iter(done)).result()["isError"] is True
        finally:
            blocker.release.set()
        results = await asyncio.wait_for(asyncio.gather(*calls), 20)
        assert [r["content"][0]["text"] for r in results] == [f"{run}-{i}" for i in range(len(calls))]
        assert sum(not r["isError"] for r in await asyncio.gather(*capped)) == 2
        await stays(  # the workers free; the late calls were cancelled while they waited
            lambda: not [label for label in blocker.started if "-late-" in label],
            "a call past its deadline never starts",
            seconds=0.3,
        )
        assert not [label for label in blocker.started if "-late-" in label], (
            "a call past its deadline started"
        )
        assert blocker.most <= MAX_WORKERS


def exits(code: int) -> str:
    """Exits, as a CLI wrapped in a tool would on a bad flag."""
    sys.exit(code)


async def async_exits(code: int) -> str:
    """Exits, asynchronously."""
    sys.exit(code)


def sync_interrupt() -> str:
    """Raises KeyboardInterrupt on its worker."""
    raise KeyboardInterrupt


def add(a: int, b: int) -> int:
    """Adds."""
    return a + b


def test_a_function_that_exits_fails_its_call_and_the_server_goes_on() -> None:
    agent = Agent("exits", "0.1", store="memory://")
    for fn in (exits, async_exits, sync_interrupt, add):
        agent.tool(fn, read_only=True)
    app = Starlette()
    app.add_middleware(AgentMiddleware, agent=agent)
    headers = {
        "accept": "application/json, text/event-stream",
        "content-type": "application/json",
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": "tools/call",
    }

    def body(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        return {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {
                "name": name,
                "arguments": arguments,
                "_meta": {
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "io.modelcontextprotocol/clientCapabilities": {},
                },
            },
        }

    with serve(app) as url, httpx.Client(base_url=url, timeout=10) as http:
        for name, arguments in (("exits", {"code": 2}), ("async_exits", {"code": 3}), ("sync_interrupt", {})):
            reply = http.post(
                "/mcp", json=body(name, arguments), headers={**headers, "mcp-name": name}
            ).json()
            assert reply["result"]["isError"] is True, reply
            assert "internal error" in reply["result"]["content"][0]["text"]
            again = http.post(
                "/mcp", json=body("add", {"a": 1, "b": 2}), headers={**headers, "mcp-name": "add"}
            )
            assert again.json()["result"]["structuredContent"] == {"result": 3}, (
                f"the server died after {name}"
            )


# --- hand-written schemas ---------------------------------------------------------------------------------

NODE_SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "node": {"type": "object", "properties": {"v": {"type": "integer"}, "next": {"$ref": "#/$defs/node"}}}
    },
    "properties": {"tree": {"$ref": "#/$defs/node"}},
    "required": ["tree"],
}


def _nested(depth: int, leaf: Any = 1) -> dict[str, Any]:
    tree: dict[str, Any] = {"v": leaf}
    for _ in range(depth):
        tree = {"v": 1, "next": tree}
    return tree


async def test_a_recursive_schema_with_deep_arguments_is_invalid_arguments_not_an_internal_error(
    caplog,
) -> None:
    agent = Agent("schemas", "0.1", store="memory://")

    @agent.tool(read_only=True, input_schema=NODE_SCHEMA)
    async def walk(tree: dict[str, Any]) -> int:
        """Walks a linked list."""
        return 1

    async with McpTestClient(agent.asgi()) as mcp:
        assert (await mcp.call_tool("walk", {"tree": _nested(20)}))["structuredContent"] == {"result": 1}
        shallow = await mcp.call_tool("walk", {"tree": _nested(20, leaf="secret-value-1")})
        assert shallow["isError"] is True and "is not of type 'integer'" in shallow["content"][0]["text"]
        with caplog.at_level(logging.ERROR):
            within = await mcp.call_tool("walk", {"tree": _nested(55, leaf="secret-value-2")})
            with pytest.raises(McpError) as refused:  # past the body's nesting budget: refused at the door
                await mcp.call_tool("walk", {"tree": _nested(600, leaf="secret-value-3")})
        assert within["isError"] is True and "is not of type 'integer'" in within["content"][0]["text"]
        assert refused.value.status == 400 and refused.value.code == -32600
        assert "nested more than" in str(refused.value.message) and "secret-value-3" not in str(refused.value)
        assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


def test_a_schema_that_loops_on_itself_is_refused_at_registration() -> None:
    from agentmw.errors import RegistrationError

    agent = Agent("schemas", "0.1", store="memory://")
    with pytest.raises(RegistrationError, match=r"\$ref loop"):

        @agent.tool(
            read_only=True,
            input_schema={
                "type": "object",
                "allOf": [{"$ref": "#"}],
                "properties": {"a": {"type": "integer"}},
                "required": ["a"],
            },
        )
        async def loops(a: int) -> int:
            """Never callable."""
            return a


async def test_a_huge_argument_is_not_echoed_whole_in_the_schema_error() -> None:
    agent = Agent("schemas", "0.1", store="memory://")

    @agent.tool(
        read_only=True,
        input_schema={
            "type": "object",
            "properties": {"p": {"type": "string", "pattern": "^[a-z]+$"}},
            "required": ["p"],
        },
    )
    async def word(p: str) -> str:
        """Takes a lowercase word."""
        return p

    async with McpTestClient(agent.asgi()) as mcp:
        result = await mcp.call_tool("word", {"p": "A" * 100_000})
    assert result["isError"] is True and len(result["content"][0]["text"]) < 1000
