"""The agent card: strict A2A 1.0 by default, the a2a-sdk's merged card for 0.3 readers, and HTTP caching."""

from __future__ import annotations

import uuid
from email.utils import formatdate

import httpx
import pytest
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.compat.v0_3 import types as types_v03
from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.types.a2a_pb2 import AgentCard, Message, Part, Role, SendMessageRequest, TaskState
from a2a.utils.proto_utils import validate_proto_required_fields
from google.protobuf.json_format import MessageToDict, ParseDict
from starlette.applications import Starlette

from agentmw import Agent, AgentMiddleware
from agentmw.a2a import A2ASettings
from agentmw.a2a.card import CardClock, etag_matches, not_modified_since, wants_v03, with_v03_fields
from tests import a2a_app

BASE = "http://127.0.0.1:8000"
CARD = "/.well-known/agent-card.json"
OLD_CARD = "/.well-known/agent.json"
V03_KEYS = {
    "url",
    "preferredTransport",
    "protocolVersion",
    "additionalInterfaces",
    "security",
    "supportsAuthenticatedExtendedCard",
}


def client(app) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE, timeout=10)


def strict_v10(card: dict) -> AgentCard:
    """The card parsed as the a2a-sdk's 1.0 ``AgentCard`` with unknown fields refused, every REQUIRED field set,
    and nothing but canonical protobuf JSON: written back, it is the same document."""
    parsed = ParseDict(card, AgentCard(), ignore_unknown_fields=False)  # raises on any field outside 1.0
    validate_proto_required_fields(parsed)
    assert MessageToDict(parsed) == card  # no snake_case aliases, no stray spellings
    return parsed


def small_agent(**settings: object) -> Starlette:
    agent = Agent("plain", "0.1.0", a2a=A2ASettings(**settings))

    @agent.skill
    async def echo(text: str) -> str:
        """Echo text back."""
        return text

    app = Starlette()
    app.add_middleware(AgentMiddleware, agent=agent)
    return app


# --- strict 1.0 ---------------------------------------------------------------------------------------


async def test_default_card_is_strict_a2a_1_0() -> None:
    async with client(a2a_app.build()[1]) as http:
        response = await http.get(CARD)
    assert response.status_code == 200 and response.headers["content-type"] == "application/json"
    card = response.json()
    assert not V03_KEYS & card.keys()
    assert all("type" not in scheme for scheme in card["securitySchemes"].values())
    parsed = strict_v10(card)
    assert parsed.security_schemes["bearer"].http_auth_security_scheme.scheme == "bearer"
    assert [(i.protocol_binding, i.protocol_version) for i in parsed.supported_interfaces] == [
        ("JSONRPC", "1.0"),
        ("HTTP+JSON", "1.0"),
        ("JSONRPC", "0.3"),
    ]
    assert list(parsed.security_requirements[0].schemes) == ["bearer"]


@pytest.mark.parametrize(
    "settings",
    [
        {},
        {"push": None},
        {
            "security_schemes": {"key": {"apiKeySecurityScheme": {"location": "header", "name": "X-Key"}}},
            "security_requirements": [{"key": []}],
            "provider": {"organization": "Acme", "url": "https://acme.test"},
            "documentation_url": "https://acme.test/docs",
        },
        {
            "security_schemes": {
                "oauth": {
                    "oauth2SecurityScheme": {
                        "flows": {
                            "clientCredentials": {
                                "tokenUrl": "https://acme.test/token",
                                "scopes": {"read": "Read"},
                            }
                        }
                    }
                }
            },
            "security_requirements": [{"oauth": ["read"]}],
        },
    ],
)
async def test_every_configuration_gives_a_strict_card(settings: dict) -> None:
    async with client(small_agent(**settings)) as http:
        card = (await http.get(CARD)).json()
    strict_v10(card)
    assert card["capabilities"]["pushNotifications"] is ("push" not in settings)


async def test_extended_cards_are_strict_too() -> None:
    admin = {"authorization": "Bearer admin"}
    async with client(a2a_app.build()[1]) as http:
        well_known = (await http.get(CARD, headers=admin)).json()
        rpc = (
            await http.post(
                "/a2a",
                headers={**admin, "a2a-version": "1.0"},
                json={"jsonrpc": "2.0", "id": 1, "method": "GetExtendedAgentCard"},
            )
        ).json()["result"]
        rest = (await http.get("/a2a/extendedAgentCard", headers={**admin, "a2a-version": "1.0"})).json()
    for card in (well_known, rpc, rest):
        assert "admin" in [s.id for s in strict_v10(card).skills]


async def test_the_sdk_client_resolves_the_card_and_uses_it() -> None:
    async with client(a2a_app.build()[1]) as http:
        card = await A2ACardResolver(http, BASE).get_agent_card()
        assert card.capabilities.extended_agent_card and card.security_schemes["bearer"].HasField(
            "http_auth_security_scheme"
        )
        for binding in ("JSONRPC", "HTTP+JSON"):
            sdk = ClientFactory(
                ClientConfig(httpx_client=http, streaming=False, supported_protocol_bindings=[binding])
            ).create(card)
            message = Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=[Part(text="hi")])
            message.metadata.update({"skill": "echo"})
            events = [event async for event in sdk.send_message(SendMessageRequest(message=message))]
            assert events[-1].task.status.state == TaskState.TASK_STATE_COMPLETED


# --- 0.3 readers ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "headers"),
    [
        (OLD_CARD, {}),
        (CARD, {"a2a-version": "0.3"}),
        (CARD, {"a2a-version": "0.3.0"}),
        (CARD + "?A2A-Version=0.3", {}),
    ],
)
async def test_a_0_3_reader_gets_the_sdk_merged_card(path: str, headers: dict) -> None:
    async with client(a2a_app.build()[1]) as http:
        plain = (await http.get(CARD)).json()
        merged = (await http.get(path, headers=headers)).json()
    # exactly what the a2a-sdk server serves for this card (agent_card_to_dict merges the 0.3 fields in)
    assert merged == agent_card_to_dict(ParseDict(plain, AgentCard()))
    assert merged["url"] == f"{BASE}/a2a" and merged["preferredTransport"] == "JSONRPC"
    assert merged["protocolVersion"] == "0.3" and merged["supportsAuthenticatedExtendedCard"] is True
    assert merged["security"] == [{"bearer": []}] and merged["securitySchemes"]["bearer"]["type"] == "http"
    assert "additionalInterfaces" not in merged  # only JSON-RPC is served with 0.3 shapes
    legacy = types_v03.AgentCard.model_validate(merged)  # a 0.3 reader's model
    assert legacy.url == f"{BASE}/a2a" and legacy.supports_authenticated_extended_card
    # and a 1.0 reader still reads it: the SDK's resolver drops the 0.3 fields
    assert ParseDict(merged, AgentCard(), ignore_unknown_fields=True).name == "a2a-test"


@pytest.mark.parametrize("headers", [{}, {"a2a-version": "1.0"}, {"a2a-version": ""}, {"a2a-version": "0.2"}])
async def test_anything_but_an_explicit_0_3_gets_the_1_0_card(headers: dict) -> None:
    async with client(a2a_app.build()[1]) as http:
        card = (await http.get(CARD, headers=headers)).json()
    strict_v10(card)


async def test_the_0_3_extended_card_method_answers_with_0_3_fields() -> None:
    async with client(a2a_app.build()[1]) as http:
        reply = (
            await http.post(
                "/a2a",
                headers={"authorization": "Bearer admin"},
                json={"jsonrpc": "2.0", "id": 1, "method": "agent/getAuthenticatedExtendedCard"},
            )
        ).json()
    card = reply["result"]
    assert card["url"] == f"{BASE}/a2a" and "admin" in [s["id"] for s in card["skills"]]
    types_v03.AgentCard.model_validate(card)


async def test_card_v03_setting_merges_everywhere_as_the_sdk_does() -> None:
    async with client(small_agent(card_v03=True)) as http:
        card = (await http.get(CARD)).json()
    assert card["url"] == f"{BASE}/a2a" and card["protocolVersion"] == "0.3"
    with pytest.raises(Exception, match="url"):
        ParseDict(card, AgentCard(), ignore_unknown_fields=False)


def test_with_v03_fields_leaves_a_card_without_0_3_interfaces_alone() -> None:
    card = {
        "name": "x",
        "supportedInterfaces": [{"url": "u", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}],
    }
    assert with_v03_fields(card) is card
    two = {
        "supportedInterfaces": [
            {"url": "a", "protocolBinding": "JSONRPC", "protocolVersion": "0.3"},
            {"url": "b", "protocolBinding": "HTTP+JSON", "protocolVersion": "0.3"},
        ]
    }
    merged = with_v03_fields(two)
    assert merged["additionalInterfaces"] == [{"url": "b", "transport": "HTTP+JSON"}]
    assert "url" not in two  # not changed in place


def test_wants_v03() -> None:
    assert wants_v03(OLD_CARD, {}, "")
    assert wants_v03(CARD, {"a2a-version": " 0.3.1 "}, "")
    assert wants_v03(CARD, {}, "x=1&A2A-Version=0.3")
    assert not wants_v03(CARD, {}, "")
    assert not wants_v03(CARD, {"a2a-version": "1.0"}, "A2A-Version=0.3")  # the header wins, as for methods
    assert not wants_v03(CARD, {}, "xA2A-Version=0.3")


# --- caching --------------------------------------------------------------------------------------------


async def test_etag_and_last_modified() -> None:
    async with client(a2a_app.build()[1]) as http:
        first = await http.get(CARD)
        etag, modified = first.headers["etag"], first.headers["last-modified"]
        assert "A2A-Version" in first.headers["vary"] and "Authorization" in first.headers["vary"]
        assert (await http.get(CARD)).headers["last-modified"] == modified  # stable while the card is
        for condition in (
            {"if-none-match": etag},
            {"if-none-match": f'"other", W/{etag}'},
            {"if-none-match": "*"},
            {"if-modified-since": modified},
            {"if-modified-since": formatdate(9_999_999_999, usegmt=True)},
        ):
            hit = await http.get(CARD, headers=condition)
            assert hit.status_code == 304 and hit.content == b"", condition
            assert hit.headers["etag"] == etag and hit.headers["last-modified"] == modified
        for condition in (
            {"if-none-match": '"other"'},
            {"if-modified-since": formatdate(0, usegmt=True)},
            {"if-modified-since": "not a date"},
            # If-None-Match decides when both are sent (RFC 9110 13.1.3)
            {"if-none-match": '"other"', "if-modified-since": modified},
        ):
            miss = await http.get(CARD, headers=condition)
            assert miss.status_code == 200 and miss.json() == first.json(), condition
        head = await http.head(CARD, headers={"if-modified-since": modified})
        assert head.status_code == 304
        merged = await http.get(OLD_CARD, headers={"if-none-match": etag})
        assert merged.status_code == 200 and merged.headers["etag"] != etag  # another document, another tag


def test_caching_helpers() -> None:
    clock = CardClock(size=2)
    first = clock.last_modified('"a"')
    assert clock.last_modified('"a"') == first and first == int(first)
    clock.last_modified('"b"')
    clock.last_modified('"c"')
    assert '"a"' not in clock._seen and len(clock._seen) == 2  # bounded
    assert etag_matches('W/"a"', '"a"') and not etag_matches('"b"', '"a"')
    assert not_modified_since(formatdate(100, usegmt=True), 100.0)
    assert not not_modified_since(formatdate(99, usegmt=True), 100.0)
    assert not not_modified_since("Sun, 06 Nov 1994 08:49:37", 100.0)  # no zone: not an HTTP-date
    assert not not_modified_since("", 100.0)
