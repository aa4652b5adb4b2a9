"""Path, query, header and cookie parameters, as FastAPI's tutorial declares them."""

from enum import Enum
from typing import Annotated, Any, Literal

from fastapi import Cookie, FastAPI, Header, Path, Query
from pydantic import BaseModel, Field

from .._exposure import Exposure, as_skill, as_tool
from ..differential import Case, Route
from . import feature

__all__: list[str] = []

FAKE_ITEMS = [{"item_name": "Foo"}, {"item_name": "Bar"}, {"item_name": "Baz"}]


@feature(
    "path-int",
    [
        (
            Route("GET", "/items/{item_id}", "read_item", skill=True),
            [
                Case("int", path={"item_id": 3}),
                Case("not-an-int", path={"item_id": "foo"}),
                Case("float", path={"item_id": "4.2"}),
            ],
        ),
    ],
)
def path_int(exposure: Exposure) -> FastAPI:
    app, expose = FastAPI(), as_tool(exposure)

    @app.get("/items/{item_id}")
    @as_skill(exposure)
    @expose
    async def read_item(item_id: int) -> dict[str, int]:
        return {"item_id": item_id}

    return app


class ModelName(str, Enum):
    alexnet = "alexnet"
    resnet = "resnet"
    lenet = "lenet"


@feature(
    "path-enum",
    [
        (
            Route("GET", "/models/{model_name}", "get_model"),
            [
                Case("alexnet", path={"model_name": "alexnet"}),
                Case("lenet", path={"model_name": "lenet"}),
                Case("unknown", path={"model_name": "vgg"}),
            ],
        ),
    ],
)
def path_enum(exposure: Exposure) -> FastAPI:
    app, expose = FastAPI(), as_tool(exposure)

    @app.get("/models/{model_name}")
    @expose
    async def get_model(model_name: ModelName) -> dict[str, Any]:
        if model_name is ModelName.alexnet:
            return {"model_name": model_name, "message": "Deep Learning FTW!"}
        if model_name.value == "lenet":
            return {"model_name": model_name, "message": "LeCNN all the images"}
        return {"model_name": model_name, "message": "Have some residuals"}

    return app


@feature(
    "path-file",
    [
        (
            Route("GET", "/files/{file_path:path}", "read_file"),
            [
                Case("nested", path={"file_path": "home/johndoe/myfile.txt"}),
                Case("one", path={"file_path": "notes"}),
            ],
        ),
    ],
)
def path_file(exposure: Exposure) -> FastAPI:
    app, expose = FastAPI(), as_tool(exposure)

    @app.get("/files/{file_path:path}")
    @expose
    async def read_file(file_path: str) -> dict[str, str]:
        return {"file_path": file_path}

    return app


@feature(
    "path-order",
    [
        (Route("GET", "/users/me", "read_user_me"), [Case("me")]),
        (Route("GET", "/users/{user_id}", "read_user"), [Case("someone", path={"user_id": "alice"})]),
    ],
)
def path_order(exposure: Exposure) -> FastAPI:
    app, expose = FastAPI(), as_tool(exposure)

    @app.get("/users/me")
    @expose
    async def read_user_me() -> dict[str, str]:
        return {"user_id": "the current user"}

    @app.get("/users/{user_id}")
    @expose
    async def read_user(user_id: str) -> dict[str, str]:
        return {"user_id": user_id}

    return app


@feature(
    "path-validation",
    [
        (
            Route("GET", "/items/{item_id}", "read_items"),
            [
                Case("in-range", path={"item_id": 5}, query={"item-query": "x", "size": 0.5}),
                Case("zero", path={"item_id": 0}, query={"size": 1.0}),
                Case("too-big", path={"item_id": 1001}, query={"size": 1.0}),
                Case("size-out-of-range", path={"item_id": 5}, query={"size": 10.5}),
            ],
        ),
    ],
)
def path_validation(exposure: Exposure) -> FastAPI:
    app, expose = FastAPI(), as_tool(exposure)

    @app.get("/items/{item_id}")
    @expose
    async def read_items(
        item_id: Annotated[int, Path(title="The ID of the item to get", ge=1, le=1000)],
        size: Annotated[float, Query(gt=0, lt=10.5)],
        q: Annotated[str | None, Query(alias="item-query")] = None,
    ) -> dict[str, Any]:
        results: dict[str, Any] = {"item_id": item_id, "size": size}
        if q:
            results.update({"q": q})
        return results

    return app


@feature(
    "query-defaults",
    [
        (
            Route("GET", "/items/", "read_item"),
            [
                Case("defaults"),
                Case("page", query={"skip": 1, "limit": 1}),
                Case("not-an-int", query={"skip": "one"}),
            ],
        ),
    ],
)
def query_defaults(exposure: Exposure) -> FastAPI:
    app, expose = FastAPI(), as_tool(exposure)

    @app.get("/items/")
    @expose
    def read_item(skip: int = 0, limit: int = 10) -> list[dict[str, str]]:
        return FAKE_ITEMS[skip : skip + limit]

    return app


@feature(
    "query-optional-bool",
    [
        (
            Route("GET", "/items/{item_id}", "read_item"),
            [
                Case("plain", path={"item_id": "foo"}),
                Case("q", path={"item_id": "foo"}, query={"q": "x"}),
                Case("short-yes", path={"item_id": "foo"}, query={"short": "yes"}),
                Case("short-not-bool", path={"item_id": "foo"}, query={"short": "maybe"}),
            ],
        ),
    ],
)
def query_optional_bool(exposure: Exposure) -> FastAPI:
    app, expose = FastAPI(), as_tool(exposure)

    @app.get("/items/{item_id}")
    @expose
    async def read_item(item_id: str, q: str | None = None, short: bool = False) -> dict[str, Any]:
        item: dict[str, Any] = {"item_id": item_id}
        if q:
            item.update({"q": q})
        if not short:
            item.update({"description": "This is an amazing item that has a long description"})
        return item

    return app


@feature(
    "query-required",
    [
        (
            Route("GET", "/items/{item_id}", "read_user_item"),
            [
                Case("given", path={"item_id": "foo"}, query={"needy": "sooooneedy"}),
                Case("missing", path={"item_id": "foo"}),
                Case("with-limit", path={"item_id": "foo"}, query={"needy": "n", "skip": 2, "limit": 3}),
            ],
        ),
    ],
)
def query_required(exposure: Exposure) -> FastAPI:
    app, expose = FastAPI(), as_tool(exposure)

    @app.get("/items/{item_id}")
    @expose
    async def read_user_item(
        item_id: str, needy: str, skip: int = 0, limit: int | None = None
    ) -> dict[str, Any]:
        return {"item_id": item_id, "needy": needy, "skip": skip, "limit": limit}

    return app


@feature(
    "query-list",
    [
        (
            Route("GET", "/items/", "read_items"),
            [Case("two", query={"q": ["foo", "bar"]}), Case("none"), Case("one", query={"q": ["baz"]})],
        ),
        (Route("GET", "/defaults/", "read_defaults"), [Case("default"), Case("given", query={"q": ["x"]})]),
    ],
)
def query_list(exposure: Exposure) -> FastAPI:
    app, expose = FastAPI(), as_tool(exposure)

    @app.get("/items/")
    @expose
    async def read_items(q: Annotated[list[str] | None, Query()] = None) -> dict[str, Any]:
        return {"q": q}

    @app.get("/defaults/")
    @expose
    async def read_defaults(q: Annotated[list[str], Query()] = ["foo", "bar"]) -> dict[str, Any]:  # noqa: B006
        return {"q": q}

    return app


@feature(
    "query-validation",
    [
        (
            Route("GET", "/items/", "read_items"),
            [
                Case("fixed", query={"q": "fixedquery"}),
                Case("none"),
                Case("too-short", query={"q": "ab"}),
                Case("pattern", query={"q": "fixedquerz"}),
            ],
        ),
    ],
)
def query_validation(exposure: Exposure) -> FastAPI:
    app, expose = FastAPI(), as_tool(exposure)

    @app.get("/items/")
    @expose
    async def read_items(
        q: Annotated[str | None, Query(min_length=3, max_length=50, pattern="^fixedquery$")] = None,
    ) -> dict[str, Any]:
        results: dict[str, Any] = {"items": [{"item_id": "Foo"}, {"item_id": "Bar"}]}
        if q:
            results.update({"q": q})
        return results

    return app


class FilterParams(BaseModel):
    model_config = {"extra": "forbid"}

    limit: int = Field(100, gt=0, le=100)
    offset: int = Field(0, ge=0)
    order_by: Literal["created_at", "updated_at"] = "created_at"
    tags: list[str] = []


@feature(
    "query-model",
    [
        (
            Route("GET", "/items/", "read_items", model="filter_query"),
            [
                Case("defaults"),
                Case("given", query={"limit": 5, "order_by": "updated_at", "tags": ["a", "b"]}),
                Case("bad-order", query={"order_by": "name"}),
                Case("extra", query={"tool": "plumbus"}),
            ],
        ),
    ],
)
def query_model(exposure: Exposure) -> FastAPI:
    app, expose = FastAPI(), as_tool(exposure)

    @app.get("/items/")
    @expose
    async def read_items(filter_query: Annotated[FilterParams, Query()]) -> FilterParams:
        return filter_query

    return app


@feature(
    "headers",
    [
        (Route("GET", "/items/", "read_items"), [Case("token", "token"), Case("none")]),
        (Route("GET", "/strange/", "read_strange"), [Case("underscored", "odd-headers"), Case("none")]),
        (Route("GET", "/tokens/", "read_tokens"), [Case("one", "token"), Case("none")]),
    ],
)
def headers(exposure: Exposure) -> FastAPI:
    app, expose = FastAPI(), as_tool(exposure)

    @app.get("/items/")
    @expose
    async def read_items(x_token: Annotated[str | None, Header()] = None) -> dict[str, Any]:
        return {"X-Token": x_token}

    @app.get("/strange/")
    @expose
    async def read_strange(
        strange_header: Annotated[str | None, Header(convert_underscores=False)] = None,
    ) -> dict[str, Any]:
        return {"strange_header": strange_header}

    @app.get("/tokens/")
    @expose
    async def read_tokens(x_token: Annotated[list[str] | None, Header()] = None) -> dict[str, Any]:
        return {"X-Token values": x_token}

    return app


class CommonHeaders(BaseModel):
    save_data: bool
    x_tag: list[str] = []


class Cookies(BaseModel):
    session_id: str
    fatebook_tracker: str | None = None


@feature(
    "cookies-and-models",
    [
        (Route("GET", "/ads/", "read_ads"), [Case("cookie", "ads-cookie"), Case("none")]),
        (Route("GET", "/header-model/", "read_header_model"), [Case("given", "save-data"), Case("missing")]),
        (
            Route("GET", "/cookie-model/", "read_cookie_model"),
            [Case("given", "session-cookies"), Case("missing")],
        ),
    ],
)
def cookies_and_models(exposure: Exposure) -> FastAPI:
    app, expose = FastAPI(), as_tool(exposure)

    @app.get("/ads/")
    @expose
    async def read_ads(ads_id: Annotated[str | None, Cookie()] = None) -> dict[str, Any]:
        return {"ads_id": ads_id}

    @app.get("/header-model/")
    @expose
    async def read_header_model(headers: Annotated[CommonHeaders, Header()]) -> CommonHeaders:
        return headers

    @app.get("/cookie-model/")
    @expose
    async def read_cookie_model(cookies: Annotated[Cookies, Cookie()]) -> Cookies:
        return cookies

    return app
