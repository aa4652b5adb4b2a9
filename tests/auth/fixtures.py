"""The fixtures the auth tests share: the authorization server and the protected agent, each on a real socket."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.auth.app import build
from tests.auth.server import AuthServer
from tests.conftest import serve

__all__ = ["agent_url", "auth_server"]


@pytest.fixture(scope="module")
def auth_server() -> Iterator[AuthServer]:
    server = AuthServer()
    with serve(server.app) as url:
        server.set_issuer(url)
        yield server


@pytest.fixture(scope="module")
def agent_url(auth_server: AuthServer) -> Iterator[str]:
    with serve(build(auth_server.issuer)) as url:
        yield url
