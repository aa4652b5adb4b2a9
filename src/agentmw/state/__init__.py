"""Shared state for every face and rule: records, expiring keys, logs and a bus (``docs/state.md``).

``open_state`` turns a URL into a store: ``memory://``, ``sqlite:///absolute/path.db`` (or
``sqlite://relative/path.db``), ``redis://host:port/db`` (``?prefix=name`` sets the key prefix; the
``agentmw[redis]`` extra). Nothing is imported from redis until a Redis store is made.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlencode, urlsplit, urlunsplit

from .base import (ANY, DEFAULT_LIMITS, Conflict, Encoded, Item, Json, Limits, Page, State, Subscription, Versioned,
                   encode, encoded, encoded_bytes)
from .memory import MemoryState
from .sqlite import SQLiteState

if TYPE_CHECKING:
    from .redis import RedisState

__all__ = ["ANY", "DEFAULT_LIMITS", "Conflict", "Encoded", "Item", "Json", "Limits", "MemoryState", "Page",
           "RedisState", "SQLiteState", "State", "Subscription", "Versioned", "encode", "encoded", "encoded_bytes",
           "open_state", "resolve_state"]


def resolve_state(source: Any) -> State:
    """The state a component was given: a :class:`State`, a factory of one (``lambda: agent.state``, so the
    agent's store opens only when first needed), or None for a private in-memory state."""
    if source is None:
        return MemoryState()
    if isinstance(source, State):
        return source
    return source()


def open_state(target: str | State, **options: Any) -> State:
    """A store from a URL, or ``target`` itself when it is one already.

    ``options`` go to the backend's constructor (``limits=``, ``default=``, ``poll=``...). Raises ValueError
    for a scheme it does not know.
    """
    if isinstance(target, State):
        return target
    if not isinstance(target, str):
        raise TypeError(f"a state store is a State or a URL, not {type(target).__name__}")
    parts = urlsplit(target)
    scheme = parts.scheme.lower()
    if scheme == "memory":
        return MemoryState(**options)
    if scheme == "sqlite":
        path = parts.path if not parts.netloc else parts.netloc + parts.path
        if not path or path == "/":
            raise ValueError(f"a SQLite URL names a file: sqlite:///absolute/path.db or sqlite://relative.db, "
                             f"not {target!r}")
        return SQLiteState(path, **options)
    if scheme in ("redis", "rediss", "unix"):
        from .redis import RedisState

        query = parse_qs(parts.query, keep_blank_values=True)
        prefix = query.pop("prefix", [None])[-1]
        if prefix is not None:
            options.setdefault("prefix", prefix)
        url = urlunsplit(parts._replace(query=urlencode(query, doseq=True)))
        return RedisState(url, **options)
    raise ValueError(f"unknown state URL {target!r}: use memory://, sqlite:///path or redis://host:port/db")


def __getattr__(name: str) -> Any:
    if name == "RedisState":  # imported on first use, so that redis stays optional
        from .redis import RedisState

        return RedisState
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
