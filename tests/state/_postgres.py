"""A real PostgreSQL server for the tests: ``initdb`` in a temporary folder, ``postgres`` on a free port.

Debian's ``postgresql`` package keeps its binaries in ``/usr/lib/postgresql/<version>/bin``, off ``PATH``. The
server refuses to run as root, so as root (CI) the folder is handed to the unprivileged ``postgres`` user the
package creates, and the server runs as that user. The folder is made with ``tempfile`` rather than pytest's
``tmp_path``, whose parents are private to root. fsync and the other durability settings are the server's defaults.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
from pathlib import Path

from tests.conftest import free_port
from tests.waiting import wait_until

SETUP = "run scripts/setup (as root it installs Debian's postgresql)"
USER = "agentmw"  # the database superuser initdb makes (trust authentication on loopback only)


def binaries() -> Path | None:
    """The folder holding ``initdb`` and ``postgres``: the newest Debian version, else whatever PATH has."""

    def version(path: str) -> tuple[int, ...]:
        name = Path(path).parent.parent.name
        return tuple(int(p) for p in name.split(".") if p.isdigit())

    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"), key=version)
    if found:
        return Path(found[-1]).parent
    on_path = shutil.which("initdb")
    return Path(on_path).parent if on_path and (Path(on_path).parent / "postgres").exists() else None


def _accepting(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


class PostgresServer:
    """One server of the tests' own: ``start()``, ``stop()`` (a fast shutdown), ``kill()`` (SIGKILL of the
    postmaster), ``start()`` again on the same data and port; ``close()`` stops it and removes its folder."""

    def __init__(self, bin_dir: Path, *, database: str = "agentmw") -> None:
        self.bin_dir = bin_dir
        self.database = database
        self.folder = Path(tempfile.mkdtemp(prefix="agentmw-pg-"))
        self.data = self.folder / "data"
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None
        self.log = self.folder / "postgres.log"
        self._as: dict[str, object] = {}
        if os.geteuid() == 0:  # postgres refuses root: run it as the package's unprivileged user
            account = pwd.getpwnam("postgres")
            os.chown(self.folder, account.pw_uid, account.pw_gid)
            self._as = {"user": account.pw_uid, "group": account.pw_gid, "extra_groups": []}
        self._run(
            [
                str(bin_dir / "initdb"),
                "-D",
                str(self.data),
                "-U",
                USER,
                "--auth=trust",
                "-E",
                "UTF8",
                "--locale=C",
                "--no-sync",  # initdb's own files only; the server keeps fsync on
            ]
        )
        self.start()
        self._run([str(bin_dir / "createdb"), "-h", "127.0.0.1", "-p", str(self.port), "-U", USER, database])

    @property
    def url(self) -> str:
        return f"postgresql://{USER}@127.0.0.1:{self.port}/{self.database}"

    def _run(self, command: list[str]) -> None:
        done = subprocess.run(
            command, capture_output=True, text=True, check=False, cwd=self.folder, **self._as
        )  # type: ignore[call-overload]
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(command)} failed:\n{done.stdout}\n{done.stderr}")

    def start(self) -> None:
        assert self.process is None or self.process.poll() is not None, "already running"
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(
                [
                    str(self.bin_dir / "postgres"),
                    "-D",
                    str(self.data),
                    "-p",
                    str(self.port),
                    "-k",
                    str(self.folder),  # its unix socket, here rather than /var/run/postgresql
                    "-c",
                    "listen_addresses=127.0.0.1",
                    "-c",
                    "max_connections=300",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.folder,
                start_new_session=True,
                **self._as,  # type: ignore[arg-type]
            )
        process = self.process

        def up() -> bool:
            if process.poll() is not None:
                raise RuntimeError(f"postgres exited with {process.returncode}:\n{self.log.read_text()}")
            if not _accepting(self.port):
                return False
            ready = subprocess.run(
                [str(self.bin_dir / "pg_isready"), "-h", "127.0.0.1", "-p", str(self.port), "-U", USER],
                capture_output=True,
                check=False,
            )
            return ready.returncode == 0

        wait_until(up, "postgres to accept connections", timeout=30, interval=0.05)

    def stop(self) -> None:
        """A fast shutdown (SIGINT): sessions are ended, the server exits cleanly."""
        self._signal(signal.SIGINT)

    def kill(self) -> None:
        """SIGKILL of the postmaster and its children (the process group): crash recovery at the next start."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)

    def _signal(self, sig: int) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(sig)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.kill()

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.folder, ignore_errors=True)
