"""Supplier catalog: a small remote MCP server on the official ``mcp`` SDK (``MCPServer``, streamable HTTP).

It knows nothing of agentmw: it is the kind of server a supplier runs, which the procurement assistant
(examples/fastapi_app) reaches through a bridge. Tools: ``search_supplier_items(query, limit)`` and
``get_supplier_item(sku)`` (an unknown SKU is a tool error, ``isError: true``); resources: ``supplier://terms``
(the supplier's delivery and return terms, Markdown) and ``supplier://items/{sku}`` (one item as JSON). It serves
both MCP revisions the SDK speaks on one endpoint: 2025-11-25 (``initialize`` handshake) and 2026-07-28
(stateless).

Run it with ``python -m examples.supplier_catalog`` (``--port``, default 8002; MCP at ``/mcp``), or
``uvicorn --factory examples.supplier_catalog.server:create_app --port 8002``.
"""

from __future__ import annotations

from typing import Any

from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel, Field
from starlette.requests import Request
from starlette.responses import PlainTextResponse

__all__ = ["ITEMS", "TERMS", "SupplierItem", "build_server", "create_app"]


class SupplierItem(BaseModel):
    sku: str = Field(description="The procurement catalog's SKU")
    name: str
    supplier: str
    unit_price: float = Field(description="Price per unit, in EUR, before volume discounts")
    in_stock: int
    lead_time_days: int


class SearchResult(BaseModel):
    items: list[SupplierItem]


ITEMS = [
    SupplierItem(
        sku="LPT-14",
        name="14-inch developer laptop, 32 GB",
        supplier="Northwind Devices",
        unit_price=1849.0,
        in_stock=12,
        lead_time_days=5,
    ),
    SupplierItem(
        sku="LPT-13",
        name="13-inch ultralight laptop, 16 GB",
        supplier="Northwind Devices",
        unit_price=1249.0,
        in_stock=0,
        lead_time_days=21,
    ),
    SupplierItem(
        sku="MON-27",
        name="27-inch 4K monitor, USB-C",
        supplier="Contoso Displays",
        unit_price=429.0,
        in_stock=40,
        lead_time_days=3,
    ),
    SupplierItem(
        sku="PHN-6",
        name="Company phone, 128 GB",
        supplier="Fabrikam Mobile",
        unit_price=779.0,
        in_stock=25,
        lead_time_days=7,
    ),
    SupplierItem(
        sku="ACC-DOCK",
        name="USB-C docking station, 100 W",
        supplier="Contoso Displays",
        unit_price=219.0,
        in_stock=60,
        lead_time_days=2,
    ),
]
TERMS = """# Supplier terms

- Delivery: free above 500 EUR per order, otherwise 25 EUR.
- Returns: within 30 days, unopened.
- Volume discount: 5% from 10 units of one SKU.
"""


def build_server() -> MCPServer:
    server = MCPServer(
        "supplier-catalog",
        version="1.0.0",
        instructions="Prices, stock and lead times of the supplier's items, by procurement SKU.",
    )
    by_sku = {item.sku: item for item in ITEMS}

    @server.tool(title="Search the supplier's items")
    def search_supplier_items(query: str, limit: int = Field(5, ge=1, le=20)) -> SearchResult:
        """Finds the supplier's items whose SKU, name or supplier contains the query (case-insensitive).

        Args:
            query: words to look for, e.g. "laptop" or "Contoso".
            limit: at most this many items.
        """
        words = query.lower().split()
        found = [
            item
            for item in ITEMS
            if all(w in f"{item.sku} {item.name} {item.supplier}".lower() for w in words)
        ]
        return SearchResult(items=found[:limit])

    @server.tool(title="Get one supplier item")
    def get_supplier_item(sku: str) -> SupplierItem:
        """The supplier's price, stock and lead time for one SKU.

        Args:
            sku: the procurement catalog's SKU, e.g. "MON-27".
        """
        item = by_sku.get(sku.strip().upper())
        if item is None:
            raise ToolError(f"Unknown SKU: {sku}")
        return item

    @server.resource(
        "supplier://terms",
        name="supplier-terms",
        description="Delivery and return terms.",
        mime_type="text/markdown",
    )
    def terms() -> str:
        return TERMS

    @server.resource(
        "supplier://items/{sku}",
        name="supplier-item",
        description="One item, as JSON.",
        mime_type="application/json",
    )
    def item(sku: str) -> str:
        found = by_sku.get(sku.upper())
        if found is None:
            raise ValueError(f"Unknown SKU: {sku}")
        return found.model_dump_json()

    @server.custom_route("/health", methods=["GET"])
    async def health(request: Request) -> PlainTextResponse:
        return PlainTextResponse("ok")

    return server


def create_app() -> Any:
    """The server's ASGI app: MCP at ``/mcp``, ``GET /health`` (Host and Origin checked for a loopback bind)."""
    return build_server().streamable_http_app()
