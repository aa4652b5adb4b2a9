"""The official A2A SDK's client, as the tests that drive an agent (or a peer) with it make it."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types.a2a_pb2 import AgentInterface, Message, Part, Role, SendMessageRequest
from google.protobuf import struct_pb2


def message(
    text: str | None = None,
    *,
    skill: str | None = None,
    data: dict[str, Any] | None = None,
    parts: list[Part] | None = None,
    task_id: str | None = None,
    message_id: str | None = None,
    **meta: str,
) -> Message:
    """A user message: ``text``, ``data`` and ``parts`` as its parts; ``skill`` and ``meta`` in its metadata."""
    items = [Part(text=text)] if text is not None else []
    if data is not None:
        value = struct_pb2.Value()
        value.struct_value.update(data)
        items.append(Part(data=value))
    items.extend(parts or [])
    msg = Message(message_id=message_id or str(uuid.uuid4()), role=Role.ROLE_USER, parts=items)
    if task_id:
        msg.task_id = task_id
    metadata = {**({"skill": skill} if skill else {}), **meta}
    if metadata:
        msg.metadata.update(metadata)
    return msg


async def a2a_client(
    http: httpx.AsyncClient,
    url: str,
    binding: str = "JSONRPC",
    *,
    streaming: bool = False,
    version: str | None = None,
) -> Any:
    """The SDK's client for the agent at ``url``, from its card, speaking ``binding`` (``version="0.3"``: the
    card's interfaces replaced by one JSON-RPC 0.3 interface)."""
    card = await A2ACardResolver(http, url).get_agent_card()
    if version == "0.3":
        del card.supported_interfaces[:]
        card.supported_interfaces.append(
            AgentInterface(url=f"{url}/a2a", protocol_binding="JSONRPC", protocol_version="0.3")
        )
    return ClientFactory(
        ClientConfig(httpx_client=http, streaming=streaming, supported_protocol_bindings=[binding])
    ).create(card)


async def last_task(client: Any, request: SendMessageRequest) -> Any:
    """The task of the last event the client's ``send_message`` yields."""
    return [event async for event in client.send_message(request)][-1].task
