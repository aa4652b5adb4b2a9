"""A route exposed to agents behaves exactly as over HTTP (issue 21): the differential over ``tests/apps/``.

Every route of every corpus app, exposed by decorator and in bulk, gets a table of requests (valid, invalid
arguments, anonymous, a non-admin or a token without the scope, another user's object). Each is sent over plain
HTTP (the reference) and through each face: MCP ``tools/call`` in the handshake era and in the stateless era, and
for a ``@skill`` route A2A ``SendMessage`` and an AG-UI run. The outcome class, the data, the detail, the
challenge, ``Retry-After`` and what the request left in the app's database must match
(``tests/apps/differential.py`` defines each). One test per (app, exposure, route, request, face), so a failure
names exactly what differs.

The mutation tests at the end break one dependency or one ``response_model`` on the agent's copy of an app
only, and check that the differential reports it: it cannot pass by comparing nothing.
"""

from __future__ import annotations

import itertools
import shutil
import tempfile
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from types import ModuleType
from typing import Any
from uuid import UUID

import httpx
import jwt
import pytest
from fastapi import FastAPI
from fastapi.routing import APIRoute

from tests.apps import fullstack
from tests.apps.differential import BASE_URL, Case, Observed, Route, compare, dump_database, observe
from tests.waiting import eventually

EXPOSURES = ("decorator", "bulk")
MCP_FACES = ("mcp-2025", "mcp-2026")
SKILL_FACES = ("a2a", "agui")
Identities = Callable[[FastAPI], Awaitable[dict[str, dict[str, str]]]]


@dataclass
class CorpusApp:
    """A corpus app, its callers, and the table of requests for each of its routes."""

    module: ModuleType
    identities: Identities
    routes: list[tuple[Route, list[Case]]]


# --- callers --------------------------------------------------------------------------------------------

async def fullstack_identities(app: FastAPI) -> dict[str, dict[str, str]]:
    """Real tokens from the app's own login route; a token signed with another key; an inactive user's."""
    bearer: dict[str, dict[str, str]] = {}
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE_URL) as client:
        for who, email in [("admin", "admin@example.com"), ("alice", "alice@example.com"),
                           ("bob", "bob@example.com")]:
            response = await client.post("/api/v1/login/access-token",
                                         data={"username": email, "password": fullstack.PASSWORDS[email]})
            response.raise_for_status()
            bearer[who] = {"authorization": f"Bearer {response.json()['access_token']}"}
    forged = jwt.encode({"sub": str(fullstack.ADMIN_ID), "exp": datetime.now(timezone.utc) + timedelta(hours=1)},
                        "not-the-secret-but-as-long-as-one-is", algorithm="HS256")
    bearer["forged"] = {"authorization": f"Bearer {forged}"}
    bearer["inactive"] = {"authorization": f"Bearer {fullstack.create_access_token(str(fullstack.INACTIVE_ID))}"}
    return bearer


# --- the tables -----------------------------------------------------------------------------------------

V1 = "/api/v1"
NEW_USER = {"email": "new@example.com", "password": "new-password-1", "full_name": "New Person"}
NOBODY = "00000000-0000-4000-8000-00000000dead"

FULLSTACK = CorpusApp(fullstack, fullstack_identities, [
    (Route("GET", f"{V1}/users/", "read_users"), [
        Case("admin", "admin", query={"skip": 0, "limit": 2}),
        Case("non-admin", "alice"),
        Case("anonymous"),
        Case("forged-token", "forged"),
        Case("invalid-limit", "admin", query={"limit": "many"}),
    ]),
    (Route("POST", f"{V1}/users/", "create_user", body="user_in"), [
        Case("admin", "admin", body=NEW_USER),
        Case("non-admin", "alice", body={**NEW_USER, "is_superuser": True}),
        Case("anonymous", body={**NEW_USER, "is_superuser": True}),
        Case("short-password", "admin", body={**NEW_USER, "password": "short"}),
        Case("existing-email", "admin", body={**NEW_USER, "email": "bob@example.com"}),
    ]),
    (Route("GET", f"{V1}/users/me", "read_user_me"), [
        Case("alice", "alice"),
        Case("anonymous"),
        Case("forged-token", "forged"),
        Case("inactive", "inactive"),
    ]),
    (Route("PATCH", f"{V1}/users/me", "update_user_me", body="user_in"), [
        Case("alice", "alice", body={"full_name": "Alice Liddell"}),
        Case("email-taken", "alice", body={"email": "bob@example.com"}),
        Case("anonymous", body={"full_name": "Mallory"}),
        Case("invalid-email", "alice", body={"email": "not-an-email"}),
    ]),
    (Route("GET", f"{V1}/users/{{user_id}}", "read_user_by_id"), [
        Case("own", "alice", path={"user_id": str(fullstack.ALICE_ID)}),
        Case("another-user", "alice", path={"user_id": str(fullstack.BOB_ID)}),
        Case("admin", "admin", path={"user_id": str(fullstack.BOB_ID)}),
        Case("admin-unknown", "admin", path={"user_id": NOBODY}),
        Case("anonymous", path={"user_id": str(fullstack.BOB_ID)}),
        Case("not-a-uuid", "alice", path={"user_id": "alice"}),
    ]),
    (Route("DELETE", f"{V1}/users/{{user_id}}", "delete_user"), [
        Case("admin", "admin", path={"user_id": str(fullstack.BOB_ID)}),
        Case("non-admin", "alice", path={"user_id": str(fullstack.BOB_ID)}),
        Case("anonymous", path={"user_id": str(fullstack.BOB_ID)}),
        Case("admin-self", "admin", path={"user_id": str(fullstack.ADMIN_ID)}),
        Case("admin-unknown", "admin", path={"user_id": NOBODY}),
    ]),
    (Route("GET", f"{V1}/items/", "read_items"), [
        Case("alice", "alice"),
        Case("admin", "admin", query={"limit": 1, "skip": 1}),
        Case("anonymous"),
        Case("invalid-skip", "alice", query={"skip": "first"}),
    ]),
    (Route("GET", f"{V1}/items/{{id}}", "read_item"), [
        Case("own", "alice", path={"id": str(fullstack.ALICE_ITEM)}),
        Case("another-user", "alice", path={"id": str(fullstack.BOB_ITEM)}),
        Case("admin-unknown", "admin", path={"id": NOBODY}),
        Case("anonymous", path={"id": str(fullstack.ALICE_ITEM)}),
        Case("not-a-uuid", "alice", path={"id": "laptop"}),
    ]),
    (Route("POST", f"{V1}/items/", "create_item", body="item_in", skill=True), [
        Case("alice", "alice", body={"title": "Alice's phone", "description": "with a crack"}),
        Case("anonymous", body={"title": "Mallory's item"}),
        Case("empty-title", "alice", body={"title": ""}),
    ]),
    (Route("PUT", f"{V1}/items/{{id}}", "update_item", body="item_in"), [
        Case("own", "alice", path={"id": str(fullstack.ALICE_ITEM)}, body={"title": "Alice's old laptop"}),
        Case("another-user", "bob", path={"id": str(fullstack.ALICE_ITEM)}, body={"title": "mine now"}),
        Case("anonymous", path={"id": str(fullstack.ALICE_ITEM)}, body={"title": "mine now"}),
        Case("unknown", "alice", path={"id": NOBODY}, body={"title": "x"}),
    ]),
    (Route("DELETE", f"{V1}/items/{{id}}", "delete_item"), [
        Case("own", "alice", path={"id": str(fullstack.ALICE_ITEM)}),
        Case("another-user", "bob", path={"id": str(fullstack.ALICE_ITEM)}),
        Case("anonymous", path={"id": str(fullstack.ALICE_ITEM)}),
    ]),
    (Route("POST", f"{V1}/utils/test-email/", "test_email"), [
        Case("admin", "admin", query={"email_to": "ops@example.com"}),
        Case("non-admin", "alice", query={"email_to": "ops@example.com"}),
        Case("anonymous", query={"email_to": "ops@example.com"}),
        Case("invalid-email", "admin", query={"email_to": "ops"}),
    ]),
    (Route("GET", f"{V1}/utils/health-check/", "health_check"), [
        Case("anonymous"),
    ]),
])

CORPUS = {"fullstack": FULLSTACK}


# --- building each app once -----------------------------------------------------------------------------

@dataclass
class Built:
    """One corpus app with its agent, its database file and a seeded copy to reset it from."""

    module: ModuleType
    app: FastAPI | None
    database: str
    template: str
    error: str | None = None
    headers: dict[str, dict[str, str]] = field(default_factory=dict)
    ids: Iterator[int] = field(default_factory=itertools.count)

    def reset(self) -> None:
        """A fresh database and fresh id and clock sequences: every exchange starts from the same state."""
        shutil.copyfile(self.template, self.database)
        counter = itertools.count(1)
        self.module.new_id = lambda: UUID(int=0xC0FFEE << 64 | next(counter))  # type: ignore[attr-defined]
        if hasattr(self.module, "utc_now"):
            self.module.utc_now = lambda: datetime(2026, 5, 4, 12, 0, tzinfo=timezone.utc)  # type: ignore[attr-defined]


_built: dict[tuple[str, str], Built] = {}
_references: dict[tuple[str, str, str, str], tuple[Observed, dict[str, Any]]] = {}
_folder = Path(tempfile.mkdtemp(prefix="agentmw-fidelity-"))


async def build(name: str, exposure: str, mutate: Callable[[FastAPI], None] | None = None) -> Built:
    """The app ``name`` as ``exposure`` exposes it; ``mutate`` changes the plain app before the agent is built."""
    key = (name, exposure)
    if mutate is None and key in _built:
        return _built[key]
    module = CORPUS[name].module
    folder = Path(tempfile.mkdtemp(dir=_folder))
    template, database = str(folder / "seed.db"), str(folder / "app.db")
    module.init_db(template)
    shutil.copyfile(template, database)
    built = Built(module, None, database, template)
    login_database = str(folder / "login.db")
    shutil.copyfile(template, login_database)
    built.headers = await CORPUS[name].identities(module.create_api(exposure, login_database))  # a plain copy
    api = module.create_api(exposure, database)
    try:
        if mutate is not None:
            mutate(api)
        module.build_agent(api, exposure)
        built.app = api
    except Exception as exc:  # the agent refused to start: every case of this app reports it
        built.error = f"{type(exc).__name__}: {exc}"
    if mutate is None:
        _built[key] = built
    return built


async def exchange(built: Built, face: str, route: Route, case: Case) -> tuple[Observed, dict[str, Any]]:
    built.reset()
    headers = built.headers[case.who] if case.who else {}
    observed = await observe(built.app, face, route, case, headers)
    return observed, dump_database(built.database)


async def reference(built: Built, name: str, exposure: str, route: Route, case: Case) -> tuple[Observed, dict]:
    key = (name, exposure, str(route), case.name)
    if key not in _references:
        _references[key] = await exchange(built, "http", route, case)
    return _references[key]


async def differences(reference_app: Built, subject: Built, face: str, route: Route, case: Case,
                      http: tuple[Observed, dict[str, Any]] | None = None) -> tuple[list[str], Observed, Observed]:
    """What ``subject``'s agent answers through ``face`` that differs from ``reference_app`` over HTTP."""
    expected, expected_rows = http or await exchange(reference_app, "http", route, case)
    observed, rows = await exchange(subject, face, route, case)
    findings = compare(expected, observed, case)
    if rows != expected_rows:
        try:  # a background task may still be writing: give it a bounded moment, then compare again
            await eventually(lambda: dump_database(subject.database) == expected_rows, "the same side effects",
                             timeout=0.5)
        except AssertionError:
            changed = sorted(t for t in set(rows) | set(expected_rows) if rows.get(t) != expected_rows.get(t))
            findings.append(f"SIDE_EFFECTS: the database differs from HTTP's in {', '.join(changed)}")
    return findings, expected, observed


# --- the differential -----------------------------------------------------------------------------------

def _cases() -> Iterator[Any]:
    for name, corpus in CORPUS.items():
        for route, cases in corpus.routes:
            for case, exposure in itertools.product(cases, EXPOSURES):
                faces = MCP_FACES + (SKILL_FACES if route.skill and exposure == "decorator" else ())
                for face in faces:
                    yield pytest.param(name, exposure, route, case, face,
                                       id=f"{name}-{exposure}-{route.method} {route.path}-{case.name}-{face}")


@pytest.mark.parametrize(("name", "exposure", "route", "case", "face"), list(_cases()))
async def test_a_route_answers_an_agent_as_it_answers_http(name: str, exposure: str, route: Route, case: Case,
                                                           face: str) -> None:
    built = await build(name, exposure)
    if built.error is not None:
        pytest.fail(f"{name} ({exposure}): the agent refused to start: {built.error}", pytrace=False)
    http = await reference(built, name, exposure, route, case)
    findings, expected, observed = await differences(built, built, face, route, case, http)
    assert not findings, (
        f"{name} ({exposure}) {route} [{case.name}] via {face}:\n  HTTP:  {expected.summary()}\n"
        f"  {face}: {observed.summary()}\n  " + "\n  ".join(findings))
