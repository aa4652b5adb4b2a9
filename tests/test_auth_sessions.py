"""A handshake-era MCP session opened anonymously (``ProtectedResource(anonymous=True)``), claimed by its first
verified caller: the client that logs in mid-session keeps its session (the official client's flow is in
tests/test_auth_example.py); the claim ends a GET stream opened before it; a session bound to an identity is never
bound to another (404, exactly as an unknown session); and the claim, a compare-and-set on the shared record, holds
across replicas sharing a store (a SQLite file, a real redis-server).

Everything runs on real sockets against the protected test app (tests/auth/app.py) with tokens from the real
Authlib authorization server (tests/auth/server.py).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any

import anyio
import httpx
import pytest

from tests.auth.app import build
from tests.auth.server import AuthServer
from tests.conftest import serve
from tests.helpers.mcp_raw import initialize
from tests.state.conftest import redis_url  # noqa: F401  (a fixture: a real redis-server for the session)
from tests.test_mcp_replicas import store_url  # noqa: F401  (a fixture: a SQLite file, or a Redis prefix)
from tests.waiting import eventually

LEGACY = "2025-11-25"
ACCEPT = "application/json, text/event-stream"


async def open_session(http: httpx.AsyncClient, url: str, bearer: str | None = None) -> str:
    bearing = {"authorization": f"Bearer {bearer}"} if bearer else {}
    init = await initialize(http, url, revision=LEGACY, client="claims", headers=bearing)
    return init.headers["mcp-session-id"]


def session_headers(session: str, bearer: str | None = None, accept: str = ACCEPT) -> dict[str, str]:
    headers = {
        "accept": accept,
        "content-type": "application/json",
        "mcp-session-id": session,
        "mcp-protocol-version": LEGACY,
    }
    if bearer:
        headers["authorization"] = f"Bearer {bearer}"
    return headers


async def ping(http: httpx.AsyncClient, url: str, session: str, bearer: str | None) -> httpx.Response:
    return await http.post(
        f"{url}/mcp",
        headers=session_headers(session, bearer),
        json={"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {}},
    )


def token(auth_server: AuthServer, url: str, subject: str) -> str:
    return auth_server.issue(subject=subject, audience=f"{url}/mcp", scope="mcp")


async def read_to_end(stream: httpx.Response, timeout: float = 5.0) -> list[str]:
    """The stream's remaining lines, until the server ends it (fails after ``timeout``)."""
    lines = []
    with anyio.fail_after(timeout):
        async for line in stream.aiter_lines():
            lines.append(line)
    return lines


async def open_stream(http: httpx.AsyncClient, url: str, session: str, bearer: str) -> httpx.Response:
    """A GET stream; retried briefly while the one it replaces is still releasing its lease (409)."""

    async def opened() -> httpx.Response | None:
        request = http.build_request(
            "GET", f"{url}/mcp", headers=session_headers(session, bearer, "text/event-stream")
        )
        response = await http.send(request, stream=True)
        if response.status_code != 409:
            return response
        await response.aclose()
        return None

    return await eventually(opened, "the GET stream's lease to be released", timeout=5, interval=0.05)


# --- one process -----------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def anonymous_app(auth_server: AuthServer) -> Iterator[tuple[str, Any]]:
    app = build(auth_server.issuer, anonymous=True)
    with serve(app) as url:
        yield url, app.state.agent


async def test_the_claim_ends_a_get_stream_opened_before_it(
    auth_server: AuthServer, anonymous_app: tuple[str, Any]
) -> None:
    url, agent = anonymous_app
    alice = token(auth_server, url, "alice")
    async with httpx.AsyncClient(timeout=10) as http:
        session = await open_session(http, url)
        assert (await ping(http, url, session, None)).status_code == 200  # anonymous use, before any login
        async with http.stream(
            "GET", f"{url}/mcp", headers=session_headers(session, None, "text/event-stream")
        ) as listener:
            assert listener.status_code == 200
            claimed = await ping(http, url, session, alice)  # the client logged in: same session, now alice's
            assert claimed.status_code == 200, claimed.text
            agent.add("tool", lambda: "x", name="after_the_claim")  # a list change the listener must not get
            try:
                rest = await read_to_end(listener)  # the anonymous stream ends at the claim
            finally:
                agent.remove("tool", "after_the_claim")
        assert not [line for line in rest if line.startswith("data:")], rest
        assert (await ping(http, url, session, None)).status_code == 404  # no anonymous use after the claim
        # the owner may listen now, and gets the session's notifications
        owner = await open_stream(
            http, url, session, token(auth_server, url, "alice")
        )  # a new token: same caller
        try:
            assert owner.status_code == 200
            lines = owner.aiter_lines()
            with anyio.fail_after(5):
                assert (await anext(lines)).startswith(":")  # the stream's opening comment
            agent.add("tool", lambda: "x", name="for_the_owner")
            try:
                with anyio.fail_after(5):
                    line = await anext(lines)
                    while not line.startswith("data:"):
                        line = await anext(lines)
            finally:
                agent.remove("tool", "for_the_owner")
            assert "notifications/tools/list_changed" in line
        finally:
            await owner.aclose()


async def test_a_claimed_session_is_never_bound_to_another_identity(
    auth_server: AuthServer, anonymous_app: tuple[str, Any]
) -> None:
    url, _ = anonymous_app
    alice, bob = token(auth_server, url, "alice"), token(auth_server, url, "bob")
    async with httpx.AsyncClient(timeout=10) as http:
        session = await open_session(http, url)
        assert (await ping(http, url, session, alice)).status_code == 200
        refused = await ping(http, url, session, bob)
        unknown = await ping(http, url, uuid.uuid4().hex, bob)
        assert refused.status_code == unknown.status_code == 404
        assert refused.json() == unknown.json()  # "Session not found", exactly as an unknown session
        stream = await http.get(f"{url}/mcp", headers=session_headers(session, bob, "text/event-stream"))
        assert stream.status_code == 404
        assert (await ping(http, url, session, alice)).status_code == 200  # still alice's

        owned = await open_session(http, url, alice)  # opened with a token: bound from the start
        assert (await ping(http, url, owned, bob)).status_code == 404
        assert (await ping(http, url, owned, None)).status_code == 404

        contested = await open_session(http, url)  # two identities at once: one claim wins
        answers = await asyncio.gather(ping(http, url, contested, alice), ping(http, url, contested, bob))
        assert sorted(a.status_code for a in answers) == [200, 404]
        winner, loser = (alice, bob) if answers[0].status_code == 200 else (bob, alice)
        assert (await ping(http, url, contested, winner)).status_code == 200
        assert (await ping(http, url, contested, loser)).status_code == 404


# --- replicas sharing a store --------------------------------------------------------------------------------


@pytest.fixture
def replicas(auth_server: AuthServer, store_url: str) -> Iterator[tuple[str, str]]:  # noqa: F811
    with ExitStack() as stack:
        a, b = (
            stack.enter_context(serve(build(auth_server.issuer, store=store_url, anonymous=True)))
            for _ in range(2)
        )
        yield a, b


async def test_a_claim_on_one_replica_holds_on_another(
    auth_server: AuthServer, replicas: tuple[str, str]
) -> None:
    a, b = replicas
    async with httpx.AsyncClient(timeout=10) as http:
        session = await open_session(http, a)
        async with http.stream(
            "GET", f"{a}/mcp", headers=session_headers(session, None, "text/event-stream")
        ) as listener:
            assert listener.status_code == 200
            claimed = await ping(http, b, session, token(auth_server, b, "alice"))  # logged in, landed on B
            assert claimed.status_code == 200, claimed.text
            await read_to_end(listener)  # A's anonymous stream ends: B's claim reached it
        assert (await ping(http, a, session, None)).status_code == 404
        assert (await ping(http, a, session, token(auth_server, a, "bob"))).status_code == 404
        assert (await ping(http, a, session, token(auth_server, a, "alice"))).status_code == 200
        assert (await ping(http, b, session, None)).status_code == 404

        contested = await open_session(http, a)  # claimed at once on A (bob) and on B (alice): one wins
        answers = await asyncio.gather(
            ping(http, a, contested, token(auth_server, a, "bob")),
            ping(http, b, contested, token(auth_server, b, "alice")),
        )
        assert sorted(r.status_code for r in answers) == [200, 404], [r.text for r in answers]
        winner, loser = ("bob", "alice") if answers[0].status_code == 200 else ("alice", "bob")
        for replica in (a, b):
            assert (
                await ping(http, replica, contested, token(auth_server, replica, winner))
            ).status_code == 200
            assert (
                await ping(http, replica, contested, token(auth_server, replica, loser))
            ).status_code == 404
