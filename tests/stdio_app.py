"""A small FastAPI service served by ``agentmw stdio`` in tests/test_stdio.py: what an existing app already has
(a lifespan that opens its resources, a middleware filling ``request.state``, a bearer-token dependency of its
own), plus capabilities that stream progress, ask a question, print to stdout, take long and route by header.

``STDIO_APP_MARKER``: a file the lifespan writes ``started`` to at startup and ``stopped`` at shutdown.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated, Any

from fastapi import Depends, FastAPI, HTTPException, Request
from pydantic import Field

from agentmw import Agent, AgentMiddleware, Context, PromptMessage, prompt, resource, tool

TOKEN = "s3cret-stdio-token"
NOTES = {"welcome": "Hello from the notes store.", "todo": "Ship the stdio bridge."}


def _mark(text: str) -> None:
    marker = os.environ.get("STDIO_APP_MARKER")
    if marker:
        with open(marker, "a", encoding="utf-8") as file:
            file.write(text + "\n")


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[dict[str, Any]]:
    print("lifespan: opening the notes store")  # stray output: must land on stderr, not on the wire
    _mark("started")
    yield {"store": "notes-db"}
    _mark("stopped")


app = FastAPI(title="Notes", lifespan=lifespan)


@app.middleware("http")
async def tenant(request: Request, call_next: Any) -> Any:
    request.state.tenant = request.headers.get("x-tenant", "public")
    return await call_next(request)


def bearer(request: Request) -> str:
    """The app's own auth dependency: a bearer token it knows, else 401."""
    if request.headers.get("authorization") != f"Bearer {TOKEN}":
        raise HTTPException(status_code=401, detail="a valid bearer token is needed")
    return "notes-admin"


@app.get("/whoami")
@tool(read_only=True, title="Who am I")
async def whoami(request: Request, user: Annotated[str, Depends(bearer)]) -> dict[str, str]:
    """Who the service thinks is calling, the tenant its middleware saw and the store its lifespan opened."""
    return {"user": user, "tenant": request.state.tenant, "store": request.state.store}


@app.get("/notes/{name}")
@tool(read_only=True)
@resource("notes://{name}", mime_type="text/plain")
async def read_note(name: str) -> str:
    """One note by name, such as "welcome".

    Args:
        name: the note's name.
    """
    if name not in NOTES:
        raise HTTPException(status_code=404, detail=f"no note {name!r}")
    return NOTES[name]


@tool(idempotent=True)
async def edit_note(name: str, text: str) -> str:
    """Replace a note's text; clients subscribed to it are told.

    Args:
        name: the note.
        text: its new text.
    """
    NOTES[name] = text
    agent.resource_updated(f"notes://{name}")
    return "saved"


@tool(read_only=True)
async def count(to: int, ctx: Context) -> int:
    """Count up to ``to``, reporting progress at every step; prints and logs as it goes.

    Args:
        to: where to stop, at most 20.
    """
    for step in range(1, min(to, 20) + 1):
        print(f"counting {step}")  # a careless print in a tool: must not corrupt the wire
        logging.getLogger("tests.stdio_app").warning("step %d", step)
        await ctx.progress(step, to, f"step {step}")
        await asyncio.sleep(0.01)
    sys.stdout.flush()
    return to


@tool(destructive=True, idempotent=True)
async def delete_note(name: str, ctx: Context) -> str:
    """Delete a note, after the person confirms.

    Args:
        name: the note to delete.
    """
    answer = await ctx.ask(
        f"Delete the note {name!r}?",
        {"type": "object", "properties": {"confirm": {"type": "boolean"}}, "required": ["confirm"]},
    )
    if answer.accepted and (answer.content or {}).get("confirm") is True:
        NOTES.pop(name, None)
        return f"deleted {name}"
    return f"kept {name}"


@tool(read_only=True)
async def regional(
    region: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})], text: str
) -> str:
    """Echo ``text`` as seen from ``region`` (the region travels as an Mcp-Param-Region header in 2026).

    Args:
        region: where to answer from, such as "eu-west" or "São Paulo".
        text: what to echo.
    """
    return f"{region}: {text}"


@tool(read_only=True)
async def wait(seconds: float) -> str:
    """Wait, then answer; for cancelling.

    Args:
        seconds: how long to wait.
    """
    await asyncio.sleep(seconds)
    return "waited"


@prompt()
def summarize(name: str) -> list[PromptMessage]:
    """Ask for a summary of a note.

    Args:
        name: the note.
    """
    return [PromptMessage("user", f"Summarize the note {name}: {NOTES.get(name, '')}")]


agent = Agent(
    "notes",
    "1.0.0",
    include=[app, count, delete_note, edit_note, regional, wait, summarize],
)
app.add_middleware(AgentMiddleware, agent=agent)
