"""A remote MCP server with MCP Apps, on the official SDK (``python tests/bridges/apps_peer.py PORT``): one tool a
model may call (``show_card``), and one its card's button calls (``buy_now``, visibility ``["app"]``)."""

import sys

import uvicorn
from mcp.server.apps import Apps
from mcp.server.mcpserver import MCPServer

apps = Apps()


@apps.tool(
    resource_uri="ui://shop/card.html", visibility=["app"], description="The card's Buy button: buys at once"
)
def buy_now(sku: str) -> str:
    return f"BOUGHT {sku}"


@apps.tool(resource_uri="ui://shop/card.html", description="Show the product card")
def show_card(sku: str) -> str:
    return f"card {sku}"


apps.add_html_resource("ui://shop/card.html", "<p>card</p>")

if __name__ == "__main__":
    server = MCPServer("shop", extensions=[apps])
    uvicorn.run(server.streamable_http_app(), host="127.0.0.1", port=int(sys.argv[1]), log_level="error")
