"""The MCP methods both eras serve, over one protocol-neutral core.

Each era builds a :class:`Call` (who is asking, what they can answer, where notifications go) and a
channel; the handlers here translate params into an invocation and the outcome into an MCP result.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

from starlette.requests import HTTPConnection

from ..apps import client_supports_apps
from ..auth.access import DENIALS, denial
from ..capability import Capability
from ..context import Context, InputRequest
from ..errors import Permanent
from ..events import TextDelta
from ..identity import resolve_caller
from ..runtime import Code, InputsPending, Outcome, Status, invoke
from . import _state
from ._host import McpHost
from ._wire import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    MISSING_CAPABILITY,
    RESOURCE_NOT_FOUND_2025,
    JsonRpcError,
)
from .convert import (
    input_request,
    prompt_descriptor,
    prompt_messages,
    resource_contents,
    resource_descriptor,
    template_descriptor,
    tool_descriptor,
)
from .results import META_APPROVAL_ID, bridged, parse_input_response, tool_result
from .skills import SKILL_HANDLERS, listed_resources, withheld
from .tasks import TASK_HANDLERS, Detacher, create_result, tasks_of, wants_task

if TYPE_CHECKING:
    from ._wire import Exchange

__all__ = ["HANDLERS", "LOG_RANK", "Call", "Catalog", "ClientNotAnswered", "parse_input_response"]

META_IDEMPOTENCY_KEY = "agentmw/idempotencyKey"

logger = logging.getLogger("agentmw")

LOG_RANK = {
    name: rank
    for rank, name in enumerate(
        ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
    )
}


def _core(host: McpHost) -> Any:
    """The agent as ``tasks_of`` takes it: it still names ``Agent``, which no face imports; the same object,
    handed on untyped until ``mcp/tasks.py`` takes a Protocol of its own."""
    return host


class ClientNotAnswered(Permanent):
    """The client did not answer a server-to-client request usably (an error, a result of the wrong shape, a
    closed stream, a timeout). Inside the function it is the function's failure; raised by a stage before the
    function (the gate's confirmation, the roots request), it means nothing ran (:func:`_run`)."""


class Catalog:
    """The MCP lists, rebuilt only when the registry changes.

    Tools come in two lists: ``tools`` for a client that renders MCP Apps, and ``model_tools``, without the
    app-only tools (a UI ``visibility`` without ``"model"``), for every other client (docs/mcp-apps.md,
    "Visibility"). Without app-only tools they are one list."""

    def __init__(self, agent: McpHost) -> None:
        self.agent = agent
        self._revision = -1
        self.tools: list[dict[str, Any]] = []
        self.model_tools: list[dict[str, Any]] = []
        self.resources: list[dict[str, Any]] = []
        self.templates: list[dict[str, Any]] = []
        self.prompts: list[dict[str, Any]] = []

    def fresh(self) -> Catalog:
        if self._revision != self.agent.revision:
            agent = self.agent
            tools = sorted(agent.tools.values(), key=lambda c: c.name)
            self.tools = [tool_descriptor(c) for c in tools]
            self.model_tools = (
                [d for c, d in zip(tools, self.tools, strict=True) if not c.app_only]
                if any(c.app_only for c in tools)
                else self.tools
            )
            self.resources = [resource_descriptor(c) for c in agent.resources.values()]
            self.templates = [template_descriptor(c) for c in agent.templates.values()]
            self.prompts = [
                prompt_descriptor(c) for c in sorted(agent.prompts.values(), key=lambda c: c.name)
            ]
            self._revision = agent.revision
        return self


class Call:
    """One MCP request being served, with what the era knows about its caller."""

    __slots__ = (
        "agent",
        "caller",
        "catalog",
        "client_capabilities",
        "exchange",
        "gather",
        "log_level",
        "params",
        "progress_token",
        "scope",
        "stateless",
        "version",
    )

    def __init__(
        self,
        agent: McpHost,
        catalog: Catalog,
        *,
        stateless: bool,
        version: str,
        client_capabilities: Mapping[str, Any],
        log_level: str | None,
        exchange: Exchange,
        scope: Any,
        params: Mapping[str, Any],
        gather: Callable[[Call, Mapping[str, InputRequest], str], Awaitable[dict[str, Any]]],
        caller: str | None = None,
    ) -> None:
        self.agent = agent
        self.catalog = catalog
        self.stateless = stateless
        self.version = version
        self.client_capabilities = client_capabilities
        self.log_level = log_level
        meta = params.get("_meta")
        self.progress_token = meta.get("progressToken") if isinstance(meta, dict) else None
        self.exchange = exchange
        self.scope = scope
        self.params = params
        self.gather = gather
        self.caller = caller


class McpChannel:
    """The core :class:`~agentmw.context.Channel` over one MCP request."""

    __slots__ = ("call", "target")

    def __init__(self, call: Call, target: str) -> None:
        self.call = call
        self.target = target

    def supports(self, capability: str) -> bool:
        return isinstance(self.call.client_capabilities.get(capability), dict)

    async def progress(self, progress: float, total: float | None, message: str | None) -> None:
        token = self.call.progress_token
        if token is None:
            return
        params: dict[str, Any] = {"progressToken": token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None:
            params["message"] = message
        await self.call.exchange.message(
            {"jsonrpc": "2.0", "method": "notifications/progress", "params": params}
        )

    async def log(self, level: str, data: Any, logger: str | None) -> None:
        threshold = self.call.log_level
        if threshold is None or LOG_RANK[level] < LOG_RANK.get(threshold, 0):
            return
        params: dict[str, Any] = {"level": level, "data": data}
        if logger:
            params["logger"] = logger
        await self.call.exchange.message(
            {"jsonrpc": "2.0", "method": "notifications/message", "params": params}
        )

    async def emit(self, event: Any) -> None:
        """``ctx.say`` is a log notification (level ``info``, logger ``say``); artifacts reach the result as
        content blocks (the returned or yielded value); steps, reasoning and state have no MCP form."""
        if type(event) is TextDelta and event.text:
            await self.log("info", event.text, "say")

    async def gather(self, requests: Mapping[str, InputRequest]) -> dict[str, Any]:
        return await self.call.gather(self.call, requests, self.target)


def _params_object(params: Any) -> dict[str, Any]:
    if params is None:
        return {}
    if not isinstance(params, dict):
        raise JsonRpcError(INVALID_PARAMS, "params must be an object")
    return params


def _no_cursor(params: Mapping[str, Any]) -> None:
    if params.get("cursor") is not None:
        raise JsonRpcError(INVALID_PARAMS, "Invalid cursor: this server returns every item on one page")


def _hints(call: Call) -> tuple[str | None, str | None]:
    """The idempotency key and the out-of-band approval id in the request's ``_meta`` (docs/safety.md)."""
    meta = call.params.get("_meta")
    key = approval = None
    if isinstance(meta, dict):
        key = meta.get(META_IDEMPOTENCY_KEY)
        approval = meta.get(META_APPROVAL_ID)
    return key if isinstance(key, str) else None, approval if isinstance(approval, str) else None


async def _run(
    call: Call, cap: Capability, arguments: Any, target: str, channel: Any = None
) -> Outcome | dict[str, Any]:
    """Invoke ``cap``; a question the caller must answer first becomes an ``input_required`` result (2026).
    ``channel``: the call's own by default (a task tool's call that may become a task passes its own)."""
    connection = HTTPConnection(call.scope)
    caller = call.caller or await resolve_caller(connection, call.agent.identify)
    call.caller = caller
    ctx = Context(
        cap,
        channel or McpChannel(call, target),
        request=connection,
        caller=caller,
        agent=call.agent,
        face="mcp",
    )
    key, approval = _hints(call)
    try:
        outcome = await invoke(cap, arguments, ctx, idempotency_key=key, approval_id=approval)
    except ClientNotAnswered as exc:  # the gate's or the roots' question: the function never started
        logger.debug("MCP %s stopped before it ran: %s", target, exc)
        why = str(exc)
        return Outcome(
            status=Status.REJECTED,
            code=Code.CLIENT_NOT_ANSWERED,
            message=f"{why[:1].upper()}{why[1:]}. Nothing was executed and nothing changed.",
        )
    if outcome.code in DENIALS:  # a refused caller is HTTP 401/403 with its challenge, not a tool result
        raise denial(call.agent, outcome, call.scope)
    if outcome.status == "needs_input" and call.stateless and outcome.pending and outcome.code is None:
        state = await _state.seal_round(
            call.agent, target, arguments, outcome.data or {}, asked=list(outcome.pending), caller=caller
        )
        return {
            "resultType": "input_required",
            "inputRequests": {key: input_request(req) for key, req in outcome.pending.items()},
            "requestState": state,
        }
    if outcome.status == "rejected" and outcome.code == "missing_capability" and call.stateless:
        raise JsonRpcError(
            MISSING_CAPABILITY, outcome.message, {"requiredCapabilities": {str(outcome.data): {}}}
        )
    return outcome


async def tools_list(call: Call, params: dict[str, Any]) -> dict[str, Any]:
    _no_cursor(params)
    catalog = call.catalog.fresh()
    tools = catalog.tools
    if catalog.model_tools is not tools and not client_supports_apps(call.client_capabilities):
        tools = catalog.model_tools  # app-only tools: for a client that renders the app (mcp-apps.md)
    return {"tools": _visible(call, "tools", tools)}


def _visible(call: Call, kind: str, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A list as this caller may see it (docs/auth.md); the whole list when no access rule is configured."""
    agent = call.agent
    access = agent.access
    if access is not None:
        items = access.visible_list(kind, items, call.scope)
    return agent.shown(kind, "mcp", items, call.scope, call.caller)


def _hidden(call: Call, cap: Capability) -> bool:
    """Whether ``cap`` is hidden from this caller: answered as unknown, alike with a missing one."""
    return call.agent.access is not None and call.agent.access.hides(cap, call.scope)


def _named(
    call: Call, table: Mapping[str, Capability], params: dict[str, Any], method: str
) -> tuple[Capability, Any]:
    """The capability ``params.name`` names in ``table``, and ``params.arguments``, or -32602."""
    name = params.get("name")
    if not isinstance(name, str):
        raise JsonRpcError(INVALID_PARAMS, f"{method} needs a string 'name'")
    cap = table.get(name)
    if (
        cap is None
        or _hidden(call, cap)
        # an app-only tool, to a client that renders no MCP App: unknown, as it is unlisted (mcp-apps.md)
        or (cap.app_only and not client_supports_apps(call.client_capabilities))
    ):
        raise JsonRpcError(INVALID_PARAMS, f"Unknown {method.split('/')[0][:-1]}: {name}")
    arguments = params.get("arguments")
    if arguments is not None and not isinstance(arguments, dict):
        raise JsonRpcError(INVALID_PARAMS, f"{method} 'arguments' must be an object")
    return cap, arguments


async def tools_call(call: Call, params: dict[str, Any]) -> dict[str, Any]:
    cap, arguments = _named(call, call.agent.tools, params, "tools/call")
    if cap.task_support is not None and wants_task(call, cap, params):
        if call.agent.access is not None:  # a missing scope: HTTP 401/403 before any task exists (auth.md)
            call.agent.access.check_call(cap, call.scope)
        return await _as_task(call, cap, arguments)
    outcome = await _run(call, cap, arguments, f"tools/call:{cap.name}")
    if isinstance(outcome, dict):
        return outcome
    return tool_result(outcome, call.agent, remote=bridged(cap))


async def _as_task(call: Call, cap: Capability, arguments: Any) -> dict[str, Any]:
    """A task tool's call answered with a task handle (docs/mcp.md, "Tasks"): at once; or, for an
    ``ask_first`` tool, once its questions are answered and it calls ``ctx.continue_as_task()`` (a function
    that ends before that answers as a plain call would)."""
    manager = tasks_of(_core(call.agent))
    call.caller = call.caller or await resolve_caller(HTTPConnection(call.scope), call.agent.identify)
    if not cap.ask_first:
        key, approval = _hints(call)
        live = await manager.start(call, cap, arguments, key, approval)
        return create_result(live.record, call.stateless)
    target = f"tools/call:{cap.name}"
    detacher = Detacher(McpChannel(call, target), manager, call, cap, arguments)
    running = asyncio.ensure_future(_run(call, cap, arguments, target, channel=detacher))
    try:
        waiting: set[asyncio.Future[Any]] = {running, detacher.detached}
        await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        if detacher.live is None:
            running.cancel()
        raise
    if detacher.live is not None:
        manager.carry_on(detacher.live, running)
        return create_result(detacher.live.record, call.stateless)
    detacher.detached.cancel()
    outcome = running.result()
    return outcome if isinstance(outcome, dict) else tool_result(outcome, call.agent, remote=bridged(cap))


def _outcome_error(outcome: Outcome) -> JsonRpcError:
    if outcome.status in (Status.NEEDS_INPUT, Status.AWAITING_APPROVAL):
        questions = {key: input_request(req) for key, req in (outcome.pending or {}).items()}
        return JsonRpcError(
            INVALID_PARAMS, "Input required, but this client cannot be asked", {"inputRequests": questions}
        )
    if outcome.status == Status.REJECTED:
        return JsonRpcError(INVALID_PARAMS, outcome.message or "Invalid params")
    if outcome.retryable:  # a prompt or resource that may work later (the store was unavailable, ...)
        after = outcome.retry_after if outcome.retry_after is not None else 1.0
        return JsonRpcError(
            INTERNAL_ERROR, outcome.message or "Try again later", {"retryable": True, "retryAfter": after}
        )
    return JsonRpcError(INTERNAL_ERROR, outcome.message or "Internal error")


async def resources_list(call: Call, params: dict[str, Any]) -> dict[str, Any]:
    _no_cursor(params)
    shown = _visible(call, "resources", call.catalog.fresh().resources)
    return {"resources": listed_resources(call, shown)}  # a skill package is one decision (skills.py)


async def templates_list(call: Call, params: dict[str, Any]) -> dict[str, Any]:
    _no_cursor(params)
    return {"resourceTemplates": _visible(call, "templates", call.catalog.fresh().templates)}


async def resources_read(call: Call, params: dict[str, Any]) -> dict[str, Any]:
    uri = params.get("uri")
    if not isinstance(uri, str):
        raise JsonRpcError(INVALID_PARAMS, "resources/read needs a string 'uri'")
    found = call.agent.find_resource(uri)
    if found is None or _hidden(call, found[0]) or withheld(call, found[0]):
        code = INVALID_PARAMS if call.stateless else RESOURCE_NOT_FOUND_2025
        raise JsonRpcError(code, "Resource not found", {"uri": uri})
    cap, variables = found
    outcome = await _run(call, cap, variables, f"resources/read:{uri}")
    if isinstance(outcome, dict):
        return outcome
    if outcome.status != "completed":
        raise _outcome_error(outcome)
    return {"contents": resource_contents(cap, uri, outcome.value)}


async def prompts_list(call: Call, params: dict[str, Any]) -> dict[str, Any]:
    _no_cursor(params)
    return {"prompts": _visible(call, "prompts", call.catalog.fresh().prompts)}


async def prompts_get(call: Call, params: dict[str, Any]) -> dict[str, Any]:
    cap, arguments = _named(call, call.agent.prompts, params, "prompts/get")
    outcome = await _run(call, cap, arguments, f"prompts/get:{cap.name}")
    if isinstance(outcome, dict):
        return outcome
    if outcome.status != "completed":
        raise _outcome_error(outcome)
    result: dict[str, Any] = {"messages": prompt_messages(outcome.value)}
    if cap.contract:
        result["description"] = cap.contract
    return result


async def completion_complete(call: Call, params: dict[str, Any]) -> dict[str, Any]:
    ref, argument = params.get("ref"), params.get("argument")
    if (
        not isinstance(ref, dict)
        or not isinstance(argument, dict)
        or not isinstance(argument.get("name"), str)
    ):
        raise JsonRpcError(INVALID_PARAMS, "completion/complete needs 'ref' and 'argument{name, value}'")
    agent = call.agent
    cap: Capability | None
    if ref.get("type") == "ref/prompt":
        cap = agent.prompts.get(str(ref.get("name")))
    elif ref.get("type") == "ref/resource":
        uri = str(ref.get("uri"))
        cap = agent.templates.get(uri) or agent.resources.get(uri)
    else:
        raise JsonRpcError(INVALID_PARAMS, f"Unknown completion reference type {ref.get('type')!r}")
    if cap is None or _hidden(call, cap):
        raise JsonRpcError(INVALID_PARAMS, f"Nothing to complete for {ref}")
    values: list[str] = []
    complete = cap.completions.get(argument["name"])
    if complete is not None:
        context = params.get("context") or {}
        known = context.get("arguments") if isinstance(context, dict) else None
        value = str(argument.get("value", ""))
        wants_context = len(inspect.signature(complete).parameters) > 1
        try:
            produced = complete(value, known or {}) if wants_context else complete(value)
            if inspect.isawaitable(produced):
                produced = await produced
            values = [str(v) for v in produced or ()]
        except Exception as exc:
            logger.exception("completion for %r raised", cap.name)
            raise JsonRpcError(INTERNAL_ERROR, f"Completion failed: {type(exc).__name__}") from exc
    return {"completion": {"values": values[:100], "total": len(values), "hasMore": len(values) > 100}}


HANDLERS: dict[str, Callable[[Call, dict[str, Any]], Awaitable[dict[str, Any]]]] = {
    "tools/list": tools_list,
    "tools/call": tools_call,
    "resources/list": resources_list,
    "resources/templates/list": templates_list,
    "resources/read": resources_read,
    "prompts/list": prompts_list,
    "prompts/get": prompts_get,
    "completion/complete": completion_complete,
    **TASK_HANDLERS,
    **SKILL_HANDLERS,  # the skills extension (docs/skill-packages.md)
}

INPUT_METHODS = frozenset({"tools/call", "prompts/get", "resources/read"})


async def dispatch(call: Call, method: str, params: Any, request_id: Any = None) -> dict[str, Any]:
    telemetry = call.agent.telemetry
    if telemetry is not None:  # its server span, protocol error counts (docs/observability.md)
        served: dict[str, Any] = await telemetry.serve_mcp(
            call, method, params, request_id, lambda: _dispatch(call, method, params)
        )
        return served
    return await _dispatch(call, method, params)


def _dispatch(call: Call, method: str, params: Any) -> Awaitable[dict[str, Any]]:
    handler = HANDLERS.get(method)
    if handler is None:
        raise JsonRpcError(METHOD_NOT_FOUND, f"Method not found: {method}")
    return handler(call, _params_object(params))


__all__ += ["INPUT_METHODS", "InputsPending", "dispatch"]
