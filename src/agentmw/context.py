"""What a running function may ask of agentmw: progress, logs, roots, questions, sampling.

A function declares ``ctx: agentmw.Context`` to get one. The context knows no protocol: each face
hands it a :class:`Channel` that carries these requests onto its own wire.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

if TYPE_CHECKING:
    from starlette.requests import HTTPConnection

    from .capability import Capability

__all__ = [
    "Context",
    "Channel",
    "Ask",
    "Sample",
    "ListRoots",
    "InputRequest",
    "Answer",
    "Sampled",
    "Root",
    "LogLevel",
    "ClientCapabilityMissing",
]

LogLevel = Literal["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"]
LOG_LEVELS: tuple[str, ...] = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")


@dataclass(frozen=True, slots=True)
class Ask:
    """A question for a person; ``schema`` is a flat JSON object schema of the answer."""

    message: str
    schema: Mapping[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})


@dataclass(frozen=True, slots=True)
class Sample:
    """A request for a model completion from the caller's side."""

    prompt: str
    max_tokens: int = 100
    system_prompt: str | None = None


@dataclass(frozen=True, slots=True)
class ListRoots:
    """A request for the caller's roots (the directories or URIs it lets the server work in)."""


InputRequest = Ask | Sample | ListRoots


@dataclass(frozen=True, slots=True)
class Answer:
    """A person's reply to :class:`Ask`."""

    action: Literal["accept", "decline", "cancel"]
    content: dict[str, Any] | None = None

    @property
    def accepted(self) -> bool:
        return self.action == "accept"


@dataclass(frozen=True, slots=True)
class Sampled:
    text: str
    model: str | None = None
    raw: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class Root:
    uri: str
    name: str | None = None


class ClientCapabilityMissing(Exception):
    """The caller cannot answer this kind of request (it did not declare the capability)."""

    def __init__(self, capability: str, requests: Mapping[str, InputRequest] | None = None) -> None:
        super().__init__(f"the client did not declare the {capability!r} capability this call needs")
        self.capability = capability
        self.requests = dict(requests or {})


_CAPABILITY_OF = {Ask: "elicitation", Sample: "sampling", ListRoots: "roots"}


class Channel(Protocol):
    """What a face provides to carry a running function's requests onto its wire."""

    def supports(self, capability: str) -> bool: ...

    async def progress(self, progress: float, total: float | None, message: str | None) -> None: ...

    async def log(self, level: str, data: Any, logger: str | None) -> None: ...

    async def gather(self, requests: Mapping[str, InputRequest]) -> dict[str, Any]:
        """Answer every request, keyed as given: Answer, Sampled, or list[Root]."""
        ...


class _SilentChannel:
    """The channel of a direct call: nobody is listening and nobody can answer."""

    def supports(self, capability: str) -> bool:
        return False

    async def progress(self, progress: float, total: float | None, message: str | None) -> None:
        return None

    async def log(self, level: str, data: Any, logger: str | None) -> None:
        return None

    async def gather(self, requests: Mapping[str, InputRequest]) -> dict[str, Any]:
        first = next(iter(requests.values()))
        raise ClientCapabilityMissing(_CAPABILITY_OF[type(first)])


class Context:
    """Handed to a function that declares a ``Context`` parameter."""

    __slots__ = ("capability", "request", "caller", "_channel", "_counter", "state")

    def __init__(
        self,
        capability: Capability | None = None,
        channel: Channel | None = None,
        request: HTTPConnection | None = None,
        caller: str | None = None,
    ) -> None:
        self.capability = capability
        self.request = request
        self.caller = caller
        self._channel: Channel = channel or _SilentChannel()
        self._counter = 0
        self.state: dict[str, Any] = {}

    def supports(self, capability: Literal["elicitation", "sampling", "roots"]) -> bool:
        """Whether the caller can answer this kind of request."""
        return self._channel.supports(capability)

    async def progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        await self._channel.progress(progress, total, message)

    async def log(self, level: LogLevel, data: Any, *, logger: str | None = None) -> None:
        if level not in LOG_LEVELS:
            raise ValueError(f"unknown log level {level!r}")
        await self._channel.log(level, data, logger)

    async def debug(self, data: Any) -> None:
        await self.log("debug", data)

    async def info(self, data: Any) -> None:
        await self.log("info", data)

    async def warning(self, data: Any) -> None:
        await self.log("warning", data)

    async def error(self, data: Any) -> None:
        await self.log("error", data)

    def _next_key(self, kind: str) -> str:
        self._counter += 1
        return f"{kind}-{self._counter}"

    async def inputs(self, requests: Mapping[str, InputRequest]) -> dict[str, Any]:
        """Ask several things at once; the keys must be stable across calls of the same function.

        Each answer is an :class:`Answer`, a :class:`Sampled` or a list of :class:`Root`.
        """
        for request in requests.values():
            needed = _CAPABILITY_OF[type(request)]
            if not self._channel.supports(needed):
                raise ClientCapabilityMissing(needed, requests)
        return await self._channel.gather(requests)

    async def ask(self, message: str, schema: Mapping[str, Any] | None = None, *, key: str | None = None) -> Answer:
        """Ask the person behind the caller; returns their :class:`Answer`.

        Where the caller cannot be asked, raises :class:`ClientCapabilityMissing` (see the docs for how
        each face reports it).
        """
        request = Ask(message, schema or {"type": "object", "properties": {}})
        key = key or self._next_key("ask")
        return (await self.inputs({key: request}))[key]

    async def sample(self, prompt: str, *, max_tokens: int = 100, system_prompt: str | None = None,
                     key: str | None = None) -> Sampled:
        key = key or self._next_key("sample")
        return (await self.inputs({key: Sample(prompt, max_tokens, system_prompt)}))[key]

    async def roots(self, *, key: str | None = None) -> list[Root]:
        key = key or self._next_key("roots")
        return (await self.inputs({key: ListRoots()}))[key]
