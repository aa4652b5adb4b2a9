"""Real components for the scale-out tests: a redis-server, replicas of the example app as separate ``uvicorn``
processes, Debian's nginx as a round-robin proxy in front of them, and ``uvicorn --workers 4``.

Nothing here is simulated: every replica is its own process on its own port, every request a test makes goes
through nginx (or straight to one replica when a test names it), and ``kill()`` is a real ``SIGKILL``.

The replicas serve :data:`example_app`: the example app (``examples.fastapi_app.main:app``) as it is, plus what a
test needs to observe it and nothing that changes how it serves:

- every response carries ``x-agentmw-replica: <index>-<pid>``, so a test can tell which process answered
  (and :meth:`Cluster.steer` can make nginx's next pick a chosen replica);
- ``POST /_scale/list-change`` adds (or removes again) a tool on the replica that receives it, which makes that
  replica's agent emit ``notifications/tools/list_changed`` (the example has no admin endpoint that changes its
  lists);
- a skill ``scale_steps`` that calls a tool ``scale_effect`` once per step; the tool appends one line per call to
  the file ``$AGENTMW_SCALE_EFFECTS``, the side-effect counter of the kill test;
- pushes may go to ``127.0.0.1`` (the tests' receivers), which the default push policy refuses;
- with ``$AGENTMW_SCALE_SECRET`` set, the agent's ``secret`` (which signs the MCP ``requestState``) is that value on
  every replica; unset, each process keeps its own random one, as the example does.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import free_port, require_tool
from tests.state.conftest import SETUP as REDIS_SETUP
from tests.state.conftest import (  # noqa: F401  (fixtures: a real PostgreSQL server)
    postgres_server,
    postgres_url,
    redis_url,
)
from tests.waiting import wait_until

ROOT = Path(__file__).resolve().parent.parent
APP = "tests.replicas:example_app"
REPLICA_HEADER = "x-agentmw-replica"
NGINX_SETUP = "run scripts/setup (as root it installs Debian's nginx)"
START_TIMEOUT = 60.0

# --- the app the replicas serve ------------------------------------------------------------------------


def _build_example_app() -> Any:
    import examples.fastapi_app.main as example
    from agentmw import Context, skill, tool

    agent = example.agent
    secret = os.environ.get("AGENTMW_SCALE_SECRET")
    if secret:
        agent.secret = secret.encode()
    if agent.a2a.push is not None:  # the tests' push receivers listen on loopback, which the default refuses
        agent.a2a.push.allow_hosts = {*agent.a2a.push.allow_hosts, "127.0.0.1"}
    identity = f"{os.environ.get('AGENTMW_SCALE_REPLICA', '0')}-{os.getpid()}".encode()
    effects = os.environ.get("AGENTMW_SCALE_EFFECTS")

    @tool(title="Scale test side effect")
    async def scale_effect(label: str, step: int) -> int:
        """Record that step ``step`` of ``label`` ran (one line per call in $AGENTMW_SCALE_EFFECTS).

        Args:
            label: the task's label.
            step: the step number.
        """
        if effects:
            with open(effects, "a") as handle:
                handle.write(json.dumps({"label": label, "step": step, "by": identity.decode()}) + "\n")
        return step

    @skill(title="Scale test steps", tags=("test",))
    async def scale_steps(label: str, ctx: Context, steps: int = 6, pause: float = 0.3) -> dict:
        """Run ``steps`` steps, each one ``scale_effect`` call followed by a pause.

        Args:
            label: a label for this task.
            steps: how many steps.
            pause: seconds between steps.
        """
        done = []
        for step in range(steps):
            done.append(await ctx.call("scale_effect", {"label": label, "step": step}))
            await asyncio.sleep(pause)
        return {"label": label, "steps": done}

    agent.include(scale_effect)
    agent.include(scale_steps)
    probes: list[str] = []

    async def list_change(send: Any) -> None:
        def probe() -> str:
            return "probe"

        if probes:
            agent.remove("tool", probes.pop())
        else:
            name = f"scale_probe_{os.getpid()}"
            agent.add("tool", probe, name=name, contract="A tool that comes and goes in the scale tests.")
            probes.append(name)
        body = json.dumps({"replica": identity.decode(), "tools": sorted(agent.tools)}).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"application/json"), (REPLICA_HEADER.encode(), identity)],
            }
        )
        await send({"type": "http.response.body", "body": body})

    async def app(scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await example.app(scope, receive, send)
            return
        if scope["path"] == "/_scale/list-change" and scope["method"] == "POST":
            await list_change(send)
            return

        async def tagged(message: dict) -> None:
            if message["type"] == "http.response.start":
                message = {
                    **message,
                    "headers": [*message.get("headers", []), (REPLICA_HEADER.encode(), identity)],
                }
            await send(message)

        await example.app(scope, receive, tagged)

    return app


def __getattr__(name: str) -> Any:
    """``example_app`` is built on first use (by a replica's uvicorn), never when pytest imports this module."""
    if name == "example_app":
        app = _build_example_app()
        globals()["example_app"] = app
        return app
    raise AttributeError(name)


# --- processes ---------------------------------------------------------------------------------------


def _tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def _stop(process: subprocess.Popen, *, group: bool = False, timeout: float = 10) -> None:
    """Ends one process this module started (by its id, or its own process group for ``--workers``)."""
    if process.poll() is not None:
        return
    try:
        if group:
            os.killpg(process.pid, signal.SIGTERM)
        else:
            process.terminate()
        process.wait(timeout=timeout)
    except (subprocess.TimeoutExpired, ProcessLookupError):
        try:
            if group:
                os.killpg(process.pid, signal.SIGKILL)
            else:
                process.kill()
        except ProcessLookupError:
            pass
        process.wait(timeout=10)


def wait_healthy(
    url: str, process: subprocess.Popen | None, log: Path | None, timeout: float = START_TIMEOUT
) -> None:
    def served() -> bool:
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                return True
        except httpx.HTTPError:
            pass
        if process is not None and process.poll() is not None:
            raise RuntimeError(
                f"{url} exited with {process.returncode} before it served:\n{_tail(log) if log else ''}"
            )
        return False

    wait_until(
        served, lambda: f"{url} to serve /health:\n{_tail(log) if log else ''}", timeout=timeout, interval=0.1
    )


def wait_all_workers(
    url: str, workers: int, process: subprocess.Popen, log: Path, timeout: float = START_TIMEOUT
) -> None:
    """Waits until every one of ``workers`` processes has answered ``/health``. The first worker to finish
    importing the app serves alone until the others catch up, which on a loaded machine can take seconds: a
    test that starts at once would see every request land on one worker and prove nothing. Requests go out
    several at a time on fresh connections, so idle workers race for them."""
    seen: set[str] = set()

    def ask(_: int) -> str | None:
        try:
            response = httpx.get(f"{url}/health", timeout=2)
        except httpx.HTTPError:
            return None
        return response.headers.get(REPLICA_HEADER) if response.status_code == 200 else None

    with ThreadPoolExecutor(max_workers=2 * workers) as pool:

        def all_served() -> bool:
            seen.update(r for r in pool.map(ask, range(2 * workers)) if r)
            if len(seen) < workers and process.poll() is not None:
                raise RuntimeError(
                    f"{url} exited with {process.returncode} while its workers started:\n{_tail(log)}"
                )
            return len(seen) >= workers

        wait_until(
            all_served,
            lambda: (
                f"all {workers} workers at {url} to serve /health (only {sorted(seen)} did):\n{_tail(log)}"
            ),
            timeout=timeout,
            interval=0.05,
        )


@dataclass
class Replica:
    index: int
    port: int
    env: dict[str, str]
    folder: Path
    workers: int = 1
    process: subprocess.Popen | None = None
    starts: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log(self) -> Path:
        return self.folder / f"replica{self.index}.log"

    def start(self) -> None:
        assert self.process is None or self.process.poll() is not None, "already running"
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
        if self.workers > 1:
            command += ["--workers", str(self.workers)]
        with open(self.log, "a") as log:
            log.write(f"--- start {self.starts}: {' '.join(command)}\n")
            log.flush()
            self.process = subprocess.Popen(
                command,
                cwd=self.folder,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        wait_healthy(self.url, self.process, self.log)
        if self.workers > 1:
            wait_all_workers(self.url, self.workers, self.process, self.log)

    def stop(self) -> None:
        """A graceful stop (SIGTERM), as a rolling deploy does."""
        if self.process is not None:
            _stop(self.process, group=self.workers > 1)

    def kill(self) -> None:
        """``kill -9``: no shutdown code runs (the whole process group, for ``--workers``)."""
        if self.process is not None and self.process.poll() is None:
            if self.workers > 1:
                os.killpg(self.process.pid, signal.SIGKILL)
            else:
                self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=10)

    def restart(self) -> None:
        self.stop()
        self.start()

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None


def replica_env(
    folder: Path,
    *,
    store: str | None,
    index: int,
    secret: str | None,
    effects: Path,
    proxy_port: int | None = None,
) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTMW_", "PROCUREMENT_"))}
    if proxy_port is not None:  # callers reach the replicas through nginx, and name it in their Host
        env["AGENTMW_EXAMPLE_HOSTS"] = f"127.0.0.1:{proxy_port},localhost:{proxy_port}"
    if store is not None:
        env["AGENTMW_STORE"] = (
            store  # None: the library's default (sqlite://agentmw.db in the replica's folder)
        )
    env["AGENTMW_SCALE_REPLICA"] = str(index)
    env["AGENTMW_SCALE_EFFECTS"] = str(effects)
    if secret is not None:
        env["AGENTMW_SCALE_SECRET"] = secret
    env["PYTHONUNBUFFERED"] = "1"
    return env


# --- nginx ---------------------------------------------------------------------------------------------

NGINX_CONF = """\
{user}worker_processes 1;
daemon off;
pid {folder}/nginx.pid;
error_log {folder}/nginx-error.log warn;
events {{ worker_connections 1024; }}
http {{
    access_log {folder}/nginx-access.log;
    client_body_temp_path {folder}/body;
    proxy_temp_path {folder}/proxy;
    fastcgi_temp_path {folder}/fastcgi;
    uwsgi_temp_path {folder}/uwsgi;
    scgi_temp_path {folder}/scgi;

    # round robin (nginx's default), no stickiness: no ip_hash, hash or cookie
    upstream agentmw {{
{servers}
        keepalive 32;
    }}
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://agentmw;
            proxy_http_version 1.1;                 # keep-alive to the replicas, and chunked SSE
            proxy_set_header Connection "";
            proxy_set_header Host $http_host;       # the card's URLs name the proxy, not a replica
            proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
            proxy_set_header X-Forwarded-Proto $scheme;
            proxy_buffering off;                    # SSE: every event goes out as it comes
            proxy_request_buffering off;
            proxy_cache off;
            proxy_read_timeout 3600s;               # long-lived GET streams and SubscribeToTask
            proxy_send_timeout 3600s;
            proxy_next_upstream error timeout;      # a dead replica: try the next (never after a request was sent)
            proxy_connect_timeout 2s;
        }}
    }}
}}
"""


@dataclass
class Proxy:
    port: int
    folder: Path
    process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def nginx_binary() -> str:
    found = shutil.which("nginx") or next(
        (p for p in ("/usr/sbin/nginx", "/usr/local/sbin/nginx") if Path(p).exists()), None
    )
    return require_tool("nginx", found, NGINX_SETUP)


def start_nginx(folder: Path, ports: list[int], port: int | None = None) -> Proxy:
    binary = nginx_binary()
    folder.mkdir(parents=True, exist_ok=True)
    proxy = Proxy(port or free_port(), folder)
    servers = "\n".join(f"        server 127.0.0.1:{p} max_fails=1 fail_timeout=5s;" for p in ports)
    user = (
        "user root;\n" if os.geteuid() == 0 else ""
    )  # workers would run as nobody, who cannot read pytest's tmp
    conf = folder / "nginx.conf"
    conf.write_text(NGINX_CONF.format(user=user, folder=folder, servers=servers, port=proxy.port))
    check = subprocess.run(
        [binary, "-t", "-p", str(folder), "-c", str(conf)], capture_output=True, text=True, check=False
    )
    if check.returncode != 0:
        raise RuntimeError(f"nginx refused its configuration:\n{check.stderr}")
    with open(folder / "nginx-stderr.log", "a") as log:
        proxy.process = subprocess.Popen(
            [binary, "-p", str(folder), "-c", str(conf)],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        wait_healthy(proxy.url, proxy.process, folder / "nginx-error.log")
    except BaseException:
        _stop(proxy.process)
        raise
    return proxy


# --- clusters --------------------------------------------------------------------------------------------


@dataclass
class Cluster:
    """N replicas behind nginx (or, with ``proxy=None``, one ``uvicorn --workers N``)."""

    folder: Path
    replicas: list[Replica]
    proxy: Proxy | None
    store: str | None
    effects: Path
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def url(self) -> str:
        """Where clients go: the proxy, or the only (multi-worker) server."""
        return self.proxy.url if self.proxy is not None else self.replicas[0].url

    def kill(self, index: int) -> None:
        """``kill -9`` replica ``index``."""
        self.replicas[index].kill()

    def which(self, response: httpx.Response) -> int:
        """The index of the replica that answered."""
        return int(response.headers[REPLICA_HEADER].split("-")[0])

    async def steer(self, http: httpx.AsyncClient, index: int) -> None:
        """Make nginx's next pick (round robin, one worker) be replica ``index``: asks ``/health`` until the
        replica before it answers. Only meaningful while no other client uses the proxy."""
        assert self.proxy is not None, "steer() needs the proxy"
        before = (index - 1) % len(self.replicas)
        for _ in range(3 * len(self.replicas) + 3):
            response = await http.get(f"{self.proxy.url}/health")
            if response.status_code == 200 and self.which(response) == before:
                return
        raise AssertionError(f"could not steer the round robin to replica {index}")

    def effects_seen(self) -> list[dict]:
        if not self.effects.exists():
            return []
        return [json.loads(line) for line in self.effects.read_text().splitlines() if line.strip()]

    def logs(self) -> str:
        parts = [f"== replica {r.index} ==\n{_tail(r.log)}" for r in self.replicas]
        if self.proxy is not None:
            parts.append(f"== nginx ==\n{_tail(self.proxy.folder / 'nginx-error.log')}")
        return "\n".join(parts)

    def close(self) -> None:
        if self.proxy is not None and self.proxy.process is not None:
            _stop(self.proxy.process)
        for replica in self.replicas:
            replica.stop()


def start_cluster(
    folder: Path,
    *,
    replicas: int = 3,
    store: str | None,
    proxy: bool = True,
    workers: int = 1,
    secret: str | None = None,
) -> Cluster:
    """Starts the replicas (sharing ``store``, one A2A task file and one side-effect file) and, with ``proxy``,
    nginx in front of them. The caller must ``close()`` it (the fixtures below do, in ``finally``)."""
    folder.mkdir(parents=True, exist_ok=True)
    if proxy:
        nginx_binary()  # skip (or fail in CI) before starting anything
    effects = folder / "effects.jsonl"
    cluster = Cluster(folder, [], None, store, effects)
    proxy_port = free_port() if proxy else None
    try:
        for index in range(replicas):
            replica = Replica(
                index,
                free_port(),
                replica_env(
                    folder, store=store, index=index, secret=secret, effects=effects, proxy_port=proxy_port
                ),
                folder,
                workers=workers,
            )
            cluster.replicas.append(replica)
            replica.start()
        if proxy:
            cluster.proxy = start_nginx(folder / "nginx", [r.port for r in cluster.replicas], proxy_port)
    except BaseException:
        cluster.close()
        raise
    return cluster


@pytest.fixture(scope="module")
def redis_cluster(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:  # noqa: F811
    """Three replicas sharing one Redis (a database of its own per module), behind nginx."""
    require_tool("redis-server", shutil.which("redis-server"), REDIS_SETUP)
    cluster = start_cluster(
        tmp_path_factory.mktemp("scale-redis"), replicas=3, store=f"{redis_url}?prefix=scale{os.getpid()}"
    )
    try:
        yield cluster
    finally:
        cluster.close()


@pytest.fixture(scope="module")
def sqlite_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """Three replicas sharing one SQLite file, behind nginx (one machine)."""
    folder = tmp_path_factory.mktemp("scale-sqlite")
    cluster = start_cluster(folder, replicas=3, store=f"sqlite:///{folder}/state.db")
    try:
        yield cluster
    finally:
        cluster.close()


@pytest.fixture(scope="module")
def secret_cluster(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:  # noqa: F811
    """Two replicas behind nginx that share the agent's secret (``$AGENTMW_SCALE_SECRET``) and Redis."""
    cluster = start_cluster(
        tmp_path_factory.mktemp("scale-secret"),
        replicas=2,
        store=f"{redis_url}?prefix=secret{os.getpid()}",
        secret="scale-test-shared-secret",
    )
    try:
        yield cluster
    finally:
        cluster.close()


@pytest.fixture(scope="module")
def workers_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """``uvicorn --workers 4`` with the default store (no ``AGENTMW_STORE``: ``sqlite://agentmw.db`` in its
    folder), no proxy."""
    cluster = start_cluster(
        tmp_path_factory.mktemp("scale-workers"), replicas=1, store=None, proxy=False, workers=4
    )
    try:
        yield cluster
    finally:
        cluster.close()


@pytest.fixture
def single_replica(tmp_path: Path) -> Iterator[Cluster]:
    """One replica with an SQLite store file, to stop and start again (the restart test)."""
    cluster = start_cluster(tmp_path, replicas=1, store=f"sqlite:///{tmp_path}/state.db", proxy=False)
    try:
        yield cluster
    finally:
        cluster.close()


@pytest.fixture(scope="module")
def postgres_cluster(postgres_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:  # noqa: F811
    """Three replicas sharing one PostgreSQL database (a schema of its own per module), behind nginx."""
    cluster = start_cluster(
        tmp_path_factory.mktemp("scale-postgres"),
        replicas=3,
        store=f"{postgres_url}?schema=scale{os.getpid()}",
    )
    try:
        yield cluster
    finally:
        cluster.close()


@pytest.fixture
def single_postgres_replica(postgres_url: str, tmp_path: Path) -> Iterator[Cluster]:  # noqa: F811
    """One replica on a Postgres schema of its own, to stop and start again (the restart tests)."""
    cluster = start_cluster(
        tmp_path, replicas=1, store=f"{postgres_url}?schema=restart{uuid.uuid4().hex[:12]}", proxy=False
    )
    try:
        yield cluster
    finally:
        cluster.close()
