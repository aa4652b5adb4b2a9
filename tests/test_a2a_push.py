"""A2A push notifications that cannot be turned against the network or the process (issue 22, item 4).

The receivers are real servers on 127.0.0.1. Names are answered by a stand-in for ``socket.getaddrinfo`` (the
system resolver cannot be pointed at a test DNS server): a name that never answers, and one that answers a
public address first and loopback afterwards (DNS rebinding). Every other name, and every address, goes to the
real resolver.
"""

from __future__ import annotations

import asyncio
import datetime
import socket
import ssl
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from agentmw.a2a import PushPolicy
from tests import a2a_app
from tests.conftest import serve
from tests.waiting import eventually


class Receiver:
    """A webhook that records every push it gets: its path, headers and body."""

    def __init__(self) -> None:
        self.got: list[tuple[str, dict[str, str], dict[str, Any]]] = []

        async def hook(request: Request) -> JSONResponse:
            self.got.append((request.url.path, dict(request.headers), await request.json()))
            return JSONResponse({})

        self.app = Starlette(routes=[Route("/{name}", hook, methods=["POST"])])

    def events(self, path: str = "/hook") -> list[dict[str, Any]]:
        return [body for where, _, body in self.got if where == path]


class Names:
    """``socket.getaddrinfo`` answering a few test names itself: ``answer(n)`` is the address of the n-th lookup
    of the name (from 0), or raises; other names and all addresses go to the real resolver."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, answers: dict[str, Callable[[int], str]]) -> None:
        real = socket.getaddrinfo
        self.lookups: dict[str, int] = {}
        lock = threading.Lock()

        def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> list[Any]:
            name = host.decode() if isinstance(host, bytes) else host  # anyio passes the name IDNA-encoded
            if name not in answers:
                return real(host, port, *args, **kwargs)
            with lock:
                count = self.lookups.get(name, 0)
                self.lookups[name] = count + 1
            address = answers[name](count)
            return [(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (address, int(port or 0)))]

        monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)


def client(app: Starlette) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app),
        base_url="http://127.0.0.1:8000",
        timeout=30,
        headers={"authorization": "Bearer push-tests"},
    )


async def rpc(http: httpx.AsyncClient, method: str, params: dict[str, Any]) -> dict[str, Any]:
    response = await http.post(
        "/a2a",
        headers={"a2a-version": "1.0"},
        json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params},
    )
    assert response.status_code == 200, response.text
    return response.json()


def msg(skill: str, **data: Any) -> dict[str, Any]:
    return {
        "messageId": f"m-{uuid.uuid4()}",
        "role": "ROLE_USER",
        "parts": [{"data": data}],
        "metadata": {"skill": skill},
    }


async def finished_task(http: httpx.AsyncClient) -> str:
    task = (await rpc(http, "SendMessage", {"message": msg("add", a=1, b=2)}))["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    return task["id"]


def final(events: list[dict[str, Any]]) -> bool:
    return any(
        e.get("statusUpdate", {}).get("status", {}).get("state") == "TASK_STATE_COMPLETED" for e in events
    )


# --- resolution off the loop ---------------------------------------------------------------------------------


async def test_a_push_url_whose_name_never_resolves_does_not_stall_the_server(monkeypatch) -> None:
    entered = threading.Event()

    def stall(_: int) -> str:
        entered.set()
        time.sleep(
            3
        )  # in the resolver's thread: a DNS server that never answers (the system gives up at last)
        raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")

    Names(monkeypatch, {"stall.test": stall})
    agent, app = a2a_app.build()
    agent.a2a.push.resolve_timeout_seconds = 1.0
    with serve(app) as url:
        async with httpx.AsyncClient(base_url=url, timeout=30) as http:
            task_id = await finished_task(http)
            started = time.monotonic()
            create = asyncio.create_task(
                rpc(
                    http,
                    "CreateTaskPushNotificationConfig",
                    {"taskId": task_id, "url": "http://stall.test/hook"},
                )
            )
            assert await asyncio.to_thread(entered.wait, 10), "the push URL's name was never looked up"
            # the server is resolving the name now: another request must not wait behind it
            before = time.monotonic()
            card = await http.get("/.well-known/agent-card.json")
            waited = time.monotonic() - before
            assert card.status_code == 200
            assert waited < 0.5, f"a card request waited {waited:.2f} s behind a name lookup"
            refused = await create
            took = time.monotonic() - started
    assert refused["error"]["code"] == -32602, refused
    assert "did not resolve within 1 s" in refused["error"]["message"]
    assert took < 2.5, f"the create waited {took:.2f} s for a 1 s resolution timeout"


# --- the address checked is the address connected to ---------------------------------------------------------


async def test_a_name_that_rebinds_to_loopback_after_the_check_gets_no_push(monkeypatch) -> None:
    """Public when the config is made, 127.0.0.1 from then on: no push may reach the loopback receiver."""
    Names(monkeypatch, {"rebind.test": lambda n: "1.1.1.1" if n == 0 else "127.0.0.1"})
    receiver = Receiver()
    agent, app = a2a_app.build()
    agent.a2a.push.max_attempts = 2
    sender = agent.a2a_app.ops.push
    with serve(receiver.app) as hook:
        port = hook.rsplit(":", 1)[1]
        async with client(app) as http:
            parked = (await rpc(http, "SendMessage", {"message": msg("approve", item="pc")}))["result"][
                "task"
            ]
            made = await rpc(
                http,
                "CreateTaskPushNotificationConfig",
                {"taskId": parked["id"], "url": f"http://rebind.test:{port}/hook"},
            )
            assert made["result"]["url"] == f"http://rebind.test:{port}/hook"  # public at the check
            answer = {**msg("approve", approved=True), "taskId": parked["id"]}
            done = (await rpc(http, "SendMessage", {"message": answer}))["result"]["task"]
            assert done["status"]["state"] == "TASK_STATE_COMPLETED"
            # working, the artifact, completed: each delivered or given up on
            await eventually(
                lambda: sender.failed + sender.delivered >= 3, "the three pushes to be tried", timeout=15
            )
    assert receiver.got == [], "a push reached loopback through a name that was public when it was checked"
    assert sender.delivered == 0 and sender.failed == 3


async def test_a_push_goes_to_the_checked_address_with_the_name_as_host(monkeypatch) -> None:
    names = Names(monkeypatch, {"hooks.test": lambda n: "127.0.0.1"})
    receiver = Receiver()
    agent, app = a2a_app.build()
    agent.a2a = replace(agent.a2a, push=PushPolicy(allow_networks=["127.0.0.1/32"], first_delay=0.05))
    agent.a2a_app.ops.push.policy = agent.a2a.push
    with serve(receiver.app) as hook:
        port = hook.rsplit(":", 1)[1]
        async with client(app) as http:
            task = await rpc(
                http,
                "SendMessage",
                {
                    "message": msg("add", a=2, b=3),
                    "configuration": {
                        "taskPushNotificationConfig": {
                            "url": f"http://hooks.test:{port}/hook",
                            "token": "t-1",
                        }
                    },
                },
            )
            assert task["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED", task
            await eventually(lambda: final(receiver.events()), "the final push")
    assert [next(iter(e)) for e in receiver.events()] == ["statusUpdate", "artifactUpdate", "statusUpdate"]
    assert {headers["host"] for _, headers, _ in receiver.got} == {f"hooks.test:{port}"}
    assert {headers["x-a2a-notification-token"] for _, headers, _ in receiver.got} == {"t-1"}
    assert names.lookups["hooks.test"] >= 1 + 3  # checked at create, and again before each push


def tls_files(folder: Path, name: str) -> tuple[ssl.SSLContext, Path, Path]:
    """A CA of the test's own, and a certificate it signed for ``name`` only (no address in it): the client
    context that trusts the CA, and the certificate and key files for the server."""
    pytest.importorskip("cryptography")
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)

    def certificate(subject: str, key: Any, issuer: str, signer: Any, *, ca: bool) -> x509.Certificate:
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
            .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer)]))
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(hours=1))
            .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        )
        if not ca:
            builder = builder.add_extension(
                x509.SubjectAlternativeName([x509.DNSName(subject)]), critical=False
            )
        return builder.sign(signer, hashes.SHA256())

    ca_key, leaf_key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca = certificate("push-tests CA", ca_key, "push-tests CA", ca_key, ca=True)
    leaf = certificate(name, leaf_key, "push-tests CA", ca_key, ca=False)
    cert_file, key_file = folder / "leaf.pem", folder / "leaf.key"
    cert_file.write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        leaf_key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    trusting = ssl.create_default_context(cadata=ca.public_bytes(serialization.Encoding.PEM).decode())
    return trusting, cert_file, key_file


async def test_an_https_push_to_a_checked_address_verifies_the_certificate_of_the_name(
    monkeypatch, tmp_path: Path
) -> None:
    """Connected to 127.0.0.1, yet the TLS server name and the certificate check are the URL's name: a
    certificate for another name is refused, though that name resolves to the same address."""
    Names(monkeypatch, {"hooks.test": lambda n: "127.0.0.1", "other.test": lambda n: "127.0.0.1"})
    trusting, cert_file, key_file = tls_files(tmp_path, "hooks.test")
    receiver = Receiver()
    agent, app = a2a_app.build()
    agent.a2a = replace(
        agent.a2a,
        push=PushPolicy(allow_networks=["127.0.0.1/32"], first_delay=0.05, max_attempts=2, verify=trusting),
    )
    agent.a2a_app.ops.push.policy = agent.a2a.push
    sender = agent.a2a_app.ops.push
    with serve(receiver.app, ssl_certfile=str(cert_file), ssl_keyfile=str(key_file)) as hook:
        port = hook.rsplit(":", 1)[1]
        async with client(app) as http:
            for name in ("hooks.test", "other.test"):
                done = await rpc(
                    http,
                    "SendMessage",
                    {
                        "message": msg("add", a=2, b=3),
                        "configuration": {
                            "taskPushNotificationConfig": {"url": f"https://{name}:{port}/{name}"}
                        },
                    },
                )
                assert done["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED", done
            await eventually(lambda: final(receiver.events("/hooks.test")), "the final push over TLS")
            await eventually(
                lambda: sender.delivered + sender.failed >= 6, "both tasks' pushes to be tried", timeout=15
            )
    assert len(receiver.events("/hooks.test")) == 3 and sender.delivered == 3
    assert {headers["host"] for _, headers, _ in receiver.got} == {f"hooks.test:{port}"}
    assert receiver.events("/other.test") == [] and sender.failed == 3  # its certificate names hooks.test


# --- the allowlist ---------------------------------------------------------------------------------------------


async def test_push_policy_allowlist_of_hosts_and_networks() -> None:
    agent, app = a2a_app.build()
    agent.a2a = replace(
        agent.a2a,
        push=PushPolicy(
            allow_networks=["127.0.0.1/32"], allow_hosts=["hooks.internal.test"], public_hosts=False
        ),
    )
    agent.a2a_app.ops.push.policy = agent.a2a.push
    async with client(app) as http:
        task_id = await finished_task(http)

        async def create(url: str) -> dict[str, Any]:
            return await rpc(
                http, "CreateTaskPushNotificationConfig", {"taskId": task_id, "url": url, "id": url}
            )

        assert "result" in await create("http://127.0.0.1:9/hook")  # in an allowed network
        assert "result" in await create("https://hooks.internal.test/hook")  # named: allowed, not resolved
        for refused in ("http://127.0.0.2:9/hook", "http://10.0.0.8/hook", "http://1.1.1.1/hook"):
            answer = await create(refused)
            assert answer["error"]["code"] == -32602, (refused, answer)
        public = await create("http://1.1.1.1/hook")
        assert (
            "not on the egress allowlist" in public["error"]["message"]
        )  # public_hosts=False: the list only


# --- bounded configs ---------------------------------------------------------------------------------------------


async def test_configs_per_task_are_capped_at_create_and_inline() -> None:
    agent, app = a2a_app.build()
    assert agent.a2a.push.max_configs_per_task == 10
    async with client(app) as http:
        task = (await rpc(http, "SendMessage", {"message": msg("approve", item="pc")}))["result"]["task"]
        assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        for index in range(10):
            made = await rpc(
                http,
                "CreateTaskPushNotificationConfig",
                {"taskId": task["id"], "id": f"c{index}", "url": f"http://127.0.0.1:9/{index}"},
            )
            assert "result" in made, made
        over = await rpc(
            http,
            "CreateTaskPushNotificationConfig",
            {"taskId": task["id"], "id": "c10", "url": "http://127.0.0.1:9/10"},
        )
        assert over["error"]["code"] == -32602 and "the most it may have" in over["error"]["message"], over
        assert over["error"]["data"][0]["metadata"]["limit"] == "10"
        replaced = await rpc(
            http,
            "CreateTaskPushNotificationConfig",
            {"taskId": task["id"], "id": "c3", "url": "http://127.0.0.1:9/again"},
        )
        assert replaced["result"]["url"] == "http://127.0.0.1:9/again"  # the same id replaces: no new config
        # a follow-up with an inline config is refused the same way, before it is handled
        answer = {**msg("approve", approved=True), "taskId": task["id"]}
        inline = await rpc(
            http,
            "SendMessage",
            {
                "message": answer,
                "configuration": {"taskPushNotificationConfig": {"url": "http://127.0.0.1:9/inline"}},
            },
        )
        assert inline["error"]["code"] == -32602, inline
        listed = await rpc(http, "ListTaskPushNotificationConfigs", {"taskId": task["id"]})
        assert len(listed["result"]["configs"]) == 10
        still = await rpc(http, "GetTask", {"id": task["id"]})
        assert still["result"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"


async def test_token_and_credentials_are_bounded_in_length() -> None:
    agent, app = a2a_app.build()
    assert agent.a2a.push.max_token_length == 4096
    async with client(app) as http:
        task_id = await finished_task(http)
        fits = await rpc(
            http,
            "CreateTaskPushNotificationConfig",
            {"taskId": task_id, "url": "http://127.0.0.1:9/a", "token": "t" * 4096},
        )
        assert len(fits["result"]["token"]) == 4096
        for config in (
            {"token": "t" * 4097},
            {"authentication": {"scheme": "Bearer", "credentials": "c" * 4097}},
            {"id": "i" * 257},
        ):
            answer = await rpc(
                http,
                "CreateTaskPushNotificationConfig",
                {"taskId": task_id, "url": "http://127.0.0.1:9/b", **config},
            )
            assert answer["error"]["code"] == -32602, (config, answer)
        long_url = await rpc(
            http,
            "CreateTaskPushNotificationConfig",
            {"taskId": task_id, "url": "http://127.0.0.1:9/" + "u" * 2100},
        )
        assert long_url["error"]["code"] == -32602


# --- header-safe tokens, and a sender that never crash-loops -----------------------------------------------------


@pytest.mark.parametrize(
    ("config", "field"),
    [
        ({"token": "té"}, "token"),
        ({"token": "two words"}, "token"),
        ({"token": "line\r\nX-Injected: 1"}, "token"),
        ({"token": 7}, "token"),
        ({"authentication": {"scheme": "Bearer", "credentials": "sé"}}, "authentication.credentials"),
        ({"authentication": {"scheme": "Bearer", "credentials": "a\nb"}}, "authentication.credentials"),
        ({"authentication": {"scheme": "Bear er"}}, "authentication.scheme"),
        ({"authentication": {"scheme": "Bearer", "credentials": 5}}, "authentication.credentials"),
        ({"id": 5}, "id"),
        ({"url": "http://tést.example/hook"}, "url"),
    ],
)
async def test_push_config_values_that_cannot_be_headers_are_refused_at_create(
    config: dict, field: str
) -> None:
    _agent, app = a2a_app.build()
    async with client(app) as http:
        task_id = await finished_task(http)
        answer = await rpc(
            http,
            "CreateTaskPushNotificationConfig",
            {"taskId": task_id, "url": "http://127.0.0.1:9/hook", **config},
        )
        assert answer["error"]["code"] == -32602, answer
        assert answer["error"]["data"][0]["metadata"]["field"] == field
        # inline, on a new task: refused before any task exists
        before = (await rpc(http, "ListTasks", {}))["result"]["totalSize"]
        inline = await rpc(
            http,
            "SendMessage",
            {
                "message": msg("add", a=1, b=1),
                "configuration": {"taskPushNotificationConfig": {"url": "http://127.0.0.1:9/hook", **config}},
            },
        )
        assert inline["error"]["code"] == -32602, inline
        assert (await rpc(http, "ListTasks", {}))["result"]["totalSize"] == before


async def test_a_config_that_cannot_be_sent_fails_alone_and_others_get_each_event_once(caplog) -> None:
    """A config stored unchecked (by an older version) whose token cannot be a header: the sender must not
    crash and be restarted by its sweeper, sending the other configs the same events again and again."""
    receiver = Receiver()
    agent, app = a2a_app.build()
    agent.a2a.push.lease_seconds = 0.4  # a crashed sender would be taken over every 0.2 s
    sender = agent.a2a_app.ops.push
    registry = agent.a2a_app.ops.tasks.registry
    with serve(receiver.app) as hook:
        async with client(app) as http:
            parked = (
                await rpc(
                    http,
                    "SendMessage",
                    {
                        "message": msg("approve", item="desk"),
                        "configuration": {
                            "taskPushNotificationConfig": {"url": f"{hook}/good", "token": "fine"}
                        },
                    },
                )
            )["result"]["task"]
            assert parked["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
            await eventually(
                lambda: any(
                    e.get("statusUpdate", {}).get("status", {}).get("state") == "TASK_STATE_INPUT_REQUIRED"
                    for e in receiver.events("/good")
                ),
                "the question pushed to the good config",
            )
            bad = {"id": "bad", "url": f"{hook}/bad", "token": "té", "taskId": parked["id"]}
            await registry.update_push(
                parked["id"], lambda value: {**value, "configs": [*value["configs"], bad]}
            )
            answer = {**msg("approve", approved=True), "taskId": parked["id"]}
            done = (await rpc(http, "SendMessage", {"message": answer}))["result"]["task"]
            assert done["status"]["state"] == "TASK_STATE_COMPLETED"
            await eventually(lambda: final(receiver.events("/good")), "the final push to the good config")
            await eventually(lambda: parked["id"] not in sender.workers, "the sender to end with the task")
    good = receiver.events("/good")
    states = [e["statusUpdate"]["status"]["state"] if "statusUpdate" in e else next(iter(e)) for e in good]
    assert states[-3:] == ["TASK_STATE_WORKING", "artifactUpdate", "TASK_STATE_COMPLETED"], states
    assert len(good) == len({repr(e) for e in good}), f"an event was sent twice to the good config: {states}"
    assert receiver.events("/bad") == []
    assert sender.failed == 3  # the bad config's three events, each once, without retries
    assert not [r for r in caplog.records if r.exc_info], "the sender logged a traceback"
