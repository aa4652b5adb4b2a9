"""The shop agent done right: a tool's UI served and within its CSP, a skill package whose links resolve, a skill
that sends A2UI surfaces and says so, and a tool that sends them through the skill that groups it. It lints clean."""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI

from agentmw import Agent, AgentMiddleware, Context, a2ui, skill, tool
from agentmw.apps import UI, UiCsp, UiPermissions, ui_resource
from agentmw.skill_packages import SkillPackage

HERE = Path(__file__).parent

CART_PAGE = """<!doctype html>
<html>
  <head>
    <script type="module">
      import { App } from "https://unpkg.com/@modelcontextprotocol/ext-apps@2/dist/app.js";
      const socket = new WebSocket("wss://events.shop.example/cart");
    </script>
    <style>body { font-family: system-ui; background: url(data:image/png;base64,iVBORw0KGgo=); }</style>
  </head>
  <body><img src="https://cdn.img.shop.example/logo.png" alt="logo" /><a href="https://shop.example">shop</a></body>
</html>
"""

cart_page = ui_resource(
    "ui://shop/cart.html",
    html=CART_PAGE,
    name="cart-page",
    description="The shopper's cart as a card, with a Pay button.",
    csp=UiCsp(
        resource_domains=("https://unpkg.com", "https://*.img.shop.example"),
        connect_domains=("wss://events.shop.example",),
    ),
    permissions=UiPermissions(clipboard_write=True),
    prefers_border=False,
)


@tool(read_only=True, open_world=False, ui="ui://shop/cart.html")
async def show_cart(cart_id: str) -> dict[str, float]:
    """Show the items of a cart and their prices.

    Summary:
        Lets a shopper review what they are about to buy.
    """
    return {"total": 12.5}


@tool(open_world=False, idempotent=True, ui=UI("ui://shop/cart.html", visibility=("app",)))
async def pay_cart(cart_id: str, idempotency_key: str) -> dict[str, str]:
    """Pay for a cart once; a repeat with the same idempotency key answers the first payment.

    Summary:
        The cart card's Pay button.
    """
    return {"status": "paid"}


@tool(read_only=True, open_world=False)
async def price_chart(sku: str, ctx: Context) -> str:
    """Draw a price history chart for a product.

    Summary:
        Shows whether a price is a good one.
    """
    await ctx.surface(a2ui.Surface(f"chart-{sku}", a2ui.Text("Prices were stable.")))
    return "Prices were stable."


@skill(tools=(price_chart,), tags=("checkout",), output_modes=("text/plain", a2ui.MIME_TYPE))
async def checkout_summary(cart_id: str, ctx: Context) -> str:
    """Sum up a cart before payment, and show the total as a card.

    Summary:
        Gets a shopper's go-ahead on the final price.
    """
    await ctx.surface(a2ui.Surface("total", a2ui.Card(a2ui.Text("Total: 12.50 EUR"))))
    return "The total is 12.50 EUR."


agent = Agent(
    "shop",
    instructions="A shop's assistant.",
    include=[cart_page, show_cart, pay_cart, price_chart, checkout_summary],
)
agent.add_skill_package(
    SkillPackage.from_folder(HERE / "skill_packages" / "checkout-help"), roles=["shopper"]
)
agent.include(
    SkillPackage(
        "gift-wrap",
        "Offer gift wrapping at checkout; use it when a shopper mentions a present.",
        "# Gift wrap\n\nOffer it once, after the cart is shown; see the [prices](prices.md).\n",
        files={"prices.md": "Gift wrap costs 3 EUR per item.\n"},
    )
)

app = FastAPI()
app.add_middleware(AgentMiddleware, agent=agent)
