"""Auth at its edges (issue 22, item 5), over real sockets with the real Authlib authorization server:

- the RFC 8707 audience is bound to scheme, host and port: a token for another port of the same name is refused
  on every face and in both MCP eras, and the metadata is never published for such a ``Host``;
- ``ProtectedResource(faces=...)`` protects only the faces it names;
- two ``Authorization`` headers are refused (RFC 6750 ``invalid_request``), never "the first one wins";
- RFC 9068 ``typ: at+jwt`` is checked by default (``JWTVerifier(typ=...)``);
- refusals carry the request's JSON-RPC id (MCP both eras, A2A's JSON-RPC binding), with the challenge;
- the card's ``oauth2`` scheme has ``flows``, and the a2a-sdk reads both card versions.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from a2a.client import A2ACardResolver
from a2a.compat.v0_3 import types as v03
from a2a.utils.proto_utils import validate_proto_required_fields
from joserfc import jwt as jose_jwt

from agentmw import Agent
from agentmw.auth import InvalidToken, JWTVerifier, Principal, ProtectedResource
from tests.auth.server import AuthServer
from tests.conftest import free_port, serve

HANDSHAKE = "2025-11-25"
MODERN = "2026-07-28"
ERAS = [HANDSHAKE, MODERN]
FACES = ["mcp-2025-11-25", "mcp-2026-07-28", "a2a-jsonrpc", "a2a-rest", "agui"]
ACCEPT = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


def build(issuer: str, *, allowed_hosts: tuple[str, ...] = (), verifier: Any = None, **options: Any) -> Agent:
    agent = Agent(
        "edges",
        store="memory://",
        allowed_hosts=allowed_hosts,
        auth=ProtectedResource(
            authorization_servers=[issuer],
            verifier=verifier or JWTVerifier(issuer=issuer),
            scopes=["mcp"],
            **options,
        ),
    )

    @agent.tool
    async def ping() -> str:
        """Answer pong."""
        return "pong"

    @agent.skill
    async def chat(text: str) -> str:
        """Answer a question.

        Summary:
            Says it back.
        """
        return f"You said: {text}"

    return agent


@pytest.fixture(scope="module")
def edges(auth_server: AuthServer) -> Iterator[str]:
    with serve(
        build(auth_server.issuer, allowed_hosts=("api.example.com", "api.example.com:8443")).asgi()
    ) as url:
        yield url


# --- one request per face ---------------------------------------------------------------------------------------


def _bearer(token: str | None) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"} if token else {}


async def mcp(
    http: httpx.AsyncClient,
    url: str,
    era: str,
    headers: dict[str, str],
    request_id: Any = 7,
    method: str = "tools/list",
    params: dict[str, Any] | None = None,
) -> httpx.Response:
    """One MCP request: the handshake era's ``initialize`` (it is admitted like any other), or a stateless one."""
    if era == HANDSHAKE:
        body = {
            "jsonrpc": "2.0",
            "id": request_id,
            "method": "initialize",
            "params": {
                "protocolVersion": HANDSHAKE,
                "capabilities": {},
                "clientInfo": {"name": "raw", "version": "1"},
            },
        }
        return await http.post(f"{url}/mcp", headers={**ACCEPT, **headers}, json=body)
    sent = {**ACCEPT, "mcp-protocol-version": MODERN, "mcp-method": method, **headers}
    params = {
        **(params or {}),
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": {},
        },
    }
    if "name" in params:
        sent["mcp-name"] = params["name"]
    return await http.post(
        f"{url}/mcp",
        headers=sent,
        json={"jsonrpc": "2.0", "id": request_id, "method": method, "params": params},
    )


def a2a_message() -> dict[str, Any]:
    return {
        "message": {
            "messageId": str(uuid.uuid4()),
            "role": "ROLE_USER",
            "parts": [{"text": "hi"}],
            "metadata": {"skill": "chat"},
        }
    }


async def face(http: httpx.AsyncClient, url: str, which: str, headers: dict[str, str]) -> httpx.Response:
    if which.startswith("mcp-"):
        return await mcp(http, url, which.removeprefix("mcp-"), headers)
    if which == "a2a-jsonrpc":
        return await http.post(
            f"{url}/a2a",
            headers={"a2a-version": "1.0", **headers},
            json={"jsonrpc": "2.0", "id": 7, "method": "SendMessage", "params": a2a_message()},
        )
    if which == "a2a-rest":
        return await http.post(
            f"{url}/a2a/message:send", headers={"a2a-version": "1.0", **headers}, json=a2a_message()
        )
    return await http.post(
        f"{url}/agui/chat",
        headers={"accept": "text/event-stream", **headers},
        json={
            "threadId": f"t-{uuid.uuid4()}",
            "runId": f"r-{uuid.uuid4()}",
            "state": {},
            "tools": [],
            "context": [],
            "forwardedProps": {},
            "messages": [{"id": "u", "role": "user", "content": "hi"}],
        },
    )


def served(which: str, response: httpx.Response) -> bool:
    """Whether the face ran the request (not refused at the HTTP level, not a JSON-RPC error)."""
    if response.status_code != 200:
        return False
    if which.startswith("mcp-") or which == "a2a-jsonrpc":
        text = response.text
        payload = text[text.index("{") :] if "data:" in text else text
        return '"error"' not in payload[:200]
    if which == "agui":
        return "RUN_FINISHED" in response.text
    return True


def port_of(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


def other_port(url: str) -> int:
    port = free_port()
    return port if port != port_of(url) else port + 1


# --- (1) the audience is bound to the port ----------------------------------------------------------------------


@pytest.mark.parametrize("which", FACES)
async def test_a_token_for_another_port_on_the_same_name_is_refused(
    auth_server: AuthServer, edges: str, which: str
) -> None:
    """The server is at 127.0.0.1:P. Another resource server on 127.0.0.1:Q gets the users' tokens (aud: its own
    URL); naming Q in ``Host`` must not make those tokens good here."""
    port = other_port(edges)
    stolen = auth_server.issue(subject="victim", audience=f"http://127.0.0.1:{port}/mcp")
    own = auth_server.issue(subject="alice", audience=f"{edges}/mcp")
    async with httpx.AsyncClient(timeout=30) as http:
        assert served(which, await face(http, edges, which, _bearer(own)))  # the server's own audience works
        replayed = await face(http, edges, which, {**_bearer(stolen), "host": f"127.0.0.1:{port}"})
    assert replayed.status_code in (401, 421), (replayed.status_code, replayed.text[:300])


@pytest.mark.parametrize("which", FACES)
async def test_an_allowed_name_with_another_port_does_not_choose_the_audience(
    auth_server: AuthServer, edges: str, which: str
) -> None:
    """``allowed_hosts=["api.example.com"]`` is that name at its default port: ``Host: api.example.com:9443``
    with a token for that port is refused; the default port, and a port listed as ``name:port``, are served."""
    async with httpx.AsyncClient(timeout=30) as http:
        other = auth_server.issue(subject="victim", audience="http://api.example.com:9443/mcp")
        refused = await face(http, edges, which, {**_bearer(other), "host": "api.example.com:9443"})
        plain = auth_server.issue(subject="alice", audience="http://api.example.com/mcp")
        default_port = await face(http, edges, which, {**_bearer(plain), "host": "api.example.com"})
        listed = auth_server.issue(subject="alice", audience="http://api.example.com:8443/mcp")
        listed_port = await face(http, edges, which, {**_bearer(listed), "host": "api.example.com:8443"})
    assert refused.status_code in (401, 421), (refused.status_code, refused.text[:300])
    assert served(which, default_port), default_port.text[:300]
    assert served(which, listed_port), listed_port.text[:300]


async def test_a_local_name_without_the_servers_port_is_not_this_resource(
    auth_server: AuthServer, edges: str
) -> None:
    """``Host: 127.0.0.1`` (no port: port 80) names another local server than the one at 127.0.0.1:P."""
    stolen = auth_server.issue(subject="victim", audience="http://127.0.0.1/mcp")
    async with httpx.AsyncClient(timeout=30) as http:
        for which in FACES:
            response = await face(http, edges, which, {**_bearer(stolen), "host": "127.0.0.1"})
            assert response.status_code in (401, 421), (which, response.status_code, response.text[:300])


@pytest.mark.parametrize(
    "host", ["127.0.0.1:{port}/x", "127.0.0.1:{port}@evil.example", "127.0.0.1:+{port}", "127.0.0.1:0{port}"]
)
async def test_a_host_that_is_not_an_authority_never_becomes_an_audience(
    auth_server: AuthServer, edges: str, host: str
) -> None:
    port = port_of(edges)
    value = host.format(port=port)
    token = auth_server.issue(subject="alice", audience=f"http://{value}/mcp")
    async with httpx.AsyncClient(timeout=30) as http:
        response = await face(http, edges, "mcp-2026-07-28", {**_bearer(token), "host": value})
    assert response.status_code in (400, 401, 421), (response.status_code, response.text[:300])


async def test_the_metadata_is_not_published_for_another_port(edges: str) -> None:
    port = other_port(edges)
    async with httpx.AsyncClient(timeout=30) as http:
        foreign = await http.get(
            f"{edges}/.well-known/oauth-protected-resource/mcp", headers={"host": f"127.0.0.1:{port}"}
        )
        own = await http.get(f"{edges}/.well-known/oauth-protected-resource/mcp")
    assert foreign.status_code == 421, foreign.text
    assert str(port) not in foreign.text
    assert own.status_code == 200 and own.json()["resource"] == f"{edges}/mcp"
    # derived from the request, the document must not sit in a shared cache that keys on another name
    assert "public" not in own.headers["cache-control"] and "no-store" in own.headers["cache-control"]


async def test_a_configured_resource_wins_over_the_host(auth_server: AuthServer) -> None:
    """With ``resource=``, the audience never depends on ``Host``; its metadata is the same for every Host and
    may be cached publicly."""
    resource = "https://agent.example.com/mcp"
    agent = build(auth_server.issuer, resource=resource)
    with serve(agent.asgi()) as url:
        port = other_port(url)
        good = auth_server.issue(subject="alice", audience=resource)
        by_host = auth_server.issue(subject="victim", audience=f"http://127.0.0.1:{port}/mcp")
        async with httpx.AsyncClient(timeout=30) as http:
            for which in FACES:
                assert served(
                    which, await face(http, url, which, {**_bearer(good), "host": f"127.0.0.1:{port}"})
                )
                refused = await face(http, url, which, {**_bearer(by_host), "host": f"127.0.0.1:{port}"})
                assert refused.status_code == 401, (which, refused.text[:300])
            metadata = await http.get(f"{url}/.well-known/oauth-protected-resource/mcp")
    assert metadata.json()["resource"] == resource
    assert metadata.headers["cache-control"] == "public, max-age=3600"


# --- (2) faces= protects the faces it names ---------------------------------------------------------------------


def _users(token: str, resource: str) -> Principal | None:
    return {"alice": Principal("alice", scopes={"mcp"})}.get(token)


@pytest.mark.parametrize("protected", [("mcp",), ("a2a",), ("agui",), ("mcp", "agui")])
async def test_faces_protects_only_the_faces_named(protected: tuple[str, ...]) -> None:
    agent = build("https://login.example.com", verifier=_users, faces=protected)
    with serve(agent.asgi()) as url:
        async with httpx.AsyncClient(timeout=30) as http:
            for which in FACES:
                anonymous = await face(http, url, which, {})
                with_token = await face(http, url, which, _bearer("alice"))
                bad_token = await face(http, url, which, _bearer("mallory"))
                assert served(which, with_token), (which, with_token.text[:300])
                assert bad_token.status_code == 401, which  # a token that is sent is checked, on every face
                if which.split("-")[0] in protected:
                    assert anonymous.status_code == 401, (which, anonymous.text[:300])
                    assert anonymous.headers["www-authenticate"].startswith("Bearer resource_metadata=")
                else:
                    assert served(which, anonymous), (
                        which,
                        protected,
                        anonymous.status_code,
                        anonymous.text[:300],
                    )


async def test_a_scoped_capability_still_needs_its_scope_on_an_unprotected_face() -> None:
    agent = Agent(
        "scoped",
        store="memory://",
        auth=ProtectedResource(
            authorization_servers=["https://login.example.com"], verifier=_users, faces=("mcp",)
        ),
    )

    @agent.skill(scopes=["reports:write"])
    async def chat(text: str) -> str:
        """Write a report.

        Summary:
            Writes it.
        """
        return text

    with serve(agent.asgi()) as url:
        async with httpx.AsyncClient(timeout=30) as http:
            anonymous = await face(http, url, "a2a-jsonrpc", {})
            alice = await face(http, url, "a2a-jsonrpc", _bearer("alice"))
    assert anonymous.status_code == 401 and 'scope="reports:write"' in anonymous.headers["www-authenticate"]
    assert alice.status_code == 403


# --- (3) two Authorization headers ------------------------------------------------------------------------------


@pytest.mark.parametrize("which", FACES)
async def test_two_authorization_headers_are_refused(auth_server: AuthServer, edges: str, which: str) -> None:
    good = auth_server.issue(subject="alice", audience=f"{edges}/mcp")
    bad = "not-a-token"
    for first, second in ((good, bad), (bad, good), (good, good)):
        headers = [("authorization", f"Bearer {first}"), ("authorization", f"Bearer {second}")]
        async with httpx.AsyncClient(timeout=30, headers=headers) as http:
            response = await face(http, edges, which, {})
        assert response.status_code == 400, (which, response.status_code, response.text[:300])
        assert 'error="invalid_request"' in response.headers["www-authenticate"]
        if which.startswith("mcp-") or which == "a2a-jsonrpc":
            assert response.json()["id"] == 7 and response.json()["error"]["code"] == -32600
        elif which == "a2a-rest":
            assert response.json()["error"]["status"] == "INVALID_ARGUMENT"
        else:
            assert "Authorization" in response.json()["detail"]


# --- (4) typ: at+jwt ----------------------------------------------------------------------------------------------


def _typed(auth_server: AuthServer, audience: str, typ: str | None) -> str:
    token = auth_server.issue(subject="alice", audience=audience)
    claims = jose_jwt.decode(token, auth_server.keys[0]).claims
    key = auth_server.keys[0]
    header = {"alg": "RS256", "kid": key.kid, **({"typ": typ} if typ is not None else {})}
    return jose_jwt.encode(header, claims, key)


@pytest.mark.parametrize(
    ("typ", "accepted"),
    [
        ("at+jwt", True),
        ("application/at+jwt", True),
        ("AT+JWT", True),
        ("JWT", False),
        (None, False),
        ("id+jwt", False),
    ],
)
async def test_rfc_9068_typ_is_checked_by_default(
    auth_server: AuthServer, typ: str | None, accepted: bool
) -> None:
    resource = "http://127.0.0.1/mcp"
    token = _typed(auth_server, resource, typ)
    strict = JWTVerifier(issuer=auth_server.issuer)
    if accepted:
        assert (await strict.verify(token, resource)).subject == "alice"
    else:
        with pytest.raises(InvalidToken, match="typ"):
            await strict.verify(token, resource)
    assert (await JWTVerifier(issuer=auth_server.issuer, typ=None).verify(token, resource)).subject == "alice"


async def test_a_token_of_another_type_is_refused_on_the_faces(auth_server: AuthServer, edges: str) -> None:
    id_token = _typed(auth_server, f"{edges}/mcp", "JWT")
    async with httpx.AsyncClient(timeout=30) as http:
        for which in FACES:
            response = await face(http, edges, which, _bearer(id_token))
            assert response.status_code == 401, which
            assert "typ" in response.headers["www-authenticate"]


# --- (5) refusals carry the request id ---------------------------------------------------------------------------


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize("request_id", [7, "req-7"])
async def test_mcp_http_level_refusals_carry_the_request_id(
    auth_server: AuthServer, edges: str, era: str, request_id: Any
) -> None:
    async with httpx.AsyncClient(timeout=30) as http:
        missing = await mcp(http, edges, era, {}, request_id)
        expired = await mcp(
            http, edges, era, _bearer(auth_server.issue(audience=f"{edges}/mcp", expires_in=-600)), request_id
        )
        no_scope = await mcp(
            http, edges, era, _bearer(auth_server.issue(audience=f"{edges}/mcp", scope="other")), request_id
        )
    for response, status in ((missing, 401), (expired, 401), (no_scope, 403)):
        assert response.status_code == status, response.text
        assert response.json()["id"] == request_id, response.text
        assert response.json()["error"]["code"] == -32600
        assert response.headers["www-authenticate"].startswith("Bearer resource_metadata=")


async def test_a_refusal_inside_a_call_carries_the_request_id(auth_server: AuthServer) -> None:
    """A capability's missing scope is refused by the pipeline, after the body was read: the same id."""
    agent = Agent(
        "scoped",
        store="memory://",
        auth=ProtectedResource(
            authorization_servers=[auth_server.issuer], verifier=JWTVerifier(issuer=auth_server.issuer)
        ),
    )

    @agent.tool(scopes=["reports:write"])
    async def publish() -> str:
        """Publish."""
        return "done"

    with serve(agent.asgi()) as url:
        token = auth_server.issue(audience=f"{url}/mcp", scope="mcp")
        async with httpx.AsyncClient(timeout=30) as http:
            response = await mcp(
                http, url, MODERN, _bearer(token), 41, "tools/call", {"name": "publish", "arguments": {}}
            )
    assert response.status_code == 403 and response.json()["id"] == 41, response.text


async def test_a_refusal_of_a_large_body_still_answers(edges: str) -> None:
    """The id is read from a small body only: a large one is refused with id null, without reading it all."""
    async with httpx.AsyncClient(timeout=30) as http:
        response = await mcp(
            http, edges, MODERN, {}, 9, "tools/call", {"name": "ping", "arguments": {"pad": "x" * 300_000}}
        )
    assert response.status_code in (401, 413) and response.json()["id"] is None


async def test_a2a_jsonrpc_refusals_are_jsonrpc_envelopes(auth_server: AuthServer, edges: str) -> None:
    async with httpx.AsyncClient(timeout=30) as http:
        missing = await face(http, edges, "a2a-jsonrpc", {})
        no_scope = await face(
            http, edges, "a2a-jsonrpc", _bearer(auth_server.issue(audience=f"{edges}/mcp", scope="other"))
        )
        rest = await face(http, edges, "a2a-rest", {})
    for response, status, reason in ((missing, 401, "UNAUTHENTICATED"), (no_scope, 403, "PERMISSION_DENIED")):
        assert response.status_code == status
        body = response.json()
        assert body["jsonrpc"] == "2.0" and body["id"] == 7, body
        assert body["error"]["code"] == -32600 and body["error"]["message"]
        assert body["error"]["data"][0]["reason"] == reason
        assert response.headers["www-authenticate"].startswith("Bearer resource_metadata=")
    assert (
        rest.status_code == 401 and rest.json()["error"]["status"] == "UNAUTHENTICATED"
    )  # google.rpc.Status


# --- (6) the card's oauth2 scheme has flows -----------------------------------------------------------------------


def _flows(auth_server: AuthServer) -> dict[str, Any]:
    return {
        "authorizationCode": {
            "authorizationUrl": f"{auth_server.issuer}/authorize",
            "tokenUrl": f"{auth_server.issuer}/token",
            "scopes": {"mcp": ""},
            "pkceRequired": True,
        }
    }


async def test_the_cards_oauth2_scheme_has_the_authorization_servers_flows(
    auth_server: AuthServer, edges: str
) -> None:
    async with httpx.AsyncClient(timeout=30) as http:
        card = await A2ACardResolver(http, edges).get_agent_card()  # the a2a-sdk's own card resolver
        validate_proto_required_fields(card)  # a2a.proto's REQUIRED fields, flows among them
        assert (
            card.security_schemes["oauth2"].oauth2_security_scheme.flows.authorization_code.token_url
            == f"{auth_server.issuer}/token"
        )
        current = (await http.get(f"{edges}/.well-known/agent-card.json")).json()
        legacy = (await http.get(f"{edges}/.well-known/agent.json")).json()
    assert current["securitySchemes"]["oauth2"]["oauth2SecurityScheme"]["flows"] == _flows(auth_server)
    parsed = v03.AgentCard.model_validate(legacy)  # what a2a-sdk 0.3's resolver does with a 0.3 card
    scheme = parsed.security_schemes["oauth2"].root
    assert scheme.flows.authorization_code.authorization_url == f"{auth_server.issuer}/authorize"
    assert scheme.flows.authorization_code.scopes == {"mcp": ""}


async def test_the_flows_come_from_settings_without_a_fetch() -> None:
    """Endpoints given as settings are used as they are: the (unreachable) issuer is never asked."""
    issuer = f"http://127.0.0.1:{free_port()}"
    agent = build(
        issuer,
        authorization_endpoint="https://login.example.com/oauth/authorize",
        token_endpoint="https://login.example.com/oauth/token",
    )
    with serve(agent.asgi()) as url:
        async with httpx.AsyncClient(timeout=30) as http:
            for path, version in (("agent-card.json", "1.0"), ("agent.json", "0.3")):
                card = (await http.get(f"{url}/.well-known/{path}")).json()
                if version == "0.3":
                    flows = v03.AgentCard.model_validate(card).security_schemes["oauth2"].root.flows
                    assert flows.authorization_code.token_url == "https://login.example.com/oauth/token"
                else:
                    flow = card["securitySchemes"]["oauth2"]["oauth2SecurityScheme"]["flows"][
                        "authorizationCode"
                    ]
                    assert flow["authorizationUrl"] == "https://login.example.com/oauth/authorize"


async def test_an_unreachable_authorization_server_leaves_a_valid_card() -> None:
    """No flows can be known: the card names the bearer scheme only (still valid for both SDK versions)."""
    agent = build(f"http://127.0.0.1:{free_port()}")
    with serve(agent.asgi()) as url:
        async with httpx.AsyncClient(timeout=30) as http:
            card = await A2ACardResolver(http, url).get_agent_card()
            validate_proto_required_fields(card)
            legacy = (await http.get(f"{url}/.well-known/agent.json")).json()
    v03.AgentCard.model_validate(legacy)
    assert "oauth2" not in legacy["securitySchemes"] and "bearer" in legacy["securitySchemes"]
    assert all("oauth2" not in requirement for requirement in legacy.get("security", []))
