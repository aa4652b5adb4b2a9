"""Scale-out and durability with real components (issue 11, item 5): replicas of the example app as separate
``uvicorn`` processes sharing a real ``redis-server`` (or one SQLite file), behind Debian's nginx doing round
robin with no stickiness; ``uvicorn --workers 4`` on the default SQLite store; ``kill -9``; restarts.

Every client is the real one: the official ``mcp`` client, the ``a2a-sdk`` client and ``@ag-ui/client``
(``tests/agui/harness.mjs``, and a small driver below for reconnects and for pausing between steps).

Which replica answers each request is read from the ``x-agentmw-replica`` header that the harness adds
(``tests/replicas.py``); ``Cluster.steer`` makes nginx's next pick a chosen replica, so "answered by another
replica" is a fact each test checks, not a hope.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import shutil
import subprocess
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import httpx2
import mcp_types as types
import pytest
from a2a.client import A2ACardResolver
from a2a.types.a2a_pb2 import (
    GetTaskRequest,
    SendMessageRequest,
    SubscribeToTaskRequest,
    TaskPushNotificationConfig,
    TaskState,
)
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from tests import replicas
from tests.conftest import require_tool, serve
from tests.helpers.a2a_sdk import a2a_client, last_task, message
from tests.replicas import REPLICA_HEADER, Cluster
from tests.waiting import eventually, stays

pytestmark = pytest.mark.timeout(300)

# the fixtures of tests/replicas.py, for this module
redis_url = replicas.redis_url
redis_cluster = replicas.redis_cluster
secret_cluster = replicas.secret_cluster
workers_server = replicas.workers_server
single_replica = replicas.single_replica

AUTH = {"Authorization": "Bearer demo-token"}
AGUI = Path(__file__).parent / "agui"
HARNESS = AGUI / "harness.mjs"
NODE_SETUP = "run `scripts/setup` (or `scripts/test`, which runs it) to install it"
APPROVE = {"request_id": "PR-1001", "department": "engineering", "total": 898.0}
TERMINAL = {
    TaskState.TASK_STATE_COMPLETED,
    TaskState.TASK_STATE_FAILED,
    TaskState.TASK_STATE_CANCELED,
    TaskState.TASK_STATE_REJECTED,
}


# --- who answered -----------------------------------------------------------------------------------


class Served:
    """Records, for every response a client gets, the method, path and the replica (``index-pid``) that sent it."""

    def __init__(self) -> None:
        self.log: list[tuple[str, str, int, str]] = []

    async def __call__(self, response: Any) -> None:
        self.log.append(
            (
                response.request.method,
                response.request.url.path,
                response.status_code,
                response.headers.get(REPLICA_HEADER, "?"),
            )
        )

    def replicas(self, method: str | None = None, path: str | None = None) -> list[str]:
        return [
            r for m, p, _, r in self.log if (method is None or m == method) and (path is None or p == path)
        ]

    def index(self, at: int) -> int:
        return int(self.log[at][3].split("-")[0])


def hooked(served: Served, **kwargs: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(timeout=30, event_hooks={"response": [served]}, **kwargs)


def fresh_connections() -> dict[str, Any]:
    """No keep-alive: every request opens a new connection, so the kernel hands it to any of the workers
    (a kept-alive connection would pin one client to one worker and prove nothing)."""
    return {"limits": httpx.Limits(max_keepalive_connections=0)}


# --- MCP ---------------------------------------------------------------------------------------------


def mcp_client(url: str, served: Served, mode: str, *, keepalive: bool = True, **kwargs: Any) -> Client:
    limits = {} if keepalive else {"limits": httpx2.Limits(max_keepalive_connections=0)}
    http = httpx2.AsyncClient(headers=AUTH, timeout=30, event_hooks={"response": [served]}, **limits)
    return Client(streamable_http_client(f"{url}/mcp", http_client=http), mode=mode, cache=None, **kwargs)


async def approve(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={"approved": True})


async def check_mcp_handshake_calls(url: str, *, calls: int = 200, keepalive: bool = True) -> Served:
    """The handshake era (``mode="legacy"``): ``calls`` tool calls on one session, zero errors."""
    served = Served()
    errors: list[str] = []
    async with mcp_client(url, served, "legacy", keepalive=keepalive) as client:
        for n in range(calls):
            try:
                result = await client.call_tool("department_budget", {"department": "engineering"})
                if result.is_error or result.structured_content.get("department") != "engineering":
                    errors.append(f"call {n}: {result.content}")
            except Exception as exc:  # noqa: BLE001  (a session error, of any kind, is what this test counts)
                errors.append(f"call {n}: {type(exc).__name__}: {exc}")
            if len(errors) >= 5:
                break
    statuses = Counter(s for m, p, s, _ in served.log if p == "/mcp")
    assert not errors, (
        f"{len(errors)} session errors (stopped after 5) in {calls} calls; HTTP statuses on /mcp "
        f"{dict(statuses)}; first: {errors[:3]}"
    )
    return served


async def check_mcp_list_change(url: str, trigger: Callable[[str], Any]) -> None:
    """A handshake-era session whose GET stream is held by one process receives ``tools/list_changed`` caused
    on another. ``trigger(holder)`` causes the change on a process other than ``holder`` and returns which."""
    served = Served()
    changed = asyncio.Event()
    seen: list[str] = []

    async def on_message(message: Any) -> None:
        if (
            isinstance(message, types.ToolListChangedNotification)
            or getattr(getattr(message, "root", None), "method", None) == "notifications/tools/list_changed"
        ):
            seen.append("tools/list_changed")
            changed.set()

    async with mcp_client(url, served, "legacy", message_handler=on_message) as client:
        await client.list_tools()
        holder = await eventually(
            lambda: next((r for m, p, s, r in served.log if m == "GET" and p == "/mcp" and s == 200), None),
            lambda: f"the client's GET stream to open: {served.log[-5:]}",
            timeout=10,
        )
        changer = await trigger(holder)
        assert changer != holder
        try:
            await asyncio.wait_for(changed.wait(), 5)
        except TimeoutError:
            raise AssertionError(
                f"a list change on {changer} never reached the GET stream held by {holder}; "
                f"requests: {served.log}"
            ) from None


async def check_stateless_gated_call(url: str) -> Served:
    """The stateless era (2026-07-28): a gated call asks in-band (``input_required`` with a signed
    ``requestState``) and the retry carrying the answer lands on the next replica."""
    served = Served()
    request = {
        "request": {
            "sku": "ACC-DOCK",
            "quantity": 1,
            "department": "engineering",
            "justification": "Docking station for a new hire",
        }
    }
    async with mcp_client(url, served, "2026-07-28", elicitation_callback=approve) as client:
        for _ in range(6):
            found = await client.call_tool("search_assets", {"query": "laptop"})
            assert found.is_error is False, found.content
        result = await client.call_tool("submit_purchase_request", request)
        assert result.is_error is False, result.content
        assert (
            result.structured_content["requested_by"] == "alice"
            and result.structured_content["total"] == 229.0
        )
    return served


# --- A2A ---------------------------------------------------------------------------------------------


class Receiver:
    """A push-notification receiver: a real HTTP server in this process."""

    def __init__(self) -> None:
        self.received: list[dict] = []

    def app(self) -> Starlette:
        async def hook(request: Request) -> JSONResponse:
            self.received.append(await request.json())
            return JSONResponse({})

        return Starlette(routes=[Route("/hook", hook, methods=["POST"])])

    def states(self) -> list[str]:
        out = []
        for body in self.received:
            kind, payload = next(iter(body.items()))
            out.append(payload["status"]["state"] if kind == "statusUpdate" else kind)
        return out


async def check_a2a_flow(
    url: str,
    *,
    steer: Callable[[httpx.AsyncClient, int], Any] | None,
    receiver_url: str,
    receiver: Receiver,
    keepalive: bool = True,
) -> Served:
    """Send (input-required) on replica 0, SubscribeToTask on replica 2, the follow-up answered on replica 1;
    push notifications to ``receiver`` once each and in order. Without ``steer`` (one multi-worker server),
    the same steps go wherever the kernel sends them."""
    served = Served()
    extra = {} if keepalive else fresh_connections()
    async with hooked(served, **extra) as http:
        client = await a2a_client(http, url)
        streaming = await a2a_client(http, url, streaming=True)
        ask = SendMessageRequest(message=message(skill="approve_purchase", data=APPROVE))
        push = TaskPushNotificationConfig(url=f"{receiver_url}/hook", token="tok-scale")
        ask.configuration.task_push_notification_config.CopyFrom(push)
        if steer:
            await steer(http, 0)
        mark = len(served.log)
        task = await last_task(client, ask)
        sent_by = served.log[mark][3]
        assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED, task.status
        assert "approve PR-1001 for 898.00?" in task.status.message.parts[0].text

        seen: list[Any] = []
        subscribed = asyncio.Event()

        async def follow() -> None:
            async for event in streaming.subscribe(SubscribeToTaskRequest(id=task.id)):
                seen.append(event)
                subscribed.set()

        if steer:
            await steer(http, 2)
        mark = len(served.log)
        follower = asyncio.create_task(follow())
        try:
            await asyncio.wait_for(subscribed.wait(), 10)
        except TimeoutError:
            follower.cancel()
            raise AssertionError(
                f"SubscribeToTask on another replica gave no first event: {served.log[mark:]}"
            )
        subscribed_on = served.log[mark][3]

        if steer:
            await steer(http, 1)
        mark = len(served.log)
        answer = message(data={"approved": True, "note": "ok for on-call"}, task_id=task.id)
        done = await last_task(client, SendMessageRequest(message=answer))
        answered_by = served.log[mark][3]
        assert done.status.state == TaskState.TASK_STATE_COMPLETED, (
            f"the follow-up answered by {answered_by} (asked on {sent_by}): {done.status}"
        )
        decision = done.artifacts[0].parts[0].data.struct_value
        assert decision["approved"] is True and decision["approver_note"] == "ok for on-call"
        try:
            await asyncio.wait_for(follower, 10)
        except TimeoutError:
            follower.cancel()
            raise AssertionError(
                f"the subscriber on {subscribed_on} never saw the end; it saw "
                f"{[e.WhichOneof('payload') for e in seen]}"
            ) from None
    if steer:
        assert len({sent_by, subscribed_on, answered_by}) == 3, (sent_by, subscribed_on, answered_by)
    kinds = [e.WhichOneof("payload") for e in seen]
    assert kinds[0] == "task" and kinds[-1] == "status_update", kinds
    assert seen[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
    assert "artifact_update" in kinds and kinds.index("artifact_update") < len(kinds) - 1

    def pushed() -> list[str]:
        return [json.dumps(b, sort_keys=True) for b in receiver.received]

    await eventually(
        lambda: "TASK_STATE_COMPLETED" in receiver.states(),
        lambda: f"the completed push: {receiver.states()}",
        timeout=10,
    )
    await stays(  # a duplicate from another replica would arrive now
        lambda: len(pushed()) == len(set(pushed())),
        lambda: f"a push notification came twice: {receiver.states()}",
        seconds=0.5,
    )
    states = receiver.states()
    bodies = pushed()
    assert len(bodies) == len(set(bodies)), f"a push notification came twice: {states}"
    assert all(next(iter(b.values()))["taskId"] == task.id for b in receiver.received)
    assert states == PUSH_SEQUENCE, f"push notifications out of order or missing: {states}"
    return served


# What one process sends for the example's approve_purchase, asked then answered (the same sequence, in the
# same order, is expected whichever replicas serve the two messages).
PUSH_SEQUENCE = [
    "TASK_STATE_WORKING",
    "TASK_STATE_WORKING",
    "TASK_STATE_WORKING",
    "TASK_STATE_INPUT_REQUIRED",
    "TASK_STATE_WORKING",
    "artifactUpdate",
    "TASK_STATE_COMPLETED",
]


async def poll_tasks(client: Any, ids: list[str], timeout: float) -> dict[str, Any]:
    """GetTask for every id until each is terminal or ``timeout`` passes; transient errors (a request that was
    on a replica as it died) are retried."""
    last: dict[str, Any] = {}

    async def all_terminal() -> bool:
        for task_id in ids:
            if task_id in last and last[task_id].status.state in TERMINAL:
                continue
            try:
                last[task_id] = await client.get_task(GetTaskRequest(id=task_id))
            except Exception:  # noqa: BLE001, S112  (a poll that met the dying replica: poll again)
                continue
        return len(last) == len(ids) and all(t.status.state in TERMINAL for t in last.values())

    with contextlib.suppress(AssertionError):  # the caller reports what is left unfinished
        await eventually(all_terminal, "every task to end", timeout=timeout, interval=0.2)
    return last


# --- AG-UI -------------------------------------------------------------------------------------------

# Runs steps like tests/agui/harness.mjs (one HttpAgent), plus two kinds it cannot: {"pause": true} waits for a
# line on stdin (the test restarts the server meanwhile), and {"reconnect": runId, "url": ...} re-reads a run
# with HttpAgent.connectAgent through GET <skill>/runs/<runId>/events. One JSON line per step on stdout.
DRIVER = r"""
import { HttpAgent, runHttpRequest, transformHttpEventStream } from "@ag-ui/client";
import { createInterface } from "node:readline";

const warnings = [];
console.warn = (...args) => { warnings.push(args.map(String).join(" ")); };
const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
const scenario = JSON.parse(process.argv[1]);

class Reconnecting extends HttpAgent {
  connect(input) {
    const init = { method: "GET", headers: { accept: "text/event-stream", ...(this.lastEventId ? { "last-event-id": String(this.lastEventId) } : {}) } };
    return transformHttpEventStream(runHttpRequest(() => fetch(this.eventsUrl, init)));
  }
}

const agent = new Reconnecting({ url: scenario.url, threadId: scenario.threadId, headers: scenario.headers || {} });
for (const step of scenario.steps) {
  if (step.pause) { process.stdout.write(JSON.stringify({ paused: true }) + "\n"); await lines.next(); continue; }
  const events = [];
  const record = { runId: step.runId || step.reconnect, warningsBefore: warnings.length };
  const subscriber = { onEvent: ({ event }) => { events.push(event); }, onRunErrorEvent: ({ event }) => { record.runError = event; } };
  try {
    if (step.reconnect) {
      agent.eventsUrl = `${scenario.url}/runs/${step.reconnect}/events`;
      agent.lastEventId = step.lastEventId;
      const { result } = await agent.connectAgent({ runId: step.reconnect }, subscriber);
      record.result = result ?? null;
    } else {
      if (step.say) agent.addMessage({ id: `u-${step.runId}`, role: "user", content: step.say });
      const params = { runId: step.runId, forwardedProps: step.forwardedProps || {} };
      if (step.resume) params.resume = (agent.pendingInterrupts || []).map((i) => ({ interruptId: i.id, status: "resolved", payload: step.payload }));
      const { result } = await agent.runAgent(params, subscriber);
      record.result = result ?? null;
    }
  } catch (error) {
    record.rejected = String(error && error.message || error);
  }
  record.events = events;
  record.pendingInterrupts = agent.pendingInterrupts || [];
  record.warnings = warnings.slice(record.warningsBefore);
  delete record.warningsBefore;
  process.stdout.write(JSON.stringify(record) + "\n");
}
process.exit(0);
"""


def node() -> str:
    found = require_tool(
        "Node (>= 20, with npm)",
        shutil.which("node"),
        "install Node >= 20 with npm, then run `scripts/setup`",
    )
    require_tool("The AG-UI client npm package", AGUI / "node_modules" / "@ag-ui" / "client", NODE_SETUP)
    return found


def harness(url: str, steps: list[dict], thread: str) -> list[dict]:
    """tests/agui/harness.mjs: one HttpAgent runs the steps."""
    scenario = {"url": f"{url}/agui/approve_purchase", "threadId": thread, "steps": steps}
    run = subprocess.run(
        [node(), str(HARNESS), json.dumps(scenario)],
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
        cwd=AGUI,
    )
    assert run.returncode == 0, run.stderr
    output = json.loads(run.stdout.strip().splitlines()[-1])
    assert output["warnings"] == [], output["warnings"]
    return output["steps"]


class Driver:
    """The driver above in a node process, one step line at a time."""

    def __init__(self, url: str, steps: list[dict], thread: str) -> None:
        scenario = {"url": f"{url}/agui/approve_purchase", "threadId": thread, "steps": steps}
        self.process = subprocess.Popen(
            [node(), "--input-type=module", "-e", DRIVER, json.dumps(scenario)],
            cwd=AGUI,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def next(self) -> dict:
        line = self.process.stdout.readline()  # type: ignore[union-attr]
        if not line:
            self.process.wait(timeout=10)
            raise AssertionError(f"the AG-UI driver ended early: {self.process.stderr.read()}")  # type: ignore[union-attr]
        return json.loads(line)

    def go_on(self) -> None:
        self.process.stdin.write("go\n")  # type: ignore[union-attr]
        self.process.stdin.flush()  # type: ignore[union-attr]

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=10)


def outcome(step: dict) -> Any:
    assert "rejected" not in step, step.get("rejected")
    final = step["events"][-1] if step["events"] else {}
    return final.get("outcome") if final.get("type") == "RUN_FINISHED" else step.get("runError") or final


def ask_step(run_id: str) -> dict:
    return {"runId": run_id, "forwardedProps": {"arguments": APPROVE}}


def resume_step(run_id: str) -> dict:
    return {"runId": run_id, "resume": "resolve", "payload": {"approved": True, "note": "fine"}}


def check_interrupt(step: dict) -> None:
    result = outcome(step)
    assert isinstance(result, dict) and result.get("type") == "interrupt", result
    [interrupt] = result["interrupts"]
    assert "approve PR-1001 for 898.00?" in interrupt["message"]


def check_resumed(step: dict) -> None:
    result = outcome(step)
    assert result == {"type": "success"}, f"the resume: {result}"
    assert step["pendingInterrupts"] == []
    finished = step["events"][-1]
    assert finished["result"]["approved"] is True and finished["result"]["approver_note"] == "fine", finished


async def check_agui(url: str, *, steer: Callable[[httpx.AsyncClient, int], Any] | None, thread: str) -> None:
    """An interrupt (replica 0), its resume (replica 1) and a reconnect to the resumed run (replica 2): with
    ``@ag-ui/client`` through the proxy; then the rest of the run after ``Last-Event-ID``."""
    async with httpx.AsyncClient(timeout=30) as http:
        if steer:
            await steer(http, 0)  # the harness's two POSTs go to replicas 0 then 1 (round robin)
        asked, resumed = await asyncio.to_thread(
            harness, url, [ask_step(f"{thread}-ask"), resume_step(f"{thread}-yes")], thread
        )
        check_interrupt(asked)
        check_resumed(resumed)
        if steer:
            await steer(http, 2)
        driver = Driver(url, [{"reconnect": f"{thread}-yes"}], thread)
        try:
            again = await asyncio.to_thread(driver.next)
        finally:
            driver.close()
        assert "rejected" not in again, f"reconnect to the resumed run: {again.get('rejected')}"
        assert [e["type"] for e in again["events"]] == [e["type"] for e in resumed["events"]], again["events"]
        assert again["events"][-1]["outcome"] == {"type": "success"}
        if steer:
            await steer(http, 0)
        rest = await http.get(
            f"{url}/agui/approve_purchase/runs/{thread}-yes/events",
            headers={"last-event-id": "2", "accept": "text/event-stream"},
        )
        assert rest.status_code == 200, (rest.status_code, rest.text[:300])
        ids = [int(line[4:]) for line in rest.text.splitlines() if line.startswith("id: ")]
        assert ids and ids[0] == 3 and ids == sorted(ids), ids
        assert len(ids) == len(resumed["events"]) - 2


# === 3 replicas, one Redis, nginx ====================================================================

# --- what passes with the library as it is --------------------------------------------------------


async def test_nginx_spreads_requests_round_robin_without_stickiness(redis_cluster: Cluster) -> None:
    async with httpx.AsyncClient(timeout=10) as http:
        answered = [redis_cluster.which(await http.get(f"{redis_cluster.url}/health")) for _ in range(30)]
    assert Counter(answered) == {0: 10, 1: 10, 2: 10}, answered
    assert all(b == (a + 1) % 3 for a, b in itertools.pairwise(answered)), answered


async def test_a2a_card_through_the_proxy(redis_cluster: Cluster) -> None:
    served = Served()
    async with hooked(served) as http:
        cards = [await http.get(f"{redis_cluster.url}/.well-known/agent-card.json") for _ in range(3)]
        card = await A2ACardResolver(http, redis_cluster.url).get_agent_card()
        revalidated = await http.get(
            f"{redis_cluster.url}/.well-known/agent-card.json",
            headers={"if-none-match": cards[0].headers["etag"]},
        )
    assert len({r[3] for r in served.log[:3]}) == 3  # one card from each replica
    assert cards[0].json() == cards[1].json() == cards[2].json()
    assert len({c.headers["etag"] for c in cards}) == 1, "replicas disagree on the card's ETag"
    assert revalidated.status_code == 304, "a cached card was not revalidated by another replica"
    assert {i.url for i in card.supported_interfaces} == {
        f"{redis_cluster.url}/a2a"
    }  # the proxy, not a replica
    assert {s.id for s in card.skills} >= {"approve_purchase", "procurement_assistant"}


async def test_a2a_send_then_get_task_on_another_replica(redis_cluster: Cluster) -> None:
    served = Served()
    async with hooked(served) as http:
        client = await a2a_client(http, redis_cluster.url)
        await redis_cluster.steer(http, 0)
        done = await last_task(
            client,
            SendMessageRequest(
                message=message(skill="scale_steps", data={"label": "get-elsewhere", "steps": 1, "pause": 0})
            ),
        )
        assert done.status.state == TaskState.TASK_STATE_COMPLETED, done.status
        await redis_cluster.steer(http, 1)
        mark = len(served.log)
        got = await client.get_task(GetTaskRequest(id=done.id))
    assert served.index(mark) == 1
    assert got.status.state == TaskState.TASK_STATE_COMPLETED
    assert got.artifacts[0].parts[0].data.struct_value["steps"] == [0]
    assert got.history == done.history


async def test_mcp_stateless_era_through_the_proxy_with_a_shared_secret(secret_cluster: Cluster) -> None:
    """What works today when the deployment gives every replica the same ``secret``: the 2026 era keeps no
    session, and the gated call's ``requestState`` is verified by whichever replica gets the retry."""
    served = await check_stateless_gated_call(secret_cluster.url)
    assert len(set(served.replicas("POST", "/mcp"))) == 2, served.log


# --- what needs the shared state (issue 11) -------------------------------------------------------


async def test_a2a_parked_task_read_on_other_replicas_stays_parked(redis_cluster: Cluster) -> None:
    """GetTask on replicas 1 and 2 for a task parked (input-required) on replica 0 shows it parked, and
    the parked execution is still there to answer."""
    served = Served()
    async with hooked(served) as http:
        client = await a2a_client(http, redis_cluster.url)
        await redis_cluster.steer(http, 0)
        asked = await last_task(
            client, SendMessageRequest(message=message(skill="approve_purchase", data=APPROVE))
        )
        assert asked.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        mark = len(served.log)
        got = [await client.get_task(GetTaskRequest(id=asked.id)) for _ in range(2)]
        assert [served.index(mark), served.index(mark + 1)] == [1, 2]
        for seen in got:
            assert seen.status.state == TaskState.TASK_STATE_INPUT_REQUIRED, (
                f"{TaskState.Name(seen.status.state)}: {[p.text for p in seen.status.message.parts]}"
            )
            assert seen.status.message.parts[0].text == asked.status.message.parts[0].text
        await redis_cluster.steer(http, 0)
        done = await last_task(
            client, SendMessageRequest(message=message(data={"approved": False}, task_id=asked.id))
        )
    assert done.status.state == TaskState.TASK_STATE_COMPLETED, done.status
    assert done.artifacts[0].parts[0].data.struct_value["approved"] is False


async def test_mcp_stateless_gated_call_needs_no_configured_secret(redis_cluster: Cluster) -> None:
    """The example sets no ``secret``: the replicas must agree on one through the store."""
    served = await check_stateless_gated_call(redis_cluster.url)
    assert len(set(served.replicas("POST", "/mcp"))) == 3, served.log


async def test_mcp_handshake_200_calls_through_the_proxy(redis_cluster: Cluster) -> None:
    served = await check_mcp_handshake_calls(redis_cluster.url)
    posts = Counter(r.split("-")[0] for r in served.replicas("POST", "/mcp"))
    assert set(posts) == {"0", "1", "2"}, posts  # the session really was served by all three


async def test_mcp_list_change_reaches_a_get_stream_on_another_replica(redis_cluster: Cluster) -> None:
    async def trigger(holder: str) -> str:
        other = next(r for r in redis_cluster.replicas if str(r.index) != holder.split("-")[0])
        async with httpx.AsyncClient(timeout=10) as http:
            changed = await http.post(f"{other.url}/_scale/list-change")
            await http.post(f"{other.url}/_scale/list-change")  # and back: the lists stay as they were
        return str(changed.json()["replica"])

    await check_mcp_list_change(redis_cluster.url, trigger)


async def test_a2a_follow_up_on_another_replica_subscribe_on_a_third_push_once_in_order(
    redis_cluster: Cluster,
) -> None:
    receiver = Receiver()
    with serve(receiver.app()) as receiver_url:
        await check_a2a_flow(
            redis_cluster.url, steer=redis_cluster.steer, receiver_url=receiver_url, receiver=receiver
        )


async def test_agui_interrupt_resume_and_reconnect_through_the_proxy(redis_cluster: Cluster) -> None:
    await check_agui(redis_cluster.url, steer=redis_cluster.steer, thread=f"t-scale-{uuid.uuid4().hex[:8]}")


async def test_kill_9_of_a_replica_while_20_tasks_run(redis_cluster: Cluster) -> None:
    """20 tasks of 6 steps spread over 3 replicas; one replica is killed mid-run. Every task finishes, and the
    side-effect file shows each step of each task done exactly once (journal replay, not a rerun)."""
    steps, victim = 6, 1
    labels = [f"kill-{uuid.uuid4().hex[:6]}-{n}" for n in range(20)]
    served = Served()
    try:
        async with hooked(served) as http:
            client = await a2a_client(http, redis_cluster.url)
            ids: list[str] = []
            where: dict[str, str] = {}
            for label in labels:
                request = SendMessageRequest(
                    message=message(skill="scale_steps", data={"label": label, "steps": steps, "pause": 0.4})
                )
                request.configuration.return_immediately = True
                mark = len(served.log)
                task = await last_task(client, request)
                ids.append(task.id)
                where[task.id] = served.log[mark][3]
            on_victim = [i for i in ids if where[i].startswith(f"{victim}-")]
            assert len(on_victim) >= 6, where
            await eventually(  # every task is between its steps now
                lambda: len(redis_cluster.effects_seen()) >= 40, "the tasks to start", timeout=10
            )
            redis_cluster.kill(victim)
            final = await poll_tasks(client, ids, timeout=60)
    finally:
        if not redis_cluster.replicas[victim].alive:
            redis_cluster.replicas[victim].start()  # the module's other tests want three replicas
    states = {i: TaskState.Name(t.status.state) for i, t in final.items()}
    unfinished = {i: s for i, s in states.items() if s != "TASK_STATE_COMPLETED"}
    why = Counter(
        (states[i], where[i].split("-")[0], " ".join(p.text for p in final[i].status.message.parts))
        for i in unfinished
    )
    assert not unfinished, (
        f"{len(unfinished)} of 20 tasks did not complete after replica {victim} was killed "
        f"({len(on_victim)} were on it); (state, replica it was sent to, message): {why}"
    )
    counts = Counter((e["label"], e["step"]) for e in redis_cluster.effects_seen() if e["label"] in labels)
    twice = {k: n for k, n in counts.items() if n > 1}
    missing = [(label, s) for label in labels for s in range(steps) if (label, s) not in counts]
    assert not twice, f"steps done more than once: {twice}"
    assert not missing, f"steps never done: {missing}"
    for task_id, task in final.items():
        assert task.artifacts[0].parts[0].data.struct_value["steps"] == list(range(steps)), task_id


# === uvicorn --workers 4, default SQLite store, no proxy =============================================


async def test_workers_mcp_handshake_200_calls(workers_server: Cluster) -> None:
    served = await check_mcp_handshake_calls(workers_server.url, keepalive=False)
    processes = set(served.replicas("POST", "/mcp"))
    assert len(processes) >= 2, f"every call went to one worker, which proves nothing: {processes}"


async def test_workers_mcp_list_change_reaches_a_get_stream_in_another_worker(
    workers_server: Cluster,
) -> None:
    async def trigger(holder: str) -> str:
        async with httpx.AsyncClient(timeout=10, **fresh_connections()) as http:
            for _ in range(40):
                changed = await http.post(f"{workers_server.url}/_scale/list-change")
                by = str(changed.json()["replica"])
                if by != holder:
                    return by
                await http.post(f"{workers_server.url}/_scale/list-change")  # undo it on the holder
        raise AssertionError("40 new connections all went to the worker that holds the stream")

    await check_mcp_list_change(workers_server.url, trigger)


async def test_workers_a2a_follow_up_subscribe_and_push(workers_server: Cluster) -> None:
    receiver = Receiver()
    with serve(receiver.app()) as receiver_url:
        await check_a2a_flow(
            workers_server.url, steer=None, receiver_url=receiver_url, receiver=receiver, keepalive=False
        )


async def test_workers_agui_interrupt_resume_and_reconnect(workers_server: Cluster) -> None:
    await check_agui(workers_server.url, steer=None, thread=f"t-workers-{uuid.uuid4().hex[:8]}")


# === restart =====================================================================================


async def test_a2a_parked_task_resumes_after_a_restart(single_replica: Cluster) -> None:
    replica = single_replica.replicas[0]
    async with httpx.AsyncClient(timeout=30) as http:
        client = await a2a_client(http, single_replica.url)
        asked = await last_task(
            client, SendMessageRequest(message=message(skill="approve_purchase", data=APPROVE))
        )
        assert asked.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    replica.restart()
    async with httpx.AsyncClient(timeout=30) as http:
        client = await a2a_client(http, single_replica.url)
        parked = await client.get_task(GetTaskRequest(id=asked.id))
        assert parked.status.state == TaskState.TASK_STATE_INPUT_REQUIRED, (
            f"after the restart the parked task is {TaskState.Name(parked.status.state)}: "
            f"{[p.text for p in parked.status.message.parts]}"
        )
        answer = message(data={"approved": True, "note": "after the restart"}, task_id=asked.id)
        done = await last_task(client, SendMessageRequest(message=answer))
    assert done.status.state == TaskState.TASK_STATE_COMPLETED, (
        f"{TaskState.Name(done.status.state)}: {[p.text for p in done.status.message.parts]}"
    )
    decision = done.artifacts[0].parts[0].data.struct_value
    assert decision["approved"] is True and decision["approver_note"] == "after the restart"


async def test_agui_interrupt_resumes_after_a_restart(single_replica: Cluster) -> None:
    thread = f"t-restart-{uuid.uuid4().hex[:8]}"
    driver = Driver(
        single_replica.url, [ask_step(f"{thread}-ask"), {"pause": True}, resume_step(f"{thread}-yes")], thread
    )
    try:
        check_interrupt(await asyncio.to_thread(driver.next))
        assert (await asyncio.to_thread(driver.next)) == {"paused": True}
        await asyncio.to_thread(single_replica.replicas[0].restart)
        driver.go_on()
        check_resumed(await asyncio.to_thread(driver.next))
    finally:
        driver.close()
