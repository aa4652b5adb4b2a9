"""Roots: a path parameter must name something inside the allowed roots, checked before the function runs.

Declare the parameter as :data:`RootedPath`; the function receives the normalized, absolute, symlink-
resolved path. The allowed roots are the server's (``Agent(roots=[...])``) intersected with the
client's, when the client has roots (MCP ``roots/list``); a server with no roots allows no paths.

A path is one string that many layers read: this module, the OS (POSIX or Windows), shells, URI parsers,
Unicode normalisers. Any form that some of those layers would read differently from a literal POSIX
path is refused with the rule it broke, instead of being read literally (``docs/safety.md``, "Path
rules"). The only URI accepted is a local ``file://`` URI, checked as the path it names.
"""

from __future__ import annotations

import errno
import functools
import os
import re
import unicodedata
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated
from urllib.parse import unquote_to_bytes, urlsplit

from ..errors import SafetyViolation

__all__ = [
    "PathParameter",
    "RootViolation",
    "RootedPath",
    "intersect",
    "resolve_in_roots",
    "resolve_parameters",
    "roots_from_uris",
]


class PathParameter:
    """Marks a ``str`` parameter as a filesystem path that must stay inside the roots."""

    def __repr__(self) -> str:
        return "PathParameter()"


RootedPath = Annotated[str, PathParameter()]


class RootViolation(SafetyViolation):
    """The path is malformed, ambiguous or falls outside every allowed root; ``parameter`` names the parameter
    whose path it was, when :func:`resolve_parameters` checked it."""

    parameter: str | None = None


# --- the rules, compiled once ------------------------------------------------------------------------------

#: Plain ASCII names that need no decoding and no Unicode checks: the hot path.
_PLAIN = re.compile(r"[A-Za-z0-9._\-/ +=,@]+\Z")
#: A URI scheme: a letter, then one or more scheme characters, then ':' (one letter is a drive, below).
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]+):")
#: A Windows drive: ``C:``, ``C:\x``, ``C:x``, ``c:/x``; and ``/C:/x``, the path of ``file:///C:/x``.
_DRIVE = re.compile(r"/?([A-Za-z]):")
#: A drive in a file URI's path, including the legacy ``C|`` form.
_URI_DRIVE = re.compile(r"/[A-Za-z](?:[:|]|%3[aA]|%7[cC])(?:/|$)")
#: Two separators first: UNC (``\\server\share``, ``//server/share``) and the device namespaces.
_UNC = re.compile(r"[/\\]{2}")
_DEVICE_NAMESPACE = re.compile(r"[/\\]{2}[?.][/\\]|\\\?\?\\")
#: Windows device names, in any component, any case, with any extension or trailing spaces.
_DEVICE = re.compile(
    r"(?:^|/)(con|prn|aux|nul|com[0-9¹²³]|lpt[0-9¹²³]|conin\$|conout\$|clock\$)"
    r" *(?:\.[^/]*)?(?:/|$)",
    re.IGNORECASE,
)
#: Windows 8.3 short names (``PROGRA~1``, ``SECRET~1.TXT``) name some other, longer file there.
_SHORT_NAME = re.compile(r"(?:^|/)[^/.~]{1,6}~[0-9]{1,6}(?:\.[^/.]{0,3})?(?:/|$)")
#: Environment-variable forms that shells and Windows expand: ``$HOME``, ``${HOME}``, ``$(cmd)``, ``%TEMP%``.
_ENV = re.compile(r"\$[A-Za-z_{(]|%[A-Za-z_][A-Za-z0-9_()]*%")
_ASCII_CONTROL = re.compile(r"[\x01-\x1f\x7f]")
#: IIS's non-standard ``%uXXXX`` escape (``%u2215`` is a division slash, ``%u002f`` a '/'): no decoder here reads
#: it, some servers and filters do, so it is refused rather than kept as four literal characters.
_PERCENT_U = re.compile(r"%[uU][0-9A-Fa-f]{4}")
#: A name that ends in a dot or a space: Windows drops those (``secret.`` and ``secret `` open ``secret``).
_TRAILING = re.compile(r"(?:^|/)([^/]*[. ])(?=/|\Z)")

#: The ASCII characters these rules give a meaning to; a non-ASCII lookalike of one is refused.
_MEANINGFUL = frozenset("./\\:~%")
#: Lookalikes NFKC leaves alone, and what each imitates (the NFKC ones are found by ``_char_problem``).
_CONFUSABLES = {
    "\u2215": "/",  # DIVISION SLASH
    "\u2044": "/",  # FRACTION SLASH
    "\u29f8": "/",  # BIG SOLIDUS
    "\u2571": "/",  # BOX DRAWINGS LIGHT DIAGONAL UPPER RIGHT TO LOWER LEFT
    "\u27cb": "/",  # MATHEMATICAL RISING DIAGONAL
    "\u3033": "/",  # VERTICAL KANA REPEAT MARK UPPER HALF
    "\u1735": "/",  # PHILIPPINE SINGLE PUNCTUATION
    "\u0337": "/",  # COMBINING SHORT SOLIDUS OVERLAY
    "\u0338": "/",  # COMBINING LONG SOLIDUS OVERLAY
    "\u20e5": "\\",  # COMBINING REVERSE SOLIDUS OVERLAY
    "\u29f9": "\\",  # BIG REVERSE SOLIDUS
    "\u2216": "\\",  # SET MINUS
    "\u2572": "\\",  # BOX DRAWINGS LIGHT DIAGONAL UPPER LEFT TO LOWER RIGHT
    "\u27cd": "\\",  # MATHEMATICAL FALLING DIAGONAL
    "\u00a5": "\\",  # YEN SIGN: a backslash under Windows' Japanese code page ("best fit")
    "\u20a9": "\\",  # WON SIGN: a backslash under Windows' Korean code page
    "\u2219": ".",  # BULLET OPERATOR
    "\u0701": ".",  # SYRIAC SUPRALINEAR FULL STOP
    "\u0702": ".",  # SYRIAC SUBLINEAR FULL STOP
    "\ua60e": ".",  # VAI FULL STOP
    "\u2236": ":",  # RATIO
    "\u02d0": ":",  # MODIFIER LETTER TRIANGULAR COLON
    "\ua789": ":",  # MODIFIER LETTER COLON
    "\u223c": "~",  # TILDE OPERATOR
    "\u2053": "~",  # SWUNG DASH
    "\u2052": "%",  # COMMERCIAL MINUS SIGN
}
_LOOKALIKE_RULE = "lookalikes of '.', '/', '\\', ':', '~' and '%' are refused"
_BIDI = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


@functools.lru_cache(maxsize=4096)
def _char_problem(ch: str) -> str | None:
    """Why one non-ASCII character may not appear in a path, or None."""
    code = f"U+{ord(ch):04X}"
    name = unicodedata.name(ch, "")
    label = f"{code} ({name})" if name else code
    if ch in _CONFUSABLES:
        return f"it contains {label}, a lookalike of {_CONFUSABLES[ch]!r}; {_LOOKALIKE_RULE}"
    category = unicodedata.category(ch)
    if category == "Cc":
        return "the path contains control characters"
    if ch in _BIDI:
        return f"it contains {label}, a bidirectional control that reorders how the path is displayed"
    if category in ("Cf", "Zl", "Zp"):
        return f"it contains {label}, an invisible formatting or separator character"
    if category == "Cs":
        return "it contains a lone surrogate, which is not valid Unicode"
    if ch == "\ufffd" or 0xFDD0 <= ord(ch) <= 0xFDEF or (ord(ch) & 0xFFFE) == 0xFFFE:
        return f"it contains {label}, a replacement or non-character: the path was mis-decoded somewhere"
    normalized = unicodedata.normalize("NFKC", ch)
    if _MEANINGFUL.intersection(normalized):
        return f"it contains {label}, which normalises (NFKC) to {normalized!r}; {_LOOKALIKE_RULE}"
    return None


def _decode(text: str) -> str:
    """Percent-decode until stable, as UTF-8, strictly: overlong and stray bytes are refused, not replaced."""
    for _ in range(5):
        if "%" not in text:
            return text
        try:
            decoded = unquote_to_bytes(text).decode("utf-8")
        except UnicodeDecodeError:
            raise RootViolation(
                "it is not valid UTF-8 after percent-decoding (overlong or stray bytes such as "
                "%c0%ae or %ff are refused, not read as other characters)"
            ) from None
        if decoded == text:
            return text
        text = decoded
    raise RootViolation("the path is percent-encoded too many times")


def _from_file_uri(raw: str) -> str:
    """The (still percent-encoded) absolute path a local ``file:`` URI names."""
    if "\x00" in raw or _ASCII_CONTROL.search(raw):  # urlsplit would quietly drop tabs and newlines
        raise RootViolation("the path contains control characters")
    try:
        parts = urlsplit(raw)
    except ValueError:
        raise RootViolation("it is not a well-formed file:// URI") from None
    host = parts.netloc
    if host and host.lower() != "localhost":
        raise RootViolation(
            f"a file:// URI must name a local path, but its host is {host!r} "
            "(only an empty host or 'localhost' is accepted)"
        )
    if parts.query or parts.fragment or raw.endswith(("?", "#")):
        raise RootViolation("a file:// URI with a query or fragment ('?', '#') is ambiguous")
    if not parts.path.startswith("/"):
        raise RootViolation("a file: URI must name an absolute path (file:///...)")
    if re.search(r"%(?:2[fF]|5[cC])", parts.path):
        raise RootViolation("a file:// URI has an encoded separator (%2F or %5C) inside a name")
    if "\\" in parts.path:
        raise RootViolation("a file:// URI contains a backslash")
    if _URI_DRIVE.match(parts.path):
        raise RootViolation(
            "it is a Windows drive path in a file:// URI (file:///C:/ or file:///C|/); "
            "drive letters are refused"
        )
    return parts.path


def _check_form(text: str, from_uri: bool) -> None:
    """Refuse the forms other layers read differently; ``text`` is decoded."""
    if "\x00" in text:
        raise RootViolation("the path contains a NUL byte")
    if not text.isascii():
        previous = "/"
        for ch in text:
            if not ch.isascii():
                problem = _char_problem(ch)
                if problem:
                    raise RootViolation(problem)
                if previous in "./\\" and unicodedata.category(ch).startswith("M"):
                    raise RootViolation(
                        f"it contains a combining mark (U+{ord(ch):04X}) on '.', '/' or the start "
                        "of a name, which hides what the name is"
                    )
            previous = ch
    if _ASCII_CONTROL.search(text):
        raise RootViolation("the path contains control characters")
    if _DEVICE_NAMESPACE.match(text):
        raise RootViolation(
            "it is a Windows device-namespace path (\\\\?\\, \\\\.\\, \\??\\); these are refused"
        )
    if _UNC.match(text):
        raise RootViolation(
            "it starts with two separators: a UNC or network path (\\\\server\\share, "
            "//server/share); these are refused"
        )
    drive = _DRIVE.match(text)
    if drive and (from_uri or not text.startswith("/")):
        raise RootViolation(f"it is a Windows drive path ({drive.group(1)}:); drive letters are refused")
    scheme = _SCHEME.match(text)
    if scheme and not from_uri and scheme.group(1).lower() == "file":
        raise RootViolation("it is a percent-encoded file: URI; send the file:// URI itself, or the path")
    if scheme:
        raise RootViolation(
            f"it is a URI with the scheme {scheme.group(1) + ':'!r}; only local file:// URIs are "
            "accepted, as the path they name"
        )
    if text.startswith("~"):
        raise RootViolation(
            "it starts with '~', a home-directory form (~, ~/x, ~user/x) that shells and "
            "expanduser read differently; give a path relative to the root"
        )
    if ":" in text:
        raise RootViolation(
            "it contains ':', which names a drive, a URI scheme or an NTFS alternate data stream "
            "elsewhere; ':' is refused in paths"
        )
    if "\\" in text:
        raise RootViolation(
            "the path contains a backslash; use '/' as the separator (a backslash is a separator on "
            "Windows, so 'sub\\note.md' is refused rather than read as one name)"
        )
    _check_names(text)


def _check_names(text: str) -> None:
    """Rules on single names, cheap enough for the hot path."""
    device = _DEVICE.search(text)
    if device:
        raise RootViolation(
            f"it names the Windows device {device.group(1)!r} (CON, PRN, AUX, NUL, COM0-9, "
            "LPT0-9, CONIN$, CONOUT$, CLOCK$); device names are refused in every part of a path, "
            "with or without an extension"
        )
    if "~" in text and _SHORT_NAME.search(text):
        raise RootViolation(
            "it contains a Windows 8.3 short name (like PROGRA~1), which names another file there"
        )
    if "%" in text and _PERCENT_U.search(text):  # before %NAME%, which '%u002e%u002e' also looks like
        raise RootViolation(
            "it contains a %u escape (%u2215, %u002f), IIS's non-standard encoding of a character, "
            "which some layers decode and others keep; %u escapes are refused"
        )
    if ("$" in text or "%" in text) and _ENV.search(text):
        raise RootViolation(
            "it contains an environment-variable form ($NAME, ${NAME}, $(cmd), %NAME%) that shells "
            "and Windows expand; these are refused"
        )
    for name in _TRAILING.findall(text):
        if name not in (".", ".."):
            raise RootViolation(
                f"the name {name!r} ends with a dot or a space, which Windows drops ('secret.' and "
                "'secret ' name 'secret' there); names ending in a dot or a space are refused"
            )


# --- resolution ---------------------------------------------------------------------------------------------


def _real(path: str | Path) -> str:
    return os.path.realpath(os.fspath(path))


def _loops(path: str) -> bool:
    """Whether the OS, following ``path`` as given, runs into a symlink loop (``realpath`` quietly stops)."""
    try:
        os.stat(path)
    except OSError as exc:
        return exc.errno == errno.ELOOP
    except ValueError:
        return False
    return False


def _key(path: str, case_insensitive: bool) -> str:
    normalized = os.path.normcase(path)
    return normalized.casefold() if case_insensitive else normalized


def _inside(path: str, root: str, case_insensitive: bool) -> bool:
    path_key, root_key = _key(path, case_insensitive), _key(root, case_insensitive)
    return path_key == root_key or path_key.startswith(root_key.rstrip(os.sep) + os.sep)


def roots_from_uris(uris: Sequence[str]) -> list[str]:
    """Client roots (local ``file://`` URIs) as real directory paths; other schemes and hosts are ignored."""
    found = []
    for uri in uris:
        try:
            parts = urlsplit(uri)
        except ValueError:
            continue
        if parts.scheme.lower() != "file" or parts.netloc.lower() not in ("", "localhost") or not parts.path:
            continue
        try:
            path = unquote_to_bytes(parts.path).decode("utf-8")
        except (UnicodeDecodeError, UnicodeEncodeError):
            continue
        if "\x00" not in path:
            found.append(_real(path))
    return found


def intersect(
    server: Sequence[str], client: Sequence[str] | None, case_insensitive: bool = False
) -> list[str]:
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


def resolve_in_roots(
    raw: object, roots: Sequence[str], *, base: str | None = None, case_insensitive: bool = False
) -> str:
    """The real absolute path ``raw`` names, if it is inside one of ``roots``; RootViolation otherwise.

    A local ``file://`` URI is parsed as a URI and checked as the path it names. Percent-encoding is
    decoded until stable (so ``%252e`` cannot hide ``..``) and must be valid UTF-8. Ambiguous forms are
    refused with the rule they broke: other URI schemes, ``~`` forms, Windows drives, UNC and device
    paths, device names, 8.3 short names, environment variables, ``%u`` escapes, names ending in a dot or a
    space, ``:``, backslashes, NUL and control
    characters, bidi and invisible characters, and lookalikes of ``.``, ``/``, ``\\``, ``:``, ``~``, ``%``.
    Then ``..`` and symlinks are resolved before the check (a symlink loop is refused), absolute paths
    must be inside a root, a relative path is taken relative to ``base`` (or the first root), and
    case-insensitive file systems compare case-insensitively.
    """
    if not isinstance(raw, str) or not raw:
        raise RootViolation("the path must be a non-empty string")
    if _PLAIN.match(raw) and not raw.startswith("//"):
        _check_names(raw)  # the hot path: plain ASCII, nothing to decode
        text = raw
    else:
        try:
            raw.encode("utf-8")
        except UnicodeEncodeError:
            raise RootViolation("it contains a lone surrogate, which is not valid Unicode") from None
        text, from_uri = raw, False
        scheme = _SCHEME.match(raw)
        if scheme and scheme.group(1).lower() == "file":
            text, from_uri = _from_file_uri(raw), True
        text = _decode(text)
        if not text:
            raise RootViolation("the path must be a non-empty string")
        _check_form(text, from_uri)
    if not roots:
        raise RootViolation("no roots are allowed here, so no path is")
    candidate = text if os.path.isabs(text) else os.path.join(base or roots[0], text)
    real = _real(candidate)
    # realpath stops quietly at a loop, leaving the link in its answer; a '..' after the loop can hide even that
    if _loops(real) or (".." in text and _loops(candidate)):
        raise RootViolation("it goes through a symlink loop (a link that, followed, leads back to itself)")
    if os.path.normpath(real) != real:
        raise RootViolation(
            "it did not resolve to a normalised path (a symlink loop or an unresolvable link)"
        )
    for root in roots:
        if _inside(real, root, case_insensitive):
            return real
    raise RootViolation(f"{raw!r} is outside the allowed roots")


def resolve_parameters(
    values: Mapping[str, object],
    server: Sequence[str],
    client: Sequence[str] | None,
    *,
    case_insensitive: bool = False,
) -> dict[str, str]:
    """The real paths of a call's path parameters (``values``, by name), each inside the server's roots
    (``server``) and, when the client has roots, its ``client`` root URIs too; RootViolation (with its
    ``parameter``) for the first that is not.

    Resolving reads the file system (every symlink on the way, and the roots themselves), which may block
    (a network mount, a slow disk), so the pipeline runs this whole check on a worker thread, once per call,
    never on the event loop.
    """
    allowed = intersect(server, roots_from_uris(client) if client is not None else None, case_insensitive)
    base = _real(server[0]) if server else None
    resolved: dict[str, str] = {}
    for name, raw in values.items():
        try:
            resolved[name] = resolve_in_roots(raw, allowed, base=base, case_insensitive=case_insensitive)
        except RootViolation as exc:
            exc.parameter = name
            raise
    return resolved
