"""Handshake-era streams resume (issue 24, item 10; docs/mcp.md, "Resuming a cut stream").

A call's SSE response carries event ids, its events are kept in the shared state, and a client cut off mid-call
gets the rest with ``GET`` + ``Last-Event-ID``, on any replica, without the tool running again. Tested with
the official ``mcp`` 2.3.0 client (which resumes by itself) through a real proxy that cuts streams
(tests/helpers/cut_proxy.py), and with raw HTTP for the exact cases: after the call finished, on the other
replica, with ids that are malformed, unknown, another session's, or presented with another credential.

The replicas are two apps, each its own Agent over one shared store (a SQLite file; Redis when
``redis-server`` is installed), served on real sockets.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client
from starlette.applications import Starlette

from agentmw import Agent, AgentMiddleware, Context
from agentmw.mcp import resume
from agentmw.state import StoreLimits
from tests.conftest import free_port, serve
from tests.helpers.cut_proxy import CutProxy
from tests.helpers.mcp_raw import open_session
from tests.state.conftest import redis_url  # noqa: F401  (the session fixture: a real redis-server)
from tests.waiting import eventually, wait_until

LEGACY = "2025-11-25"
TICKS = 12
runs: list[str] = []  # one entry per tool body that started, from the replicas' threads


class Replica:
    def __init__(self, name: str, store: str) -> None:
        self.name = name
        agent = self.agent = Agent("resumable", store=store)

        @agent.tool
        async def count(ctx: Context, tag: str, ticks: int = TICKS, pause: float = 0.1) -> str:
            """Reports ``ticks`` progress ticks, ``pause`` seconds apart, then answers."""
            runs.append(f"{tag}:{name}")
            for tick in range(1, ticks + 1):
                await ctx.progress(tick, ticks, f"tick {tick}")
                await asyncio.sleep(pause)
            return f"{tag} counted {ticks} on {name}"

        @agent.tool
        async def confirm(ctx: Context, tag: str) -> str:
            """Asks the person, then answers with what they said."""
            runs.append(f"{tag}:{name}")
            answer = await ctx.ask("Go on?", {"type": "object", "properties": {"ok": {"type": "boolean"}}})
            return f"{tag}:{answer.action}:{(answer.content or {}).get('ok')} on {name}"

        @agent.tool
        async def hold(ctx: Context, tag: str) -> str:
            """Reports one tick, then waits until cancelled."""
            runs.append(f"{tag}:{name}")
            await ctx.progress(1, 2, "holding")
            await asyncio.sleep(60)
            return "held"

        self.app = Starlette()
        self.app.add_middleware(AgentMiddleware, agent=agent)
        self.url = ""


@pytest.fixture(params=["sqlite", "redis"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'shared.db'}"
    url = request.getfixturevalue("redis_url")
    return f"{url}?prefix=r{uuid.uuid4().hex[:10]}"


@pytest.fixture
def replicas(store_url: str) -> Iterator[list[Replica]]:
    made = [Replica(name, store_url) for name in ("A", "B")]
    with ExitStack() as stack:
        for replica in made:
            replica.url = stack.enter_context(serve(replica.app))
        yield made


def ticks_of(progress: list[tuple[float, float | None, str | None]]) -> list[float]:
    return [p for p, _, _ in progress]


async def call_through(proxy: CutProxy, tag: str) -> tuple[Any, list[float]]:
    """The official client in the handshake era, through ``proxy``: one ``count`` call with progress."""
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    with serve(proxy) as url:
        async with Client(f"{url}/mcp", mode="legacy", cache=None) as client:
            result = await client.call_tool("count", {"tag": tag}, progress_callback=on_progress)
    return result, ticks_of(seen)


# --- the official client, through a proxy that cuts ----------------------------------------------------------


async def test_official_client_resumes_a_cut_call_on_the_same_replica(replicas: list[Replica]) -> None:
    a, _ = replicas
    tag = uuid.uuid4().hex[:8]
    proxy = CutProxy([a.url], after=3)
    result, ticks = await call_through(proxy, tag)
    assert result.is_error is False and result.content[0].text == f"{tag} counted {TICKS} on A"
    assert ticks == list(range(1, TICKS + 1))  # every tick once, in order, across the cut
    assert runs.count(f"{tag}:A") == 1 and not [r for r in runs if r.startswith(tag) and r != f"{tag}:A"]
    assert proxy.cut == 1
    assert any(method == "GET" and last for method, last, _ in proxy.seen)  # it resumed


async def test_official_client_resumes_on_the_other_replica(replicas: list[Replica]) -> None:
    a, b = replicas
    tag = uuid.uuid4().hex[:8]
    # POSTs go to A, which runs the call; every GET (the resumption too) goes to B, which has only the store
    proxy = CutProxy([a.url, b.url], after=2, pick=lambda method, headers: 1 if method == "GET" else 0)
    result, ticks = await call_through(proxy, tag)
    assert result.is_error is False and result.content[0].text == f"{tag} counted {TICKS} on A"
    assert ticks == list(range(1, TICKS + 1))
    assert [r for r in runs if r.startswith(f"{tag}:")] == [f"{tag}:A"]  # ran once, on A, never on B
    resumed = [(m, last, status) for m, last, status in proxy.seen if m == "GET" and last]
    assert resumed and all(status == 200 for _, _, status in resumed)


async def test_repeated_cuts_each_resume_where_the_last_left_off(replicas: list[Replica]) -> None:
    a, b = replicas
    tag = uuid.uuid4().hex[:8]
    # the POST and the first two resumptions are cut, two events each; resumptions alternate replicas
    turn = iter(range(1000))
    proxy = CutProxy(
        [a.url, b.url],
        after=2,
        cuts=3,
        resumptions=True,
        clean=True,
        pick=lambda method, headers: 0 if method != "GET" else next(turn) % 2,
    )
    result, ticks = await call_through(proxy, tag)
    assert result.is_error is False
    assert ticks == list(range(1, TICKS + 1))
    assert [r for r in runs if r.startswith(f"{tag}:")] == [f"{tag}:A"]
    assert proxy.cut == 3


# --- raw HTTP: the exact cases ---------------------------------------------------------------------------------


def events(text: str) -> list[tuple[str | None, dict[str, Any]]]:
    """The (id, message) of every SSE event with data in ``text``."""
    out = []
    for block in re.split(r"\r?\n\r?\n", text):
        lines = block.splitlines()
        data = [line[5:].strip() for line in lines if line.startswith("data:")]
        ids = [line[3:].strip() for line in lines if line.startswith("id:")]
        if data and data[0]:
            out.append((ids[0] if ids else None, json.loads(data[0])))
    return out


def call_body(request_id: int, tag: str, **arguments: Any) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": "count", "arguments": {"tag": tag, **arguments}, "_meta": {"progressToken": tag}},
    }


async def cut_after(
    http: httpx.AsyncClient, url: str, headers: dict[str, str], body: dict[str, Any], n: int
) -> list[str]:
    """POST ``body``, read ``n`` events, hang up; their ids."""
    ids: list[str] = []
    async with http.stream("POST", f"{url}/mcp", headers=headers, json=body) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        async for line in response.aiter_lines():
            if line.startswith("id:"):
                ids.append(line[3:].strip())
                if len(ids) == n:
                    break
    return ids


def resume_headers(headers: dict[str, str], last: str) -> dict[str, str]:
    return {
        "accept": "text/event-stream",
        "mcp-session-id": headers["mcp-session-id"],
        "mcp-protocol-version": LEGACY,
        "last-event-id": last,
    }


async def test_raw_resume_after_the_call_finished_on_either_replica(replicas: list[Replica]) -> None:
    a, b = replicas
    tag = uuid.uuid4().hex[:8]
    async with httpx.AsyncClient(timeout=30) as http:
        headers = await open_session(http, a.url, client="raw")
        ids = await cut_after(http, a.url, headers, call_body(5, tag, ticks=4, pause=0.01), 2)
        stream = ids[0].split("-")[0]
        assert ids == [f"{stream}-1", f"{stream}-2"]  # one stream, numbered from 1
        await eventually(lambda: f"{tag}:A" in runs, "the call started")
        for replica in (b, a, b):  # after the call finished: from the store, as often as asked, anywhere
            response = await http.get(f"{replica.url}/mcp", headers=resume_headers(headers, ids[1]))
            assert response.status_code == 200, response.text
            got = events(response.text)
            assert [i for i, _ in got] == [f"{stream}-{n}" for n in (3, 4, 5)]
            assert [m["params"]["progress"] for _, m in got[:2]] == [3, 4]
            assert got[-1][1] == {
                "jsonrpc": "2.0",
                "id": 5,
                "result": {"content": [{"type": "text", "text": f"{tag} counted 4 on A"}], "isError": False},
            }
        # from the last id: nothing more (the client has it all); the stream ends at once
        last = await http.get(f"{b.url}/mcp", headers=resume_headers(headers, f"{stream}-5"))
        assert last.status_code == 200 and events(last.text) == []
    assert runs.count(f"{tag}:A") == 1 and f"{tag}:B" not in runs


async def test_resumption_while_the_call_runs_on_the_other_replica(replicas: list[Replica]) -> None:
    a, b = replicas
    tag = uuid.uuid4().hex[:8]
    async with httpx.AsyncClient(timeout=30) as http:
        headers = await open_session(http, a.url, client="raw")
        ids = await cut_after(http, a.url, headers, call_body(9, tag, ticks=10, pause=0.15), 1)
        response = await http.get(f"{b.url}/mcp", headers=resume_headers(headers, ids[0]))
        got = events(response.text)
    assert [m["params"]["progress"] for _, m in got[:-1]] == list(range(2, 11))
    assert got[-1][1]["id"] == 9 and got[-1][1]["result"]["content"][0]["text"] == f"{tag} counted 10 on A"
    assert runs.count(f"{tag}:A") == 1


async def test_ids_that_cannot_be_resumed_get_400_never_500(replicas: list[Replica]) -> None:
    a, b = replicas
    tag = uuid.uuid4().hex[:8]
    async with httpx.AsyncClient(timeout=30) as http:
        mine = await open_session(http, a.url, client="mine")
        other = await open_session(http, a.url, client="other")
        ids = await cut_after(http, a.url, mine, call_body(1, tag, ticks=2, pause=0.01), 1)
        cases = {
            "malformed": resume_headers(mine, "not-an-id"),
            "zero": resume_headers(mine, ids[0].split("-")[0] + "-0"),
            "unknown stream": resume_headers(mine, uuid.uuid4().hex + "-1"),
            "another session's stream": resume_headers(other, ids[0]),
        }
        for what, headers in cases.items():
            for replica in (a, b):
                response = await http.get(f"{replica.url}/mcp", headers=headers)
                assert response.status_code == 400, (what, response.status_code, response.text)
                body = response.json()
                assert body["id"] is None and body["error"]["code"] == -32600, (what, body)
        # the right session with another credential is not the session's owner: 404, as for any request
        stolen = await http.get(
            f"{b.url}/mcp", headers={**resume_headers(mine, ids[0]), "authorization": "Bearer mallory"}
        )
        assert stolen.status_code == 404
        # an unknown session: 404 (the client re-initializes)
        gone = await http.get(
            f"{b.url}/mcp", headers={**resume_headers(mine, ids[0]), "mcp-session-id": uuid.uuid4().hex}
        )
        assert gone.status_code == 404
        ok = await http.get(f"{b.url}/mcp", headers=resume_headers(mine, ids[0]))  # the owner still can
        assert ok.status_code == 200 and events(ok.text)[-1][1]["id"] == 1


async def test_an_expired_stream_is_400(replicas: list[Replica]) -> None:
    a, b = replicas
    tag = uuid.uuid4().hex[:8]
    async with httpx.AsyncClient(timeout=30) as http:
        headers = await open_session(http, a.url, client="raw")
        ids = await cut_after(http, a.url, headers, call_body(1, tag, ticks=2, pause=0.01), 1)
        ns = f"mcp.events.{hashlib.sha256(b'resumable').hexdigest()[:16]}"  # the agent's stream logs
        for replica in (a, b):  # the retention, shortened on both replicas' stores
            replica.agent.state.limit(ns, StoreLimits(max_count=10, max_age=0.3, max_len=10))

        async def expired() -> bool:
            # the store trims a namespace when it is written to: another call's stream writes to it
            await cut_after(http, a.url, headers, call_body(2, f"{tag}-later", ticks=1, pause=0), 1)
            response = await http.get(f"{b.url}/mcp", headers=resume_headers(headers, ids[0]))
            return response.status_code == 400 and "still kept" in response.json()["error"]["message"]

        await eventually(expired, "the stream expired", timeout=15, interval=0.1)


async def test_a_cancelled_call_has_nothing_to_resume(replicas: list[Replica]) -> None:
    a, b = replicas
    tag = uuid.uuid4().hex[:8]
    async with httpx.AsyncClient(timeout=30) as http:
        headers = await open_session(http, a.url, client="raw")
        body = {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {"name": "hold", "arguments": {"tag": tag}, "_meta": {"progressToken": "h"}},
        }
        ids = await cut_after(http, a.url, headers, body, 1)
        cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 3}}
        assert (await http.post(f"{b.url}/mcp", headers=headers, json=cancel)).status_code == 202

        async def refused() -> bool:
            response = await http.get(f"{b.url}/mcp", headers=resume_headers(headers, ids[0]))
            return response.status_code == 400 and "cancelled" in response.json()["error"]["message"]

        await eventually(refused, "the cancelled stream ended unanswered", timeout=15, interval=0.1)
    assert runs.count(f"{tag}:A") == 1


async def test_a_question_survives_the_cut_and_is_answered_on_the_other_replica(
    replicas: list[Replica],
) -> None:
    a, b = replicas
    tag = uuid.uuid4().hex[:8]
    async with httpx.AsyncClient(timeout=30) as http:
        headers = await open_session(http, a.url, client="asked", capabilities={"elicitation": {}})
        body = {
            "jsonrpc": "2.0",
            "id": 4,
            "method": "tools/call",
            "params": {"name": "confirm", "arguments": {"tag": tag}},
        }
        question: dict[str, Any] = {}
        async with http.stream("POST", f"{a.url}/mcp", headers=headers, json=body) as response:
            async for line in response.aiter_lines():
                if line.startswith("id:"):
                    last = line[3:].strip()
                if line.startswith("data:"):
                    question = json.loads(line[5:])
                    break  # the client is cut off right after the question
        assert question.get("method") == "elicitation/create", question
        answer = {
            "jsonrpc": "2.0",
            "id": question["id"],
            "result": {"action": "accept", "content": {"ok": True}},
        }
        assert (await http.post(f"{b.url}/mcp", headers=headers, json=answer)).status_code == 202
        resumed = await http.get(f"{b.url}/mcp", headers=resume_headers(headers, last))
        got = events(resumed.text)
    assert got[-1][1]["id"] == 4
    assert got[-1][1]["result"]["content"][0]["text"] == f"{tag}:accept:True on A"
    assert runs.count(f"{tag}:A") == 1


def dying_app() -> Any:
    """A replica in its own process (``uvicorn --factory``), for the test that kills it mid-call."""
    return Replica("D", os.environ["AGENTMW_RESUME_STORE"]).app


@pytest.fixture
def dying(tmp_path: Path) -> Iterator[tuple[str, str, subprocess.Popen[bytes]]]:
    """A replica in its own process over a SQLite file: its URL, the store's URL, the process."""
    store = f"sqlite:///{tmp_path / 'shared.db'}"
    port = free_port()
    command = [
        sys.executable,
        "-m",
        "uvicorn",
        "--factory",
        "tests.test_mcp_resume:dying_app",
        "--port",
        str(port),
    ]
    process = subprocess.Popen(
        command,
        env={**os.environ, "AGENTMW_RESUME_STORE": store},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"

    def up() -> bool:
        try:
            return httpx.get(f"{url}/mcp", timeout=1).status_code in (400, 404, 405, 406)
        except httpx.HTTPError:
            return False

    try:
        wait_until(up, "the replica to start", timeout=60)
        yield url, store, process
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=10)


async def test_a_call_whose_replica_died_ends_its_resumed_stream_with_an_error(
    dying: tuple[str, str, subprocess.Popen[bytes]], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, store, process = dying
    survivor = Replica("B", store)
    # a replica that stops renewing is taken for dead this soon after its last write (30 s in production)
    monkeypatch.setattr(resume, "LEASE_SECONDS", 0.5)
    with serve(survivor.app) as b_url:
        async with httpx.AsyncClient(timeout=30) as http:
            headers = await open_session(http, url, client="raw")
            body = {
                "jsonrpc": "2.0",
                "id": 8,
                "method": "tools/call",
                "params": {"name": "hold", "arguments": {"tag": "d"}, "_meta": {"progressToken": "h"}},
            }
            ids = await cut_after(http, url, headers, body, 1)
            ns = f"mcp.events.{hashlib.sha256(b'resumable').hexdigest()[:16]}"
            log = f"{headers['mcp-session-id']}.{ids[0].split('-')[0]}"

            async def kept() -> bool:  # written behind the stream: the replica dies once the event is kept
                return bool(await survivor.agent.state.read(ns, log, 0, 10))

            await eventually(kept, "the first event kept in the store")
            process.send_signal(signal.SIGKILL)
            resumed = await http.get(f"{b_url}/mcp", headers=resume_headers(headers, ids[0]))
    assert resumed.status_code == 200
    got = events(resumed.text)
    assert len(got) == 1 and got[0][0] is None
    assert got[0][1]["id"] == 8 and got[0][1]["error"]["code"] == -32603
    assert "may have run in part" in got[0][1]["error"]["message"]


async def next_event(lines: Any, ids: list[str]) -> dict[str, Any]:
    """The next event with data from ``lines`` (one kept iterator: a new one per loop would close the stream
    when it is collected); its id is appended to ``ids``."""
    with anyio.fail_after(10):
        async for line in lines:
            if line.startswith("id:"):
                ids.append(line[3:].strip())
            if line.startswith("data:"):
                return json.loads(line[5:])
    raise AssertionError("the stream ended")


async def test_the_get_stream_resumes_with_what_it_missed_then_goes_on(replicas: list[Replica]) -> None:
    a, b = replicas
    changed = {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
    names = [f"t{uuid.uuid4().hex[:6]}" for _ in range(3)]
    async with httpx.AsyncClient(timeout=30) as http:
        headers = await open_session(http, a.url, client="listener")
        listen = {k: v for k, v in resume_headers(headers, "").items() if k != "last-event-id"}
        first: list[str] = []
        async with http.stream("GET", f"{a.url}/mcp", headers=listen) as stream:
            lines = stream.aiter_lines()
            a.agent.add("tool", lambda: "x", name=names[0])  # a list change: A's GET stream sends it
            assert await next_event(lines, first) == changed
            a.agent.add("tool", lambda: "x", name=names[1])
            assert await next_event(lines, first) == changed  # the client loses it: it never processed it
        # the client comes back on B with the last id it processed: the change it lost, then the live stream
        resumed: list[str] = []
        async with http.stream("GET", f"{b.url}/mcp", headers=resume_headers(headers, first[0])) as stream:
            assert stream.status_code == 200
            lines = stream.aiter_lines()
            assert await next_event(lines, resumed) == changed
            async with (
                httpx.AsyncClient(timeout=10) as other,
                other.stream("GET", f"{a.url}/mcp", headers=listen) as second,
            ):
                assert second.status_code == 409  # the resumed stream is the session's one GET stream
            a.agent.add("tool", lambda: "x", name=names[2])  # caused on A, live on B's stream (the bus)
            assert await next_event(lines, resumed) == changed
    old = first[0].split("-")[0]
    assert resumed[0] == f"{old}-2"  # exactly the missed one, under its own id
    assert resumed[1].endswith("-1") and not resumed[1].startswith(old)  # then a new stream of its own
