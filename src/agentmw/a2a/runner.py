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
from dataclasses import replace
from typing import Any

from pydantic import ValidationError
from starlette.requests import HTTPConnection

from ..answers import Unreadable, accepted_forms
from ..capability import Capability
from ..content import Text
from ..context import Answer, Ask, InputRequest, read_answer
from ..errors import Permanent
from ..events import ArtifactUpdate, CoreEvent, SurfaceUpdate, TextDelta
from ..journal import Journal
from ..lifecycle import TaskRecord, TaskState
from ..messages import Artifact, Message
from ..runtime import Outcome, Status, describe_validation_error
from ..tasks.registry import TaskRegistry
from ..tasks.runner import TaskChannelBase, TaskRunner, eager, start
from .auth import check_task
from .registry import A2AHost, LiveTask, task_dict
from .surfaces import shown, surface_parts
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
            pending = live.resume.pending
            if pending:
                try:
                    _answers(message, pending)
                except Unreadable as exc:
                    # asked again, to this caller alone: the journal and the record stay as they are (still
                    # parked where they were), for the next answer here or there
                    self.registry.ask_again_here(
                        live, _question_parts(pending, f"That answer could not be read: {exc}")
                    )
                    return
            journal, live.resume = live.resume, None
            live.runner = asyncio.create_task(
                self.resume(live, journal, message, connection), name=f"a2a-resume-{record.id}"
            )
            return
        registry = self.registry
        source = message
        if (
            record.skill is None
            and record.state == TaskState.INPUT_REQUIRED
            and not isinstance((message.get("metadata") or {}).get("skill"), str)
        ):  # the answer to "which skill?", by text or data, from a client that sets no metadata
            named, said = self._skill_named(message, connection)
            if named is None and len(self._visible_skills(connection)) != 1:
                self._ask_for_skill(
                    live, connection, f"{said!r} is not one of this agent's skills." if said else None
                )
                return
            if named is not None:
                record.skill = named
                source = _with_request(record, message)
        capability = self._choose(record, message, connection)
        if (
            self.agent.access is not None
        ):  # hidden skills are unknown; missing scopes are 401/403 (docs/auth.md)
            check_task(self.agent, record, capability, connection)
        if capability is None:
            self._ask_for_skill(live, connection)
            return
        record.arguments.update(self._arguments(capability, source, record))
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
                grouped = tool in skills[record.skill].groups and tool in self.agent.tools
                if not grouped or self.agent.tools[tool].app_only:  # an MCP App's button, not A2A's
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

    def _skill_named(
        self, message: dict[str, Any], connection: HTTPConnection | None
    ) -> tuple[str | None, str | None]:
        """The visible skill an answer to "which skill?" names, by its id or name as the message's text
        (trimmed, any case) or as ``{"skill": ...}`` in a data part; and what the answer said. A hidden
        skill is named by nobody (docs/auth.md: it is unknown)."""
        said = None
        for part in message.get("parts", []):
            data = part.get("data")
            if isinstance(data, dict) and isinstance(data.get("skill"), str):
                said = data["skill"]
                break
        if said is None:
            said = "\n".join(p["text"] for p in message.get("parts", []) if isinstance(p.get("text"), str))
        word = _word(said)
        if not word:
            return None, None
        for name, capability in self._visible_skills(connection).items():
            if word in (_word(name), _word(capability.title or name)):
                return name, said
        shown = " ".join(said.split())
        return None, shown if len(shown) <= 60 else shown[:57] + "..."

    def _ask_for_skill(
        self, live: LiveTask, connection: HTTPConnection | None = None, again: str | None = None
    ) -> None:
        skills = self._visible_skills(connection)
        lines = [
            f"- {name}{f' ({cap.title})' if cap.title and cap.title != name else ''}: {cap.summary}"
            for name, cap in skills.items()
        ]
        text = (
            (
                (f"{again} " if again else "")
                + "Which skill should handle this? Reply on this task with the skill's id or name as text, "
                'or a data part {"skill": <id>}: it then works on your first message (a message with metadata '
                '{"skill": <id>} brings its own input instead). Skills:\n' + "\n".join(lines)
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
            assert message is not None  # only a follow-up answers
            return dict(_answers(message, pending))  # readable: advance read it before the replay began

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
                close_chunks(registry, live)
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
                returned: tuple[Artifact, ...] = (value,) if isinstance(value, Artifact) else tuple(value)
                capability = self._capability(record)
                if capability is None or not capability.is_async_gen:  # a generator's were sent as they came
                    finals = {a.artifact_id: i for i, a in enumerate(returned)}
                    # the chunk of each id streamed last before the return: only that one may be "sent already"
                    streamed = dict(_chunks(live).last)
                    for index, artifact in enumerate(returned):
                        sent = streamed.pop(artifact.artifact_id, None) == artifact  # type: ignore[arg-type]
                        send_chunk(
                            registry, live, artifact, last=finals[artifact.artifact_id] == index, sent=sent
                        )
                close_chunks(registry, live)
                registry.status(live, TaskState.COMPLETED, None)
                return
            close_chunks(registry, live)
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
            registry.status(live, TaskState.INPUT_REQUIRED, _question_parts(questions, asked=False))
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

    def _capability(self, record: TaskRecord) -> Capability | None:
        if record.tool:
            return self.agent.tools.get(record.tool)
        return self.agent.skills.get(record.skill) if record.skill else None

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


class _Chunks:
    """What the task's artifact chunks were (kept in ``LiveTask.face``, which A2A does not use otherwise):
    the artifacts whose last chunk has not gone out yet, and the last chunk of each, as the skill made it."""

    __slots__ = ("last", "open")

    def __init__(self) -> None:
        self.open: dict[str, None] = {}  # ordered: closed in the order they opened
        self.last: dict[str, Artifact] = {}


def _chunks(live: LiveTask) -> _Chunks:
    if not isinstance(live.face, _Chunks):
        live.face = _Chunks()
    return live.face


def _noted(live: LiveTask, artifact: Artifact, last: bool) -> None:
    chunks = _chunks(live)
    key = artifact.artifact_id
    assert key is not None  # always set (messages.py)
    chunks.last[key] = artifact
    if last:
        chunks.open.pop(key, None)
    else:
        chunks.open[key] = None


def send_chunk(
    registry: TaskRegistry,
    live: LiveTask,
    artifact: Artifact,
    *,
    last: bool | None = None,
    sent: bool = False,
) -> None:
    """One chunk of an artifact, sent once and in order (docs/a2a.md, "Artifacts in chunks"): the first of
    its ``artifact_id`` as a new artifact, every later one with ``append: true`` (whatever the skill set), the
    name and description of the first, and the metadata merged, so that what a client puts together (a2a-sdk's
    task manager, @a2a-js/sdk's) is the task's stored artifact. ``last``: whether it is the artifact's last
    chunk (a skill's returned artifacts say so by their order), else as the skill set it. ``sent``: a
    returned chunk that is the one streamed last before the return (``await ctx.artifact(a); return [a]``),
    which went out already; an equal chunk earlier in the same return is not."""
    last_chunk = artifact.last_chunk if last is None else last
    key = artifact.artifact_id
    if sent:
        if last_chunk and key in _chunks(live).open:
            close_chunks(registry, live, only=key)
        return
    stored = next((a for a in live.record.artifacts if a.get("artifactId") == key), None)
    if stored is None:
        chunk = replace(artifact, append=False, last_chunk=last_chunk)
    else:
        metadata = {**(stored.get("metadata") or {}), **(artifact.metadata or {})}
        chunk = Artifact(
            artifact.parts,
            stored.get("name"),
            stored.get("description"),
            metadata or None,
            key,
            append=True,
            last_chunk=last_chunk,
        )
    registry.artifact(live, chunk)
    _noted(live, artifact, last_chunk)


def close_chunks(registry: TaskRegistry, live: LiveTask, *, only: str | None = None) -> None:
    """The task ends: each artifact whose last chunk never went out (a stream of chunks that all said
    ``last_chunk=False``) gets a closing chunk, ``append: true, lastChunk: true`` with one empty text part,
    which adds nothing to the text a client puts together."""
    chunks = _chunks(live) if isinstance(live.face, _Chunks) else None
    if chunks is None:
        return
    for key in [only] if only is not None else list(chunks.open):
        stored = next((a for a in live.record.artifacts if a.get("artifactId") == key), None)
        chunks.open.pop(key, None)
        if stored is None:
            continue
        registry.artifact(
            live,
            Artifact(
                (Text(""),),
                stored.get("name"),
                stored.get("description"),
                None,
                key,
                append=True,
                last_chunk=True,
            ),
        )


def _word(text: str) -> str:
    return text.strip().strip("\"'`").rstrip(".!").strip().casefold()


def _with_request(record: TaskRecord, answer: dict[str, Any]) -> dict[str, Any]:
    """What a skill chosen by an answer to "which skill?" works on: the task's first message (the request
    that was made before the skill was known), and any data the answer carries besides ``skill``."""
    first = next((m for m in record.history if m.get("role") == "ROLE_USER"), answer)
    extra = []
    for part in answer.get("parts", []):
        data = part.get("data")
        if isinstance(data, dict) and isinstance(data.get("skill"), str):
            rest = {k: v for k, v in data.items() if k != "skill"}
            if rest:
                extra.append({**part, "data": rest})
    return {**first, "parts": [*first.get("parts", []), *extra]} if first is not answer else answer


def _question_parts(
    questions: Mapping[str, InputRequest], again: str | None = None, *, asked: bool = True
) -> list[dict[str, Any]]:
    """A question's status message: its text, how to answer it (a text-only client reads only text), and
    each question's schema in a data part. ``again``: why the last answer could not be read. ``asked``: a
    question the coroutine waits on (``ctx.ask``, a gate), whose answer is read as the schema says; not one
    an outcome left (``NeedsInput``, an out-of-band approval), answered by the skill's next run."""
    asks = {key: q for key, q in questions.items() if isinstance(q, Ask)}
    text = "\n".join(q.message for q in asks.values()) or "Input required."
    if len(asks) == 1:
        how = accepted_forms(next(iter(asks.values())).schema)
    else:
        how = "Reply with a data part keyed by question: " + ", ".join(asks) + "."
    if asked:  # one text part: clients that show one (ADK's "required user input") show the question whole
        text = f"{text}\n{again} {how}" if again else f"{text}\n{how}"
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
    asked: an object, or a plain value read as the question's one field), else its text; None when it
    says nothing (a file part alone), which is no answer."""
    data: dict[str, Any] = {}
    texts = []
    data_parts = False
    for part in message.get("parts", []):
        if isinstance(part.get("data"), dict):
            data_parts = True
            data.update(part["data"])
        elif isinstance(part.get("text"), str):
            texts.append(part["text"])
    if not only:
        return data.get(key)
    if data_parts:
        return data
    return "\n".join(texts) if texts else None


def _answers(message: dict[str, Any], requests: Mapping[str, InputRequest]) -> dict[str, Answer]:
    """Each question's answer in ``message`` (docs/a2a.md, "Text-only clients"); :class:`Unreadable` when
    one cannot be read, with what would be."""
    only = len(requests) == 1
    if not only and not any(isinstance(part.get("data"), dict) for part in message.get("parts", [])):
        # text cannot say which question it answers
        raise Unreadable("several questions are open: answer them in a data part keyed by question.")
    answers: dict[str, Answer] = {}
    for key, request in requests.items():
        if isinstance(request, Ask):
            try:
                payload = _payload(message, key, only)
                if payload is None and not only:
                    raise Unreadable("no answer to it in the data part.")
                answers[key] = read_answer(payload, request)
            except Unreadable as exc:
                raise Unreadable(str(exc) if only else f"{key}: {exc}") from None
    return answers


class TaskChannel(TaskChannelBase):
    """The core channel of one A2A task: progress becomes status updates, questions park the coroutine.
    It changes the task only through the registry's public calls."""

    def supports(self, capability: str) -> bool:
        return capability == "elicitation"

    async def emit(self, event: CoreEvent) -> None:
        """``ctx.say`` is a WORKING status update carrying the text; ``ctx.artifact`` (and a generator's
        artifacts) an artifact update; ``ctx.surface`` a WORKING status update of A2UI data parts, when the
        client activated the extension. Steps, reasoning, tool calls and state have no A2A form."""
        kind = type(event)
        if self.journal is not None and self._muted():
            if kind is ArtifactUpdate:  # sent before the replay: what the next chunk continues
                artifact: Artifact = event.artifact  # type: ignore[union-attr]
                self.live.streamed.add(artifact.artifact_id)  # type: ignore[arg-type]
                _noted(self.live, artifact, artifact.last_chunk)
            return
        if kind is TextDelta:
            if event.text:  # type: ignore[union-attr]
                self.registry.show(self.live)
                self.registry.status(self.live, TaskState.WORKING, [{"text": event.text}])  # type: ignore[union-attr]
        elif kind is ArtifactUpdate:
            send_chunk(self.registry, self.live, event.artifact)  # type: ignore[union-attr]
        elif kind is SurfaceUpdate and shown(self.live.messages):  # only to a client that draws A2UI
            self.registry.show(self.live)
            self.registry.status(self.live, TaskState.WORKING, surface_parts(event.messages))  # type: ignore[union-attr]

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
        again: str | None = None
        with agent.in_flight.parked(live.bytes):  # a parked task holds no in-flight slot (docs/limits.md)
            while True:
                live.answer = asyncio.get_running_loop().create_future()
                registry.status(live, TaskState.INPUT_REQUIRED, _question_parts(requests, again))
                try:
                    message = await asyncio.wait_for(live.answer, agent.timing.park_timeout_seconds)
                except TimeoutError as exc:
                    raise Permanent("No answer arrived in time; the task was stopped.") from exc
                finally:
                    live.answer = None
                try:
                    answers = _answers(message, requests)
                except Unreadable as exc:  # asked again: the task stays parked, nothing is lost
                    again = f"That answer could not be read: {exc}"
                    continue
                break
        registry.status(live, TaskState.WORKING, None)
        return answers
