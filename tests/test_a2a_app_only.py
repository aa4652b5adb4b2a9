"""An MCP App's app-only tool (visibility without ``"model"``) grouped by a skill is not callable over A2A by
naming it in the message's metadata: the A2A face renders no MCP App, so for A2A the tool is a button that is not
there, refused as a tool the skill does not have. The skill itself still runs."""

from __future__ import annotations

import json
import uuid

import httpx

from agentmw import Agent, Context, skill, tool
from agentmw.apps import UI, ui_resource


@tool(ui=UI("ui://shop/card.html", visibility=("app",)), idempotent=True)
def press_button(n: int) -> str:
    """Press the card's button.

    Summary:
        Presses the card's button.
    """
    return f"PRESSED {n}"


@skill(tools=(press_button,))
async def shop(text: str, ctx: Context) -> str:
    """Shop for things.

    Summary:
        Shops.
    """
    return "shopped"


def _send(metadata: dict[str, str], part: dict[str, object]) -> dict[str, object]:
    message = {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [part], "metadata": metadata}
    return {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}


async def test_an_app_only_tool_is_not_callable_over_a2a() -> None:
    card = ui_resource("ui://shop/card.html", html="<p>card</p>")
    agent = Agent("a", store="memory://", include=[press_button, shop, card])
    transport = httpx.ASGITransport(app=agent.asgi())
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8000", timeout=30) as http:
        headers = {"A2A-Version": "1.0"}
        pressed = await http.post(
            "/a2a", json=_send({"skill": "shop", "tool": "press_button"}, {"data": {"n": 7}}), headers=headers
        )
        answer = pressed.json()
        assert "PRESSED" not in json.dumps(answer)
        assert (
            answer["error"]["code"] == -32602 and "has no tool 'press_button'" in answer["error"]["message"]
        )
        shopped = await http.post("/a2a", json=_send({"skill": "shop"}, {"text": "hi"}), headers=headers)
        assert "shopped" in json.dumps(shopped.json())
