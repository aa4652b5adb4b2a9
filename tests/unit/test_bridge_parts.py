"""Pure parts of the bridges, without a peer: the egress policy, the circuit breaker, outbound identity, and how
the A2A bridge folds a remote task's events (the recovery after a cut stream)."""

from __future__ import annotations

import logging

import pytest

from agentmw import Agent, Context
from agentmw.bridges import A2APeer, Breaker, Egress, EgressRefused, ServiceAccount, VersionMismatch
from agentmw.bridges._peer import safe_name
from agentmw.bridges.a2a import _Task
from agentmw.errors import Rejected
from agentmw.safety.framing import unescape

# --- egress ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8000/x",
        "http://localhost/",
        "http://10.1.2.3/",
        "http://[::1]/",
        "http://169.254.169.254/latest/meta-data",
        "http://0.0.0.0/",
    ],
)
def test_private_targets_are_refused_by_default(url: str) -> None:
    with pytest.raises(EgressRefused, match="private, loopback or link-local"):
        Egress().check(url, "A2A peer")


@pytest.mark.parametrize("url", ["ftp://example.com/", "/relative", "http://", 42, "http://[::1/"])
def test_malformed_urls_are_refused(url: object) -> None:
    with pytest.raises(EgressRefused):
        Egress().check(url)


def test_allowlists_hosts_and_networks() -> None:
    assert Egress(allow_hosts=["127.0.0.1"]).check("http://127.0.0.1:1/") == "http://127.0.0.1:1/"
    assert Egress(allow_networks=["127.0.0.0/8"]).check("http://127.0.0.1:1/")
    assert Egress(allow_hosts=["*.internal.example"]).check(
        "https://peer.internal.example/"
    )  # named: not resolved
    with pytest.raises(EgressRefused):
        Egress(allow_networks=["10.0.0.0/8"]).check("http://127.0.0.1:1/")
    with pytest.raises(EgressRefused, match="not on the egress allowlist"):
        Egress(public_hosts=False).check("http://93.184.215.14/")  # public, but only the allowlist passes


async def test_the_async_check_is_the_same_rule() -> None:
    with pytest.raises(EgressRefused):
        await Egress().acheck("http://127.0.0.1/")
    assert await Egress(allow_networks=["127.0.0.0/8"]).acheck("http://127.0.0.1/") == "http://127.0.0.1/"


def test_push_notifications_use_the_same_policy() -> None:
    from agentmw.a2a.push import PushPolicy, check_push_url
    from agentmw.a2a.wire import A2AError

    with pytest.raises(A2AError, match="push notification url 'http://127.0.0.1/' points to a private"):
        check_push_url("http://127.0.0.1/", PushPolicy())
    assert check_push_url("http://127.0.0.1/", PushPolicy(allow_hosts=["127.0.0.1"])) == "http://127.0.0.1/"


# --- the breaker ----------------------------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_breaker_opens_on_error_rate_then_lets_one_trial_through() -> None:
    clock = Clock()
    breaker = Breaker(failure_rate=0.5, min_calls=4, window_seconds=60, open_seconds=30, clock=clock)
    for ok in (True, False, True):
        breaker.record(ok)
    assert breaker.state == "closed" and breaker.check() is None  # too few calls to judge
    breaker.record(False)  # 2 of 4 failed
    assert breaker.state == "open" and breaker.check() == 30
    clock.now = 31
    assert breaker.check() is None and breaker.check() == 1.0  # one trial at a time
    breaker.record(True)
    assert breaker.state == "closed"


def test_breaker_ignores_latency_and_forgets_old_calls() -> None:
    clock = Clock()
    breaker = Breaker(min_calls=3, window_seconds=10, clock=clock)
    breaker.record(False)
    breaker.record(False)
    clock.now = 11  # both failures left the window
    breaker.record(True)
    breaker.record(False)
    assert breaker.state == "closed"  # two calls in the window: too few to judge
    breaker.record(False)
    assert breaker.state == "open"  # 2 of 3 failed


def test_a_failed_trial_opens_again() -> None:
    clock = Clock()
    breaker = Breaker(min_calls=1, failure_rate=1.0, open_seconds=5, clock=clock)
    breaker.record(False)
    clock.now = 6
    assert breaker.check() is None
    breaker.record(False)
    assert breaker.state == "open" and breaker.check() == 5


# --- identity -------------------------------------------------------------------------------------------


async def test_token_exchange_gets_the_inbound_identity_and_is_logged(caplog) -> None:
    seen = []

    async def exchange(identity, peer):
        seen.append((identity, peer.name))
        return {"Authorization": f"Bearer exchanged-for-{identity}"}

    peer = A2APeer("http://127.0.0.1:1", name="legal", credential=exchange)
    peer.agent = Agent("front", store="memory://")
    caplog.set_level(logging.INFO, logger="agentmw.bridges")
    headers = await peer.outbound_headers(Context(caller="user:alice"), "skill echo")
    assert headers == {"Authorization": "Bearer exchanged-for-user:alice"} and seen == [
        ("user:alice", "legal")
    ]
    assert "user:alice calls as token exchange (exchange) to A2A peer legal, skill echo" in caplog.text


async def test_authorize_decides_before_anything_is_sent() -> None:
    peer = A2APeer(
        "http://127.0.0.1:1",
        name="legal",
        credential=ServiceAccount("svc", {"x": "y"}),
        authorize=lambda identity, what: identity == "user:alice",
    )
    assert await peer.outbound_headers(Context(caller="user:alice"), "skill echo") == {"x": "y"}
    with pytest.raises(Rejected, match="may not use skill echo"):
        await peer.outbound_headers(Context(caller="user:bob"), "skill echo")


def test_a_credential_must_be_explicit() -> None:
    with pytest.raises(TypeError):
        A2APeer("http://127.0.0.1:1", credential="Bearer x")


def test_names_from_a_peer_are_made_safe() -> None:
    assert safe_name("Legal Review / EU") == "Legal_Review_EU"
    assert safe_name("") == "peer" and len(safe_name("x" * 500)) == 64


def test_a_version_mismatch_names_both_versions() -> None:
    error = VersionMismatch("legal", "A2A", "1.0", ["0.3"])
    assert "offers protocol version ['0.3']" in str(error) and "pinned to A2A 1.0" in str(error)


# --- folding a remote task's events ------------------------------------------------------------------------


def status(state: str, text: str | None = None, message_id: str | None = None) -> dict:
    out: dict = {"state": state}
    if text is not None:
        out["message"] = {"messageId": message_id or text, "role": "ROLE_AGENT", "parts": [{"text": text}]}
    return out


class Recorder:
    def __init__(self) -> None:
        self.said: list[str] = []

    def supports(self, capability: str) -> bool:
        return False

    async def progress(self, progress, total, message) -> None:
        self.said.append(unescape(message.split("\n")[2]))

    async def log(self, level, data, logger) -> None: ...

    async def gather(self, requests): ...


async def test_a_snapshot_after_a_cut_repeats_nothing_and_loses_nothing() -> None:
    peer = A2APeer("http://127.0.0.1:1", name="legal")
    recorder = Recorder()
    ctx = Context(channel=recorder)
    task = _Task()
    await peer._apply(
        ctx, task, {"task": {"id": "t1", "contextId": "c1", "status": status("TASK_STATE_SUBMITTED")}}
    )
    await peer._apply(
        ctx, task, {"statusUpdate": {"taskId": "t1", "status": status("TASK_STATE_WORKING", "step 1")}}
    )
    await peer._apply(
        ctx,
        task,
        {
            "artifactUpdate": {
                "taskId": "t1",
                "artifact": {"artifactId": "a", "parts": [{"text": "chunk 1\n"}]},
            }
        },
    )
    # the stream is cut; steps 2 and 3 happen meanwhile; the resubscription starts with the task itself
    await peer._apply(
        ctx,
        task,
        {
            "task": {
                "id": "t1",
                "contextId": "c1",
                "history": [
                    {"messageId": "u", "role": "ROLE_USER", "parts": [{"text": "go"}]},
                    status("TASK_STATE_WORKING", "step 1")["message"],
                    status("TASK_STATE_WORKING", "step 2")["message"],
                ],
                "artifacts": [{"artifactId": "a", "parts": [{"text": "chunk 1\n"}, {"text": "chunk 2\n"}]}],
                "status": status("TASK_STATE_WORKING", "step 3"),
            }
        },
    )
    await peer._apply(
        ctx,
        task,
        {
            "artifactUpdate": {
                "taskId": "t1",
                "append": True,
                "artifact": {"artifactId": "a", "parts": [{"text": "chunk 3\n"}]},
            }
        },
    )
    await peer._apply(ctx, task, {"statusUpdate": {"taskId": "t1", "status": status("TASK_STATE_COMPLETED")}})
    assert recorder.said == ["step 1", "step 2", "step 3"]
    assert task.settled and task.state == "TASK_STATE_COMPLETED"
    assert [p["text"] for p in task.artifacts["a"]["parts"]] == ["chunk 1\n", "chunk 2\n", "chunk 3\n"]
    assert _Task.from_json(task.to_json()).to_json() == task.to_json()  # what the journal keeps comes back


# --- MCP connections: routing each call's traffic --------------------------------------------------------


async def test_a_kept_connection_routes_each_message_to_its_own_call() -> None:
    """A message goes to the call whose request stream carried it (its context), a message on no call's stream
    to the call holding the session, and nowhere once the call has ended: never to the next call."""
    import asyncio
    import contextvars
    from contextlib import asynccontextmanager

    from agentmw.bridges._mcp_connections import Connections, Relay

    callbacks: list[dict] = []

    @asynccontextmanager
    async def opener(headers, given):
        callbacks.append(given)
        yield object()

    def in_context(context: contextvars.Context, coroutine) -> asyncio.Task:
        return asyncio.get_running_loop().create_task(coroutine, context=context)

    pool = Connections(opener, shared=False, size=1, idle_seconds=5, spoils=lambda exc: True)
    first, second = Relay(), Relay()
    async with pool.lease("key", {}, {}, first):
        log = callbacks[0]["logging_callback"]
        first_context = contextvars.copy_context()
        await log("on its request stream")
        await in_context(contextvars.Context(), log("on the GET stream"))  # the connection's own task
    first.close()
    async with pool.lease("key", {}, {}, second):
        assert len(callbacks) == 1  # the same session serves the second call
        await in_context(first_context, log("late, for the first call"))
        elicit = callbacks[0]["elicitation_callback"]
        refused = await in_context(first_context, elicit(None, {"message": "late question"}))
        await log("the second call's own")
    await in_context(contextvars.Context(), log("while idle"))
    assert refused.action == "cancel"  # a question of a call that ended is cancelled, never asked of another
    assert first.events.empty()  # closed: what it had queued was dropped with it
    assert [second.events.get_nowait()[1] for _ in range(second.events.qsize())] == ["the second call's own"]
    await pool.aclose()
    assert pool.open_count == 0


async def test_a_relay_that_closed_drops_everything() -> None:
    from agentmw.bridges._mcp_connections import Relay

    relay = Relay()
    await relay.log("kept")
    relay.close()
    await relay.progress(1, 2, "late")
    assert relay.events.empty() and (await relay.ask({})).action == "cancel"
