"""The independent fault check (issue 25, "Done when"): real agent processes (``uvicorn`` serving
``tests.faults.app``) on a real store (a redis-server of their own, an SQLite file), loaded through every face
while a fault is injected, and counted afterwards.

- :class:`RedisServer`: a redis-server on a free port, with or without AOF, that a test restarts, pauses
  (``SIGSTOP``), fills (``maxmemory`` at its current use, ``noeviction``) or wipes (``FLUSHALL``).
- :class:`Server`: one agent process (``kill -9``, graceful stop, restart on the same port).
- :class:`Load`: a few callers sending, in turn, A2A ``SendMessage`` (blocking; a skill that completes and one
  that asks), MCP ``tools/call`` (2026, plain and as a task) and AG-UI runs, to the servers in turn. Every
  answer that acknowledged a result is kept (:class:`Ack`); every other answer is sorted (:class:`Tally`): an HTTP
  5xx other than 503, a traceback in a body, a request that got no answer within :data:`CLIENT_TIMEOUT`, an
  error marked retryable (503 with ``Retry-After``, a JSON-RPC error or result whose data says ``retryable``,
  an A2A task failed with ``retryable``, AG-UI ``RUN_ERROR`` with code ``RETRYABLE``) or one that is not.
- :func:`lost`: the acknowledged results that a server no longer gives back as acknowledged.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

import httpx

from tests.conftest import free_port, require_tool
from tests.helpers.a2a_raw import V1, send_message
from tests.state.conftest import SETUP as REDIS_SETUP
from tests.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]
APP = "tests.faults.app:app"
HEADER = "x-faults-replica"
CLIENT_TIMEOUT = 15.0  # every request of a test is bounded by this: no answer by then is a hang
MODERN = "2026-07-28"
TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
TOKEN = "fault-checker"
AUTH = {"authorization": f"Bearer {TOKEN}"}


# --- processes -------------------------------------------------------------------------------------------


def tail(path: Path, lines: int = 60) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def _end(process: subprocess.Popen[bytes], timeout: float = 10) -> None:
    """Ends one process this harness started, by its id: SIGTERM, then SIGKILL."""
    if process.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(process.pid, signal.SIGCONT)  # a paused process cannot act on SIGTERM
        process.terminate()
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        process.wait(timeout=10)


def _ping(port: int) -> bool:
    import socket

    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")
    except OSError:
        return False


@dataclass
class RedisServer:
    """A redis-server of one test module, which the test may stop and start again on the same port and folder."""

    folder: Path
    aof: bool
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None

    def url(self, prefix: str) -> str:
        return f"redis://127.0.0.1:{self.port}/0?prefix={prefix}"

    def start(self) -> None:
        binary = require_tool("redis-server", shutil.which("redis-server"), REDIS_SETUP)
        self.folder.mkdir(parents=True, exist_ok=True)
        command = [
            binary,
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "yes" if self.aof else "no",
            "--appendfsync",
            "everysec",
            "--dir",
            str(self.folder),
            "--daemonize",
            "no",
            "--loglevel",
            "warning",
        ]
        with open(self.folder / "redis.log", "a") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)

        def up() -> bool:
            if _ping(self.port):
                return True
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError(f"redis-server did not start:\n{tail(self.folder / 'redis.log')}")
            return False

        wait_until(up, "redis-server to answer PING", timeout=20, interval=0.02)

    def stop(self) -> None:
        """SIGTERM: Redis writes its AOF (when it keeps one) and exits."""
        if self.process is not None:
            _end(self.process, timeout=20)

    def pause(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGCONT)

    def command(self, *args: Any) -> Any:
        import redis

        client = redis.Redis(port=self.port, socket_timeout=5, decode_responses=True)
        try:
            return client.execute_command(*args)
        finally:
            client.close()

    def used_memory(self) -> int:
        return int(self.command("INFO", "memory").get("used_memory"))

    def keys(self, prefix: str) -> int:
        return len(self.command("KEYS", f"{prefix}*"))


@dataclass
class Server:
    """One agent process: ``uvicorn tests.faults.app:app`` on its own port."""

    index: int
    folder: Path
    store: str
    extra_env: dict[str, str] = field(default_factory=dict)
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None
    starts: int = 0
    ignore_sigxfsz: bool = False  # a file size limit (prlimit) then fails writes (EFBIG) rather than killing

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log(self) -> Path:
        return self.folder / f"server{self.index}.log"

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTMW_")}
        env.update(
            {
                "AGENTMW_STORE": self.store,
                "AGENTMW_FAULTS_REPLICA": str(self.index),
                "PYTHONUNBUFFERED": "1",
                **self.extra_env,
            }
        )
        return env

    def start(self) -> None:
        assert not self.alive, "already running"
        self.starts += 1
        command = [
            sys.executable,
            "-m",
            "uvicorn",
            APP,
            "--app-dir",
            str(ROOT),
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--log-level",
            "warning",
            "--timeout-graceful-shutdown",
            "3",
            "--no-access-log",
        ]

        def before() -> None:
            if self.ignore_sigxfsz:
                signal.signal(signal.SIGXFSZ, signal.SIG_IGN)

        with open(self.log, "a") as log:
            log.write(f"--- start {self.starts}\n")
            log.flush()
            self.process = subprocess.Popen(
                command,
                cwd=self.folder,
                env=self.env(),
                stdout=log,
                stderr=subprocess.STDOUT,
                preexec_fn=before,  # noqa: PLW1509  (a signal disposition only; no threads yet)
            )

        def served() -> bool:
            try:
                if httpx.get(f"{self.url}/health", timeout=2).status_code == 200:
                    return True
            except httpx.HTTPError:
                pass
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError(f"server {self.index} exited before it served:\n{tail(self.log)}")
            return False

        wait_until(
            served, lambda: f"server {self.index} to serve:\n{tail(self.log)}", timeout=60, interval=0.1
        )

    def stop(self) -> None:
        if self.process is not None:
            _end(self.process)

    def kill(self) -> None:
        if self.alive:
            assert self.process is not None
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=10)

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None


@contextlib.contextmanager
def servers(folder: Path, store: str, count: int = 2, **options: Any) -> Iterator[list[Server]]:
    """``count`` agent processes on one store, stopped at the end."""
    made = [Server(i, folder, store, **options) for i in range(count)]
    try:
        for server in made:
            server.start()
        yield made
    finally:
        for server in made:
            server.stop()


def logs(made: Iterable[Server]) -> str:
    return "\n".join(f"== server {s.index} ==\n{tail(s.log, 30)}" for s in made)


# --- answers: acknowledged, or an error of some kind ------------------------------------------------------


@dataclass
class Ack:
    """An answer that acknowledged a result: what a caller may rely on afterwards."""

    face: str  # "a2a", "mcp-task", "agui"
    id: str  # the A2A task id, the MCP task id, the AG-UI run id
    state: str  # as acknowledged: "TASK_STATE_COMPLETED", "TASK_STATE_INPUT_REQUIRED", "completed", ...
    replica: int
    at: float
    extra: dict[str, Any] = field(default_factory=dict)
    sent: float = 0.0  # when its request was sent (time.monotonic())


@dataclass
class Problem:
    kind: str  # "5xx", "traceback", "hang", "unmarked", "retryable", "transport", "unexpected"
    face: str
    detail: str
    at: float


@dataclass
class Tally:
    acks: list[Ack] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    statuses: Counter[int] = field(default_factory=Counter)
    sent: int = 0
    ok: int = 0

    def count(self, kind: str) -> int:
        return sum(1 for p in self.problems if p.kind == kind)

    def bad(self, since: float = 0.0) -> list[Problem]:
        """Every problem but a retryable error."""
        return [p for p in self.problems if p.kind != "retryable" and p.at >= since]

    def summary(self) -> str:
        kinds = Counter(p.kind for p in self.problems)
        firsts = {}
        for p in self.problems:
            firsts.setdefault((p.kind, p.face), p.detail[:300])
        shown = "\n".join(f"  {k} {f}: {d}" for (k, f), d in list(firsts.items())[:12])
        return (
            f"sent {self.sent}, ok {self.ok}, acknowledged {len(self.acks)}, problems {dict(kinds)}, "
            f"HTTP statuses {dict(self.statuses)}\n{shown}"
        )


def marked_retryable(value: Any) -> bool:
    """Whether a JSON value says, anywhere in it, that what failed may be retried."""
    if isinstance(value, dict):
        for key, item in value.items():
            if key in ("retryable", "agentmw/retryable") and item in (True, "true"):  # ErrorInfo: strings
                return True
            if key == "code" and item == "RETRYABLE":
                return True
            if marked_retryable(item):
                return True
    elif isinstance(value, list):
        return any(marked_retryable(item) for item in value)
    return False


class Refused(Exception):
    """An answer that is an error: ``kind`` as in :class:`Problem`."""

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(detail)
        self.kind = kind
        self.detail = detail


def screen(response: httpx.Response, text: str) -> None:
    """Raises :class:`Refused` for an answer that is an HTTP error (5xx but a marked 503, a traceback, 503
    without ``Retry-After``, another 4xx)."""
    if "Traceback (most recent call last)" in text:
        raise Refused("traceback", f"{response.status_code}: {text[:400]}")
    if response.status_code == 503:
        if response.headers.get("retry-after"):
            raise Refused("retryable", f"503 Retry-After {response.headers['retry-after']}: {text[:200]}")
        raise Refused("unmarked", f"503 without Retry-After: {text[:300]}")
    if response.status_code >= 500:
        raise Refused("5xx", f"{response.status_code}: {text[:300]}")
    if response.status_code >= 400 and response.status_code != 429:
        try:
            body = json.loads(text)
        except ValueError:
            body = None
        raise Refused(
            "retryable" if marked_retryable(body) else "unmarked", f"{response.status_code}: {text[:300]}"
        )
    if response.status_code == 429:
        kind = "retryable" if response.headers.get("retry-after") else "unmarked"
        raise Refused(kind, f"429: {text[:200]}")


def rpc_error(reply: dict[str, Any]) -> None:
    if "error" in reply:
        kind = "retryable" if marked_retryable(reply["error"]) else "unmarked"
        raise Refused(kind, f"JSON-RPC error {json.dumps(reply['error'])[:300]}")


# --- the faces, raw ------------------------------------------------------------------------------------


def replica_of(response: httpx.Response) -> int:
    return int(response.headers.get(HEADER, "-1-0").split("-")[0] or -1)


async def a2a_send(http: httpx.AsyncClient, url: str, skill: str, label: str) -> tuple[Ack, httpx.Response]:
    """A blocking ``SendMessage`` to ``skill``; the task it answered, COMPLETED or INPUT_REQUIRED."""
    body = send_message([{"data": {"label": label}}], metadata={"skill": skill})
    response = await http.post(f"{url}/a2a", json=body, headers={**V1, **AUTH})
    screen(response, response.text)
    reply = response.json()
    rpc_error(reply)
    task = reply["result"].get("task")
    if task is None:
        raise Refused("unexpected", f"no task in {json.dumps(reply)[:300]}")
    return a2a_ack(task, replica_of(response)), response


def a2a_ack(task: dict[str, Any], replica: int) -> Ack:
    state = task["status"]["state"]
    if state in ("TASK_STATE_COMPLETED", "TASK_STATE_INPUT_REQUIRED"):
        return Ack("a2a", task["id"], state, replica, time.monotonic())
    if state == "TASK_STATE_FAILED":
        kind = "retryable" if marked_retryable(task["status"]) else "unmarked"
        raise Refused(kind, f"task FAILED: {json.dumps(task['status'])[:400]}")
    raise Refused("unexpected", f"task {state}: {json.dumps(task['status'])[:300]}")


async def a2a_get(http: httpx.AsyncClient, url: str, task_id: str) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": task_id}}
    response = await http.post(f"{url}/a2a", json=body, headers={**V1, **AUTH})
    screen(response, response.text)
    reply = response.json()
    rpc_error(reply)
    return dict(reply["result"])


def mcp_headers(method: str, name: str | None = None) -> dict[str, str]:
    headers = {
        "accept": "application/json, text/event-stream",
        "content-type": "application/json",
        "mcp-protocol-version": MODERN,
        "mcp-method": method,
        **AUTH,
    }
    if name is not None:
        headers["mcp-name"] = name
    return headers


def mcp_body(method: str, params: dict[str, Any], *, tasks: bool = False) -> dict[str, Any]:
    capabilities: dict[str, Any] = {"elicitation": {}}
    if tasks:
        capabilities["extensions"] = {TASKS_EXTENSION: {}}
    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": capabilities,
    }
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": meta}}


def _mcp_reply(text: str) -> dict[str, Any]:
    text = text.strip()
    if text.startswith("{"):
        return dict(json.loads(text))
    messages = [json.loads(line[5:]) for line in text.splitlines() if line.startswith("data:")]
    replies = [m for m in messages if "id" in m and "method" not in m]
    if not replies:
        raise Refused("unexpected", f"an MCP stream with no answer: {text[:300]}")
    return dict(replies[-1])


async def mcp_request(
    http: httpx.AsyncClient, url: str, method: str, params: dict[str, Any], *, name: str | None, tasks: bool
) -> tuple[dict[str, Any], httpx.Response]:
    response = await http.post(
        f"{url}/mcp", json=mcp_body(method, params, tasks=tasks), headers=mcp_headers(method, name)
    )
    screen(response, response.text)
    reply = _mcp_reply(response.text)
    rpc_error(reply)
    return dict(reply["result"]), response


def mcp_result(result: dict[str, Any]) -> None:
    if result.get("isError"):
        kind = "retryable" if marked_retryable(result) else "unmarked"
        raise Refused(kind, f"tool error: {json.dumps(result)[:300]}")


async def mcp_call(http: httpx.AsyncClient, url: str, label: str) -> None:
    """A plain ``tools/call`` of ``quick``: its result, not kept anywhere."""
    result, _ = await mcp_request(
        http, url, "tools/call", {"name": "quick", "arguments": {"label": label}}, name="quick", tasks=False
    )
    mcp_result(result)
    if result.get("structuredContent", {}).get("label") != label:
        raise Refused("unexpected", f"result {json.dumps(result)[:300]}")


async def mcp_task(http: httpx.AsyncClient, url: str, label: str) -> Ack:
    """``tools/call`` of ``quick`` as a task: the handle (or the completed task) it answered."""
    result, response = await mcp_request(
        http, url, "tools/call", {"name": "quick", "arguments": {"label": label}}, name="quick", tasks=True
    )
    mcp_result(result)
    if result.get("resultType") != "task" or "taskId" not in result:
        raise Refused("unexpected", f"not a task: {json.dumps(result)[:300]}")
    return Ack(
        "mcp-task", result["taskId"], result.get("status", "?"), replica_of(response), time.monotonic()
    )


async def mcp_task_get(http: httpx.AsyncClient, url: str, task_id: str) -> dict[str, Any]:
    result, _ = await mcp_request(http, url, "tasks/get", {"taskId": task_id}, name=task_id, tasks=True)
    return result


def agui_body(thread: str, run: str, **props: Any) -> dict[str, Any]:
    return {
        "threadId": thread,
        "runId": run,
        "messages": [],
        "state": {},
        "tools": [],
        "context": [],
        "forwardedProps": props,
    }


def sse_events(text: str) -> list[dict[str, Any]]:
    return [json.loads(line[5:]) for line in text.splitlines() if line.startswith("data:")]


async def agui_run(http: httpx.AsyncClient, url: str, label: str) -> Ack:
    """An AG-UI run of ``quick``: its ``RUN_FINISHED``."""
    thread, run = f"t-{uuid.uuid4().hex}", f"r-{uuid.uuid4().hex}"
    response = await http.post(
        f"{url}/agui/quick", json=agui_body(thread, run, arguments={"label": label}), headers=AUTH
    )
    screen(response, response.text)
    events = sse_events(response.text)
    end = next((e for e in reversed(events) if e.get("type") in ("RUN_FINISHED", "RUN_ERROR")), None)
    if end is None:
        raise Refused("unexpected", f"a run with no end: {response.text[-300:]}")
    if end["type"] == "RUN_ERROR":
        kind = "retryable" if marked_retryable(end) else "unmarked"
        raise Refused(kind, f"RUN_ERROR {json.dumps(end)[:300]}")
    if end.get("outcome", {}).get("type", "success") != "success":
        raise Refused("unexpected", f"RUN_FINISHED {json.dumps(end)[:300]}")
    return Ack("agui", run, "RUN_FINISHED", replica_of(response), time.monotonic(), {"thread": thread})


async def agui_events(http: httpx.AsyncClient, url: str, run: str) -> list[dict[str, Any]]:
    response = await http.get(f"{url}/agui/quick/runs/{run}/events", params={"after": 0}, headers=AUTH)
    screen(response, response.text)
    return sse_events(response.text)


# --- load ------------------------------------------------------------------------------------------------

Face = Callable[[httpx.AsyncClient, str, str], Awaitable[Ack | None]]


async def _a2a_quick(http: httpx.AsyncClient, url: str, label: str) -> Ack:
    return (await a2a_send(http, url, "quick", label))[0]


async def _a2a_ask(http: httpx.AsyncClient, url: str, label: str) -> Ack:
    return (await a2a_send(http, url, "ask", label))[0]


async def _mcp_plain(http: httpx.AsyncClient, url: str, label: str) -> None:
    await mcp_call(http, url, label)


FACES: list[tuple[str, Face]] = [
    ("a2a", _a2a_quick),
    ("a2a-ask", _a2a_ask),
    ("mcp", _mcp_plain),
    ("mcp-task", mcp_task),
    ("agui", agui_run),
]


def client() -> httpx.AsyncClient:
    return httpx.AsyncClient(timeout=httpx.Timeout(CLIENT_TIMEOUT), limits=httpx.Limits(max_connections=32))


async def one(http: httpx.AsyncClient, tally: Tally, name: str, face: Face, url: str, label: str) -> bool:
    """Sends one request of ``face`` and sorts its answer into ``tally``; whether it succeeded."""
    tally.sent += 1
    sent = time.monotonic()
    try:
        async with asyncio.timeout(
            CLIENT_TIMEOUT
        ):  # in all: an SSE stream's pings reset httpx's read timeout
            ack = await face(http, url, label)
    except Refused as refused:
        tally.problems.append(Problem(refused.kind, name, refused.detail, time.monotonic()))
        return False
    except (httpx.TimeoutException, TimeoutError) as exc:
        tally.problems.append(
            Problem("hang", name, f"no answer in {CLIENT_TIMEOUT} s: {exc!r}", time.monotonic())
        )
        return False
    except httpx.HTTPError as exc:
        tally.problems.append(Problem("transport", name, repr(exc), time.monotonic()))
        return False
    except (ValueError, KeyError, TypeError) as exc:  # a body that is not the protocol's shape
        tally.problems.append(Problem("unexpected", name, repr(exc), time.monotonic()))
        return False
    tally.ok += 1
    if ack is not None:
        ack.sent = sent
        tally.acks.append(ack)
    return True


class Load:
    """``callers`` concurrent callers, each sending the faces in turn to the servers in turn, until stopped."""

    def __init__(
        self, urls: list[str], *, callers: int = 4, faces: list[tuple[str, Face]] | None = None
    ) -> None:
        self.urls = urls
        self.callers = callers
        self.faces = faces or FACES
        self.tally = Tally()
        self.stopping = asyncio.Event()
        self._labels = itertools.count()
        self._tasks: list[asyncio.Task[None]] = []
        self._http: httpx.AsyncClient | None = None

    async def __aenter__(self) -> Self:
        self._http = client()
        self._tasks = [asyncio.create_task(self._caller(n)) for n in range(self.callers)]
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.stopping.set()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        assert self._http is not None
        await self._http.aclose()

    async def _caller(self, n: int) -> None:
        assert self._http is not None
        turn = n
        while not self.stopping.is_set():
            label = f"l{next(self._labels)}"
            name, face = self.faces[turn % len(self.faces)]
            url = self.urls[(turn // len(self.faces) + n) % len(self.urls)]
            turn += 1
            await one(self._http, self.tally, name, face, url, label)

    async def until_sent(self, count: int, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while self.tally.sent < count:
            if time.monotonic() > deadline:
                raise AssertionError(f"the load sent only {self.tally.sent} of {count} in {timeout} s")
            await asyncio.sleep(0.02)


async def recovered(urls: list[str], timeout: float = 30.0) -> float:
    """Seconds until every face answers on every server again (after a fault ended); AssertionError after
    ``timeout``."""
    start = time.monotonic()
    last: list[str] = []
    async with client() as http:
        while True:
            probe = Tally()
            for url in urls:
                for name, face in FACES:
                    await one(http, probe, name, face, url, f"probe-{uuid.uuid4().hex[:6]}")
            if probe.ok == probe.sent:
                return time.monotonic() - start
            last = [f"{p.kind} {p.face}: {p.detail[:200]}" for p in probe.problems]
            if time.monotonic() - start > timeout:
                raise AssertionError(f"not recovered {timeout} s after the fault ended: {last}")
            await asyncio.sleep(0.2)


# --- afterwards: what was acknowledged and is no longer --------------------------------------------------


async def _read(read: Callable[[], Awaitable[Any]], tries: float = 20.0) -> Any:
    """A read after the fault: retried while the answer is a retryable error (for at most ``tries`` s), each
    attempt bounded by :data:`CLIENT_TIMEOUT` in all."""
    deadline = time.monotonic() + tries
    while True:
        try:
            try:
                async with asyncio.timeout(CLIENT_TIMEOUT):
                    return await read()
            except TimeoutError:
                raise Refused("hang", f"no answer in {CLIENT_TIMEOUT} s") from None
        except Refused as refused:
            if refused.kind != "retryable" or time.monotonic() > deadline:
                raise
        await asyncio.sleep(0.2)


async def lost(acks: list[Ack], urls: list[str]) -> list[str]:
    """The acknowledged results not given back as acknowledged, each read on another server than the one that
    acknowledged it: an A2A task in its acknowledged state, an MCP task that exists (and a completed one
    completed), an AG-UI run whose events end with ``RUN_FINISHED``."""
    missing: list[str] = []
    semaphore = asyncio.Semaphore(4)
    async with client() as http:

        async def check(ack: Ack) -> None:
            url = urls[(ack.replica + 1) % len(urls)] if ack.replica >= 0 else urls[0]
            async with semaphore:
                try:
                    if ack.face == "a2a":
                        task = await _read(lambda: a2a_get(http, url, ack.id))
                        if task["status"]["state"] != ack.state:
                            missing.append(
                                f"a2a {ack.id}: acknowledged {ack.state}, now {task['status']['state']}"
                            )
                    elif ack.face == "mcp-task":
                        task = await _read(lambda: mcp_task_get(http, url, ack.id))
                        if ack.state == "completed" and task.get("status") != "completed":
                            missing.append(
                                f"mcp task {ack.id}: acknowledged completed, now {task.get('status')}"
                            )
                    elif ack.face == "agui":
                        events = await _read(lambda: agui_events(http, url, ack.id))
                        if not any(e.get("type") == "RUN_FINISHED" for e in events):
                            missing.append(f"agui run {ack.id}: acknowledged RUN_FINISHED, now {events[-2:]}")
                except Refused as refused:
                    missing.append(
                        f"{ack.face} {ack.id} (acknowledged {ack.state}): {refused.kind} {refused.detail[:200]}"
                    )
                except httpx.HTTPError as exc:
                    missing.append(f"{ack.face} {ack.id}: {exc!r}")

        await asyncio.gather(*(check(ack) for ack in acks))
    return missing


def report(name: str, tally: Tally, missing: list[str], extra: str = "") -> str:
    """One line of numbers per fault, for the test's failure message and for the record."""
    faces = Counter(m.split(" ", 1)[0] for m in missing)
    acked = Counter(a.face for a in tally.acks)
    return (
        f"[{name}] acknowledged {len(tally.acks)}, lost {len(missing)}, 5xx {tally.count('5xx')}, "
        f"tracebacks {tally.count('traceback')}, hangs {tally.count('hang')}, unmarked {tally.count('unmarked')}, "
        f"retryable {tally.count('retryable')}, transport {tally.count('transport')}, "
        f"unexpected {tally.count('unexpected')} {extra}; acknowledged by face {dict(acked)}, lost by face "
        f"{dict(faces)}"
    )


def record(line: str) -> None:
    """Appends a run's numbers to ``$AGENTMW_FAULTS_RECORD``, when set (the record of a fault-check session)."""
    path = os.environ.get("AGENTMW_FAULTS_RECORD")
    if path:
        with open(path, "a") as handle:
            handle.write(f"{time.strftime('%H:%M:%S')} {line}\n")


@dataclass
class Run:
    """What one fault run measured."""

    name: str
    tally: Tally
    missing: list[str]
    recovery: float  # seconds from the fault's end until every face answered on every server
    restored: float  # when restore() returned (time.monotonic())
    injected: float = 0.0  # when inject() was called

    def when_lost(self) -> str:
        """When the lost results had been acknowledged, in seconds from the fault's start."""
        lost_ids = {m.split(" ")[1] for m in self.missing}
        times = sorted(round(a.at - self.injected, 2) for a in self.tally.acks if a.id in lost_ids)
        if not times:
            return ""
        return (
            f"lost results were acknowledged from {times[0]} s to {times[-1]} s of the fault's start "
            f"(restored at {self.restored - self.injected:.1f} s)"
        )

    @property
    def line(self) -> str:
        return report(self.name, self.tally, self.missing, f"recovery {self.recovery:.1f} s")

    def failures(self) -> str:
        by_face: dict[str, list[str]] = {}
        for line in self.missing:
            by_face.setdefault(line.split(" ", 1)[0], []).append(line[:300])
        shown = "\n".join(f"  lost {face}: {lines[:3]}" for face, lines in by_face.items())
        return f"{self.line}\n{self.tally.summary()}\n{shown}\n{self.when_lost()}"


async def under_fault(
    name: str,
    urls: list[str],
    inject: Callable[[], Any],
    restore: Callable[[], Any],
    *,
    hold: float = 5.0,
    before: int = 60,
    after: int = 80,
    callers: int = 4,
) -> Run:
    """Load through every face; after ``before`` requests, ``inject()`` (in a thread), the fault held ``hold``
    seconds under load, ``restore()``; then the load goes on until every face answers on every server again and
    ``after`` more requests were sent. The acknowledged results are then read back."""
    async with Load(urls, callers=callers) as load:
        await load.until_sent(before)
        injected = time.monotonic()
        await asyncio.to_thread(inject)
        await asyncio.sleep(hold)  # the fault lasts this long, under load (a duration, not an assertion)
        await asyncio.to_thread(restore)
        restored = time.monotonic()
        recovery = await recovered(urls)
        sent = load.tally.sent
        await load.until_sent(sent + after)
    missing = await lost(load.tally.acks, urls)
    run = Run(name, load.tally, missing, recovery, restored, injected)
    record(run.line)
    return run
