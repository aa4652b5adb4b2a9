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

import functools
import itertools
import logging
import shutil
import tempfile
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType
from typing import Any
from uuid import UUID

import httpx
import jwt
import pytest
from fastapi import FastAPI
from fastapi.routing import APIRoute

from agentmw import RegistrationError, tool
from tests.apps import fullstack, projects, shop
from tests.apps.differential import BASE_URL, EMBED, Case, Observed, Route, compare, dump_database, observe
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
        for who, email in [
            ("admin", "admin@example.com"),
            ("alice", "alice@example.com"),
            ("bob", "bob@example.com"),
        ]:
            response = await client.post(
                "/api/v1/login/access-token", data={"username": email, "password": fullstack.PASSWORDS[email]}
            )
            response.raise_for_status()
            bearer[who] = {"authorization": f"Bearer {response.json()['access_token']}"}
    forged = jwt.encode(
        {"sub": str(fullstack.ADMIN_ID), "exp": datetime.now(UTC) + timedelta(hours=1)},
        "not-the-secret-but-as-long-as-one-is",
        algorithm="HS256",
    )
    bearer["forged"] = {"authorization": f"Bearer {forged}"}
    bearer["inactive"] = {
        "authorization": f"Bearer {fullstack.create_access_token(str(fullstack.INACTIVE_ID))}"
    }
    return bearer


async def projects_identities(app: FastAPI) -> dict[str, dict[str, str]]:
    """Tokens with each scope set, the tenant header the app's middleware reads, an old client."""

    def bearer(tenant: str, *scopes: str, header: str | None = None) -> dict[str, str]:
        token = projects.issue_token(f"{tenant}-user", tenant, list(scopes))
        return {"authorization": f"Bearer {token}", "x-tenant": header or tenant}

    return {
        "reader": bearer("acme", "projects:read"),
        "writer": bearer("acme", "projects:read", "projects:write"),
        "admin": bearer("acme", "projects:read", "projects:write", "admin"),
        "globex": bearer("globex", "projects:read"),
        "crossing": bearer("acme", "projects:read", header="globex"),
        "no-tenant": {"authorization": bearer("acme", "projects:read", "projects:write")["authorization"]},
        "old-client": {**bearer("acme", "projects:read"), "x-client-version": "1.4"},
        "forged": {"authorization": "Bearer not.a.token", "x-tenant": "acme"},
        "anonymous": {"x-tenant": "acme"},
    }


async def shop_identities(app: FastAPI) -> dict[str, dict[str, str]]:
    key = shop.API_KEYS
    return {
        "alice": {"x-api-key": key["alice"], "cookie": f"cart_id={shop.CART_ALICE}"},
        "alice-no-cart": {"x-api-key": key["alice"]},
        "bob": {"x-api-key": key["bob"], "cookie": f"cart_id={shop.CART_ALICE}"},
        "staff": {"x-api-key": key["staff"]},
        "bad-key": {"x-api-key": "key-guessed"},
    }


# --- the tables -----------------------------------------------------------------------------------------

V1 = "/api/v1"
NEW_USER = {"email": "new@example.com", "password": "new-password-1", "full_name": "New Person"}
NOBODY = "00000000-0000-4000-8000-00000000dead"

FULLSTACK = CorpusApp(
    fullstack,
    fullstack_identities,
    [
        (
            Route("GET", f"{V1}/users/", "read_users"),
            [
                Case("admin", "admin", query={"skip": 0, "limit": 2}),
                Case("non-admin", "alice"),
                Case("anonymous"),
                Case("forged-token", "forged"),
                Case("invalid-limit", "admin", query={"limit": "many"}),
            ],
        ),
        (
            Route("POST", f"{V1}/users/", "create_user", body="user_in"),
            [
                Case("admin", "admin", body=NEW_USER),
                Case("non-admin", "alice", body={**NEW_USER, "is_superuser": True}),
                Case("anonymous", body={**NEW_USER, "is_superuser": True}),
                Case("short-password", "admin", body={**NEW_USER, "password": "short"}),
                Case("existing-email", "admin", body={**NEW_USER, "email": "bob@example.com"}),
            ],
        ),
        (
            Route("GET", f"{V1}/users/me", "read_user_me"),
            [
                Case("alice", "alice"),
                Case("anonymous"),
                Case("forged-token", "forged"),
                Case("inactive", "inactive"),
            ],
        ),
        (
            Route("PATCH", f"{V1}/users/me", "update_user_me", body="user_in"),
            [
                Case("alice", "alice", body={"full_name": "Alice Liddell"}),
                Case("email-taken", "alice", body={"email": "bob@example.com"}),
                Case("anonymous", body={"full_name": "Mallory"}),
                Case("invalid-email", "alice", body={"email": "not-an-email"}),
            ],
        ),
        (
            Route("GET", f"{V1}/users/{{user_id}}", "read_user_by_id"),
            [
                Case("own", "alice", path={"user_id": str(fullstack.ALICE_ID)}),
                Case("another-user", "alice", path={"user_id": str(fullstack.BOB_ID)}),
                Case("admin", "admin", path={"user_id": str(fullstack.BOB_ID)}),
                Case("admin-unknown", "admin", path={"user_id": NOBODY}),
                Case("anonymous", path={"user_id": str(fullstack.BOB_ID)}),
                Case("not-a-uuid", "alice", path={"user_id": "alice"}),
            ],
        ),
        (
            Route("DELETE", f"{V1}/users/{{user_id}}", "delete_user"),
            [
                Case("admin", "admin", path={"user_id": str(fullstack.BOB_ID)}),
                Case("non-admin", "alice", path={"user_id": str(fullstack.BOB_ID)}),
                Case("anonymous", path={"user_id": str(fullstack.BOB_ID)}),
                Case("admin-self", "admin", path={"user_id": str(fullstack.ADMIN_ID)}),
                Case("admin-unknown", "admin", path={"user_id": NOBODY}),
            ],
        ),
        (
            Route("GET", f"{V1}/items/", "read_items"),
            [
                Case("alice", "alice"),
                Case("admin", "admin", query={"limit": 1, "skip": 1}),
                Case("anonymous"),
                Case("invalid-skip", "alice", query={"skip": "first"}),
            ],
        ),
        (
            Route("GET", f"{V1}/items/{{id}}", "read_item"),
            [
                Case("own", "alice", path={"id": str(fullstack.ALICE_ITEM)}),
                Case("another-user", "alice", path={"id": str(fullstack.BOB_ITEM)}),
                Case("admin-unknown", "admin", path={"id": NOBODY}),
                Case("anonymous", path={"id": str(fullstack.ALICE_ITEM)}),
                Case("not-a-uuid", "alice", path={"id": "laptop"}),
            ],
        ),
        (
            Route("POST", f"{V1}/items/", "create_item", body="item_in", skill=True),
            [
                Case("alice", "alice", body={"title": "Alice's phone", "description": "with a crack"}),
                Case("anonymous", body={"title": "Mallory's item"}),
                Case("empty-title", "alice", body={"title": ""}),
            ],
        ),
        (
            Route("PUT", f"{V1}/items/{{id}}", "update_item", body="item_in"),
            [
                Case(
                    "own",
                    "alice",
                    path={"id": str(fullstack.ALICE_ITEM)},
                    body={"title": "Alice's old laptop"},
                ),
                Case(
                    "another-user", "bob", path={"id": str(fullstack.ALICE_ITEM)}, body={"title": "mine now"}
                ),
                Case("anonymous", path={"id": str(fullstack.ALICE_ITEM)}, body={"title": "mine now"}),
                Case("unknown", "alice", path={"id": NOBODY}, body={"title": "x"}),
            ],
        ),
        (
            Route("DELETE", f"{V1}/items/{{id}}", "delete_item"),
            [
                Case("own", "alice", path={"id": str(fullstack.ALICE_ITEM)}),
                Case("another-user", "bob", path={"id": str(fullstack.ALICE_ITEM)}),
                Case("anonymous", path={"id": str(fullstack.ALICE_ITEM)}),
            ],
        ),
        (
            Route("POST", f"{V1}/utils/test-email/", "test_email"),
            [
                Case("admin", "admin", query={"email_to": "ops@example.com"}),
                Case("non-admin", "alice", query={"email_to": "ops@example.com"}),
                Case("anonymous", query={"email_to": "ops@example.com"}),
                Case("invalid-email", "admin", query={"email_to": "ops"}),
            ],
        ),
        (
            Route("GET", f"{V1}/utils/health-check/", "health_check"),
            [
                Case("anonymous"),
            ],
        ),
    ],
)

ACME, EMPTY, GLOBEX = str(projects.ACME_PROJECT), str(projects.EMPTY_PROJECT), str(projects.GLOBEX_PROJECT)
NEW_PROJECT = {"name": "Giant magnet", "budget": 5000, "internal_notes": "try on roadrunner first"}

PROJECTS = CorpusApp(
    projects,
    projects_identities,
    [
        (
            Route("GET", "/projects", "list_projects", skill=True),
            [
                Case("reader", "reader"),
                Case("second-page", "reader", query={"page": 2, "size": 1}),
                Case("page-too-big", "reader", query={"size": 500}),
                Case("anonymous", "anonymous"),
                Case("forged-token", "forged"),
                Case("other-tenant-header", "crossing"),
                Case("no-tenant", "no-tenant"),
                Case("old-client", "old-client"),
            ],
        ),
        (
            Route("GET", "/projects/{project_id}", "read_project"),
            [
                Case("reader", "reader", path={"project_id": ACME}),
                Case("other-tenant-project", "reader", path={"project_id": GLOBEX}),
                Case("anonymous", "anonymous", path={"project_id": ACME}),
                Case("not-a-uuid", "reader", path={"project_id": "rocket-skates"}),
            ],
        ),
        (
            Route("POST", "/projects", "create_project", body="project", skill=True),
            [
                Case("writer", "writer", body=NEW_PROJECT),
                Case("read-scope-only", "reader", body=NEW_PROJECT),
                Case("anonymous", "anonymous", body=NEW_PROJECT),
                Case("duplicate-name", "writer", body={**NEW_PROJECT, "name": "Rocket skates"}),
                Case("negative-budget", "writer", body={**NEW_PROJECT, "budget": -1}),
                Case("no-tenant", "no-tenant", body=NEW_PROJECT),
            ],
        ),
        (
            Route("PATCH", "/projects/{project_id}", "update_project", body="patch"),
            [
                Case("writer", "writer", path={"project_id": ACME}, body={"budget": 15000}),
                Case("read-scope-only", "reader", path={"project_id": ACME}, body={"budget": 1}),
                Case("other-tenant-project", "writer", path={"project_id": GLOBEX}, body={"budget": 1}),
                Case("short-name", "writer", path={"project_id": ACME}, body={"name": "x"}),
            ],
        ),
        (
            Route("DELETE", "/projects/{project_id}", "delete_project"),
            [
                Case("admin", "admin", path={"project_id": ACME}),
                Case("writer-without-admin", "writer", path={"project_id": ACME}),
                Case("anonymous", "anonymous", path={"project_id": ACME}),
            ],
        ),
        (
            Route("GET", "/projects/{project_id}/tasks", "list_tasks"),
            [
                Case("reader", "reader", path={"project_id": ACME}),
                Case("by-status", "reader", path={"project_id": ACME}, query={"status": "doing"}),
                Case("unknown-status", "reader", path={"project_id": ACME}, query={"status": "blocked"}),
                Case("other-tenant-header", "crossing", path={"project_id": GLOBEX}),
            ],
        ),
        (
            Route("GET", "/projects/{project_id}/stats", "project_stats"),
            [
                Case("reader", "reader", path={"project_id": ACME}),
                Case("no-hours-yet", "reader", path={"project_id": EMPTY}, secret="division by zero"),
                Case("anonymous", "anonymous", path={"project_id": ACME}),
            ],
        ),
        (
            Route("GET", "/tasks/status/{status}", "tasks_by_status"),
            [
                Case("reader", "reader", path={"status": "todo"}),
                Case("globex", "globex", path={"status": "doing"}),
                Case("unknown-status", "reader", path={"status": "blocked"}),
                Case("no-tenant", "no-tenant", path={"status": "todo"}),
            ],
        ),
        (
            Route("GET", "/settings", "read_settings"),
            [
                Case("reader", "reader"),
                Case("globex", "globex"),
                Case("anonymous", "anonymous"),
            ],
        ),
        (
            Route("GET", "/reports/{kind}", "report"),
            [
                Case("weekly", "reader", path={"kind": "weekly"}),
                Case("yearly-is-paused", "reader", path={"kind": "yearly"}),
                Case("unknown-kind", "reader", path={"kind": "daily"}),
            ],
        ),
        (
            Route("POST", "/projects/{project_id}/exports", "export_project"),
            [
                Case("reader", "reader", path={"project_id": ACME}, query={"format": "pdf"}),
                Case("quota-used-up", "globex", path={"project_id": GLOBEX}),
                Case("unknown-format", "reader", path={"project_id": ACME}, query={"format": "docx"}),
            ],
        ),
        (
            Route("GET", "/legacy/projects", "legacy_projects"),
            [
                Case("anonymous", "anonymous"),
            ],
        ),
    ],
)

SHOP = CorpusApp(
    shop,
    shop_identities,
    [
        (
            Route("GET", "/products", "search_products"),
            [
                Case("anonymous", query={"q": "r"}),
                Case("limit", query={"limit": 1}),
                Case("tags", query={"tag": ["hardware", "organic"]}),
                Case("limit-too-big", query={"limit": 500}),
            ],
        ),
        (
            Route("GET", "/products/{product_id}", "read_product"),
            [
                Case("anonymous", path={"product_id": 1}),
                Case("unknown", path={"product_id": 99}),
                Case("zero", path={"product_id": 0}),
            ],
        ),
        (
            Route("GET", "/products/{product_id}/tags", "product_tags"),
            [
                Case("anonymous", path={"product_id": 1}),
                Case("no-tags", path={"product_id": 3}),
            ],
        ),
        (
            Route("GET", "/cart", "read_cart"),
            [
                Case("alice", "alice"),
                Case("no-cart-cookie", "alice-no-cart"),
                Case("another-customer's-cart", "bob"),
                Case("anonymous"),
                Case("bad-key", "bad-key"),
            ],
        ),
        (
            Route("POST", "/cart/items", "add_to_cart", body=EMBED),
            [
                Case("alice", "alice", body={"product_id": 2, "quantity": 1}),
                Case("unknown-product", "alice", body={"product_id": 99}),
                Case("too-many", "alice", body={"product_id": 2, "quantity": 50}),
                Case("another-customer's-cart", "bob", body={"product_id": 2}),
                Case("anonymous", body={"product_id": 2}),
            ],
        ),
        (
            Route("POST", "/checkout", "checkout", skill=True),
            [
                Case("alice", "alice"),
                Case("another-customer's-cart", "bob"),
                Case("anonymous"),
            ],
        ),
        (
            Route("GET", "/orders/{order_id}", "read_order", skill=True),
            [
                Case("own", "alice", path={"order_id": str(shop.ORDER_ALICE)}),
                Case("another-customer's", "alice", path={"order_id": str(shop.ORDER_BOB)}),
                Case("anonymous", path={"order_id": str(shop.ORDER_ALICE)}),
            ],
        ),
        (
            Route("GET", "/admin/orders", "all_orders"),
            [
                Case("staff", "staff"),
                Case("customer", "alice"),
                Case("anonymous"),
            ],
        ),
        (
            Route("POST", "/admin/products", "create_product", body="product"),
            [
                Case(
                    "staff",
                    "staff",
                    body={"id": 4, "name": "Scale", "price": 25.0, "cost": 9.5, "supplier_notes": "new"},
                ),
                Case(
                    "existing-id", "staff", body={"id": 1, "name": "Beans again", "price": 1.0, "cost": 0.5}
                ),
                Case("customer", "alice", body={"id": 5, "name": "Free stuff", "price": 0.0, "cost": 0.0}),
            ],
        ),
        (
            Route("GET", "/admin/orders/lines", "stream_order_lines"),
            [
                Case("staff", "staff"),
                Case("customer", "alice"),
            ],
        ),
        (
            Route("GET", "/admin/orders.csv", "orders_csv"),
            [
                Case("staff", "staff"),
                Case("customer", "alice"),
            ],
        ),
        (
            Route("PUT", "/admin/products/{product_id}/price", "set_price", body="update"),
            [
                Case("staff", "staff", path={"product_id": 2}, body={"price": 79.0, "reason": "spring sale"}),
                Case("customer", "alice", path={"product_id": 2}, body={"price": 0.01, "reason": "mine"}),
                Case("free", "staff", path={"product_id": 2}, body={"price": 0, "reason": "oops"}),
                Case("unknown", "staff", path={"product_id": 99}, body={"price": 1, "reason": "x"}),
            ],
        ),
    ],
)

CORPUS = {"fullstack": FULLSTACK, "projects": PROJECTS, "shop": SHOP}


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

    def reset(self) -> None:
        """A fresh database and fresh id and clock sequences: every exchange starts from the same state."""
        shutil.copyfile(self.template, self.database)
        counter = itertools.count(1)
        self.module.new_id = lambda: UUID(int=0xC0FFEE << 64 | next(counter))  # type: ignore[attr-defined]
        if hasattr(self.module, "utc_now"):
            self.module.utc_now = lambda: datetime(2026, 5, 4, 12, 0, tzinfo=UTC)  # type: ignore[attr-defined]


_built: dict[tuple[str, str], Built] = {}
_references: dict[tuple[str, str, str, str], tuple[Observed, dict[str, Any]]] = {}


@functools.cache
def _folder() -> Path:
    """One temporary folder for this run's databases, made on first use (importing the tests makes nothing)."""
    return Path(tempfile.mkdtemp(prefix="agentmw-fidelity-"))


async def build(name: str, exposure: str, mutate: Callable[[FastAPI], None] | None = None) -> Built:
    """The app ``name`` as ``exposure`` exposes it; ``mutate`` changes the plain app before the agent is built."""
    key = (name, exposure)
    if mutate is None and key in _built:
        return _built[key]
    module = CORPUS[name].module
    folder = Path(tempfile.mkdtemp(dir=_folder()))
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
    except Exception as exc:  # noqa: BLE001 - the agent refused to start: every case of this app reports it
        built.error = f"{type(exc).__name__}: {exc}"
    if mutate is None:
        _built[key] = built
    return built


async def exchange(built: Built, face: str, route: Route, case: Case) -> tuple[Observed, dict[str, Any]]:
    built.reset()
    headers = built.headers[case.who] if case.who else {}
    observed = await observe(built.app, face, route, case, headers)
    return observed, dump_database(built.database)


async def reference(
    built: Built, name: str, exposure: str, route: Route, case: Case
) -> tuple[Observed, dict]:
    key = (name, exposure, str(route), case.name)
    if key not in _references:
        _references[key] = await exchange(built, "http", route, case)
    return _references[key]


async def differences(
    reference_app: Built,
    subject: Built,
    face: str,
    route: Route,
    case: Case,
    http: tuple[Observed, dict[str, Any]] | None = None,
) -> tuple[list[str], Observed, Observed]:
    """What ``subject``'s agent answers through ``face`` that differs from ``reference_app`` over HTTP."""
    expected, expected_rows = http or await exchange(reference_app, "http", route, case)
    observed, rows = await exchange(subject, face, route, case)
    findings = compare(expected, observed, case)
    if rows != expected_rows and _only_missing(rows, expected_rows):
        try:  # a background task may still be writing: give it a bounded moment, then read again
            await eventually(
                lambda: dump_database(subject.database) == expected_rows, "the same side effects", timeout=0.5
            )
            rows = expected_rows
        except AssertionError:
            rows = dump_database(subject.database)
    if rows != expected_rows:
        changed = sorted(t for t in set(rows) | set(expected_rows) if rows.get(t) != expected_rows.get(t))
        findings.append(f"SIDE_EFFECTS: the database differs from HTTP's in {', '.join(changed)}")
    return findings, expected, observed


def _only_missing(rows: dict[str, list[Any]], expected: dict[str, list[Any]]) -> bool:
    """Whether ``rows`` lack only rows ``expected`` has (what a background task that is late would leave)."""
    return all(set(rows.get(t, ())) <= set(expected.get(t, ())) for t in set(rows) | set(expected))


# --- the differential -----------------------------------------------------------------------------------


def _cases() -> Iterator[Any]:
    for name, corpus in CORPUS.items():
        for route, cases in corpus.routes:
            for case, exposure in itertools.product(cases, EXPOSURES):
                faces = MCP_FACES + (SKILL_FACES if route.skill and exposure == "decorator" else ())
                for face in faces:
                    yield pytest.param(
                        name,
                        exposure,
                        route,
                        case,
                        face,
                        id=f"{name}-{exposure}-{route.method} {route.path}-{case.name}-{face}",
                    )


@pytest.mark.parametrize(("name", "exposure", "route", "case", "face"), list(_cases()))
async def test_a_route_answers_an_agent_as_it_answers_http(
    name: str, exposure: str, route: Route, case: Case, face: str
) -> None:
    built = await build(name, exposure)
    if built.error is not None:
        pytest.fail(f"{name} ({exposure}): the agent refused to start: {built.error}", pytrace=False)
    http = await reference(built, name, exposure, route, case)
    findings, expected, observed = await differences(built, built, face, route, case, http)
    assert not findings, (
        f"{name} ({exposure}) {route} [{case.name}] via {face}:\n  HTTP:  {expected.summary()}\n"
        f"  {face}: {observed.summary()}\n  " + "\n  ".join(findings)
    )


# --- the differential cannot pass by comparing nothing -----------------------------------------------------


async def test_the_corpus_answers_every_outcome_class_over_http() -> None:
    """The tables ask for what they name: over HTTP the corpus answers every class at least once."""
    seen: dict[str, str] = {}
    for name, corpus in CORPUS.items():
        built = await build(name, "bulk")
        for route, cases in corpus.routes:
            for case in cases:
                http, _ = await reference(built, name, "bulk", route, case)
                seen.setdefault(http.outcome, f"{name} {route} [{case.name}]")
    assert set(seen) == {"ok", "auth_refused", "not_found", "invalid", "retryable", "failed", "redirect"}, (
        seen
    )


def _api_routes(router: Any) -> Iterator[tuple[list[Any], int, APIRoute]]:
    """Every ``APIRoute`` of a router, with the list that holds it (included routers are kept whole)."""
    for index, route in enumerate(router.routes):
        included = getattr(route, "original_router", None)
        if included is not None:
            yield from _api_routes(included)
        elif isinstance(route, APIRoute):
            yield router.routes, index, route


def rebuild_route(endpoint: str, **changes: Any) -> Callable[[FastAPI], None]:
    """A mutation: the route of handler ``endpoint`` made again with ``changes`` (its other settings kept)."""

    def mutate(app: FastAPI) -> None:
        for routes, index, route in _api_routes(app.router):
            if route.name == endpoint:
                settings = {
                    key: getattr(route, key)
                    for key in (
                        "methods",
                        "dependencies",
                        "response_model",
                        "status_code",
                        "tags",
                        "name",
                        "response_class",
                        "response_model_include",
                        "response_model_exclude",
                        "response_model_by_alias",
                        "response_model_exclude_unset",
                        "response_model_exclude_defaults",
                        "response_model_exclude_none",
                    )
                }
                routes[index] = APIRoute(route.path, route.endpoint, **{**settings, **changes})
                return
        raise LookupError(f"no route for {endpoint!r}")

    return mutate


def route_and_case(name: str, tool: str, case_name: str) -> tuple[Route, Case]:
    route, cases = next((r, c) for r, c in CORPUS[name].routes if r.tool == tool)
    return route, next(c for c in cases if c.name == case_name)


@pytest.mark.parametrize("exposure", EXPOSURES)
async def test_a_dependency_dropped_on_the_agent_side_is_reported_as_a_bypass(exposure: str) -> None:
    """The agent's copy of the app loses ``dependencies=[Depends(get_current_active_superuser)]`` on one route:
    a non-admin is then served where HTTP refuses, and the differential must say so."""
    route, case = route_and_case("fullstack", "read_users", "non-admin")
    honest = await build("fullstack", exposure)
    broken = await build("fullstack", exposure, rebuild_route("read_users", dependencies=[]))
    assert broken.error is None, broken.error
    mutated_http, _ = await exchange(broken, "http", route, case)
    assert mutated_http.outcome == "ok"  # the mutation took: the copy itself serves the non-admin
    for face in MCP_FACES:
        findings, expected, observed = await differences(honest, broken, face, route, case)
        assert expected.status == 403 and observed.outcome == "ok", (face, observed.summary())
        assert findings == ["BYPASS: served where HTTP refuses the caller with 403"], findings


@pytest.mark.parametrize("exposure", EXPOSURES)
async def test_a_response_model_dropped_on_the_agent_side_is_reported_as_a_leak(exposure: str) -> None:
    """The agent's copy of the app loses ``response_model=UserPublic`` on ``GET /users/me``: the handler's row,
    ``hashed_password`` and all, then reaches the agent, and the differential must name the field."""
    route, case = route_and_case("fullstack", "read_user_me", "alice")
    honest = await build("fullstack", exposure)
    broken = await build("fullstack", exposure, rebuild_route("read_user_me", response_model=None))
    assert broken.error is None, broken.error
    for face in MCP_FACES:
        findings, _, observed = await differences(honest, broken, face, route, case)
        assert observed.outcome == "ok" and "hashed_password" in observed.data, observed.summary()
        assert findings[0] == "LEAK: more data than HTTP: $.hashed_password", findings


@pytest.mark.parametrize("exposure", EXPOSURES)
async def test_the_apps_dependency_overrides_hold_for_agent_calls(exposure: str) -> None:
    """``app.dependency_overrides`` (what an app's own tests set) replaces the dependency for agents as for HTTP."""
    stand_in = {
        "id": str(fullstack.BOB_ID),
        "email": "bob@example.com",
        "hashed_password": "-",
        "full_name": "Bob (override)",
        "is_active": True,
        "is_superuser": False,
    }

    def override(app: FastAPI) -> None:
        app.dependency_overrides[fullstack.get_current_user] = lambda: stand_in

    built = await build("fullstack", exposure, override)
    assert built.error is None, built.error
    route, case = route_and_case("fullstack", "read_user_me", "anonymous")
    for face in MCP_FACES:
        findings, expected, observed = await differences(built, built, face, route, case)
        assert expected.data["full_name"] == "Bob (override)" and not findings, (observed.summary(), findings)


@pytest.mark.parametrize("exposure", EXPOSURES)
async def test_a_path_value_of_several_segments_is_refused_as_invalid(exposure: str) -> None:
    """The documented divergence (docs/fastapi-migration.md, section 4): HTTP cannot send a path parameter with
    ``/`` (it matches no route: 404), and an agent call of one is refused as invalid, never sent as a path that
    ``..`` would move to another object."""
    built = await build("fullstack", exposure)
    assert built.error is None, built.error
    route, _ = route_and_case("fullstack", "read_item", "own")
    case = Case("a-slash", "alice", path={"id": f"{fullstack.ALICE_ITEM}/../{fullstack.BOB_ITEM}"})
    http, _ = await exchange(built, "http", route, case)
    assert http.status == 404
    for face in MCP_FACES:
        observed, _ = await exchange(built, face, route, case)
        assert observed.outcome == "invalid" and "Bob" not in observed.text, observed.summary()


# --- documented refusals at start ----------------------------------------------------------------------

UPLOAD_ROUTE = "POST /admin/products/{product_id}/image"


def test_an_upload_route_is_left_out_of_bulk_exposure_with_a_warning_naming_it(caplog: Any) -> None:
    with caplog.at_level(logging.WARNING, logger="agentmw"):
        agent = shop.build_agent(shop.create_api("bulk", str(_folder() / "upload-bulk.db")), "bulk")
    assert (
        "upload_image" not in agent.tools and "set_price" in agent.tools
    )  # the rest of its router is served
    warned = [
        r.getMessage()
        for r in caplog.records
        if r.levelno == logging.WARNING and UPLOAD_ROUTE in r.getMessage()
    ]
    assert len(warned) == 1 and "parameter 'image' is a file upload" in warned[0], warned


def test_a_decorated_upload_route_stops_the_agent_at_start_naming_the_route_and_parameter() -> None:
    api = shop.create_api("decorator", str(_folder() / "upload-decorated.db"))
    tool(next(route.endpoint for _, _, route in _api_routes(api.router) if route.name == "upload_image"))
    with pytest.raises(RegistrationError) as refused:
        shop.build_agent(api, "decorator")
    assert UPLOAD_ROUTE in str(refused.value) and "parameter 'image' is a file upload" in str(refused.value)


# --- the comparison itself ---------------------------------------------------------------------------------


def _http(outcome: str, data: Any = None, **fields: Any) -> Observed:
    return Observed("http", outcome, data, **fields)


@pytest.mark.parametrize(
    ("http", "face", "expected"),
    [
        (
            _http("auth_refused", status=401),
            Observed("mcp-2026", "ok", {"id": 1}),
            ["BYPASS: served where HTTP refuses the caller with 401"],
        ),
        (
            _http("ok", {"data": [{"id": 1}]}),
            Observed(
                "mcp-2026", "ok", {"data": [{"id": 1, "secret": "x"}]}, "{}", extra={"structured": True}
            ),
            [
                "LEAK: more data than HTTP: $.data[0].secret",
                "STRUCTURED: structuredContent is not the body (or {'result': body})",
                "TEXT: the text content '{}' is not the body's JSON text",
            ],
        ),
        (
            _http("ok", [1, 2]),
            Observed("mcp-2025", "ok", {"result": [1, 2]}, "[1, 2]", extra={"structured": True}),
            [],
        ),
        (
            _http("ok", [1, 2]),
            Observed("a2a", "ok", [2, 1]),
            ["DATA: the result differs from HTTP's JSON body"],
        ),
        (
            _http("failed", status=500),
            Observed("agui", "failed", text="ZeroDivisionError: division by zero"),
            ["REVEALS: an internal error's text reaches the caller: 'ZeroDivisionError: division by zero'"],
        ),
        (
            _http("redirect", status=308, extra={"location": "/x"}),
            Observed("mcp-2026", "failed", text="HTTP 308"),
            ["REDIRECT: HTTP answers 308 to /x; the agent must refuse it with a message naming the redirect"],
        ),
        (
            _http("not_found", text="Item not found", status=404),
            Observed("mcp-2026", "not_found", text="HTTP 404"),
            ["DETAIL: the app's detail 'Item not found' does not reach the caller"],
        ),
        (
            _http("auth_refused", text="no", status=401, challenge='Bearer scope="a"'),
            Observed("mcp-2026", "auth_refused", text="no", status=401, challenge="Bearer"),
            ["CHALLENGE: the app's WWW-Authenticate 'Bearer scope=\"a\"' is 'Bearer'"],
        ),
        (
            _http("retryable", text="later", status=503, retry_after=120.0),
            Observed("a2a", "retryable", text="later", retry_after=None),
            ["RETRY_AFTER: the app's Retry-After 120 is None"],
        ),
        (
            _http("invalid", text="bad", status=409),
            Observed("a2a", "failed", text="bad"),
            ["CLASS: HTTP is invalid, the face is failed"],
        ),
    ],
)
def test_the_comparison_names_each_difference(http: Observed, face: Observed, expected: list[str]) -> None:
    assert compare(http, face, Case("c", secret="division by zero")) == expected
