"""Dependencies (functions, classes, sub-dependencies, caching, ``yield``, route, router and app dependencies)
and security (OAuth2 bearer, HTTP Basic, API keys in a header, a query and a cookie, scopes)."""

import secrets
from collections.abc import AsyncIterator, Iterator
from typing import Annotated, Any

from fastapi import APIRouter, Cookie, Depends, FastAPI, Header, HTTPException, Request, Security, status
from fastapi.security import (
    APIKeyCookie,
    APIKeyHeader,
    APIKeyQuery,
    HTTPBasic,
    HTTPBasicCredentials,
    OAuth2PasswordBearer,
    SecurityScopes,
)
from pydantic import BaseModel

from .._exposure import Exposure, as_skill, as_tool
from ..differential import Case, Route
from . import effects_of, feature

__all__: list[str] = []

FAKE_ITEMS = [{"item_name": "Foo"}, {"item_name": "Bar"}, {"item_name": "Baz"}]


async def common_parameters(q: str | None = None, skip: int = 0, limit: int = 100) -> dict[str, Any]:
    return {"q": q, "skip": skip, "limit": limit}


CommonsDep = Annotated[dict[str, Any], Depends(common_parameters)]


class CommonQueryParams:
    def __init__(self, q: str | None = None, skip: int = 0, limit: int = 100) -> None:
        self.q, self.skip, self.limit = q, skip, limit


@feature(
    "dependency-functions-classes",
    [
        (
            Route("GET", "/items/", "read_items"),
            [
                Case("defaults"),
                Case("given", query={"q": "x", "skip": 1, "limit": 5}),
                Case("bad-limit", query={"limit": "all"}),
            ],
        ),
        (Route("GET", "/users/", "read_users"), [Case("given", query={"skip": 2})]),
        (
            Route("GET", "/classes/", "read_classes"),
            [Case("given", query={"q": "x", "skip": 1, "limit": 1}), Case("bad-skip", query={"skip": "x"})],
        ),
    ],
)
def dependency_functions_classes(exposure: Exposure) -> FastAPI:
    app, expose = FastAPI(), as_tool(exposure)

    @app.get("/items/")
    @expose
    async def read_items(commons: CommonsDep) -> dict[str, Any]:
        return commons

    @app.get("/users/")
    @expose
    def read_users(commons: CommonsDep) -> dict[str, Any]:
        return commons

    @app.get("/classes/")
    @expose
    async def read_classes(commons: Annotated[CommonQueryParams, Depends()]) -> dict[str, Any]:
        response: dict[str, Any] = {}
        if commons.q:
            response.update({"q": commons.q})
        response.update({"items": FAKE_ITEMS[commons.skip : commons.skip + commons.limit]})
        return response

    return app


def query_extractor(q: str | None = None) -> str | None:
    return q


def query_or_cookie_extractor(
    q: Annotated[str | None, Depends(query_extractor)], last_query: Annotated[str | None, Cookie()] = None
) -> str | None:
    return q or last_query


@feature(
    "sub-dependencies-cache",
    [
        (
            Route("GET", "/items/", "read_query"),
            [Case("query", query={"q": "from-query"}), Case("cookie", "last-query-cookie"), Case("neither")],
        ),
        (Route("GET", "/counted/", "read_counted"), [Case("counted")]),
    ],
)
def sub_dependencies_cache(exposure: Exposure) -> FastAPI:
    app, expose = FastAPI(), as_tool(exposure)

    def counter(request: Request) -> int:
        effects_of(request).append("counted")
        return len(effects_of(request))

    @app.get("/items/")
    @expose
    async def read_query(
        query_or_default: Annotated[str | None, Depends(query_or_cookie_extractor)],
    ) -> dict[str, Any]:
        return {"q_or_cookie": query_or_default}

    @app.get("/counted/")
    @expose
    async def read_counted(
        first: Annotated[int, Depends(counter)],
        cached: Annotated[int, Depends(counter)],
        fresh: Annotated[int, Depends(counter, use_cache=False)],
    ) -> dict[str, int]:
        return {"first": first, "cached": cached, "fresh": fresh}

    return app


class OwnerError(Exception):
    pass


DATA = {
    "plumbus": {"description": "Freshly pickled plumbus", "owner": "Morty"},
    "portal-gun": {"description": "Gun to create portals", "owner": "Rick"},
}


@feature(
    "dependency-yield",
    [
        (Route("GET", "/db/", "read_db", skill=True), [Case("session")]),
        (
            Route("GET", "/items/{item_id}", "get_item"),
            [
                Case("owned", path={"item_id": "portal-gun"}),
                Case("not-owned", path={"item_id": "plumbus"}),
                Case("unknown", path={"item_id": "meeseeks"}),
            ],
        ),
    ],
)
def dependency_yield(exposure: Exposure) -> FastAPI:
    app, expose = FastAPI(), as_tool(exposure)

    async def get_db(request: Request) -> AsyncIterator[str]:
        effects_of(request).append("db opened")
        try:
            yield "db-session"
        finally:
            effects_of(request).append("db closed")

    def get_username(request: Request) -> Iterator[str]:
        try:
            yield "Rick"
        except OwnerError as e:
            effects_of(request).append("owner error")
            raise HTTPException(status_code=400, detail=f"Owner error: {e}") from e

    @app.get("/db/")
    @as_skill(exposure)
    @expose
    async def read_db(db: Annotated[str, Depends(get_db)]) -> dict[str, str]:
        return {"db": db}

    @app.get("/items/{item_id}")
    @expose
    def get_item(item_id: str, username: Annotated[str, Depends(get_username)]) -> dict[str, str]:
        if item_id not in DATA:
            raise HTTPException(status_code=404, detail="Item not found")
        item = DATA[item_id]
        if item["owner"] != username:
            raise OwnerError(username)
        return item

    return app


async def verify_token(x_token: Annotated[str, Header()]) -> None:
    if x_token != "fake-super-secret-token":
        raise HTTPException(status_code=400, detail="X-Token header invalid")


async def verify_key(x_key: Annotated[str, Header()]) -> str:
    if x_key != "fake-super-secret-key":
        raise HTTPException(status_code=400, detail="X-Key header invalid")
    return x_key


TOKEN_CASES = [
    Case("both", "token-and-key"),
    Case("bad-key", "token-bad-key"),
    Case("bad-token", "bad-token"),
    Case("none"),
]


@feature(
    "path-operation-dependencies",
    [
        (Route("GET", "/items/", "read_items"), TOKEN_CASES),
    ],
)
def path_operation_dependencies(exposure: Exposure) -> FastAPI:
    app, expose = FastAPI(), as_tool(exposure)

    @app.get("/items/", dependencies=[Depends(verify_token), Depends(verify_key)])
    @expose
    async def read_items() -> list[dict[str, str]]:
        return [{"item": "Foo"}, {"item": "Bar"}]

    return app


@feature(
    "global-dependencies",
    [
        (Route("GET", "/items/", "read_items"), TOKEN_CASES),
        (Route("GET", "/users/", "read_users"), TOKEN_CASES[:1] + TOKEN_CASES[2:3]),
    ],
)
def global_dependencies(exposure: Exposure) -> FastAPI:
    app, expose = FastAPI(dependencies=[Depends(verify_token), Depends(verify_key)]), as_tool(exposure)

    @app.get("/items/")
    @expose
    async def read_items() -> list[dict[str, str]]:
        return [{"item": "Portal Gun"}, {"item": "Plumbus"}]

    @app.get("/users/")
    @expose
    def read_users() -> list[dict[str, str]]:
        return [{"username": "Rick"}, {"username": "Morty"}]

    return app


@feature(
    "router-dependencies",
    [
        (Route("GET", "/items/", "read_items"), TOKEN_CASES[:1] + TOKEN_CASES[2:]),
        (
            Route("GET", "/items/{item_id}", "read_item"),
            [
                Case("found", "token", path={"item_id": "plumbus"}),
                Case("missing", "token", path={"item_id": "x"}),
                Case("bad-token", "bad-token", path={"item_id": "plumbus"}),
            ],
        ),
        (
            Route("PUT", "/items/{item_id}", "update_item"),
            [
                Case("plumbus", "token", path={"item_id": "plumbus"}),
                Case("gun", "token", path={"item_id": "gun"}),
            ],
        ),
        (Route("GET", "/admin/", "update_admin"), [Case("key", "token-and-key"), Case("no-key", "token")]),
    ],
)
def router_dependencies(exposure: Exposure) -> FastAPI:
    app, expose = FastAPI(), as_tool(exposure)
    items = APIRouter(
        prefix="/items",
        tags=["items"],
        dependencies=[Depends(verify_token)],
        responses={404: {"description": "Not found"}},
    )
    fake_items_db = {"plumbus": {"name": "Plumbus"}, "gun": {"name": "Portal Gun"}}

    @items.get("/")
    @expose
    async def read_items() -> dict[str, Any]:
        return fake_items_db

    @items.get("/{item_id}")
    @expose
    async def read_item(item_id: str) -> dict[str, str]:
        if item_id not in fake_items_db:
            raise HTTPException(status_code=404, detail="Item not found")
        return {"name": fake_items_db[item_id]["name"], "item_id": item_id}

    @items.put("/{item_id}", tags=["custom"], responses={403: {"description": "Operation forbidden"}})
    @expose
    async def update_item(item_id: str) -> dict[str, str]:
        if item_id != "plumbus":
            raise HTTPException(status_code=403, detail="You can only update the item: plumbus")
        return {"item_id": item_id, "name": "The great Plumbus"}

    admin = APIRouter()

    @admin.get("/")
    @expose
    async def update_admin() -> dict[str, str]:
        return {"message": "Admin getting schwifty"}

    app.include_router(items)
    app.include_router(admin, prefix="/admin", tags=["admin"], dependencies=[Depends(verify_key)])
    return app


class SecureUser(BaseModel):
    username: str
    email: str | None = None
    disabled: bool | None = None


USERS = {
    "johndoe": SecureUser(username="johndoe", email="john@example.com"),
    "alice": SecureUser(username="alice", disabled=True),
}


@feature(
    "security-oauth2-basic",
    [
        (
            Route("GET", "/users/me", "read_users_me", skill=True),
            [
                Case("johndoe", "bearer-johndoe"),
                Case("disabled", "bearer-alice"),
                Case("unknown", "bearer-unknown"),
                Case("anonymous"),
            ],
        ),
        (Route("GET", "/items/", "read_items"), [Case("token", "bearer-johndoe"), Case("anonymous")]),
        (
            Route("GET", "/basic/me", "read_current_user"),
            [Case("stanley", "basic-stanley"), Case("wrong", "basic-wrong"), Case("anonymous")],
        ),
    ],
)
def security_oauth2_basic(exposure: Exposure) -> FastAPI:
    app, expose = FastAPI(), as_tool(exposure)
    oauth2_scheme = OAuth2PasswordBearer(tokenUrl="token")
    basic = HTTPBasic()

    async def get_current_user(token: Annotated[str, Depends(oauth2_scheme)]) -> SecureUser:
        user = USERS.get(token)
        if user is None:
            raise HTTPException(
                status_code=status.HTTP_401_UNAUTHORIZED,
                detail="Invalid authentication credentials",
                headers={"WWW-Authenticate": "Bearer"},
            )
        return user

    async def get_current_active_user(user: Annotated[SecureUser, Depends(get_current_user)]) -> SecureUser:
        if user.disabled:
            raise HTTPException(status_code=400, detail="Inactive user")
        return user

    def get_current_username(credentials: Annotated[HTTPBasicCredentials, Depends(basic)]) -> str:
        right_user = secrets.compare_digest(credentials.username.encode(), b"stanleyjobeson")
        right_password = secrets.compare_digest(credentials.password.encode(), b"swordfish")
        if not (right_user and right_password):
            raise HTTPException(
                status_code=status.HTTP_401_UNAUTHORIZED,
                detail="Incorrect username or password",
                headers={"WWW-Authenticate": "Basic"},
            )
        return credentials.username

    @app.get("/users/me")
    @as_skill(exposure)
    @expose
    async def read_users_me(
        current_user: Annotated[SecureUser, Depends(get_current_active_user)],
    ) -> SecureUser:
        return current_user

    @app.get("/items/")
    @expose
    async def read_items(token: Annotated[str, Depends(oauth2_scheme)]) -> dict[str, str]:
        return {"token": token}

    @app.get("/basic/me")
    @expose
    def read_current_user(username: Annotated[str, Depends(get_current_username)]) -> dict[str, str]:
        return {"username": username}

    return app


@feature(
    "security-api-keys",
    [
        (Route("GET", "/header/", "read_with_header"), [Case("key", "api-key"), Case("anonymous")]),
        (
            Route("GET", "/query/", "read_with_query"),
            [
                Case("key", query={"api_key": "key-7f3a"}),
                Case("wrong", query={"api_key": "guess"}),
                Case("anonymous"),
            ],
        ),
        (
            Route("GET", "/cookie/", "read_with_cookie"),
            [Case("key", "api-cookie"), Case("wrong", "wrong-api-cookie"), Case("anonymous")],
        ),
    ],
)
def security_api_keys(exposure: Exposure) -> FastAPI:
    app, expose = FastAPI(), as_tool(exposure)
    in_header, in_query = APIKeyHeader(name="X-API-Key"), APIKeyQuery(name="api_key")
    in_cookie = APIKeyCookie(name="session", auto_error=False)

    def check(key: str | None) -> str:
        if key != "key-7f3a":
            raise HTTPException(status_code=403, detail="Could not validate API key")
        return key

    @app.get("/header/")
    @expose
    async def read_with_header(key: Annotated[str, Security(in_header)]) -> dict[str, str]:
        return {"key": check(key)}

    @app.get("/query/")
    @expose
    async def read_with_query(key: Annotated[str, Security(in_query)]) -> dict[str, str]:
        return {"key": check(key)}

    @app.get("/cookie/")
    @expose
    async def read_with_cookie(key: Annotated[str | None, Security(in_cookie)]) -> dict[str, str]:
        return {"key": check(key)}

    return app


@feature(
    "security-scopes",
    [
        (
            Route("GET", "/users/me/items/", "read_own_items"),
            [Case("items-scope", "scoped-items"), Case("me-only", "scoped-me"), Case("anonymous")],
        ),
        (Route("GET", "/users/me/", "read_users_me"), [Case("me", "scoped-me"), Case("none", "scoped-none")]),
        (Route("GET", "/status/", "read_system_status"), [Case("any", "scoped-none"), Case("anonymous")]),
    ],
)
def security_scopes(exposure: Exposure) -> FastAPI:
    app, expose = FastAPI(), as_tool(exposure)
    oauth2_scheme = OAuth2PasswordBearer(tokenUrl="token", scopes={"me": "Read me.", "items": "Read items."})

    async def get_current_user(
        security_scopes: SecurityScopes, token: Annotated[str, Depends(oauth2_scheme)]
    ) -> dict[str, Any]:
        authenticate_value = (
            f'Bearer scope="{security_scopes.scope_str}"' if security_scopes.scopes else "Bearer"
        )
        username, _, scopes = token.partition(":")
        if username != "johndoe":
            raise HTTPException(
                status_code=401,
                detail="Could not validate credentials",
                headers={"WWW-Authenticate": authenticate_value},
            )
        granted = [s for s in scopes.split(",") if s]
        for scope in security_scopes.scopes:
            if scope not in granted:
                raise HTTPException(
                    status_code=401,
                    detail="Not enough permissions",
                    headers={"WWW-Authenticate": authenticate_value},
                )
        return {"username": username, "scopes": granted}

    @app.get("/users/me/")
    @expose
    async def read_users_me(
        user: Annotated[dict[str, Any], Security(get_current_user, scopes=["me"])],
    ) -> dict[str, Any]:
        return user

    @app.get("/users/me/items/")
    @expose
    async def read_own_items(
        user: Annotated[dict[str, Any], Security(get_current_user, scopes=["items", "me"])],
    ) -> list[dict[str, str]]:
        return [{"item_id": "Foo", "owner": user["username"]}]

    @app.get("/status/")
    @expose
    async def read_system_status(
        user: Annotated[dict[str, Any], Depends(get_current_user)],
    ) -> dict[str, str]:
        return {"status": "ok"}

    return app
