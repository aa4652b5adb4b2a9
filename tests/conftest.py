from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import uvicorn

pytest_plugins = ["tests.auth.fixtures"]  # the authorization server and protected agent of the auth tests


def pytest_configure(config: pytest.Config) -> None:
    # Tests share one process: each Agent gets in-memory state unless a test names a store (the SQLite default
    # would let one test's idempotency keys or approvals meet another's through one agentmw.db). Set here, not
    # at import: replica processes import this module too, and must keep the store they were started with.
    os.environ.setdefault("AGENTMW_STORE", "memory://")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def in_ci() -> bool:
    """``CI=true`` (as CI services set it): a missing test tool is then a failure, never a skip."""
    return os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}


def require_tool(name: str, found: str | os.PathLike[str] | bool | None, install_hint: str) -> str:
    """Skip the test when a tool it needs is absent, with a reason that says how to install it.

    ``found`` is the tool's path (``None`` or a path that does not exist means absent) or the result of a
    check. Under ``CI=true`` an absent tool fails the test instead: CI must never pass by skipping.
    Returns the path as a string (empty for a check).
    """
    present = found if isinstance(found, bool) else found is not None and Path(found).exists()
    if not present:
        where = "" if isinstance(found, bool) or found is None else f" (looked for {found})"
        reason = f"{name} is not installed{where}; {install_hint}"
        if in_ci():
            pytest.fail(f"CI=true and {reason}", pytrace=False)
        pytest.skip(reason)
    return "" if isinstance(found, bool) else str(found)


@contextmanager
def serve(app: object, **options: object) -> Iterator[str]:
    """Serve ``app`` with uvicorn on a real loopback socket; yields its base URL. ``options`` go to
    ``uvicorn.Config`` (``ssl_certfile=`` and ``ssl_keyfile=`` serve HTTPS)."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off",
                                           **options))  # type: ignore[arg-type]
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.01)
    try:
        yield f"{'https' if options.get('ssl_certfile') else 'http'}://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@pytest.fixture(scope="session")
def example_url() -> Iterator[str]:
    from examples.fastapi_app.main import app

    with serve(app) as url:
        yield url
