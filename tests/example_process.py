"""The example app (examples/fastapi_app) in its own ``uvicorn`` process, configured by environment as a user would
run it: ``AGENTMW_EXAMPLE_ISSUER``, ``LEGAL_REVIEW_URL``, ``SUPPLIER_CATALOG_URL``... (examples/fastapi_app/README.md).

It serves ``tests.replicas:example_app``: the example as it is, plus a ``x-agentmw-replica: <index>-<pid>``
header on every response, so a test can tell which worker process answered.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.conftest import free_port
from tests.replicas import REPLICA_HEADER, Replica, replica_env

__all__ = ["REPLICA_HEADER", "example_process"]


@contextmanager
def example_process(
    folder: Path, env: dict[str, str], *, store: str = "memory://", workers: int = 1
) -> Iterator[str]:
    """Start the example with ``env`` added to a clean environment (``uvicorn --workers`` when ``workers > 1``);
    yields its base URL once ``/health`` answers, and stops it (SIGTERM, then SIGKILL) after."""
    folder.mkdir(parents=True, exist_ok=True)
    base = replica_env(
        folder,
        store=store,
        index=0,
        secret="example-secret" if workers > 1 else None,
        effects=folder / "effects.jsonl",
    )
    base = {k: v for k, v in base.items() if k not in ("LEGAL_REVIEW_URL", "SUPPLIER_CATALOG_URL")}
    replica = Replica(0, free_port(), {**base, **env}, folder, workers=workers)
    try:
        replica.start()
        yield replica.url
    finally:
        replica.stop()
