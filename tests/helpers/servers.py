"""An app served by uvicorn on a real loopback socket, in a thread of this process."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import uvicorn

from tests.waiting import wait_until


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def serving(app: object, port: int | None = None, **options: object) -> Iterator[tuple[str, uvicorn.Server]]:
    """Serve ``app`` on ``port`` (a free one by default); yields its base URL and the server (whose open
    connections a test can watch). ``options`` go to ``uvicorn.Config`` (``ssl_certfile=`` and ``ssl_keyfile=`` serve HTTPS)."""
    port = port or free_port()
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off", **options)  # type: ignore[arg-type]
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        wait_until(lambda: server.started or not thread.is_alive(), "uvicorn to start")
        if not server.started:
            raise RuntimeError("uvicorn did not start")
        yield f"{'https' if options.get('ssl_certfile') else 'http'}://127.0.0.1:{port}", server
    finally:
        server.should_exit = True
        thread.join(timeout=10)
