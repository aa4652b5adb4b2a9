"""``Agent(identify=get_current_user)``: the app's own FastAPI dependency tells who calls, so out-of-band approvals
use the app's real users with no extra code.

The app is shaped like the FastAPI tutorial and the templates copied from it: an ``OAuth2PasswordBearer`` scheme,
a ``/token`` login that signs a JWT, a ``get_db`` dependency with ``yield`` over a SQLite file, and
``get_current_user(token=Depends(oauth2_scheme), db=Depends(get_db)) -> User``. It is served by uvicorn on
127.0.0.1; the agent is called with the MCP SDK's client, and approvals are decided over plain HTTP.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import httpx
import httpx2
import jwt
import pytest
from fastapi import Depends, FastAPI, HTTPException, Request, Security
from fastapi.security import OAuth2PasswordBearer, OAuth2PasswordRequestForm, SecurityScopes
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from pydantic import BaseModel
from starlette.requests import HTTPConnection

from agentmw import Agent, AgentMiddleware, tool
from agentmw.approvals import NO_APPROVER
from agentmw.identity import DependencyIdentity, as_identify, from_dependency, identity_of
from agentmw.safety import human_gate
from tests.conftest import serve

SIGNING_KEY = "identify-dependency-test-signing-key-of-32-bytes"
PEOPLE = [(1, "alice", "alice@example.com", "wonderland"), (2, "bob", "bob@example.com", "builder")]
ran: list[int] = []


class User(BaseModel):
    id: int
    username: str
    email: str


@tool
@human_gate(side_effects="Moves money out of the team's account")
async def transfer(amount: int) -> str:
    """Transfer money to the supplier."""
    ran.append(amount)
    return f"transferred {amount}"


oauth2_scheme = OAuth2PasswordBearer(tokenUrl="token")
DATABASE = {"path": ""}  # the test's SQLite file; the app reads it as it would read its settings
SESSIONS = {"opened": 0, "closed": 0}


# --- the app, as its team wrote it before agentmw: nothing in it knows about agents ---------------------------


def get_db() -> Iterator[sqlite3.Connection]:
    db = sqlite3.connect(DATABASE["path"], check_same_thread=False)  # as FastAPI's SQL guide opens SQLite
    SESSIONS["opened"] += 1
    try:
        yield db
    finally:
        db.close()
        SESSIONS["closed"] += 1


async def get_current_user(
    token: Annotated[str, Depends(oauth2_scheme)], db: Annotated[sqlite3.Connection, Depends(get_db)]
) -> User:
    invalid = HTTPException(401, "Could not validate credentials", headers={"WWW-Authenticate": "Bearer"})
    try:
        username = jwt.decode(token, SIGNING_KEY, algorithms=["HS256"])["sub"]
    except (jwt.InvalidTokenError, KeyError):
        raise invalid from None
    row = db.execute("SELECT id, username, email FROM users WHERE username = ?", (username,)).fetchone()
    if row is None:
        raise invalid
    return User(id=row[0], username=row[1], email=row[2])


def login_route(
    form: Annotated[OAuth2PasswordRequestForm, Depends()], db: Annotated[sqlite3.Connection, Depends(get_db)]
) -> dict[str, str]:
    row = db.execute("SELECT password_hash FROM users WHERE username = ?", (form.username,)).fetchone()
    if row is None or row[0] != _hash(form.password):
        raise HTTPException(400, "Incorrect username or password")
    return {"access_token": jwt.encode({"sub": form.username}, SIGNING_KEY), "token_type": "bearer"}


async def me_route(user: Annotated[User, Depends(get_current_user)]) -> User:
    return user


class Shop:
    """The app and its users' table, and the one agent the team adds to it."""

    def __init__(self, db_path: Path) -> None:
        with sqlite3.connect(db_path) as db:
            db.execute(
                "CREATE TABLE users (id INTEGER PRIMARY KEY, username TEXT, email TEXT, password_hash TEXT)"
            )
            db.executemany(
                "INSERT INTO users VALUES (?, ?, ?, ?)",
                [(i, name, mail, _hash(pw)) for i, name, mail, pw in PEOPLE],
            )
        DATABASE["path"] = str(db_path)
        SESSIONS.update(opened=0, closed=0)
        self.app = FastAPI()
        self.app.post("/token")(login_route)
        self.app.get("/users/me")(me_route)

    def agent(self, identify: Any = get_current_user, **settings: Any) -> Agent:
        """What the team adds: one agent, whose identity is the dependency the app already has."""
        agent = Agent("shop", identify=identify, include=[transfer], store="memory://", **settings)
        self.app.add_middleware(AgentMiddleware, agent=agent)
        return agent


def _hash(password: str) -> str:
    return hashlib.sha256(password.encode()).hexdigest()


@pytest.fixture(autouse=True)
def _clear() -> None:
    ran.clear()


@pytest.fixture
def shop(tmp_path: Path) -> Shop:
    return Shop(tmp_path / "shop.db")


def login(url: str, username: str, password: str) -> str:
    answer = httpx.post(f"{url}/token", data={"username": username, "password": password}, timeout=10)
    assert answer.status_code == 200, answer.text
    return answer.json()["access_token"]


def mcp(url: str, token: str | None) -> Client:
    """The MCP SDK's client in the handshake era, with no elicitation: a gated call is approved out of band."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    http = httpx2.AsyncClient(headers=headers, timeout=30)
    return Client(streamable_http_client(f"{url}/mcp", http_client=http), mode="legacy", cache=None)


async def call_transfer(url: str, token: str | None, approval_id: str | None = None) -> Any:
    async with mcp(url, token) as client:
        meta = {"agentmw/approvalId": approval_id} if approval_id else None
        return await client.call_tool("transfer", {"amount": 5}, meta=meta)


def text(result: Any) -> str:
    return result.content[0].text


async def test_the_apps_users_request_and_decide_approvals_over_http(shop: Shop) -> None:
    shop.agent()
    with serve(shop.app) as url:
        alice, bob = login(url, "alice", "wonderland"), login(url, "bob", "builder")
        me = httpx.get(f"{url}/users/me", headers={"Authorization": f"Bearer {alice}"}, timeout=10)
        assert me.json() == {"id": 1, "username": "alice", "email": "alice@example.com"}

        pending = await call_transfer(url, alice)
        assert pending.is_error and "Nothing has been executed" in text(pending)
        approval = pending.meta["agentmw/approval"]
        assert approval["requestedBy"] == "1", "the identity is the app's user id"

        decide = f"{url}/approvals/{approval['id']}"
        async with httpx.AsyncClient(timeout=10) as http:
            for headers in (
                {},
                {"Authorization": "Bearer not-a-jwt"},
                {"Authorization": f"Bearer {jwt.encode({'sub': 'mallory'}, SIGNING_KEY)}"},
            ):
                refused = await http.post(decide, json={"approve": True}, headers=headers)
                assert refused.status_code == 401, "what get_current_user refuses is no identity"
                assert refused.headers["www-authenticate"] == "Bearer"
            own = await http.post(
                decide, json={"approve": True}, headers={"Authorization": f"Bearer {alice}"}
            )
            assert own.status_code == 403 and "cannot approve their own action" in own.json()["detail"]
            shown = await http.get(decide, headers={"Authorization": f"Bearer {bob}"})
            assert shown.status_code == 200 and shown.json()["arguments"] == {"amount": 5}
            decided = await http.post(
                decide, json={"approve": True, "note": "ok"}, headers={"Authorization": f"Bearer {bob}"}
            )
            assert decided.status_code == 200 and decided.json()["decidedBy"] == "2"
        assert ran == []

        stolen = await call_transfer(url, bob, approval["id"])
        assert stolen.is_error and "requested by another caller" in text(stolen)
        done = await call_transfer(url, alice, approval["id"])
        assert not done.is_error and text(done) == "transferred 5"
    assert ran == [5]
    assert SESSIONS["opened"] == SESSIONS["closed"] > 0, "get_db's cleanup ran after every solve"


async def test_a_caller_the_dependency_refuses_cannot_request_an_approval(shop: Shop) -> None:
    agent = shop.agent()
    with serve(shop.app) as url:
        for token in (None, "not-a-jwt", jwt.encode({"sub": "mallory"}, SIGNING_KEY)):
            refused = await call_transfer(url, token)
            assert refused.is_error and "needs an authenticated caller" in text(refused), text(refused)
            assert "agentmw/approval" not in (refused.meta or {})
    assert await agent.approvals.count() == 0 and ran == []


async def test_the_apps_dependency_overrides_apply(shop: Shop) -> None:
    shop.agent()
    shop.app.dependency_overrides[get_current_user] = lambda: User(id=42, username="tester", email="t@x")
    with serve(shop.app) as url:
        pending = await call_transfer(url, None)
    assert pending.meta["agentmw/approval"]["requestedBy"] == "42"


async def test_key_names_what_of_the_user_is_the_identity(shop: Shop) -> None:
    shop.agent(identify=from_dependency(get_current_user, key="email"))
    with serve(shop.app) as url:
        pending = await call_transfer(url, login(url, "alice", "wonderland"))
    assert pending.meta["agentmw/approval"]["requestedBy"] == "alice@example.com"


async def test_a_dependency_that_fails_otherwise_is_the_apps_error(shop: Shop) -> None:
    def broken() -> User:
        raise HTTPException(503, "user service down")

    identify = DependencyIdentity(broken)
    connection = HTTPConnection({"type": "http", "headers": [], "app": shop.app})
    with pytest.raises(HTTPException):
        await identify(connection)


async def test_the_dependency_runs_once_per_request(shop: Shop) -> None:
    identify = as_identify(get_current_user)
    assert isinstance(identify, DependencyIdentity)
    token = jwt.encode({"sub": "bob"}, SIGNING_KEY)
    connection = HTTPConnection({"type": "http", "headers": [(b"authorization", f"Bearer {token}".encode())]})
    assert await identify(connection) == "2" and await identify(connection) == "2"
    assert SESSIONS["opened"] == SESSIONS["closed"] == 1
    other = HTTPConnection({"type": "http", "headers": []})
    assert await identify(other) is None, "OAuth2PasswordBearer's 401 for no token: not authenticated"


async def scoped_user(security_scopes: SecurityScopes, token: Annotated[str, Depends(oauth2_scheme)]) -> str:
    if "approvals" not in security_scopes.scopes:
        raise HTTPException(403, "Not enough permissions")
    return f"token-holder-{len(token)}"


async def test_security_scopes_reach_the_dependency() -> None:
    def connection() -> HTTPConnection:
        return HTTPConnection({"type": "http", "headers": [(b"authorization", b"Bearer abc")]})

    assert await as_identify(Security(scoped_user, scopes=["approvals"]))(connection()) == "token-holder-3"
    assert await as_identify(scoped_user)(connection()) is None, "its 403: not authenticated"


def test_the_no_approver_messages_name_the_option() -> None:
    assert "Agent(identify=get_current_user)" in NO_APPROVER


async def test_the_refused_call_names_the_option() -> None:
    from agentmw.testing import McpTestClient

    app = FastAPI()
    app.add_middleware(AgentMiddleware, agent=Agent("no-identity", include=[transfer], store="memory://"))
    async with McpTestClient(app, era="2025-06-18") as client:
        refused = await client.call_tool("transfer", {"amount": 1})
    assert "no approver configured" in refused["content"][0]["text"]
    assert "Agent(identify=get_current_user)" in refused["content"][0]["text"]


# --- which callables are dependencies, and how a user becomes an identity ------------------------------------


def _hook(connection): ...


async def _typed_hook(connection: HTTPConnection) -> str | None: ...


def _request_hook(request: Request) -> str | None: ...


def _no_parameters() -> str: ...


def _query_style(token: str, tenant: str) -> str: ...


def test_hooks_stay_hooks_and_dependencies_are_recognised(shop: Shop) -> None:
    for hook in (_hook, _typed_hook, _request_hook, lambda connection: None):
        assert as_identify(hook) is hook
    for dependency in (get_current_user, Depends(get_current_user), _no_parameters, _query_style):
        assert isinstance(as_identify(dependency), DependencyIdentity), dependency
    assert as_identify(None) is None
    with pytest.raises(TypeError):
        as_identify("alice")
    with pytest.raises(TypeError, match="would make the credential itself the identity"):
        as_identify(oauth2_scheme)


class _Account:
    def __init__(self, **fields: Any) -> None:
        self.__dict__.update(fields)


def test_identity_of_a_user() -> None:
    import uuid

    account = uuid.UUID("12345678-1234-5678-1234-567812345678")
    assert identity_of("alice") == "alice" and identity_of(7) == "7" and identity_of(account) == str(account)
    assert identity_of(None) is None and identity_of("") is None
    assert identity_of(User(id=3, username="c", email="c@x")) == "3"
    assert identity_of(_Account(id=None, username="dana", email="d@x")) == "dana", "the first key that is set"
    assert identity_of(_Account(email="e@x")) == "e@x"
    assert identity_of({"sub": "auth0|123", "email": "f@x"}) == "auth0|123"
    assert identity_of(_Account(id=account)) == str(account)
    assert identity_of(User(id=3, username="c", email="c@x"), "email") == "c@x"
    assert (
        identity_of(User(id=3, username="c", email="c@x"), lambda user: f"{user.username}@corp") == "c@corp"
    )
    with pytest.raises(TypeError, match="key=") as refused:
        identity_of(_Account(name="no id"))
    assert "id, sub, username, email" in str(refused.value)
    with pytest.raises(TypeError):
        identity_of(True)
