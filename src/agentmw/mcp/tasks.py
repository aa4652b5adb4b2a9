"""MCP tasks: a long tool answered with a task handle, polled, answered and cancelled (docs/mcp.md, "Tasks").

Two revisions of one idea are served:

- **2025-11-25** (the experimental tasks of that revision, SEP-1686): the client asks for a task
  (``tools/call`` with ``params.task``) of a tool whose ``execution.taskSupport`` allows it, gets
  ``{task: Task}``, then polls ``tasks/get``, lists ``tasks/list``, fetches the result with ``tasks/result``
  (which waits, and asks the task's questions in-band on its stream) and cancels with ``tasks/cancel``.
- **2026-07-28** (the ``io.modelcontextprotocol/tasks`` extension, SEP-2663): a client that declares the
  extension on a request may get ``{resultType: "task", ...Task}`` from a task tool; the server decides.
  ``tasks/get`` inlines the result, the error or the pending ``inputRequests``, ``tasks/update`` answers
  them (a subset at a time, if it likes), ``tasks/cancel`` acknowledges.

Underneath both is the task model A2A uses (``agentmw.tasks``): a record per task in the agent's state
(``mcp.tasks``), the coroutine in the process that runs it, cancels over the bus, a journal that lets any
replica resume a parked task or take over one whose process died.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
import weakref
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

from starlette.requests import HTTPConnection

from .._transport import shutting_down
from ..context import InputRequest
from ..errors import Permanent
from ..events import TextDelta
from ..identity import resolve_caller
from ..journal import Journal
from ..lifecycle import Cadence, Spaces, TaskRecord, TaskState
from ..messages import Artifact, Message
from ..runtime import Outcome, Status
from ..tasks.host import TaskHost
from ..tasks.manager import TaskError, TaskManager, registry_for, spawn
from ..tasks.registry import LiveTask
from ..tasks.runner import TaskChannelBase, TaskRunner
from ._host import McpHost
from ._wire import INTERNAL_ERROR, INVALID_PARAMS, METHOD_NOT_FOUND, MISSING_CAPABILITY, JsonRpcError
from .convert import input_request
from .results import parse_input_response, tool_result

if TYPE_CHECKING:
    from ..capability import Capability
    from .methods import Call

__all__ = ["EXTENSION", "TASK_HANDLERS", "McpTasks", "tasks_of", "wants_task"]

logger = logging.getLogger("agentmw")

EXTENSION = "io.modelcontextprotocol/tasks"
RELATED_TASK = "io.modelcontextprotocol/related-task"
SPACES = Spaces.of("mcp")
TIMING = Cadence()  # heartbeats, leases, sweeps: the core's defaults (tests shorten them before first use)
POLL_INTERVAL_MS = 500  # suggested to clients: a poll costs one record read (one cached lookup here)
REQUIRED: dict[str, Any] = {"requiredCapabilities": {"extensions": {EXTENSION: {}}}}

_STATUS: dict[str, str] = {  # the lifecycle's states in MCP's words
    TaskState.SUBMITTED: "working",
    TaskState.WORKING: "working",
    TaskState.INPUT_REQUIRED: "input_required",
    TaskState.AUTH_REQUIRED: "input_required",
    TaskState.COMPLETED: "completed",
    TaskState.FAILED: "failed",
    TaskState.REJECTED: "failed",
    TaskState.CANCELED: "cancelled",
}


class _Shapes:
    """How an MCP task's status message is kept in its record: the text parts only (no A2A messages)."""

    @staticmethod
    def now_iso() -> str:
        return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")

    @staticmethod
    def agent_message(task_id: str, context_id: str, parts: list[dict[str, Any]]) -> dict[str, Any]:
        return {"parts": parts}

    @staticmethod
    def message_to_wire(message: Message, task_id: str | None, context_id: str | None) -> dict[str, Any]:
        raise TypeError("an MCP task has no messages: its result is the tool's")

    @staticmethod
    def artifact_to_wire(artifact: Artifact) -> dict[str, Any]:
        raise TypeError("an MCP task has no artifacts: its result is the tool's")


def _iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def wants_task(call: Call, cap: Capability, params: Mapping[str, Any]) -> bool:
    """Whether this ``tools/call`` is answered with a task handle; raises when the tool needs one the caller
    cannot take. 2026: the caller declared the extension on this request (the server decides: a task tool
    always gets one). 2025: the caller asked with ``params.task``, and the tool allows it."""
    support = cap.task_support
    if call.stateless:
        extensions = call.client_capabilities.get("extensions")
        declared = isinstance(extensions, dict) and isinstance(extensions.get(EXTENSION), dict)
        if support is None:
            return False  # a legacy ``task`` param never makes a task of a tool that has none
        if not declared and support == "required":
            raise JsonRpcError(
                MISSING_CAPABILITY,
                f"Tool {cap.name} runs only as a task: declare the {EXTENSION} "
                "extension in this request's client capabilities",
                REQUIRED,
            )
        return declared
    task = params.get("task")
    if task is not None and not isinstance(task, dict):
        raise JsonRpcError(INVALID_PARAMS, 'params.task must be an object, such as {"ttl": 60000}')
    asked = task is not None
    if asked and support is None:
        raise JsonRpcError(
            METHOD_NOT_FOUND, f"Tool {cap.name} does not run as a task (execution.taskSupport)"
        )
    if not asked and support == "required":
        raise JsonRpcError(METHOD_NOT_FOUND, f"Tool {cap.name} runs only as a task: send params.task")
    return asked


def render(record: TaskRecord, stateless: bool, *, detailed: bool = True) -> dict[str, Any]:
    """The task as the caller's revision shows it: 2026 a flat ``Task`` (detailed: with its result, error or
    pending input requests inlined); 2025 a ``Task`` (a tool error is ``failed`` there)."""
    meta = record.metadata
    status = _STATUS.get(record.state, "working")
    result = meta.get("result")
    if not stateless and status == "completed" and isinstance(result, dict) and result.get("isError"):
        status = "failed"
    task: dict[str, Any] = {"taskId": record.id, "status": status}
    message = record.status_message
    if message is not None:
        text = " ".join(p.get("text", "") for p in message.get("parts", ()) if isinstance(p, dict)).strip()
        if text:
            task["statusMessage"] = text
    task["createdAt"] = _iso(record.created_at)
    task["lastUpdatedAt"] = _iso(record.updated_at)
    ttl = meta.get("ttlMs")
    if stateless:
        task["ttlMs"] = ttl
        task["pollIntervalMs"] = POLL_INTERVAL_MS
        if detailed:
            if status == "completed" and isinstance(result, dict):
                task["result"] = result
            elif status == "failed":
                task["error"] = meta.get("error") or {
                    "code": INTERNAL_ERROR,
                    "message": task.get("statusMessage", "The task failed."),
                }
            elif status == "input_required":
                task["inputRequests"] = dict(meta.get("inputRequests") or {})
    else:
        task["ttl"] = ttl
        task["pollInterval"] = POLL_INTERVAL_MS
    return task


class TaskChannel(TaskChannelBase):
    """The core channel of one MCP task: progress and ``ctx.say`` become its status message, questions park
    it as ``input_required`` with the requests inlined on ``tasks/get`` (or asked on ``tasks/result``'s stream
    in 2025) until ``tasks/update`` answers them."""

    def supports(self, capability: str) -> bool:
        return capability in self.live.record.metadata.get("supports", ())

    async def progress(self, progress: float, total: float | None, message: str | None) -> None:
        if self._muted():
            return
        amount = f"{progress:g}/{total:g}" if total else f"{progress:g}"
        self.registry.status(
            self.live,
            TaskState.WORKING,
            [{"text": f"{message} ({amount})" if message else f"Progress {amount}"}],
        )

    async def log(self, level: str, data: Any, logger_name: str | None) -> None:
        return None  # tasks carry no log messages (the extension says so); the status message says how far

    async def emit(self, event: Any) -> None:
        if type(event) is TextDelta and event.text and not self._muted():
            self.registry.status(self.live, TaskState.WORKING, [{"text": event.text}])

    async def gather(self, requests: Mapping[str, InputRequest]) -> dict[str, Any]:
        """Park until every request is answered (``tasks/update`` may answer a few at a time)."""
        live = self.live
        registry = self.registry
        parked = _Parked(dict(requests))
        agent = self.runner.agent
        with agent.in_flight.parked():  # a parked task holds no in-flight slot (docs/limits.md)
            live.face = parked
            live.answer = asyncio.get_running_loop().create_future()
            live.record.metadata["inputRequests"] = {key: input_request(r) for key, r in requests.items()}
            registry.status(live, TaskState.INPUT_REQUIRED, [{"text": _asking(requests)}])
            registry.publish(live)
            try:
                await asyncio.wait_for(live.answer, agent.timing.park_timeout_seconds)
            except TimeoutError as exc:
                raise Permanent("No answer arrived in time; the task was stopped.") from exc
            finally:
                live.answer = None
                live.face = None
                live.record.metadata.pop("inputRequests", None)
        registry.status(live, TaskState.WORKING, None)
        return dict(parked.given)


class _Parked:
    """The questions a task parked here waits on, and the answers given so far."""

    __slots__ = ("given", "requests")

    def __init__(self, requests: dict[str, InputRequest]) -> None:
        self.requests = requests
        self.given: dict[str, Any] = {}

    def take(self, responses: Mapping[str, Any]) -> bool:
        """Keep the answers to pending requests (others are ignored); True when none is pending any more."""
        for key, raw in responses.items():
            request = self.requests.get(key)
            if request is not None and key not in self.given:
                parsed = parse_input_response(request, raw)
                if parsed is not None:
                    self.given[key] = parsed
        return len(self.given) == len(self.requests)

    def pending(self) -> dict[str, InputRequest]:
        return {k: r for k, r in self.requests.items() if k not in self.given}


def _asking(requests: Mapping[str, InputRequest]) -> str:
    texts = [getattr(r, "message", "") for r in requests.values()]
    return "Input required: " + "; ".join(t for t in texts if t) if any(texts) else "Input required."


class McpTasksHost(McpHost, TaskHost, Protocol):
    """What MCP tasks read of the agent: the MCP face's host and the task model's."""


class McpTaskRunner(TaskRunner):
    """How an MCP task's outcome becomes its end: the tool's result (a tool error included) or, for what the
    synchronous call would have answered with a JSON-RPC error, ``failed`` with that error."""

    agent: McpTasksHost

    face = "mcp"

    def channel(self, live: LiveTask, journal: Journal | None) -> TaskChannel:
        return TaskChannel(self, live, journal)

    def settle(self, live: LiveTask, outcome: Outcome) -> None:
        if outcome.status == Status.CANCELED:
            self.finish(live, TaskState.CANCELED, outcome.message or "The task was canceled.")
            return
        try:
            result = tool_result(outcome, self.agent)
        except JsonRpcError as exc:
            live.record.metadata["error"] = exc.body(None)["error"]
            self.registry.status(live, TaskState.FAILED, [{"text": exc.message}])
            return
        live.record.metadata["result"] = result
        self.registry.status(live, TaskState.COMPLETED, None)

    def finish(self, live: LiveTask, state: str, text: str, metadata: dict[str, Any] | None = None) -> None:
        if state == TaskState.FAILED:
            live.record.metadata["error"] = {"code": INTERNAL_ERROR, "message": text}
        self.registry.status(live, state, [{"text": text}])


class McpTasks(TaskManager):
    """One agent's MCP tasks (made on first use: ``tasks_of(agent)``)."""

    agent: McpTasksHost

    def __init__(self, agent: McpTasksHost) -> None:
        registry = registry_for(
            agent, agent.state, spaces=SPACES, shapes=_Shapes(), timing=TIMING, label="MCP"
        )
        super().__init__(agent, registry, McpTaskRunner(agent, registry))
        self.ttl_ms = int(agent.timing.task_retention_seconds * 1000)

    def not_found(self, task_id: Any) -> Exception:
        return JsonRpcError(INVALID_PARAMS, "Failed to retrieve task: Task not found", {"taskId": task_id})

    def invalid_id(self, task_id: Any) -> Exception:
        return JsonRpcError(INVALID_PARAMS, "taskId must be a string")

    # --- creating -----------------------------------------------------------------------------------------
    def open(self, call: Call, cap: Capability, arguments: Mapping[str, Any] | None) -> LiveTask:
        supports = [
            name
            for name in ("elicitation", "sampling", "roots")
            if isinstance(call.client_capabilities.get(name), dict)
        ]
        record = TaskRecord(
            id=str(uuid.uuid4()),
            context_id="",
            owner=call.caller or "anonymous",
            state=TaskState.WORKING,
            status_timestamp=_Shapes.now_iso(),
            tool=cap.name,
            arguments=dict(arguments or {}),
            metadata={"stateless": call.stateless, "supports": supports, "ttlMs": self.ttl_ms},
        )
        live = self.registry.open(record)
        self.registry.publish(live)  # written at once and on every change: any replica answers tasks/get
        return live

    async def start(
        self,
        call: Call,
        cap: Capability,
        arguments: Mapping[str, Any] | None,
        idempotency_key: str | None,
        approval_id: str | None,
    ) -> LiveTask:
        """A task running ``cap``, durably created before its handle is returned (a tasks/get on any replica
        finds it at once)."""
        await self.ready()
        live = self.open(call, cap, arguments)
        live.runner = asyncio.get_running_loop().create_task(
            self.runner.execute(
                live,
                cap,
                HTTPConnection(call.scope),
                dict(arguments or {}),
                idempotency_key=idempotency_key,
                approval_id=approval_id,
            ),
            name=f"mcp-task-{live.record.id}",
        )
        await self.registry.persist(live)
        return live

    def carry_on(self, live: LiveTask, running: asyncio.Task[Any]) -> None:
        """A call that became a task midway (``ctx.continue_as_task()``): its coroutine, already running,
        ends the task."""

        async def finish() -> None:
            try:
                outcome = await running
            except BaseException as exc:  # noqa: BLE001  (a cancellation too: ended_abruptly tells them apart)
                await self.runner.ended_abruptly(live, None, exc, "")
                return
            if isinstance(outcome, Outcome):
                self.runner.settle(live, outcome)
            else:  # an input_required answer cannot come after the task exists: its questions park it
                self.runner.finish(live, TaskState.FAILED, "The task asked in a way it cannot be answered.")

        live.runner = spawn(finish(), f"mcp-task-{live.record.id}")

    # --- answering ----------------------------------------------------------------------------------------
    async def update(self, task_id: Any, owner: str, responses: Mapping[str, Any]) -> None:
        """Answers to the task's pending input requests: kept where it is parked; once every one is answered,
        it goes on. Parked in another process (or one that is gone), it is resumed here from its journal."""
        record = await self.get(task_id, owner)
        if record.terminal:
            return
        registry = self.registry
        live = registry.local(task_id)
        if live is not None and live.answer is not None and isinstance(live.face, _Parked):
            self._deliver(live, responses)
            return
        loaded = await registry.load(task_id)
        if (
            loaded is None
            or loaded[0].terminal
            or not loaded[0].parked
            or registry.local(task_id) is not None
        ):
            return  # not waiting for input (any more): the answers are ignored, as the extension allows
        record, version = loaded
        journal = await Journal.load(self.agent.state, task_id, lease_seconds=registry.timing.lease_seconds)
        if journal is None or journal.finished or not journal.pending:
            return
        parked = _Parked(dict(journal.pending))
        parked.take(responses)
        if not parked.given:
            return
        live = await self.adopt(record, version)
        live.runner = asyncio.get_running_loop().create_task(
            self.runner.replay(live, journal, None, lambda pending: dict(parked.given)),
            name=f"mcp-resume-{task_id}",
        )

    def _deliver(self, live: LiveTask, responses: Mapping[str, Any]) -> None:
        parked: _Parked = live.face
        if parked.take(responses):
            if live.answer is not None and not live.answer.done():
                live.answer.set_result({})
            return
        live.record.metadata["inputRequests"] = {k: input_request(r) for k, r in parked.pending().items()}
        self.registry.status(live, TaskState.INPUT_REQUIRED, [{"text": _asking(parked.pending())}])

    async def cancel_task(self, task_id: Any, owner: str, stateless: bool) -> TaskRecord | None:
        """Cancel; a task already ended: 2026 acknowledges all the same, 2025 refuses (-32602)."""
        try:
            return await self.cancel(task_id, owner)
        except TaskError as exc:
            if exc.kind == "not_cancelable" and exc.record is not None and stateless:
                return None
            raise JsonRpcError(INVALID_PARAMS, exc.message, {"taskId": task_id}) from None

    # --- 2025: waiting for the result ---------------------------------------------------------------------
    async def result(self, task_id: Any, call: Call) -> dict[str, Any]:
        """Wait until the task ends and answer what the call would have; while it waits for input here, its
        questions are asked on this request's stream and the answers delivered."""
        owner = call.caller or "anonymous"
        while True:
            record = await self.get(task_id, owner)
            if record.terminal:
                break
            if (
                shutting_down()
            ):  # a wait never holds a shutdown: the task itself is left as a shutdown leaves it
                raise JsonRpcError(
                    INTERNAL_ERROR,
                    "The server is shutting down before the task ended: call "
                    "tasks/result again, or poll tasks/get",
                    {"taskId": task_id},
                )
            live = self.registry.local(task_id)
            if live is None:  # it runs in another process: its record says when it ends
                await asyncio.sleep(POLL_INTERVAL_MS / 1000)
                continue
            parked = live.face
            if live.answer is not None and isinstance(parked, _Parked) and parked.pending():
                answers = await call.gather(call, parked.pending(), f"tasks/result:{task_id}")
                self._deliver(live, {k: _raw(v) for k, v in answers.items()})
                continue
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            live.settle_waiters.append(waiter)
            try:
                await asyncio.wait_for(waiter, 1.0)
            except TimeoutError:
                pass
            finally:
                if waiter in live.settle_waiters:
                    live.settle_waiters.remove(waiter)
        if not self.registry.write_behind:  # the result goes out once its record is committed
            await self.registry.committed(record.id)
        meta = record.metadata
        if record.state == TaskState.COMPLETED and isinstance(meta.get("result"), dict):
            result = dict(meta["result"])
            result["_meta"] = {**(result.get("_meta") or {}), RELATED_TASK: {"taskId": record.id}}
            return result
        error = meta.get("error") or {"code": INTERNAL_ERROR, "message": "The task was cancelled."}
        raise JsonRpcError(
            error.get("code", INTERNAL_ERROR), error.get("message", "The task failed."), error.get("data")
        )

    async def listing(self, owner: str, cursor: Any) -> dict[str, Any]:
        if cursor is not None and not (
            isinstance(cursor, str) and cursor.isascii() and cursor.isdigit() and len(cursor) <= 18
        ):
            raise JsonRpcError(INVALID_PARAMS, "Invalid cursor")
        offset = int(cursor or 0)
        await self.ready()
        records, total = await self.registry.page(
            owner, context_id=None, state=None, after=None, size=50, offset=offset
        )
        result: dict[str, Any] = {"tasks": [render(r, False) for r in records]}
        if offset + len(records) < total:
            result["nextCursor"] = str(offset + len(records))
        return result


def _raw(value: Any) -> Any:
    """A parsed answer (``Answer``, ``Sampled``, roots) back in the wire shape ``tasks/update`` takes."""
    from ..context import Answer, Sampled

    if isinstance(value, Answer):
        out: dict[str, Any] = {"action": value.action}
        if value.content is not None:
            out["content"] = value.content
        return out
    if isinstance(value, Sampled):
        return value.raw or {"role": "assistant", "content": {"type": "text", "text": value.text}}
    if isinstance(value, list):
        return {"roots": [{"uri": r.uri, **({"name": r.name} if r.name else {})} for r in value]}
    return value


_managers: weakref.WeakKeyDictionary[Any, McpTasks] = weakref.WeakKeyDictionary()


def tasks_of(agent: McpHost) -> McpTasks:
    """The agent's MCP tasks, made on first use (nothing is opened for an agent that has no task tool)."""
    manager = _managers.get(agent)
    if manager is None:
        if not isinstance(agent, TaskHost):  # checked once per agent: every agentmw.Agent is one
            raise TypeError(f"{type(agent).__name__} cannot serve MCP tasks: it is not a tasks.TaskHost")
        manager = _managers[agent] = McpTasks(agent)
    return manager


class Detacher:
    """The channel of a call to an ``ask_first`` task tool: the call's own channel (its questions are asked
    before any task exists) until the function calls ``ctx.continue_as_task()``; from then on the task's."""

    def __init__(
        self, inline: Any, manager: McpTasks, call: Call, cap: Capability, arguments: Mapping[str, Any] | None
    ) -> None:
        self.inline = inline
        self.manager = manager
        self.call = call
        self.cap = cap
        self.arguments = arguments
        self.target: Any = inline
        self.live: LiveTask | None = None
        self.detached: asyncio.Future[LiveTask] = asyncio.get_running_loop().create_future()

    def supports(self, capability: str) -> bool:
        return bool(self.target.supports(capability))

    async def progress(self, progress: float, total: float | None, message: str | None) -> None:
        await self.target.progress(progress, total, message)

    async def log(self, level: str, data: Any, logger_name: str | None) -> None:
        await self.target.log(level, data, logger_name)

    async def emit(self, event: Any) -> None:
        emit = getattr(self.target, "emit", None)
        if emit is not None:
            await emit(event)

    async def gather(self, requests: Mapping[str, InputRequest]) -> dict[str, Any]:
        return dict(await self.target.gather(requests))

    async def detach(self) -> None:
        """The task begins: written, then the call is answered with its handle (the function goes on)."""
        if self.live is not None:
            return
        manager = self.manager
        await manager.ready()
        live = manager.open(self.call, self.cap, self.arguments)
        await manager.registry.persist(live)
        self.live = live
        self.target = TaskChannel(manager.runner, live)
        self.detached.set_result(live)


# --- the methods --------------------------------------------------------------------------------------------


def _task_id(call: Call, params: Mapping[str, Any]) -> Any:
    if call.stateless:
        extensions = call.client_capabilities.get("extensions")
        if not (isinstance(extensions, dict) and isinstance(extensions.get(EXTENSION), dict)):
            raise JsonRpcError(
                MISSING_CAPABILITY,
                f"Task methods need the {EXTENSION} extension in this request's client capabilities",
                REQUIRED,
            )
    task_id = params.get("taskId")
    if not isinstance(task_id, str):
        raise JsonRpcError(INVALID_PARAMS, "taskId must be a string")
    return task_id


async def _caller(call: Call) -> str:
    if call.caller is None:
        call.caller = await resolve_caller(HTTPConnection(call.scope), call.agent.identify)
    return call.caller


async def tasks_get(call: Call, params: dict[str, Any]) -> dict[str, Any]:
    task_id = _task_id(call, params)
    record = await tasks_of(call.agent).get(task_id, await _caller(call))
    return render(record, call.stateless)


async def tasks_update(call: Call, params: dict[str, Any]) -> dict[str, Any]:
    if not call.stateless:
        raise JsonRpcError(METHOD_NOT_FOUND, "Method not found: tasks/update")
    task_id = _task_id(call, params)
    responses = params.get("inputResponses")
    if not isinstance(responses, dict):
        raise JsonRpcError(INVALID_PARAMS, "inputResponses must be an object keyed by the input request keys")
    await tasks_of(call.agent).update(task_id, await _caller(call), responses)
    return {}


async def tasks_cancel(call: Call, params: dict[str, Any]) -> dict[str, Any]:
    task_id = _task_id(call, params)
    record = await tasks_of(call.agent).cancel_task(task_id, await _caller(call), call.stateless)
    if call.stateless or record is None:
        return {}
    return render(record, False)


async def tasks_result(call: Call, params: dict[str, Any]) -> dict[str, Any]:
    if call.stateless:
        raise JsonRpcError(METHOD_NOT_FOUND, "Method not found: tasks/result (the result is on tasks/get)")
    task_id = _task_id(call, params)
    await _caller(call)
    return await tasks_of(call.agent).result(task_id, call)


async def tasks_list(call: Call, params: dict[str, Any]) -> dict[str, Any]:
    if call.stateless:
        raise JsonRpcError(METHOD_NOT_FOUND, "Method not found: tasks/list")
    return await tasks_of(call.agent).listing(await _caller(call), params.get("cursor"))


TASK_HANDLERS: dict[str, Callable[[Call, dict[str, Any]], Any]] = {
    "tasks/get": tasks_get,
    "tasks/update": tasks_update,
    "tasks/cancel": tasks_cancel,
    "tasks/result": tasks_result,
    "tasks/list": tasks_list,
}


def create_result(record: TaskRecord, stateless: bool) -> dict[str, Any]:
    """The answer to a call that became a task: 2026 ``resultType: "task"`` and the flat Task; 2025
    ``{task: Task}``."""
    task = render(record, stateless, detailed=False)
    if stateless:
        return {"resultType": "task", **task}
    return {"task": task}


__all__ += ["TaskChannel", "create_result", "render"]
