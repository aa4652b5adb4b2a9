"""A browser on another origin reaches AG-UI under the app's own CORS policy; an origin it does not list cannot.

Two real servers on 127.0.0.1: the agent's app (FastAPI with its ``CORSMiddleware`` and ``AgentMiddleware``, in
either order) and a second one, on another port, serving the front end page. Headless Chromium opens that page
as ``http://front.test:<port>`` (a host the agent does not serve, listed in the app's CORS ``allow_origins``)
and as ``http://evil.test:<port>`` (not listed); both names resolve to 127.0.0.1. The page runs the skill with
the official AG-UI client (the example's vendored ``@ag-ui/client``), and from evil.test also sends the JSON as a
no-preflight "simple" POST (no Content-Type), which only the Origin check stops.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from starlette.applications import Starlette
from starlette.middleware.cors import CORSMiddleware
from starlette.responses import FileResponse, HTMLResponse
from starlette.routing import Route

from agentmw import Agent, AgentMiddleware
from tests.chromium import run_browser_script
from tests.conftest import serve

CLIENT_BUNDLE = (
    Path(__file__).parents[1] / "examples" / "fastapi_app" / "static" / "vendor" / "ag-ui-client.js"
)

PAGE = """<!doctype html>
<meta charset="utf-8"><title>front end</title>
<script type="module">
import { HttpAgent } from "/ag-ui-client.js";
const id = () => Math.random().toString(36).slice(2);  // not crypto.randomUUID: this is not a secure context
const runInput = (text) => ({ threadId: id(), runId: id(), messages: [{ id: id(), role: "user", content: text }],
                              state: {}, tools: [], context: [], forwardedProps: {} });
window.runSkill = async (url, text) => {
  const agent = new HttpAgent({ url, threadId: id(), initialMessages: [{ id: id(), role: "user", content: text }] });
  const types = [];
  try {
    const { result } = await agent.runAgent({ runId: id() }, { onEvent: ({ event }) => { types.push(event.type); } });
    const said = agent.messages.filter((m) => m.role === "assistant").map((m) => m.content);
    return { ok: true, types, result, said };
  } catch (error) {
    return { ok: false, types, error: String(error && error.message || error) };
  }
};
window.simplePost = async (url, text) => {  // a Blob with no type: no Content-Type, so the browser asks no preflight
  const body = new Blob([JSON.stringify(runInput(text))]);
  const response = await fetch(url, { method: "POST", mode: "no-cors", body });
  return { type: response.type };
};
</script>
"""


def front_app() -> Starlette:
    async def page(request: Any) -> HTMLResponse:
        return HTMLResponse(PAGE)

    async def bundle(request: Any) -> FileResponse:
        return FileResponse(CLIENT_BUNDLE, media_type="text/javascript")

    return Starlette(routes=[Route("/", page), Route("/ag-ui-client.js", bundle)])


def agent_app(front_origin: str, order: str, ran: list[str]) -> FastAPI:
    agent = Agent("cors-browser", store="memory://")

    @agent.skill
    async def chat(text: str) -> str:
        """Answer one message."""
        ran.append(text)
        return f"you said: {text}"

    app = FastAPI()
    cors = {"allow_origins": [front_origin], "allow_methods": ["*"], "allow_headers": ["*"]}
    if order == "cors first":  # AgentMiddleware outermost: as a migration adds it to an app that has CORS
        app.add_middleware(CORSMiddleware, **cors)
        app.add_middleware(AgentMiddleware, agent=agent)
    else:
        app.add_middleware(AgentMiddleware, agent=agent)
        app.add_middleware(CORSMiddleware, **cors)
    return app


@pytest.mark.parametrize("order", ["cors first", "agent first"])
def test_a_page_on_another_origin_runs_a_skill_and_a_foreign_one_cannot(order: str) -> None:
    ran: list[str] = []
    with serve(front_app()) as front_url:
        port = front_url.rsplit(":", 1)[1]
        front, evil = f"http://front.test:{port}", f"http://evil.test:{port}"
        with serve(agent_app(front, order, ran)) as agent_url:
            result = run_browser_script("cors.mjs", front + "/", evil + "/", agent_url + "/agui/chat")
    assert result["problems"] == []
    assert result["origin"] == front and result["evilOrigin"] == evil
    run = result["run"]
    assert run["ok"] is True, run
    assert run["types"][0] == "RUN_STARTED" and run["types"][-1] == "RUN_FINISHED"
    assert "TEXT_MESSAGE_CONTENT" in run["types"]
    assert "".join(run["said"]) == "you said: from the front end"
    refused = result["refused"]
    assert refused["ok"] is False and refused["types"] == [], (
        refused
    )  # the preflight failed: nothing was sent
    assert "fetch" in refused["error"].lower(), refused
    assert result["simple"] == {
        "type": "opaque"
    }  # sent, unreadable; and refused by the server's Origin check
    assert ran == ["from the front end"], "a page the CORS policy does not list must never run the skill"
