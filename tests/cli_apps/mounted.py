"""The demo agent mounted under a prefix of a plain Starlette app, beside a route of the app's own."""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Mount, Route

from tests.cli_apps.demo_app import build


def _home(request: object) -> PlainTextResponse:
    return PlainTextResponse("home")


agent, _ = build()
app = Starlette(routes=[Route("/", _home), Mount("/agent", app=agent.asgi())])
