"""Fake face channels for driving a capability with ``Context`` directly, without a face."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from agentmw.context import Answer, InputRequest
from agentmw.runtime import InputsPending


class Parking:
    """A face that cannot wait: every new question ends the call (as MCP 2026 does)."""

    def __init__(self) -> None:
        self.events: list[Any] = []

    def supports(self, capability: str) -> bool:
        return capability == "elicitation"

    async def progress(self, progress: float, total: float | None, message: str | None) -> None:
        return None

    async def log(self, level: str, data: Any, logger: str | None) -> None:
        return None

    async def emit(self, event: Any) -> None:
        self.events.append(event)

    async def gather(self, requests: Mapping[str, InputRequest]) -> dict[str, Any]:
        raise InputsPending(requests)


class Waiting(Parking):
    """A face that parks the coroutine in memory until ``answer`` is set (as A2A does); ``asked`` is set when
    the question comes."""

    def __init__(self) -> None:
        super().__init__()
        self.asked = asyncio.Event()
        self.answer: asyncio.Future[dict[str, Any]] | None = None

    async def gather(self, requests: Mapping[str, InputRequest]) -> dict[str, Any]:
        self.answer = asyncio.get_running_loop().create_future()
        self.asked.set()
        payload = await self.answer
        return {key: Answer("accept", payload) for key in requests}
