"""``agentmw serve``: uvicorn, in one process or several workers that share the agent's state store."""

from __future__ import annotations

import os
from typing import Any

from .target import Target, resolve

__all__ = ["TARGET_ENV", "serve", "store_of", "worker_app"]

TARGET_ENV = "AGENTMW_SERVE_TARGET"
"""How ``agentmw serve --workers N`` tells each worker what to serve (workers import :func:`worker_app`)."""


def store_of(target: Target) -> str:
    """The state store the agent will open: the one it names, else ``$AGENTMW_STORE``, else the SQLite default."""
    spec = target.agent.store_spec
    return spec if isinstance(spec, str) else f"{type(spec).__name__} (given in code)"


def worker_app() -> Any:
    """The ASGI app of one worker (uvicorn calls it as a factory in each worker process)."""
    spec = os.environ.get(TARGET_ENV)
    if not spec:
        raise RuntimeError(
            f"{TARGET_ENV} is not set: start workers with `agentmw serve module:app --workers N`"
        )
    return resolve(spec).app


def serve(target: Target, *, host: str, port: int, workers: int, log_level: str) -> None:
    import uvicorn

    if workers > 1:
        # uvicorn starts workers as new processes, which need an import string: each resolves the target again
        os.environ[TARGET_ENV] = target.spec
        uvicorn.run(
            "agentmw.cli.serve:worker_app",
            factory=True,
            host=host,
            port=port,
            workers=workers,
            log_level=log_level,
            lifespan="auto",
        )
    else:
        uvicorn.run(target.app, host=host, port=port, log_level=log_level, lifespan="auto")
