"""The real ``a2a-sdk==1.3.0`` client against agentmw over a real socket: JSON-RPC, HTTP+JSON and 0.3."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from a2a.client import A2ACardResolver
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    SendMessageRequest,
    SubscribeToTaskRequest,
    TaskPushNotificationConfig,
    TaskState,
)
from a2a.utils.errors import TaskNotCancelableError, TaskNotFoundError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from tests import a2a_app
from tests.conftest import serve
from tests.helpers.a2a_sdk import a2a_client as client_for
from tests.helpers.a2a_sdk import last_task, message
from tests.waiting import eventually

BINDINGS = ["JSONRPC", "HTTP+JSON"]


@pytest.fixture(scope="module")
def server():
    agent, app = a2a_app.build()
    with serve(app) as url:
        yield agent, url


@pytest.fixture(autouse=True)
def fresh_log():
    """Each test waits for what it logged itself, never for an entry left by an earlier run in this process."""
    a2a_app.log.clear()


async def test_card_is_generated_from_the_registry(server) -> None:
    _agent, url = server
    async with httpx.AsyncClient(base_url=url) as http:
        response = await http.get("/.well-known/agent-card.json")
        old = await http.get("/.well-known/agent.json")
        again = await http.get(
            "/.well-known/agent-card.json", headers={"if-none-match": response.headers["etag"]}
        )
    assert response.status_code == 200 and old.status_code == 200  # the old name: the card with 0.3 fields
    assert {k: v for k, v in old.json().items() if k in response.json()} | {
        "securitySchemes": None
    } == response.json() | {"securitySchemes": None}
    assert response.headers["cache-control"].startswith("public") and again.status_code == 304
    card = response.json()
    assert card["name"] == "a2a-test" and card["version"] == "1.2.3"
    skills = {s["id"]: s for s in card["skills"]}
    assert skills["echo"]["description"] == "Repeats what it is told."  # the summary, not the contract
    assert skills["echo"]["examples"] == ["hello"] and skills["echo"]["tags"] == ["test"]
    assert [(i["protocolBinding"], i["protocolVersion"]) for i in card["supportedInterfaces"]] == [
        ("JSONRPC", "1.0"),
        ("HTTP+JSON", "1.0"),
        ("JSONRPC", "0.3"),
    ]
    assert card["capabilities"] == {"streaming": True, "pushNotifications": True, "extendedAgentCard": True}
    assert "url" not in card and "preferredTransport" not in card  # strict 1.0 (tests/test_a2a_card.py)
    assert old.json()["url"] == f"{url}/a2a" and old.json()["preferredTransport"] == "JSONRPC"  # 0.3 readers
    assert old.json()["securitySchemes"]["bearer"]["type"] == "http"
    resolved = await A2ACardResolver(httpx.AsyncClient(), url).get_agent_card()
    assert resolved.security_schemes["bearer"].http_auth_security_scheme.scheme == "bearer"


async def test_card_urls_follow_proxies_and_mounts() -> None:
    agent, _app = a2a_app.build()
    agent.allowed_hosts = (
        "internal:8000",
    )  # the proxy reaches the agent by its internal name: the edge must know it
    from starlette.routing import Mount

    host = Starlette(routes=[Mount("/agents/procurement", app=agent.asgi())])
    transport = httpx.ASGITransport(app=host)
    async with httpx.AsyncClient(transport=transport, base_url="http://internal:8000") as http:
        card = (
            await http.get(
                "/agents/procurement/.well-known/agent-card.json",
                headers={"x-forwarded-proto": "https", "x-forwarded-host": "api.example.com"},
            )
        ).json()
    assert card["supportedInterfaces"][0]["url"] == "https://api.example.com/agents/procurement/a2a"


@pytest.mark.parametrize("binding", BINDINGS)
async def test_blocking_send_completes_with_an_artifact(server, binding: str) -> None:
    _, url = server
    async with httpx.AsyncClient(timeout=30) as http:
        client = await client_for(http, url, binding)
        task = await last_task(client, SendMessageRequest(message=message("hello", skill="echo")))
        assert task.status.state == TaskState.TASK_STATE_COMPLETED
        assert task.artifacts[0].parts[0].text == "echo: hello"
        data = await last_task(
            client, SendMessageRequest(message=message(skill="add", data={"a": 2, "b": 3}))
        )
        assert data.artifacts[0].parts[0].data.struct_value["result"] == 5
        grouped = await last_task(
            client, SendMessageRequest(message=message(skill="add", tool="multiply", data={"a": 4, "b": 5}))
        )
        assert grouped.artifacts[0].parts[0].data.struct_value["result"] == 20


@pytest.mark.parametrize("binding", BINDINGS)
async def test_stream_order(server, binding: str) -> None:
    _, url = server
    async with httpx.AsyncClient(timeout=30) as http:
        client = await client_for(http, url, binding, streaming=True)
        events = [
            e async for e in client.send_message(SendMessageRequest(message=message("hi", skill="echo")))
        ]
    kinds = [e.WhichOneof("payload") for e in events]
    assert kinds == ["task", "status_update", "artifact_update", "status_update"]
    assert events[1].status_update.status.state == TaskState.TASK_STATE_WORKING
    assert events[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED


@pytest.mark.parametrize("binding", BINDINGS)
async def test_return_immediately_subscribe_and_cancel_reach_the_coroutine(server, binding: str) -> None:
    _, url = server
    label = f"cancel-{binding}"
    async with httpx.AsyncClient(timeout=30) as http:
        client = await client_for(http, url, binding, streaming=True)
        blocking = await client_for(http, url, binding)
        request = SendMessageRequest(message=message(skill="slow", data={"label": label}))
        request.configuration.return_immediately = True
        task = await last_task(blocking, request)
        assert task.status.state in (TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING)
        seen = []
        subscribed = asyncio.Event()

        async def follow() -> None:
            async for event in client.subscribe(SubscribeToTaskRequest(id=task.id)):
                seen.append(event)
                subscribed.set()  # the first event is the task: the subscription is in place

        follower = asyncio.create_task(follow())
        await asyncio.wait_for(subscribed.wait(), 5)
        await eventually(lambda: f"{label}:started" in a2a_app.log, "the skill to start")
        canceled = await blocking.cancel_task(CancelTaskRequest(id=task.id))
        assert canceled.status.state == TaskState.TASK_STATE_CANCELED
        await asyncio.wait_for(follower, 5)
        assert f"{label}:cancelled" in a2a_app.log
        assert seen[0].WhichOneof("payload") == "task"
        assert seen[-1].status_update.status.state == TaskState.TASK_STATE_CANCELED
        with pytest.raises(TaskNotCancelableError):
            await blocking.cancel_task(CancelTaskRequest(id=task.id))


@pytest.mark.parametrize("binding", BINDINGS)
async def test_input_required_round_trip(server, binding: str) -> None:
    _, url = server
    async with httpx.AsyncClient(timeout=30) as http:
        client = await client_for(http, url, binding)
        task = await last_task(
            client, SendMessageRequest(message=message(skill="approve", data={"item": "laptop"}))
        )
        assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        assert (
            task.status.message.parts[0].text
            == "Approve laptop?\nReply with yes or no (or a data part matching the schema)."
        )  # how to answer, too
        follow_up = message(data={"approved": True}, task_id=task.id)
        done = await last_task(client, SendMessageRequest(message=follow_up))
        assert done.status.state == TaskState.TASK_STATE_COMPLETED and done.context_id == task.context_id
        assert done.artifacts[0].parts[0].text == "laptop: approved"


async def test_missing_arguments_ask_instead_of_failing(server) -> None:
    _, url = server
    async with httpx.AsyncClient(timeout=30) as http:
        client = await client_for(http, url)
        task = await last_task(client, SendMessageRequest(message=message(skill="add", data={"a": 1})))
        assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        assert "b: Field required" in task.status.message.parts[0].text
        done = await last_task(client, SendMessageRequest(message=message(data={"b": 41}, task_id=task.id)))
        assert done.artifacts[0].parts[0].data.struct_value["result"] == 42
        unnamed = await last_task(client, SendMessageRequest(message=message("which one?")))
        assert unnamed.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        assert "- echo: Repeats what it is told." in unnamed.status.message.parts[0].text
        chosen = await last_task(
            client, SendMessageRequest(message=message("hi", skill="echo", task_id=unnamed.id))
        )
        assert chosen.artifacts[0].parts[0].text == "echo: hi"


async def test_outcomes_map_to_states(server) -> None:
    _, url = server
    async with httpx.AsyncClient(timeout=30) as http:
        client = await client_for(http, url)
        failed = await last_task(client, SendMessageRequest(message=message("x", skill="flaky")))
        assert failed.status.state == TaskState.TASK_STATE_FAILED
        assert failed.status.message.parts[0].text == "the ledger is busy Retry after 3 seconds."
        assert failed.status.message.parts[1].data.struct_value["retryable"] is True
        rejected = await last_task(client, SendMessageRequest(message=message("x", skill="picky")))
        assert rejected.status.state == TaskState.TASK_STATE_REJECTED


async def test_get_list_and_history_length(server) -> None:
    _, url = server
    async with httpx.AsyncClient(timeout=30, headers={"authorization": "Bearer lister"}) as http:
        client = await client_for(http, url)
        first = await last_task(client, SendMessageRequest(message=message("one", skill="echo")))
        await last_task(client, SendMessageRequest(message=message("two", skill="echo")))
        got = await client.get_task(GetTaskRequest(id=first.id, history_length=1))
        assert len(got.history) == 1
        listed = await client.list_tasks(ListTasksRequest(page_size=1))
        assert listed.total_size == 2 and len(listed.tasks) == 1 and listed.next_page_token
        rest = await client.list_tasks(ListTasksRequest(page_size=1, page_token=listed.next_page_token))
        assert {listed.tasks[0].id, rest.tasks[0].id} == {first.id, got.id} | {
            rest.tasks[0].id,
            listed.tasks[0].id,
        }


async def test_tasks_are_scoped_to_their_caller(server) -> None:
    _, url = server
    async with (
        httpx.AsyncClient(timeout=30, headers={"authorization": "Bearer alice"}) as alice_http,
        httpx.AsyncClient(timeout=30, headers={"authorization": "Bearer bob"}) as bob_http,
    ):
        alice = await client_for(alice_http, url)
        bob = await client_for(bob_http, url)
        task = await last_task(alice, SendMessageRequest(message=message("mine", skill="echo")))
        with pytest.raises(TaskNotFoundError):
            await bob.get_task(GetTaskRequest(id=task.id))
        with pytest.raises(TaskNotFoundError):
            await bob.cancel_task(CancelTaskRequest(id=task.id))
        assert all(t.id != task.id for t in (await bob.list_tasks(ListTasksRequest())).tasks)


@pytest.mark.parametrize("binding", BINDINGS)
async def test_push_notifications_reach_a_local_receiver(server, binding: str) -> None:
    _, url = server
    received: list[tuple[dict, dict]] = []

    async def hook(request: Request) -> JSONResponse:
        received.append((dict(request.headers), await request.json()))
        return JSONResponse({})

    with serve(Starlette(routes=[Route("/hook", hook, methods=["POST"])])) as receiver:
        async with httpx.AsyncClient(timeout=30) as http:
            client = await client_for(http, url, binding)
            request = SendMessageRequest(message=message("ping", skill="echo"))
            request.configuration.task_push_notification_config.CopyFrom(
                TaskPushNotificationConfig(url=f"{receiver}/hook", token="tok-1")
            )
            request.configuration.task_push_notification_config.authentication.scheme = "Bearer"
            request.configuration.task_push_notification_config.authentication.credentials = "secret"
            task = await last_task(client, request)
            await eventually(lambda: len(received) >= 3, "three push notifications")
    kinds = [next(iter(body)) for _, body in received]
    assert kinds == ["statusUpdate", "artifactUpdate", "statusUpdate"]
    assert received[-1][1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert all(body[k]["taskId"] == task.id for _, body in received for k in body)
    headers = received[0][0]
    assert headers["authorization"] == "Bearer secret" and headers["x-a2a-notification-token"] == "tok-1"


async def test_v03_client_on_the_same_endpoint(server) -> None:
    _, url = server
    async with httpx.AsyncClient(timeout=30) as http:
        client = await client_for(http, url, version="0.3")
        task = await last_task(client, SendMessageRequest(message=message("old", skill="echo")))
        assert task.status.state == TaskState.TASK_STATE_COMPLETED
        assert task.artifacts[0].parts[0].text == "echo: old"
        streaming = await client_for(http, url, version="0.3", streaming=True)
        kinds = [
            e.WhichOneof("payload")
            async for e in streaming.send_message(SendMessageRequest(message=message("s", skill="echo")))
        ]
        assert kinds[0] == "task" and kinds[-1] == "status_update"
        got = await client.get_task(GetTaskRequest(id=task.id))
        assert got.id == task.id


async def test_example_approval_workflow_waits_for_the_budget_admin(tmp_path, monkeypatch) -> None:
    import examples.fastapi_app.main as example

    # The example module is shared by every test that imports it, and another may have started its A2A face
    # already (tests/test_cli.py does): this test gets a face of its own on its own SQLite file, and the
    # previous face and store come back after it.
    store = f"sqlite:///{tmp_path}/procurement.db"  # opened by the face, on the server's event loop
    monkeypatch.setattr(example.agent, "_store_spec", store)  # Agent(store=...) as the example would take it
    monkeypatch.setattr(example.agent, "_state", None)
    monkeypatch.setattr(example.agent, "_a2a", None)
    engineering = example.BUDGETS["engineering"]
    monkeypatch.setattr(engineering, "spent", engineering.spent)  # the approval spends; other tests read it
    with serve(example.app) as url:
        async with httpx.AsyncClient(timeout=30) as http:
            card = (await http.get(f"{url}/.well-known/agent-card.json")).json()
            assert [s["id"] for s in card["skills"]] == ["approve_purchase", "procurement_assistant"]
            assert card["skills"][0]["description"].startswith("Gets a purchase request approved")
            client = await client_for(http, url)
            ask = message(
                skill="approve_purchase",
                data={"request_id": "PR-1001", "department": "engineering", "total": 898.0},
            )
            task = await last_task(client, SendMessageRequest(message=ask))
            assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
            assert "approve PR-1001 for 898.00?" in task.status.message.parts[0].text
            answer = message(data={"approved": True, "note": "ok for on-call"}, task_id=task.id)
            done = await last_task(client, SendMessageRequest(message=answer))
            assert done.status.state == TaskState.TASK_STATE_COMPLETED
            decision = done.artifacts[0].parts[0].data.struct_value
            assert decision["approved"] is True and decision["approver_note"] == "ok for on-call"
