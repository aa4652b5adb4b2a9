"""The AG-UI endpoint: ``POST /agui/<skill>`` runs a skill as an AG-UI agent and streams its events.

Also ``GET /agui/<skill>/capabilities``, ``GET /agui/<skill>/runs/<run id>/events?after=<seq>`` to
reconnect to a run, and ``POST /agui/<skill>/runs/<run id>/cancel``.
"""

from __future__ import annotations

import asyncio
import collections
import logging
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError
from starlette.requests import HTTPConnection

from .._transport import (
    PARSE_ERROR,
    ClientDisconnected,
    ProtocolError,
    identity_error,
    read_json,
    send_json,
    sse_data,
    stream_sse,
)
from .._types import Receive, Scope, Send
from ..context import Context
from ..identity import Forbidden, Unauthenticated, resolve_caller
from ..middleware import route_path
from ..runtime import describe_validation_error, invoke
from ..messages import is_answer
from .messages import messages_from_run
from .runs import (
    AguiChannel,
    Consumer,
    Execution,
    PendingInterrupt,
    Run,
    Thread,
    answers_for,
    expiry,
    interrupt_id,
    interrupt_of,
    run_table,
    thread_table,
)
from .sequence import Sequencer

if TYPE_CHECKING:
    from ..agent import Agent
    from ..capability import Capability

__all__ = ["AguiEndpoint"]

logger = logging.getLogger("agentmw")


class AguiEndpoint:
    def __init__(self, agent: Agent) -> None:
        self.agent = agent
        self.threads = thread_table(agent)  # bounded in count and age (agui/runs.py, docs/limits.md)
        self.runs = run_table(agent)
        self._input_model: Any = None

    # --- routing ---------------------------------------------------------------------------------
    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await self._route(scope, receive, send)
        except (Unauthenticated, Forbidden) as exc:  # from identify(), before any response started
            error = identity_error(exc)
            await send_json(send, error.status or 403, {"detail": error.message}, error.headers)

    async def _route(self, scope: Scope, receive: Receive, send: Send) -> None:
        parts = route_path(scope)[len(self.agent.agui_path):].strip("/").split("/")
        verb = scope["method"]
        skill = self.agent.skills.get(parts[0]) if parts and parts[0] else None
        if skill is None:
            await send_json(send, 404, {"detail": f"No skill {parts[0] if parts else ''!r} is served over AG-UI"})
            return
        if len(parts) == 1 and verb == "POST":
            try:
                await self._run(skill, scope, receive, send)
            except ClientDisconnected:
                return
            except ProtocolError as exc:  # raised while reading the body, before any response started
                logger.debug("AG-UI request refused: %s", exc.message)
                if exc.code == PARSE_ERROR:  # as FastAPI answers a body that is not JSON
                    await send_json(send, 422, {"detail": [{"loc": ["body"], "msg": exc.message,
                                                            "type": "json_invalid"}]})
                else:
                    await send_json(send, exc.status or 400, {"detail": exc.message}, exc.headers)
        elif parts[1:] == ["capabilities"] and verb == "GET":
            await send_json(send, 200, self.capabilities(skill))
        elif len(parts) == 4 and parts[1] == "runs" and parts[3] == "events" and verb == "GET":
            await self._reconnect(parts[2], scope, receive, send)
        elif len(parts) == 4 and parts[1] == "runs" and parts[3] == "cancel" and verb == "POST":
            await self._cancel(parts[2], scope, send)
        else:
            await send_json(send, 405 if len(parts) == 1 else 404, {"detail": "Not found"},
                        [(b"allow", b"POST")] if len(parts) == 1 else None)

    def capabilities(self, skill: Capability) -> dict[str, Any]:
        return {
            "identity": {"name": skill.name, "type": "agentmw-skill", "description": skill.summary,
                         "version": self.agent.version},
            "transport": {"streaming": True, "websocket": False, "httpBinary": False, "pushNotifications": False,
                          "resumable": True},
            "tools": {"supported": bool(skill.groups), "clientProvided": False, "parallelCalls": False},
            "state": {"snapshots": True, "deltas": True, "memory": True, "persistentState": False},
            "reasoning": {"supported": True, "streaming": True, "encrypted": False},
            "humanInTheLoop": {"supported": True, "interrupts": True, "approvals": True},
            "multiAgent": {"supported": False},
            "custom": {"agentmw": {"stateVersioning": "forwardedProps.stateVersion",
                                   "detached": "forwardedProps.detached",
                                   "reconnect": "GET runs/{runId}/events?after={seq}",
                                   "cancel": "POST runs/{runId}/cancel"}},
        }

    # --- a run -----------------------------------------------------------------------------------
    async def _parse(self, receive: Receive, send: Send) -> Any | None:
        """The run input, strictly decoded (no NaN or Infinity can reach the state); None after a 422."""
        if self._input_model is None:
            from ag_ui.core import RunAgentInput

            self._input_model = RunAgentInput
        body = await read_json(receive, self.agent.max_body_bytes)
        try:
            return self._input_model.model_validate(body)
        except ValidationError as exc:
            errors = [{"loc": list(e.get("loc", ())), "msg": e.get("msg", ""), "type": e.get("type", "")}
                      for e in exc.errors(include_url=False)]
            await send_json(send, 422, {"detail": errors})
            return None

    async def _run(self, skill: Capability, scope: Scope, receive: Receive, send: Send) -> None:
        run_input = await self._parse(receive, send)
        if run_input is None:
            return
        connection = HTTPConnection(scope)
        owner = await resolve_caller(connection, self.agent.identify)
        thread = self.threads.get(run_input.thread_id)
        if thread is not None and (thread.owner != owner or thread.skill != skill.name):
            await send_json(send, 404, {"detail": f"Thread {run_input.thread_id} not found"})
            return
        if run_input.run_id in self.runs:
            await send_json(send, 409, {"detail": f"Run {run_input.run_id} already exists"})
            return
        if thread is None:
            thread = Thread(run_input.thread_id, owner, skill.name)
            self.threads[thread.id] = thread
        props = run_input.forwarded_props if isinstance(run_input.forwarded_props, dict) else {}
        thread.messages = [m.model_dump(mode="json", by_alias=True, exclude_none=True) for m in run_input.messages]
        run = Run(run_input.run_id, thread, Sequencer(thread.id, run_input.run_id, thread.messages),
                  collections.deque(maxlen=self.agent.agui_buffer_events), detached=props.get("detached") is True)
        self._remember(run)
        consumer = Consumer(self.agent.agui_consumer_limit, owns_run=True)
        run.consumers.add(consumer)
        run.sequencer.start(run_input.model_dump(mode="json", by_alias=True, exclude_none=True))
        try:
            self._begin(run, run_input, skill, connection, props)
        except Exception:
            logger.exception("AG-UI run %s failed to start", run.id)
            run.sequencer.error("The agent failed to start this run.", "INTERNAL_ERROR")
        run.publish()
        await self._stream(run, consumer, scope, receive, send, cancel_on_disconnect=not run.detached)

    def _begin(self, run: Run, run_input: Any, skill: Capability, connection: HTTPConnection,
               props: dict[str, Any]) -> None:
        thread = run.thread
        sequencer = run.sequencer
        if not self._arbitrate_state(thread, run_input.state, props.get("stateVersion")):
            sequencer.state_snapshot(thread.state)
            sequencer.error(f"The state changed on the server (now version {thread.version}); "
                            "start again from this snapshot.", "STATE_VERSION_CONFLICT")
            return
        sequencer.state_snapshot(thread.state)
        resume = [entry.model_dump(mode="json", by_alias=True, exclude_none=True) for entry in run_input.resume or []]
        if thread.interrupts or resume:
            self._resume(run, resume, skill, connection)
            return
        if thread.execution is not None and thread.execution.task is not None and not thread.execution.task.done():
            sequencer.error("This thread already has a run in progress.", "RUN_IN_PROGRESS")
            return
        arguments = dict(props.get("arguments") or {})
        text = next((m.get("content") for m in reversed(thread.messages)
                     if m.get("role") == "user" and isinstance(m.get("content"), str)), None)
        if text and skill.text_parameter and skill.text_parameter not in arguments:
            arguments[skill.text_parameter] = text
        thread.arguments = arguments
        key = props.get("idempotencyKey") or connection.headers.get("idempotency-key")
        thread.idempotency_key = key if isinstance(key, str) else None
        approval = props.get("approvalId")
        thread.approval_id = approval if isinstance(approval, str) else None
        thread.forwarded = props
        self._start_or_ask(run, skill, connection)

    def _arbitrate_state(self, thread: Thread, client_state: Any, version: Any) -> bool:
        """The server arbitrates: a client write must name the version it saw (or match the state)."""
        if client_state is None:
            return True
        if not isinstance(client_state, dict):
            return False
        if version is not None:
            if version != thread.version:
                return False
        elif thread.version and client_state != thread.state:
            return False
        if client_state != thread.state:
            thread.state = client_state
            thread.version += 1
        return True

    def _start_or_ask(self, run: Run, skill: Capability, connection: HTTPConnection) -> None:
        thread = run.thread
        model = skill.params.input_model
        if skill.params.arg_names and model is not None:
            try:
                model.model_validate(thread.arguments)
            except ValidationError as exc:
                pending = PendingInterrupt(interrupt_id(), "arguments", None,
                                           expiry(self.agent.park_timeout_seconds), kind="arguments")
                thread.interrupts = {pending.id: pending}
                message = describe_validation_error(exc).replace("Invalid arguments", "Missing or invalid input")
                run.sequencer.interrupt([interrupt_of(pending, message, skill.input_schema, "input_required")],
                                        thread.state)
                return
        execution = Execution(skill, thread, run, idempotency_key=thread.idempotency_key)
        run.execution = execution
        thread.execution = execution
        execution.task = asyncio.create_task(self._execute(execution, connection), name=f"agui-run-{run.id}")

    def _resume(self, run: Run, resume: list[dict[str, Any]], skill: Capability, connection: HTTPConnection) -> None:
        thread = run.thread
        answered = {entry.get("interruptId") for entry in resume}
        if not thread.interrupts or answered != set(thread.interrupts):
            missing = sorted(set(thread.interrupts) - answered)
            unknown = sorted(answered - set(thread.interrupts))
            run.sequencer.error(f"A resume must answer every open interrupt (missing: {missing}, "
                                f"unknown: {unknown}).", "INVALID_RESUME")
            return
        pending = list(thread.interrupts.values())
        cancelled = any(entry.get("status") == "cancelled" for entry in resume)
        execution = thread.execution
        if cancelled:
            thread.interrupts = {}
            if execution is not None and execution.task is not None and not execution.task.done():
                execution.run = run
                run.execution = execution
                execution.task.cancel()  # parked on the question: nothing after it runs
            else:
                run.sequencer.finish({"type": "cancelled"})
            return
        if pending[0].kind == "arguments":
            thread.interrupts = {}
            payload = resume[0].get("payload")
            if isinstance(payload, dict):
                thread.arguments.update(payload)
            self._start_or_ask(run, skill, connection)
            return
        if execution is None or execution.answer is None or execution.answer.done():
            thread.interrupts = {}
            run.sequencer.error("The interrupted execution is gone (it expired or the server restarted); "
                                "start a new run.", "RESUME_LOST")
            return
        answers = answers_for(thread, resume)
        thread.interrupts = {}
        execution.run = run
        run.execution = execution
        execution.answer.set_result(answers)

    async def _execute(self, execution: Execution, connection: HTTPConnection) -> None:
        thread = execution.thread
        ctx = Context(execution.capability, AguiChannel(self.agent, execution), request=connection,
                      caller=thread.owner, agent=self.agent, state=thread.state, face="agui")
        ctx.messages = messages_from_run(thread.messages, thread.forwarded)  # this turn's (agui/messages.py)
        try:
            outcome = await invoke(execution.capability, dict(thread.arguments), ctx,
                                   idempotency_key=execution.idempotency_key, approval_id=thread.approval_id)
        except asyncio.CancelledError:
            run = execution.run
            if not run.ended:
                run.sequencer.finish({"type": "cancelled"})
                run.publish()
            return
        except Exception:
            logger.exception("AG-UI execution failed inside agentmw")
            run = execution.run
            run.sequencer.error("The agent failed while running.", "INTERNAL_ERROR")
            run.publish()
            return
        finally:
            if thread.execution is execution:
                thread.execution = None
        run = execution.run
        if run.ended:
            return
        try:
            self._render(execution, outcome)
        except Exception:  # whatever the function returned, the run ends with a terminal event
            logger.exception("AG-UI run %s could not render its outcome", run.id)
            run.sequencer.error("The agent failed while sending this run's result.", "INTERNAL_ERROR")
        run.publish()

    def _render(self, execution: Execution, outcome: Any) -> None:
        run, thread = execution.run, execution.thread
        sequencer = run.sequencer
        if outcome.status == "completed":
            if is_answer(outcome.value) and not execution.capability.is_async_gen:  # a generator's are sent
                sequencer.answer(outcome.value, text=not execution.streamed_text)
            elif not execution.streamed_text:
                text = "".join(getattr(part, "text", "") for part in outcome.content)
                sequencer.text(text)
            sequencer.finish(result=outcome.structured)
        elif outcome.status == "needs_input":
            interrupts = []
            for key, request in (outcome.pending or {}).items():
                pending = PendingInterrupt(interrupt_id(), key, None, expiry(self.agent.park_timeout_seconds),
                                           kind="arguments")
                thread.interrupts[pending.id] = pending
                interrupts.append(interrupt_of(pending, request.message, request.schema, "input_required"))  # type: ignore[union-attr]
            sequencer.interrupt(interrupts, thread.state)
        else:
            code = "RETRYABLE" if outcome.retryable else ("REJECTED" if outcome.status == "rejected" else "FAILED")
            message = outcome.message or outcome.status
            if outcome.retryable and outcome.retry_after is not None:
                message = f"{message} Retry after {outcome.retry_after:g} seconds."
            sequencer.error(message, code)

    # --- streaming -------------------------------------------------------------------------------
    async def _stream(self, run: Run, consumer: Consumer, scope: Scope, receive: Receive, send: Send, *,
                      cancel_on_disconnect: bool) -> None:
        """Send the consumer's frames in batches until the run ends, the client leaves, it falls too far behind,
        or the server shuts down; losing the client of an attached run cancels the run."""

        async def frames() -> AsyncIterator[bytes]:
            while True:
                if not consumer.frames and not consumer.closed:
                    consumer.ready.clear()
                    await consumer.ready.wait()
                if consumer.frames:
                    batch = b"".join(consumer.frames)
                    consumer.frames.clear()
                    yield batch
                    continue
                return  # closed: the run ended, or the consumer fell too far behind

        try:
            first = b"".join(consumer.frames)
            consumer.frames.clear()
            completed = await stream_sse(scope, receive, send, frames(), on_disconnect=consumer.close, first=first)
        finally:
            run.consumers.discard(consumer)
        if (not completed or consumer.overflowed) and cancel_on_disconnect:
            run.cancel()

    async def _reconnect(self, run_id: str, scope: Scope, receive: Receive, send: Send) -> None:
        run = self.runs.get(run_id)
        owner = await resolve_caller(HTTPConnection(scope), self.agent.identify)
        if run is None or run.thread.owner != owner:
            await send_json(send, 404, {"detail": f"Run {run_id} not found"})
            return
        connection = HTTPConnection(scope)
        raw = connection.query_params.get("after") or connection.headers.get("last-event-id") or "0"
        try:
            after = int(raw)
        except ValueError:
            await send_json(send, 422, {"detail": "after must be an integer sequence number"})
            return
        frames, fell_behind = run.replay(after)
        consumer = Consumer(self.agent.agui_consumer_limit)
        if fell_behind:
            # Too far back for the buffer: the current state and messages instead of the lost events.
            snapshot = {"type": "STATE_SNAPSHOT", "snapshot": run.thread.state}
            messages = {"type": "MESSAGES_SNAPSHOT", "messages": run.thread.messages}
            consumer.push([sse_data(snapshot), sse_data(messages)])
        consumer.push(frames)
        if run.ended:
            consumer.close()
        else:
            run.consumers.add(consumer)
        await self._stream(run, consumer, scope, receive, send, cancel_on_disconnect=False)

    async def _cancel(self, run_id: str, scope: Scope, send: Send) -> None:
        run = self.runs.get(run_id)
        owner = await resolve_caller(HTTPConnection(scope), self.agent.identify)
        if run is None or run.thread.owner != owner:
            await send_json(send, 404, {"detail": f"Run {run_id} not found"})
            return
        if not run.cancel():
            await send_json(send, 409, {"detail": f"Run {run_id} is not running"})
            return
        await asyncio.gather(run.execution.task, return_exceptions=True)  # type: ignore[union-attr]
        await send_json(send, 200, {"runId": run_id, "outcome": "cancelled"})

    def _remember(self, run: Run) -> None:
        self.runs[run.id] = run  # the table drops the oldest ended runs past agui_max_runs
