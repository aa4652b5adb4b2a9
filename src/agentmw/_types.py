"""Type aliases shared by the core and the faces."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any, TypeAlias

__all__ = ["JSON", "ASGIApp", "JSONObject", "Message", "Receive", "Scope", "Send"]

JSON: TypeAlias = Any
JSONObject: TypeAlias = dict[str, Any]

Scope: TypeAlias = MutableMapping[str, Any]
Message: TypeAlias = MutableMapping[str, Any]
Receive: TypeAlias = Callable[[], Awaitable[Message]]
Send: TypeAlias = Callable[[Message], Awaitable[None]]
ASGIApp: TypeAlias = Callable[[Scope, Receive, Send], Awaitable[None]]
