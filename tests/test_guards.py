"""Guards for promises a mutation run found unguarded (issue 16): each test fails when its rule is removed.

Every test builds its own agent (``tests/guards_app.py``), so none depends on what another left behind.
Time-based rules stamped in wall-clock time (``requestState``, approvals) move ``time.time`` forward instead
of sleeping; idempotency records age on the monotonic clock the event loop also runs on, so that one test
lets one short TTL really pass.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import time
import uuid
from collections.abc import Iterator

import httpx
import pytest

from agentmw.mcp import _state
from agentmw.settings import Limits, Timing
from agentmw.testing import McpError, McpTestClient
from tests import guards_app
from tests.helpers.mcp_raw import initialize_request

MODERN = "2026-07-28"
META = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}}
ACCEPT = "application/json, text/event-stream"
V1 = {"a2a-version": "1.0"}
HOUR = 3600.0


@pytest.fixture
def built() -> guards_app.Built:
    return guards_app.build()


def http(app, who: str | None = None) -> httpx.AsyncClient:
    headers = {"authorization": f"Bearer {who}"} if who else {}
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1:8000", headers=headers, timeout=10
    )


def mcp(app, who: str | None = None, **kwargs: object) -> McpTestClient:
    headers = {"authorization": f"Bearer {who}"} if who else {}
    return McpTestClient(app, headers=headers, **kwargs)  # type: ignore[arg-type]


class Clock:
    """Moves time forward for the code under test without moving the event loop's clock."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.offset = 0.0
        self._monkeypatch = monkeypatch
        real_time = time.time
        monkeypatch.setattr(time, "time", lambda: real_time() + self.offset)

    def advance(self, seconds: float) -> None:
        self.offset += seconds


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[Clock]:
    yield Clock(monkeypatch)


def frames_with_ids(text: str) -> list[tuple[int, dict]]:
    """(id, event) for each SSE event of an AG-UI stream; every event must carry its id."""
    out = []
    for block in text.split("\n\n"):
        lines = block.strip("\n").splitlines()
        if not any(line.startswith("data:") for line in lines):
            continue
        ids = [int(line[4:]) for line in lines if line.startswith("id: ")]
        [data] = [json.loads(line[5:]) for line in lines if line.startswith("data:")]
        assert len(ids) == 1, f"an event without exactly one id: {block!r}"
        out.append((ids[0], data))
    return out


def run_body(thread: str, run: str, **props: object) -> dict:
    return {
        "threadId": thread,
        "runId": run,
        "messages": [],
        "state": {},
        "tools": [],
        "context": [],
        "forwardedProps": props,
    }


async def a2a_send(
    client: httpx.AsyncClient,
    skill: str,
    data: dict,
    *,
    message_id: str | None = None,
    metadata: dict | None = None,
) -> dict:
    message = {
        "messageId": message_id or str(uuid.uuid4()),
        "role": "ROLE_USER",
        "parts": [{"data": data}],
        "metadata": {"skill": skill, **(metadata or {})},
    }
    reply = await client.post(
        "/a2a",
        headers=V1,
        json={"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}},
    )
    assert reply.status_code == 200, reply.text
    return reply.json()["result"]["task"]


def artifact_data(task: dict) -> dict:
    return task["artifacts"][0]["parts"][0]["data"]


# --- AG-UI reconnect inside the buffer -------------------------------------------------------------


async def test_agui_reconnect_after_an_event_inside_the_buffer_gets_exactly_the_rest(built) -> None:
    async with http(built.app, "alice") as client:
        original = frames_with_ids((await client.post("/agui/short", json=run_body("t-re", "r-re"))).text)
        ids = [seq for seq, _ in original]
        assert ids == list(range(1, len(ids) + 1)) and len(ids) >= 5, ids
        assert original[-1][1]["type"] == "RUN_FINISHED"
        rest = original[3:]  # everything after event 3

        by_query = frames_with_ids(
            (await client.get("/agui/short/runs/r-re/events", params={"after": 3})).text
        )
        assert by_query == rest, "reconnecting after event 3 gets exactly events 4.., no snapshot, no repeat"
        by_header = frames_with_ids(
            (await client.get("/agui/short/runs/r-re/events", headers={"last-event-id": "3"})).text
        )
        assert by_header == rest
        last = frames_with_ids(
            (await client.get("/agui/short/runs/r-re/events", params={"after": ids[-2]})).text
        )
        assert last == original[-1:]


# --- requestState: MAC and expiry ------------------------------------------------------------------


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _payload_of(state: str) -> bytes:
    body = state.split(".")[0]
    return base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))


def _signed(payload: bytes, secret: bytes) -> str:
    return f"{_b64(payload)}.{_b64(hmac.new(secret, payload, hashlib.sha256).digest())}"


def test_request_state_with_a_wrong_mac_is_refused() -> None:
    secret, other = b"s" * 32, b"o" * 32
    digest = _state.arguments_digest({"label": "x"})
    state = _state.seal(secret, target="tools/call:transfer", digest=digest, answers={"k": 1}, ttl=60)
    assert _state.unseal(secret, state, target="tools/call:transfer", digest=digest) == {"k": 1}
    payload = _payload_of(state)
    json.loads(payload)  # well formed: the refusal below can only come from the MAC
    forged = _signed(payload, other)
    assert forged.split(".")[0] == state.split(".")[0] and forged != state
    with pytest.raises(ValueError, match="integrity"):
        _state.unseal(secret, forged, target="tools/call:transfer", digest=digest)
    tampered = json.loads(payload)
    tampered["a"] = {"k": 2}
    with pytest.raises(ValueError, match="integrity"):  # a changed payload under the old MAC
        _state.unseal(
            secret,
            f"{_b64(json.dumps(tampered).encode())}.{state.split('.')[1]}",
            target="tools/call:transfer",
            digest=digest,
        )


def test_expired_request_state_is_refused(clock: Clock) -> None:
    secret = b"s" * 32
    digest = _state.arguments_digest({})
    state = _state.seal(secret, target="tools/call:transfer", digest=digest, answers={"k": 1}, ttl=60)
    clock.advance(30)
    assert _state.unseal(secret, state, target="tools/call:transfer", digest=digest) == {"k": 1}
    clock.advance(60)
    with pytest.raises(ValueError, match="expired"):
        _state.unseal(secret, state, target="tools/call:transfer", digest=digest)


async def _first_round(client: McpTestClient) -> tuple[dict, str]:
    first = await client.call_tool("transfer", {"label": "forged"})
    assert first["resultType"] == "input_required", first
    [key] = first["inputRequests"]
    return first, key


async def test_a_forged_approval_in_request_state_is_refused_over_mcp(built) -> None:
    async with mcp(built.app, "alice", capabilities={"elicitation": {}}) as client:
        first, key = await _first_round(client)
        payload = json.loads(_payload_of(first["requestState"]))
        payload["a"] = {key: {"action": "accept", "content": {"approved": True}}}  # "the person said yes"
        forged = _signed(json.dumps(payload, separators=(",", ":")).encode(), b"not the agent's secret" * 2)
        retry = {"name": "transfer", "arguments": {"label": "forged"}, "requestState": forged}
        with pytest.raises(McpError) as info:
            await client.request("tools/call", retry)
        assert info.value.code == -32602 and "integrity" in info.value.message
    assert built.count("transfer", "forged") == 0


async def test_an_expired_request_state_is_refused_over_mcp(clock: Clock) -> None:
    built = guards_app.build()  # after the clock, so whatever the agent reads time with follows it
    async with mcp(built.app, "alice", capabilities={"elicitation": {}}) as client:
        first, key = await _first_round(client)
        clock.advance(built.agent.timing.input_state_ttl_seconds + 60)
        retry = {
            "name": "transfer",
            "arguments": {"label": "forged"},
            "requestState": first["requestState"],
            "inputResponses": {key: {"action": "accept", "content": {"approved": True}}},
        }
        with pytest.raises(McpError) as info:
            await client.request("tools/call", retry)
        assert info.value.code == -32602 and "expired" in info.value.message
        assert built.count("transfer", "forged") == 0
        clock.advance(-(built.agent.timing.input_state_ttl_seconds + 60))
        fresh, key = await _first_round(client)  # control: the same exchange in time goes through
        done = await client.request(
            "tools/call",
            {
                **retry,
                "requestState": fresh["requestState"],
                "inputResponses": {key: retry["inputResponses"][next(iter(retry["inputResponses"]))]},
            },
        )
        assert done["content"][0]["text"] == "transferred forged"
    assert built.count("transfer", "forged") == 1


# --- out-of-band approvals expire ----------------------------------------------------------------


async def _pending_approval(client: McpTestClient, label: str) -> str:
    pending = await client.call_tool("transfer", {"label": label})
    assert pending["isError"] is True, pending
    return pending["_meta"]["agentmw/approval"]["id"]


async def _use(client: McpTestClient, label: str, approval_id: str) -> dict:
    return await client.request(
        "tools/call",
        {"name": "transfer", "arguments": {"label": label}, "_meta": {"agentmw/approvalId": approval_id}},
    )


async def test_an_expired_approval_cannot_be_decided_or_used(clock: Clock) -> None:
    built = guards_app.build()  # after the clock, so whatever the agent reads time with follows it
    ttl = 900.0  # @human_gate's default
    async with mcp(built.app, "alice", era="2025-11-25") as client, http(built.app, "admin") as admin:
        undecided = await _pending_approval(client, "late")
        assert (await admin.get(f"/approvals/{undecided}")).status_code == 200
        clock.advance(ttl + 1)
        assert (await admin.get(f"/approvals/{undecided}")).status_code == 404
        decide = await admin.post(f"/approvals/{undecided}", json={"approve": True})
        assert decide.status_code == 404, "an expired approval cannot be decided"
        used = await _use(client, "late", undecided)
        assert used["isError"] is True and "expired" in used["content"][0]["text"]

        clock.advance(-(ttl + 1))
        approved = await _pending_approval(client, "stale")
        assert (await admin.post(f"/approvals/{approved}", json={"approve": True})).json()[
            "status"
        ] == "approved"
        clock.advance(ttl + 1)
        stale = await _use(client, "stale", approved)
        assert stale["isError"] is True and "expired" in stale["content"][0]["text"], "nor used once approved"

        clock.advance(-(ttl + 1))
        control = await _pending_approval(client, "timely")
        assert (await admin.post(f"/approvals/{control}", json={"approve": True})).status_code == 200
        assert (await _use(client, "timely", control))["content"][0]["text"] == "transferred timely"
    assert built.count("transfer", "late") == built.count("transfer", "stale") == 0
    assert built.count("transfer", "timely") == 1


# --- idempotency ---------------------------------------------------------------------------------


def _keyed(label: str, key: str) -> dict:
    return {"name": "record", "arguments": {"label": label}, "_meta": {"agentmw/idempotencyKey": key}}


async def test_an_idempotency_key_is_scoped_to_its_caller(built) -> None:
    async with mcp(built.app, "alice") as alice, mcp(built.app, "bob") as bob:
        first = await alice.request("tools/call", _keyed("shared", "k-1"))
        repeat = await alice.request("tools/call", _keyed("shared", "k-1"))
        assert repeat["structuredContent"] == first["structuredContent"], "control: the key works for alice"
        theirs = await bob.request("tools/call", _keyed("shared", "k-1"))
        assert theirs["isError"] is False
        assert (
            theirs["structuredContent"]["caller"] == "bob"
            and theirs["structuredContent"] != first["structuredContent"]
        ), "bob never receives alice's result"
        other_args = await bob.request("tools/call", _keyed("bob-only", "k-2"))
        assert other_args["isError"] is False
        reused_by_alice = await alice.request("tools/call", _keyed("alice-only", "k-2"))
        assert reused_by_alice["isError"] is False, "bob's use of k-2 is not alice's: her other arguments run"
        assert reused_by_alice["structuredContent"]["caller"] == "alice"
    assert built.callers("record", "shared") == ["alice", "bob"]
    assert built.callers("record", "alice-only") == ["alice"]
    async with http(built.app, "alice") as alice_a2a, http(built.app, "bob") as bob_a2a:
        mine = await a2a_send(alice_a2a, "record", {"label": "a2a"}, metadata={"idempotencyKey": "k-3"})
        yours = await a2a_send(bob_a2a, "record", {"label": "a2a"}, metadata={"idempotencyKey": "k-3"})
        assert artifact_data(yours)["caller"] == "bob" and artifact_data(yours) != artifact_data(mine)
    assert built.callers("record", "a2a") == ["alice", "bob"]


async def test_a_retryable_failure_is_not_kept_under_an_idempotency_key(built) -> None:
    call = {"name": "flaky", "arguments": {"label": "once"}, "_meta": {"agentmw/idempotencyKey": "k-retry"}}
    async with mcp(built.app, "alice") as client:
        failed = await client.request("tools/call", call)
        assert failed["isError"] is True and failed["_meta"]["agentmw/retryable"] is True
        retried = await client.request("tools/call", call)
        assert retried["isError"] is False, "the retry ran instead of replaying the retryable failure"
        again = await client.request("tools/call", call)
        assert again["structuredContent"] == retried["structuredContent"], "the settled outcome is kept"
    assert built.count("flaky", "once") == 2


async def test_idempotency_records_expire_after_their_ttl() -> None:
    ttl = 1.0  # the promise is about time passing, so real time passes (once, bounded)
    built = guards_app.build(timing=Timing(idempotency_ttl_seconds=ttl))
    async with mcp(built.app, "alice") as client:
        before = time.monotonic()
        first = await client.request("tools/call", _keyed("ttl", "k-ttl"))
        stored = time.monotonic()
        within = await client.request("tools/call", _keyed("ttl", "k-ttl"))
        assert time.monotonic() - before < ttl, "the machine was too slow to repeat the key within its TTL"
        assert within["structuredContent"] == first["structuredContent"] and built.count("record", "ttl") == 1
        await asyncio.sleep(
            max(0.0, stored + ttl + 0.05 - time.monotonic())
        )  # the TTL elapsing is the promise
        after = await client.request("tools/call", _keyed("ttl", "k-ttl"))
        assert after["structuredContent"] != first["structuredContent"], "past its TTL the key runs again"
    assert built.count("record", "ttl") == 2


# --- AG-UI threads and runs ----------------------------------------------------------------------


async def test_agui_another_callers_run_on_a_thread_is_404(built) -> None:
    async with http(built.app, "alice") as alice, http(built.app, "bob") as bob, http(built.app) as nobody:
        body = run_body("t-own", "r-own-1", arguments={"label": "own"})
        assert (await alice.post("/agui/record", json=body)).status_code == 200
        for intruder, run in ((bob, "r-own-2"), (nobody, "r-own-3")):
            response = await intruder.post("/agui/record", json={**body, "runId": run})
            assert response.status_code == 404, response.text
        control = await alice.post("/agui/record", json={**body, "runId": "r-own-4"})
        assert control.status_code == 200
    assert built.callers("record", "own") == ["alice", "alice"]


async def test_agui_another_caller_cannot_reconnect_to_or_cancel_a_run(built) -> None:
    async with http(built.app, "alice") as alice, http(built.app, "bob") as bob, http(built.app) as nobody:
        body = run_body("t-own", "r-own-1", arguments={"label": "own"})
        assert (await alice.post("/agui/record", json=body)).status_code == 200
        for intruder in (bob, nobody):
            events = await intruder.get("/agui/record/runs/r-own-1/events", params={"after": 0})
            assert events.status_code == 404 and "RUN_STARTED" not in events.text
            assert (await intruder.post("/agui/record/runs/r-own-1/cancel")).status_code == 404
        mine = await alice.get("/agui/record/runs/r-own-1/events", params={"after": 0})
        assert mine.status_code == 200 and "RUN_FINISHED" in mine.text


async def test_agui_a_duplicate_run_id_is_409_and_nothing_runs_twice(built) -> None:
    async with http(built.app, "alice") as alice:
        body = run_body("t-dup", "r-dup", arguments={"label": "dup"})
        assert (await alice.post("/agui/record", json=body)).status_code == 200
        same_thread = await alice.post("/agui/record", json=body)
        assert same_thread.status_code == 409, same_thread.text
        other_thread = await alice.post("/agui/record", json={**body, "threadId": "t-dup-2"})
        assert other_thread.status_code == 409, other_thread.text
    assert built.count("record", "dup") == 1


# --- body limits and MCP transport rules -----------------------------------------------------------


async def test_body_limits_on_a2a_and_agui_are_413() -> None:
    built = guards_app.build(limits=Limits(max_body_bytes=2048))
    padding = "x" * 4096
    async with http(built.app, "alice") as client:
        small = await a2a_send(client, "record", {"label": "small"})
        assert small["status"]["state"] == "TASK_STATE_COMPLETED"  # control: the limit lets normal bodies in
        message = {
            "messageId": "m-big",
            "role": "ROLE_USER",
            "parts": [{"data": {"label": padding}}],
            "metadata": {"skill": "record"},
        }
        rpc = await client.post(
            "/a2a",
            headers=V1,
            json={"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}},
        )
        assert rpc.status_code == 413, rpc.text
        rest = await client.post("/a2a/message:send", headers=V1, json={"message": message})
        assert rest.status_code == 413, rest.text
        agui = await client.post(
            "/agui/record", json=run_body("t-big", "r-big", arguments={"label": padding})
        )
        assert agui.status_code == 413, agui.text
        assert (
            await client.post("/agui/record", json=run_body("t-ok", "r-ok", arguments={"label": "ok"}))
        ).status_code == 200
    assert built.count("record", padding) == 0


def _modern(method: str, **extra: str) -> dict[str, str]:
    return {
        "accept": ACCEPT,
        "content-type": "application/json",
        "mcp-protocol-version": MODERN,
        "mcp-method": method,
        **extra,
    }


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded"])
async def test_mcp_refuses_valid_json_sent_as_another_content_type(built, content_type: str) -> None:
    initialize = json.dumps(initialize_request(request_id=1))
    listing = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"_meta": META}})
    async with http(built.app) as client:
        for body, headers in (
            (initialize, {"accept": ACCEPT, "content-type": "application/json"}),
            (listing, _modern("tools/list")),
        ):
            assert (await client.post("/mcp", content=body, headers=headers)).status_code == 200  # control
            refused = await client.post(
                "/mcp", content=body, headers={**headers, "content-type": content_type}
            )
            assert refused.status_code == 400, refused.text
            assert refused.json()["error"]["code"] == -32600
            assert "mcp-session-id" not in refused.headers


@pytest.mark.parametrize("accept", ["application/json", "text/event-stream", "text/html"])
async def test_stateless_request_without_both_accept_types_is_406(built, accept: str) -> None:
    listing = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"_meta": META}})
    async with http(built.app) as client:
        assert (await client.post("/mcp", content=listing, headers=_modern("tools/list"))).status_code == 200
        refused = await client.post("/mcp", content=listing, headers=_modern("tools/list", accept=accept))
        assert refused.status_code == 406, refused.text


# --- A2A: messageId de-duplication and ListTasks pagination --------------------------------------


async def test_message_id_dedup_is_scoped_to_the_caller(built) -> None:
    async with http(built.app, "alice") as alice, http(built.app, "bob") as bob:
        hers = await a2a_send(alice, "record", {"label": "alice's"}, message_id="m-shared")
        again = await a2a_send(alice, "record", {"label": "alice's"}, message_id="m-shared")
        assert again["id"] == hers["id"], "control: a repeat from the same caller is the same task"
        his = await a2a_send(bob, "record", {"label": "bob's"}, message_id="m-shared")
        assert his["id"] != hers["id"] and his["status"]["state"] == "TASK_STATE_COMPLETED"
        assert artifact_data(his) == {"caller": "bob", "label": "bob's", "run": 2}
    assert built.callers("record", "alice's") == ["alice"] and built.callers("record", "bob's") == ["bob"]


async def test_list_tasks_pages_hold_other_tasks_in_the_documented_order(built) -> None:
    async with http(built.app, "pager") as client, http(built.app, "other") as other:
        await a2a_send(other, "record", {"label": "not-mine"})
        created = [(await a2a_send(client, "record", {"label": f"p{i}"}))["id"] for i in range(5)]
        pages, token = [], ""
        for _ in range(5):
            params = {"pageSize": 2, **({"pageToken": token} if token else {})}
            reply = (
                await client.post(
                    "/a2a",
                    headers=V1,
                    json={"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": params},
                )
            ).json()["result"]
            assert reply["totalSize"] == 5 and reply["pageSize"] == 2
            pages.append([task["id"] for task in reply["tasks"]])
            token = reply["nextPageToken"]
            if not token:
                break
    assert [len(page) for page in pages] == [2, 2, 1]
    assert set(pages[0]).isdisjoint(pages[1]) and set(pages[1]).isdisjoint(pages[2])
    assert [task_id for page in pages for task_id in page] == created[::-1], (
        "newest update first, across pages"
    )
