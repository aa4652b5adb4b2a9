"""The A2A operations, binding-neutral: JSON-RPC and HTTP+JSON both call these with 1.0-shaped params."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any

from starlette.requests import HTTPConnection

from ..a2ui import EXTENSION_URI
from .push import PushSender, push_config, with_config
from .registry import A2AHost
from .surfaces import declares_a2ui, requested, without_surfaces
from .tasks import A2ATaskManager, Stream, snapshot, task_dict
from .wire import (
    INVALID_PARAMS,
    PUSH_NOT_SUPPORTED,
    TASK_NOT_FOUND,
    UNSUPPORTED_OPERATION,
    A2AError,
    validate_message,
)

__all__ = ["Caller", "Operations"]


class Caller:
    """Who is asking, over which connection."""

    __slots__ = ("connection", "identity")

    def __init__(self, identity: str, connection: HTTPConnection) -> None:
        self.identity = identity
        self.connection = connection


def _int(value: Any, name: str, *, low: int, high: int, default: int | None) -> int | None:
    """An integer parameter from JSON or a query string; 1.5, "1e3", booleans and overflowing values are refused."""
    if value is None or value == "":
        return default
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise A2AError(INVALID_PARAMS, f"{name} must be an integer")
    try:
        number = int(value)
    except ValueError as exc:
        raise A2AError(INVALID_PARAMS, f"{name} must be an integer") from exc
    if not low <= number <= high:
        raise A2AError(INVALID_PARAMS, f"{name} must be between {low} and {high}")
    return number


def _configuration(value: Any) -> dict[str, Any]:
    """SendMessage's ``configuration``, every field checked (the push config by the caller): a copy whose
    ``historyLength`` is the checked integer. Runs before the task does, so a bad one never runs a skill."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise A2AError(INVALID_PARAMS, "configuration must be an object")
    out = dict(value)
    out["historyLength"] = _int(
        value.get("historyLength"), "configuration.historyLength", low=0, high=10_000, default=None
    )
    if value.get("returnImmediately") is not None and not isinstance(value["returnImmediately"], bool):
        raise A2AError(INVALID_PARAMS, "configuration.returnImmediately must be a boolean")
    modes = value.get("acceptedOutputModes")
    if modes is not None and not (isinstance(modes, list) and all(isinstance(m, str) for m in modes)):
        raise A2AError(INVALID_PARAMS, "configuration.acceptedOutputModes must be a list of media types")
    return out


def _config_id(params: dict[str, Any]) -> str:
    value = params.get("id")
    if not isinstance(value, str) or not value:
        raise A2AError(INVALID_PARAMS, "id is required: the push notification config's id", {"field": "id"})
    return value


def _task_id(params: dict[str, Any], key: str) -> str:
    """The task id param, required: named as the method's spec names it (``id`` on GetTask, CancelTask and
    SubscribeToTask, ``taskId`` on the push-config methods)."""
    value = params.get(key)
    if not isinstance(value, str) or not value:
        what = "the task's id" if key == "id" else "the id of the task"
        raise A2AError(INVALID_PARAMS, f"{key} is required: {what}, a non-empty string", {"field": key})
    return value


def _as_read(task: dict[str, Any], caller: Caller) -> dict[str, Any]:
    """A task read by a request: its A2UI parts only when this request activates the extension (a task's
    activation is its conversation's; a read can come from any client of the same caller)."""
    return task if requested(caller.connection.scope) else without_surfaces(task)


class Operations:
    def __init__(self, agent: A2AHost) -> None:
        self.agent = agent
        settings = agent.a2a
        state = agent.state
        self.tasks = A2ATaskManager(agent, state)
        self.push = (
            PushSender(state, settings.push, self.tasks.registry.replica)
            if settings.push is not None
            else None
        )
        self.tasks.push = self.tasks.registry.push = self.push
        if self.push is not None:
            self.push.registry = self.tasks.registry
            self.push.agent = agent

    # --- messages --------------------------------------------------------------------------------
    async def _start(
        self, params: dict[str, Any], caller: Caller, *, follow: bool
    ) -> tuple[Any, Any, dict[str, Any]]:
        message = validate_message(params.get("message"))
        if requested(caller.connection.scope) and declares_a2ui(self.agent):
            # activated by the header: kept in the message, so a follow-up or another replica knows it
            extensions = message.get("extensions")
            listed = [e for e in extensions if isinstance(e, str)] if isinstance(extensions, list) else []
            if EXTENSION_URI not in listed:
                message = {**message, "extensions": [*listed, EXTENSION_URI]}
        configuration = _configuration(params.get("configuration"))  # all of it checked before any skill runs
        push = configuration.get("taskPushNotificationConfig")
        if push is not None:
            push = await self._push_config(push, None)
        metadata = params.get("metadata")
        if metadata is not None and not isinstance(metadata, dict):
            raise A2AError(INVALID_PARAMS, "metadata must be an object")
        live, waiting = await self.tasks.send(
            message,
            caller.identity,
            caller.connection,
            metadata,
            push,
            follow=follow,
            immediate=configuration.get("returnImmediately") is True,
        )
        return live, waiting, configuration

    async def send_message(self, params: dict[str, Any], caller: Caller) -> dict[str, Any]:
        live, waiter, configuration = await self._start(params, caller, follow=False)
        if configuration.get("returnImmediately") is True:
            if waiter in live.settle_waiters:
                live.settle_waiters.remove(waiter)
        else:
            await self.tasks.settled(live, waiter)
        if live.reply is not None:  # the skill answered with a message and no task (docs/a2a.md)
            return {"message": live.reply}
        return {"task": task_dict(live.record, configuration.get("historyLength"))}  # checked in _start

    async def stream_message(self, params: dict[str, Any], caller: Caller) -> AsyncIterator[dict[str, Any]]:
        live, queue, _ = await self._start(params, caller, follow=True)
        return self._stream(live, queue, stop_on_interrupt=True)

    async def _stream(
        self, live: Any, queue: Stream, *, stop_on_interrupt: bool
    ) -> AsyncIterator[dict[str, Any]]:
        """The task as it was when the stream began, then exactly the changes after it. A quiet task's
        (its skill may answer with a message and no task) waits for what comes next: a message alone, or
        the task and then what it shows."""
        held = queue.hold
        if not held:
            yield {"task": queue.first}
        async for event in self.tasks.events(live, queue, stop_on_interrupt=stop_on_interrupt):
            if held:
                if "message" in event:  # a message-only reply: that one event, then the stream ends
                    yield event
                    return
                yield {"task": queue.first}  # the task as the stream began, now that it is one
                held = False
            yield event

    # --- tasks -----------------------------------------------------------------------------------
    async def get_task(self, params: dict[str, Any], caller: Caller) -> dict[str, Any]:
        task_id = _task_id(params, "id")  # GetTaskRequest.id in the spec
        history = _int(params.get("historyLength"), "historyLength", low=0, high=10_000, default=None)
        record = await self.tasks.get(task_id, caller.identity)
        return _as_read(task_dict(record, history), caller)

    async def list_tasks(self, params: dict[str, Any], caller: Caller) -> dict[str, Any]:
        size = _int(params.get("pageSize"), "pageSize", low=1, high=100, default=50)
        offset = _int(params.get("pageToken"), "pageToken", low=0, high=10**9, default=0)
        history = _int(params.get("historyLength"), "historyLength", low=0, high=10_000, default=0)
        after = params.get("statusTimestampAfter")
        after_ts = None
        if after:
            try:
                after_ts = datetime.fromisoformat(str(after)).timestamp()  # "Z" is read as UTC (3.11)
            except ValueError as exc:
                raise A2AError(INVALID_PARAMS, "statusTimestampAfter must be an ISO-8601 timestamp") from exc
        state = params.get("status")
        if state is not None and not (isinstance(state, str) and state.startswith("TASK_STATE_")):
            raise A2AError(INVALID_PARAMS, "status must be a TASK_STATE_* value")
        context_id = params.get("contextId")
        if context_id is not None and not isinstance(context_id, str):
            raise A2AError(INVALID_PARAMS, "contextId must be a string")
        if params.get("includeArtifacts") is not None and not isinstance(params["includeArtifacts"], bool):
            raise A2AError(INVALID_PARAMS, "includeArtifacts must be a boolean")
        records, total = await self.tasks.page(
            caller.identity,
            context_id=context_id or None,
            state=state,
            after=after_ts,
            size=size or 50,
            offset=offset or 0,
        )
        include = params.get("includeArtifacts") is True
        next_offset = (offset or 0) + len(records)
        return {
            "tasks": [_as_read(task_dict(r, history, include_artifacts=include), caller) for r in records],
            "nextPageToken": str(next_offset) if next_offset < total else "",
            "pageSize": size,
            "totalSize": total,
        }

    async def cancel_task(self, params: dict[str, Any], caller: Caller) -> dict[str, Any]:
        record = await self.tasks.cancel(_task_id(params, "id"), caller.identity)  # CancelTaskRequest.id
        return _as_read(task_dict(record), caller)

    async def subscribe(self, params: dict[str, Any], caller: Caller) -> AsyncIterator[dict[str, Any]]:
        record = await self.tasks.get(_task_id(params, "id"), caller.identity)  # SubscribeToTaskRequest.id
        if record.terminal:
            raise A2AError(
                UNSUPPORTED_OPERATION,
                f"Task {record.id} is {record.state}; there is nothing to follow",
                {"taskId": record.id},
            )
        live = self.tasks.live.get(record.id)
        if live is not None:  # held here: its events from memory, after the task as it is now
            queue = self.tasks.subscribe(live)
            if live.quiet and live.holds():
                # a follower knows it as a task now: it stays one (a Message it returns is its final status)
                self.tasks.registry.show(live)
            return self._stream(live, queue, stop_on_interrupt=False)
        return self._follow(record)  # held elsewhere (or by nobody yet): from the state's log

    async def _follow(self, record: Any) -> AsyncIterator[dict[str, Any]]:
        yield {"task": snapshot(record)}
        events = self.tasks.follow(record)
        try:
            async for event in events:
                yield event
        finally:
            await events.aclose()  # type: ignore[attr-defined]

    # --- push configs ----------------------------------------------------------------------------
    async def _push_config(self, config: Any, task_id: str | None) -> dict[str, Any]:
        if self.push is None:
            raise A2AError(PUSH_NOT_SUPPORTED, "This agent does not send push notifications")
        return await push_config(config, task_id, self.push.policy)  # the URL resolved off the loop (push.py)

    async def _owned_task(self, task_id: Any, caller: Caller) -> str:
        if self.push is None:
            raise A2AError(PUSH_NOT_SUPPORTED, "This agent does not send push notifications")
        return (await self.tasks.get(_task_id({"taskId": task_id}, "taskId"), caller.identity)).id

    async def create_push(self, params: dict[str, Any], caller: Caller) -> dict[str, Any]:
        task_id = await self._owned_task(params.get("taskId"), caller)
        config = await self._push_config(params, task_id)
        if not params.get("id"):
            config["id"] = task_id  # as the SDK does, so a second create replaces the first
        registry = self.tasks.registry
        record = await registry.find(task_id)
        start = record.log_id if record is not None else 0  # pushes start with the events after this

        def put(value: dict[str, Any]) -> dict[str, Any]:
            configs = with_config(value.get("configs", []), config, self.push.policy)  # type: ignore[union-attr]
            fresh = not value.get("configs") and not value.get("delivered")
            return {
                **value,
                "configs": configs,
                "done": bool(record and record.terminal),
                "delivered": start if fresh else value.get("delivered", 0),
            }

        await registry.update_push(task_id, put)
        live = registry.local(task_id)
        if live is not None:
            live.has_push = True
            registry.publish(live)
        self.push.watch(task_id)  # type: ignore[union-attr]  # _owned_task checked push is on
        return config

    async def get_push(self, params: dict[str, Any], caller: Caller) -> dict[str, Any]:
        task_id = await self._owned_task(params.get("taskId"), caller)
        wanted = _config_id(params)
        config = next(
            (c for c in await self.tasks.registry.push_configs(task_id) if c.get("id") == wanted), None
        )
        if config is None:
            raise A2AError(
                TASK_NOT_FOUND, f"No push notification config {params.get('id')!r} on task {task_id}"
            )
        return config

    async def list_push(self, params: dict[str, Any], caller: Caller) -> dict[str, Any]:
        task_id = await self._owned_task(params.get("taskId"), caller)
        return {"configs": await self.tasks.registry.push_configs(task_id), "nextPageToken": ""}

    async def delete_push(self, params: dict[str, Any], caller: Caller) -> dict[str, Any]:
        task_id = await self._owned_task(params.get("taskId"), caller)
        wanted = _config_id(params)

        def drop(value: dict[str, Any]) -> dict[str, Any] | None:
            configs = value.get("configs", [])
            kept = [c for c in configs if c.get("id") != wanted]
            return None if len(kept) == len(configs) else {**value, "configs": kept}

        await self.tasks.registry.update_push(task_id, drop)
        return {}
