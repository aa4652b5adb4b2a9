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


# Tiers (docs/testing.md, "Tiers"): `pytest -m unit` runs in seconds. A file is `unit` when it is under tests/unit/
# (no server, no event loop beyond the test's own), `replicas` when it starts several agent processes, `socket`
# when it serves on a real port or starts a process (uvicorn, node, Chromium, redis-server, Postgres), and `asgi`
# otherwise (an app driven in-process through its ASGI callable).
TIERS: dict[str, frozenset[str]] = {
    "unit": frozenset({"test_public_api.py", "unit/", "test_a2ui.py", "test_mcp_skills_units.py"}),
    "replicas": frozenset(
        {
            "state/test_shared.py",
            "faults/",
            "test_durable_acks.py",
            "test_store_faults.py",
            "test_durable_acks_workers.py",
            "test_a2a_recovery.py",
            "test_postgres_replicas.py",
            "test_agui_recovery.py",
            "test_cli_executions.py",
            "test_durable_sleep_restart.py",
            "test_a2a_replicas.py",
            "test_agui_replicas.py",
            "test_auth_faces.py",
            "test_auth_sessions.py",
            "test_journal_replicas.py",
            "test_mcp_replicas.py",
            "test_scale_out.py",
            "test_shared_safety.py",
        }
    ),
    "socket": frozenset(
        {
            "bridges/test_a2a_bridge.py",
            "bridges/test_a2a_cancel.py",
            "bridges/test_a2a03_bridge.py",
            "bridges/test_a2a_faults.py",
            "bridges/test_mcp_cuts.py",
            "test_mcp_resume.py",
            "regressions/test_mcp_rejected.py",
            "bridges/test_acceptance.py",
            "bridges/test_faces.py",
            "bridges/test_mcp_connections.py",
            "bridges/test_peers.py",
            "test_example_bridges.py",
            "test_auth_flow.py",
            "test_mcp_tasks.py",
            "test_code_quality.py",
            "test_a2ui_faces.py",
            "test_a2ui_page.py",
            "test_mcp_apps_browser.py",
            "test_stdio.py",
            "test_stdio_inspector.py",
            "bridges/test_clients.py",
            "bridges/test_mcp_apps_peer.py",
            "bridges/test_mcp_bridge.py",
            "conformance/test_conformance.py",
            "regressions/test_hooks_deadlines_sync.py",
            "regressions/test_mcp_tasks_hostile.py",
            "state/test_open.py",
            "state/test_postgres.py",
            "state/test_sqlite_processes.py",
            "test_a2a_client.py",
            "test_a2a_js_client.py",
            "test_a2a_text_clients.py",
            "regressions/test_a2a_answers.py",
            "regressions/test_a2a_hostile_review.py",
            "regressions/test_a2a_review_fixes.py",
            "regressions/test_a2a_answer_fixes.py",
            "regressions/test_a2a_answers_replicas.py",
            "test_a2a_third_party.py",
            "regressions/test_a2a_streams.py",
            "test_a2a_messages.py",
            "test_a2a_push.py",
            "test_agui_client.py",
            "test_agui_wire.py",
            "test_auth_edges.py",
            "test_auth_example.py",
            "test_auth_gaps.py",
            "test_auth_hostile.py",
            "test_auth_http_level.py",
            "test_bridges_hostile.py",
            "test_cli.py",
            "test_cors_browser.py",
            "test_example_page.py",
            "test_framing.py",
            "test_hostile_bodies.py",
            "test_identify_dependency.py",
            "test_json_schema_2020.py",
            "test_mcp_cancellation.py",
            "test_mcp_clients.py",
            "test_mcp_context.py",
            "test_mcp_streams.py",
            "test_observability_bounds.py",
            "test_observability_bridges.py",
            "test_observability_example.py",
            "test_observability_hooks.py",
            "test_observability_stages.py",
            "test_observability_traces.py",
            "test_repository.py",
            "test_roots_ambiguous.py",
            "test_safety.py",
            "test_shutdown.py",
            "test_sync_tools.py",
        }
    ),
}


def tier_of(path: Path) -> str:
    relative = path.relative_to(Path(__file__).parent).as_posix()
    for tier, files in TIERS.items():
        if relative in files or any(relative.startswith(f) for f in files if f.endswith("/")):
            return tier
    return "asgi"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        item.add_marker(tier_of(Path(str(item.path))))


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
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off", **options)
    )  # type: ignore[arg-type]
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
