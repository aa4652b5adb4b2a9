"""Store URLs fail when the ``Agent`` is built, with the URL in the message, and building one creates nothing.

Each accepted form (docs/state.md) is read as documented; each refused one raises ``ConfigurationError`` from
``Agent(store=...)``, from ``$AGENTMW_STORE`` and (for the URL's form) from ``open_state``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentmw import Agent
from agentmw.errors import ConfigurationError
from agentmw.state import MemoryState, SQLiteState, check_store, open_state, parse_store_url


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty working directory; the tests check that it stays empty."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


# --- the accepted forms ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "path"),
    [
        ("sqlite://agentmw.db", "agentmw.db"),
        ("sqlite://./agentmw.db", "./agentmw.db"),
        ("sqlite://data/agentmw.db", "data/agentmw.db"),
        ("SQLite://agentmw.db", "agentmw.db"),
    ],
)
def test_relative_sqlite_urls(workdir: Path, url: str, path: str) -> None:
    (workdir / "data").mkdir()
    found = parse_store_url(url)
    assert (found.kind, found.path) == ("sqlite", path)
    check_store(url)
    Agent("ok", store=url)
    state = open_state(url)
    assert isinstance(state, SQLiteState) and state.path == path
    assert sorted(p.name for p in workdir.iterdir()) == ["data"], (
        "neither the check nor Agent() made the file"
    )


@pytest.mark.parametrize("slashes", ["///", "////"])  # agentmw's three, and SQLAlchemy's four
def test_absolute_sqlite_urls(workdir: Path, slashes: str) -> None:
    url = f"sqlite:{slashes}{str(workdir).lstrip('/')}/state.db"
    assert parse_store_url(url).path == f"{workdir}/state.db"
    Agent("ok", store=url)
    assert isinstance(open_state(url), SQLiteState)
    assert list(workdir.iterdir()) == []


def test_an_existing_sqlite_file(workdir: Path) -> None:
    (workdir / "state.db").write_bytes(b"")
    Agent("ok", store=f"sqlite://{workdir}/state.db")


@pytest.mark.parametrize(
    ("url", "client_url", "prefix"),
    [
        ("redis://localhost:6379/0", "redis://localhost:6379/0", None),
        ("redis://localhost", "redis://localhost", None),
        (
            "redis://user:secret@cache.internal:6380/2?prefix=shop-1",
            "redis://user:secret@cache.internal:6380/2",
            "shop-1",
        ),
        (
            "rediss://cache.internal:6380/0?socket_timeout=5",
            "rediss://cache.internal:6380/0?socket_timeout=5",
            None,
        ),
        ("unix:///run/redis/redis.sock?db=1", "unix:///run/redis/redis.sock?db=1", None),
    ],
)
def test_redis_urls(url: str, client_url: str, prefix: str | None) -> None:
    found = parse_store_url(url)
    assert (found.kind, found.client_url, found.prefix) == ("redis", client_url, prefix)
    check_store(url)
    Agent("ok", store=url)  # nothing connects: there is no server at these addresses


def test_postgres_urls_are_read_and_connect_to_nothing() -> None:
    found = parse_store_url(
        "postgresql://app:s3cret@db.invalid:5433/app?schema=procure&pool_size=4&sslmode=require"
    )
    assert (found.kind, dict(found.options)) == ("postgres", {"schema": "procure", "pool_size": 4})
    assert found.client_url == "postgresql://app:s3cret@db.invalid:5433/app?sslmode=require"
    Agent("ok", store="postgres://app@db.invalid/app")  # no server there: checked, not connected to
    check_store("postgresql:///app?host=/var/run/postgresql")


def test_memory_and_instances() -> None:
    assert parse_store_url("memory://").kind == "memory"
    assert isinstance(open_state("Memory://"), MemoryState)
    store = MemoryState()
    assert Agent("ok", store=store).state is store


def test_an_empty_store_means_the_default(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AGENTMW_STORE")
    Agent("ok", store="")
    monkeypatch.setenv("AGENTMW_STORE", "")
    Agent("ok")
    assert list(workdir.iterdir()) == [], (
        "the default sqlite://agentmw.db is made on first use, not by Agent()"
    )


# --- the refused forms -----------------------------------------------------------------------------------

AT_ROOT = Path("/agentmw.db").exists()
FORMS = [  # (url, what the message says): refused from the URL alone
    ("mysql://app:s3cret@db.internal/app", "agentmw has no mysql:// store"),
    ("postgresql://app:s3cret@db.internal:five/app", "the port is a number from 0 to 65535"),
    ("postgres://db/app?schema=Has-Caps", "a schema is 1-32 lower-case letters"),
    ("postgresql://db/app?pool_size=0", "pool_size is an integer above 0"),
    ("postgresql://app@db/app?password=s3cret&pool_size=x", "pool_size is an integer above 0"),
    ("redis://:s3cret@[::1/0", "not a URL"),
    ("memory", "did you mean memory://?"),
    ("memory:", "written memory:// with nothing after it"),
    ("memory://shared", "written memory:// with nothing after it"),
    ("sqlite", "did you mean sqlite://agentmw.db?"),
    ("agentmw.db", "write sqlite://agentmw.db for this SQLite file (relative to the working directory)"),
    ("/var/lib/app/agentmw.db", "write sqlite:///var/lib/app/agentmw.db for this SQLite file (absolute)"),
    ("sqlite:/agentmw.db", "a SQLite URL starts with sqlite://: write sqlite://agentmw.db"),
    ("sqlite:agentmw.db", "a SQLite URL starts with sqlite://: write sqlite://agentmw.db"),
    ("sqlite://", "a SQLite URL names a file"),
    ("sqlite:///", "a SQLite URL names a file"),
    ("sqlite:///var/lib/app/", "a SQLite URL names a file"),
    ("sqlite://data/..", "a SQLite URL names a file"),
    (
        "sqlite:///agentmw.db",
        "this names /agentmw.db, a file at the filesystem root: write sqlite://agentmw.db",
    ),
    ("sqlite:///./agentmw.db", "this names /agentmw.db (SQLAlchemy reads it as relative"),
    ("sqlite:///../agentmw.db", "write sqlite://../agentmw.db for a path relative"),
    ("sqlite://:memory:", "private to one connection: use memory://"),
    ("sqlite://agentmw.db?mode=ro", "a SQLite URL takes no options"),
    ("redis://cache:six/0", "the port is a number from 0 to 65535"),
    ("redis://cache:70000/0", "the port is a number from 0 to 65535"),
    ("redis:///0", "a Redis URL names its host"),
    ("redis://cache:6379/zero", "the Redis database is a number"),
    ("redis://cache:6379/0?prefix=has space", "a prefix is 1-64 letters"),
    ("unix://", "a unix:// URL names the socket"),
    ("redis://[::1/0", "not a URL"),
    (" memory://", "spaces or a line break around it"),
    ("sqlite://agentmw.db\n", "spaces or a line break around it"),
]


@pytest.mark.parametrize(("url", "problem"), FORMS)
def test_refused_forms(workdir: Path, monkeypatch: pytest.MonkeyPatch, url: str, problem: str) -> None:
    shown = url.replace("s3cret", "***")
    with pytest.raises(ConfigurationError) as refused:
        Agent("bad", store=url)
    assert problem in str(refused.value) and f"Agent(store=...) {shown!r}" in str(refused.value)
    assert "s3cret" not in str(refused.value), "a password in the URL is not repeated"
    monkeypatch.setenv("AGENTMW_STORE", url)
    with pytest.raises(ConfigurationError, match=r"^\$AGENTMW_STORE") as from_env:
        Agent("bad")
    assert problem in str(from_env.value)
    with pytest.raises(ConfigurationError):
        open_state(url)
    assert list(workdir.iterdir()) == []
    assert Path("/agentmw.db").exists() == AT_ROOT, "nothing was made at the filesystem root"


def test_the_supported_schemes_are_named() -> None:
    with pytest.raises(ConfigurationError) as refused:
        Agent("bad", store="mysql://db/app")
    for form in (
        "memory://",
        "sqlite://relative/path.db",
        "sqlite:///absolute/path.db",
        "redis://host:port/db",
        "postgresql://user@host:port/database",
    ):
        assert form in str(refused.value)


def test_a_sqlite_folder_that_does_not_exist(workdir: Path) -> None:
    for url, folder in (
        (f"sqlite://{workdir}/no/such/dir/x.db", workdir / "no/such/dir"),
        ("sqlite://missing/x.db", workdir / "missing"),
        ("sqlite:///no/such/dir/x.db", Path("/no/such/dir")),
    ):
        with pytest.raises(ConfigurationError, match=f"the folder {folder} does not exist") as refused:
            Agent("bad", store=url)
        assert repr(url) in str(refused.value)
    assert list(workdir.iterdir()) == [], "no folder and no file was made"
    assert not Path("/no").exists()


def test_a_sqlite_path_through_a_file_or_to_a_folder(workdir: Path) -> None:
    (workdir / "notes.txt").write_text("x")
    (workdir / "db").mkdir()
    with pytest.raises(ConfigurationError, match="notes.txt is not a folder"):
        Agent("bad", store="sqlite://notes.txt/x.db")
    with pytest.raises(ConfigurationError, match="db is a folder: name a file in it"):
        Agent("bad", store=f"sqlite://{workdir}/db")
    assert sorted(p.name for p in workdir.iterdir()) == ["db", "notes.txt"] and not any(
        (workdir / "db").iterdir()
    )


def test_the_redis_extra_must_be_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "redis", None)  # as if agentmw[redis] were not installed
    with pytest.raises(ConfigurationError, match=r"pip install 'agentmw\[redis\]'") as refused:
        Agent("bad", store="redis://localhost:6379/0")
    assert "'redis://localhost:6379/0'" in str(refused.value)


def test_a_store_of_another_type() -> None:
    with pytest.raises(TypeError, match="not int"):
        Agent("bad", store=42)


# --- permissions: root may write anywhere, so these run as nobody when the tests run as root ----------------

UNWRITABLE = """
import sys
from agentmw import Agent
from agentmw.errors import ConfigurationError
try:
    Agent("bad", store=sys.argv[1] or None)
except ConfigurationError as exc:
    print(exc)
"""


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A folder every user can reach (pytest's own tmp folders are private to their owner)."""
    folder = Path(tempfile.mkdtemp(prefix="agentmw-store-"))
    folder.chmod(0o755)
    try:
        yield folder
    finally:
        folder.chmod(0o755)
        shutil.rmtree(folder)


def refusal_of(url: str, *, cwd: Path | None = None, store_env: bool = True) -> str:
    if os.geteuid() != 0:
        command = [sys.executable, "-c", UNWRITABLE, url]
    elif shutil.which("setpriv"):
        command = [
            "setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            sys.executable,
            "-c",
            UNWRITABLE,
            url,
        ]
    else:
        pytest.skip("running as root without setpriv: no user to whom a folder is read-only")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    if not store_env:
        env.pop("AGENTMW_STORE", None)
    return subprocess.run(
        command, capture_output=True, text=True, timeout=60, check=True, env=env, cwd=cwd
    ).stdout


def test_a_sqlite_folder_that_is_not_writable(shared_dir: Path) -> None:
    (shared_dir / "locked").mkdir()
    (shared_dir / "locked").chmod(0o555)
    out = refusal_of(f"sqlite://{shared_dir}/locked/x.db")
    assert f"the folder {shared_dir}/locked is not writable by this process" in out, out
    assert list((shared_dir / "locked").iterdir()) == []


def test_a_sqlite_file_that_is_not_writable(shared_dir: Path) -> None:
    (shared_dir / "open").mkdir()
    (shared_dir / "open").chmod(0o777)
    (shared_dir / "open" / "x.db").write_bytes(b"")
    (shared_dir / "open" / "x.db").chmod(0o444)
    out = refusal_of(f"sqlite://{shared_dir}/open/x.db")
    assert f"the file {shared_dir}/open/x.db is not readable and writable" in out, out


def test_the_default_store_is_checked_too(shared_dir: Path) -> None:
    (shared_dir / "locked").mkdir()
    (shared_dir / "locked").chmod(0o555)
    out = refusal_of("", cwd=shared_dir / "locked", store_env=False)
    assert out.startswith(
        "the default store (give Agent(store=...) or set $AGENTMW_STORE) 'sqlite://agentmw.db': "
        f"the folder {shared_dir}/locked is not writable"
    ), out
