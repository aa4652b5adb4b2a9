"""response_model and its options, status codes, errors and exception handlers, and custom responses."""

import os
import tempfile
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI, HTTPException, Request, Response, status
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import (
    FileResponse,
    HTMLResponse,
    JSONResponse,
    PlainTextResponse,
    RedirectResponse,
    StreamingResponse,
)
from pydantic import BaseModel, EmailStr, Field
from starlette.exceptions import HTTPException as StarletteHTTPException

from .._exposure import Exposure, as_skill, as_tool
from ..differential import Case, Route
from . import feature

__all__: list[str] = []


class UserIn(BaseModel):
    username: str
    password: str
    email: EmailStr
    full_name: str | None = None


class UserOut(BaseModel):
    username: str
    email: EmailStr
    full_name: str | None = None


class BaseUser(BaseModel):
    username: str
    email: EmailStr


class UserWithSecret(BaseUser):
    password: str


NEW_USER = {"username": "john", "password": "secret", "email": "john@example.com"}


@feature(
    "response-model-filter",
    [
        (
            Route("POST", "/user/", "create_user", body="user", skill=True),
            [Case("created", body=NEW_USER), Case("bad-email", body={**NEW_USER, "email": "john"})],
        ),
        (Route("POST", "/annotated/", "create_annotated", body="user"), [Case("created", body=NEW_USER)]),
        (Route("GET", "/precedence/", "read_precedence"), [Case("read")]),
    ],
)
def response_model_filter(exposure: Exposure) -> FastAPI:
    app, expose = FastAPI(), as_tool(exposure)

    @app.post("/user/", response_model=UserOut)
    @as_skill(exposure)
    @expose
    async def create_user(user: UserIn) -> Any:
        return user

    @app.post("/annotated/")
    @expose
    async def create_annotated(user: UserIn) -> BaseUser:
        return UserWithSecret(**user.model_dump())

    @app.get("/precedence/", response_model=BaseUser)
    @expose
    async def read_precedence() -> UserWithSecret:
        return UserWithSecret(username="jane", email="jane@example.com", password="hunter2")

    return app


class TaxedItem(BaseModel):
    name: str
    description: str | None = None
    price: float
    tax: float = 10.5
    tags: list[str] = []


ITEMS = {
    "foo": {"name": "Foo", "price": 50.2},
    "bar": {"name": "Bar", "description": "The bartenders", "price": 62, "tax": 20.2},
    "baz": {"name": "Baz", "description": None, "price": 50.2, "tax": 10.5, "tags": []},
}
ITEM_CASES = [
    Case("foo", path={"item_id": "foo"}),
    Case("bar", path={"item_id": "bar"}),
    Case("baz", path={"item_id": "baz"}),
]


@feature(
    "response-model-options",
    [
        (Route("GET", "/items/{item_id}", "read_item"), ITEM_CASES),
        (Route("GET", "/items/{item_id}/name", "read_item_name"), ITEM_CASES[1:2]),
        (Route("GET", "/items/{item_id}/public", "read_item_public_data"), ITEM_CASES[1:2]),
        (Route("GET", "/defaults/{item_id}", "read_item_defaults"), ITEM_CASES),
        (Route("GET", "/none/{item_id}", "read_item_none"), ITEM_CASES),
        (Route("GET", "/all/", "read_all"), [Case("all")]),
    ],
)
def response_model_options(exposure: Exposure) -> FastAPI:
    app, expose = FastAPI(), as_tool(exposure)

    @app.get("/items/{item_id}", response_model=TaxedItem, response_model_exclude_unset=True)
    @expose
    async def read_item(item_id: str) -> Any:
        return ITEMS[item_id]

    @app.get(
        "/items/{item_id}/name", response_model=TaxedItem, response_model_include={"name", "description"}
    )
    @expose
    async def read_item_name(item_id: str) -> Any:
        return ITEMS[item_id]

    @app.get("/items/{item_id}/public", response_model=TaxedItem, response_model_exclude={"tax"})
    @expose
    async def read_item_public_data(item_id: str) -> Any:
        return ITEMS[item_id]

    @app.get("/defaults/{item_id}", response_model=TaxedItem, response_model_exclude_defaults=True)
    @expose
    async def read_item_defaults(item_id: str) -> Any:
        return ITEMS[item_id]

    @app.get("/none/{item_id}", response_model=TaxedItem, response_model_exclude_none=True)
    @expose
    async def read_item_none(item_id: str) -> Any:
        return ITEMS[item_id]

    @app.get("/all/", response_model=list[TaxedItem], response_model_exclude_unset=True)
    @expose
    async def read_all() -> Any:
        return list(ITEMS.values())

    return app


class Aliased(BaseModel):
    item_name: str = Field(alias="itemName")
    secret: str | None = Field(default=None, exclude=True)


class PlaneItem(BaseModel):
    description: str
    type: str = "plane"
    size: int


class CarItem(BaseModel):
    description: str
    type: str = "car"


@feature(
    "response-shapes",
    [
        (Route("GET", "/aliased/", "read_aliased"), [Case("aliased")]),
        (Route("GET", "/unaliased/", "read_unaliased"), [Case("by-name")]),
        (
            Route("GET", "/vehicles/{item_id}", "read_vehicle"),
            [Case("car", path={"item_id": "item1"}), Case("plane", path={"item_id": "item2"})],
        ),
        (Route("GET", "/keyword-weights/", "read_keyword_weights"), [Case("weights")]),
        (Route("GET", "/names/", "read_names"), [Case("names")]),
    ],
)
def response_shapes(exposure: Exposure) -> FastAPI:
    app, expose = FastAPI(), as_tool(exposure)
    vehicles = {
        "item1": {"description": "All my friends drive a low rider", "type": "car"},
        "item2": {"description": "Music is my aeroplane", "type": "plane", "size": 5},
    }

    @app.get("/aliased/", response_model=Aliased)
    @expose
    async def read_aliased() -> Any:
        return {"itemName": "Foo", "secret": "s3cret"}

    @app.get("/unaliased/", response_model=Aliased, response_model_by_alias=False)
    @expose
    async def read_unaliased() -> Any:
        return {"itemName": "Foo", "secret": "s3cret"}

    @app.get("/vehicles/{item_id}", response_model=PlaneItem | CarItem)
    @expose
    async def read_vehicle(item_id: str) -> Any:
        return vehicles[item_id]

    @app.get("/keyword-weights/", response_model=dict[str, float])
    @expose
    async def read_keyword_weights() -> Any:
        return {"foo": 2.3, "bar": 3.4}

    @app.get("/names/")
    @expose
    def read_names() -> list[str]:
        return ["alice", "bob"]

    return app


class Message(BaseModel):
    message: str


@feature(
    "status-codes",
    [
        (Route("POST", "/items/", "create_item"), [Case("created", query={"name": "Foo"})]),
        (
            Route("PUT", "/get-or-create-task/{task_id}", "get_or_create_task"),
            [Case("existing", path={"task_id": "foo"}), Case("new", path={"task_id": "baz"})],
        ),
        (
            Route("GET", "/responses/{item_id}", "read_documented"),
            [Case("found", path={"item_id": "foo"}), Case("missing", path={"item_id": "bar"})],
        ),
        (Route("DELETE", "/items/{item_id}", "delete_item"), [Case("deleted", path={"item_id": "foo"})]),
    ],
)
def status_codes(exposure: Exposure) -> FastAPI:
    app, expose = FastAPI(), as_tool(exposure)
    tasks = {"foo": "Listen to the Bar Fighters"}

    @app.post("/items/", status_code=201)
    @expose
    async def create_item(name: str) -> dict[str, str]:
        return {"name": name}

    @app.put("/get-or-create-task/{task_id}", status_code=200)
    @expose
    def get_or_create_task(task_id: str, response: Response) -> str:
        if task_id not in tasks:
            response.status_code = status.HTTP_201_CREATED
            return "This didn't exist before"
        return tasks[task_id]

    @app.get("/responses/{item_id}", response_model=TaxedItem, responses={404: {"model": Message}})
    @expose
    async def read_documented(item_id: str) -> Any:
        if item_id == "foo":
            return {"name": "Foo", "price": 1.0}
        return JSONResponse(status_code=404, content={"message": "Item not found"})

    @app.delete("/items/{item_id}", status_code=204)
    @expose
    async def delete_item(item_id: str) -> None:
        return None

    return app


class UnicornException(Exception):
    def __init__(self, name: str) -> None:
        self.name = name


@feature(
    "errors",
    [
        (
            Route("GET", "/items/{item_id}", "read_item"),
            [Case("found", path={"item_id": "foo"}), Case("missing", path={"item_id": "bar"})],
        ),
        (
            Route("GET", "/items-header/{item_id}", "read_item_header"),
            [Case("missing", path={"item_id": "bar"})],
        ),
        (
            Route("GET", "/unicorns/{name}", "read_unicorn"),
            [Case("unicorn", path={"name": "yolo"}), Case("horse", path={"name": "horse"})],
        ),
        (Route("GET", "/busy/", "read_busy"), [Case("busy")]),
        (Route("GET", "/broken/", "read_broken"), [Case("broken", secret="the vault code is 1234")]),
        (Route("POST", "/conflict/", "create_conflict"), [Case("conflict")]),
    ],
)
def errors(exposure: Exposure) -> FastAPI:
    app, expose = FastAPI(), as_tool(exposure)
    items = {"foo": "The Foo Wrestlers"}

    @app.exception_handler(UnicornException)
    async def unicorn_exception_handler(request: Request, exc: UnicornException) -> JSONResponse:
        return JSONResponse(status_code=418, content={"message": f"Oops! {exc.name} did something."})

    @app.get("/items/{item_id}")
    @expose
    async def read_item(item_id: str) -> dict[str, str]:
        if item_id not in items:
            raise HTTPException(status_code=404, detail="Item not found")
        return {"item": items[item_id]}

    @app.get("/items-header/{item_id}")
    @expose
    async def read_item_header(item_id: str) -> dict[str, str]:
        raise HTTPException(
            status_code=404, detail="Item not found", headers={"X-Error": "There goes my error"}
        )

    @app.get("/unicorns/{name}")
    @expose
    async def read_unicorn(name: str) -> dict[str, str]:
        if name == "yolo":
            raise UnicornException(name=name)
        return {"unicorn_name": name}

    @app.get("/busy/")
    @expose
    def read_busy() -> dict[str, str]:
        raise HTTPException(503, "Down for maintenance", headers={"Retry-After": "120"})

    @app.get("/broken/")
    @expose
    def read_broken() -> dict[str, str]:
        raise RuntimeError("the vault code is 1234")

    @app.post("/conflict/")
    @expose
    def create_conflict() -> dict[str, str]:
        raise HTTPException(409, detail="Already exists")

    return app


@feature(
    "error-handler-overrides",
    [
        (
            Route("GET", "/items/{item_id}", "read_item"),
            [
                Case("found", path={"item_id": 1}),
                Case("three", path={"item_id": 3}),
                Case("not-an-int", path={"item_id": "foo"}),
            ],
        ),
    ],
)
def error_handler_overrides(exposure: Exposure) -> FastAPI:
    app, expose = FastAPI(), as_tool(exposure)

    @app.exception_handler(StarletteHTTPException)
    async def http_exception_handler(request: Request, exc: StarletteHTTPException) -> PlainTextResponse:
        return PlainTextResponse(str(exc.detail), status_code=exc.status_code)

    @app.exception_handler(RequestValidationError)
    async def validation_exception_handler(
        request: Request, exc: RequestValidationError
    ) -> PlainTextResponse:
        return PlainTextResponse(f"Invalid: {len(exc.errors())} error(s)", status_code=400)

    @app.get("/items/{item_id}")
    @expose
    async def read_item(item_id: int) -> dict[str, int]:
        if item_id == 3:
            raise HTTPException(status_code=418, detail="Nope! I don't like 3.")
        return {"item_id": item_id}

    return app


class IndentedJSON(JSONResponse):
    """A JSON response class of the app's own (FastAPI's "custom response class" example, without orjson)."""

    def render(self, content: Any) -> bytes:
        import json

        return json.dumps(content, indent=2, sort_keys=True).encode()


@feature(
    "custom-responses",
    [
        (Route("GET", "/html/", "read_html"), [Case("html")]),
        (Route("GET", "/text/", "read_text", skill=True), [Case("text")]),
        (Route("GET", "/accepted/", "read_accepted"), [Case("accepted")]),
        (Route("GET", "/json-error/", "read_json_error"), [Case("teapot")]),
        (Route("GET", "/indented/", "read_indented"), [Case("indented")]),
        (Route("GET", "/legacy/", "read_legacy"), [Case("xml")]),
        (Route("GET", "/direct/", "read_direct"), [Case("direct")]),
        (Route("GET", "/redirect/", "read_redirect"), [Case("redirect")]),
        (Route("GET", "/stream/", "read_stream"), [Case("stream")]),
        (Route("GET", "/file/", "read_file"), [Case("file")]),
    ],
)
def custom_responses(exposure: Exposure) -> FastAPI:
    app, expose = FastAPI(), as_tool(exposure)
    folder = tempfile.mkdtemp(prefix="agentmw-feature-file-")
    report = os.path.join(folder, "report.txt")
    with open(report, "w") as handle:
        handle.write("quarterly numbers: 1, 2, 3\n")

    @app.get("/html/", response_class=HTMLResponse)
    @expose
    async def read_html() -> str:
        return "<html><body><h1>Look ma! HTML!</h1></body></html>"

    @app.get("/text/", response_class=PlainTextResponse)
    @as_skill(exposure)
    @expose
    async def read_text() -> str:
        return "Hello World"

    @app.get("/accepted/")
    @expose
    async def read_accepted() -> JSONResponse:
        return JSONResponse(status_code=202, content={"queued": True})

    @app.get("/json-error/")
    @expose
    async def read_json_error() -> JSONResponse:
        return JSONResponse(status_code=418, content={"detail": "I'm a teapot"})

    @app.get("/indented/", response_class=IndentedJSON)
    @expose
    async def read_indented() -> dict[str, Any]:
        return {"b": [1, 2], "a": "first"}

    @app.get("/legacy/")
    @expose
    def read_legacy() -> Response:
        data = """<?xml version="1.0"?><shampoo><Header>Apply shampoo here.</Header></shampoo>"""
        return Response(content=data, media_type="application/xml")

    @app.get("/direct/")
    @expose
    def read_direct() -> JSONResponse:
        return JSONResponse(content=jsonable_encoder(TaxedItem(name="Foo", price=1.0)))

    @app.get("/redirect/")
    @expose
    async def read_redirect() -> RedirectResponse:
        return RedirectResponse("https://typer.tiangolo.com")

    @app.get("/stream/")
    @expose
    async def read_stream() -> StreamingResponse:
        async def fake_video_streamer() -> AsyncIterator[bytes]:
            for i in range(3):
                yield b"some fake video bytes " + str(i).encode() + b"\n"

        return StreamingResponse(fake_video_streamer(), media_type="text/plain")

    @app.get("/file/")
    @expose
    async def read_file() -> FileResponse:
        return FileResponse(report, media_type="text/plain")

    return app
