"""The safety layer's live state is shared by replicas (issue 11, item 2).

Two or three replicas of one app: each its own ``Agent``, its own app and its own ``State`` instance (its
own connection), all on one store: a SQLite file, and a real redis-server when one is installed. They are
served in-process through ``httpx.ASGITransport``. Any replica then

- refuses a ``requestState`` that was used on another, and of concurrent retries on two replicas runs one;
- signs and checks ``requestState`` with one secret, agreed through the store with no configuration;
- returns the first outcome for a duplicate idempotency key running on another replica, waiting for it;
  and takes over a key whose owner died;
- accepts an approval created on A, decided on B, for the retry on C; and uses it once only.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import HTTPConnection

from agentmw import Agent, AgentMiddleware, Retryable, tool
from agentmw.safety import IdempotencyCache, human_gate
from agentmw.state import State, open_state
from agentmw.testing import McpError, McpTestClient
from tests.state.conftest import redis_url  # noqa: F401  (the redis-server fixture)
from tests.waiting import eventually, stays

STATELESS = "2026-07-28"
USERS = {"t-alice": "alice", "t-admin": "admin"}
effects: list[str] = []
releases: dict[str, asyncio.Event] = {}


# --- the app every replica runs ------------------------------------------------------------------------


def identify(connection: HTTPConnection) -> str | None:
    _, _, token = connection.headers.get("authorization", "").partition(" ")
    return USERS.get(token)


@tool
@human_gate(side_effects="Sends money")
async def pay(to: str, amount: int) -> str:
    """Pay someone (a person approves it first)."""
    effects.append(f"pay:{to}:{amount}")
    return f"paid {amount} to {to}"


@tool
async def charge(account: str, amount: int) -> dict:
    """Charge an account once per idempotency key; waits for the test's signal when asked to."""
    effects.append(f"charge:{account}:{amount}:started")
    gate = releases.get(account)
    if gate is not None:
        await gate.wait()
    effects.append(f"charge:{account}:{amount}")
    return {"account": account, "amount": amount, "charge": uuid.uuid4().hex}


@tool
async def flaky(label: str) -> str:
    """Fails retryably once, then works: a retryable failure is never kept under a key."""
    effects.append(f"flaky:{label}")
    if effects.count(f"flaky:{label}") == 1:
        raise Retryable("try again", retry_after=0)
    return f"ok {label}"


def replica(store: State | str, **settings: Any) -> tuple[Agent, Starlette]:
    agent = Agent("shared-safety", store=store, identify=identify, include=[pay, charge, flaky], **settings)
    return agent, Starlette(middleware=[_middleware(agent)])


def _middleware(agent: Agent) -> Any:
    from starlette.middleware import Middleware

    return Middleware(AgentMiddleware, agent=agent)


# --- the shared store: a SQLite file, or a redis-server ------------------------------------------------------

BACKENDS = ["sqlite", "redis"]


@pytest.fixture(params=BACKENDS)
async def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    effects.clear()
    releases.clear()
    if request.param == "redis":
        yield f"{request.getfixturevalue('redis_url')}?prefix=t{uuid.uuid4().hex[:12]}"
    else:
        yield f"sqlite:///{tmp_path / 'shared.db'}"


@pytest.fixture
async def replicas(store_url: str) -> AsyncIterator[Callable[..., list[tuple[Agent, Starlette]]]]:
    """``replicas(n, **settings)``: n replicas, each with its own State instance on the shared store."""
    made: list[Agent] = []

    def make(n: int = 2, **settings: Any) -> list[tuple[Agent, Starlette]]:
        built = [replica(open_state(store_url), **settings) for _ in range(n)]
        made.extend(agent for agent, _ in built)
        return built

    yield make
    for agent in made:
        await agent.state.close()


def mcp(app: Starlette, token: str = "t-alice", **options: Any) -> McpTestClient:
    return McpTestClient(app, era=STATELESS, headers={"authorization": f"Bearer {token}"}, **options)


def http(app: Starlette, token: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app),
        base_url="http://127.0.0.1:8000",
        headers={"authorization": f"Bearer {token}"},
    )


ACCEPT = {"action": "accept", "content": {"approved": True}}


async def ask(client: McpTestClient, arguments: dict[str, Any]) -> dict[str, Any]:
    """The first round of ``pay``: its question and the signed ``requestState``; the retry's params."""
    first = await client.call_tool("pay", arguments)
    assert first["resultType"] == "input_required", first
    [key] = first["inputRequests"]
    return {
        "name": "pay",
        "arguments": arguments,
        "inputResponses": {key: ACCEPT},
        "requestState": first["requestState"],
    }


# --- requestState: single use across replicas, and one secret ------------------------------------------------


async def test_a_request_state_used_on_one_replica_is_refused_on_another(replicas) -> None:
    (_, a), (_, b) = replicas(2, secret="configured")  # the secret's own sharing is the test after next
    async with (
        mcp(a, capabilities={"elicitation": {}}) as on_a,
        mcp(b, capabilities={"elicitation": {}}) as on_b,
    ):
        retry = await ask(on_a, {"to": "bob", "amount": 3})
        done = await on_a.request("tools/call", retry)
        assert done["content"][0]["text"] == "paid 3 to bob"
        for client in (on_a, on_b):
            with pytest.raises(McpError) as refused:
                await client.request("tools/call", retry)
            assert refused.value.code == -32602 and "already used" in refused.value.message
    assert effects == ["pay:bob:3"]


async def test_concurrent_retries_of_one_state_on_two_replicas_run_once(replicas) -> None:
    (_, a), (_, b), (_, c) = replicas(3, secret="configured")
    caps = {"elicitation": {}}
    async with (
        mcp(a, capabilities=caps) as on_a,
        mcp(b, capabilities=caps) as on_b,
        mcp(c, capabilities=caps) as on_c,
    ):
        retry = await ask(on_c, {"to": "dave", "amount": 9})

        async def attempt(client: McpTestClient) -> str:
            try:
                result = await client.request("tools/call", retry)
            except McpError as exc:
                assert exc.code == -32602 and "already used" in exc.message
                return "refused"
            assert result["content"][0]["text"] == "paid 9 to dave"
            return "ran"

        outcomes = await asyncio.gather(*(attempt(client) for client in (on_a, on_b, on_a, on_b)))
    assert sorted(outcomes) == ["ran", "refused", "refused", "refused"]
    assert effects == ["pay:dave:9"]


async def test_replicas_agree_on_the_secret_through_the_store(replicas, store_url: str) -> None:
    (first, _), (second, _) = replicas(2)
    assert not first.secret_known and not second.secret_known  # nothing read before it is needed
    secrets = await asyncio.gather(first.signing_secret(), second.signing_secret())
    assert secrets[0] == secrets[1] == first.secret == second.secret and len(secrets[0]) == 32
    ((later, _),) = replicas(1)
    assert await later.signing_secret() == secrets[0]  # a replica started later reads the same one
    explicit, _ = replica(open_state(store_url), secret="configured")
    try:
        assert explicit.secret == b"configured" and await explicit.signing_secret() == b"configured"
    finally:
        await explicit.state.close()
    other = Agent("elsewhere", store="memory://")
    assert await other.signing_secret() != secrets[0]  # another store, another secret


async def test_a_request_state_issued_on_one_replica_is_answered_on_another(replicas) -> None:
    (_, a), (_, b) = replicas(2)  # no secret configured: the store's is used
    async with (
        mcp(a, capabilities={"elicitation": {}}) as on_a,
        mcp(b, capabilities={"elicitation": {}}) as on_b,
    ):
        retry = await ask(on_a, {"to": "gina", "amount": 4})
        done = await on_b.request("tools/call", retry)
        assert done["content"][0]["text"] == "paid 4 to gina"
    assert effects == ["pay:gina:4"]


async def test_the_stateless_path_without_key_or_gate_never_touches_the_state(replicas) -> None:
    ((agent, app),) = replicas(1)
    touched: list[str] = []
    state = agent.state

    class Spy:
        def __getattr__(self, name: str) -> Any:
            touched.append(name)
            return getattr(state, name)

    agent._state = Spy()
    async with mcp(app) as client:
        result = await client.call_tool("charge", {"account": "plain", "amount": 1})
    assert result["isError"] is False and touched == []
    agent._state = state


# --- idempotency keys across replicas ------------------------------------------------------------------------------


def keyed(account: str, amount: int, key: str) -> dict[str, Any]:
    return {
        "name": "charge",
        "arguments": {"account": account, "amount": amount},
        "_meta": {"agentmw/idempotencyKey": key},
    }


async def test_a_duplicate_key_on_another_replica_waits_and_gets_the_first_outcome(replicas) -> None:
    (agent_a, a), (agent_b, b), (_, c) = replicas(3)
    releases["acme"] = asyncio.Event()
    async with mcp(a) as on_a, mcp(b) as on_b, mcp(c) as on_c:
        first = asyncio.create_task(on_a.request("tools/call", keyed("acme", 5, "k-1")))
        await eventually(lambda: "charge:acme:5:started" in effects, "the first charge to start")
        second = asyncio.create_task(on_b.request("tools/call", keyed("acme", 5, "k-1")))
        await stays(
            lambda: not second.done(),
            "the duplicate waits for the first call, which still runs on A",
            seconds=0.2,
        )
        releases["acme"].set()
        one, two = await asyncio.wait_for(asyncio.gather(first, second), 10)
        three = await on_c.request("tools/call", keyed("acme", 5, "k-1"))
        assert one["structuredContent"] == two["structuredContent"] == three["structuredContent"]
        assert one["content"] == two["content"] == three["content"]
        reused = await on_c.request("tools/call", keyed("acme", 6, "k-1"))
        assert reused["isError"] is True and "different arguments" in reused["content"][0]["text"]
    assert effects.count("charge:acme:5") == 1 and "charge:acme:6" not in " ".join(effects)
    assert agent_a.idempotency.misses == 1 and agent_b.idempotency.hits == 1


async def test_concurrent_duplicates_on_two_replicas_run_once(replicas) -> None:
    (_, a), (_, b) = replicas(2)
    async with mcp(a) as on_a, mcp(b) as on_b:
        calls = [
            client.request("tools/call", keyed("globex", 7, "k-2")) for client in (on_a, on_b, on_a, on_b)
        ]
        results = await asyncio.wait_for(asyncio.gather(*calls), 10)
    assert len({str(result["structuredContent"]) for result in results}) == 1
    assert effects.count("charge:globex:7") == 1


async def test_a_retryable_failure_is_not_kept_across_replicas(replicas) -> None:
    (_, a), (_, b) = replicas(2)
    call = {"name": "flaky", "arguments": {"label": "x"}, "_meta": {"agentmw/idempotencyKey": "k-retry"}}
    async with mcp(a) as on_a, mcp(b) as on_b:
        failed = await on_a.request("tools/call", call)
        assert failed["isError"] is True and failed["_meta"]["agentmw/retryable"] is True
        retried = await on_b.request("tools/call", call)
        assert retried["isError"] is False and retried["content"][0]["text"] == "ok x"
        again = await on_a.request("tools/call", call)
        assert again["content"] == retried["content"]
    assert effects.count("flaky:x") == 2


async def test_a_key_whose_owner_died_is_taken_over(store_url: str) -> None:
    stores = [open_state(store_url), open_state(store_url)]
    try:
        key, arguments = ("alice", "charge", "k-dead"), '{"amount": 1}'
        # the claim a replica left when it died mid-call: its lease, never renewed, and no outcome
        claim = {"owner": "dead-replica", "args": hashlib.sha256(arguments.encode()).hexdigest()[:32]}
        assert await stores[0].set_if_absent("idem.run", IdempotencyCache.state_key(key), claim, 0.5)
        survivor = IdempotencyCache(60, state=stores[1], lease_seconds=5, poll_seconds=0.05)
        runs: list[float] = []

        async def produce() -> str:
            runs.append(time.monotonic())
            return "charged once"

        started = time.monotonic()
        assert (
            await asyncio.wait_for(survivor.run(key, arguments, produce, lambda _: True), 10)
            == "charged once"
        )
        assert len(runs) == 1 and runs[0] - started >= 0.3, "it waited for the dead owner's lease to expire"
        again = IdempotencyCache(60, state=stores[0])
        assert await again.run(key, arguments, produce, lambda _: True) == "charged once" and len(runs) == 1
    finally:
        for store in stores:
            await store.close()


# --- approvals across replicas ------------------------------------------------------------------------------------


async def _approval(client: McpTestClient, arguments: dict[str, Any]) -> str:
    pending = await client.call_tool("pay", arguments)
    assert pending["isError"] is True, pending
    return pending["_meta"]["agentmw/approval"]["id"]


def _use(arguments: dict[str, Any], approval_id: str) -> dict[str, Any]:
    return {"name": "pay", "arguments": arguments, "_meta": {"agentmw/approvalId": approval_id}}


async def test_an_approval_created_on_a_decided_on_b_is_used_on_c_once(replicas) -> None:
    (agent_a, a), (_, b), (_, c) = replicas(3)
    arguments = {"to": "erin", "amount": 40}
    async with mcp(a) as on_a, mcp(c) as on_c, http(b, "t-admin") as admin_b, http(c, "t-admin") as admin_c:
        approval_id = await _approval(on_a, arguments)
        assert (await admin_c.get(f"/approvals/{approval_id}")).json()["status"] == "pending"
        early = await on_c.request("tools/call", _use(arguments, approval_id))
        assert early["isError"] is True and "waiting for a decision" in early["content"][0]["text"]
        decided = await admin_b.post(f"/approvals/{approval_id}", json={"approve": True, "note": "ok"})
        assert decided.status_code == 200 and decided.json()["status"] == "approved"
        again = await admin_c.post(f"/approvals/{approval_id}", json={"approve": False})
        assert again.status_code == 409 and "already approved" in again.json()["detail"]
        done = await on_c.request("tools/call", _use(arguments, approval_id))
        assert done["isError"] is False and done["content"][0]["text"] == "paid 40 to erin"
        reused = await on_a.request("tools/call", _use(arguments, approval_id))
        assert reused["isError"] is True and "already used" in reused["content"][0]["text"]
        shown = await admin_b.get(f"/approvals/{approval_id}")
        assert shown.json()["status"] == "used" and shown.json()["decidedBy"] == "admin"
    assert effects == ["pay:erin:40"]
    assert await agent_a.approvals.count() == 1


async def test_racing_uses_and_decisions_of_one_approval_on_two_replicas(replicas) -> None:
    (_, a), (_, b) = replicas(2)
    arguments = {"to": "frank", "amount": 2}
    async with mcp(a) as on_a, mcp(b) as on_b, http(a, "t-admin") as admin_a, http(b, "t-admin") as admin_b:
        approval_id = await _approval(on_a, arguments)
        decisions = await asyncio.gather(
            admin_a.post(f"/approvals/{approval_id}", json={"approve": True}),
            admin_b.post(f"/approvals/{approval_id}", json={"approve": False}),
        )
        assert sorted(d.status_code for d in decisions) == [200, 409], "exactly one decision wins"
        approved = next(d for d in decisions if d.status_code == 200).json()["status"] == "approved"
        uses = await asyncio.gather(
            *(
                client.request("tools/call", _use(arguments, approval_id))
                for client in (on_a, on_b, on_a, on_b)
            )
        )
    texts = sorted(use["content"][0]["text"] for use in uses)
    if approved:
        assert texts[-1] == "paid 2 to frank" and all("already used" in t for t in texts[:-1])
        assert effects == ["pay:frank:2"]
    else:
        assert all("rejected" in t for t in texts) and effects == []


# --- what crosses: an outcome as JSON and back ---------------------------------------------------------------------


def test_an_outcome_survives_json_with_its_types() -> None:
    import json

    from agentmw.content import Image, Text
    from agentmw.context import Ask
    from agentmw.messages import Artifact, Data, File, Message
    from agentmw.runtime import Outcome

    answer = Message(["hi", File(data=b"\x00\x01", name="a.bin"), Data({"k": [1, 2]})], metadata={"m": 1})
    artifacts = [Artifact([Data({"x": (1, 2)})], name="r", artifact_id="a-1")]
    outcomes = [
        Outcome(
            status="completed",
            content=[Text("t"), Image(b"\x89PNG")],
            structured={"n": 1.5, "s": "x"},
            value=answer,
        ),
        Outcome(
            status="completed",
            content=[Text("done")],
            value=artifacts,
            data={"$t": "not a tag", 1: "int key"},
        ),
        Outcome(
            status="rejected",
            message="no",
            code="approval_invalid",
            pending={"q": Ask("Sure?", confirmation=True)},
        ),
        Outcome(status="failed", message="gone", code="permanent", retryable=False, value=float("nan")),
    ]
    for outcome in outcomes:
        stored = json.loads(json.dumps(outcome.to_dict(), allow_nan=False))
        back = Outcome.from_dict(stored)
        if outcome.value == outcome.value:  # NaN is stored as null: JSON has no NaN
            assert back == outcome
        else:
            assert back.value is None and back.message == outcome.message


async def test_a_flood_of_settled_keys_never_pushes_out_a_running_claim() -> None:
    from agentmw.state import MemoryState

    store = MemoryState()
    here, there = (IdempotencyCache(60, max_entries=2, state=store, poll_seconds=0.02) for _ in range(2))
    gate, runs = asyncio.Event(), []

    async def slow() -> str:
        runs.append("slow")
        await gate.wait()
        return "slow done"

    first = asyncio.create_task(here.run(("a", "t", "slow"), "{}", slow, lambda _: True))
    await eventually(lambda: runs == ["slow"], "the slow call to start")
    for i in range(5):  # more settled outcomes than the namespace holds
        await here.run(("a", "t", f"k{i}"), "{}", lambda: asyncio.sleep(0, "x"), lambda _: True)
    duplicate = asyncio.create_task(there.run(("a", "t", "slow"), "{}", slow, lambda _: True))
    await stays(
        lambda: not duplicate.done() and runs == ["slow"],
        "the duplicate waits: the claim is still there",
        seconds=0.1,
    )
    gate.set()
    assert await asyncio.wait_for(asyncio.gather(first, duplicate), 5) == ["slow done", "slow done"]
