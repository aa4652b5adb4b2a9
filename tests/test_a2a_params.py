"""A2A request parameters: snake_case spellings accepted, camelCase answers, strict ListTasks filters, task-id
errors that name the spec's field, and every parameter checked before a skill runs."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types.a2a_pb2 import (
    GetTaskRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    SendMessageResponse,
    Task,
)
from google.protobuf.json_format import MessageToDict, ParseDict
from starlette.applications import Starlette

from agentmw import Agent, AgentMiddleware, Context
from agentmw.a2a import A2ASettings, PushPolicy
from agentmw.a2a.params import normalise, snake
from agentmw.a2a.wire import A2AError

BASE = "http://127.0.0.1:8000"
V1 = {"a2a-version": "1.0"}
PUSH_URL = "http://127.0.0.1:9/hook"


def build() -> tuple[list[str], Starlette]:
    ran: list[str] = []
    agent = Agent(
        "params", "1.0.0", a2a=A2ASettings(push=PushPolicy(allow_hosts=["127.0.0.1"], first_delay=30))
    )

    @agent.skill
    async def count(text: str) -> str:
        """Count the calls."""
        ran.append(text)
        return f"counted {text}"

    @agent.skill
    async def ask(item: str, ctx: Context) -> str:
        """Ask a question and wait."""
        ran.append(item)
        answer = await ctx.ask(
            f"Approve {item}?", {"type": "object", "properties": {"ok": {"type": "boolean"}}}
        )
        return f"{item}: {answer.content}"

    app = Starlette()
    app.add_middleware(AgentMiddleware, agent=agent)
    return ran, app


@pytest.fixture
def setup():
    return build()


def client(app) -> httpx.AsyncClient:
    # one caller with a credential: anonymous callers are listed no tasks (docs/auth.md)
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app),
        base_url=BASE,
        timeout=10,
        headers={"authorization": "Bearer params-test"},
    )


async def rpc(http: httpx.AsyncClient, method: str, params: Any) -> dict:
    response = await http.post(
        "/a2a", headers=V1, json={"jsonrpc": "2.0", "id": 7, "method": method, "params": params}
    )
    assert response.status_code == 200, response.text
    return response.json()


def snake_message(text: str, skill: str = "count", **extra: Any) -> dict:
    return {
        "message_id": f"m-{uuid.uuid4()}",
        "role": "ROLE_USER",
        "parts": [{"text": text}],
        "metadata": {"skill": skill},
        **extra,
    }


def snake_keys(value: Any, path: str = "") -> list[str]:
    """Every key with an underscore, outside the caller's own objects (metadata, data)."""
    found: list[str] = []
    if isinstance(value, dict):
        for key, item in value.items():
            if "_" in key:
                found.append(f"{path}{key}")
            if key not in ("metadata", "data"):
                found += snake_keys(item, f"{path}{key}.")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += snake_keys(item, f"{path}{index}.")
    return found


# --- the pure function ----------------------------------------------------------------------------------


def test_normalise_renames_known_fields_at_every_level_and_nothing_else() -> None:
    params = {
        "message": {
            "message_id": "m",
            "context_id": "c",
            "task_id": "t",
            "role": "ROLE_USER",
            "reference_task_ids": ["r"],
            "parts": [
                {"text": "x", "media_type": "text/plain"},
                {"data": {"some_key": {"task_id": 1}}, "metadata": {"my_key": 1}},
            ],
            "metadata": {"skill_name": "x"},
        },
        "configuration": {
            "history_length": 2,
            "return_immediately": True,
            "accepted_output_modes": ["a/b"],
            "task_push_notification_config": {
                "url": "u",
                "task_id": "t",
                "authentication": {"scheme": "Bearer"},
            },
        },
        "metadata": {"trace_id": "1"},
        "future_field": 1,
    }
    before = repr(params)
    out = normalise("send", params)
    assert repr(params) == before  # pure
    assert out == {
        "message": {
            "messageId": "m",
            "contextId": "c",
            "taskId": "t",
            "role": "ROLE_USER",
            "referenceTaskIds": ["r"],
            "parts": [
                {"text": "x", "mediaType": "text/plain"},
                {"data": {"some_key": {"task_id": 1}}, "metadata": {"my_key": 1}},
            ],
            "metadata": {"skill_name": "x"},
        },
        "configuration": {
            "historyLength": 2,
            "returnImmediately": True,
            "acceptedOutputModes": ["a/b"],
            "taskPushNotificationConfig": {"url": "u", "taskId": "t", "authentication": {"scheme": "Bearer"}},
        },
        "metadata": {"trace_id": "1"},
        "future_field": 1,
    }  # unknown fields kept, as the SDK ignores them
    assert normalise("send", {"message": {"messageId": "m"}}) == {
        "message": {"messageId": "m"}
    }  # camel stays


@pytest.mark.parametrize(
    ("operation", "params", "expected"),
    [
        ("get", {"id": "t", "history_length": 0}, {"id": "t", "historyLength": 0}),
        (
            "list",
            {
                "context_id": "c",
                "page_size": 5,
                "page_token": "5",
                "status_timestamp_after": "2024-01-01T00:00:00Z",
                "include_artifacts": True,
                "history_length": 1,
                "status": "TASK_STATE_WORKING",
                "tenant": "",
            },
            {
                "contextId": "c",
                "pageSize": 5,
                "pageToken": "5",
                "statusTimestampAfter": "2024-01-01T00:00:00Z",
                "includeArtifacts": True,
                "historyLength": 1,
                "status": "TASK_STATE_WORKING",
                "tenant": "",
            },
        ),
        ("cancel", {"id": "t", "metadata": {"a_b": 1}}, {"id": "t", "metadata": {"a_b": 1}}),
        ("push_create", {"task_id": "t", "url": "u"}, {"taskId": "t", "url": "u"}),
        ("push_get", {"task_id": "t", "id": "c"}, {"taskId": "t", "id": "c"}),
        ("push_list", {"task_id": "t", "page_size": 2}, {"taskId": "t", "pageSize": 2}),
        ("push_delete", {"task_id": "t", "id": "c"}, {"taskId": "t", "id": "c"}),
        (
            "send",
            {"configuration": {"push_notification_config": {"url": "u"}}},  # the 0.3 / draft name
            {"configuration": {"taskPushNotificationConfig": {"url": "u"}}},
        ),
        (
            "send",
            {"message": "not an object"},
            {"message": "not an object"},
        ),  # left for the operation to refuse
        ("get", [1], [1]),
    ],
)
def test_normalise_each_operation(operation: str, params: Any, expected: Any) -> None:
    assert normalise(operation, params) == expected


@pytest.mark.parametrize(
    ("operation", "params", "field"),
    [
        ("get", {"id": "t", "historyLength": 1, "history_length": 2}, "historyLength"),
        ("send", {"message": {"messageId": "a", "message_id": "b"}}, "message.messageId"),
        (
            "send",
            {"configuration": {"pushNotificationConfig": {}, "taskPushNotificationConfig": {}}},
            "configuration.taskPushNotificationConfig",
        ),
        ("list", {"contextId": "a", "context_id": "b"}, "contextId"),
        ("list", {"contextID": "c"}, "contextID"),
        ("list", {"state": "TASK_STATE_WORKING"}, "state"),
    ],
)
def test_normalise_refuses_twice_given_fields_and_unknown_list_filters(
    operation: str, params: dict, field: str
) -> None:
    with pytest.raises(A2AError) as caught:
        normalise(operation, params)
    assert caught.value.code == -32602 and field in caught.value.message
    assert caught.value.metadata["field"] == field


def test_normalise_lets_a_binding_add_its_own_query_keys() -> None:
    assert normalise("list", {"A2A-Version": "1.0"}, extra=frozenset({"A2A-Version"})) == {
        "A2A-Version": "1.0"
    }
    with pytest.raises(A2AError):
        normalise("list", {"A2A-Version": "1.0"})


def test_snake() -> None:
    assert snake("statusTimestampAfter") == "status_timestamp_after" and snake("id") == "id"


# --- over the wire --------------------------------------------------------------------------------------


async def test_send_message_in_snake_case_answers_in_camel_case(setup) -> None:
    ran, app = setup
    async with client(app) as http:
        reply = await rpc(
            http,
            "SendMessage",
            {
                "message": snake_message("one", context_id="ctx-1"),
                "configuration": {
                    "history_length": 1,
                    "return_immediately": False,
                    "accepted_output_modes": ["text/plain"],
                },
            },
        )
        task = reply["result"]["task"]
        assert (
            ran == ["one"]
            and task["contextId"] == "ctx-1"
            and task["status"]["state"] == "TASK_STATE_COMPLETED"
        )
        assert len(task["history"]) == 1 and "messageId" in task["history"][0]
        assert snake_keys(reply) == []
        rest = await http.post(
            "/a2a/message:send",
            headers=V1,
            json={
                "message": snake_message("two", context_id="ctx-1"),
                "configuration": {"history_length": 0},
            },
        )
        assert rest.status_code == 200, rest.text
        assert snake_keys(rest.json()) == [] and "history" not in rest.json()["task"]
        assert ran == ["one", "two"]


async def test_a_protobuf_json_client_with_proto_field_names(setup) -> None:
    """What a protobuf client sends with ``preserving_proto_field_name=True``; the answer parses strictly as the
    SDK's ``SendMessageResponse``, and the SDK client then reads the task."""
    ran, app = setup
    message = Message(
        message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=[Part(text="proto")], context_id="ctx-p"
    )
    message.metadata.update({"skill": "count"})
    request = SendMessageRequest(
        message=message,
        configuration=SendMessageConfiguration(history_length=5, accepted_output_modes=["text/plain"]),
    )
    params = MessageToDict(request, preserving_proto_field_name=True)
    assert "message_id" in params["message"] and "history_length" in params["configuration"]
    async with client(app) as http:
        reply = await rpc(http, "SendMessage", params)
        response = ParseDict(reply["result"], SendMessageResponse(), ignore_unknown_fields=False)
        assert response.task.context_id == "ctx-p" and ran == ["proto"]
        sdk = ClientFactory(
            ClientConfig(httpx_client=http, streaming=False, supported_protocol_bindings=["JSONRPC"])
        ).create(await A2ACardResolver(http, BASE).get_agent_card())
        task = await sdk.get_task(GetTaskRequest(id=response.task.id, history_length=1))
        assert task.history[0].message_id == message.message_id
        listed = await sdk.list_tasks(ListTasksRequest(context_id="ctx-p"))
        assert [t.id for t in listed.tasks] == [response.task.id]


async def test_get_task_history_length_in_both_spellings_and_bindings(setup) -> None:
    _ran, app = setup
    async with client(app) as http:
        task = (await rpc(http, "SendMessage", {"message": snake_message("x")}))["result"]["task"]
        full = await rpc(http, "GetTask", {"id": task["id"], "history_length": 1})
        assert len(full["result"]["history"]) == 1
        none = await rpc(http, "GetTask", {"id": task["id"], "history_length": 0})
        assert "history" not in none["result"]
        rest = await http.get(f"/a2a/tasks/{task['id']}?history_length=0", headers=V1)
        assert rest.status_code == 200 and "history" not in rest.json()
        bad = await http.get(f"/a2a/tasks/{task['id']}?history_length=-1", headers=V1)
        assert bad.status_code == 400 and bad.json()["error"]["status"] == "INVALID_ARGUMENT"


async def test_list_tasks_filters_by_context_in_either_spelling(setup) -> None:
    _ran, app = setup
    async with client(app) as http:
        for context in ("ctx-a", "ctx-a", "ctx-b"):
            await rpc(http, "SendMessage", {"message": snake_message(context, context_id=context)})
        for params in ({"contextId": "ctx-a"}, {"context_id": "ctx-a"}):
            listed = (await rpc(http, "ListTasks", params))["result"]
            assert listed["totalSize"] == 2 and {t["contextId"] for t in listed["tasks"]} == {"ctx-a"}
        paged = (await rpc(http, "ListTasks", {"page_size": 1, "include_artifacts": True}))["result"]
        assert paged["pageSize"] == 1 and paged["nextPageToken"] == "1" and "artifacts" in paged["tasks"][0]
        for query in ("context_id=ctx-b", "contextId=ctx-b", "context_id=ctx-b&A2A-Version=1.0"):
            rest = await http.get(f"/a2a/tasks?{query}", headers=V1)
            assert rest.status_code == 200, rest.text
            assert [t["contextId"] for t in rest.json()["tasks"]] == ["ctx-b"]
        artifacts = await http.get("/a2a/tasks?include_artifacts=true&page_size=1", headers=V1)
        assert "artifacts" in artifacts.json()["tasks"][0]


@pytest.mark.parametrize(
    "params",
    [
        {"context": "ctx-a"},
        {"contextID": "ctx-a"},
        {"filter": "x"},
        {"state": "TASK_STATE_COMPLETED"},
        {"includeArtifacts": "yes"},
    ],
)
async def test_an_unknown_list_filter_is_invalid_params(setup, params: dict) -> None:
    _ran, app = setup
    async with client(app) as http:
        await rpc(http, "SendMessage", {"message": snake_message("x")})
        reply = await rpc(http, "ListTasks", params)
        assert reply["error"]["code"] == -32602, reply
        query = "&".join(f"{k}={v}" for k, v in params.items())
        rest = await http.get(f"/a2a/tasks?{query}", headers=V1)
        assert rest.status_code == 400 and rest.json()["error"]["status"] == "INVALID_ARGUMENT"


async def test_push_configs_in_snake_case(setup) -> None:
    _ran, app = setup
    async with client(app) as http:
        parked = (
            await rpc(
                http,
                "SendMessage",
                {
                    "message": {
                        **snake_message("item", skill="ask"),
                        "parts": [{"data": {"item": "laptop"}}],
                    },
                    "configuration": {"task_push_notification_config": {"url": PUSH_URL, "token": "t1"}},
                },
            )
        )["result"]["task"]
        assert parked["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        listed = (await rpc(http, "ListTaskPushNotificationConfigs", {"task_id": parked["id"]}))["result"]
        assert [c["url"] for c in listed["configs"]] == [PUSH_URL] and snake_keys(listed) == []
        created = (
            await rpc(
                http,
                "CreateTaskPushNotificationConfig",
                {"task_id": parked["id"], "id": "second", "url": PUSH_URL},
            )
        )["result"]
        assert created["taskId"] == parked["id"] and snake_keys(created) == []
        got = (await rpc(http, "GetTaskPushNotificationConfig", {"task_id": parked["id"], "id": "second"}))[
            "result"
        ]
        assert got["id"] == "second"
        rest = await http.post(
            f"/a2a/tasks/{parked['id']}/pushNotificationConfigs",
            headers=V1,
            json={"id": "third", "url": PUSH_URL, "task_id": "ignored-path-wins"},
        )
        assert rest.status_code == 200 and rest.json()["taskId"] == parked["id"]
        assert (
            await rpc(http, "DeleteTaskPushNotificationConfig", {"task_id": parked["id"], "id": "second"})
        )["result"] == {}
        await rpc(http, "CancelTask", {"id": parked["id"]})


# --- task ids -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "params", "field"),
    [
        # GetTaskRequest, CancelTaskRequest and SubscribeToTaskRequest call the task's id `id` in the spec
        ("GetTask", {}, "id"),
        ("GetTask", {"id": ""}, "id"),
        ("GetTask", {"taskId": "t"}, "id"),
        ("CancelTask", {}, "id"),
        ("SubscribeToTask", {"id": 5}, "id"),
        # the push-config methods call it `taskId`
        ("CreateTaskPushNotificationConfig", {"url": PUSH_URL}, "taskId"),
        ("GetTaskPushNotificationConfig", {"id": "c"}, "taskId"),
        ("ListTaskPushNotificationConfigs", {}, "taskId"),
        ("DeleteTaskPushNotificationConfig", {"id": "c"}, "taskId"),
    ],
)
async def test_a_missing_task_id_names_the_specs_field(setup, method: str, params: dict, field: str) -> None:
    _ran, app = setup
    async with client(app) as http:
        reply = await rpc(http, method, params)
    error = reply["error"]
    assert error["code"] == -32602 and error["message"].startswith(f"{field} is required"), error
    assert error["data"][0]["metadata"] == {"field": field}


async def test_a_missing_push_config_id_is_invalid_params(setup) -> None:
    _ran, app = setup
    async with client(app) as http:
        parked = (
            await rpc(
                http,
                "SendMessage",
                {"message": {**snake_message("i", skill="ask"), "parts": [{"data": {"item": "x"}}]}},
            )
        )["result"]["task"]
        for method in ("GetTaskPushNotificationConfig", "DeleteTaskPushNotificationConfig"):
            reply = await rpc(http, method, {"taskId": parked["id"]})
            assert reply["error"]["code"] == -32602 and reply["error"]["message"].startswith("id is required")
        await rpc(http, "CancelTask", {"id": parked["id"]})


# --- checked before any skill runs ----------------------------------------------------------------------

BAD_CONFIGURATIONS = [
    {"historyLength": -1},
    {"history_length": -1},
    {"historyLength": 1.5},
    {"historyLength": "many"},
    {"historyLength": True},
    {"historyLength": 10**6},
    {"returnImmediately": "yes"},
    {"return_immediately": 1},
    {"acceptedOutputModes": "text/plain"},
    {"accepted_output_modes": [1]},
    {"taskPushNotificationConfig": {"url": "http://10.0.0.1/hook"}},
    {"task_push_notification_config": "not an object"},
    {"historyLength": 1, "history_length": 2},
]


@pytest.mark.parametrize("configuration", BAD_CONFIGURATIONS)
async def test_a_bad_configuration_never_runs_a_skill(setup, configuration: dict) -> None:
    ran, app = setup
    async with client(app) as http:
        for method in ("SendMessage", "SendStreamingMessage"):
            reply = await rpc(
                http, method, {"message": snake_message("nope"), "configuration": configuration}
            )
            assert reply["error"]["code"] == -32602, reply
        rest = await http.post(
            "/a2a/message:send",
            headers=V1,
            json={"message": snake_message("nope"), "configuration": configuration},
        )
        assert rest.status_code == 400, rest.text
        listed = (await rpc(http, "ListTasks", {}))["result"]
    assert ran == [] and listed["totalSize"] == 0  # no skill ran, no task was made


async def test_a_good_configuration_runs_it(setup) -> None:
    ran, app = setup
    async with client(app) as http:
        reply = await rpc(
            http,
            "SendMessage",
            {
                "message": snake_message("yes"),
                "configuration": {"historyLength": 0, "returnImmediately": False},
            },
        )
    assert reply["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED" and ran == ["yes"]
    assert ParseDict(reply["result"]["task"], Task(), ignore_unknown_fields=False).id


@pytest.mark.parametrize(
    "method",
    [
        "tasks/get",
        "tasks/cancel",
        "tasks/pushNotificationConfig/get",
        "tasks/pushNotificationConfig/list",
        "tasks/pushNotificationConfig/delete",
    ],
)
async def test_0_3_methods_name_their_own_id_field(setup, method: str) -> None:
    _ran, app = setup
    async with client(app) as http:
        reply = (
            await http.post("/a2a", json={"jsonrpc": "2.0", "id": 1, "method": method, "params": {}})
        ).json()
    assert reply["error"]["code"] == -32602 and reply["error"]["message"].startswith("id is required"), reply
