"""One HTTP edge for every face (src/agentmw/_edge.py): Host, Origin, Content-Type and the declared size.

The same checks hold on MCP, A2A (its JSON-RPC and HTTP+JSON bindings and the card), AG-UI and the approvals
endpoint, however the agent is served (``AgentMiddleware``, ``agent.router()``, ``agent.asgi()`` mounted,
``agent.routes()``), with no ``auth=``; each refusal is in its face's shape. Then the app's CORS policy: either
middleware order, the router, and the origins it lists accepted by the Origin check (never its ``"*"``).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from starlette.applications import Starlette
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import HTTPConnection
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from agentmw import Agent, AgentMiddleware
from agentmw.settings import Limits

ACCEPT_MCP = "application/json, text/event-stream"
FRONT = "https://front.example"  # the app's own front end: in its CORS list, not a host the agent serves
EVIL = "http://evil.example"
ran: list[str] = []


def identify(connection: HTTPConnection) -> str | None:
    return "admin" if connection.headers.get("authorization") == "Bearer t-admin" else None


def make_agent(**settings: Any) -> Agent:
    agent = Agent("edge", store="memory://", identify=identify, **settings)

    @agent.tool
    async def echo(text: str) -> str:
        ran.append(f"echo:{text}")
        return text

    @agent.skill
    async def chat(text: str) -> str:
        """Answer one message."""
        ran.append(f"chat:{text}")
        return f"you said {text}"

    return agent


def with_middleware(agent: Agent) -> tuple[Any, str]:
    app = FastAPI()
    app.add_middleware(AgentMiddleware, agent=agent)
    return app, ""


def with_router(agent: Agent) -> tuple[Any, str]:
    app = FastAPI()
    app.include_router(agent.router())
    return app, ""


def with_mount(agent: Agent) -> tuple[Any, str]:
    app = FastAPI()
    app.mount("/agent", agent.asgi())
    return app, "/agent"


def with_routes(agent: Agent) -> tuple[Any, str]:
    return Starlette(routes=agent.routes()), ""


MOUNTS = [with_middleware, with_router, with_mount, with_routes]


def run_body(text: str = "hi") -> dict[str, Any]:
    run = f"r-{uuid.uuid4()}"
    return {
        "threadId": f"t-{run}",
        "runId": run,
        "messages": [{"id": f"u-{run}", "role": "user", "content": text}],
        "state": {},
        "tools": [],
        "context": [],
        "forwardedProps": {},
    }


def a2a_message(text: str = "hi") -> dict[str, Any]:
    return {"messageId": f"m-{uuid.uuid4()}", "role": "ROLE_USER", "parts": [{"text": text}]}


INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 7,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    },
}

# Each face's request: method, path (after the mount), headers, a fresh JSON body. Each is served with a good Host.
FACES: dict[str, tuple[str, str, dict[str, str], Callable[[], Any]]] = {
    "mcp": ("POST", "/mcp", {"accept": ACCEPT_MCP}, lambda: INITIALIZE),
    "a2a-jsonrpc": (
        "POST",
        "/a2a",
        {"a2a-version": "1.0"},
        lambda: {"jsonrpc": "2.0", "id": 8, "method": "SendMessage", "params": {"message": a2a_message()}},
    ),
    "a2a-rest": ("POST", "/a2a/message:send", {"a2a-version": "1.0"}, lambda: {"message": a2a_message()}),
    "card": ("GET", "/.well-known/agent-card.json", {}, lambda: None),
    "agui": ("POST", "/agui/chat", {"accept": "text/event-stream"}, run_body),
    "approvals": ("GET", "/approvals/appr-none", {"authorization": "Bearer t-admin"}, lambda: None),
}


async def send(
    app: Any,
    prefix: str,
    face: str,
    *,
    base: str = "http://127.0.0.1:8000",
    headers: dict[str, str] | None = None,
    content: bytes | None = None,
    method: str | None = None,
) -> httpx.Response:
    verb, path, face_headers, make_body = FACES[face]
    body = make_body()
    merged = {**face_headers, **(headers or {})}
    if content is None and body is not None:
        content = json.dumps(body).encode()
        merged.setdefault("content-type", "application/json")
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=base) as http:
        return await http.request(method or verb, prefix + path, headers=merged, content=content)


def assert_refused(face: str, response: httpx.Response, status: int, message: str) -> None:
    """The refusal in the face's own shape: MCP and A2A JSON-RPC errors (with the request's id, read from the small
    body), google.rpc Status, FastAPI's detail."""
    assert response.status_code == status, (face, response.status_code, response.text[:300])
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    reason = "PERMISSION_DENIED" if status == 403 else "INVALID_ARGUMENT"
    info = {
        "@type": "type.googleapis.com/google.rpc.ErrorInfo",
        "reason": reason,
        "domain": "a2a-protocol.org",
        "metadata": {},
    }
    if face == "mcp":
        assert body == {"jsonrpc": "2.0", "id": 7, "error": {"code": -32600, "message": message}}
    elif face == "a2a-jsonrpc":
        assert body == {
            "jsonrpc": "2.0",
            "id": 8,
            "error": {"code": -32600, "message": message, "data": [info]},
        }
    elif face in ("a2a-rest", "card"):
        assert body == {"error": {"code": status, "status": reason, "message": message, "details": [info]}}
    else:
        assert body == {"detail": message}


# --- Host and Origin on every face, every way of serving ----------------------------------------------


@pytest.mark.parametrize("mount", MOUNTS, ids=lambda m: m.__name__)
@pytest.mark.parametrize("face", list(FACES))
async def test_every_face_refuses_a_foreign_host_and_origin(mount: Callable[..., Any], face: str) -> None:
    app, prefix = mount(make_agent())
    ran.clear()
    rebinding = await send(app, prefix, face, base="http://evil.example", headers={"origin": EVIL})
    assert_refused(face, rebinding, 421, "Invalid Host header")
    foreign_origin = await send(app, prefix, face, headers={"origin": EVIL})
    assert_refused(face, foreign_origin, 403, "Origin not allowed")
    assert ran == [], "a refused request must not reach the capability"
    served = await send(
        app, prefix, face, headers={"origin": "http://127.0.0.1:3000"}
    )  # a local page: allowed
    # reached the face: the approvals endpoint has no such approval, the others answer
    assert served.status_code == (404 if face == "approvals" else 200), served.text[:300]
    assert ran == (["chat:hi"] if face in ("a2a-jsonrpc", "a2a-rest", "agui") else [])


@pytest.mark.parametrize("face", list(FACES))
async def test_allowed_hosts_compare_the_port(face: str) -> None:
    app, _ = with_middleware(
        make_agent(allowed_hosts=["api.example.com", "admin.example.com:8443", "dev.example.com:*"])
    )
    for base in (
        "http://api.example.com",
        "https://api.example.com",
        "http://api.example.com:443",
        "https://admin.example.com:8443",
        "http://dev.example.com:5555",
        "http://localhost:9999",
        "http://[::1]:8000",
    ):
        response = await send(app, "", face, base=base)
        assert response.status_code not in (403, 421), (base, response.text[:200])
    # another port of an allowed name is another server (and, with no resource=, another audience)
    for host in (
        "api.example.com:8080",
        "admin.example.com",
        "admin.example.com:9443",
        "api.example.com.evil.example",
        "localhost:notaport",
        "localhost:80:80",
        "[::1",
    ):
        assert_refused(face, await send(app, "", face, headers={"host": host}), 421, "Invalid Host header")
    ok_origin = await send(
        app, "", face, base="https://api.example.com", headers={"origin": "https://api.example.com"}
    )
    assert ok_origin.status_code not in (403, 421)
    other_port = await send(
        app, "", face, base="https://api.example.com", headers={"origin": "https://api.example.com:8080"}
    )
    assert_refused(face, other_port, 403, "Origin not allowed")


@pytest.mark.parametrize("face", ["mcp", "a2a-jsonrpc", "agui"])
async def test_two_host_headers_are_refused(face: str) -> None:
    app, _ = with_middleware(make_agent())
    verb, path, headers, make_body = FACES[face]
    raw = [
        (b"host", b"127.0.0.1:8000"),
        (b"host", b"evil.example"),
        (b"content-type", b"application/json"),
        *((k.encode(), v.encode()) for k, v in headers.items()),
    ]
    status, payload = await call_asgi(app, verb, path, raw, json.dumps(make_body()).encode())
    assert status == 421, payload


def test_allowed_origins_are_still_accepted() -> None:
    agent = make_agent(allowed_origins=["https://partner.example/"])
    assert agent.origin_allowed("https://partner.example")
    assert not agent.origin_allowed("https://partner.example:444")
    assert not agent.origin_allowed("null") and not agent.origin_allowed("http://user@localhost")
    assert agent.host_allowed("LOCALHOST:8000") and not agent.host_allowed("")


# --- Content-Type and the declared body size -----------------------------------------------------------


@pytest.mark.parametrize("face", ["mcp", "a2a-jsonrpc", "a2a-rest", "agui"])
async def test_a_form_or_text_body_is_refused(face: str) -> None:
    app, _ = with_middleware(make_agent())
    ran.clear()
    _, _, _, make_body = FACES[face]
    for content_type in (
        "text/plain;charset=UTF-8",
        "application/x-www-form-urlencoded",
        "multipart/form-data",
    ):
        response = await send(
            app, "", face, headers={"content-type": content_type}, content=json.dumps(make_body()).encode()
        )
        assert_refused(face, response, 400 if face == "mcp" else 415, "Content-Type must be application/json")
    assert ran == []
    suffixed = await send(app, "", face, headers={"content-type": "application/a2a+json; charset=utf-8"})
    assert suffixed.status_code not in (400, 415), suffixed.text[:300]


async def test_a_decision_posted_as_a_form_is_refused() -> None:
    app, _ = with_middleware(make_agent())
    response = await send(
        app,
        "",
        "approvals",
        method="POST",
        content=b"approve=true",
        headers={"content-type": "application/x-www-form-urlencoded"},
    )
    assert_refused("approvals", response, 415, "Content-Type must be application/json")


async def call_asgi(
    app: Any,
    method: str,
    path: str,
    headers: list[tuple[bytes, bytes]],
    body: bytes = b"",
    *,
    read: list[bool] | None = None,
) -> tuple[int, Any]:
    """One request straight through ASGI; ``read`` records whether the app asked for the body."""
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": b"",
        "headers": headers,
        "client": ("127.0.0.1", 5000),
        "server": ("127.0.0.1", 8000),
    }
    started: dict[str, Any] = {}
    chunks: list[bytes] = []

    async def receive() -> dict[str, Any]:
        if read is not None:
            read.append(True)
        return {"type": "http.request", "body": body, "more_body": False}

    async def sent(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            started.update(message)
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))

    await app(scope, receive, sent)
    raw = b"".join(chunks)
    return started["status"], json.loads(raw) if raw.startswith((b"{", b"[")) else raw


@pytest.mark.parametrize("face", ["mcp", "a2a-jsonrpc", "a2a-rest", "agui", "approvals"])
async def test_a_declared_length_over_the_limit_is_refused_before_reading(face: str) -> None:
    agent = make_agent(limits=Limits(max_body_bytes=1000))
    app = AgentMiddleware(None, agent=agent)
    _verb, path, headers, _ = FACES[face]
    limit = 65536 if face == "approvals" else 1000  # a decision has its own, smaller limit (docs/limits.md)
    raw = [
        (b"host", b"127.0.0.1:8000"),
        (b"content-type", b"application/json"),
        (b"content-length", str(limit + 1).encode()),
        *((k.encode(), v.encode()) for k, v in headers.items()),
    ]
    read: list[bool] = []
    status, body = await call_asgi(app, "POST", path, raw, b"{}", read=read)
    assert status == 413 and read == [], (status, body)
    message = f"Request body too large (the limit is {limit} bytes)"
    if face in ("mcp", "a2a-jsonrpc"):
        assert body["error"]["message"] == message and body["id"] is None
    elif face == "a2a-rest":
        assert body["error"]["code"] == 413 and body["error"]["message"] == message
    else:
        assert body == {"detail": message}


async def test_host_routes_are_not_the_edges() -> None:
    """The edge guards the agent's paths only: the app's own routes keep the app's own rules."""
    app = Starlette(routes=[Route("/ping", lambda request: PlainTextResponse("pong"))])
    app.add_middleware(AgentMiddleware, agent=make_agent())
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://evil.example"
    ) as http:
        response = await http.post(
            "/ping", headers={"origin": EVIL, "content-type": "text/plain"}, content=b"x"
        )
    assert response.status_code == 405  # the app's router answered, not agentmw


# --- the app's CORS policy covers the agent's paths ---------------------------------------------------------


def cors_app(order: str, *, origins: list[str] | None = None) -> Any:
    agent = make_agent()
    cors = {
        "allow_origins": origins or [FRONT],
        "allow_methods": ["*"],
        "allow_headers": ["*"],
        "expose_headers": ["mcp-session-id"],
    }
    app = FastAPI()
    if order == "agent first":  # CORS added last: the outermost
        app.add_middleware(AgentMiddleware, agent=agent)
        app.add_middleware(CORSMiddleware, **cors)
    elif order == "cors first":  # AgentMiddleware added last: the outermost, as a migration usually adds it
        app.add_middleware(CORSMiddleware, **cors)
        app.add_middleware(AgentMiddleware, agent=agent)
    else:
        app.add_middleware(CORSMiddleware, **cors)
        app.include_router(agent.router())
    return app


ORDERS = ["agent first", "cors first", "router"]


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("face", ["mcp", "agui", "a2a-jsonrpc"])
async def test_the_apps_cors_policy_answers_preflights_on_the_agents_paths(order: str, face: str) -> None:
    app = cors_app(order)
    preflight = {
        "origin": FRONT,
        "access-control-request-method": "POST",
        "access-control-request-headers": "content-type",
    }
    response = await send(app, "", face, method="OPTIONS", headers=preflight, content=b"")
    assert response.status_code == 200, response.text[:300]
    assert response.headers["access-control-allow-origin"] == FRONT
    assert "POST" in response.headers["access-control-allow-methods"]
    refused = await send(app, "", face, method="OPTIONS", headers={**preflight, "origin": EVIL}, content=b"")
    assert refused.status_code == 400 and "access-control-allow-origin" not in refused.headers


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("face", list(FACES))
async def test_an_origin_the_cors_policy_lists_is_served_with_its_headers(order: str, face: str) -> None:
    app = cors_app(order)
    ran.clear()
    response = await send(app, "", face, headers={"origin": FRONT})
    assert response.status_code not in (403, 421), response.text[:300]
    assert response.headers["access-control-allow-origin"] == FRONT
    if face == "mcp":
        assert response.headers["access-control-expose-headers"] == "mcp-session-id"
    if face in ("a2a-jsonrpc", "a2a-rest", "agui"):
        assert ran == ["chat:hi"]
    other = await send(app, "", face, headers={"origin": EVIL})
    assert_refused(face, other, 403, "Origin not allowed")
    assert "access-control-allow-origin" not in other.headers


@pytest.mark.parametrize("order", ORDERS)
async def test_a_wildcard_cors_policy_does_not_widen_the_origin_check(order: str) -> None:
    app = cors_app(order, origins=["*"])
    response = await send(app, "", "agui", headers={"origin": EVIL})
    assert_refused("agui", response, 403, "Origin not allowed")


async def test_a_cors_regex_is_honoured() -> None:
    agent = make_agent()
    app = FastAPI()
    app.add_middleware(
        CORSMiddleware,
        allow_origin_regex=r"https://[a-z]+\.front\.example",
        allow_methods=["*"],
        allow_headers=["*"],
    )
    app.add_middleware(AgentMiddleware, agent=agent)
    served = await send(app, "", "agui", headers={"origin": "https://shop.front.example"})
    assert (
        served.status_code == 200
        and served.headers["access-control-allow-origin"] == "https://shop.front.example"
    )
    assert_refused(
        "agui",
        await send(app, "", "agui", headers={"origin": "https://front.example.evil.example"}),
        403,
        "Origin not allowed",
    )
