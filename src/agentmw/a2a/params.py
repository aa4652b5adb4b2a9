"""Request parameters at the edge: the snake_case spellings protobuf-JSON clients send, made camelCase once.

The a2a-sdk server parses params with protobuf's ``json_format``, which takes a field by its JSON name
(``taskId``) or its proto name (``task_id``), and refuses both at once. :func:`normalise` does the same for
the 1.0 request messages, descending only into fields that are messages themselves: ``metadata`` and a data
part's ``data`` are the caller's own objects and are left exactly as sent. Answers are always camelCase.

Unlike the SDK, which drops unknown fields, an unknown ``ListTasks`` filter is ``-32602``: ignoring a filter
would answer with tasks the caller asked to leave out.
"""

from __future__ import annotations

import re
from typing import Any, Final

from .wire import INVALID_PARAMS, A2AError

__all__ = ["OPERATION_OF_METHOD", "normalise", "snake"]

# camelCase field -> the message type it holds (None: a scalar, a list of scalars, or an opaque object)
_TYPES: Final[dict[str, dict[str, str | None]]] = {
    "SendMessageRequest": {
        "tenant": None,
        "message": "Message",
        "configuration": "SendMessageConfiguration",
        "metadata": None,
    },
    "SendMessageConfiguration": {
        "acceptedOutputModes": None,
        "taskPushNotificationConfig": "TaskPushNotificationConfig",
        "historyLength": None,
        "returnImmediately": None,
    },
    "Message": {
        "messageId": None,
        "contextId": None,
        "taskId": None,
        "role": None,
        "parts": "Part",
        "metadata": None,
        "extensions": None,
        "referenceTaskIds": None,
    },
    "Part": {
        "text": None,
        "raw": None,
        "url": None,
        "data": None,
        "metadata": None,
        "filename": None,
        "mediaType": None,
    },
    "TaskPushNotificationConfig": {
        "tenant": None,
        "id": None,
        "taskId": None,
        "url": None,
        "token": None,
        "authentication": "AuthenticationInfo",
    },
    "AuthenticationInfo": {"scheme": None, "credentials": None},
    "GetTaskRequest": {"tenant": None, "id": None, "historyLength": None},
    "ListTasksRequest": {
        "tenant": None,
        "contextId": None,
        "status": None,
        "pageSize": None,
        "pageToken": None,
        "historyLength": None,
        "statusTimestampAfter": None,
        "includeArtifacts": None,
    },
    "CancelTaskRequest": {"tenant": None, "id": None, "metadata": None},
    "SubscribeToTaskRequest": {"tenant": None, "id": None},
    "GetTaskPushNotificationConfigRequest": {"tenant": None, "taskId": None, "id": None},
    "DeleteTaskPushNotificationConfigRequest": {"tenant": None, "taskId": None, "id": None},
    "ListTaskPushNotificationConfigsRequest": {
        "tenant": None,
        "taskId": None,
        "pageSize": None,
        "pageToken": None,
    },
    "GetExtendedAgentCardRequest": {"tenant": None},
}
# other spellings of a field, by type: the 0.3 / pre-1.0 name of the inline push config
_ALIASES: Final[dict[str, dict[str, str]]] = {
    "SendMessageConfiguration": {"pushNotificationConfig": "taskPushNotificationConfig"},
}
# operation (binding-neutral, as the endpoint routes them) -> request type
_REQUEST: Final = {
    "send": "SendMessageRequest",
    "stream": "SendMessageRequest",
    "get": "GetTaskRequest",
    "list": "ListTasksRequest",
    "cancel": "CancelTaskRequest",
    "subscribe": "SubscribeToTaskRequest",
    "push_create": "TaskPushNotificationConfig",
    "push_get": "GetTaskPushNotificationConfigRequest",
    "push_list": "ListTaskPushNotificationConfigsRequest",
    "push_delete": "DeleteTaskPushNotificationConfigRequest",
    "card": "GetExtendedAgentCardRequest",
}
OPERATION_OF_METHOD: Final = {
    "SendMessage": "send",
    "SendStreamingMessage": "stream",
    "GetTask": "get",
    "ListTasks": "list",
    "CancelTask": "cancel",
    "SubscribeToTask": "subscribe",
    "CreateTaskPushNotificationConfig": "push_create",
    "GetTaskPushNotificationConfig": "push_get",
    "ListTaskPushNotificationConfigs": "push_list",
    "DeleteTaskPushNotificationConfig": "push_delete",
    "GetExtendedAgentCard": "card",
}
# request types whose unknown fields are refused; elsewhere they are ignored (and kept), as the SDK does
_STRICT: Final = frozenset({"ListTasksRequest"})
_UPPER = re.compile(r"[A-Z]")


def snake(name: str) -> str:
    """``historyLength`` -> ``history_length``: the proto name of a JSON name."""
    return _UPPER.sub(lambda m: "_" + m.group(0).lower(), name)


def _spellings(type_name: str) -> dict[str, str]:
    fields = _TYPES[type_name]
    out = {name: name for name in fields}
    out.update({snake(name): name for name in fields})
    for alias, target in _ALIASES.get(type_name, {}).items():
        out[alias] = out[snake(alias)] = target
    return out


_SPELLINGS: Final = {name: _spellings(name) for name in _TYPES}


def _object(
    value: dict[str, Any], type_name: str, where: str, *, extra: frozenset[str] = frozenset()
) -> dict[str, Any]:
    spellings = _SPELLINGS[type_name]
    fields = _TYPES[type_name]
    out: dict[str, Any] = {}
    for key, item in value.items():
        name = spellings.get(key) if isinstance(key, str) else None
        if name is None:
            if type_name in _STRICT and key not in extra:
                known = ", ".join(sorted(fields))
                raise A2AError(
                    INVALID_PARAMS,
                    f"Unknown parameter {where}{key!r}; {type_name} takes {known}",
                    {"field": f"{where}{key}"},
                )
            out[key] = item  # unknown: kept as sent, for forward compatibility (the operations ignore it)
            continue
        if name in out:
            raise A2AError(
                INVALID_PARAMS,
                f"{where}{name} is given twice (as {name!r} and {key!r})",
                {"field": f"{where}{name}"},
            )
        child = fields[name]
        if child is not None:
            item = _nested(item, child, f"{where}{name}")
        out[name] = item
    return out


def _nested(item: Any, type_name: str, where: str) -> Any:
    """A message-typed field: an object, or a list of them (parts). Anything else is left for the operations to
    refuse with their own message."""
    if isinstance(item, dict):
        return _object(item, type_name, where + ".")
    if isinstance(item, list):
        return [
            _object(x, type_name, f"{where}[{i}].") if isinstance(x, dict) else x for i, x in enumerate(item)
        ]
    return item


def _camel(value: dict[str, Any], type_name: str, extra: frozenset[str] = frozenset()) -> bool:
    """Whether :func:`_object` would give back ``value`` unchanged: every known field at every level already
    in its JSON name, and no unknown field where the type refuses one. Reads, never copies."""
    spellings = _SPELLINGS[type_name]
    fields = _TYPES[type_name]
    for key, item in value.items():
        name = spellings.get(key) if isinstance(key, str) else None
        if name is None:
            if type_name in _STRICT and key not in extra:
                return False
            continue
        if name != key:
            return False
        child = fields[name]
        if child is not None:
            if isinstance(item, dict):
                if not _camel(item, child):
                    return False
            elif isinstance(item, list):
                for x in item:
                    if isinstance(x, dict) and not _camel(x, child):
                        return False
    return True


def normalise(operation: str, params: Any, *, extra: frozenset[str] = frozenset()) -> Any:
    """The params of one operation with every known field in its camelCase JSON name.

    Pure: ``params`` is not changed; when every field is in its JSON name already (what most clients send),
    ``params`` itself is returned, else a copy with the fields renamed. ``extra`` names top-level keys a
    binding adds itself (a query string's ``A2A-Version``) that a strict request type must not refuse.
    Anything that is not an object is returned as is, for the operation to refuse.
    """
    type_name = _REQUEST.get(operation)
    if type_name is None or not isinstance(params, dict):
        return params
    if _camel(params, type_name, extra):
        return params
    return _object(params, type_name, "", extra=extra)
