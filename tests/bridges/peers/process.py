"""Each peer is its own ``uvicorn`` process on a free loopback port: started, waited for, and stopped by its id."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import httpx

from tests.conftest import free_port
from tests.replicas import _stop, wait_healthy

__all__ = ["PeerProcess", "start_peer"]

ROOT = Path(__file__).resolve().parents[3]
START_TIMEOUT = 60.0


@dataclass
class PeerProcess:
    """A running peer: ``url`` is what a client is given (the A2A base URL, or the MCP endpoint ``…/mcp``),
    ``base`` the process's own root (where ``/_test/counter`` and ``/health`` are)."""

    url: str
    base: str
    process: subprocess.Popen
    log: Path
    name: str = ""

    @property
    def counter_url(self) -> str:
        return f"{self.url.removesuffix('/mcp')}/_test/counter"

    def counter(self) -> dict[str, int]:
        return httpx.get(self.counter_url, timeout=10).json()

    def cut_next_stream(self, times: int = 1) -> None:
        """The next streaming response of this peer drops its connection after its second event (the next
        ``times`` streaming responses, each)."""
        response = httpx.post(f"{self.base}/_test/cut", params={"times": times}, timeout=10)
        response.raise_for_status()

    def logs(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self) -> None:
        _stop(self.process)


def start_peer(
    app: str,
    folder: Path,
    env: dict[str, str],
    *,
    name: str,
    path: str = "",
    url_env: str = "PEER_BASE_URL",
    python: str | None = None,
) -> PeerProcess:
    """Starts ``uvicorn --factory <app>`` on a free port with ``$<url_env>`` set to its own address, and waits
    until ``/health`` answers. ``path`` is appended to the base for :attr:`PeerProcess.url`. ``python`` is
    the interpreter (default: this one), for a peer whose SDK lives in a venv of its own (A2A 0.3)."""
    folder.mkdir(parents=True, exist_ok=True)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log = folder / f"{name}.log"
    process_env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTMW_", "PEER_"))}
    process_env.update(env, PYTHONUNBUFFERED="1")
    process_env[url_env] = base
    command = [
        python or sys.executable,
        "-m",
        "uvicorn",
        app,
        "--factory",
        "--app-dir",
        str(ROOT),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--log-level",
        "warning",
        "--no-access-log",
        "--timeout-graceful-shutdown",
        "2",
    ]
    with open(log, "a") as handle:
        process = subprocess.Popen(
            command,
            cwd=ROOT,
            env=process_env,
            stdout=handle,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        wait_healthy(base, process, log, timeout=START_TIMEOUT)
    except BaseException:
        _stop(process)
        raise
    return PeerProcess(url=f"{base}{path}", base=base, process=process, log=log, name=name)
