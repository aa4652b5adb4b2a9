"""Request bodies (models, several, embedded, singular values, nested, lists, dicts), forms and extra data types."""

from datetime import date, datetime, time, timedelta
from decimal import Decimal
from typing import Annotated, Any
from uuid import UUID

from fastapi import Body, FastAPI, Form, Query
from pydantic import BaseModel, Field, HttpUrl

from .._exposure import Exposure, as_skill, as_tool
from ..differential import EMBED, Case, Route
from . import feature

__all__: list[str] = []


class Item(BaseModel):
    name: str
    description: str | None = None
    price: float
    tax: float | None = None


class User(BaseModel):
    username: str
    full_name: str | None = None


FOO = {"name": "Foo", "price": 35.4}
FOO_TAXED = {"name": "Foo", "description": "A very nice Item", "price": 35.4, "tax": 3.2}


@feature(
    "body-model",
    [
        (
            Route("POST", "/items/", "create_item", body="item", skill=True),
            [
                Case("minimal", body=FOO),
                Case("taxed", body=FOO_TAXED),
                Case("no-price", body={"name": "Foo"}),
                Case("price-not-a-number", body={"name": "Foo", "price": "cheap"}),
            ],
        ),
    ],
)
def body_model(exposure: Exposure) -> FastAPI:
    app, expose = FastAPI(), as_tool(exposure)

    @app.post("/items/")
    @as_skill(exposure)
    @expose
    async def create_item(item: Item) -> dict[str, Any]:
        item_dict = item.model_dump()
        if item.tax is not None:
            item_dict.update({"price_with_tax": item.price + item.tax})
        return item_dict

    return app


@feature(
    "body-path-query",
    [
        (
            Route("PUT", "/items/{item_id}", "update_item", body="item"),
            [
                Case("plain", path={"item_id": 5}, body=FOO),
                Case("q", path={"item_id": 5}, query={"q": "x"}, body=FOO),
                Case("bad-path", path={"item_id": "five"}, body=FOO),
            ],
        ),
    ],
)
def body_path_query(exposure: Exposure) -> FastAPI:
    app, expose = FastAPI(), as_tool(exposure)

    @app.put("/items/{item_id}")
    @expose
    def update_item(item_id: int, item: Item, q: str | None = None) -> dict[str, Any]:
        result: dict[str, Any] = {"item_id": item_id, **item.model_dump()}
        if q:
            result.update({"q": q})
        return result

    return app


@feature(
    "body-multiple",
    [
        (
            Route("PUT", "/items/{item_id}", "update_item", body=EMBED),
            [
                Case("both", path={"item_id": 5}, body={"item": FOO, "user": {"username": "dave"}}),
                Case("no-user", path={"item_id": 5}, body={"item": FOO}),
            ],
        ),
        (
            Route("PUT", "/ranked/{item_id}", "update_ranked", body=EMBED),
            [
                Case(
                    "all",
                    path={"item_id": 5},
                    body={"item": FOO, "user": {"username": "dave"}, "importance": 5},
                ),
                Case("no-importance", path={"item_id": 5}, body={"item": FOO, "user": {"username": "dave"}}),
            ],
        ),
        (
            Route("PUT", "/embedded/{item_id}", "update_embedded", body=EMBED),
            [
                Case("embedded", path={"item_id": 5}, body={"item": FOO}),
                Case("not-embedded", path={"item_id": 5}, body=FOO),
            ],
        ),
    ],
)
def body_multiple(exposure: Exposure) -> FastAPI:
    app, expose = FastAPI(), as_tool(exposure)

    @app.put("/items/{item_id}")
    @expose
    async def update_item(item_id: int, item: Item, user: User) -> dict[str, Any]:
        return {"item_id": item_id, "item": item, "user": user}

    @app.put("/ranked/{item_id}")
    @expose
    async def update_ranked(
        item_id: int, item: Item, user: User, importance: Annotated[int, Body(gt=0)]
    ) -> dict[str, Any]:
        return {"item_id": item_id, "item": item, "user": user, "importance": importance}

    @app.put("/embedded/{item_id}")
    @expose
    async def update_embedded(item_id: int, item: Annotated[Item, Body(embed=True)]) -> dict[str, Any]:
        return {"item_id": item_id, "item": item}

    return app


class Image(BaseModel):
    url: HttpUrl
    name: str


class NestedItem(BaseModel):
    name: str
    price: float
    tags: list[str] = []
    images: list[Image] | None = None


class Offer(BaseModel):
    name: str
    items: list[NestedItem]


IMAGE = {"url": "http://example.com/baz.jpg", "name": "The Foo live"}


@feature(
    "body-nested",
    [
        (
            Route("PUT", "/items/{item_id}", "update_item", body="item"),
            [
                Case(
                    "nested",
                    path={"item_id": 1},
                    body={"name": "Foo", "price": 1.5, "tags": ["a"], "images": [IMAGE]},
                ),
                Case(
                    "bad-url",
                    path={"item_id": 1},
                    body={"name": "Foo", "price": 1.5, "images": [{"url": "x", "name": "y"}]},
                ),
            ],
        ),
        (
            Route("POST", "/offers/", "create_offer", body="offer"),
            [
                Case("offer", body={"name": "deal", "items": [{"name": "Foo", "price": 1.5}]}),
                Case("no-items", body={"name": "deal"}),
            ],
        ),
        (
            Route("POST", "/images/multiple/", "create_multiple_images", body="images"),
            [Case("two", body=[IMAGE, {**IMAGE, "name": "two"}]), Case("not-a-list", body=IMAGE)],
        ),
        (
            Route("POST", "/index-weights/", "create_index_weights", body="weights"),
            [Case("weights", body={"1": 0.5, "2": 1.5}), Case("bad-key", body={"one": 0.5})],
        ),
    ],
)
def body_nested(exposure: Exposure) -> FastAPI:
    app, expose = FastAPI(), as_tool(exposure)

    @app.put("/items/{item_id}")
    @expose
    async def update_item(item_id: int, item: NestedItem) -> dict[str, Any]:
        return {"item_id": item_id, "item": item}

    @app.post("/offers/")
    @expose
    async def create_offer(offer: Offer) -> Offer:
        return offer

    @app.post("/images/multiple/")
    @expose
    async def create_multiple_images(images: list[Image]) -> list[Image]:
        return images

    @app.post("/index-weights/")
    @expose
    async def create_index_weights(weights: dict[int, float]) -> dict[int, float]:
        return weights

    return app


class ExampleItem(BaseModel):
    name: str = Field(examples=["Foo"])
    price: float = Field(gt=0, description="The price must be greater than zero", examples=[35.4])

    model_config = {"json_schema_extra": {"examples": [{"name": "Foo", "price": 35.4}]}}


@feature(
    "body-field-examples",
    [
        (
            Route("PUT", "/items/{item_id}", "update_item", body="item"),
            [
                Case("valid", path={"item_id": 1}, body=FOO),
                Case("free", path={"item_id": 1}, body={"name": "F", "price": 0}),
            ],
        ),
    ],
)
def body_field_examples(exposure: Exposure) -> FastAPI:
    app, expose = FastAPI(), as_tool(exposure)

    @app.put("/items/{item_id}")
    @expose
    async def update_item(item_id: int, item: Annotated[ExampleItem, Body(examples=[FOO])]) -> dict[str, Any]:
        return {"item_id": item_id, "item": item}

    return app


@feature(
    "form-data",
    [
        (
            Route("POST", "/login/", "login", body=EMBED, form=True),
            [
                Case("given", body={"username": "johndoe", "password": "secret"}),
                Case("no-password", body={"username": "johndoe"}),
            ],
        ),
    ],
)
def form_data(exposure: Exposure) -> FastAPI:
    app, expose = FastAPI(), as_tool(exposure)

    @app.post("/login/")
    @expose
    async def login(username: Annotated[str, Form()], password: Annotated[str, Form()]) -> dict[str, str]:
        return {"username": username}

    return app


class FormData(BaseModel):
    username: str
    password: str
    model_config = {"extra": "forbid"}


@feature(
    "form-model",
    [
        (
            Route("POST", "/login/", "login", body=EMBED, form=True, model="data"),
            [
                Case("given", body={"username": "johndoe", "password": "secret"}),
                Case("missing", body={"username": "johndoe"}),
            ],
        ),
    ],
)
def form_model(exposure: Exposure) -> FastAPI:
    app, expose = FastAPI(), as_tool(exposure)

    @app.post("/login/")
    @expose
    async def login(data: Annotated[FormData, Form()]) -> FormData:
        return data

    return app


ITEM_ID = "3fa85f64-5717-4562-b3fc-2c963f66afa6"
WHEN = {
    "start_datetime": "2026-05-04T12:00:00",
    "end_datetime": "2026-05-05T13:30:00",
    "process_after": 3600,
    "repeat_at": "08:15:00",
}


@feature(
    "extra-types",
    [
        (
            Route("PUT", "/items/{item_id}", "read_items", body=EMBED),
            [
                Case("given", path={"item_id": ITEM_ID}, body=WHEN),
                Case("not-a-uuid", path={"item_id": "item-1"}, body=WHEN),
                Case("bad-datetime", path={"item_id": ITEM_ID}, body={**WHEN, "start_datetime": "tomorrow"}),
            ],
        ),
        (Route("GET", "/encoded/", "read_encoded"), [Case("values")]),
        (
            Route("GET", "/days/", "read_day"),
            [Case("day", query={"day": "2026-05-04"}), Case("not-a-day", query={"day": "May 4"})],
        ),
    ],
)
def extra_types(exposure: Exposure) -> FastAPI:
    app, expose = FastAPI(), as_tool(exposure)

    @app.put("/items/{item_id}")
    @expose
    async def read_items(
        item_id: UUID,
        start_datetime: Annotated[datetime, Body()],
        end_datetime: Annotated[datetime, Body()],
        process_after: Annotated[timedelta, Body()],
        repeat_at: Annotated[time | None, Body()] = None,
    ) -> dict[str, Any]:
        start_process = start_datetime + process_after
        duration = end_datetime - start_process
        return {
            "item_id": item_id,
            "start_datetime": start_datetime,
            "end_datetime": end_datetime,
            "process_after": process_after,
            "repeat_at": repeat_at,
            "start_process": start_process,
            "duration": duration,
        }

    @app.get("/encoded/")
    @expose
    def read_encoded() -> Any:
        """Values with no JSON form of their own, inside a plain dict: FastAPI's jsonable_encoder writes them."""
        return {
            "price": Decimal("10.50"),
            "raw": b"bytes",
            "tags": frozenset({"one"}),
            "day": date(2026, 5, 4),
            "id": UUID(ITEM_ID),
            "model": Item(name="Foo", price=1.0),
            "when": datetime(2026, 5, 4, 12, 0),
        }

    @app.get("/days/")
    @expose
    def read_day(day: Annotated[date, Query()]) -> dict[str, Any]:
        return {"day": day, "weekday": day.isoweekday()}

    return app
