"""A small shop API: customers identified by an ``X-API-Key`` header (``APIKeyHeader``), a cart in a cookie
read by a dependency, an admin router included with ``include_router(..., dependencies=[...])``, handlers that
return internal models (cost prices, supplier notes) under a public ``response_model`` or return annotation,
``response_model_include`` and ``_exclude_none``, a list of strings, two body parameters (an embedded body),
``Annotated`` path and query constraints, a checkout (a ``@skill``) with a background receipt, and an image
upload that agents are not offered.
"""

import json
import sqlite3
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Annotated, Any
from uuid import UUID

from fastapi import (
    APIRouter,
    BackgroundTasks,
    Body,
    Cookie,
    Depends,
    FastAPI,
    HTTPException,
    Path,
    Query,
    Request,
    Response,
    UploadFile,
)
from fastapi.responses import StreamingResponse
from fastapi.security import APIKeyHeader
from pydantic import BaseModel, Field

from agentmw import Agent

from ._exposure import Exposure, app_factory, as_skill, as_tool, attach_agent, connect, database_of

__all__ = [
    "API_KEYS",
    "CART_ALICE",
    "ORDER_ALICE",
    "ORDER_BOB",
    "app",  # noqa: F822 - built on first access by the module's __getattr__ (app_factory)
    "build_agent",
    "create_api",
    "create_app",
    "init_db",
    "new_id",
    "utc_now",
]

API_KEYS = {"alice": "key-alice-7f3a", "bob": "key-bob-91c2", "staff": "key-staff-00aa"}
CART_ALICE = "cart-alice-0001"
ORDER_ALICE = UUID("33333333-0000-4000-8000-00000000a11c")
ORDER_BOB = UUID("33333333-0000-4000-8000-000000000b0b")


def new_id() -> UUID:
    return uuid.uuid4()


def utc_now() -> datetime:
    return datetime.now(UTC)


class Product(BaseModel):
    id: int
    name: str
    price: float
    description: str | None = None


class ProductInternal(Product):
    cost: float
    supplier_notes: str | None = None


class CartLine(BaseModel):
    product_id: int
    name: str
    quantity: int
    note: str | None = None


class Cart(BaseModel):
    id: str
    lines: list[CartLine]
    total: float
    coupon: str | None = None


class Order(BaseModel):
    id: UUID
    total: float
    placed_at: datetime
    lines: list[CartLine]


class OrderAdmin(Order):
    customer: str


class PriceUpdate(BaseModel):
    price: float = Field(gt=0)
    reason: str


SCHEMA = """
CREATE TABLE customer (name TEXT PRIMARY KEY, api_key TEXT UNIQUE NOT NULL, staff INTEGER NOT NULL);
CREATE TABLE product (id INTEGER PRIMARY KEY, name TEXT NOT NULL, price REAL NOT NULL, description TEXT,
                      cost REAL NOT NULL, supplier_notes TEXT);
CREATE TABLE tag (product_id INTEGER NOT NULL, tag TEXT NOT NULL);
CREATE TABLE cart (id TEXT PRIMARY KEY, customer TEXT NOT NULL);
CREATE TABLE cart_line (cart_id TEXT NOT NULL, product_id INTEGER NOT NULL, quantity INTEGER NOT NULL, note TEXT);
CREATE TABLE orders (id TEXT PRIMARY KEY, customer TEXT NOT NULL, total REAL NOT NULL, placed_at TEXT NOT NULL,
                     lines TEXT NOT NULL);
CREATE TABLE receipt (order_id TEXT NOT NULL, customer TEXT NOT NULL);
"""


def init_db(path: str) -> None:
    with sqlite3.connect(path) as db:
        db.executescript(SCHEMA)
        db.executemany(
            "INSERT INTO customer VALUES (?, ?, ?)",
            [("alice", API_KEYS["alice"], 0), ("bob", API_KEYS["bob"], 0), ("staff", API_KEYS["staff"], 1)],
        )
        db.executemany(
            "INSERT INTO product VALUES (?, ?, ?, ?, ?, ?)",
            [
                (1, "Espresso beans", 14.5, "1 kg, dark roast", 6.1, "supplier asks 30 days"),
                (2, "Grinder", 89.0, None, 41.0, None),
                (3, "Milk jug", 12.0, "stainless", 3.2, "discontinue in June"),
            ],
        )
        db.executemany("INSERT INTO tag VALUES (?, ?)", [(1, "coffee"), (1, "organic"), (2, "hardware")])
        db.execute("INSERT INTO cart VALUES (?, 'alice')", (CART_ALICE,))
        db.execute("INSERT INTO cart_line VALUES (?, 1, 2, NULL)", (CART_ALICE,))
        lines = '[{"product_id": 2, "name": "Grinder", "quantity": 1, "note": null}]'
        db.executemany(
            "INSERT INTO orders VALUES (?, ?, ?, ?, ?)",
            [
                (str(ORDER_ALICE), "alice", 89.0, "2026-02-01T10:00:00+00:00", lines),
                (str(ORDER_BOB), "bob", 89.0, "2026-02-02T11:00:00+00:00", lines),
            ],
        )


def get_db(request: Request) -> Iterator[sqlite3.Connection]:
    """The session; a write that breaks a constraint is the client's conflict, whichever handler made it."""
    try:
        yield from connect(request, init_db)
    except sqlite3.IntegrityError as exc:
        raise HTTPException(status_code=409, detail="That conflicts with existing data") from exc


Session = Annotated[sqlite3.Connection, Depends(get_db)]
api_key_header = APIKeyHeader(name="X-API-Key")


def current_customer(api_key: Annotated[str, Depends(api_key_header)], session: Session) -> str:
    row = session.execute("SELECT name FROM customer WHERE api_key = ?", (api_key,)).fetchone()
    if row is None:
        raise HTTPException(status_code=401, detail="Invalid API key", headers={"WWW-Authenticate": "APIKey"})
    return row["name"]


Customer = Annotated[str, Depends(current_customer)]


def require_staff(customer: Customer, session: Session) -> None:
    if not session.execute("SELECT staff FROM customer WHERE name = ?", (customer,)).fetchone()["staff"]:
        raise HTTPException(status_code=403, detail="Staff only")


def current_cart(
    customer: Customer, session: Session, cart_id: Annotated[str | None, Cookie()] = None
) -> str:
    """The cart in the ``cart_id`` cookie, which must be the caller's."""
    if cart_id is None:
        raise HTTPException(status_code=400, detail="No cart: add something first")
    row = session.execute("SELECT customer FROM cart WHERE id = ?", (cart_id,)).fetchone()
    if row is None or row["customer"] != customer:
        raise HTTPException(status_code=404, detail="Cart not found")
    return cart_id


CartId = Annotated[str, Depends(current_cart)]


def load_cart(session: sqlite3.Connection, cart_id: str) -> Cart:
    rows = session.execute(
        "SELECT l.*, p.name, p.price FROM cart_line l JOIN product p ON p.id = l.product_id "
        "WHERE l.cart_id = ? ORDER BY p.id",
        (cart_id,),
    ).fetchall()
    lines = [
        CartLine(product_id=r["product_id"], name=r["name"], quantity=r["quantity"], note=r["note"])
        for r in rows
    ]
    return Cart(id=cart_id, lines=lines, total=round(sum(r["price"] * r["quantity"] for r in rows), 2))


def internal_product(row: sqlite3.Row) -> ProductInternal:
    return ProductInternal(**dict(row))


def send_receipt(database: str, order_id: str, customer: str) -> None:
    with sqlite3.connect(database) as db:
        db.execute("INSERT INTO receipt VALUES (?, ?)", (order_id, customer))


def create_api(exposure: Exposure = "decorator", database: str | None = None) -> FastAPI:
    expose, as_a_skill = as_tool(exposure), as_skill(exposure)
    app = FastAPI(title="Shop")
    app.state.database = database

    @app.get("/products", tags=["catalog"])
    @expose
    def search_products(
        session: Session,
        q: str | None = None,
        tag: Annotated[list[str] | None, Query()] = None,
        limit: Annotated[int, Query(ge=1, le=50)] = 10,
    ) -> list[Product]:
        """Products whose name contains ``q``, with any of the tags ``tag`` (repeat it: ``?tag=a&tag=b``)."""
        query, args = "SELECT * FROM product WHERE name LIKE ?", [f"%{q or ''}%"]
        if tag:
            query += f" AND id IN (SELECT product_id FROM tag WHERE tag IN ({','.join('?' * len(tag))}))"
            args += tag
        rows = session.execute(query + " ORDER BY id LIMIT ?", (*args, limit)).fetchall()
        return [internal_product(r) for r in rows]  # the return annotation keeps the cost out

    @app.get(
        "/products/{product_id}",
        tags=["catalog"],
        response_model=Product,
        response_model_include={"id", "name", "price"},
    )
    @expose
    def read_product(product_id: Annotated[int, Path(ge=1)], session: Session) -> ProductInternal:
        row = session.execute("SELECT * FROM product WHERE id = ?", (product_id,)).fetchone()
        if row is None:
            raise HTTPException(status_code=404, detail="Product not found")
        return internal_product(row)

    @app.get("/products/{product_id}/tags", tags=["catalog"])
    @expose
    def product_tags(product_id: int, session: Session) -> list[str]:
        return [
            r["tag"]
            for r in session.execute(
                "SELECT tag FROM tag WHERE product_id = ? ORDER BY tag", (product_id,)
            ).fetchall()
        ]

    @app.get("/cart", tags=["cart"], response_model=Cart, response_model_exclude_none=True)
    @expose
    def read_cart(cart_id: CartId, session: Session) -> Any:
        return load_cart(session, cart_id)

    @app.post("/cart/items", tags=["cart"], response_model=Cart, response_model_exclude_none=True)
    @expose
    def add_to_cart(
        cart_id: CartId,
        session: Session,
        product_id: Annotated[int, Body(ge=1)],
        quantity: Annotated[int, Body(ge=1, le=20)] = 1,
    ) -> Any:
        if session.execute("SELECT 1 FROM product WHERE id = ?", (product_id,)).fetchone() is None:
            raise HTTPException(status_code=404, detail="Product not found")
        session.execute("INSERT INTO cart_line VALUES (?, ?, ?, NULL)", (cart_id, product_id, quantity))
        session.commit()
        return load_cart(session, cart_id)

    @app.post("/checkout", tags=["orders"], status_code=201, response_model=Order)
    @as_a_skill
    @expose
    def checkout(
        cart_id: CartId,
        customer: Customer,
        session: Session,
        background_tasks: BackgroundTasks,
        request: Request,
    ) -> Any:
        """Turn the cart into an order and email a receipt."""
        cart = load_cart(session, cart_id)
        if not cart.lines:
            raise HTTPException(status_code=409, detail="The cart is empty")
        order = OrderAdmin(
            id=new_id(), total=cart.total, placed_at=utc_now(), lines=cart.lines, customer=customer
        )
        session.execute(
            "INSERT INTO orders VALUES (?, ?, ?, ?, ?)",
            (
                str(order.id),
                customer,
                order.total,
                order.placed_at.isoformat(),
                "[" + ",".join(line.model_dump_json() for line in order.lines) + "]",
            ),
        )
        session.execute("DELETE FROM cart_line WHERE cart_id = ?", (cart_id,))
        session.commit()
        background_tasks.add_task(send_receipt, database_of(request.app, init_db), str(order.id), customer)
        return order

    @app.get("/orders/{order_id}", tags=["orders"], response_model=Order)
    @as_a_skill
    @expose
    def read_order(order_id: UUID, customer: Customer, session: Session) -> Any:
        """One of the caller's orders (another customer's is not found)."""
        row = session.execute(
            "SELECT * FROM orders WHERE id = ? AND customer = ?", (str(order_id), customer)
        ).fetchone()
        if row is None:
            raise HTTPException(status_code=404, detail="Order not found")
        return OrderAdmin(
            id=row["id"],
            customer=row["customer"],
            total=row["total"],
            placed_at=datetime.fromisoformat(row["placed_at"]),
            lines=json.loads(row["lines"]),
        )

    admin = APIRouter(tags=["admin"])

    @admin.post("/products/{product_id}/image")
    def upload_image(product_id: Annotated[int, Path(ge=1)], image: UploadFile) -> dict[str, Any]:
        """A product photo (not for agents: an agent call cannot send a file upload)."""
        return {"product_id": product_id, "filename": image.filename, "size": image.size}

    @admin.get("/orders", response_model=list[OrderAdmin])
    @expose
    def all_orders(session: Session) -> Any:
        return [
            {**dict(r), "lines": json.loads(r["lines"]), "placed_at": datetime.fromisoformat(r["placed_at"])}
            for r in session.execute("SELECT * FROM orders ORDER BY placed_at").fetchall()
        ]

    @admin.post("/products", status_code=201, response_model=Product)
    @expose
    def create_product(product: ProductInternal, session: Session) -> Any:
        session.execute(
            "INSERT INTO product VALUES (:id, :name, :price, :description, :cost, :supplier_notes)",
            product.model_dump(),
        )
        session.commit()
        return product

    @admin.get("/orders.csv")
    @expose
    def orders_csv(session: Session) -> Response:
        """Every order as CSV, for the accountants' spreadsheet."""
        rows = session.execute("SELECT id, customer, total FROM orders ORDER BY placed_at").fetchall()
        lines = ["id,customer,total", *(f"{r['id']},{r['customer']},{r['total']:.2f}" for r in rows)]
        return Response("\n".join(lines) + "\n", media_type="text/csv")

    @admin.get("/orders/lines")
    @expose
    def stream_order_lines(session: Session) -> StreamingResponse:
        """Every order line as it is read, one JSON object a line (for a big export)."""
        rows = session.execute("SELECT id, lines FROM orders ORDER BY placed_at").fetchall()

        def lines() -> Iterator[str]:
            for row in rows:
                for line in json.loads(row["lines"]):
                    yield json.dumps({"order_id": row["id"], **line}) + "\n"

        return StreamingResponse(lines(), media_type="application/x-ndjson")

    @admin.put("/products/{product_id}/price", response_model=Product)
    @expose
    def set_price(product_id: Annotated[int, Path(ge=1)], update: PriceUpdate, session: Session) -> Any:
        if (
            session.execute("UPDATE product SET price = ? WHERE id = ?", (update.price, product_id)).rowcount
            == 0
        ):
            raise HTTPException(status_code=404, detail="Product not found")
        session.commit()
        return internal_product(
            session.execute("SELECT * FROM product WHERE id = ?", (product_id,)).fetchone()
        )

    app.include_router(admin, prefix="/admin", dependencies=[Depends(require_staff)])
    return app


def build_agent(app: FastAPI, exposure: Exposure = "decorator") -> Agent:
    return attach_agent(app, "shop", exposure)


create_app, __getattr__ = app_factory(create_api, build_agent)
