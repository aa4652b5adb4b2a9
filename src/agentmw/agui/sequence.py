"""Turn core events into AG-UI events that the official client's verifier will accept, always.

The :class:`Sequencer` is the only place AG-UI events are made. It mirrors the client's sequence rules
(``verify.ts``): a run opens with ``RUN_STARTED``; contents, args and ends need an open start with the
same id; a step finishes only if open; nothing follows a run's end. Whatever is still open when the
run ends is closed first, so no invalid stream can leave the server. A reasoning message is one thought:
it ends when a step starts or finishes, a tool call starts or the assistant starts a text message, so it
never stays open across them. Each event is stamped with a millisecond timestamp and a rising sequence
number, and encoded once, with LF framing.
"""

from __future__ import annotations

import os
import time
from typing import Any

from .._transport import dumps_finite
from ..content import Text
from ..events import (
    ArtifactUpdate,
    CoreEvent,
    Progress,
    ReasoningDelta,
    StateChanged,
    StepFinished,
    StepStarted,
    SurfaceUpdate,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
)
from ..messages import part_to_json
from .surfaces import surface_snapshot

__all__ = ["PROTOCOL_VERSION", "SequenceError", "Sequencer"]


def _str(event: dict[str, Any], key: str) -> str:
    """A string field of an event this module framed (an id, a step's name); "" if a stored frame lacks it."""
    value = event.get(key)
    return value if isinstance(value, str) else ""


PROTOCOL_VERSION = "1.0"


def _encode(value: Any) -> str:
    return dumps_finite(value).decode()


class SequenceError(RuntimeError):
    """An event that would break the client's rules was about to be sent (a bug of ours)."""


def _id(prefix: str) -> str:
    return f"{prefix}-{os.urandom(8).hex()}"


class Sequencer:
    """One run's events: makes them valid, numbers them, and keeps the thread's messages up to date."""

    __slots__ = (
        "_text_parts",
        "activity_id",
        "artifacts",
        "ended",
        "error_code",
        "messages",
        "open",
        "out",
        "reasoning_id",
        "run_id",
        "seq",
        "steps",
        "text_id",
        "thread_id",
        "tools",
    )

    def __init__(
        self, thread_id: str, run_id: str, messages: list[dict[str, Any]], first_seq: int = 0
    ) -> None:
        self.thread_id = thread_id
        self.run_id = run_id
        self.seq = first_seq
        self.open = False
        self.ended = False
        self.text_id: str | None = None
        self.reasoning_id: str | None = None
        self.steps: list[str] = []
        self.tools: set[str] = set()
        self.messages = messages
        self._text_parts: list[str] = []
        self.activity_id = _id("activity")
        self.artifacts: set[str] = set()  # activity ids of the artifacts this run has shown
        self.out: list[tuple[int, bytes]] = []
        self.error_code: str | None = (
            None  # the RUN_ERROR code this run ended with (counted by the telemetry)
        )

    @classmethod
    def resumed(
        cls,
        thread_id: str,
        run_id: str,
        messages: list[dict[str, Any]],
        events: list[tuple[int, dict[str, Any]]],
    ) -> Sequencer:
        """The sequencer of a run another replica began (and died in), from the events its log holds: it goes
        on with the next sequence number, with whatever those events left open, and with the messages they
        made, so the rest of the run is valid after them."""
        made = cls(thread_id, run_id, messages)
        tool_args: dict[str, list[str]] = {}
        tool_names: dict[str, str] = {}
        for number, event in events:
            made.seq = max(made.seq, number)
            kind = event.get("type")
            if kind == "RUN_STARTED":
                made.open = True
            elif kind in ("RUN_FINISHED", "RUN_ERROR"):
                made.ended = True
            elif kind == "TEXT_MESSAGE_START":
                made.text_id, made._text_parts = _str(event, "messageId"), []
            elif kind == "TEXT_MESSAGE_CONTENT":
                made._text_parts.append(str(event.get("delta", "")))
            elif kind == "TEXT_MESSAGE_END":
                made.messages.append(
                    {"id": event.get("messageId"), "role": "assistant", "content": "".join(made._text_parts)}
                )
                made.text_id, made._text_parts = None, []
            elif kind == "REASONING_START":
                made.reasoning_id = _str(event, "messageId")
            elif kind == "REASONING_END":
                made.reasoning_id = None
            elif kind == "STEP_STARTED":
                made.steps.append(_str(event, "stepName"))
            elif kind == "STEP_FINISHED" and _str(event, "stepName") in made.steps:
                made.steps.remove(_str(event, "stepName"))
            elif kind == "TOOL_CALL_START":
                call_id = _str(event, "toolCallId")
                made.tools.add(call_id)
                tool_names[call_id], tool_args[call_id] = event.get("toolCallName", ""), []
            elif kind == "TOOL_CALL_ARGS":
                tool_args.setdefault(_str(event, "toolCallId"), []).append(str(event.get("delta", "")))
            elif kind == "TOOL_CALL_END":
                call_id = _str(event, "toolCallId")
                made.tools.discard(call_id)
                made.messages.append(
                    {
                        "id": _id("msg"),
                        "role": "assistant",
                        "toolCalls": [
                            {
                                "id": call_id,
                                "type": "function",
                                "function": {
                                    "name": tool_names.get(call_id, ""),
                                    "arguments": "".join(tool_args.get(call_id, [])),
                                },
                            }
                        ],
                    }
                )
            elif kind == "TOOL_CALL_RESULT":
                message = {
                    "id": event.get("messageId"),
                    "role": "tool",
                    "content": event.get("content"),
                    "toolCallId": event.get("toolCallId"),
                }
                if (event.get("metadata") or {}).get("isError"):
                    message["error"] = event.get("content") or "error"
                made.messages.append(message)
            elif kind == "ACTIVITY_SNAPSHOT":
                if event.get("activityType") == "progress":
                    made.activity_id = event.get("messageId") or made.activity_id
                else:
                    made.artifacts.add(_str(event, "messageId"))
        return made

    # --- encoding ----------------------------------------------------------------------------------
    def _frame(self, event: dict[str, Any]) -> None:
        if self.ended:
            raise SequenceError(f"{event['type']} after the run ended")
        if not self.open and event["type"] not in ("RUN_STARTED", "RUN_ERROR"):
            raise SequenceError(f"{event['type']} before RUN_STARTED")
        event["timestamp"] = int(time.time() * 1000)
        self.seq += 1
        self.out.append((self.seq, b"id: %d\ndata: %s\n\n" % (self.seq, dumps_finite(event))))

    def take(self) -> list[tuple[int, bytes]]:
        """The frames made since the last call, with their sequence numbers."""
        frames, self.out = self.out, []
        return frames

    # --- run lifecycle -----------------------------------------------------------------------------
    def start(self, run_input: dict[str, Any] | None = None, metadata: dict[str, Any] | None = None) -> None:
        """``metadata``: the event's own (with telemetry on: the run's trace, docs/observability.md)."""
        if self.open:
            raise SequenceError("RUN_STARTED while a run is open")
        event: dict[str, Any] = {
            "type": "RUN_STARTED",
            "threadId": self.thread_id,
            "runId": self.run_id,
            "protocolVersion": PROTOCOL_VERSION,
        }
        if run_input is not None:
            event["input"] = run_input
        if metadata:
            event["metadata"] = metadata
        self._frame(event)
        self.open = True

    def _close_all(self) -> None:
        self._end_text()
        self._end_reasoning()
        for call_id in sorted(self.tools):
            self._frame({"type": "TOOL_CALL_END", "toolCallId": call_id})
        self.tools.clear()
        while self.steps:
            self._frame({"type": "STEP_FINISHED", "stepName": self.steps.pop()})

    def finish(self, outcome: dict[str, Any] | None = None, result: Any = None) -> None:
        self._close_all()
        event: dict[str, Any] = {
            "type": "RUN_FINISHED",
            "threadId": self.thread_id,
            "runId": self.run_id,
            "outcome": outcome or {"type": "success"},
        }
        if result is not None:
            event["result"] = result
        self._frame(event)
        self.ended = True

    def interrupt(self, interrupts: list[dict[str, Any]], state: dict[str, Any]) -> None:
        self._close_all()
        self.snapshot(state)
        self.finish({"type": "interrupt", "interrupts": interrupts})

    def error(self, message: str, code: str | None = None) -> None:
        if self.ended:
            return
        event: dict[str, Any] = {"type": "RUN_ERROR", "message": message or "error"}
        if code:
            event["code"] = code
        self._frame(event)
        self.ended = True
        self.error_code = code or "ERROR"

    def snapshot(self, state: dict[str, Any]) -> None:
        self._frame({"type": "STATE_SNAPSHOT", "snapshot": state})
        self._frame({"type": "MESSAGES_SNAPSHOT", "messages": list(self.messages)})

    def state_snapshot(self, state: dict[str, Any]) -> None:
        self._frame({"type": "STATE_SNAPSHOT", "snapshot": state})

    @staticmethod
    def reconnect_snapshot(state: dict[str, Any], messages: list[dict[str, Any]]) -> list[bytes]:
        """What a reconnecting client that fell behind the kept events gets first: the thread's state and
        messages, framed without an ``id:`` (they are not events of the run, so its numbering is untouched)."""
        stamp = int(time.time() * 1000)
        return [
            b"data: %s\n\n" % dumps_finite({"type": "STATE_SNAPSHOT", "snapshot": state, "timestamp": stamp}),
            b"data: %s\n\n"
            % dumps_finite({"type": "MESSAGES_SNAPSHOT", "messages": list(messages), "timestamp": stamp}),
        ]

    # --- core events -------------------------------------------------------------------------------
    def _end_text(self) -> None:
        if self.text_id is not None:
            self._frame({"type": "TEXT_MESSAGE_END", "messageId": self.text_id})
            self.messages.append(
                {"id": self.text_id, "role": "assistant", "content": "".join(self._text_parts)}
            )
            self.text_id = None
            self._text_parts = []

    def _end_reasoning(self) -> None:
        if self.reasoning_id is not None:
            self._frame({"type": "REASONING_MESSAGE_END", "messageId": self.reasoning_id})
            self._frame({"type": "REASONING_END", "messageId": self.reasoning_id})
            self.reasoning_id = None

    def text(self, delta: str) -> None:
        if not delta:
            return
        if self.text_id is None:
            self._end_reasoning()
            self.text_id = _id("msg")
            self._frame({"type": "TEXT_MESSAGE_START", "messageId": self.text_id, "role": "assistant"})
        self._text_parts.append(delta)
        self._frame({"type": "TEXT_MESSAGE_CONTENT", "messageId": self.text_id, "delta": delta})

    def apply(self, event: CoreEvent) -> None:
        if type(event) is TextDelta:
            self.text(event.text)
        elif type(event) is StepStarted:
            if event.name not in self.steps:
                self._end_reasoning()
                self.steps.append(event.name)
                self._frame({"type": "STEP_STARTED", "stepName": event.name})
        elif type(event) is StepFinished:
            if event.name in self.steps:
                self._end_reasoning()
                self.steps.remove(event.name)
                self._frame({"type": "STEP_FINISHED", "stepName": event.name})
        elif type(event) is ReasoningDelta:
            if not event.text:
                return
            if self.reasoning_id is None:
                self.reasoning_id = _id("reasoning")
                self._frame({"type": "REASONING_START", "messageId": self.reasoning_id})
                self._frame(
                    {"type": "REASONING_MESSAGE_START", "messageId": self.reasoning_id, "role": "reasoning"}
                )
            self._frame(
                {"type": "REASONING_MESSAGE_CONTENT", "messageId": self.reasoning_id, "delta": event.text}
            )
        elif type(event) is ToolCallStarted:
            self._tool_started(event)
        elif type(event) is ToolCallFinished:
            self._tool_finished(event)
        elif type(event) is StateChanged:
            if event.patch:
                self._frame({"type": "STATE_DELTA", "delta": event.patch})
        elif type(event) is ArtifactUpdate:
            self.artifact(event.artifact)
        elif type(event) is SurfaceUpdate:
            self._frame(surface_snapshot(event))
        elif type(event) is Progress:
            content: dict[str, Any] = {"progress": event.progress}
            if event.total is not None:
                content["total"] = event.total
            if event.message:
                content["message"] = event.message
            self._frame(
                {
                    "type": "ACTIVITY_SNAPSHOT",
                    "messageId": self.activity_id,
                    "activityType": "progress",
                    "content": content,
                    "replace": True,
                }
            )

    def artifact(self, artifact: Any, *, text: bool = True, kind: str = "artifact") -> None:
        """An artifact or a chunk of one (agentmw.Artifact), or a returned Message (``kind="message"``): its
        text as assistant text, its files and data as an ``ACTIVITY_SNAPSHOT`` (``activityType`` artifact or
        message), an appended chunk's as an ``ACTIVITY_DELTA`` that adds them to the snapshot's parts."""
        if text:
            self.text(
                artifact.text
                if kind == "artifact"
                else "\n".join(p.text for p in artifact.parts if isinstance(p, Text))
            )
        others = [part_to_json(p) for p in artifact.parts if not isinstance(p, Text)]
        if not others:
            return
        activity = f"{kind}-{artifact.artifact_id if kind == 'artifact' else artifact.message_id or _id('m')}"
        if kind == "artifact" and artifact.append and activity in self.artifacts:
            self._frame(
                {
                    "type": "ACTIVITY_DELTA",
                    "messageId": activity,
                    "activityType": kind,
                    "patch": [{"op": "add", "path": "/parts/-", "value": part} for part in others],
                }
            )
            return
        content: dict[str, Any] = {"parts": others}
        for key, value in (
            ("artifactId", getattr(artifact, "artifact_id", None)),
            ("name", getattr(artifact, "name", None)),
            ("description", getattr(artifact, "description", None)),
        ):
            if value:
                content[key] = value
        self.artifacts.add(activity)
        self._frame(
            {
                "type": "ACTIVITY_SNAPSHOT",
                "messageId": activity,
                "activityType": kind,
                "content": content,
                "replace": True,
            }
        )

    def answer(self, value: Any, *, text: bool) -> None:
        """A returned Message, Artifact or list of Artifacts (messages.is_answer)."""
        from ..messages import Message

        if isinstance(value, Message):
            self.artifact(value, text=text, kind="message")
            return
        for artifact in (value,) if not isinstance(value, (list, tuple)) else value:
            self.artifact(artifact, text=text)

    def _tool_started(self, event: ToolCallStarted) -> None:
        parent = self.text_id
        self._end_text()
        self._end_reasoning()
        start: dict[str, Any] = {
            "type": "TOOL_CALL_START",
            "toolCallId": event.call_id,
            "toolCallName": event.name,
        }
        if parent:
            start["parentMessageId"] = parent
        self._frame(start)
        self.tools.add(event.call_id)
        arguments = _encode(event.arguments)
        self._frame({"type": "TOOL_CALL_ARGS", "toolCallId": event.call_id, "delta": arguments})
        self._frame({"type": "TOOL_CALL_END", "toolCallId": event.call_id})
        self.tools.discard(event.call_id)
        self.messages.append(
            {
                "id": _id("msg"),
                "role": "assistant",
                "toolCalls": [
                    {
                        "id": event.call_id,
                        "type": "function",
                        "function": {"name": event.name, "arguments": arguments},
                    }
                ],
            }
        )

    def _tool_finished(self, event: ToolCallFinished) -> None:
        message_id = _id("msg")
        self._frame(
            {
                "type": "TOOL_CALL_RESULT",
                "messageId": message_id,
                "toolCallId": event.call_id,
                "content": event.content,
                "role": "tool",
                "metadata": {"isError": event.is_error},
            }
        )
        message: dict[str, Any] = {
            "id": message_id,
            "role": "tool",
            "content": event.content,
            "toolCallId": event.call_id,
        }
        if event.is_error:
            message["error"] = event.content or "error"
        self.messages.append(message)
