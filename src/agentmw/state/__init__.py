"""Shared state for every face and rule: records, expiring keys, logs and a bus (``docs/state.md``).

``open_state`` turns a URL into a store: ``memory://``, ``sqlite:///absolute/path.db`` (or
``sqlite://relative/path.db``), ``redis://host:port/db`` (``?prefix=name`` sets the key prefix; the
``agentmw[redis]`` extra), ``postgresql://user@host/database`` (``?schema=name``; the ``agentmw[postgres]``
extra); ``check_store`` tells whether one can be opened, opening nothing (``urls.py``). Nothing is imported
from redis or asyncpg until such a store is made.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .base import (
    ANY,
    DEFAULT_LIMITS,
    Conflict,
    Encoded,
    Item,
    Json,
    Page,
    State,
    StoreLimits,
    Subscription,
    Versioned,
    encode,
    encoded,
    encoded_bytes,
)
from .memory import MemoryState
from .sqlite import SQLiteState
from .urls import DEFAULT_STORE, StoreURL, check_store, parse_store_url

if TYPE_CHECKING:
    from .postgres import PostgresState
    from .redis import RedisState


__all__ = [
    "ANY",
    "DEFAULT_LIMITS",
    "DEFAULT_STORE",
    "Conflict",
    "Encoded",
    "Item",
    "Json",
    "MemoryState",
    "Page",
    "PostgresState",
    "RedisState",
    "SQLiteState",
    "State",
    "StoreLimits",
    "StoreURL",
    "Subscription",
    "Versioned",
    "check_store",
    "encode",
    "encoded",
    "encoded_bytes",
    "open_state",
    "parse_store_url",
    "resolve_state",
]


def resolve_state(source: State | Callable[[], State] | None) -> State:
    """The state a component was given: a :class:`State`, a factory of one (``lambda: agent.state``, so the
    agent's store opens only when first needed), or None for a private in-memory state."""
    if source is None:
        return MemoryState()
    if isinstance(source, State):
        return source
    return source()


def open_state(target: str | State, **options: Any) -> State:
    """A store from a URL, or ``target`` itself when it is one already.

    ``options`` go to the backend's constructor (``limits=``, ``default=``, ``poll=``...). Raises
    :class:`~agentmw.errors.ConfigurationError` (a ValueError) for a URL of a form it does not accept
    (:func:`agentmw.state.urls.parse_store_url`); :func:`~agentmw.state.urls.check_store` also checks what
    opening it needs, without opening it.
    """
    if isinstance(target, State):
        return target
    if not isinstance(target, str):
        raise TypeError(f"a state store is a State or a URL, not {type(target).__name__}")
    found = parse_store_url(target)
    if found.kind == "memory":
        return MemoryState(**options)
    if found.kind == "sqlite":
        return SQLiteState(found.path, **{**found.options, **options})
    if found.kind == "postgres":
        from .postgres import PostgresState

        return PostgresState(found.client_url, **{**found.options, **options})
    from .redis import RedisState

    if found.prefix is not None:
        options.setdefault("prefix", found.prefix)
    return RedisState(found.client_url, **options)


def __getattr__(name: str) -> Any:
    if name == "RedisState":  # imported on first use, so that redis stays optional
        from .redis import RedisState

        return RedisState
    if name == "PostgresState":  # and so does asyncpg
        from .postgres import PostgresState

        return PostgresState
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
