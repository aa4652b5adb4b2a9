"""A2A bad input and edge rules over both bindings, the extended card, and the SQLite store across a restart."""

from __future__ import annotations

import json
import uuid

import httpx
import pytest

from agentmw.a2a import registry as registry_module
from agentmw.state import MemoryState, SQLiteState
from tests import a2a_app
from tests.waiting import eventually

V1 = {"a2a-version": "1.0"}


@pytest.fixture
def app():
    return a2a_app.build()[1]


def client(app, **headers: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1:8000", headers=headers, timeout=10
    )


async def rpc(
    http: httpx.AsyncClient,
    method: str,
    params: object = None,
    *,
    version: str | None = "1.0",
    request_id: object = 1,
) -> dict:
    headers = {"a2a-version": version} if version is not None else {}
    body = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        body["params"] = params
    response = await http.post("/a2a", json=body, headers=headers)
    assert response.status_code == 200, response.text
    return response.json()


def msg(text: str = "hi", **extra: object) -> dict:
    return {"messageId": f"m-{uuid.uuid4()}", "role": "ROLE_USER", "parts": [{"text": text}], **extra}


@pytest.mark.parametrize(
    ("method", "params", "code"),
    [
        ("SendMessage", {}, -32602),
        ("SendMessage", {"message": {"role": "ROLE_USER", "parts": [{"text": "x"}]}}, -32602),
        ("SendMessage", {"message": {"messageId": "m", "role": "user", "parts": [{"text": "x"}]}}, -32602),
        ("SendMessage", {"message": {"messageId": "m", "role": "ROLE_USER", "parts": []}}, -32602),
        (
            "SendMessage",
            {"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "x", "data": {}}]}},
            -32602,
        ),
        ("SendMessage", {"message": msg(metadata={"skill": "nope"})}, -32602),
        ("SendMessage", {"message": msg(taskId="missing")}, -32001),
        ("SendMessage", {"message": msg(), "configuration": {"historyLength": -1}}, -32602),
        ("SendStreamingMessage", {"message": "x"}, -32602),
        ("GetTask", {"id": "missing"}, -32001),
        ("GetTask", {}, -32602),
        ("ListTasks", {"pageSize": 0}, -32602),
        ("ListTasks", {"status": "done"}, -32602),
        ("ListTasks", {"statusTimestampAfter": "yesterday"}, -32602),
        ("CancelTask", {"id": "missing"}, -32001),
        ("SubscribeToTask", {"id": "missing"}, -32001),
        ("CreateTaskPushNotificationConfig", {"taskId": "missing", "url": "http://127.0.0.1/x"}, -32001),
        ("GetTaskPushNotificationConfig", {"taskId": "missing", "id": "x"}, -32001),
        ("ListTaskPushNotificationConfigs", {"taskId": "missing"}, -32001),
        ("DeleteTaskPushNotificationConfig", {"taskId": "missing", "id": "x"}, -32001),
        ("NoSuchMethod", {}, -32601),
    ],
)
async def test_jsonrpc_errors(app, method: str, params: dict, code: int) -> None:
    async with client(app) as http:
        reply = await rpc(http, method, params)
    assert reply["error"]["code"] == code, reply
    assert reply["id"] == 1
    assert reply["error"]["data"][0]["@type"] == "type.googleapis.com/google.rpc.ErrorInfo"


async def test_envelope_errors(app) -> None:
    async with client(app, **V1) as http:
        parse = await http.post("/a2a", content="{nope")
        assert parse.json()["error"]["code"] == -32700 and parse.json()["id"] is None
        batch = await http.post("/a2a", json=[{"jsonrpc": "2.0", "id": 1, "method": "GetTask"}])
        assert batch.json()["error"]["code"] == -32600
        no_id = await http.post("/a2a", json={"jsonrpc": "2.0", "method": "GetTask"})
        assert no_id.json()["error"]["code"] == -32600
        params = await http.post("/a2a", json={"jsonrpc": "2.0", "id": 2, "method": "GetTask", "params": [1]})
        assert params.json()["error"]["code"] == -32602
        get = await http.get("/a2a")
        assert get.status_code == 405


async def test_version_rules(app) -> None:
    async with client(app) as http:
        missing = await rpc(http, "SendMessage", {"message": msg(metadata={"skill": "echo"})}, version=None)
        assert missing["error"]["code"] == -32009  # no header means 0.3, and SendMessage is 1.0
        future = await rpc(http, "SendMessage", {"message": msg(metadata={"skill": "echo"})}, version="2.0")
        assert future["error"]["code"] == -32009
        patch = await rpc(http, "SendMessage", {"message": msg(metadata={"skill": "echo"})}, version="1.0.7")
        assert patch["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
        old_name_new_header = await rpc(http, "tasks/get", {"id": "x"}, version="1.0")
        assert old_name_new_header["error"]["code"] == -32009


async def test_terminal_and_context_rules(app) -> None:
    async with client(app) as http:
        done = (await rpc(http, "SendMessage", {"message": msg(metadata={"skill": "echo"})}))["result"][
            "task"
        ]
        again = await rpc(http, "SendMessage", {"message": msg("more", taskId=done["id"])})
        assert again["error"]["code"] == -32004
        subscribe = await rpc(http, "SubscribeToTask", {"id": done["id"]})
        assert subscribe["error"]["code"] == -32004
        cancel = await rpc(http, "CancelTask", {"id": done["id"]})
        assert cancel["error"]["code"] == -32002
        asking = (await rpc(http, "SendMessage", {"message": msg(metadata={"skill": "add"})}))["result"][
            "task"
        ]
        assert asking["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        wrong = await rpc(http, "SendMessage", {"message": msg("x", taskId=asking["id"], contextId="other")})
        assert wrong["error"]["code"] == -32602
        only_task = await rpc(
            http,
            "SendMessage",
            {"message": {**msg("x", taskId=asking["id"]), "parts": [{"data": {"a": 1, "b": 2}}]}},
        )
        task = only_task["result"]["task"]
        assert task["contextId"] == asking["contextId"] and task["status"]["state"] == "TASK_STATE_COMPLETED"
        assert (await rpc(http, "GetTask", {"id": task["id"], "historyLength": 0}))["result"].get(
            "history"
        ) is None


async def test_push_config_crud_and_ssrf_policy(app) -> None:
    async with client(app) as http:
        task = (await rpc(http, "SendMessage", {"message": msg(metadata={"skill": "add"})}))["result"]["task"]
        blocked = await rpc(
            http, "CreateTaskPushNotificationConfig", {"taskId": task["id"], "url": "http://10.0.0.8/hook"}
        )
        assert blocked["error"]["code"] == -32602 and "private" in blocked["error"]["message"]
        bad = await rpc(http, "CreateTaskPushNotificationConfig", {"taskId": task["id"], "url": "ftp://x"})
        assert bad["error"]["code"] == -32602
        made = await rpc(
            http,
            "CreateTaskPushNotificationConfig",
            {"taskId": task["id"], "url": "http://127.0.0.1:9/hook", "token": "t"},
        )
        config = made["result"]
        assert config["id"] == task["id"] and config["url"] == "http://127.0.0.1:9/hook"
        got = await rpc(http, "GetTaskPushNotificationConfig", {"taskId": task["id"], "id": config["id"]})
        assert got["result"] == config
        listed = await rpc(http, "ListTaskPushNotificationConfigs", {"taskId": task["id"]})
        assert listed["result"]["configs"] == [config]
        assert (
            await rpc(http, "DeleteTaskPushNotificationConfig", {"taskId": task["id"], "id": config["id"]})
        )["result"] == {}
        assert (
            await rpc(http, "DeleteTaskPushNotificationConfig", {"taskId": task["id"], "id": config["id"]})
        )["result"] == {}  # idempotent
        assert (await rpc(http, "ListTaskPushNotificationConfigs", {"taskId": task["id"]}))["result"][
            "configs"
        ] == []


async def test_failed_push_never_changes_the_task() -> None:
    agent, app = a2a_app.build()
    agent.a2a.push.max_attempts = 2
    async with client(app) as http:
        request = {
            "message": msg(metadata={"skill": "echo"}),
            "configuration": {"taskPushNotificationConfig": {"url": "http://127.0.0.1:9/closed"}},
        }
        task = (await rpc(http, "SendMessage", request))["result"]["task"]
        assert task["status"]["state"] == "TASK_STATE_COMPLETED"
        sender = agent.a2a_app.ops.push
        await eventually(lambda: sender.failed >= 3, "three failed deliveries")
        assert sender.failed == 3 and sender.delivered == 0
        assert (await rpc(http, "GetTask", {"id": task["id"]}))["result"]["status"][
            "state"
        ] == "TASK_STATE_COMPLETED"


@pytest.mark.parametrize(
    ("verb", "path", "body", "status", "reason"),
    [
        ("GET", "/a2a/tasks/missing", None, 404, "TASK_NOT_FOUND"),
        ("POST", "/a2a/tasks/missing:cancel", None, 404, "TASK_NOT_FOUND"),
        ("POST", "/a2a/message:send", {"message": {"messageId": "m"}}, 400, "INVALID_PARAMS"),
        ("POST", "/a2a/message:send", "not json", 400, "PARSE_ERROR"),
        ("GET", "/a2a/tasks?pageSize=1000", None, 400, "INVALID_PARAMS"),
        ("GET", "/a2a/nothing/here", None, 404, "METHOD_NOT_FOUND"),
        ("GET", "/a2a/extendedAgentCard", None, 401, None),
    ],
)
async def test_rest_errors(app, verb: str, path: str, body: object, status: int, reason: str | None) -> None:
    async with client(app, **V1) as http:
        content = body if isinstance(body, str) else json.dumps(body) if body is not None else None
        response = await http.request(verb, path, content=content)
    assert response.status_code == status, response.text
    if reason:
        assert response.json()["error"]["details"][0]["reason"] == reason


async def test_extended_card_by_credentials(app) -> None:
    async with client(app) as http:
        none = await http.post(
            "/a2a", headers=V1, json={"jsonrpc": "2.0", "id": 1, "method": "GetExtendedAgentCard"}
        )
        assert none.status_code == 401 and none.headers["www-authenticate"] == "Bearer"
        bad = await http.get("/.well-known/agent-card.json", headers={"authorization": "Bearer bad"})
        assert bad.status_code == 401
        user = await http.post(
            "/a2a",
            headers={**V1, "authorization": "Bearer alice"},
            json={"jsonrpc": "2.0", "id": 1, "method": "GetExtendedAgentCard"},
        )
        assert user.status_code == 403
        public_for_user = await http.get(
            "/.well-known/agent-card.json", headers={"authorization": "Bearer alice"}
        )
        assert "admin" not in [s["id"] for s in public_for_user.json()["skills"]]
        admin = await http.get("/a2a/extendedAgentCard", headers={**V1, "authorization": "Bearer admin"})
        assert "admin" in [s["id"] for s in admin.json()["skills"]]
        card = await http.get("/.well-known/agent-card.json", headers={"authorization": "Bearer admin"})
        assert "admin" in [s["id"] for s in card.json()["skills"]]
        assert card.headers["cache-control"].startswith("private")


async def test_v03_wire_shapes(app) -> None:
    async with client(app) as http:
        send = await rpc(
            http,
            "message/send",
            {
                "message": {
                    "kind": "message",
                    "messageId": "m1",
                    "role": "user",
                    "parts": [{"kind": "text", "text": "hi"}],
                    "metadata": {"skill": "echo"},
                }
            },
            version=None,
        )
        task = send["result"]
        assert task["kind"] == "task" and task["status"]["state"] == "completed"
        assert task["artifacts"][0]["parts"] == [{"kind": "text", "text": "echo: hi"}]
        assert task["history"][0]["role"] == "user" and task["history"][0]["kind"] == "message"
        got = await rpc(http, "tasks/get", {"id": task["id"]}, version="0.3")
        assert got["result"]["id"] == task["id"]
        stream = await http.post(
            "/a2a",
            json={
                "jsonrpc": "2.0",
                "id": 9,
                "method": "message/stream",
                "params": {
                    "message": {
                        "kind": "message",
                        "messageId": "m2",
                        "role": "user",
                        "parts": [{"kind": "text", "text": "s"}],
                        "metadata": {"skill": "echo"},
                    }
                },
            },
        )
        events = [json.loads(line[5:]) for line in stream.text.splitlines() if line.startswith("data:")]
        kinds = [e["result"]["kind"] for e in events]
        assert kinds == ["task", "status-update", "artifact-update", "status-update"]
        assert events[-1]["result"]["final"] is True and events[1]["result"]["final"] is False
        bad = await rpc(
            http,
            "message/send",
            {
                "message": {
                    "kind": "message",
                    "messageId": "m3",
                    "role": "robot",
                    "parts": [{"kind": "text", "text": "x"}],
                }
            },
            version=None,
        )
        assert bad["error"]["code"] == -32602


async def test_sqlite_tasks_survive_a_restart(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(registry_module, "HEARTBEAT_SECONDS", 0.3)  # a dead process is known dead soon
    path = tmp_path / "tasks.db"
    first = SQLiteState(path)
    agent, app = a2a_app.build(first)
    async with client(app) as http:
        done = (await rpc(http, "SendMessage", {"message": msg(metadata={"skill": "echo"})}))["result"][
            "task"
        ]
        approval = {
            "message": {**msg("x", metadata={"skill": "approve"}), "parts": [{"data": {"item": "pc"}}]}
        }
        parked = (await rpc(http, "SendMessage", approval))["result"]["task"]
        waiting = (await rpc(http, "SendMessage", {"message": msg(metadata={"skill": "add"})}))["result"][
            "task"
        ]
    assert parked["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    # A crash: the process dies with the coroutine parked, and nothing more reaches the file (what it had
    # answered was written: a blocking send's write lands behind its answer, the flush waits for that).
    tasks = agent.a2a_app.ops.tasks
    await tasks.flush()
    replica = tasks.registry.replica
    tasks.store = MemoryState()
    await tasks.close()
    await first.close()

    second = SQLiteState(path)  # a new process on the same file, once the dead one's heartbeat is gone

    async def dead() -> bool:
        return await second.get_key("a2a.replicas", replica) is None

    await eventually(dead, "the dead process's heartbeat to expire")
    restarted, app2 = a2a_app.build(second)
    async with client(app2) as http:
        again = (await rpc(http, "GetTask", {"id": done["id"]}))["result"]
        assert (
            again["status"]["state"] == "TASK_STATE_COMPLETED"
            and again["artifacts"][0]["parts"][0]["text"] == "echo: hi"
        )
        # One store holds the tasks and the journal (Agent(store=...)), so the coroutine parked on its question
        # when the process died resumes from its journal here: still waiting, and the answer completes it.
        still = (await rpc(http, "GetTask", {"id": parked["id"]}))["result"]
        assert still["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        answer = {**msg("x", taskId=parked["id"]), "parts": [{"data": {"approved": True}}]}
        approved = (await rpc(http, "SendMessage", {"message": answer}))["result"]["task"]
        assert approved["status"]["state"] == "TASK_STATE_COMPLETED"
        assert approved["artifacts"][0]["parts"][0]["text"] == "pc: approved"
        resumed = await rpc(
            http,
            "SendMessage",
            {"message": {**msg("x", taskId=waiting["id"]), "parts": [{"data": {"a": 2, "b": 2}}]}},
        )
        assert resumed["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    await restarted.a2a_app.ops.tasks.close()
    await second.close()
