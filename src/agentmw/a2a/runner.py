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
from typing import Any

from pydantic import ValidationError
from starlette.requests import HTTPConnection

from ..capability import Capability
from ..context import Ask, InputRequest, answer_from
from ..errors import Permanent
from ..events import ArtifactUpdate, CoreEvent, TextDelta
from ..journal import Journal
from ..lifecycle import TaskRecord, TaskState
from ..messages import Artifact, Message
from ..runtime import Outcome, Status, describe_validation_error
from ..tasks.registry import TaskRegistry
from ..tasks.runner import TaskChannelBase, TaskRunner, eager, start
from .auth import check_task
from .registry import A2AHost, LiveTask, task_dict
from .wire import INVALID_PARAMS, UNSUPPORTED_OPERATION, A2AError, message_to_wire, new_id, parts_from_outcome

__all__ = ["A2ATaskRunner", "TaskChannel"]

logger = logging.getLogger("agentmw")


class A2ATaskRunner(TaskRunner):
    """The A2A part of running a task (the rest is the core's, ``agentmw.tasks.runner``)."""

    face = "a2a"
    agent: A2AHost

    def __init__(self, agent: A2AHost, registry: TaskRegistry) -> None:
        super().__init__(agent, registry)

    async def advance(
        self,
        live: LiveTask,
        message: dict[str, Any],
        connection: HTTPConnection | None,
        *,
        quiet: bool = False,
    ) -> None:
        """Move the task on with a message: answer its parked question, or gather arguments and start it."""
        record = live.record
        if self.agent.telemetry is not None:  # the span that began the task: follow-ups and pushes link to it
            self.agent.telemetry.anchor("a2a", record.id, first=True)
        if live.answer is not None and not live.answer.done():
            live.answer.set_result(message)  # the parked coroutine goes on from its question
            return
        if live.runner is not None and not live.runner.done():
            raise A2AError(
                UNSUPPORTED_OPERATION,
                f"Task {record.id} is working and is not waiting for input",
                {"taskId": record.id},
            )
        if live.resume is not None:  # parked in another process (or one that is gone): replayed here
            journal, live.resume = live.resume, None
            live.runner = asyncio.create_task(
                self.resume(live, journal, message, connection), name=f"a2a-resume-{record.id}"
            )
            return
        registry = self.registry
        capability = self._choose(record, message, connection)
        if (
            self.agent.access is not None
        ):  # hidden skills are unknown; missing scopes are 401/403 (docs/auth.md)
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
                registry.status(
                    live,
                    TaskState.INPUT_REQUIRED,
                    [
                        {"text": f"{text}. Send them in a data part of a message on this task."},
                        {"data": {"inputSchema": capability.input_schema}, "mediaType": "application/json"},
                    ],
                )
                return
        missing = [
            p.name
            for p in capability.params.message_params
            if p.required and not any(m.files for m in live.messages)
        ]
        if missing:
            registry.status(
                live,
                TaskState.INPUT_REQUIRED,
                [
                    {
                        "text": f"Missing input: {', '.join(missing)} (a file). Send it as a file part of a message on "
                        "this task."
                    }
                ],
            )
            return
        if quiet and capability.replies_with_message:
            # It may answer with a message and no task: show nothing until it does something else.
            live.quiet = True
            live.first_view = task_dict(record)
        key = _hint(record, "idempotencyKey")
        # Nobody watching a quiet send's task, a function that cannot suspend, and no idempotency key to look
        # up: it runs to its end right here, with no task of its own (agentmw.tasks.runner.start), and its
        # WORKING status, which nobody could see, is left out.
        eagerly = (
            quiet
            and not live.subscribers
            and eager(self.agent, capability)
            and (key is None or not capability.side_effects)
        )
        live.runner = start(
            self._run(live, capability, connection, validated, key, announce=not eagerly),
            f"a2a-task-{record.id}",
            eagerly=eagerly,
        )
        if live.runner is not None:  # one that ran eagerly has settled already
            if eagerly and not live.quiet and record.state == TaskState.SUBMITTED:  # it suspended after all
                registry.status(live, TaskState.WORKING, None)
            registry.publish_later(live)

    def _choose(
        self, record: TaskRecord, message: dict[str, Any], connection: HTTPConnection | None = None
    ) -> Capability | None:
        """The capability the task runs: named in metadata, or the only skill the caller may see (docs/a2a.md)."""
        if record.skill is None:
            meta = message.get("metadata") or {}
            named = meta.get("skill")
            skills = self.agent.skills
            if isinstance(named, str):
                if named not in skills:
                    raise A2AError(
                        INVALID_PARAMS, f"Unknown skill {named!r}; the agent card lists the skills"
                    )
                record.skill = named
            elif len(visible := self._visible_skills(connection)) == 1:
                record.skill = next(iter(visible))
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

    def _visible_skills(self, connection: HTTPConnection | None) -> Mapping[str, Capability]:
        """The skills this caller may see (all of them without ``Agent(auth=...)``): hidden ones are unknown."""
        skills = self.agent.skills
        if self.agent.access is not None and connection is not None:
            skills = {n: c for n, c in skills.items() if not self.agent.access.hides(c, connection.scope)}
        return skills

    def _ask_for_skill(self, live: LiveTask, connection: HTTPConnection | None = None) -> None:
        skills = self._visible_skills(connection)
        lines = [f"- {name}: {cap.summary}" for name, cap in skills.items()]
        text = (
            (
                'Which skill should handle this? Reply on this task with metadata {"skill": <id>}. Skills:\n'
                + "\n".join(lines)
            )
            if skills
            else "This agent has no skills."
        )
        self.registry.status(
            live,
            TaskState.INPUT_REQUIRED if skills else TaskState.REJECTED,
            [
                {"text": text},
                {
                    "data": {"skills": [{"id": n, "summary": c.summary} for n, c in skills.items()]},
                    "mediaType": "application/json",
                },
            ],
        )

    async def _run(
        self,
        live: LiveTask,
        capability: Capability,
        connection: HTTPConnection | None,
        validated: Any,
        key: Any,
        *,
        announce: bool,
    ) -> None:
        """``validated``: the input model ``advance`` made from ``record.arguments`` (not made twice); ``key``:
        the idempotency key the messages name; ``announce``: whether the task shows WORKING when it starts."""
        record = live.record
        approval = _hint(record, "approvalId")
        await self.execute(
            live,
            capability,
            connection,
            dict(record.arguments),
            idempotency_key=key if isinstance(key, str) else None,
            approval_id=approval if isinstance(approval, str) else None,
            validated=validated,
            announce=announce,
        )

    def channel(self, live: LiveTask, journal: Journal | None) -> TaskChannel:
        return TaskChannel(self, live, journal)

    async def resume(
        self,
        live: LiveTask,
        journal: Journal,
        message: dict[str, Any] | None,
        connection: HTTPConnection | None,
    ) -> None:
        """Replay a task whose coroutine is in no process here (``agentmw.tasks.runner.TaskRunner.replay``).
        ``message``: the follow-up answering its question; None: a take-over of a task whose process died."""

        def answer(pending: Mapping[str, InputRequest]) -> dict[str, Any]:
            only = len(pending) == 1
            return {
                key: answer_from(_payload(message, key, only), request)  # type: ignore[arg-type]
                for key, request in pending.items()
                if isinstance(request, Ask)
            }

        await self.replay(live, journal, connection, answer if message is not None else None)

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
                registry.status(
                    live,
                    TaskState.COMPLETED,
                    message_to_wire(value, record.id, record.context_id)["parts"],
                )
                return
            registry.show(live)
            if isinstance(value, Artifact) or (
                isinstance(value, (list, tuple)) and value and all(isinstance(v, Artifact) for v in value)
            ):
                for artifact in (value,) if isinstance(value, Artifact) else value:
                    if artifact.artifact_id not in live.streamed:  # a generator's were sent as they came
                        registry.artifact(live, artifact)
                registry.status(live, TaskState.COMPLETED, None)
                return
            if value is None and not outcome.content and outcome.structured is None:
                # nothing to keep: the task completes with a status message and no artifact
                registry.status(live, TaskState.COMPLETED, [{"text": "Done."}])
                return
            registry.add_artifact(
                live,
                {
                    "artifactId": new_id(),
                    "name": "result",
                    "parts": parts_from_outcome(outcome.value, outcome.content, outcome.structured),
                },
            )
            registry.status(live, TaskState.COMPLETED, None)
            return
        registry.show(live)
        if outcome.status in (Status.NEEDS_INPUT, Status.AWAITING_APPROVAL):  # a question, or an approval
            questions = outcome.pending or {}
            registry.status(live, TaskState.INPUT_REQUIRED, _question_parts(questions))
        elif outcome.status == Status.REJECTED:
            self.finish(live, TaskState.REJECTED, outcome.message or "The request was rejected.")
        else:
            meta: dict[str, Any] = {"retryable": outcome.retryable}
            if outcome.retry_after is not None:
                meta["retryAfterSeconds"] = outcome.retry_after
            when = ""
            if outcome.retryable:
                when = (
                    f" Retry after {outcome.retry_after:g} seconds."
                    if outcome.retry_after
                    else " Retry later."
                )
            text = (outcome.message or "The task failed.").rstrip()
            self.finish(live, TaskState.FAILED, text if text.endswith(when.strip()) else text + when, meta)

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
    return [
        {"text": text},
        {
            "data": {
                "inputRequests": {
                    key: {"message": q.message, "requestedSchema": dict(q.schema)} for key, q in asks.items()
                }
            },
            "mediaType": "application/json",
        },
    ]


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


class TaskChannel(TaskChannelBase):
    """The core channel of one A2A task: progress becomes status updates, questions park the coroutine.
    It changes the task only through the registry's public calls."""

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
                self.registry.status(self.live, TaskState.WORKING, [{"text": event.text}])  # type: ignore[union-attr]
        elif kind is ArtifactUpdate:
            self.registry.artifact(self.live, event.artifact)  # type: ignore[union-attr]

    async def progress(self, progress: float, total: float | None, message: str | None) -> None:
        if self.journal is not None and self._muted():
            return
        self.registry.show(self.live)
        amount = f"{progress:g}/{total:g}" if total else f"{progress:g}"
        text = f"{message} ({amount})" if message else f"Progress {amount}"
        self.registry.status(
            self.live,
            TaskState.WORKING,
            [{"text": text}],
            {"progress": progress, **({"total": total} if total else {})},
        )

    async def log(self, level: str, data: Any, logger_name: str | None) -> None:
        return None  # A2A has no log channel; progress is the caller-facing signal

    async def gather(self, requests: Mapping[str, InputRequest]) -> dict[str, Any]:
        live = self.live
        registry = self.registry
        registry.show(live)
        agent = self.runner.agent
        with agent.in_flight.parked(live.bytes):  # a parked task holds no in-flight slot (docs/limits.md)
            live.answer = asyncio.get_running_loop().create_future()
            registry.status(live, TaskState.INPUT_REQUIRED, _question_parts(requests))
            try:
                message = await asyncio.wait_for(live.answer, agent.timing.park_timeout_seconds)
            except TimeoutError as exc:
                raise Permanent("No answer arrived in time; the task was stopped.") from exc
            finally:
                live.answer = None
        only = len(requests) == 1
        answers = {
            key: answer_from(_payload(message, key, only), req)
            for key, req in requests.items()
            if isinstance(req, Ask)
        }
        registry.status(live, TaskState.WORKING, None)
        return answers
