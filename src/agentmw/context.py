"""What a running function may ask of agentmw: progress, logs, roots, questions, sampling, and the durable
toolkit (one-time steps with retries, sub-calls, durable sleep, a recorded clock and uuid, patches).

A function declares ``ctx: agentmw.Context`` to get one. The context knows no protocol: each face
hands it a :class:`Channel` that carries these requests onto its own wire.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import math
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal, Protocol
from uuid import UUID, uuid4

from ._codec import from_json, storable, to_json
from ._executor import run_step
from .a2ui import Surface, data_update, folded
from .a2ui import delete_surface as _delete_message
from .answers import Unreadable, read_data, read_text, read_value
from .errors import NeedsInput
from .events import (
    ArtifactUpdate,
    CoreEvent,
    ReasoningDelta,
    StateChanged,
    StepFinished,
    StepStarted,
    SurfaceUpdate,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
)
from .messages import Artifact, Message, framed
from .retries import RetryPolicy, StepFailed, attempt
from .safety.framing import FrameStream
from .settings import Limits

if TYPE_CHECKING:
    from starlette.requests import HTTPConnection

    from .auth.access import AccessAgent as _AccessAgent
    from .capability import Capability
else:

    class _AccessAgent(Protocol):
        """What ``auth.access`` reads of the agent; only its members matter, to the type checker."""


__all__ = [
    "RESERVED_STEP_PREFIX",
    "Answer",
    "Ask",
    "Channel",
    "ClientCapabilityMissing",
    "Context",
    "InputRequest",
    "Invoke",
    "ListRoots",
    "LogLevel",
    "Recorder",
    "Root",
    "Sample",
    "Sampled",
    "Services",
    "ToolCallFailed",
    "answer_from",
    "needed_capability",
    "read_answer",
    "recorded_json",
]

LogLevel = Literal["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"]
LOG_LEVELS: tuple[str, ...] = (
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
)


@storable
@dataclass(frozen=True, slots=True)
class Ask:
    """A question for a person; ``schema`` is a flat JSON object schema of the answer.

    ``confirmation`` marks a yes/no approval of an exact action (``ctx.confirm``) rather than a request
    for information; faces that distinguish the two (AG-UI interrupt reasons) use it.
    """

    message: str
    schema: Mapping[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})
    confirmation: bool = False


@storable
@dataclass(frozen=True, slots=True)
class Sample:
    """A request for a model completion from the caller's side."""

    prompt: str
    max_tokens: int = 100
    system_prompt: str | None = None


@storable
@dataclass(frozen=True, slots=True)
class ListRoots:
    """A request for the caller's roots (the directories or URIs it lets the server work in)."""


InputRequest = Ask | Sample | ListRoots


@storable
@dataclass(frozen=True, slots=True)
class Answer:
    """A person's reply to :class:`Ask`."""

    action: Literal["accept", "decline", "cancel"]
    content: dict[str, Any] | None = None

    @property
    def accepted(self) -> bool:
        return self.action == "accept"


def answer_from(payload: Any, request: Ask) -> Answer:
    """A face's raw reply to ``request`` as an :class:`Answer` (one rule for every face; docs/context.md).

    ``{"action": "decline"|"cancel"|"accept", "content": {...}}`` is explicit; any other object is an
    accepted answer's content; a boolean answers a confirmation; text fills the schema's only field, read as
    its type where it can be (``"yes"`` for a boolean, ``"3"`` for a number: ``agentmw.answers``). What
    cannot be read is kept as sent (the function sees it); :func:`read_answer` refuses it instead.
    """
    if not isinstance(payload, (dict, str)) and not (isinstance(payload, bool) and request.confirmation):
        return Answer("accept", {"value": payload})
    try:  # read as A2A reads it, except that an incomplete answer is the function's to judge
        return _read(payload, request, complete=False)
    except Unreadable:
        pass
    if isinstance(payload, dict):
        if payload.get("action") in ("accept", "decline", "cancel"):
            content = payload.get("content")
            return Answer(payload["action"], content if isinstance(content, dict) else None)
        return Answer("accept", payload)
    properties = list((request.schema.get("properties") or {}).keys())
    return Answer("accept", {properties[0] if len(properties) == 1 else "text": payload})


def read_answer(payload: Any, request: Ask) -> Answer:
    """Like :func:`answer_from`, but an answer that does not fit the question's simple schema (text that is
    not yes or no for a boolean, not a number for a number, a data answer missing a required field or with
    none of the schema's fields, a plain value that does not fit the one field) raises
    :class:`agentmw.answers.Unreadable`, whose message says what is accepted: a face that can ask again does
    (A2A)."""
    return _read(payload, request, complete=True)


def _read(payload: Any, request: Ask, *, complete: bool) -> Answer:
    if isinstance(payload, dict):
        if payload.get("action") in ("accept", "decline", "cancel"):
            content = payload.get("content")
            if payload["action"] == "accept":
                if isinstance(content, dict):
                    # an explicit accept may leave optional fields out (MCP's elicitation result does)
                    content = read_data(content, request.schema, complete=False)
                    if complete:
                        read_data(content, {"required": request.schema.get("required")})
                elif complete and request.schema.get("required"):
                    read_data({}, {"required": request.schema.get("required")})
            return Answer(payload["action"], content if isinstance(content, dict) else None)
        return Answer("accept", read_data(payload, request.schema, complete=complete))
    if isinstance(payload, bool) and request.confirmation:
        return Answer("accept", {"approved": payload})
    if isinstance(payload, str):
        return Answer("accept", read_text(payload, request.schema))
    if payload is None:
        raise Unreadable("the message has nothing to read as an answer (no text, no data).")
    return Answer("accept", read_value(payload, request.schema))


@storable
@dataclass(frozen=True, slots=True)
class Sampled:
    text: str
    model: str | None = None
    raw: Mapping[str, Any] | None = None


@storable
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


class ToolCallFailed(Exception):
    """A tool called with ``ctx.call`` did not complete; ``outcome`` says how."""

    def __init__(self, tool: str, message: str, outcome: Any = None) -> None:
        super().__init__(f"tool {tool!r} failed: {message}")
        self.tool = tool
        self.outcome = outcome


_CAPABILITY_OF = {Ask: "elicitation", Sample: "sampling", ListRoots: "roots"}

RESERVED_STEP_PREFIX = "agentmw."
"""Step names that begin so are agentmw's own (``ctx.now``, ``ctx.uuid``, ``ctx.sleep``: ``agentmw.now:1``, ...);
``ctx.once`` refuses them."""


def needed_capability(request: InputRequest) -> str:
    """The client capability that answers ``request``: ``elicitation``, ``sampling`` or ``roots``."""
    return _CAPABILITY_OF[type(request)]


def recorded_json(value: Any, what: str) -> Any:
    """``value`` as stored JSON (a one-time step's result), refusing what would not come back the same on a
    replay."""
    encoded = to_json(value)
    try:
        same = from_json(encoded) == value
    except Exception:  # noqa: BLE001 (a value that cannot be read back is not exact JSON)
        same = False
    if not same:
        raise TypeError(
            f"{what} returned {type(value).__name__}, which does not come back unchanged from the "
            "journal; return JSON values (dict, list, str, int, float, bool, None; bytes and tuples "
            "also work)"
        )
    return encoded


class _Result(Protocol):
    """What a sub-call's outcome tells ``ctx.call`` (an :class:`agentmw.outcomes.Outcome`)."""

    @property
    def status(self) -> str: ...
    @property
    def content(self) -> list[Any]: ...
    @property
    def message(self) -> str: ...
    @property
    def value(self) -> Any: ...
    @property
    def retryable(self) -> bool: ...
    @property
    def retry_after(self) -> float | None: ...


class _RetryableOutcome(Exception):
    """A sub-call's retryable failure, raised so that ``ctx.call``'s retry policy tries it again, after the
    outcome's ``retry_after`` when it has one."""

    def __init__(self, outcome: _Result) -> None:
        super().__init__(outcome.message)
        self.outcome = outcome
        self.retry_after = outcome.retry_after


Invoke = Callable[["Capability", "Mapping[str, Any] | None", "Context"], Awaitable[Any]]
"""How a context's sub-calls run: ``agentmw.runtime.invoke``, which hands itself to every context it runs."""

Emit = Callable[[CoreEvent], Awaitable[None]]


class Services(_AccessAgent, Protocol):
    """What the core reads of the agent that serves a call (``agentmw.Agent`` is one): its capabilities, its
    shared state and gatekeeper (as ``auth.access`` reads them), and the services of the pipeline's
    stages."""

    @property
    def limits(self) -> Limits: ...
    @property
    def in_flight(self) -> Any: ...  # safety.limits.InFlightLimits: the in-flight caps
    @property
    def idempotency(self) -> Any: ...  # safety.idempotency.IdempotencyCache
    @property
    def approvals(self) -> Any: ...  # safety.gate.Approvals
    @property
    def roots(self) -> tuple[str, ...]: ...
    @property
    def case_insensitive_paths(self) -> bool | None: ...
    @property
    def hooks(self) -> Any: ...  # observability.hooks.HookChain, once agent.use() made one
    def bound_to(self, app: Any) -> bool: ...  # whether it started serving for the host app
    def bind_host(self, app: Any) -> None: ...
    def current(self, cap: Capability) -> Capability: ...


class Recorder(Protocol):
    """What a context's journaled steps go through (``agentmw.journal``): the execution's recorded answers,
    sub-calls and one-time steps, replayed rather than made again."""

    @property
    def in_step(self) -> bool:
        """Whether one of the execution's journaled steps (a ``ctx.call``, a ``ctx.once``, a question) is in
        flight in this scope now: what happens meanwhile belongs to that step, not to the function's own
        order."""
        ...

    async def inputs(self, ctx: Context, requests: Mapping[str, InputRequest]) -> dict[str, Any]: ...

    async def call(
        self,
        ctx: Context,
        name: str,
        capability: Capability,
        arguments: Mapping[str, Any],
        *,
        retry: RetryPolicy | None = None,
    ) -> Any:
        """A sub-call, recorded; with ``retry``, a retryable failure is tried again (``agentmw.retries``) and only
        the final outcome is recorded."""
        ...

    async def once(
        self,
        ctx: Context,
        name: str,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        *,
        retry: RetryPolicy | None = None,
    ) -> Any:
        """A one-time step, recorded; with ``retry``, tried as the policy allows, the final result (or the final
        failure, raised as :class:`~agentmw.retries.StepFailed` by every replay) recorded."""
        ...

    def patched(self, ctx: Context, patch_id: str) -> bool:
        """Whether the execution takes patch ``patch_id``'s new code path: True when it reaches this point
        fresh (and recorded so), False for a replay of one recorded before the patch."""
        ...


class Channel(Protocol):
    """What a face provides to carry a running function's requests onto its wire.

    A channel may also define ``async def emit(self, event: CoreEvent) -> None`` to receive text,
    steps, reasoning, tool calls and state changes; a face without it simply does not show them.
    """

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


_SILENT = _SilentChannel()


class Context:
    """Handed to a function that declares a ``Context`` parameter."""

    __slots__ = (
        "_calls",
        "_channel",
        "_counter",
        "_durable",
        "_emit",
        "_published",
        "_recorder",
        "_surfaces",
        "_text_frame",
        "agent",
        "caller",
        "capability",
        "face",
        "invoker",
        "messages",
        "request",
        "state",
    )

    def __init__(
        self,
        capability: Capability | None = None,
        channel: Channel | None = None,
        request: HTTPConnection | None = None,
        caller: str | None = None,
        *,
        agent: Services | None = None,
        state: dict[str, Any] | None = None,
        face: str | None = None,
    ) -> None:
        self.capability = capability
        self.request = request
        self.caller = caller
        self.agent = agent
        self.face = face
        self._channel: Channel = channel or _SILENT
        self._emit = getattr(self._channel, "emit", None)
        self._counter = 0
        self._calls = 0
        self._durable: dict[str, int] = {}  # per kind, the number of ctx.now/uuid/sleep steps taken so far
        self._recorder: Recorder | None = None  # the execution's journal, when it has one (journal.py)
        self._surfaces: dict[str, list[dict[str, Any]]] | None = None  # per A2UI surface shown, what draws it
        self.invoker: Invoke | None = None
        """How :meth:`call` runs its sub-calls: ``runtime.invoke`` sets itself on every context it runs."""
        self.messages: list[
            Message
        ] = []  # the work's incoming messages, follow-ups appended (the face fills it)
        self._text_frame: FrameStream | None = (
            None  # the open frame of an untrusted capability's streamed text
        )
        if state:
            self.state: dict[str, Any] = state
            self._published: dict[str, Any] = copy.deepcopy(state)
        else:
            self.state = state if state is not None else {}
            self._published = {}

    def supports(self, capability: Literal["elicitation", "sampling", "roots"]) -> bool:
        """Whether the caller can answer this kind of request."""
        return self._channel.supports(capability)

    # --- the interface of the pipeline, the journal and the hooks (not for functions) ----------------------
    @property
    def channel(self) -> Channel:
        """The face's channel: what carries this call's requests onto its wire."""
        return self._channel

    def replace_channel(self, channel: Channel) -> None:
        """Carry the requests through ``channel`` from now on (a wrapper of :attr:`channel`, as the hooks'
        observer is); events keep their own route."""
        self._channel = channel

    @property
    def watched(self) -> bool:
        """Whether someone receives this call's events (text, steps, state): False for an MCP tool call and
        for a ``ctx.call`` sub-call, whose text stays inside its result."""
        return self._emit is not None

    async def deliver(self, event: CoreEvent) -> None:
        """Hand ``event`` to the face as it is: numbered by the journal when there is one, but neither framed
        nor preceded by the state's patch (:meth:`emit` does both). Nothing when nobody watches."""
        if self._emit is not None:
            await self._emit(event)

    @property
    def published_state(self) -> dict[str, Any]:
        """``ctx.state`` as it was last published (a copy, never changed in place)."""
        return self._published

    @property
    def recorder(self) -> Recorder | None:
        """The execution's journal as this context sees it (``journal.py``), or None."""
        return self._recorder

    @property
    def journaled(self) -> bool:
        return self._recorder is not None

    def attach(self, recorder: Recorder, *, numbering: Callable[[Emit], Emit] | None = None) -> None:
        """Journal this context's steps with ``recorder``; ``numbering`` wraps the face's emitter (the journal
        numbers the events, so a replay skips those already delivered)."""
        self._recorder = recorder
        if numbering is not None and self._emit is not None:
            self._emit = numbering(self._emit)

    def child(self, capability: Capability) -> Context:
        """The context of a sub-call of ``capability``: the same caller, request, channel and invoker, and
        nobody watching (the tool's own text stays inside its result)."""
        child = Context(
            capability, self._channel, self.request, self.caller, agent=self.agent, face=self.face
        )
        child._emit = None
        child.invoker = self.invoker
        return child

    def next_call(self) -> int:
        """The number of this context's next ``ctx.call`` (1, 2, ...)."""
        self._calls += 1
        return self._calls

    async def progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        await self._channel.progress(progress, total, message)

    # --- what a UI can watch (faces that cannot show it drop it) ----------------------------------
    async def emit(self, event: CoreEvent) -> None:
        if self._emit is not None:
            await self.sync_state()
            if self.capability is not None and self.capability.untrusted:
                framed = await self._framed(event)
                if framed is None:
                    return
                event = framed
            await self._emit(event)

    async def _framed(self, event: CoreEvent) -> CoreEvent | None:
        """An untrusted capability's streamed text goes out framed like its result (safety/framing.py): the
        frame opens before the first text, each chunk is escaped, and the frame closes before anything that
        ends the message (a tool call, a question) and when the function ends."""
        if isinstance(event, TextDelta):
            frame = self._text_frame
            if frame is None:
                frame = self._text_frame = FrameStream(self._source(), self._budget())
            text = frame.feed(event.text)
            return TextDelta(text) if text else None
        if isinstance(event, ArtifactUpdate):  # an artifact's text is framed chunk by chunk (messages.framed)
            return ArtifactUpdate(framed(event.artifact, self._source(), self._budget()))
        if isinstance(event, ToolCallStarted):
            await self.end_text_frame()
        return event

    def _source(self) -> str:
        capability = self.capability
        assert capability is not None
        return f"{capability.kind} {capability.name}"

    def _budget(self) -> int:
        return self.agent.limits.max_untrusted_chars if self.agent is not None else 20_000

    async def end_text_frame(self) -> None:
        """Close the frame of streamed untrusted text, if one is open; the pipeline calls it when the function
        ends, so a function never needs to."""
        frame = self._text_frame
        if frame is not None and self._emit is not None:
            closing = frame.close()
            if closing:
                await self._emit(TextDelta(closing))

    @property
    def message(self) -> Message | None:
        """The message that opened this work (an A2A task, an AG-UI turn); None for an MCP tool call.

        ``ctx.messages`` holds it and every follow-up that reached the work since, oldest first.
        """
        return self.messages[0] if self.messages else None

    async def artifact(self, artifact: Artifact) -> None:
        """Send an artifact (or one chunk of one) now: an A2A artifact update, AG-UI text and an activity."""
        if self._emit is not None:
            await self.emit(ArtifactUpdate(artifact))

    async def surface(self, surface: Surface) -> None:
        """Show an A2UI surface (docs/a2ui.md): on A2A as data parts under the A2UI extension, when the client
        activated it; on AG-UI as an ``a2ui-surface`` activity. Sending the same ``surface_id`` again updates
        it (its components and data, without creating it twice)."""
        if not isinstance(surface, Surface):
            raise TypeError(f"ctx.surface takes an agentmw.a2ui.Surface, not {type(surface).__name__}")
        if self._emit is not None:
            shown = self._surfaces if self._surfaces is not None else {}
            self._surfaces = shown
            await self._show(surface.surface_id, surface.messages(create=surface.surface_id not in shown))

    async def surface_data(self, surface_id: str, value: Any, path: str = "/") -> None:
        """Change a shown surface's data model: ``value`` at ``path`` (``/`` replaces it all); the components
        bound to it redraw."""
        message = data_update(surface_id, value, path)
        if self._emit is not None:
            await self._show(surface_id, [message], shown=True)

    async def delete_surface(self, surface_id: str) -> None:
        """Remove a shown surface from the client's UI."""
        message = _delete_message(surface_id)
        if self._emit is not None:
            await self._show(surface_id, [message], shown=True)

    async def _show(self, surface_id: str, messages: list[dict[str, Any]], *, shown: bool = False) -> None:
        surfaces = self._surfaces if self._surfaces is not None else {}
        if shown and surface_id not in surfaces:
            raise ValueError(f"no surface {surface_id!r} was shown by this work: ctx.surface(...) it first")
        drawn = folded([*surfaces.get(surface_id, ()), *messages])
        if drawn:
            surfaces[surface_id] = drawn
        else:
            surfaces.pop(surface_id, None)
        self._surfaces = surfaces
        await self.emit(SurfaceUpdate(surface_id, tuple(messages), tuple(drawn)))

    async def say(self, text: str) -> None:
        """Stream ``text`` as (more of) the assistant's current message."""
        if self._emit is not None:
            await self.emit(TextDelta(text))

    async def reason(self, text: str) -> None:
        """Stream visible reasoning."""
        if self._emit is not None:
            await self.emit(ReasoningDelta(text))

    @contextlib.asynccontextmanager
    async def step(self, name: str) -> AsyncIterator[None]:
        """``async with ctx.step("checking budget"):`` marks a named step of the work."""
        await self.emit(StepStarted(name))
        try:
            yield
        finally:
            await self.emit(StepFinished(name))

    async def sync_state(self) -> None:
        """Publish what changed in ``ctx.state`` since the last publication, as an RFC 6902 patch.

        Called before every other event and when the function returns, so plain assignments to
        ``ctx.state`` reach the front end without a call; call it to publish a change at once.
        """
        if self._emit is None or self.state == self._published:
            return
        import jsonpatch

        patch = jsonpatch.make_patch(self._published, self.state).patch
        self._published = copy.deepcopy(self.state)
        await self._emit(StateChanged(patch, self._published))

    async def call(
        self,
        tool: str | Callable[..., Any],
        arguments: Mapping[str, Any] | None = None,
        *,
        retry: RetryPolicy | None = None,
    ) -> Any:
        """Call one of the agent's tools through the full pipeline, visibly (AG-UI tool-call events).

        Returns the tool's value; raises :class:`ToolCallFailed` when the call does not complete. With
        ``retry`` (an :class:`agentmw.retries.RetryPolicy`), a call that fails retryably (the tool raised
        :class:`~agentmw.errors.Retryable`, or its outcome says it may be retried) runs again as the policy
        allows, after the outcome's ``retry_after`` when it gives one; a permanent failure, a rejection or a
        question is not retried. In a journaled execution only the final outcome is recorded.
        """
        _check_policy(retry, "ctx.call")
        invoke = self.invoker
        if self.agent is None or invoke is None:
            raise RuntimeError("ctx.call needs a context created by an agent")
        name = tool if isinstance(tool, str) else getattr(tool, "__name__", "")
        capability = self.agent.tools.get(name)
        if capability is None:
            raise ToolCallFailed(name, f"unknown tool {name!r}")
        if self._recorder is not None:  # a recorded sub-call returns its recorded value (docs/durability.md)
            return await self._recorder.call(self, name, capability, arguments or {}, retry=retry)
        call_id = f"call-{id(self):x}-{self.next_call()}"
        await self.emit(ToolCallStarted(call_id, name, dict(arguments or {})))

        async def one() -> _Result:
            made: _Result = await invoke(capability, arguments or {}, self.child(capability))
            if retry is not None and made.status == "failed" and made.retryable:
                raise _RetryableOutcome(made)
            return made

        try:
            outcome = await attempt(retry, one)
        except _RetryableOutcome as exc:  # the policy's last try failed retryably: that is the outcome
            outcome = exc.outcome
        text = "".join(getattr(part, "text", "") for part in outcome.content) or outcome.message
        if outcome.status != "completed":
            await self.emit(ToolCallFinished(call_id, name, text or outcome.status, True))
            raise ToolCallFailed(name, text or outcome.status, outcome)
        await self.emit(ToolCallFinished(call_id, name, text, False))
        return outcome.value

    async def once(
        self,
        name: str,
        fn: Callable[..., Any],
        /,
        *args: Any,
        retry: RetryPolicy | None = None,
        **kwargs: Any,
    ) -> Any:
        """Run ``fn(*args, **kwargs)`` (sync or async) once per execution, as the step ``name``.

        In an execution with a journal (an A2A task, an AG-UI run), the result is recorded; when the
        execution is replayed (resumed on another replica, or after a restart) this returns the recorded
        result without running ``fn`` again. The result must be JSON (dict, list, str, numbers, bool,
        None; bytes and tuples also work). Put each side effect in a step, with a name unique in the
        execution: a second step with the same name returns the first one's result (docs/durability.md).

        ``retry`` is ctx.once's own keyword, never passed to ``fn`` (give ``fn`` an argument of that name
        with ``functools.partial``): an :class:`agentmw.retries.RetryPolicy` that tries ``fn`` again after a
        failure. Only the final result is recorded; a step that fails for good raises
        :class:`agentmw.retries.StepFailed` (``from`` the last error), and so does every replay of it, without
        running ``fn`` again. Step names beginning ``agentmw.`` are reserved.
        """
        if not isinstance(name, str) or not name:
            raise ValueError("ctx.once needs a non-empty step name")
        if name.startswith(RESERVED_STEP_PREFIX):
            raise ValueError(
                f"step names beginning {RESERVED_STEP_PREFIX!r} are agentmw's own (ctx.now, ctx.uuid, "
                f"ctx.sleep); choose another name than {name!r}"
            )
        _check_policy(retry, "ctx.once")
        return await self._once(name, fn, args, kwargs, retry)

    async def _once(
        self,
        name: str,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        retry: RetryPolicy | None = None,
    ) -> Any:
        if self._recorder is not None:
            if retry is None:
                return await self._recorder.once(self, name, fn, args, kwargs)
            return await self._recorder.once(self, name, fn, args, kwargs, retry=retry)
        if retry is None:
            value = await run_step(
                fn, args, kwargs
            )  # nothing to replay against: it simply runs, checked alike
        else:
            tries = 0

            async def one() -> Any:
                nonlocal tries
                tries += 1
                return await run_step(fn, args, kwargs)

            try:
                value = await attempt(retry, one)
            except NeedsInput:
                raise
            except Exception as exc:  # the final failure, raised as a replay would raise it
                raise StepFailed.from_error(name, tries, exc) from exc
        recorded_json(value, f"ctx.once({name!r})")
        return value

    # --- deterministic time, randomness and waits: recorded, so that a replay sees the same ----------------
    def _durable_name(self, kind: str) -> str:
        number = self._durable.get(kind, 0) + 1
        self._durable[kind] = number
        return f"{RESERVED_STEP_PREFIX}{kind}:{number}"

    async def now(self) -> datetime:
        """The current time (UTC, timezone-aware), recorded: a replay of the execution gets the same time here
        again. Each call is a step (``agentmw.now:1``, ``agentmw.now:2``, ... in call order); without a journal
        it is simply the time now."""
        if self._recorder is None:
            return datetime.now(UTC)
        stamp = await self._once(self._durable_name("now"), time.time, (), {})
        return datetime.fromtimestamp(float(stamp), UTC)

    async def uuid(self) -> UUID:
        """A random UUID (version 4), recorded: a replay gets the same one here again (``agentmw.uuid:1``,
        ...)."""
        if self._recorder is None:
            return uuid4()
        return UUID(await self._once(self._durable_name("uuid"), _new_uuid, (), {}))

    async def sleep(self, seconds: float) -> None:
        """Wait ``seconds``, durably: the wake-up time is recorded (``agentmw.sleep:1``, ...), so a replay (the
        execution taken over after its replica died, or resumed after a restart) waits only what is left of it,
        and not at all once it has passed. Without a journal it is ``asyncio.sleep``."""
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not math.isfinite(seconds):
            raise ValueError(f"ctx.sleep takes a number of seconds, not {seconds!r}")
        if seconds < 0:
            raise ValueError(f"ctx.sleep cannot wait a negative time ({seconds!r} s)")
        if self._recorder is None:
            await asyncio.sleep(seconds)
            return
        wake = await self._once(self._durable_name("sleep"), _wake_after, (float(seconds),), {})
        await _sleep_until(float(wake))

    async def sleep_until(self, when: datetime | float) -> None:
        """Wait until ``when`` (a timezone-aware ``datetime``, or seconds since the epoch), durably, like
        :meth:`sleep`: the wake-up time is recorded, so a replay wakes at the same moment. A time already past
        returns at once."""
        if isinstance(when, datetime):
            if when.tzinfo is None or when.utcoffset() is None:
                raise ValueError(
                    "ctx.sleep_until needs a timezone-aware datetime (datetime.now(UTC) + ..., or ctx.now())"
                )
            wake = when.timestamp()
        elif isinstance(when, (int, float)) and not isinstance(when, bool) and math.isfinite(when):
            wake = float(when)
        else:
            raise ValueError(f"ctx.sleep_until takes a datetime or seconds since the epoch, not {when!r}")
        if self._recorder is not None:
            wake = float(await self._once(self._durable_name("sleep"), _given, (wake,), {}))
        await _sleep_until(wake)

    def patched(self, patch_id: str) -> bool:
        """Whether this execution takes the new code path of patch ``patch_id`` (as Temporal's ``patched``).

        ``if ctx.patched("fee-v2"): new() else: old()``: an execution that reaches this point after the deploy
        that added it takes the new path, recorded so that its replays do too; one that was recorded past this
        point before the patch existed replays on the old path. Without a journal it is always True. Once no
        execution of the old code is left (``agentmw executions list``), remove the old path; keep the call.
        """
        if not isinstance(patch_id, str) or not patch_id:
            raise ValueError("ctx.patched needs a non-empty patch id")
        if self._recorder is None:
            return True
        return self._recorder.patched(self, patch_id)

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
        if self._recorder is not None:  # recorded answers come from the journal (docs/durability.md)
            return await self._recorder.inputs(self, requests)
        for request in requests.values():
            needed = _CAPABILITY_OF[type(request)]
            if not self._channel.supports(needed):
                raise ClientCapabilityMissing(needed, requests)
        if self._text_frame is not None:
            await self.end_text_frame()  # a question ends the message (and, on AG-UI, the run)
        return await self._channel.gather(requests)

    async def confirm(
        self, action: str, *, details: Mapping[str, Any] | None = None, key: str | None = None
    ) -> bool:
        """Ask a person to approve the exact ``action``; True only for an explicit approval."""
        schema = {
            "type": "object",
            "properties": {"approved": {"type": "boolean", "description": action}},
            "required": ["approved"],
        }
        if details:
            schema["x-action"] = dict(details)
        key = key or self._next_key("confirm")
        answer: Answer = (await self.inputs({key: Ask(action, schema, confirmation=True)}))[key]
        return answer.accepted and (answer.content or {}).get("approved") is True

    async def ask(
        self, message: str, schema: Mapping[str, Any] | None = None, *, key: str | None = None
    ) -> Answer:
        """Ask the person behind the caller; returns their :class:`Answer`.

        Where the caller cannot be asked, raises :class:`ClientCapabilityMissing` (see the docs for how
        each face reports it).
        """
        request = Ask(message, schema or {"type": "object", "properties": {}})
        key = key or self._next_key("ask")
        answer: Answer = (await self.inputs({key: request}))[key]
        return answer

    async def sample(
        self, prompt: str, *, max_tokens: int = 100, system_prompt: str | None = None, key: str | None = None
    ) -> Sampled:
        key = key or self._next_key("sample")
        sampled: Sampled = (await self.inputs({key: Sample(prompt, max_tokens, system_prompt)}))[key]
        return sampled

    async def roots(self, *, key: str | None = None) -> list[Root]:
        key = key or self._next_key("roots")
        roots: list[Root] = (await self.inputs({key: ListRoots()}))[key]
        return roots

    async def continue_as_task(self) -> None:
        """From here on, run as a task: for an MCP tool declared ``@tool(task=..., ask_first=True)`` whose
        caller takes tasks, the questions asked so far were answered before any task existed, and the call
        is answered now with the task's handle while the function goes on (docs/mcp.md, "Tasks").
        Anywhere else (an A2A skill already is a task; AG-UI; a caller without tasks) it does nothing."""
        detach = getattr(self._channel, "detach", None)
        if detach is not None:
            await detach()


def _check_policy(retry: object, where: str) -> None:
    if retry is not None and not isinstance(retry, RetryPolicy):
        raise TypeError(
            f"{where}'s keyword 'retry' is its own: an agentmw.retries.RetryPolicy, not {retry!r} "
            "(to pass an argument named 'retry' to the function, use functools.partial)"
        )


def _new_uuid() -> str:
    return str(uuid4())


def _wake_after(seconds: float) -> float:
    return time.time() + seconds


def _given(value: float) -> float:
    return value


async def _sleep_until(wake: float) -> None:
    """Sleep until the wall-clock time ``wake``, re-reading the clock on waking (a long sleep may drift)."""
    while True:
        left = wake - time.time()
        if left <= 0:
            return
        await asyncio.sleep(min(left, 60.0))
