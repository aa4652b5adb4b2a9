"""The pipeline: the stages one call goes through, assembled once per capability from what is configured.

Like Starlette's ``build_middleware_stack()``, :func:`build_pipeline` wraps a run stage in the stages the
capability and its agent need, outermost first, and nothing else: a plain tool of an agent with nothing
configured gets ``validate -> in_flight -> run``. Every stage is an object that holds the next one; each rule
lives in one stage, so no face can skip it::

    validate -> hooks -> access -> idempotency -> framing -> in_flight
             -> host | route_access -> roots -> gate -> run

- ``validate``: the arguments against the input model (a refusal: ``invalid_arguments``);
- ``hooks`` (``agent.use``): ``before`` and ``after`` around the rest, the stages reported to them;
- ``access`` (scopes, roles, rate limits; docs/auth.md);
- ``idempotency`` (a tool with side effects, when the call carries a key);
- ``framing`` (``untrusted``): the completed outcome's text framed as data;
- ``in_flight``: the agent's and the capability's caps on calls in flight;
- ``host`` (the host app's dependencies, its authorization) or ``route_access`` (a gated route: what the app
  would answer before its endpoint runs);
- ``roots`` (rooted path parameters), then ``gate`` (``@human_gate``): roots first, so a person is never asked
  to approve a call that would be refused anyway;
- ``run``: the function (or the route, through the app) under its deadline, its value as the outcome.

The journal of an execution (``journal.py``) is not a stage: it is per execution, and wraps the whole
pipeline when ``invoke`` is given one. :attr:`Pipeline.stages` names the stages a capability got.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AsyncExitStack
from typing import Any, ClassVar, Protocol

from pydantic import ValidationError

from ._dispatch import RouteCallRefused, authorize_route, call_route, response_outcome
from ._executor import run_sync
from ._host import HostDependencyError, resolve_host_dependencies
from ._routes import IdentityCache, routes_holding
from ._transport import dumps
from .auth import access as auth_access  # the module, not its names: it may import the outcomes from runtime
from .capability import Capability, text_of
from .content import Text
from .context import Ask, ClientCapabilityMissing, Context, Services
from .errors import AccessRefused
from .identity import authenticated_identity, has_identity_source
from .messages import Artifact, Data, bind_message_params, framed, is_answer, merge_chunk
from .outcomes import (
    PERMANENT,
    Code,
    InputsPending,
    Outcome,
    Status,
    describe_validation_error,
    http_exception_outcome,
    missing_capability,
    needs_input,
    raised_outcome,
    refused,
    settled,
    unexpected,
)
from .safety.framing import frame_text
from .safety.gate import Approval, ApprovalProblem, arguments_hash, describe
from .safety.idempotency import KeyReused
from .safety.roots import RootViolation, resolve_parameters

__all__ = [
    "Call",
    "Hooks",
    "Next",
    "Pipeline",
    "Stage",
    "build_pipeline",
    "completed",
    "journaled_approval",
    "validate",
]

logger = logging.getLogger("agentmw")

Report = Callable[[str, Mapping[str, Any]], None]
"""How a stage tells the hooks what happened (``HookChain.stage``; a trace shows it as a span event)."""

_NOTHING = "Nothing was executed and nothing changed."


class Call:
    """One invocation on its way through the stages: what the caller sent and what the stages made of it."""

    __slots__ = ("approval_id", "arguments", "ctx", "idempotency_key", "invalid", "kwargs", "validated")

    def __init__(
        self,
        arguments: Mapping[str, Any] | None,
        ctx: Context,
        kwargs: dict[str, Any],
        validated: Any,
        idempotency_key: str | None,
        approval_id: str | None,
        invalid: Outcome | None = None,
    ) -> None:
        self.arguments = arguments
        self.ctx = ctx
        self.kwargs = kwargs  # the function's keyword arguments, filled in by the stages
        self.validated = validated  # the input model, when the capability takes arguments and they are valid
        self.idempotency_key = idempotency_key
        self.approval_id = approval_id
        self.invalid = invalid  # the refusal of invalid arguments, which the hooks see before it is answered

    def plain(self) -> dict[str, Any]:
        """The validated arguments as JSON values (what a key and an approval are bound to)."""
        validated = self.validated
        return validated.model_dump(mode="json") if validated is not None else {}


Next = Callable[[Call], Awaitable[Outcome]]


class Hooks(Protocol):
    """The agent's hooks as the pipeline runs them (``agentmw.observability.hooks.HookChain``)."""

    async def around(self, capability: Capability, call: Call, proceed: Next) -> Outcome: ...

    def stage(self, name: str, attributes: Mapping[str, Any]) -> None: ...


class Stage:
    """A stage of the pipeline: it holds the next stage and decides whether, and how, the call goes on."""

    name: ClassVar[str]
    __slots__ = ("agent", "capability", "next", "report")

    def __init__(self, next: Next, capability: Capability, agent: Any, report: Report | None) -> None:
        self.next = next
        self.capability = capability
        self.agent = agent  # Services; None only for the run stage of a direct call
        self.report = report

    async def __call__(self, call: Call) -> Outcome:
        return await self.next(call)

    def _report(self, name: str, attributes: Mapping[str, Any]) -> None:
        report = self.report
        if report is not None:
            report(name, attributes)


class _Hooks(Stage):
    name = "hooks"
    __slots__ = ("chain",)

    def __init__(self, next: Next, capability: Capability, agent: Any, report: Report | None) -> None:
        super().__init__(next, capability, agent, report)
        self.chain: Hooks = agent.hooks

    async def __call__(self, call: Call) -> Outcome:
        return await self.chain.around(self.capability, call, self.next)


class _Access(Stage):
    name = "access"
    __slots__ = ()

    async def __call__(self, call: Call) -> Outcome:
        denied = await auth_access.authorize(self.capability, call.ctx)
        if denied is not None:
            self._report("agentmw.access.denied", {"agentmw.outcome.code": str(denied.code)})
            return denied
        return await self.next(call)


class _Idempotency(Stage):
    name = "idempotency"
    __slots__ = ()

    async def __call__(self, call: Call) -> Outcome:
        key = call.idempotency_key
        if key is None:  # not reached: a call without a key goes through the chain without this stage
            return await self.next(call)
        capability = self.capability
        canonical = json.dumps(call.plain(), sort_keys=True, default=str)
        scope = (call.ctx.caller or "anonymous", capability.name, str(key))
        ran = False

        def first() -> Awaitable[Outcome]:
            nonlocal ran
            ran = True
            return self.next(call)

        try:
            outcome: Outcome = await self.agent.idempotency.run(scope, canonical, first, settled)
        except KeyReused as exc:
            self._report("agentmw.idempotency.reused", {})
            return refused(Code.IDEMPOTENCY_KEY_REUSED, str(exc))
        if not ran:  # the key's first outcome, returned again: nothing ran
            self._report("agentmw.idempotency.hit", {"agentmw.outcome.status": str(outcome.status)})
        return outcome


class _Framing(Stage):
    name = "framing"
    __slots__ = ()

    async def __call__(self, call: Call) -> Outcome:
        outcome = await self.next(call)
        if outcome.status == Status.COMPLETED:
            capability = self.capability
            budget = self.agent.limits.max_untrusted_chars
            source = f"{capability.kind} {capability.name}"
            outcome.content = [
                Text(frame_text(p.text, source, budget)) if isinstance(p, Text) else p
                for p in outcome.content
            ]
            if is_answer(
                outcome.value
            ):  # a Message or Artifacts the faces render from the value (messages.py)
                outcome.value = framed(outcome.value, source, budget)
        return outcome


class _InFlight(Stage):
    name = "in_flight"
    __slots__ = ()

    async def __call__(self, call: Call) -> Outcome:
        capability = self.capability
        limits = self.agent.in_flight
        busy = limits.acquire(capability.name, capability.max_in_flight)
        if busy is not None:
            self._report("agentmw.busy", {"agentmw.reason": busy})
            return Outcome(
                status=Status.FAILED,
                content=[Text(f"Busy: {busy}. Retry after 1 second.")],
                message=busy,
                retryable=True,
                retry_after=1.0,
                code=Code.BUSY,
            )
        try:
            return await self.next(call)
        except InputsPending as pending:  # the roots request or the gate's question, in a stateless era
            return needs_input(pending)
        except ClientCapabilityMissing as exc:
            return missing_capability(exc)
        finally:
            limits.release(capability.name)


class _Host(Stage):
    """The host app's dependencies are its authorization: they run before anything is asked or run, and
    their exit code runs when the call has ended."""

    name = "host"
    __slots__ = ()

    async def __call__(self, call: Call) -> Outcome:
        capability = self.capability
        ctx = call.ctx
        async with AsyncExitStack() as stack:
            try:
                call.kwargs.update(await resolve_host_dependencies(capability, ctx.request, stack))
            except HostDependencyError as exc:
                return refused(Code.INVALID_ARGUMENTS, f"Invalid request: {exc}")
            except Exception as exc:  # noqa: BLE001 (its 401/403 refuse the caller; on MCP at the HTTP level)
                return (
                    auth_access.host_denial(exc) or http_exception_outcome(exc) or unexpected(capability, exc)
                )
            return await self.next(call)


class _RouteAccess(Stage):
    """A gated route's dependencies are its authorization: they decide before a person is asked to approve."""

    name = "route_access"
    __slots__ = ()

    async def __call__(self, call: Call) -> Outcome:
        denied = await authorize_route(self.capability, call.kwargs, call.ctx)
        if denied is not None:
            return denied
        return await self.next(call)


class _Roots(Stage):
    name = "roots"
    __slots__ = ()

    async def __call__(self, call: Call) -> Outcome:
        capability = self.capability
        ctx = call.ctx
        kwargs = call.kwargs
        agent = self.agent
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
            self._report("agentmw.roots.refused", {"agentmw.parameter": name})
            return refused(Code.ROOT_VIOLATION, f"Path {name!r} refused: {exc}. Nothing was executed.")
        kwargs.update(resolved)
        return await self.next(call)


async def journaled_approval(ctx: Context, approval_id: str, consume: Callable[[], Awaitable[Any]]) -> Any:
    """The gate's use of an out-of-band approval, as a one-time step (``ctx.once``): an approval works once,
    so a replay must find the one its first run used rather than use it again."""

    async def used() -> dict[str, Any]:
        return dict((await consume()).to_dict())

    return Approval.from_dict(await ctx.once(f"approval:{approval_id}", used))


class _Gate(Stage):
    name = "gate"
    __slots__ = ()

    async def __call__(self, call: Call) -> Outcome:
        stopped = await self._decide(call)
        if stopped is not None:
            return stopped
        return await self.next(call)

    async def _decide(self, call: Call) -> Outcome | None:
        capability = self.capability
        spec = capability.gate
        assert spec is not None  # the stage is there for a gated capability only
        ctx = call.ctx
        agent = self.agent
        arguments = call.plain()
        approval_id = call.approval_id
        summary = describe(capability.name, arguments, spec.side_effects)
        if approval_id is not None:
            return await self._use(call, approval_id, arguments, summary)
        digest = arguments_hash(capability.name, arguments)
        if ctx.supports("elicitation"):
            self._report("agentmw.gate.asked", {"agentmw.gate.mode": "in_band"})
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
            self._report("agentmw.gate.decided", {"agentmw.gate.approved": bool(approved)})
            if approved:
                return None
            return refused(Code.APPROVAL_REJECTED, f"Not approved: {summary}. {_NOTHING}")
        requester = await _approval_requester(
            ctx,
            agent,
            f"Approval required: {summary}. This client cannot be asked in-band, and out-of-band approval",
        )
        if isinstance(requester, Outcome):
            return requester
        approval = await agent.approvals.create(
            capability.name, arguments, summary, ctx.face or "direct", requester, spec.ttl_seconds
        )
        self._report(
            "agentmw.gate.asked", {"agentmw.gate.mode": "out_of_band", "agentmw.approval.id": approval.id}
        )
        return Outcome(
            status=Status.AWAITING_APPROVAL,
            message=summary,
            pending={approval.id: Ask(summary, {"type": "object", "properties": {}}, confirmation=True)},
            data={"approval": approval.public()},
        )

    async def _use(
        self, call: Call, approval_id: str, arguments: dict[str, Any], summary: str
    ) -> Outcome | None:
        """The call carries an out-of-band approval: used (once) if it is this very call's, by this caller."""
        capability = self.capability
        ctx = call.ctx
        agent = self.agent
        requester = await _approval_requester(
            ctx, agent, f"Approval {approval_id} cannot be used: out-of-band approval"
        )
        if isinstance(requester, Outcome):
            return requester

        def consume() -> Awaitable[Approval]:
            return agent.approvals.consume(  # type: ignore[no-any-return]
                approval_id, capability.name, arguments, ctx.face or "direct", requester
            )

        try:
            if ctx.journaled:  # a replay finds the approval it used in the journal (journal.py)
                approval = await journaled_approval(ctx, approval_id, consume)
            else:
                approval = await consume()
        except ApprovalProblem as exc:
            self._report("agentmw.gate.decided", {"agentmw.gate.approved": False, "agentmw.reason": str(exc)})
            return refused(Code.APPROVAL_INVALID, f"{exc}. {_NOTHING}")
        self._report(
            "agentmw.gate.decided",
            {
                "agentmw.gate.approved": approval.status != "rejected",
                "agentmw.gate.mode": "out_of_band",
                "agentmw.approval.id": approval_id,
            },
        )
        if approval.status == "rejected":
            return refused(Code.APPROVAL_REJECTED, f"{approval.decided_by} rejected: {summary}. {_NOTHING}")
        return None


async def _approval_requester(ctx: Context, agent: Services, lead: str) -> str | Outcome:
    """Who asks for an out-of-band approval, as the app's authentication says; a refusal when nobody can say
    (its message continues ``lead``, which ends with "out-of-band approval").

    An invented ``Authorization`` header is no identity here: with it, a caller could approve its own
    action, or use another caller's approval.
    """
    connection = ctx.request
    if not has_identity_source(connection.scope if connection is not None else {}, agent.identify):
        return refused(
            Code.APPROVAL_UNAVAILABLE,
            f"{lead} is off: no approver configured (the server has no authentication to tell "
            f"who approves: pass the app's current-user dependency, "
            f"Agent(identify=get_current_user)). {_NOTHING}",
        )
    try:
        identity = (
            await authenticated_identity(connection, agent.identify) if connection is not None else None
        )
    except AccessRefused:
        identity = None
    if identity is None:
        return refused(
            Code.APPROVAL_UNAVAILABLE,
            f"{lead} needs an authenticated caller: authenticate and call again. {_NOTHING}",
        )
    return identity


# --- the run stage ---------------------------------------------------------------------------------------


class _HostRejection(Exception):
    """The host app's dependency parameters (a header, a cookie) were missing or invalid."""


class _Run(Stage):
    """The function (or the route, through the host app) under the capability's deadline; its value, or what
    it raised, as the outcome."""

    name = "run"
    __slots__ = ("call_fn",)

    def __init__(self, next: Next, capability: Capability, agent: Any, report: Report | None) -> None:
        super().__init__(next, capability, agent, report)
        # a direct call (no agent, so no host stage) resolves the host's dependencies itself, in the deadline
        with_host = agent is None and bool(capability.params.host_params)
        self.call_fn: Callable[[Capability, dict[str, Any], Context], Awaitable[Any]] = (
            _call_with_host if with_host else _call
        )

    async def __call__(self, call: Call) -> Outcome:
        return await self.run(call.kwargs, call.ctx)

    async def run(self, kwargs: dict[str, Any], ctx: Context) -> Outcome:
        capability = self.capability
        params = capability.params
        if params.message_params:  # Message / File parameters, from the messages the face put on ctx
            missing = bind_message_params(
                params.message_params,
                kwargs,
                ctx.messages,
                {k: kwargs[k] for k in params.arg_names if k in kwargs},
            )
            if missing is not None:
                return refused(Code.INVALID_ARGUMENTS, f"Invalid arguments: {missing}")
        if params.context_param:
            kwargs[params.context_param] = ctx
        if params.request_param:
            kwargs[params.request_param] = ctx.request
        deadline = asyncio.timeout(capability.timeout) if capability.timeout is not None else None
        if capability.route is not None:
            return await self._route(kwargs, ctx, deadline)
        try:
            if deadline is not None:
                async with deadline:
                    value = await self.call_fn(capability, kwargs, ctx)
            else:
                value = await self.call_fn(capability, kwargs, ctx)
            if ctx.watched:
                await ctx.sync_state()
        except InputsPending as pending:
            return needs_input(pending)
        except _HostRejection as exc:
            return refused(Code.INVALID_ARGUMENTS, f"Invalid request: {exc}")
        except TimeoutError as exc:
            return self._timed_out(ctx, deadline, exc)
        except Exception as exc:  # noqa: BLE001 (whatever a function raises is an outcome)
            return raised_outcome(exc) or http_exception_outcome(exc) or unexpected(capability, exc)
        except (
            SystemExit
        ) as exc:  # sys.exit() in the function (argparse, click): re-raised, it would stop the server
            return unexpected(capability, exc)
        return completed(capability, value)

    async def _route(self, kwargs: dict[str, Any], ctx: Context, deadline: asyncio.Timeout | None) -> Outcome:
        """A host route's call, through the host app (``_dispatch.py``): its response is the outcome."""
        capability = self.capability
        try:
            if deadline is not None:
                async with deadline:
                    response = await call_route(capability, kwargs, ctx)
            else:
                response = await call_route(capability, kwargs, ctx)
            if ctx.watched:
                await ctx.sync_state()
        except InputsPending as pending:
            return needs_input(pending)
        except RouteCallRefused as exc:
            return refused(Code.INVALID_ARGUMENTS, f"Invalid arguments: {exc}")
        except TimeoutError as exc:
            return self._timed_out(ctx, deadline, exc)
        except Exception as exc:  # noqa: BLE001 (whatever a route raises is an outcome)
            return raised_outcome(exc) or unexpected(capability, exc)
        except SystemExit as exc:
            return unexpected(capability, exc)
        return response_outcome(capability, response)

    def _timed_out(self, ctx: Context, deadline: asyncio.Timeout | None, exc: TimeoutError) -> Outcome:
        """The capability's own deadline passed (retryable), or its code raised ``TimeoutError``
        (unexpected)."""
        capability = self.capability
        if deadline is not None and deadline.expired():
            self._report("agentmw.deadline.exceeded", {"agentmw.timeout_s": capability.timeout})
            message = (
                f"{capability.name} did not finish within {capability.timeout:g} seconds and was stopped."
            )
            return Outcome(
                status=Status.FAILED,
                content=[Text(message + " Retry later.")],
                message=message,
                retryable=True,
                code=Code.TIMEOUT,
            )
        return unexpected(capability, exc)


async def _call(capability: Capability, kwargs: dict[str, Any], ctx: Context) -> Any:
    if not capability.untrusted or not ctx.watched:
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


async def _call_with_host(capability: Capability, kwargs: dict[str, Any], ctx: Context) -> Any:
    async with AsyncExitStack() as stack:
        try:
            kwargs.update(await resolve_host_dependencies(capability, ctx.request, stack))
        except HostDependencyError as exc:
            raise _HostRejection(str(exc)) from exc
        return await _call(capability, kwargs, ctx)


def completed(capability: Capability, value: Any) -> Outcome:
    """The outcome of a value the function returned: its content and, for a declared output type, its
    structured content (a value that breaks the type is a failure, never served)."""
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
    except Exception as exc:  # noqa: BLE001 (its own serializer raised, or NaN/Infinity: not JSON)
        return unexpected(capability, exc)
    return Outcome(status=Status.COMPLETED, content=[Text(text)], structured=structured, value=value)


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
        content=[Text(f"{message} {PERMANENT}")],
        message=message,
        code=Code.INVALID_OUTPUT,
    )


# --- validation and the assembled pipeline ----------------------------------------------------------------


def validate(capability: Capability, arguments: Mapping[str, Any] | None, validated: Any = None) -> Any:
    """The capability's input model made from ``arguments`` (``validated`` when it already is one), None for a
    capability that takes no arguments, or the ``rejected`` outcome (``invalid_arguments``)."""
    if arguments is not None and type(arguments) is not dict and not isinstance(arguments, Mapping):
        return refused(Code.INVALID_ARGUMENTS, "Invalid arguments: expected an object")
    params = capability.params
    model = params.input_model
    if not params.arg_names or model is None:
        return None
    if type(validated) is model:
        return validated
    try:
        return model.model_validate(arguments if arguments is not None else {})
    except ValidationError as exc:
        return refused(Code.INVALID_ARGUMENTS, describe_validation_error(exc))


async def _end_of_run_stage(call: Call) -> Outcome:
    """What the run stage holds as its next: it is the last stage and never calls one, so reaching this is a
    bug in a stage, reported as such rather than as a call's outcome."""
    raise RuntimeError("a pipeline went past its run stage, which is the last")


class Pipeline:
    """A capability's stages, assembled once (:func:`build_pipeline`); awaiting it runs a call through
    them."""

    __slots__ = (
        "_first",
        "_keyed",
        "_route_refusal",
        "_run",
        "access",
        "agent",
        "capability",
        "hooks",
        "orphan",
        "stages",
    )

    def __init__(
        self,
        capability: Capability,
        agent: Services | None,
        stages: list[type[Stage]],
        orphan: str | None = None,
    ) -> None:
        self.capability = capability
        self.orphan = orphan
        """The route whose handler ``capability`` is, when the app serving the agent is not that route's."""
        self.agent = agent
        self.hooks: Hooks | None = agent.hooks if agent is not None else None
        self.access: Any = agent.access if agent is not None else None
        report = self.hooks.stage if self.hooks is not None else None
        run = self._run = _Run(_end_of_run_stage, capability, agent, report)

        def chain(kinds: list[type[Stage]]) -> Stage:
            first: Stage = run
            for kind in reversed(kinds):
                first = kind(first, capability, agent, report)
            return first

        # a call without an idempotency key skips that stage: it has nothing to do there
        self._first = chain([s for s in stages if s is not _Idempotency])
        self._keyed = chain(stages) if _Idempotency in stages else self._first
        self.stages: tuple[str, ...] = ("validate", *(s.name for s in stages), "run")
        """The names of the stages, in the order a call goes through them (``idempotency`` only for a call
        with a key)."""
        # arguments the route's own validation must answer (FastAPI's 422, or the app's own handler)
        self._route_refusal = (
            agent is not None
            and self.hooks is None
            and capability.route is not None
            and capability.gate is None
            and not capability.path_params
        )

    def serves(self, capability: Capability, agent: Services | None) -> bool:
        """Whether this is still the pipeline ``capability`` gets from ``agent`` as it is configured now."""
        if self.capability is not capability or self.agent is not agent:
            return False
        return agent is None or (self.hooks is agent.hooks and self.access is agent.access)

    async def __call__(
        self,
        arguments: Mapping[str, Any] | None,
        ctx: Context,
        idempotency_key: str | None,
        approval_id: str | None,
        validated: Any,
    ) -> Outcome:
        checked = validate(self.capability, arguments, validated)
        if checked is None:
            kwargs: dict[str, Any] = {}
            validated = None
        elif type(checked) is Outcome:
            if self.hooks is not None:  # the hooks see the call first: a denial wins over invalid arguments
                return await (self._first if idempotency_key is None else self._keyed)(
                    Call(arguments, ctx, {}, validated, idempotency_key, approval_id, invalid=checked)
                )
            if (
                self._route_refusal
                and checked.code == Code.INVALID_ARGUMENTS
                and isinstance(arguments, Mapping)
            ):
                return await self._refused_by_route(arguments, ctx, checked)
            return checked
        else:
            validated = checked
            kwargs = dict(checked.__dict__)
        first = self._first if idempotency_key is None else self._keyed
        return await first(Call(arguments, ctx, kwargs, validated, idempotency_key, approval_id))

    async def refuse_orphan(self) -> Outcome:
        """The call of a handler whose route's dependencies could not run (:attr:`orphan`): refused."""
        message = (
            f"{self.capability.name} is the handler of the route {self.orphan}, but the app serving this "
            f"agent is not the app of that route, so the route's dependencies could not run. Serve the agent "
            f"from that app (app.add_middleware(AgentMiddleware, agent=agent), or "
            f"app.include_router(agent.router())), or include the app: Agent(include=[app]). Nothing was "
            f"executed."
        )
        logger.warning("agentmw: %s", message)
        return Outcome(status=Status.FAILED, content=[Text(message)], message=message, code=Code.PERMANENT)

    async def _refused_by_route(
        self, arguments: Mapping[str, Any], ctx: Context, invalid: Outcome
    ) -> Outcome:
        """Arguments the route's own validation must answer: sent as they came, so the app's answer (FastAPI's
        422, or the app's own ``RequestValidationError`` handler) is the caller's, as over HTTP. Only for a route
        with no gate and no rooted paths, whose call is nothing but the app's, after the caller's access is
        checked; an answer that is not a refusal (the app took what agentmw's schema did not) is served as the
        app's."""
        capability = self.capability
        agent = self.agent
        assert agent is not None  # only a pipeline of an agent refuses this way
        if agent.access is not None or capability.policy is not None:
            denied = await auth_access.authorize(capability, ctx)
            if denied is not None:
                return denied
        route = capability.route
        assert route is not None
        sent = {name: arguments[name] for name in route.params if name in arguments}
        busy = agent.in_flight.acquire(capability.name, capability.max_in_flight)
        if busy is not None:
            return invalid
        try:
            return await self._run.run(sent, ctx)
        finally:
            agent.in_flight.release(capability.name)


_ORPHANS: IdentityCache | None = None  # function -> the routes it serves (by identity, weakly)


def _orphan_route(capability: Capability) -> str | None:
    """The route a handler serves when the app serving this agent is not that route's (``agent.asgi()`` alone,
    ``agent.router()`` in another app): its call would skip the route's dependencies, so it is refused. Asked
    once per function."""
    global _ORPHANS
    if _ORPHANS is None:
        _ORPHANS = IdentityCache()
    known = _ORPHANS.get(capability.fn)
    if known is None:
        routes = routes_holding(capability.fn)
        known = ", ".join(f"{','.join(sorted(r.methods or ()))} {r.path}" for r in routes)
        _ORPHANS.set(capability.fn, known)
    return known or None


def build_pipeline(capability: Capability, agent: Services | None) -> Pipeline:
    """The stages ``capability`` needs as ``agent`` is configured now (see the module docstring): a direct
    call (no agent) is validated and run, nothing else."""
    if agent is None:
        return Pipeline(capability, None, [])
    if capability.route is None:
        orphan = _orphan_route(capability)
        if orphan is not None:
            return Pipeline(capability, agent, [], orphan)
    stages: list[type[Stage]] = []
    if agent.hooks is not None:
        stages.append(_Hooks)
    if agent.access is not None or capability.policy is not None:  # scopes, roles, rate limits (docs/auth.md)
        stages.append(_Access)
    if capability.side_effects:
        stages.append(_Idempotency)
    if capability.untrusted:
        stages.append(_Framing)
    stages.append(_InFlight)
    if capability.params.host_params:
        stages.append(_Host)
    elif capability.route is not None and capability.gate is not None:
        stages.append(_RouteAccess)
    if capability.path_params:
        stages.append(_Roots)
    if capability.gate is not None:
        stages.append(_Gate)
    return Pipeline(capability, agent, stages)
