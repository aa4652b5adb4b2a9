"""The one piece of the corpus apps that is not an ordinary FastAPI app: how each exposes its routes to agents.

``decorator``: the handlers carry ``@tool`` (some ``@skill`` too) and the agent includes the app. ``bulk``: the
handlers carry nothing, and the agent serves the app's routes picked by a ``RouteSelection``.
"""

from __future__ import annotations

import os
import sqlite3
import sys
import tempfile
from collections.abc import Callable, Iterator
from typing import Any, Literal, TypeVar

from fastapi import FastAPI, Request

from agentmw import Agent, AgentMiddleware, RouteSelection, skill, tool

__all__ = [
    "ALL_METHODS",
    "Exposure",
    "app_factory",
    "as_skill",
    "as_tool",
    "attach_agent",
    "connect",
    "database_of",
]

Exposure = Literal["decorator", "bulk"]
F = TypeVar("F", bound=Callable[..., Any])
ALL_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")


def as_tool(exposure: Exposure) -> Callable[[F], F]:
    """``@tool`` in the decorator build, nothing in the bulk one (bulk exposure serves undecorated routes)."""
    return tool if exposure == "decorator" else _unmarked  # type: ignore[return-value]


def as_skill(exposure: Exposure) -> Callable[[F], F]:
    return skill if exposure == "decorator" else _unmarked  # type: ignore[return-value]


def _unmarked(fn: F) -> F:
    return fn


def attach_agent(app: FastAPI, name: str, exposure: Exposure, exclude: tuple[str, ...] = ()) -> Agent:
    """The agent of ``app`` as its exposure says, served by ``AgentMiddleware``."""
    if exposure == "decorator":
        agent = Agent(name, include=[app])
    else:
        agent = Agent(name, include=[app], routes=RouteSelection(methods=ALL_METHODS, exclude=exclude))
    app.add_middleware(AgentMiddleware, agent=agent)
    return agent


def database_of(app: FastAPI, init: Callable[[str], None]) -> str:
    """The app's SQLite file: the one it was made with, else a seeded one in a fresh temporary folder."""
    path: str | None = getattr(app.state, "database", None)
    if path is None:
        path = os.path.join(tempfile.mkdtemp(prefix="agentmw-corpus-"), "app.db")
        init(path)
        app.state.database = path
    return path


def connect(request: Request, init: Callable[[str], None]) -> Iterator[sqlite3.Connection]:
    """A session per request; a handler commits what it writes (as with SQLModel's ``session.commit()``), and
    what it did not commit is dropped when the session closes."""
    connection = sqlite3.connect(database_of(request.app, init), check_same_thread=False)
    connection.row_factory = sqlite3.Row
    try:
        yield connection
    finally:
        connection.close()


AppFactory = Callable[..., FastAPI]


def app_factory(
    create_api: Callable[[Exposure, str | None], FastAPI], build_agent: Callable[[FastAPI, Exposure], Agent]
) -> tuple[AppFactory, Callable[[str], Any]]:
    """A corpus module's ``create_app(exposure, database)`` (the app and its agent), and a module ``__getattr__``
    that builds its ``app`` on first use (``uvicorn tests.apps.shop:app``), so that importing it builds nothing."""

    def create_app(exposure: Exposure = "decorator", database: str | None = None) -> FastAPI:
        app = create_api(exposure, database)
        build_agent(app, exposure)
        return app

    def module_getattr(name: str) -> Any:
        if name != "app":
            raise AttributeError(name)
        created = create_app()
        sys.modules[create_api.__module__].app = created
        return created

    return create_app, module_getattr
