"""Store URLs: the forms ``Agent(store=...)``, ``$AGENTMW_STORE`` and ``open_state`` accept (``docs/state.md``).

:func:`parse_store_url` reads a URL's form alone. :func:`check_store` also asks the machine what opening it
would need (the SQLite file's folder exists and is writable, the Redis or Postgres client is installed) without creating,
opening or connecting to anything, so that an ``Agent`` whose store cannot work fails when it is built, with
the URL in the message, instead of every call failing later as an internal error.
"""

from __future__ import annotations

import importlib.util
import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Literal
from urllib.parse import parse_qs, urlencode, urlsplit, urlunsplit

from ..errors import ConfigurationError
from .base import State

__all__ = [
    "ACCEPTED",
    "DEFAULT_STORE",
    "PREFIX_PATTERN",
    "SCHEMA_PATTERN",
    "StoreURL",
    "check_store",
    "parse_store_url",
]

DEFAULT_STORE = "sqlite://agentmw.db"
"""The store of an agent that names none and runs with no ``$AGENTMW_STORE``: a file in the working directory."""

ACCEPTED = (
    "memory://, sqlite://relative/path.db, sqlite:///absolute/path.db, "
    "redis://host:port/db (also rediss://, unix:///path/to/socket), "
    "postgresql://user@host:port/database (also postgres://)"
)
PREFIX_PATTERN = re.compile(r"[A-Za-z0-9_.\-]{1,64}")
"""A Redis store's key prefix (``?prefix=name``)."""
SCHEMA_PATTERN = re.compile(r"[a-z_][a-z0-9_]{0,31}")
"""A Postgres store's schema (``?schema=name``)."""

_REDIS_SCHEMES = ("redis", "rediss", "unix")
_POSTGRES_SCHEMES = ("postgresql", "postgres")
_SYNCHRONOUS = ("FULL", "NORMAL")


@dataclass(frozen=True)
class StoreURL:
    """A store URL, read: which backend, and what it is given."""

    kind: Literal["memory", "sqlite", "redis", "postgres"]
    path: str = ""
    """The SQLite file as ``SQLiteState`` opens it: absolute, or relative to the working directory."""
    client_url: str = ""
    """The URL redis-py or asyncpg is given: the one written, without agentmw's own parameters (``prefix``;
    ``schema``, ``pool_size``, ``command_timeout``)."""
    prefix: str | None = None
    options: Mapping[str, Any] = field(default_factory=dict)
    """The backend's settings the URL gave: SQLite's ``synchronous``; Postgres's ``schema``, ``pool_size`` and
    ``command_timeout`` (the keyword arguments of ``SQLiteState`` / ``PostgresState``)."""


def parse_store_url(url: str, *, label: str = "store URL") -> StoreURL:
    """The backend ``url`` names and its settings, from the URL's form alone (nothing is looked at or opened).

    Raises :class:`~agentmw.errors.ConfigurationError` naming ``label`` and the URL (its password hidden)
    for a form agentmw does not accept: an unknown scheme, a bare path, ``sqlite:`` without ``//``, a file at
    the filesystem root, a malformed Redis address.
    """
    if url != url.strip():
        raise _refused(label, url, "the URL has spaces or a line break around it")
    try:
        parts = urlsplit(url)
    except ValueError as exc:  # an unclosed IPv6 bracket, for one
        raise _refused(label, url, f"not a URL ({exc}); use {ACCEPTED}") from None
    scheme = parts.scheme.lower()
    after = url[len(parts.scheme) + 1 :]  # what follows "scheme:"
    if scheme == "memory":
        if after != "//":
            raise _refused(label, url, "the in-memory store is written memory:// with nothing after it")
        return StoreURL("memory")
    if scheme == "sqlite":
        body, _, query = after.partition("?")
        return StoreURL(
            "sqlite", path=_sqlite_path(body, label, url), options=_sqlite_options(query, label, url)
        )
    if scheme in _REDIS_SCHEMES:
        return _redis(parts, label, url)
    if scheme in _POSTGRES_SCHEMES:
        return _postgres(parts, label, url)
    if not scheme:
        raise _refused(label, url, _unschemed(url))
    raise _refused(
        label,
        url,
        f"agentmw has no {scheme}:// store; use {ACCEPTED}, or pass an agentmw.state.State of your own",
    )


def check_store(store: Any, *, label: str = "store URL") -> None:
    """Whether ``store`` (a :class:`State`, or a URL) can be opened, checked without creating, opening or
    connecting to anything: the URL's form (:func:`parse_store_url`); for SQLite, that the file's folder
    exists and is writable and that the file, if there, is a writable file; for Redis, that redis-py is
    installed. Raises :class:`~agentmw.errors.ConfigurationError` (TypeError for a value of another type)."""
    if isinstance(store, State):
        return
    if not isinstance(store, str):
        raise TypeError(
            f"{label}: a state store is an agentmw.state.State or a URL ({ACCEPTED}), "
            f"not {type(store).__name__}"
        )
    found = parse_store_url(store, label=label)
    if found.kind == "sqlite":
        problem = _sqlite_problem(found.path)
        if problem:
            raise _refused(label, store, problem)
    elif found.kind == "redis" and not _installed("redis"):
        raise _refused(label, store, "the Redis store needs the redis package: pip install 'agentmw[redis]'")
    elif found.kind == "postgres" and not _installed("asyncpg"):
        raise _refused(
            label, store, "the Postgres store needs the asyncpg package: pip install 'agentmw[postgres]'"
        )


def _sqlite_path(after: str, label: str, url: str) -> str:
    if not after.startswith("//"):
        named = after.lstrip("/") or "agentmw.db"
        raise _refused(
            label,
            url,
            f"a SQLite URL starts with sqlite://: write sqlite://{named} for a file in the "
            f"working directory, sqlite:///var/lib/app/{named} for an absolute path",
        )
    body = after[2:]
    if "#" in body:
        raise _refused(label, url, "a SQLite URL has no fragment (#): the file's name cannot hold one")
    path = (
        "/" + body.lstrip("/") if body.startswith("/") else body
    )  # sqlite:////abs (SQLAlchemy's) is absolute too
    name = PurePosixPath(path).name
    if not name or path.endswith("/") or name in (".", ".."):
        raise _refused(
            label, url, "a SQLite URL names a file: sqlite://relative/path.db or sqlite:///absolute/path.db"
        )
    if path == ":memory:":
        raise _refused(label, url, "an in-memory SQLite database is private to one connection: use memory://")
    if path.startswith(("/./", "/../")):
        raise _refused(
            label,
            url,
            f"three slashes start an absolute path, so this names {os.path.normpath(path)} "
            f"(SQLAlchemy reads it as relative; agentmw does not): write "
            f"sqlite://{body.lstrip('/')} for a path relative to the working directory",
        )
    if path.startswith("/") and PurePosixPath(path).parent == PurePosixPath("/"):
        raise _refused(
            label,
            url,
            f"this names {path}, a file at the filesystem root: write sqlite://{name} for "
            f"{name} in the working directory, sqlite:///var/lib/app/{name} for an "
            "absolute path",
        )
    return path


def _sqlite_options(query: str, label: str, url: str) -> dict[str, Any]:
    """``?synchronous=full`` (or ``normal``, any case): the one option a SQLite URL takes."""
    if not query:
        return {}
    try:
        given = parse_qs(query, keep_blank_values=True, strict_parsing=True)
    except ValueError:
        given = {}
    unknown = sorted(set(given) - {"synchronous"})
    values = given.get("synchronous", [])
    if unknown or not given or len(values) != 1 or values[0].upper() not in _SYNCHRONOUS:
        raise _refused(
            label,
            url,
            "a SQLite URL takes no options but synchronous (?synchronous=full or ?synchronous=normal): "
            "pass agentmw.state.SQLiteState(path, ...) as the store to set the others",
        )
    return {"synchronous": values[0].upper()}


def _sqlite_problem(path: str) -> str | None:
    """What stops SQLite from creating or writing ``path`` and its ``-wal`` and ``-shm`` files, if anything."""
    file = Path(path) if os.path.isabs(path) else Path.cwd() / path
    folder = file.parent
    if not folder.exists():
        return f"the folder {folder} does not exist: create it, or name a file in another folder"
    if not folder.is_dir():
        return f"{folder} is not a folder, so it cannot hold the file {file.name}"
    if file.is_dir():
        return f"{file} is a folder: name a file in it, such as {file / 'agentmw.db'}"
    if file.exists() and not os.access(file, os.R_OK | os.W_OK):
        return f"the file {file} is not readable and writable by this process"
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"the folder {folder} is not writable by this process (SQLite writes its -wal and -shm files there)"
    return None


def _redis(parts: Any, label: str, url: str) -> StoreURL:
    try:
        parts.port  # noqa: B018 - urlsplit checks the port only when it is read
    except ValueError:
        raise _refused(label, url, "the port is a number from 0 to 65535: redis://host:6379/0") from None
    if parts.scheme.lower() == "unix":
        if not parts.path:
            raise _refused(label, url, "a unix:// URL names the socket: unix:///run/redis/redis.sock")
    else:
        if not parts.hostname:
            raise _refused(label, url, "a Redis URL names its host: redis://localhost:6379/0")
        if parts.path.strip("/") and not parts.path.strip("/").isdigit():
            raise _refused(label, url, "the Redis database is a number: redis://host:6379/0")
    query = parse_qs(parts.query, keep_blank_values=True)
    prefixes = query.pop("prefix", [])
    prefix = prefixes[-1] if prefixes else None
    if prefix is not None and not PREFIX_PATTERN.fullmatch(prefix):
        raise _refused(label, url, f"a prefix is 1-64 letters, digits, '_', '.' or '-', not {prefix!r}")
    if prefix is None:
        return StoreURL("redis", client_url=url)  # as written: urlunsplit would drop unix:///'s empty host
    return StoreURL(
        "redis", client_url=urlunsplit(parts._replace(query=urlencode(query, doseq=True))), prefix=prefix
    )


def _postgres(parts: Any, label: str, url: str) -> StoreURL:
    try:
        parts.port  # noqa: B018 - urlsplit checks the port only when it is read
    except ValueError:
        raise _refused(
            label, url, "the port is a number from 0 to 65535: postgresql://user@host:5432/database"
        ) from None
    if parts.fragment:
        raise _refused(label, url, "a Postgres URL has no fragment (#)")
    query = parse_qs(parts.query, keep_blank_values=True)
    options: dict[str, Any] = {}
    schemas = query.pop("schema", [])
    if schemas:
        if not SCHEMA_PATTERN.fullmatch(schemas[-1]):
            raise _refused(
                label,
                url,
                f"a schema is 1-32 lower-case letters, digits or '_', not starting with a digit, not {schemas[-1]!r}",
            )
        options["schema"] = schemas[-1]
    for name, kind in (("pool_size", int), ("command_timeout", float)):
        given = query.pop(name, [])
        if not given:
            continue
        try:
            value: float | None = kind(given[-1])
        except ValueError:
            value = None
        if value is None or not 0 < value < math.inf:
            what = "an integer" if kind is int else "a number of seconds"
            raise _refused(label, url, f"{name} is {what} above 0, not {given[-1]!r}")
        options[name] = value
    if not options:
        return StoreURL("postgres", client_url=url)
    return StoreURL(
        "postgres", client_url=urlunsplit(parts._replace(query=urlencode(query, doseq=True))), options=options
    )


def _unschemed(url: str) -> str:
    word = url.strip().lower().rstrip(":/")
    if word in ("memory", "sqlite", "redis", "postgres", "postgresql"):
        return f"a store URL has a scheme: did you mean {'sqlite://agentmw.db' if word == 'sqlite' else word + '://'}?"
    if not url.strip():
        return f"empty; use {ACCEPTED}"
    return (
        f"a bare path is no store URL: write sqlite://{url} for this SQLite file "
        f"({'absolute' if url.startswith('/') else 'relative to the working directory'})"
    )


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent that fails to import, or a module stubbed out with None
        return False


def _refused(label: str, url: str, problem: str) -> ConfigurationError:
    return ConfigurationError(f"{label} {_shown(url)!r}: {problem}")


_SECRET_QUERY = re.compile(r"(?i)([?&](?:password|passwd|pass)=)[^&#]*")
_SECRET_NETLOC = re.compile(r"(//[^/@:?#]*:)[^/@?#]*@")


def _shown(url: str) -> str:
    """``url`` with any password replaced (``user:***@``, ``?password=***``): the message of a refused Redis or
    Postgres URL must not carry its secret, even when the URL is malformed."""
    shown = _SECRET_QUERY.sub(r"\1***", url)
    try:
        parts = urlsplit(shown)
        password = parts.password
    except ValueError:  # not a URL urlsplit reads: hide what looks like user:password@ anyway
        return _SECRET_NETLOC.sub(r"\1***@", shown)
    if not password:
        return shown
    user = parts.username or ""
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))
