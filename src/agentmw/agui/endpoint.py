"""The AG-UI endpoint (HTTP only): ``POST /agui/<skill>`` runs a skill as an AG-UI agent and streams its events.

Also ``GET /agui/<skill>/capabilities``, ``GET /agui/<skill>/runs/<run id>/events?after=<seq>`` to
reconnect to a run, and ``POST /agui/<skill>/runs/<run id>/cancel``.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError
from starlette.requests import HTTPConnection

from .._scope import route_path
from .._shape import BodyShape, ShapeError, check_shape
from .._transport import (
    PARSE_ERROR,
    ClientDisconnected,
    ProtocolError,
    dumps,
    identity_error,
    loads,
    read_body,
    send_json,
    store_fault,
    store_unavailable,
    stream_sse,
)
from .._types import Receive, Scope, Send
from ..errors import AccessRefused
from ..identity import resolve_caller
from ..settings import Limits
from .runs import Consumer, Refused, Run, Runs
from .sequence import Sequencer
from .settings import AguiSettings

if TYPE_CHECKING:
    from .._wiring import FaceHost
    from ..capability import Capability

__all__ = ["AguiEndpoint"]

logger = logging.getLogger("agentmw")


class AguiEndpoint:
    """ASGI app serving each skill as an AG-UI agent under ``settings.path``.

    Built once by the agent with its settings, the shared limits, and the runs it serves (``runs.py``: threads,
    runs and interrupts, here and in the shared state)."""

    def __init__(self, agent: FaceHost, settings: AguiSettings, limits: Limits, lifecycle: Runs) -> None:
        self.agent = agent
        self.settings = settings
        self.max_body_bytes = limits.max_body_bytes
        # a run costs more per value than an MCP or A2A request: at most max_values of the body's
        self.body_shape = BodyShape(min(limits.max_body_values, settings.max_values), limits.max_body_depth)
        self.lifecycle = lifecycle
        self.threads = self.lifecycle.threads  # this process's, bounded in count and age (docs/limits.md)
        self.runs = self.lifecycle.runs
        self._input_model: Any = None

    # --- routing ---------------------------------------------------------------------------------
    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = False

        async def sending(message: Any) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self._route(scope, receive, sending)
        except AccessRefused as exc:  # from identify(), before any response started
            error = identity_error(exc)
            await send_json(send, error.status or 403, {"detail": error.message}, error.headers)
        except Exception as exc:
            # The store failing before the run's stream started (the thread's record, the run id's claim, a
            # reconnection's log): 503 with Retry-After, which a client and a proxy retry; never a 500, whose
            # resets take the replica out of a proxy's rotation. Inside a stream the run ends with RUN_ERROR.
            fault = store_fault(exc)
            if fault is None or started:
                raise
            logger.warning("AG-UI request: %s", fault.message)
            error = store_unavailable(fault)
            await send_json(send, 503, {"detail": fault.message}, error.headers)

    async def _route(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.lifecycle.sweep()  # runs whose replica died: the first request of a process, then every few seconds
        parts = route_path(scope)[len(self.settings.path) :].strip("/").split("/")
        verb = scope["method"]
        skill = self.agent.skills.get(parts[0]) if parts and parts[0] else None
        if self.agent.access is not None:  # 401/403/429; a hidden skill is unknown (docs/auth.md)
            skill = await self.agent.access.admit_skill(scope, skill, run=len(parts) == 1 and verb == "POST")
        if skill is None:
            await send_json(
                send, 404, {"detail": f"No skill {parts[0] if parts else ''!r} is served over AG-UI"}
            )
            return
        if len(parts) == 1 and verb == "POST":
            try:
                await self._run(skill, scope, receive, send)
            except ClientDisconnected:
                return
            except ProtocolError as exc:  # raised while reading the body, before any response started
                logger.debug("AG-UI request refused: %s", exc.message)
                if exc.code == PARSE_ERROR:  # as FastAPI answers a body that is not JSON
                    await send_json(
                        send, 422, {"detail": [{"loc": ["body"], "msg": exc.message, "type": "json_invalid"}]}
                    )
                else:
                    await send_json(send, exc.status or 400, {"detail": exc.message}, exc.headers)
        elif parts[1:] == ["capabilities"] and verb == "GET":
            await send_json(send, 200, self.capabilities(skill))
        elif len(parts) == 4 and parts[1] == "runs" and parts[3] == "events" and verb == "GET":
            await self._reconnect(parts[2], scope, receive, send)
        elif len(parts) == 4 and parts[1] == "runs" and parts[3] == "cancel" and verb == "POST":
            await self._cancel(parts[2], scope, send)
        else:
            await send_json(
                send,
                405 if len(parts) == 1 else 404,
                {"detail": "Not found"},
                [(b"allow", b"POST")] if len(parts) == 1 else None,
            )

    def capabilities(self, skill: Capability) -> dict[str, Any]:
        return {
            "identity": {
                "name": skill.name,
                "type": "agentmw-skill",
                "description": skill.summary,
                "version": self.agent.version,
            },
            "transport": {
                "streaming": True,
                "websocket": False,
                "httpBinary": False,
                "pushNotifications": False,
                "resumable": True,
            },
            "tools": {"supported": bool(skill.groups), "clientProvided": False, "parallelCalls": False},
            "state": {"snapshots": True, "deltas": True, "memory": True, "persistentState": False},
            "reasoning": {"supported": True, "streaming": True, "encrypted": False},
            "humanInTheLoop": {"supported": True, "interrupts": True, "approvals": True},
            "multiAgent": {"supported": False},
            "custom": {
                "agentmw": {
                    "stateVersioning": "forwardedProps.stateVersion",
                    "detached": "forwardedProps.detached",
                    "reconnect": "GET runs/{runId}/events?after={seq}",
                    "cancel": "POST runs/{runId}/cancel",
                }
            },
        }

    # --- a run -----------------------------------------------------------------------------------
    async def _parse(self, receive: Receive, send: Send) -> Any | None:
        """The run input, strictly decoded (no NaN or Infinity can reach the state) and within the body's
        limits (docs/limits.md, "Request bodies"); None after a 422."""
        if self._input_model is None:
            from ag_ui.core import RunAgentInput

            self._input_model = RunAgentInput
        raw = await read_body(receive, self.max_body_bytes)
        try:
            check_shape(raw, self.body_shape)  # before decoding: its cost grows with the values
        except ShapeError as exc:
            logger.debug("AG-UI request refused: %s", exc.message)
            kind = "json_too_deep" if exc.kind == "depth" else "too_many_values"
            await send_json(send, 422, {"detail": [{"loc": ["body"], "msg": exc.message, "type": kind}]})
            return None
        body = loads(raw)
        refused = self._over_limits(body)
        if refused is not None:
            logger.debug("AG-UI request refused: %s", refused["msg"])
            await send_json(send, 422, {"detail": [refused]})
            return None
        try:
            return self._input_model.model_validate(body)
        except ValidationError as exc:
            errors = [
                {"loc": list(e.get("loc", ())), "msg": e.get("msg", ""), "type": e.get("type", "")}
                for e in exc.errors(include_url=False)
            ]
            await send_json(send, 422, {"detail": errors})
            return None

    def _over_limits(self, body: Any) -> dict[str, Any] | None:
        """The 422 detail of a run input past ``agui_max_messages`` or ``agui_max_state_bytes``, checked before
        it is validated (validating 90,000 messages took seconds), or whose ``forwardedProps.arguments`` (the
        skill's arguments, an agentmw convention the model leaves untyped) is not an object; None when fine."""
        if not isinstance(body, dict):
            return None  # validation says what is wrong with it
        props = body.get("forwardedProps")
        arguments = props.get("arguments") if isinstance(props, dict) else None
        if arguments is not None and not isinstance(arguments, dict):
            return {
                "loc": ["body", "forwardedProps", "arguments"],
                "type": "dict_type",
                "msg": "forwardedProps.arguments must be an object: the skill's arguments by name",
            }
        messages, limit = body.get("messages"), self.settings.max_messages
        if isinstance(messages, list) and len(messages) > limit:
            return {
                "loc": ["body", "messages"],
                "type": "too_long",
                "msg": f"A run carries at most {limit} messages, not {len(messages)}",
            }
        state, most = body.get("state"), self.settings.max_state_bytes
        if state is not None:
            try:
                size = len(dumps(state))
            except (TypeError, ValueError):
                return None  # not JSON: validation refuses it
            if size > most:
                return {
                    "loc": ["body", "state"],
                    "type": "too_large",
                    "msg": f"The state is {size} bytes as JSON; at most {most} are accepted",
                }
        return None

    async def _run(self, skill: Capability, scope: Scope, receive: Receive, send: Send) -> None:
        run_input = await self._parse(receive, send)
        if run_input is None:
            return
        telemetry = self.agent.telemetry
        if telemetry is None:
            await self._start(skill, run_input, scope, receive, send)
            return
        # the run's server span (docs/observability.md)
        with telemetry.serving_agui(scope, skill.name, run_input) as span:
            run = await self._start(skill, run_input, scope, receive, send)
            code = "refused" if run is None else run.sequencer.error_code
            if code:  # counted, and the run's span failed with the RUN_ERROR code
                telemetry.run_error(span, code)

    async def _start(
        self, skill: Capability, run_input: Any, scope: Scope, receive: Receive, send: Send
    ) -> Run | None:
        """Start the run and stream it; None when it was refused."""
        connection = HTTPConnection(scope)
        owner = await resolve_caller(connection, self.agent.identify)
        try:
            run, consumer = await self.lifecycle.start(
                skill, run_input, connection, owner, self.settings.consumer_limit
            )
        except Refused as refused:
            await send_json(send, refused.status, {"detail": refused.detail})
            return None
        await self._stream(run, consumer, scope, receive, send, cancel_on_disconnect=not run.detached)
        return run

    # --- streaming -------------------------------------------------------------------------------
    async def _stream(
        self,
        run: Run,
        consumer: Consumer,
        scope: Scope,
        receive: Receive,
        send: Send,
        *,
        cancel_on_disconnect: bool,
    ) -> None:
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
            completed = await stream_sse(
                scope, receive, send, frames(), on_disconnect=consumer.close, first=first
            )
        finally:
            run.consumers.discard(consumer)
        if (not completed or consumer.overflowed) and cancel_on_disconnect:
            run.cancel()

    async def _reconnect(self, run_id: str, scope: Scope, receive: Receive, send: Send) -> None:
        connection = HTTPConnection(scope)
        owner = await resolve_caller(connection, self.agent.identify)
        run = self.runs.get(run_id)
        claim = None
        if run is None:  # not here: another replica runs it (or ran it), and its log is in the shared state
            try:
                claim = await self.lifecycle.remote(run_id, owner)
            except Refused as refused:
                await send_json(send, refused.status, {"detail": refused.detail})
                return
        elif run.thread.owner != owner:
            await send_json(send, 404, {"detail": f"Run {run_id} not found"})
            return
        raw = connection.query_params.get("after") or connection.headers.get("last-event-id") or "0"
        try:
            after = int(raw)
        except ValueError:
            await send_json(send, 422, {"detail": "after must be an integer sequence number"})
            return
        if claim is not None:
            await stream_sse(scope, receive, send, self.lifecycle.replay_log(run_id, claim["thread"], after))
            return
        assert run is not None
        frames, fell_behind = run.replay(after)
        consumer = Consumer(self.settings.consumer_limit)
        if fell_behind:
            # Too far back for the buffer: the current state and messages instead of the lost events.
            consumer.push(Sequencer.reconnect_snapshot(run.thread.state, run.thread.messages))
        consumer.push(frames)
        if run.ended:
            consumer.close()
        else:
            run.consumers.add(consumer)
        await self._stream(run, consumer, scope, receive, send, cancel_on_disconnect=False)

    async def _cancel(self, run_id: str, scope: Scope, send: Send) -> None:
        owner = await resolve_caller(HTTPConnection(scope), self.agent.identify)
        try:
            await self.lifecycle.cancel(run_id, owner)
        except Refused as refused:
            await send_json(send, refused.status, {"detail": refused.detail})
            return
        await send_json(send, 200, {"runId": run_id, "outcome": "cancelled"})
