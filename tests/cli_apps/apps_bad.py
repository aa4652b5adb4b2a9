"""A shop agent with one mistake per MCP Apps, skill package and A2UI rule (AMW013, AMW014, AMW016, AMW017), each
capability otherwise clean; ``EXPECTED`` is what ``agentmw lint`` must find. AMW015 (a folder that is no package)
cannot be served at all, so it is linted from the folders in ``skill_folders/``."""

from __future__ import annotations

from pathlib import Path

from agentmw import Agent, Context, a2ui, skill, tool
from agentmw.apps import UiCsp, ui_resource
from agentmw.skill_packages import SkillPackage

HERE = Path(__file__).parent

CART_PAGE = """<!doctype html>
<html>
  <head>
    <script type="module">
      import { App } from "https://unpkg.com/@modelcontextprotocol/ext-apps@2/dist/app.js";
      const prices = await fetch("https://prices.shop.example/v1/today");
    </script>
    <link rel="stylesheet" href="cart.css" />
  </head>
  <body><img src="https://img.shop.example/logo.png" alt="logo" /><div id="cart"></div></body>
</html>
"""

# AMW014: unpkg.com is not declared (error), cart.css is relative (error), the fetch is likely blocked (warning);
# the logo's origin is declared, so it is fine
cart_page = ui_resource(
    "ui://shop/cart.html",
    html=CART_PAGE,
    name="cart-page",
    description="The shopper's cart as a card.",
    csp=UiCsp(resource_domains=("https://img.shop.example",)),
)


@tool(read_only=True, open_world=False, ui="ui://shop/cart.html")
async def show_cart(cart_id: str) -> dict[str, float]:
    """Show the items of a cart and their prices.

    Summary:
        Lets a shopper review what they are about to buy.
    """
    return {"total": 0.0}


@tool(read_only=True, open_world=False, ui="ui://shop/order.html")  # AMW013: nothing serves this UI
async def show_order(order_id: str) -> dict[str, str]:
    """Show an order's status.

    Summary:
        Answers "where is my order?".
    """
    return {"status": "shipped"}


def _total_surface(total: float) -> a2ui.Surface:
    return a2ui.Surface("total", a2ui.Card(a2ui.Text(f"Total: {total:.2f} EUR")))


@skill(tags=("checkout",))
async def checkout_summary(cart_id: str, ctx: Context) -> str:  # AMW017: no A2UI output mode
    """Sum up a cart before payment, and show the total as a card.

    Summary:
        Gets a shopper's go-ahead on the final price.
    """
    await ctx.surface(_total_surface(12.5))
    return "The total is 12.50 EUR."


@tool(read_only=True, open_world=False)
async def price_chart(sku: str, ctx: Context) -> str:  # AMW017 (a tool no skill groups: MCP drops surfaces)
    """Draw a price history chart for a product.

    Summary:
        Shows whether a price is a good one.
    """
    await ctx.surface(_total_surface(3.0))
    return "Prices were stable."


agent = Agent(
    "shop",
    instructions="A shop's assistant.",
    include=[
        cart_page,
        show_cart,
        show_order,
        checkout_summary,
        price_chart,
        SkillPackage.from_folder(HERE / "skill_packages" / "stale-links"),  # AMW016 twice
    ],
)
app = agent

EXPECTED = {
    ("AMW013", "error", "show_order"),
    ("AMW014", "error", "cart-page"),
    ("AMW014", "warning", "cart-page"),
    ("AMW016", "warning", "stale-links"),
    ("AMW017", "warning", "checkout_summary"),
    ("AMW017", "warning", "price_chart"),
}
