"""Roots: a path parameter must name something inside the allowed roots, checked before the function runs.

Declare the parameter as :data:`RootedPath`; the function receives the normalized, absolute, symlink-
resolved path. The allowed roots are the server's (``Agent(roots=[...])``) intersected with the
client's, when the client has roots (MCP ``roots/list``); a server with no roots allows no paths.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated
from urllib.parse import unquote, urlsplit

__all__ = ["RootedPath", "PathParameter", "RootViolation", "resolve_in_roots", "roots_from_uris", "intersect"]


class PathParameter:
    """Marks a ``str`` parameter as a filesystem path that must stay inside the roots."""

    def __repr__(self) -> str:
        return "PathParameter()"


RootedPath = Annotated[str, PathParameter()]


class RootViolation(ValueError):
    """The path is malformed or falls outside every allowed root."""


def _real(path: str | Path) -> str:
    return os.path.realpath(os.fspath(path))


def _key(path: str, case_insensitive: bool) -> str:
    normalized = os.path.normcase(path)
    return normalized.casefold() if case_insensitive else normalized


def _inside(path: str, root: str, case_insensitive: bool) -> bool:
    path_key, root_key = _key(path, case_insensitive), _key(root, case_insensitive)
    return path_key == root_key or path_key.startswith(root_key.rstrip(os.sep) + os.sep)


def roots_from_uris(uris: Sequence[str]) -> list[str]:
    """Client roots (``file://`` URIs) as real directory paths; other schemes are ignored."""
    found = []
    for uri in uris:
        parts = urlsplit(uri)
        if parts.scheme == "file" and parts.path:
            found.append(_real(unquote(parts.path)))
    return found


def intersect(server: Sequence[str], client: Sequence[str] | None, case_insensitive: bool = False) -> list[str]:
    """The roots both sides allow: each the narrower of an overlapping pair."""
    server_real = [_real(r) for r in server]
    if client is None:
        return server_real
    allowed = []
    for s in server_real:
        for c in client:
            if _inside(c, s, case_insensitive):
                allowed.append(c)
            elif _inside(s, c, case_insensitive):
                allowed.append(s)
    return list(dict.fromkeys(allowed))


def resolve_in_roots(raw: object, roots: Sequence[str], *, base: str | None = None,
                     case_insensitive: bool = False) -> str:
    """The real absolute path ``raw`` names, if it is inside one of ``roots``; RootViolation otherwise.

    Handles NUL bytes, percent-encoding (decoded until stable, so ``%252e`` cannot hide ``..``),
    backslashes (refused: they are separators on Windows and traversal in disguise elsewhere), ``..``,
    absolute paths, symlinks (resolved before the check) and case-insensitive file systems. A
    relative path is taken relative to the first root.
    """
    if not isinstance(raw, str) or not raw:
        raise RootViolation("the path must be a non-empty string")
    text = raw
    for _ in range(5):
        decoded = unquote(text)
        if decoded == text:
            break
        text = decoded
    else:
        raise RootViolation("the path is percent-encoded too many times")
    if "\x00" in text:
        raise RootViolation("the path contains a NUL byte")
    if "\\" in text:
        raise RootViolation("the path contains a backslash; use '/' as the separator")
    if any(ord(ch) < 32 for ch in text):
        raise RootViolation("the path contains control characters")
    if not roots:
        raise RootViolation("no roots are allowed here, so no path is")
    candidate = text if os.path.isabs(text) else os.path.join(base or roots[0], text)
    real = _real(candidate)
    for root in roots:
        if _inside(real, root, case_insensitive):
            return real
    raise RootViolation(f"{raw!r} is outside the allowed roots")
