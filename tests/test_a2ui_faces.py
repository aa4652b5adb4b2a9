"""A2UI surfaces through the faces, with the real clients: the official ``a2a-sdk==1.3.0`` client (the
extension on the card, activated by its ``A2A-Extensions`` service parameter, surfaces as data parts) and the
official ``@ag-ui/client`` (the ``a2ui-surface`` activity), whose operations the official A2UI v0.9
``MessageProcessor`` (``@a2ui/web_core``) then builds into a surface without a complaint."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.client import ClientCallContext
from a2a.client.service_parameters import ServiceParametersFactory, with_a2a_extensions
from a2a.types.a2a_pb2 import SendMessageRequest
from google.protobuf.json_format import MessageToDict
from starlette.applications import Starlette

from agentmw import Agent, AgentMiddleware, Context, a2ui
from tests.conftest import require_tool, serve
from tests.helpers.a2a_sdk import a2a_client, message
from tests.test_agui_client import harness_node

SCRIPT = Path(__file__).parent / "agui" / "a2ui.mjs"


def _budget_surface(left: str) -> a2ui.Surface:
    return a2ui.Surface(
        "budget-engineering",
        a2ui.Card(
            a2ui.Column(
                a2ui.Text("Engineering budget", variant="h3"),
                a2ui.Row(a2ui.Text("Remaining"), a2ui.Text(a2ui.Bind("/remaining"), id="remaining")),
                a2ui.Divider(),
                a2ui.Button("Refresh", action=a2ui.Event("refresh", {"department": "engineering"})),
            )
        ),
        data={"remaining": left},
    )


def build() -> tuple[Agent, Starlette]:
    agent = Agent("a2ui-test", "1.0.0")

    @agent.skill(output_modes=("text/plain", a2ui.MIME_TYPE))
    async def budget(department: str, ctx: Context) -> str:
        """Show a department's budget as a card."""
        await ctx.surface(_budget_surface("1,200.00"))
        await ctx.surface_data("budget-engineering", "1,100.00", "/remaining")
        return f"{department}: 1,100.00 left"

    @agent.skill
    async def plain(text: str, ctx: Context) -> str:
        """Says something; shows a surface too (to clients that draw one)."""
        await ctx.surface(_budget_surface("5.00"))
        return "plain"

    app = Starlette()
    app.add_middleware(AgentMiddleware, agent=agent)
    return agent, app


@pytest.fixture(scope="module")
def url():
    _agent, app = build()
    with serve(app) as base:
        yield base


# --- A2A -------------------------------------------------------------------------------------------


def _send(message_id: str, skill: str, data: dict[str, Any], metadata: dict[str, Any] | None = None) -> Any:
    """A JSON-RPC SendMessage of one data part to ``skill``."""
    message = {"messageId": message_id, "role": "ROLE_USER", "parts": [{"data": data}]}
    message["metadata"] = {"skill": skill, **(metadata or {})}
    return {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}


async def test_the_card_declares_the_extension_when_a_skill_answers_with_a2ui(url) -> None:
    async with httpx.AsyncClient(base_url=url) as http:
        card = (await http.get("/.well-known/agent-card.json")).json()
    assert card["capabilities"]["extensions"] == [
        {
            "uri": "https://a2ui.org/a2a-extension/a2ui/v0.9",
            "description": "Agent-driven UI: A2UI v0.9 surfaces of the basic catalog, as data parts.",
            "required": False,
            "params": {"supportedCatalogIds": [a2ui.BASIC_CATALOG_ID]},
        }
    ]
    skills = {s["id"]: s for s in card["skills"]}
    assert skills["budget"]["outputModes"] == ["text/plain", "application/json+a2ui"]

    plain = Agent("plain")

    @plain.skill
    async def hello() -> str:
        """Hi."""
        return "hi"

    app = Starlette()
    app.add_middleware(AgentMiddleware, agent=plain)
    with serve(app) as other:
        async with httpx.AsyncClient(base_url=other) as http:
            card = (await http.get("/.well-known/agent-card.json")).json()
    assert "extensions" not in card["capabilities"], "no skill answers with A2UI: nothing declared"


def _a2ui_parts(task: Any) -> list[list[dict[str, Any]]]:
    """Each history/status message's A2UI data parts, as JSON."""
    found = []
    for msg in [*task.history, task.status.message]:
        parts = [MessageToDict(p) for p in msg.parts]
        a2ui_parts = [p for p in parts if p.get("metadata", {}).get("mimeType") == a2ui.MIME_TYPE]
        if a2ui_parts:
            found.append(a2ui_parts)
    return found


@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON"])
async def test_an_activating_client_gets_the_surface_as_data_parts(url, binding) -> None:
    activated = ClientCallContext(
        service_parameters=ServiceParametersFactory.create([with_a2a_extensions([a2ui.EXTENSION_URI])])
    )
    async with httpx.AsyncClient(timeout=30) as http:
        client = await a2a_client(http, url, binding, streaming=True)
        request = SendMessageRequest(message=message(skill="budget", data={"department": "engineering"}))
        events = [event async for event in client.send_message(request, context=activated)]
    updates = [MessageToDict(e.status_update) for e in events if e.HasField("status_update")]
    surface_updates = [
        [p for p in u["status"]["message"]["parts"] if p.get("mediaType") == a2ui.MIME_TYPE]
        for u in updates
        if u["status"].get("message")
    ]
    surface_updates = [parts for parts in surface_updates if parts]
    assert len(surface_updates) == 2, updates  # the surface, then its data update
    first, second = surface_updates
    assert all(p["metadata"] == {"mimeType": "application/json+a2ui"} for p in first + second)
    messages = [p["data"] for p in first]
    assert [next(k for k in m if k != "version") for m in messages] == [
        "createSurface",
        "updateComponents",
        "updateDataModel",
    ]
    a2ui.validate_messages(messages + [p["data"] for p in second])
    assert messages[2]["updateDataModel"]["value"] == {"remaining": "1,200.00"}
    assert second[0]["data"]["updateDataModel"] == {
        "surfaceId": "budget-engineering",
        "path": "/remaining",
        "value": "1,100.00",
    }
    final = events[-1]
    done = final.task if final.HasField("task") else final.status_update
    assert MessageToDict(done)["status"]["state"] == "TASK_STATE_COMPLETED"


async def test_the_response_names_the_activated_extension_and_the_task_remembers_it(url) -> None:
    body = _send("m-echo", "budget", {"department": "engineering"})
    headers = {"A2A-Version": "1.0", "A2A-Extensions": f"urn:other, {a2ui.EXTENSION_URI}"}
    async with httpx.AsyncClient(base_url=url, timeout=30) as http:
        answer = await http.post("/a2a", json=body, headers=headers)
        plain = await http.post(
            "/a2a",
            json={**body, "params": {"message": {**body["params"]["message"], "messageId": "m2"}}},
            headers={"A2A-Version": "1.0"},
        )
    assert answer.headers["a2a-extensions"] == a2ui.EXTENSION_URI
    assert "a2a-extensions" not in plain.headers
    task = answer.json()["result"]["task"]
    assert task["history"][0]["extensions"] == [a2ui.EXTENSION_URI]  # the activation, kept for the task
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    history_parts = [p for m in task["history"] for p in m["parts"] if p.get("mediaType") == a2ui.MIME_TYPE]
    assert len(history_parts) == 4  # created, drawn, data; then the data update
    plain_task = plain.json()["result"]["task"]
    assert not [p for m in plain_task["history"] for p in m["parts"] if p.get("mediaType") == a2ui.MIME_TYPE]


async def test_a_read_of_the_task_carries_its_surfaces_only_to_a_request_that_activates_a2ui(url) -> None:
    body = _send("m-read", "budget", {"department": "engineering"})
    plain = {"A2A-Version": "1.0"}
    activating = {**plain, "A2A-Extensions": a2ui.EXTENSION_URI}

    def surfaces(task: dict[str, Any]) -> list[Any]:
        messages = [*task.get("history", ()), task["status"].get("message") or {"parts": []}]
        return [p for m in messages for p in m["parts"] if p.get("mediaType") == a2ui.MIME_TYPE]

    async with httpx.AsyncClient(base_url=url, timeout=30) as http:
        task = (await http.post("/a2a", json=body, headers=activating)).json()["result"]["task"]
        get = {"jsonrpc": "2.0", "id": 2, "method": "GetTask", "params": {"id": task["id"]}}
        seen = (await http.post("/a2a", json=get, headers=activating)).json()["result"]
        unseen = (await http.post("/a2a", json=get, headers=plain)).json()["result"]
        listed = (
            await http.post(
                "/a2a",
                json={"jsonrpc": "2.0", "id": 3, "method": "ListTasks", "params": {"historyLength": 50}},
                headers=plain,
            )
        ).json()["result"]["tasks"]
        old = (await http.post("/a2a", json={**get, "method": "tasks/get"}, headers={})).json()["result"]
    assert len(surfaces(seen)) == 4
    assert surfaces(unseen) == [] and unseen["history"], "the task without its A2UI parts, the rest kept"
    assert all(m["parts"] for m in unseen["history"]), "a message that held only surfaces is left out"
    assert [m["parts"] for m in unseen["history"]] == [
        m["parts"]
        for m in seen["history"]
        if not any(p.get("mediaType") == a2ui.MIME_TYPE for p in m["parts"])
    ]
    assert unseen["status"]["state"] == "TASK_STATE_COMPLETED"
    assert not [t for t in listed if surfaces(t)]
    assert "a2ui" not in json.dumps(old.get("history", [])), "0.3's tasks/get decides the same way"


async def test_a_client_that_does_not_activate_it_gets_no_surface(url) -> None:
    async with httpx.AsyncClient(timeout=30) as http:
        client = await a2a_client(http, url, "JSONRPC", streaming=True)
        request = SendMessageRequest(message=message(skill="plain", data={"text": "hi"}))
        events = [event async for event in client.send_message(request)]
        request = SendMessageRequest(message=message(skill="budget", data={"department": "engineering"}))
        events += [event async for event in client.send_message(request)]
    dumped = json.dumps([MessageToDict(e) for e in events])
    assert "a2ui" not in dumped, "no A2UI parts without the extension"
    assert '"plain"' in dumped


async def test_client_capabilities_in_the_metadata_activate_it_too(url) -> None:
    capabilities = {"v0.9": {"supportedCatalogIds": [a2ui.BASIC_CATALOG_ID]}}
    body = _send("m-caps", "plain", {"text": "x"}, {a2ui.CLIENT_CAPABILITIES_KEY: capabilities})
    async with httpx.AsyncClient(base_url=url, timeout=30) as http:
        task = (await http.post("/a2a", json=body, headers={"A2A-Version": "1.0"})).json()["result"]["task"]
    parts = [p for m in task["history"] for p in m["parts"] if p.get("mediaType") == a2ui.MIME_TYPE]
    assert [next(k for k in p["data"] if k != "version") for p in parts] == [
        "createSurface",
        "updateComponents",
        "updateDataModel",
    ]


# --- AG-UI -----------------------------------------------------------------------------------------


def _run_agui(url: str, skill: str, thread: str) -> dict[str, Any]:
    node = harness_node()
    require_tool(
        "The A2UI web core npm package",
        SCRIPT.parent / "node_modules" / "@a2ui" / "web_core",
        "run `npm ci --prefix tests/agui` (scripts/setup does)",
    )
    scenario = {
        "url": f"{url}/agui/{skill}",
        "threadId": thread,
        "runId": f"r-{thread}",
        "say": "engineering",
    }
    run = subprocess.run(
        [node, str(SCRIPT), json.dumps(scenario)],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=SCRIPT.parent,
    )
    assert run.returncode == 0, run.stderr
    result: dict[str, Any] = json.loads(run.stdout.strip().splitlines()[-1])
    assert result["rejected"] is None, result["rejected"]
    return result


def test_agui_sends_the_surface_as_an_a2ui_activity_the_official_renderer_builds(url) -> None:
    result = _run_agui(url, "budget", "t-a2ui")
    kinds = [e["type"] for e in result["events"]]
    assert kinds[0] == "RUN_STARTED" and kinds[-1] == "RUN_FINISHED"
    snapshots = [e for e in result["events"] if e["type"] == "ACTIVITY_SNAPSHOT"]
    assert [(s["messageId"], s["activityType"], s["replace"]) for s in snapshots] == [
        ("a2ui-surface-budget-engineering", "a2ui-surface", True)
    ] * 2
    first, second = (s["content"]["a2ui_operations"] for s in snapshots)
    assert [next(k for k in m if k != "version") for m in second] == [
        "createSurface",
        "updateComponents",
        "updateDataModel",
        "updateDataModel",
    ], "each snapshot draws the surface from nothing: a late or reconnecting front end needs only the last"
    assert second[:3] == first
    [activity] = result["activities"]  # the client keeps it as one activity message, replaced in place
    assert (
        activity["id"] == "a2ui-surface-budget-engineering" and activity["content"] == snapshots[1]["content"]
    )
    assert result["complaints"] == []
    for snapshot in result["snapshots"]:
        assert snapshot["thrown"] is None and snapshot["complaints"] == []
    built = result["snapshots"][1]["built"]["budget-engineering"]
    assert built["catalog"] == a2ui.BASIC_CATALOG_ID
    assert built["data"] == {"remaining": "1,100.00"}
    assert built["components"]["root"]["type"] == "Card"
    assert built["components"]["remaining"] == {
        "type": "Text",
        "properties": {"text": {"path": "/remaining"}},
    }
    texts = [c["properties"].get("text") for c in built["components"].values() if c["type"] == "Text"]
    assert "Engineering budget" in texts and "Refresh" in texts
    [button] = [c for c in built["components"].values() if c["type"] == "Button"]
    assert button["properties"]["action"] == {
        "event": {"name": "refresh", "context": {"department": "engineering"}}
    }


async def test_a_0_3_client_gets_the_parts_the_a2ui_a2a_package_reads(url) -> None:
    """0.3 (``X-A2A-Extensions``, ``kind: data`` parts): what the official ``a2ui-a2a`` package, built on the 0.3
    SDK, makes and looks for: a DataPart whose ``metadata.mimeType`` is ``application/json+a2ui``."""
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "message/send",
        "params": {
            "message": {
                "kind": "message",
                "messageId": "m-03",
                "role": "user",
                "parts": [{"kind": "data", "data": {"department": "engineering"}}],
                "metadata": {"skill": "budget"},
            }
        },
    }
    async with httpx.AsyncClient(base_url=url, timeout=30) as http:
        answer = await http.post("/a2a", json=body, headers={"X-A2A-Extensions": a2ui.EXTENSION_URI})
    assert answer.headers["x-a2a-extensions"] == a2ui.EXTENSION_URI
    task = answer.json()["result"]
    parts = [p for m in task["history"] for p in m["parts"] if p.get("metadata", {}).get("mimeType")]
    assert {p["kind"] for p in parts} == {"data"} and len(parts) == 4
    assert {p["metadata"]["mimeType"] for p in parts} == {"application/json+a2ui"}
    a2ui.validate_messages(p["data"] for p in parts)


async def test_the_example_declares_a2ui_and_sends_its_budget_card() -> None:
    import examples.fastapi_app.main as example

    activated = ClientCallContext(
        service_parameters=ServiceParametersFactory.create([with_a2a_extensions([a2ui.EXTENSION_URI])])
    )
    with serve(example.app) as base:
        async with httpx.AsyncClient(timeout=30, headers={"Authorization": "Bearer demo-token"}) as http:
            card = (await http.get(f"{base}/.well-known/agent-card.json")).json()
            client = await a2a_client(http, base, "JSONRPC")
            request = SendMessageRequest(
                message=message("Buy 100 laptops for engineering", skill="procurement_assistant")
            )
            events = [event async for event in client.send_message(request, context=activated)]
    assert [e["uri"] for e in card["capabilities"]["extensions"]] == [a2ui.EXTENSION_URI]
    task = MessageToDict(events[-1].task)
    parts = [p["data"] for m in task["history"] for p in m["parts"] if p.get("mediaType") == a2ui.MIME_TYPE]
    a2ui.validate_messages(parts)
    data = next(p["updateDataModel"]["value"] for p in parts if "updateDataModel" in p)
    assert data["verdict"] == "Over the remaining budget." and data["request"].endswith(".00")
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
