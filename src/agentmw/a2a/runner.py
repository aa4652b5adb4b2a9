"""Running A2A tasks over the core: choose the capability, gather its arguments, run it, park it on questions.

The runner moves a task on and turns the core's outcome into the task's states; every change goes through
the registry's public calls (:class:`~agentmw.a2a.registry.TaskRegistry`: ``show``, ``status``,
``artifact``, ``add_artifact``, ``reply``), which keep the record and fan the events out. A task's
coroutine runs in its own asyncio task, so a caller that disconnects (or asked ``returnImmediately``) does
not stop it, ``CancelTask`` reaches it, and a question (``ctx.ask``) parks it in memory until a follow-up
message on the same task answers.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError
from starlette.requests import HTTPConnection

from ..capability import Capability
from ..context import Ask, Context, InputRequest, answer_from
from ..events import ArtifactUpdate, CoreEvent, TextDelta
from ..messages import Artifact, Message
from ..runtime import Outcome, Status, describe_validation_error, invoke
from ..journal import Journal
from ..journal import cancel as cancel_execution
from ..journal import resume as resume_execution
from ..stores.base import TaskRecord
from ..stores.sqlite import RESTART_REASON
from . import registry as _registry
from .registry import LiveTask, TaskRegistry, task_dict
from .wire import INVALID_PARAMS, UNSUPPORTED_OPERATION, A2AError, message_to_wire, new_id, parts_from_outcome

if TYPE_CHECKING:
    from ..agent import Agent

__all__ = ["TaskRunner", "TaskChannel"]

logger = logging.getLogger("agentmw")
_LOST = ("The agent lost this task's execution (it was restarted, or this request reached another replica); "
         "nothing more will run.")


class TaskRunner:
    def __init__(self, agent: Agent, registry: TaskRegistry) -> None:
        self.agent = agent
        self.registry = registry

    async def advance(self, live: LiveTask, message: dict[str, Any], connection: HTTPConnection | None, *,
                      quiet: bool = False) -> None:
        """Move the task on with a message: answer its parked question, or gather arguments and start it."""
        record = live.record
        if live.answer is not None and not live.answer.done():
            live.answer.set_result(message)  # the parked coroutine goes on from its question
            return
        if live.runner is not None and not live.runner.done():
            raise A2AError(UNSUPPORTED_OPERATION, f"Task {record.id} is working and is not waiting for input",
                           {"taskId": record.id})
        if live.resume is not None:  # parked in another process (or one that is gone): replayed here
            journal, live.resume = live.resume, None
            live.runner = asyncio.create_task(self.resume(live, journal, message, connection),
                                              name=f"a2a-resume-{record.id}")
            return
        registry = self.registry
        capability = self._choose(record, message)
        if self.agent.access is not None:  # hidden skills are unknown; missing scopes are 401/403 (docs/auth.md)
            from ..auth.a2a import check_task

            check_task(self.agent, record, capability, connection)
        if capability is None:
            self._ask_for_skill(live, connection)
            return
        record.arguments.update(self._arguments(capability, message, record))
        model = capability.params.input_model
        validated = None
        if capability.params.arg_names and model is not None:
            try:
                validated = model.model_validate(record.arguments)
            except ValidationError as exc:
                text = describe_validation_error(exc).replace("Invalid arguments", "Missing or invalid input")
                registry.status(live, "TASK_STATE_INPUT_REQUIRED", [
                    {"text": f"{text}. Send them in a data part of a message on this task."},
                    {"data": {"inputSchema": capability.input_schema}, "mediaType": "application/json"}])
                return
        missing = [p.name for p in capability.params.message_params
                   if p.required and not any(m.files for m in live.messages)]
        if missing:
            registry.status(live, "TASK_STATE_INPUT_REQUIRED", [
                {"text": f"Missing input: {', '.join(missing)} (a file). Send it as a file part of a message on "
                         "this task."}])
            return
        if quiet and capability.replies_with_message:
            # It may answer with a message and no task: show nothing until it does something else.
            live.quiet = True
            live.first_view = task_dict(record)
        live.runner = asyncio.create_task(self._run(live, capability, connection, validated),
                                          name=f"a2a-task-{record.id}")
        registry.publish_later(live)

    def _choose(self, record: TaskRecord, message: dict[str, Any]) -> Capability | None:
        """The capability the task runs: named in metadata, or the agent's only skill (docs/a2a.md)."""
        if record.skill is None:
            meta = message.get("metadata") or {}
            named = meta.get("skill")
            skills = self.agent.skills
            if isinstance(named, str):
                if named not in skills:
                    raise A2AError(INVALID_PARAMS, f"Unknown skill {named!r}; the agent card lists the skills")
                record.skill = named
            elif len(skills) == 1:
                record.skill = next(iter(skills))
            else:
                return None
            tool = meta.get("tool")
            if isinstance(tool, str):
                if tool not in skills[record.skill].groups or tool not in self.agent.tools:
                    raise A2AError(INVALID_PARAMS, f"Skill {record.skill!r} has no tool {tool!r}")
                record.tool = tool
        skill = self.agent.skills.get(record.skill)
        if skill is None:
            raise A2AError(INVALID_PARAMS, f"Skill {record.skill!r} is no longer served")
        return self.agent.tools[record.tool] if record.tool else skill

    @staticmethod
    def _arguments(capability: Capability, message: dict[str, Any], record: TaskRecord) -> dict[str, Any]:
        """Data parts fill the arguments they name; one that names none of them fills the skill's one
        pydantic-model parameter whole; text fills its one string parameter (docs/skill.md)."""
        arguments: dict[str, Any] = {}
        texts = []
        names = capability.params.arg_names
        model = capability.data_parameter
        for part in message["parts"]:
            data = part.get("data")
            if isinstance(data, dict):
                if model is not None and model not in data and not any(k in names for k in data):
                    arguments[model] = data
                else:
                    arguments.update(data)
            elif "text" in part:
                texts.append(part["text"])
        text_param = capability.text_parameter
        if texts and text_param and text_param not in arguments:
            arguments[text_param] = "\n".join(texts)
        return arguments

    def _ask_for_skill(self, live: LiveTask, connection: HTTPConnection | None = None) -> None:
        skills = self.agent.skills
        if self.agent.access is not None and connection is not None:  # only those this caller may see
            skills = {n: c for n, c in skills.items() if not self.agent.access.hides(c, connection.scope)}
        lines = [f"- {name}: {cap.summary}" for name, cap in skills.items()]
        text = ("Which skill should handle this? Reply on this task with metadata {\"skill\": <id>}. Skills:\n"
                + "\n".join(lines)) if skills else "This agent has no skills."
        self.registry.status(live, "TASK_STATE_INPUT_REQUIRED" if skills else "TASK_STATE_REJECTED", [
            {"text": text}, {"data": {"skills": [{"id": n, "summary": c.summary} for n, c in skills.items()]},
                             "mediaType": "application/json"}])

    async def _run(self, live: LiveTask, capability: Capability, connection: HTTPConnection | None,
                   validated: Any = None) -> None:
        """``validated``: the input model ``advance`` made from ``record.arguments`` (not made twice)."""
        record = live.record
        # the task's journal (docs/durability.md): nothing is written unless the skill takes a journaled step
        # (a question, ctx.call, ctx.once); then any replica can resume it, or take it over if this one dies
        # (a function without a Context parameter or a gate takes none: it runs without one, for nothing)
        journal = Journal(self.agent.state, record.id, lease_seconds=_registry.LEASE_SECONDS) if (
            capability.params.context_param is not None or capability.gate is not None) else None
        try:
            if not live.quiet:
                self.registry.status(live, "TASK_STATE_WORKING", None)
            ctx = Context(capability, TaskChannel(self, live), request=connection, caller=record.owner,
                          agent=self.agent, face="a2a")
            ctx.messages = live.messages  # the same list: follow-ups that answer a question show up in it
            key = _hint(record, "idempotencyKey")
            approval = _hint(record, "approvalId")
            outcome = await invoke(capability, dict(record.arguments), ctx,
                                   idempotency_key=key if isinstance(key, str) else None,
                                   approval_id=approval if isinstance(approval, str) else None, journal=journal,
                                   validated=validated)
            if outcome.code == "taken_over":  # resumed by another process, which reports it
                self.registry.let_go(live)
                return
            self.settle(live, outcome)
        except BaseException as exc:
            await self._ended_abruptly(live, journal, exc, "")

    async def _ended_abruptly(self, live: LiveTask, journal: Journal | None, exc: BaseException,
                              doing: str) -> None:
        """A run or a resume stopped by cancellation or by a bug of ours: the task ends accordingly."""
        if isinstance(exc, asyncio.CancelledError):
            await self._canceled(live, journal)
            return
        if not isinstance(exc, Exception):
            raise exc
        logger.exception("A2A task %s failed inside agentmw%s", live.record.id, doing, exc_info=exc)
        self.finish(live, "TASK_STATE_FAILED", "The agent failed while running this task.")

    async def _canceled(self, live: LiveTask, journal: Journal | None) -> None:
        """The coroutine was cancelled: by CancelTask (the task ends, and so does its journal), or by this
        process's shutdown (a task with a journal is left as it is, for a replica to resume or take over)."""
        stored = journal is not None and journal.stored
        if self.registry.closing and stored:
            return
        self.finish(live, "TASK_STATE_CANCELED", "The task was canceled.")
        if stored:
            try:
                await cancel_execution(self.agent, live.record.id)
            except Exception:
                logger.exception("the journal of A2A task %s could not be marked canceled", live.record.id)

    async def resume(self, live: LiveTask, journal: Journal, message: dict[str, Any] | None,
                     connection: HTTPConnection | None) -> None:
        """Replay, in this process, a task whose coroutine is in no process here (docs/durability.md).

        ``message``: the follow-up answering its question; the task is claimed first (its record written
        here with compare-and-set), and the process that parked it is told to let go. None: a take-over of
        a task whose process died (an orphan): nothing is written until the replay holds its lease.
        Events the replay makes again are not sent again (``TaskChannel`` mutes them)."""
        registry = self.registry
        record = live.record
        answers: dict[str, Any] | None = None
        try:
            if message is not None:
                holder = record.replica
                registry.status(live, "TASK_STATE_WORKING", None)
                await registry.persist(live)  # the claim: of two replicas answering, one writes this
                if live.superseded:
                    return
                await registry.moved(live, holder)
                pending = journal.pending
                only = len(pending) == 1
                answers = {key: answer_from(_payload(message, key, only), request)
                           for key, request in pending.items() if isinstance(request, Ask)}
            outcome = await resume_execution(
                self.agent, record.id, answers=answers, channel=TaskChannel(self, live, journal), request=connection,
                messages=live.messages, journal=journal, lease_seconds=_registry.LEASE_SECONDS,
                wait=2.0 if message is not None else 0.0)
            if outcome.code in ("taken_over", "execution_busy"):  # it goes on elsewhere
                logger.info("A2A task %s goes on elsewhere (%s)", record.id, outcome.code)
                registry.let_go(live)
                return
            if outcome.code in ("unknown_execution", "unknown_capability"):
                logger.warning("A2A task %s cannot be resumed here: %s", record.id, outcome.message)
                self.finish(live, "TASK_STATE_FAILED", RESTART_REASON if message is None else _LOST)
                return
            self.settle(live, outcome)
        except BaseException as exc:
            await self._ended_abruptly(live, journal, exc, " while resuming")

    def settle(self, live: LiveTask, outcome: Outcome) -> None:
        """The task's end (or its question) from the core's outcome (docs/a2a.md, "Tasks and outcomes")."""
        registry = self.registry
        record = live.record
        if outcome.status == "completed":
            value = outcome.value
            if isinstance(value, Message):
                if live.quiet:
                    registry.reply(live, value)
                    return
                registry.status(live, "TASK_STATE_COMPLETED",
                                message_to_wire(value, record.id, record.context_id)["parts"])
                return
            registry.show(live)
            if isinstance(value, Artifact) or (isinstance(value, (list, tuple)) and value
                                               and all(isinstance(v, Artifact) for v in value)):
                for artifact in (value,) if isinstance(value, Artifact) else value:
                    if artifact.artifact_id not in live.streamed:  # a generator's were sent as they came
                        registry.artifact(live, artifact)
                registry.status(live, "TASK_STATE_COMPLETED", None)
                return
            if value is None and not outcome.content and outcome.structured is None:
                # nothing to keep: the task completes with a status message and no artifact
                registry.status(live, "TASK_STATE_COMPLETED", [{"text": "Done."}])
                return
            registry.add_artifact(live, {"artifactId": new_id(), "name": "result",
                                         "parts": parts_from_outcome(outcome.value, outcome.content,
                                                                     outcome.structured)})
            registry.status(live, "TASK_STATE_COMPLETED", None)
            return
        registry.show(live)
        if outcome.status in (Status.NEEDS_INPUT, Status.AWAITING_APPROVAL):  # a question, or an approval
            questions = outcome.pending or {}
            registry.status(live, "TASK_STATE_INPUT_REQUIRED", _question_parts(questions))
        elif outcome.status == "rejected":
            self.finish(live, "TASK_STATE_REJECTED", outcome.message or "The request was rejected.")
        else:
            meta = {"retryable": outcome.retryable}
            if outcome.retry_after is not None:
                meta["retryAfterSeconds"] = outcome.retry_after
            when = ""
            if outcome.retryable:
                when = f" Retry after {outcome.retry_after:g} seconds." if outcome.retry_after else " Retry later."
            text = (outcome.message or "The task failed.").rstrip()
            self.finish(live, "TASK_STATE_FAILED", text if text.endswith(when.strip()) else text + when, meta)

    def finish(self, live: LiveTask, state: str, text: str, metadata: dict[str, Any] | None = None) -> None:
        parts: list[dict[str, Any]] = [{"text": text}]
        if metadata:
            parts.append({"data": metadata, "mediaType": "application/json"})
        self.registry.status(live, state, parts, metadata)


def _hint(record: TaskRecord, key: str) -> Any:
    """A key from the latest user message's metadata, else from the request's (docs/a2a.md)."""
    for message in reversed(record.history):
        if message.get("role") == "ROLE_USER":
            value = (message.get("metadata") or {}).get(key)
            if value is not None:
                return value
            break
    return record.metadata.get(key)


def _question_parts(questions: Mapping[str, InputRequest]) -> list[dict[str, Any]]:
    asks = {key: q for key, q in questions.items() if isinstance(q, Ask)}
    text = "\n".join(q.message for q in asks.values()) or "Input required."
    return [{"text": text}, {"data": {"inputRequests": {
        key: {"message": q.message, "requestedSchema": dict(q.schema)} for key, q in asks.items()}},
        "mediaType": "application/json"}]


def _payload(message: dict[str, Any], key: str, only: bool) -> Any:
    """What a follow-up message says to one question: its data (keyed by question when several were
    asked), else its text."""
    data: dict[str, Any] = {}
    texts = []
    for part in message.get("parts", []):
        if isinstance(part.get("data"), dict):
            data.update(part["data"])
        elif "text" in part:
            texts.append(part["text"])
    if not only:
        return data.get(key) if isinstance(data.get(key), dict) else {}
    return data or ("\n".join(texts) if texts else {})


class TaskChannel:
    """The core channel of one A2A task: progress becomes status updates, questions park the coroutine.
    It changes the task only through the registry's public calls."""

    def __init__(self, runner: TaskRunner, live: LiveTask, journal: Journal | None = None) -> None:
        self.runner = runner
        self.registry = runner.registry
        self.live = live
        self.journal = journal  # a replay: what it does again before its last recorded step is not sent again

    def _muted(self) -> bool:
        journal = self.journal
        if journal is None:
            return False
        if journal.replaying:
            return True
        self.journal = None  # caught up: from here on, everything is new
        return False

    def supports(self, capability: str) -> bool:
        return capability == "elicitation"

    async def emit(self, event: CoreEvent) -> None:
        """``ctx.say`` is a WORKING status update carrying the text; ``ctx.artifact`` (and a generator's
        artifacts) an artifact update. Steps, reasoning, tool calls and state have no A2A form."""
        kind = type(event)
        if self.journal is not None and self._muted():
            if kind is ArtifactUpdate:
                self.live.streamed.add(event.artifact.artifact_id)  # type: ignore[union-attr]
            return
        if kind is TextDelta:
            if event.text:  # type: ignore[union-attr]
                self.registry.show(self.live)
                self.registry.status(self.live, "TASK_STATE_WORKING", [{"text": event.text}])  # type: ignore[union-attr]
        elif kind is ArtifactUpdate:
            self.registry.artifact(self.live, event.artifact)  # type: ignore[union-attr]

    async def progress(self, progress: float, total: float | None, message: str | None) -> None:
        if self.journal is not None and self._muted():
            return
        self.registry.show(self.live)
        amount = f"{progress:g}/{total:g}" if total else f"{progress:g}"
        text = f"{message} ({amount})" if message else f"Progress {amount}"
        self.registry.status(self.live, "TASK_STATE_WORKING", [{"text": text}],
                             {"progress": progress, **({"total": total} if total else {})})

    async def log(self, level: str, data: Any, logger_name: str | None) -> None:
        return None  # A2A has no log channel; progress is the caller-facing signal

    async def gather(self, requests: Mapping[str, InputRequest]) -> dict[str, Any]:
        live = self.live
        registry = self.registry
        registry.show(live)
        loop = asyncio.get_running_loop()
        live.answer = loop.create_future()
        registry.status(live, "TASK_STATE_INPUT_REQUIRED", _question_parts(requests))
        try:
            message = await asyncio.wait_for(live.answer, self.runner.agent.park_timeout_seconds)
        except TimeoutError as exc:
            from ..errors import Permanent

            raise Permanent("No answer arrived in time; the task was stopped.") from exc
        finally:
            live.answer = None
        only = len(requests) == 1
        answers = {key: answer_from(_payload(message, key, only), req)
                   for key, req in requests.items() if isinstance(req, Ask)}
        registry.status(live, "TASK_STATE_WORKING", None)
        return answers
