"""Hooks: code that runs around every invocation, on every face (``agent.use(hook)``, docs/observability.md).

A hook is any object with some of these methods (:class:`Hook` has them all, doing nothing):

- ``before(invocation)`` (sync or async): runs before the pipeline, once the arguments were checked (invalid
  ones are refused right after it). It may deny the call: raise an :class:`agentmw.AgentError`
  (``Rejected`` is the usual one) or return an :class:`~agentmw.runtime.Outcome`; nothing runs then.
- ``after(invocation, outcome)`` (sync or async): sees every outcome, denials and cancellations included.
- ``listing(listing)``: may filter what a caller is shown (MCP lists, the A2A card's skills): return the items
  to show, or None to leave them as they are.
- ``stage(invocation, name, attributes)``: the pipeline's stages as they happen (validation, idempotency hit,
  gate asked and decided, roots refusal, deadline, denials, questions): what a trace shows as span events.

Hooks run in the order they were added; ``after`` in the reverse order, every hook's, whatever happened.
A hook that raises is logged on the ``agentmw.hooks`` logger and never breaks a call silently: an error
in ``before`` fails the call closed (``hook_failed``); one in ``after`` or ``stage`` is logged and the
outcome stands; one in ``listing`` shows nothing.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from ..content import Text
from ..errors import AgentError, Rejected, Retryable
from ..outcomes import Code, Outcome, Status
from ..pipeline import Call, Next

if TYPE_CHECKING:
    from ..capability import Capability
    from ..context import Channel, Context, InputRequest

__all__ = ["Hook", "HookChain", "Invocation", "Listing", "current_invocation"]

logger = logging.getLogger("agentmw.hooks")

_CURRENT: ContextVar[Invocation | None] = ContextVar("agentmw_invocation", default=None)
_VALID: Mapping[str, Any] = {"agentmw.valid": True}


def current_invocation() -> Invocation | None:
    """The invocation running in this task, when the agent has hooks."""
    return _CURRENT.get()


class Invocation:
    """One run of a capability, as the hooks see it.

    ``arguments`` are the validated arguments (plain JSON values) when they are valid, else the raw mapping
    the face passed. ``data`` is the hooks' own: a place to keep what ``before`` made for ``after``.
    """

    __slots__ = (
        "_arguments",
        "_model",
        "approval_id",
        "caller",
        "capability",
        "ctx",
        "data",
        "idempotency_key",
        "parent",
        "protocol",
        "started",
    )

    def __init__(
        self,
        capability: Capability,
        arguments: Mapping[str, Any],
        ctx: Context,
        idempotency_key: str | None,
        approval_id: str | None,
        model: Any = None,
    ) -> None:
        self.capability = capability
        self._arguments: Any = arguments
        self._model = model  # the validated input model: its JSON form is made only if a hook reads it
        self.ctx = ctx
        self.protocol: str = ctx.face or "direct"
        self.caller: str | None = ctx.caller
        self.idempotency_key = idempotency_key
        self.approval_id = approval_id
        self.started = time.perf_counter()
        self.data: dict[str, Any] = {}
        self.parent: Invocation | None = _CURRENT.get()  # the invocation whose ctx.call made this one

    @property
    def arguments(self) -> Any:
        if self._model is not None:
            self._arguments, self._model = self._model.model_dump(mode="json"), None
        return self._arguments

    @property
    def name(self) -> str:
        return self.capability.name

    @property
    def kind(self) -> str:
        return self.capability.kind

    @property
    def elapsed(self) -> float:
        """Seconds since the invocation started."""
        return time.perf_counter() - self.started


class Listing:
    """A list a caller is about to be shown: ``kind`` is ``tools``, ``resources``, ``templates``, ``prompts``
    (MCP, items are the wire descriptors: ``name``, or ``uri``/``uriTemplate``) or ``skills`` (the A2A card's,
    items with ``id``)."""

    __slots__ = ("caller", "items", "kind", "protocol", "scope")

    def __init__(
        self, kind: str, protocol: str, items: Sequence[dict[str, Any]], scope: Any, caller: str | None
    ) -> None:
        self.kind = kind
        self.protocol = protocol
        self.items = items
        self.scope = scope
        self.caller = caller


class Hook:
    """A base with every method doing nothing; override the ones you need (only those are called)."""

    async def before(self, invocation: Invocation) -> Outcome | None:
        return None

    async def after(self, invocation: Invocation, outcome: Outcome) -> None:
        return None

    def listing(self, listing: Listing) -> Sequence[dict[str, Any]] | None:
        return None

    def stage(self, invocation: Invocation, name: str, attributes: Mapping[str, Any]) -> None:
        return None


def _method(hook: Any, name: str) -> Callable[..., Any] | None:
    """``hook.name`` when the hook has its own (a :class:`Hook` subclass's inherited no-ops are not
    called)."""
    found: Callable[..., Any] | None = getattr(hook, name, None)
    if found is None or not callable(found):
        return None
    if isinstance(hook, Hook) and getattr(type(hook), name, None) is getattr(Hook, name):
        return None
    return found


def _denial(exc: AgentError) -> Outcome:
    """A hook's taxonomy error as the outcome it stands for (read as a function's is, docs/tool.md)."""
    if isinstance(exc, Retryable):
        return Outcome(
            status=Status.FAILED,
            content=[Text(exc.message)],
            message=exc.message,
            retryable=True,
            retry_after=exc.retry_after,
            code=Code.RETRYABLE,
            data=exc.data,
        )
    if isinstance(exc, Rejected):
        return Outcome(status=Status.REJECTED, message=exc.message, code=Code.REJECTED, data=exc.data)
    return Outcome(
        status=Status.FAILED,
        content=[Text(exc.message)],
        message=exc.message,
        code=Code.PERMANENT,
        data=exc.data,
    )


def _hook_failed(invocation: Invocation) -> Outcome:
    return Outcome(
        status=Status.FAILED,
        code=Code.HOOK_FAILED,
        message=f"{invocation.name} was not run: a check before it failed. Nothing was executed.",
    )


class HookChain:
    """The hooks of one agent, and the run of an invocation through them (``agent.hooks``)."""

    def __init__(self) -> None:
        self.hooks: list[Any] = []
        self._before: list[tuple[Any, Callable[..., Any]]] = []
        self._after: list[tuple[Any, Callable[..., Any]]] = []
        self._listing: list[tuple[Any, Callable[..., Any]]] = []
        self._stage: list[tuple[Any, Callable[..., Any]]] = []

    def add(self, hook: Any, *, first: bool = False) -> None:
        if hook in self.hooks:
            return
        if first:
            self.hooks.insert(0, hook)
        else:
            self.hooks.append(hook)
        for name, table in (
            ("before", self._before),
            ("after", self._after),
            ("listing", self._listing),
            ("stage", self._stage),
        ):
            table.clear()
            for each in self.hooks:
                method = _method(each, name)
                if method is not None:
                    table.append((each, method))

    # --- invocations -------------------------------------------------------------------------------------
    async def around(self, capability: Capability, call: Call, proceed: Next) -> Outcome:
        """The pipeline's ``hooks`` stage (``pipeline.py``): the rest of the stages (``proceed``) with the hooks
        around them. The arguments were validated already; invalid ones (``call.invalid``) are refused after
        ``before``, so a hook's denial wins."""
        ctx = call.ctx
        invalid = call.invalid
        invocation = Invocation(
            capability, call.arguments or {}, ctx, call.idempotency_key, call.approval_id, call.validated
        )
        token = _CURRENT.set(invocation)
        if self._stage and not isinstance(ctx.channel, _ObservedChannel):
            ctx.replace_channel(
                _ObservedChannel(ctx.channel, self)
            )  # questions become stages (and the parked count)
        try:
            outcome = await self._before_all(invocation) if self._before else None
            if self._stage:
                self._emit(
                    invocation,
                    "agentmw.validation",
                    _VALID
                    if invalid is None
                    else {"agentmw.valid": False, "agentmw.reason": invalid.message},
                )
            if outcome is None:
                outcome = invalid
            if outcome is None:
                try:
                    outcome = await proceed(call)
                except BaseException:
                    await self._after_all(
                        invocation,
                        Outcome(status=Status.CANCELED, code=Code.CANCELED, message="The call was canceled."),
                    )
                    raise
            if self._after:
                await self._after_all(invocation, outcome)
            return outcome
        finally:
            _CURRENT.reset(token)

    async def _before_all(self, invocation: Invocation) -> Outcome | None:
        limit = (
            invocation.capability.timeout
        )  # the call's own deadline bounds its checks too: none may hang it
        for hook, before in self._before:
            try:
                result = before(invocation)
                if inspect.isawaitable(result):
                    if limit:
                        async with asyncio.timeout(limit - invocation.elapsed):
                            result = await result
                    else:
                        result = await result
            except AgentError as exc:
                self._emit(invocation, "agentmw.hook.denied", {"agentmw.hook": type(hook).__name__})
                return _denial(exc)
            except TimeoutError:
                if not limit or invocation.elapsed < limit:  # the hook's own TimeoutError: a failure like any
                    logger.exception(
                        "hook %r failed before %s %r: the call is refused",
                        hook,
                        invocation.kind,
                        invocation.name,
                    )
                    return _hook_failed(invocation)
                logger.error(
                    "hook %r did not finish before %s %r within its %gs deadline: the call is refused",
                    hook,
                    invocation.kind,
                    invocation.name,
                    limit,
                )
                return Outcome(
                    status=Status.FAILED,
                    code=Code.HOOK_FAILED,
                    message=f"{invocation.name} was not run: a check before it did not finish in time. Nothing "
                    "was executed.",
                    retryable=True,
                )
            except Exception:
                logger.exception(
                    "hook %r failed before %s %r: the call is refused", hook, invocation.kind, invocation.name
                )
                return _hook_failed(invocation)
            if isinstance(result, Outcome):
                self._emit(invocation, "agentmw.hook.denied", {"agentmw.hook": type(hook).__name__})
                return result
        return None

    async def _after_all(self, invocation: Invocation, outcome: Outcome) -> None:
        for hook, after in reversed(self._after):
            try:
                result = after(invocation, outcome)
                if inspect.isawaitable(result):
                    await result
            except Exception:
                logger.exception(
                    "hook %r failed after %s %r (the outcome stands)", hook, invocation.kind, invocation.name
                )

    # --- stages --------------------------------------------------------------------------------------------
    def stage(self, name: str, attributes: Mapping[str, Any]) -> None:
        """A stage of the invocation running in this task (the pipeline's stages report them here)."""
        invocation = _CURRENT.get()
        if invocation is not None:
            self._emit(invocation, name, attributes)

    def _emit(self, invocation: Invocation, name: str, attributes: Mapping[str, Any]) -> None:
        for hook, stage in self._stage:
            try:
                stage(invocation, name, attributes)
            except Exception:
                logger.exception("hook %r failed on stage %s", hook, name)

    # --- lists ----------------------------------------------------------------------------------------------
    @property
    def filters(self) -> bool:
        return bool(self._listing)

    def listing(
        self, kind: str, protocol: str, items: list[dict[str, Any]], scope: Any, caller: str | None
    ) -> list[dict[str, Any]]:
        """``items`` as the listing hooks leave them; a hook that fails shows nothing (fail closed)."""
        for hook, listing in self._listing:
            try:
                kept = listing(Listing(kind, protocol, items, scope, caller))
                if kept is not None:
                    kept = _filtered(kind, items, kept)
            except Exception:
                logger.exception("hook %r failed listing %s: an empty list is shown", hook, kind)
                return []
            if kept is not None:
                items = kept
        return items


_IDENTITY = {
    "tools": "name",
    "prompts": "name",
    "resources": "uri",
    "templates": "uriTemplate",
    "skills": "id",
    "skill_packages": "uri",
}


def _filtered(kind: str, shown: Sequence[dict[str, Any]], kept: Any) -> list[dict[str, Any]]:
    """What a listing hook returned, checked: a filter of ``shown`` (items may be edited copies, but each names
    one of them). Anything else would go out on the wire as a broken list, so it raises (an empty list is
    shown)."""
    if isinstance(kept, (str, bytes, Mapping)) or not isinstance(kept, Iterable):
        raise TypeError(f"a listing hook returns a list of the items to show, not {type(kept).__name__}")
    key = _IDENTITY.get(kind)
    names = {item.get(key) for item in shown} if key else None
    out = list(kept)
    for item in out:
        if not isinstance(item, dict):
            raise TypeError(f"a listing hook returned a {type(item).__name__} among the {kind}, not an item")
        if names is not None and (not isinstance(item.get(key), str) or item[key] not in names):
            raise ValueError(
                f"a listing hook returned an item that is not one of the {kind} shown: {key}="
                f"{str(item.get(key))[:80]!r}"
            )
    return out


class _ObservedChannel:
    """A face's channel whose questions are reported as stages: asked, then answered or withdrawn."""

    __slots__ = ("_chain", "_inner")

    def __init__(self, inner: Channel, chain: HookChain) -> None:
        self._inner = inner
        self._chain = chain

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def supports(self, capability: str) -> bool:
        return self._inner.supports(capability)

    async def progress(self, progress: float, total: float | None, message: str | None) -> None:
        await self._inner.progress(progress, total, message)

    async def log(self, level: str, data: Any, logger: str | None) -> None:
        await self._inner.log(level, data, logger)

    async def gather(self, requests: Mapping[str, InputRequest]) -> dict[str, Any]:
        keys = ",".join(requests)
        self._chain.stage("agentmw.input.asked", {"agentmw.input.keys": keys})
        answered = False
        try:
            answers = await self._inner.gather(requests)
            answered = True
            return answers
        finally:
            self._chain.stage(
                "agentmw.input.answered" if answered else "agentmw.input.withdrawn",
                {"agentmw.input.keys": keys},
            )
