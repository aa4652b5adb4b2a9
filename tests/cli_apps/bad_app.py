"""An agent that breaks every lint rule once, each capability (nearly) one rule, and one clean tool beside them."""

from __future__ import annotations

import pathlib
from typing import Annotated

from fastapi import Depends, FastAPI, Header

from agentmw import Agent, AgentMiddleware, RouteSelection, skill, tool
from agentmw.safety import human_gate

app = FastAPI()


def token(authorization: Annotated[str | None, Header()] = None) -> str:
    return authorization or ""


@tool(read_only=True, open_world=False)
async def clean(a: int) -> int:
    """Double a number.

    Summary:
        Doubles numbers; the one capability here that breaks no rule.
    """
    return 2 * a


@tool(read_only=True, open_world=False)
async def undocumented(a: int) -> int:  # AMW001
    return a


@tool(read_only=True, open_world=False)
async def no_summary(a: int) -> int:  # AMW002 (a warning for a tool)
    """Return the number it is given."""
    return a


@skill
async def skill_without_summary(text: str) -> str:  # AMW002 (an error for a skill)
    """Answer a message."""
    return text


@tool(read_only=True, open_world=False)
async def same_words(a: int) -> int:  # AMW003
    """Return the number.

    Summary:
        Return the number.
    """
    return a


@tool(open_world=False)
async def delete_records(table: str) -> int:  # AMW004
    """Delete every record of a table.

    Summary:
        Empties a table.
    """
    return 0


@tool(open_world=False)
@human_gate(side_effects="Deletes records")
async def gated_delete(table: str) -> int:  # not AMW004: gated
    """Delete the records of a table, once a person approves.

    Summary:
        Empties a table, with approval.
    """
    return 0


@tool(read_only=True, open_world=True)
async def fetch_page(address: str) -> str:  # AMW005 (error: open world)
    """Fetch a web page and return its text.

    Summary:
        Reads pages from the web.
    """
    return ""


@tool(read_only=True)
async def shout(text: str) -> str:  # AMW005 (warning: text of unknown origin)
    """Return the text in capitals.

    Summary:
        Makes text loud.
    """
    return text.upper()


@tool(read_only=True, open_world=False)
async def read_file(location: pathlib.Path) -> int:  # AMW006 (error)
    """Return the size of a file.

    Summary:
        Measures files.
    """
    return 0


@tool(read_only=True, open_world=False)
async def open_document(filename: str) -> int:  # AMW006 (warning: the name says path)
    """Return the size of a document.

    Summary:
        Measures documents.
    """
    return 0


@tool(
    read_only=True,
    open_world=False,
    contract="Return the number. " + "This sentence pads the contract. " * 40,
    summary="Pads contracts.",
)
async def wordy(a: int) -> int:  # AMW007
    return a


@tool(read_only=True, open_world=False)
async def untyped(a: int):  # AMW008
    """Return the number, with no declared type.

    Summary:
        Returns numbers untyped.
    """
    return a


@tool(name="get_user", read_only=True, open_world=False)
async def get_user_a(a: int) -> int:  # AMW009 (error: collides with get-user)
    """Return a user id.

    Summary:
        Finds users.
    """
    return a


@tool(name="get-user", read_only=True, open_world=False)
async def get_user_b(a: int) -> int:  # AMW009 (error)
    """Return a user id, again.

    Summary:
        Finds users again.
    """
    return a


@tool(name="read_item_items__item_id__get", read_only=True, open_world=False)
async def generated(item_id: int) -> int:  # AMW009 (warning: looks generated)
    """Return an item id.

    Summary:
        Looks up items.
    """
    return item_id


@skill(tools=(clean,))
async def doubled(a: int) -> int:  # AMW010
    """Double a number, as a skill.

    Summary:
        Doubles numbers for other agents.
    """
    return 2 * a


@app.get("/reports/{report_id}")
async def get_report(report_id: int) -> dict[str, int]:  # AMW011: exposed in bulk, undecorated
    return {"id": report_id}


@app.get("/secure/{key}", dependencies=[Depends(token)])
@tool(read_only=True, open_world=False)
async def secure_lookup(key: str) -> str:  # was AMW012: its route's dependency now runs for agent calls
    """Look up a secret by key.

    Summary:
        Reads secrets.
    """
    return key


agent = Agent(
    "bad",
    include=[
        app,
        clean,
        undocumented,
        no_summary,
        skill_without_summary,
        same_words,
        delete_records,
        gated_delete,
        fetch_page,
        shout,
        read_file,
        open_document,
        wordy,
        untyped,
        get_user_a,
        get_user_b,
        generated,
        doubled,
    ],
    routes=RouteSelection(paths="/reports/*"),
)
app.add_middleware(AgentMiddleware, agent=agent)

EXPECTED = {
    ("AMW001", "error", "undocumented"),
    ("AMW002", "warning", "no_summary"),
    ("AMW002", "error", "skill_without_summary"),
    ("AMW003", "error", "same_words"),
    ("AMW004", "error", "delete_records"),
    ("AMW005", "error", "fetch_page"),
    ("AMW005", "warning", "shout"),
    ("AMW006", "error", "read_file"),
    ("AMW006", "warning", "open_document"),
    ("AMW007", "warning", "wordy"),
    ("AMW008", "error", "untyped"),
    ("AMW009", "error", "get-user"),
    ("AMW009", "warning", "read_item_items__item_id__get"),
    ("AMW010", "error", "doubled"),
    ("AMW011", "warning", "get_report"),
    ("AMW002", "warning", "get_report"),  # a route exposed in bulk has no summary of its own either
}
"""Every (code, level, capability) ``agentmw lint`` must report for this app, and nothing else."""
