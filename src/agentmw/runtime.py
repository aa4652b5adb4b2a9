"""The protocol-neutral pipeline: validate, inject, run, and turn the result into an :class:`Outcome`.

Faces build a :class:`~agentmw.context.Context` with their own channel, call :func:`invoke`, and render
the outcome onto their wire. Cancellation is not an outcome here: it propagates as the event loop's
cancellation, so each face can answer it the way its protocol says.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Coroutine, Mapping
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from ._executor import run_sync
from ._transport import dumps
from .capability import Capability, text_of
from .content import Text
from .context import Ask, ClientCapabilityMissing, Context, InputRequest
from .errors import AgentError, NeedsInput, Permanent, Rejected, Retryable
from .messages import Artifact, Data, bind_message_params, framed, is_answer, merge_chunk

if TYPE_CHECKING:
    from .journal import Journal

__all__ = [
    "Code",
    "InputsPending",
    "Outcome",
    "OutcomeStatus",
    "Status",
    "describe_validation_error",
    "invoke",
    "validate",
]

logger = logging.getLogger("agentmw")


class Status(StrEnum):
    """How an invocation ended. Each face maps it to its wire (docs/context.md, "Outcomes")."""

    COMPLETED = "completed"
    NEEDS_INPUT = "needs_input"  # questions for the caller (``pending``); answered, the call goes on
    AWAITING_APPROVAL = "awaiting_approval"  # a person must approve the exact action first (``pending``: one
    # confirmation; ``data["approval"]``: the out-of-band approval to decide)
    FAILED = "failed"  # ``retryable`` tells a retry that may work from one that will not (permanent)
    REJECTED = "rejected"  # refused before or instead of running: invalid arguments, a root, a policy
    CANCELED = "canceled"

    @property
    def asks(self) -> bool:
        """The call waits for someone: the caller (questions) or an approver."""
        return self is Status.NEEDS_INPUT or self is Status.AWAITING_APPROVAL


OutcomeStatus = Status  # the name this type had before it was an enum


class Code(StrEnum):
    """Why an outcome is what it is, beyond its status: the ``code`` of failures, refusals and the
    runtime's own answers. Each is a plain string on the wire (JSON-RPC ``data``, AG-UI ``RUN_ERROR``)."""

    INVALID_ARGUMENTS = "invalid_arguments"
    INVALID_OUTPUT = "invalid_output"
    ROOT_VIOLATION = "root_violation"
    NOT_FOUND = "not_found"
    REJECTED = "rejected"
    PERMANENT = "permanent"
    RETRYABLE = "retryable"
    RAISED = "raised"
    TIMEOUT = "timeout"
    BUSY = "busy"
    CANCELED = "canceled"
    RATE_LIMITED = "rate_limited"
    UNAUTHENTICATED = "unauthenticated"
    INSUFFICIENT_SCOPE = "insufficient_scope"
    FORBIDDEN = "forbidden"  # a host dependency's 403 (docs/auth.md)
    MISSING_CAPABILITY = "missing_capability"
    IDEMPOTENCY_KEY_REUSED = "idempotency_key_reused"
    APPROVAL_INVALID = "approval_invalid"
    APPROVAL_REJECTED = "approval_rejected"
    APPROVAL_UNAVAILABLE = "approval_unavailable"
    TAKEN_OVER = "taken_over"
    EXECUTION_BUSY = "execution_busy"
    UNKNOWN_EXECUTION = "unknown_execution"
    UNKNOWN_CAPABILITY = "unknown_capability"
    REPLAY_DIVERGED = "replay_diverged"
    HOOK_FAILED = "hook_failed"  # a hook's ``before`` raised: the call fails closed (docs/observability.md)
    CLIENT_NOT_ANSWERED = (
        "client_not_answered"  # the gate's or the roots' question went unanswered (MCP, 2025)
    )


_RETRYABLE_HTTP = frozenset({408, 425, 429, 502, 503, 504})


class InputsPending(BaseException):
    """Raised by a channel that cannot wait in place: the call ends now with these questions.

    A BaseException, like cancellation, so that a function's own ``except Exception`` cannot swallow it.
    """

    def __init__(
        self, requests: Mapping[str, InputRequest], answered: Mapping[str, Any] | None = None
    ) -> None:
        super().__init__("input required")
        self.requests = dict(requests)
        self.answered = dict(answered or {})


@dataclass(slots=True)
class Outcome:
    status: OutcomeStatus
    content: list[Any] = field(default_factory=list)
    structured: Any = None
    message: str = ""
    retryable: bool = False
    retry_after: float | None = None
    pending: dict[str, InputRequest] | None = None
    code: str | None = None
    data: Any = None
    value: Any = None

    @property
    def is_error(self) -> bool:
        return self.status in ("failed", "rejected")

    def to_dict(self) -> dict[str, Any]:
        """The outcome as strict JSON, for the shared state (an idempotency key's first outcome, read back
        on any replica with :meth:`from_dict`). Content parts, messages, artifacts and questions keep their
        types; any other value is kept as its JSON form (``_codec``)."""
        from ._codec import to_json

        return {
            "status": str(self.status),
            "content": to_json(self.content),
            "structured": to_json(self.structured),
            "message": self.message,
            "retryable": self.retryable,
            "retryAfter": self.retry_after,
            "pending": to_json(self.pending),
            "code": self.code,
            "data": to_json(self.data),
            "value": to_json(self.value),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Outcome:
        from ._codec import from_json

        return cls(
            status=Status(data["status"]),
            content=from_json(data.get("content")) or [],
            structured=from_json(data.get("structured")),
            message=data.get("message") or "",
            retryable=bool(data.get("retryable")),
            retry_after=data.get("retryAfter"),
            pending=from_json(data.get("pending")),
            code=data.get("code"),
            data=from_json(data.get("data")),
            value=from_json(data.get("value")),
        )


def describe_validation_error(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors(include_url=False):
        loc = ".".join(str(p) for p in err.get("loc", ())) or "arguments"
        parts.append(f"{loc}: {err.get('msg', 'invalid')}")
    return "Invalid arguments: " + "; ".join(parts)


def _sanitized(capability: Capability, exc: BaseException) -> str:
    """What a caller learns of an unexpected exception: its type, never its message or traceback.

    Exception messages routinely carry internals (paths, queries, credentials); a function that wants
    the caller to read a message raises ``Permanent``, ``Retryable`` or ``Rejected`` with it.
    """
    return f"{capability.name} failed with an internal error ({type(exc).__name__}); details are in the server log."


def _http_exception_outcome(exc: Exception) -> Outcome | None:
    status = getattr(exc, "status_code", None)
    if not isinstance(status, int) or type(exc).__name__ not in ("HTTPException",):
        return None
    detail = getattr(exc, "detail", "") or ""
    if not isinstance(detail, str):
        detail = json.dumps(detail, default=str)
    headers = getattr(exc, "headers", None) or {}
    retry_after = None
    raw = headers.get("Retry-After") or headers.get("retry-after")
    if raw is not None:
        try:
            retry_after = float(raw)
        except ValueError:
            retry_after = None
    retryable = status in _RETRYABLE_HTTP or status >= 500 and status != 501
    return Outcome(
        status=Status.FAILED,
        content=[Text(f"HTTP {status}: {detail}".rstrip(": "))],
        message=f"HTTP {status}: {detail}",
        retryable=retryable,
        retry_after=retry_after,
        code=f"http_{status}",
        data={"status": status, "detail": detail},
    )


async def _call(capability: Capability, kwargs: dict[str, Any], ctx: Context) -> Any:
    if not capability.untrusted or ctx._emit is None:
        return await _call_fn(capability, kwargs, ctx)
    try:
        return await _call_fn(capability, kwargs, ctx)
    finally:  # the frame of its streamed text closes however the function ends (safety/framing.py)
        try:
            await ctx.end_text_frame()
        except Exception:
            logger.exception("closing the frame of %r's streamed text failed", capability.name)


async def _call_fn(capability: Capability, kwargs: dict[str, Any], ctx: Context) -> Any:
    fn = capability.fn
    if capability.is_async_gen:
        parts: list[str] = []
        artifacts: list[Artifact] | None = None
        async for item in fn(**kwargs):
            if isinstance(item, Artifact):  # a chunk streamed now; the value is the artifacts, merged
                if artifacts is None:
                    artifacts = []
                merge_chunk(artifacts, item)
                await ctx.artifact(item)
                continue
            text = item if isinstance(item, str) else json.dumps(item, default=str)
            parts.append(text)
            await ctx.say(text)
        return "".join(parts) if artifacts is None else artifacts
    if capability.is_async:
        return await fn(**kwargs)
    result = await run_sync(fn, kwargs)  # a worker thread (_executor.py: cancellation, the bound)
    if hasattr(result, "__await__"):  # a sync wrapper around a coroutine function
        result = await result
    return result


def completed(capability: Capability, value: Any) -> Outcome:
    if capability.kind in ("resource", "prompt"):  # they render their raw value themselves
        return Outcome(status=Status.COMPLETED, value=value)
    output = capability.output
    if output.mode == "content":
        return Outcome(
            status=Status.COMPLETED, content=text_of(value), structured=_answer_data(value), value=value
        )
    try:
        structured = output.structured(value)
        text = dumps(structured).decode()
    except ValidationError as exc:
        return _output_mismatch(capability, exc)
    except Exception as exc:  # the value's own serializer raised, or it holds NaN/Infinity, which JSON cannot
        return _unexpected(capability, exc)
    return Outcome(
        status=Status.COMPLETED,
        content=[Text(text)],
        structured=structured,
        value=value,
    )


def _answer_data(value: Any) -> Any:
    """The structured content of an answer (a Message or Artifacts): its one data part, when it has exactly one
    and it is a JSON object (MCP's structured content is an object), so data stays data on every face."""
    if not is_answer(value):
        return None
    parts = [p for a in value for p in a.parts] if isinstance(value, (list, tuple)) else value.parts
    data = [p.data for p in parts if isinstance(p, Data)]
    return data[0] if len(data) == 1 and isinstance(data[0], dict) else None


def _output_mismatch(capability: Capability, exc: ValidationError) -> Outcome:
    """A return value that breaks the declared output type: a failure of the function, never served as a result.

    Logged as a warning without a traceback: the cause is the function's return value, not a crash.
    """
    errors = exc.errors(include_url=False)
    found = "; ".join(
        f"{'.'.join(str(p) for p in e.get('loc', ())) or 'value'}: {e.get('msg', 'invalid')}"
        for e in errors[:3]
    ) + (f" (and {len(errors) - 3} more)" if len(errors) > 3 else "")
    declared = capability.output.declared
    message = (
        f"The return value of {capability.name} does not match the declared output type {declared} ({found})."
    )
    logger.warning(
        "The return value of %s does not match the declared output type %s (%s).",
        capability.name,
        declared,
        found,
    )
    return Outcome(
        status=Status.FAILED,
        content=[Text(f"{message} {_PERMANENT}")],
        message=message,
        code="invalid_output",
    )


def _settled(outcome: Outcome) -> bool:
    """Outcomes an idempotency key keeps: final ones, not a retryable failure or a pending question."""
    return outcome.status in ("completed", "rejected") or (
        outcome.status == "failed" and not outcome.retryable
    )


def invoke(
    capability: Capability,
    arguments: Mapping[str, Any] | None,
    ctx: Context,
    *,
    idempotency_key: str | None = None,
    approval_id: str | None = None,
    journal: Journal | None = None,
    validated: Any = None,
) -> Coroutine[Any, Any, Outcome]:
    """Run one capability for one caller through the pipeline, and classify what happened (await it).

    validate -> idempotency -> in-flight caps -> authorize (the host app's dependencies) -> roots ->
    human gate -> run under the deadline -> frame untrusted text -> Outcome. Each rule lives here once, so no face
    can skip it. Roots come before the gate: a person is never asked to approve a call that would be
    refused anyway.

    With a ``journal`` (``agentmw.journal``), the execution's answers, sub-calls and one-time steps are
    recorded there and a recorded one is replayed rather than run again (docs/durability.md).

    ``validated``: the capability's input model, already validated by the caller from these very
    ``arguments`` (a face that checked them to ask for what is missing), so it is not validated twice.

    With hooks (``agent.use``, docs/observability.md) the pipeline runs inside them; without, nothing but the
    one check below is added to the call.
    """
    if capability.route is None and ctx.agent is not None:
        capability = _bound(capability, ctx)
        if capability.route is None and _orphan_route(capability) is not None:
            return _refused_orphan(capability)
    if journal is not None:
        from .journal import run_journaled

        return run_journaled(
            capability, arguments, ctx, journal, idempotency_key=idempotency_key, approval_id=approval_id
        )
    agent = ctx.agent
    if agent is not None and agent._hooks is not None:
        return agent._hooks.run(capability, arguments, ctx, idempotency_key, approval_id, validated)
    return _pipeline(capability, arguments, ctx, idempotency_key, approval_id, validated)


def _bound(capability: Capability, ctx: Context) -> Capability:
    """The capability as the app serving this request binds it: a handler included as a function (or served
    through ``agent.router()``, with no ``AgentMiddleware`` to start the agent) is bound to its route before its
    first call, so its route's dependencies are never skipped."""
    agent = ctx.agent
    assert agent is not None
    app = ctx.request.scope.get("app") if ctx.request is not None else None
    if app is None or app in agent._bound_apps:
        return capability
    agent.bind_host(app)
    return agent.current(capability)


_ORPHANS: Any = (
    None  # an agentmw._routes.IdentityCache: function -> the routes it serves (by identity, weakly)
)


def _orphan_route(capability: Capability) -> str | None:
    """The route a handler serves when the app serving this agent is not that route's (``agent.asgi()`` alone,
    ``agent.router()`` in another app): its call would skip the route's dependencies, so it is refused. Asked
    once per function."""
    global _ORPHANS
    from ._routes import IdentityCache, routes_holding

    if _ORPHANS is None:
        _ORPHANS = IdentityCache()
    known = _ORPHANS.get(capability.fn)
    if known is None:
        routes = routes_holding(capability.fn)
        known = ", ".join(f"{','.join(sorted(r.methods or ()))} {r.path}" for r in routes)
        _ORPHANS.set(capability.fn, known)
    return known or None


async def _refused_orphan(capability: Capability) -> Outcome:
    where = _orphan_route(capability)
    message = (
        f"{capability.name} is the handler of the route {where}, but the app serving this agent is not the "
        f"app of that route, so the route's dependencies could not run. Serve the agent from that app "
        f"(app.add_middleware(AgentMiddleware, agent=agent), or app.include_router(agent.router())), or "
        f"include the app: Agent(include=[app]). Nothing was executed."
    )
    logger.warning("agentmw: %s", message)
    return Outcome(status=Status.FAILED, content=[Text(message)], message=message, code="permanent")


def validate(capability: Capability, arguments: Mapping[str, Any] | None, validated: Any = None) -> Any:
    """The capability's input model made from ``arguments`` (``validated`` when it already is one), None for a
    capability that takes no arguments, or the ``rejected`` outcome (``invalid_arguments``)."""
    if arguments is not None and type(arguments) is not dict and not isinstance(arguments, Mapping):
        return Outcome(
            status=Status.REJECTED, message="Invalid arguments: expected an object", code="invalid_arguments"
        )
    params = capability.params
    model = params.input_model
    if not params.arg_names or model is None:
        return None
    if type(validated) is model:
        return validated
    try:
        return model.model_validate(arguments if arguments is not None else {})
    except ValidationError as exc:
        return Outcome(
            status=Status.REJECTED, message=describe_validation_error(exc), code="invalid_arguments"
        )


async def _refused_by_route(
    capability: Capability, arguments: Mapping[str, Any], ctx: Context, invalid: Outcome
) -> Outcome:
    """Arguments the route's own validation must answer: sent as they came, so the app's answer (FastAPI's 422, or
    the app's own ``RequestValidationError`` handler) is the caller's, as over HTTP. Only for a route with no gate
    and no rooted paths, whose call is nothing but the app's, after the caller's access is checked; an answer that
    is not a refusal (the app took what agentmw's schema did not) is served as the app's."""
    agent = ctx.agent
    if agent is None:
        return invalid
    if agent.access is not None or capability.policy is not None:
        from .auth.access import authorize

        denied = await authorize(capability, ctx)
        if denied is not None:
            return denied
    sent = {name: arguments[name] for name in capability.route.params if name in arguments}  # type: ignore[union-attr]
    busy = agent.limits.acquire(capability.name, capability.max_in_flight)
    if busy is not None:
        return invalid
    try:
        return await _run(capability, sent, ctx, host_ready=True)
    finally:
        agent.limits.release(capability.name)


def _stage(ctx: Context, name: str, **attributes: Any) -> None:
    """A stage of the pipeline, for the agent's hooks (a trace shows it as a span event); nothing without hooks."""
    agent = ctx.agent
    if agent is not None and agent._hooks is not None:
        agent._hooks.stage(name, attributes)


async def _pipeline(
    capability: Capability,
    arguments: Mapping[str, Any] | None,
    ctx: Context,
    idempotency_key: str | None,
    approval_id: str | None,
    validated: Any,
) -> Outcome:
    checked = validate(capability, arguments, validated)
    if checked is None:
        kwargs: dict[str, Any] = {}
    elif type(checked) is Outcome:
        if (
            capability.route is not None
            and capability.gate is None
            and not capability.path_params
            and checked.code == "invalid_arguments"
            and isinstance(arguments, Mapping)
        ):
            return await _refused_by_route(capability, arguments, ctx, checked)
        return checked
    else:
        validated = checked
        kwargs = dict(checked.__dict__)
    agent = ctx.agent
    if agent is None:  # a direct call: no agent, no policy
        return await _run(capability, kwargs, ctx)
    if agent.access is not None or capability.policy is not None:  # scopes, roles, rate limits (docs/auth.md)
        from .auth.access import authorize

        denied = await authorize(capability, ctx)
        if denied is not None:
            _stage(ctx, "agentmw.access.denied", **{"agentmw.outcome.code": str(denied.code)})
            return denied
    if idempotency_key is not None and capability.side_effects:
        from .safety.idempotency import KeyReused

        canonical = json.dumps(_plain(validated, kwargs), sort_keys=True, default=str)
        scope = (ctx.caller or "anonymous", capability.name, str(idempotency_key))
        ran = False

        def first() -> Any:
            nonlocal ran
            ran = True
            return _guarded(capability, kwargs, validated, ctx, approval_id)

        try:
            outcome = await agent.idempotency.run(scope, canonical, first, _settled)
        except KeyReused as exc:
            _stage(ctx, "agentmw.idempotency.reused")
            return Outcome(status=Status.REJECTED, message=str(exc), code="idempotency_key_reused")
        if not ran:  # the key's first outcome, returned again: nothing ran
            _stage(ctx, "agentmw.idempotency.hit", **{"agentmw.outcome.status": str(outcome.status)})
        return outcome
    return await _guarded(capability, kwargs, validated, ctx, approval_id)


def _plain(validated: Any, kwargs: dict[str, Any]) -> dict[str, Any]:
    return validated.model_dump(mode="json") if validated is not None else {}


async def _guarded(
    capability: Capability, kwargs: dict[str, Any], validated: Any, ctx: Context, approval_id: str | None
) -> Outcome:
    agent = ctx.agent
    assert agent is not None
    busy = agent.limits.acquire(capability.name, capability.max_in_flight)
    if busy is not None:
        _stage(ctx, "agentmw.busy", **{"agentmw.reason": busy})
        return Outcome(
            status=Status.FAILED,
            content=[Text(f"Busy: {busy}. Retry after 1 second.")],
            message=busy,
            retryable=True,
            retry_after=1.0,
            code="busy",
        )
    try:
        if capability.params.host_params:
            # The host app's dependencies are its authorization: they run before anything is asked or run.
            async with AsyncExitStack() as stack:
                denied = await _resolve_host(capability, kwargs, ctx, stack)
                outcome = denied or await _checked(capability, kwargs, validated, ctx, approval_id)
        elif capability.route is not None and capability.gate is not None:
            # the route's dependencies are its authorization: they decide before a person is asked to approve
            from ._dispatch import authorize_route

            outcome = await authorize_route(capability, kwargs, ctx) or await _checked(
                capability, kwargs, validated, ctx, approval_id
            )
        elif capability.path_params or capability.gate is not None:
            outcome = await _checked(capability, kwargs, validated, ctx, approval_id)
        else:
            outcome = await _run(capability, kwargs, ctx, host_ready=True)
    except InputsPending as pending:  # the roots request or the gate's question, in a stateless era
        return Outcome(status=Status.NEEDS_INPUT, pending=pending.requests, data=pending.answered)
    except ClientCapabilityMissing as exc:
        return Outcome(
            status=Status.REJECTED,
            message=str(exc),
            code="missing_capability",
            data=exc.capability,
            pending=exc.requests or None,
        )
    finally:
        agent.limits.release(capability.name)
    if capability.untrusted and outcome.status == "completed":
        from .safety.framing import frame_text

        source = f"{capability.kind} {capability.name}"
        outcome.content = [
            Text(frame_text(p.text, source, agent.untrusted_budget_chars)) if isinstance(p, Text) else p
            for p in outcome.content
        ]
        if is_answer(outcome.value):  # a Message or Artifacts the faces render from the value (messages.py)
            outcome.value = framed(outcome.value, source, agent.untrusted_budget_chars)
    return outcome


async def _resolve_host(
    capability: Capability, kwargs: dict[str, Any], ctx: Context, stack: AsyncExitStack
) -> Outcome | None:
    from ._host import HostDependencyError, resolve_host_dependencies

    try:
        kwargs.update(await resolve_host_dependencies(capability, ctx.request, stack))
    except HostDependencyError as exc:
        return Outcome(status=Status.REJECTED, message=f"Invalid request: {exc}", code="invalid_arguments")
    except Exception as exc:
        from .auth.access import host_denial  # its 401/403 refuse the caller (on MCP: at the HTTP level)

        return host_denial(exc) or _http_exception_outcome(exc) or _unexpected(capability, exc)
    return None


async def _checked(
    capability: Capability, kwargs: dict[str, Any], validated: Any, ctx: Context, approval_id: str | None
) -> Outcome:
    """Roots, then the gate, then the call; the host's dependencies are already resolved."""
    if capability.path_params:
        refused = await _check_roots(capability, kwargs, ctx)
        if refused is not None:
            return refused
    if capability.gate is not None:
        stopped = await _gate(capability, _plain(validated, kwargs), ctx, approval_id)
        if stopped is not None:
            return stopped
    return await _run(capability, kwargs, ctx, host_ready=True)


async def _check_roots(capability: Capability, kwargs: dict[str, Any], ctx: Context) -> Outcome | None:
    from .safety.roots import RootViolation, resolve_parameters

    agent = ctx.agent
    assert agent is not None
    client = None
    if ctx.supports("roots"):
        client = [root.uri for root in await ctx.roots(key="agentmw-roots")]
    try:  # resolution reads the file system: on a worker thread, never on the loop (safety/roots.py)
        resolved = await run_sync(
            resolve_parameters,
            {
                "values": {name: kwargs[name] for name in capability.path_params},
                "server": agent.roots,
                "client": client,
                "case_insensitive": agent.case_insensitive_paths,
            },
        )
    except RootViolation as exc:
        name = exc.parameter
        _stage(ctx, "agentmw.roots.refused", **{"agentmw.parameter": name})
        return Outcome(
            status=Status.REJECTED,
            message=f"Path {name!r} refused: {exc}. Nothing was executed.",
            code="root_violation",
        )
    kwargs.update(resolved)
    return None


async def _gate(
    capability: Capability, arguments: dict[str, Any], ctx: Context, approval_id: str | None
) -> Outcome | None:
    from .safety.gate import ApprovalProblem, arguments_hash, describe

    agent = ctx.agent
    assert agent is not None
    spec = capability.gate
    summary = describe(capability.name, arguments, spec.side_effects)
    nothing = "Nothing was executed and nothing changed."
    if approval_id is not None:
        requester = await _approval_requester(
            ctx, f"Approval {approval_id} cannot be used: out-of-band approval"
        )
        if isinstance(requester, Outcome):
            return requester
        try:
            if ctx._journal is not None:  # a replay finds the approval it used in the journal (journal.py)
                from .journal import journaled_approval

                approval = await journaled_approval(
                    ctx,
                    approval_id,
                    lambda: agent.approvals.consume(
                        approval_id, capability.name, arguments, ctx.face or "direct", requester
                    ),
                )
            else:
                approval = await agent.approvals.consume(
                    approval_id, capability.name, arguments, ctx.face or "direct", requester
                )
        except ApprovalProblem as exc:
            _stage(
                ctx, "agentmw.gate.decided", **{"agentmw.gate.approved": False, "agentmw.reason": str(exc)}
            )
            return Outcome(status=Status.REJECTED, message=f"{exc}. {nothing}", code="approval_invalid")
        _stage(
            ctx,
            "agentmw.gate.decided",
            **{
                "agentmw.gate.approved": approval.status != "rejected",
                "agentmw.gate.mode": "out_of_band",
                "agentmw.approval.id": approval_id,
            },
        )
        if approval.status == "rejected":
            return Outcome(
                status=Status.REJECTED,
                message=f"{approval.decided_by} rejected: {summary}. {nothing}",
                code="approval_rejected",
            )
        return None
    digest = arguments_hash(capability.name, arguments)
    if ctx.supports("elicitation"):
        _stage(ctx, "agentmw.gate.asked", **{"agentmw.gate.mode": "in_band"})
        approved = await ctx.confirm(
            summary,
            details={
                "function": capability.name,
                "arguments": arguments,
                "sideEffects": spec.side_effects,
                "argumentsHash": digest,
            },
            key=f"approve-{digest[:16]}",
        )
        _stage(ctx, "agentmw.gate.decided", **{"agentmw.gate.approved": bool(approved)})
        if approved:
            return None
        return Outcome(
            status=Status.REJECTED, message=f"Not approved: {summary}. {nothing}", code="approval_rejected"
        )
    requester = await _approval_requester(
        ctx, f"Approval required: {summary}. This client cannot be asked in-band, and out-of-band approval"
    )
    if isinstance(requester, Outcome):
        return requester
    approval = await agent.approvals.create(
        capability.name, arguments, summary, ctx.face or "direct", requester, spec.ttl_seconds
    )
    _stage(
        ctx, "agentmw.gate.asked", **{"agentmw.gate.mode": "out_of_band", "agentmw.approval.id": approval.id}
    )
    return Outcome(
        status=Status.AWAITING_APPROVAL,
        message=summary,
        pending={approval.id: Ask(summary, {"type": "object", "properties": {}}, confirmation=True)},
        data={"approval": approval.public()},
    )


async def _approval_requester(ctx: Context, lead: str) -> str | Outcome:
    """Who asks for an out-of-band approval, as the app's authentication says; a refusal when nobody can say
    (its message continues ``lead``, which ends with "out-of-band approval").

    An invented ``Authorization`` header is no identity here: with it, a caller could approve its own
    action, or use another caller's approval.
    """
    from .identity import Forbidden, Unauthenticated, authenticated_identity, has_identity_source

    agent = ctx.agent
    assert agent is not None
    nothing = "Nothing was executed and nothing changed."
    connection = ctx.request
    if not has_identity_source(connection.scope if connection is not None else {}, agent.identify):
        return Outcome(
            status=Status.REJECTED,
            code="approval_unavailable",
            message=f"{lead} is off: no approver configured (the server has no authentication to tell "
            f"who approves: pass the app's current-user dependency, "
            f"Agent(identify=get_current_user)). {nothing}",
        )
    try:
        identity = (
            await authenticated_identity(connection, agent.identify) if connection is not None else None
        )
    except (Unauthenticated, Forbidden):
        identity = None
    if identity is None:
        return Outcome(
            status=Status.REJECTED,
            code="approval_unavailable",
            message=f"{lead} needs an authenticated caller: authenticate and call again. {nothing}",
        )
    return identity


async def _run(
    capability: Capability, kwargs: dict[str, Any], ctx: Context, *, host_ready: bool = False
) -> Outcome:
    params = capability.params
    if (
        params.message_params
    ):  # Message / File parameters, from the messages the face put on ctx (messages.py)
        missing = bind_message_params(
            params.message_params,
            kwargs,
            ctx.messages,
            {k: kwargs[k] for k in params.arg_names if k in kwargs},
        )
        if missing is not None:
            return Outcome(
                status=Status.REJECTED, message=f"Invalid arguments: {missing}", code="invalid_arguments"
            )
    if params.context_param:
        kwargs[params.context_param] = ctx
    if params.request_param:
        kwargs[params.request_param] = ctx.request
    deadline = asyncio.timeout(capability.timeout) if capability.timeout is not None else None
    if capability.route is not None:
        return await _run_route(capability, kwargs, ctx, deadline)
    try:
        call = _call if host_ready or not params.host_params else _call_with_host
        if deadline is not None:
            async with deadline:
                value = await call(capability, kwargs, ctx)
        else:
            value = await call(capability, kwargs, ctx)
        if ctx._emit is not None:
            await ctx.sync_state()
    except InputsPending as pending:
        return Outcome(status=Status.NEEDS_INPUT, pending=pending.requests, data=pending.answered)
    except _HostRejection as exc:
        return Outcome(status=Status.REJECTED, message=f"Invalid request: {exc}", code="invalid_arguments")
    except TimeoutError as exc:
        return _timed_out(capability, ctx, deadline, exc)
    except Exception as exc:
        return (
            _raised_outcome(capability, exc) or _http_exception_outcome(exc) or _unexpected(capability, exc)
        )
    except (
        SystemExit
    ) as exc:  # sys.exit() in the function (argparse, click): re-raised, it would stop the server
        return _unexpected(capability, exc)
    return completed(capability, value)


async def _run_route(
    capability: Capability, kwargs: dict[str, Any], ctx: Context, deadline: asyncio.Timeout | None
) -> Outcome:
    """A host route's call, through the host app (``_dispatch.py``): its response is the outcome."""
    from ._dispatch import RouteCallRefused, call_route, response_outcome

    try:
        if deadline is not None:
            async with deadline:
                response = await call_route(capability, kwargs, ctx)
        else:
            response = await call_route(capability, kwargs, ctx)
        if ctx._emit is not None:
            await ctx.sync_state()
    except InputsPending as pending:
        return Outcome(status=Status.NEEDS_INPUT, pending=pending.requests, data=pending.answered)
    except RouteCallRefused as exc:
        return Outcome(status=Status.REJECTED, message=f"Invalid arguments: {exc}", code="invalid_arguments")
    except TimeoutError as exc:
        return _timed_out(capability, ctx, deadline, exc)
    except Exception as exc:
        return _raised_outcome(capability, exc) or _unexpected(capability, exc)
    except SystemExit as exc:
        return _unexpected(capability, exc)
    return response_outcome(capability, response)


def _timed_out(
    capability: Capability, ctx: Context, deadline: asyncio.Timeout | None, exc: TimeoutError
) -> Outcome:
    """The capability's own deadline passed (retryable), or a ``TimeoutError`` of its code (unexpected)."""
    if deadline is not None and deadline.expired():
        _stage(ctx, "agentmw.deadline.exceeded", **{"agentmw.timeout_s": capability.timeout})
        message = f"{capability.name} did not finish within {capability.timeout:g} seconds and was stopped."
        return Outcome(
            status=Status.FAILED,
            content=[Text(message + " Retry later.")],
            message=message,
            retryable=True,
            code="timeout",
        )
    return _unexpected(capability, exc)


def _raised_outcome(capability: Capability, exc: Exception) -> Outcome | None:
    """agentmw's own exceptions (a question, a retryable, rejected or permanent failure, a missing client
    capability), raised by a function, or by a route handler and not turned into a response by the app."""
    if isinstance(exc, NeedsInput):
        return Outcome(
            status=Status.NEEDS_INPUT,
            pending={"question": Ask(exc.question, exc.schema)},
            message=exc.question,
            code="raised",
        )
    if isinstance(exc, Retryable):
        when = (
            f" Retry after {exc.retry_after:g} seconds." if exc.retry_after is not None else " Retry later."
        )
        return Outcome(
            status=Status.FAILED,
            content=[Text(exc.message + when)],
            message=exc.message,
            retryable=True,
            retry_after=exc.retry_after,
            code="retryable",
            data=exc.data,
        )
    if isinstance(exc, Rejected):
        return Outcome(status=Status.REJECTED, message=exc.message, code="rejected", data=exc.data)
    if isinstance(exc, (Permanent, AgentError)):
        return Outcome(
            status=Status.FAILED,
            content=[Text(f"{exc.message} {_PERMANENT}")],
            message=exc.message,
            code="permanent",
            data=exc.data,
        )
    if isinstance(exc, ClientCapabilityMissing):
        return Outcome(
            status=Status.REJECTED,
            message=str(exc),
            code="missing_capability",
            data=exc.capability,
            pending=exc.requests or None,
        )
    return None


def _unexpected(capability: Capability, exc: BaseException) -> Outcome:
    logger.error("capability %r raised", capability.name, exc_info=exc)
    message = _sanitized(capability, exc)
    return Outcome(
        status=Status.FAILED, content=[Text(f"{message} {_PERMANENT}")], message=message, code="permanent"
    )


_PERMANENT = "This failure is permanent: repeating the same call will not help."


class _HostRejection(Exception):
    """The host app's dependency parameters (a header, a cookie) were missing or invalid."""


async def _call_with_host(capability: Capability, kwargs: dict[str, Any], ctx: Context) -> Any:
    if not capability.params.host_params:
        return await _call(capability, kwargs, ctx)
    from ._host import HostDependencyError, resolve_host_dependencies

    async with AsyncExitStack() as stack:
        try:
            kwargs.update(await resolve_host_dependencies(capability, ctx.request, stack))
        except HostDependencyError as exc:
            raise _HostRejection(str(exc)) from exc
        return await _call(capability, kwargs, ctx)
