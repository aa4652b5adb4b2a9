"""Skill packages: a folder of instructions (``SKILL.md``) and files, served as MCP Skills (SEP-2640).

Not to be confused with an A2A skill (``@skill``, a capability another agent calls): a skill package is
*documentation for a model* — how to use this server's tools for a job — that an MCP host reads when it needs
it (docs/skill-packages.md). This module is protocol-neutral: it reads and checks a package and computes its
manifest once; the MCP face (``mcp/skills.py``) serves it.

- :meth:`SkillPackage.from_folder` reads a folder in the Agent Skills layout: ``SKILL.md`` at its root (YAML
  frontmatter with ``name`` and ``description``, then the instructions), and every file beneath it.
- ``SkillPackage(name=..., description=..., instructions=..., files={...})`` builds one in code; its
  ``SKILL.md`` is rendered from those fields.

Either way the bytes are read, hashed (SHA-256) and measured once, when the package is made; what is served
afterwards is exactly what was hashed, so a host's digest check holds for the life of the process.
"""

from __future__ import annotations

import hashlib
import json
import mimetypes
import os
import re
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import quote

from .errors import RegistrationError

__all__ = [
    "DIRECTORY_MIME_TYPE",
    "MAX_SKILL_BYTES",
    "MAX_SKILL_FILES",
    "ServedSkill",
    "SkillFile",
    "SkillPackage",
    "SkillPackageError",
    "parse_frontmatter",
    "serve_package",
]

MAX_SKILL_FILES = 512
"""SEP-2640's per-skill limit on resource entries, ``SKILL.md`` included: hosts must accept up to it."""
MAX_SKILL_BYTES = 16 * 1024 * 1024
"""SEP-2640's per-skill limit on the summed size of its files (16 MiB)."""
DIRECTORY_MIME_TYPE = "inode/directory"
SKILL_MD = "SKILL.md"
RESERVED_METADATA_PREFIX = "io.modelcontextprotocol/"

# The Agent Skills naming rule: 1-64 lowercase letters, digits and single hyphens, no hyphen at either end.
_NAME = re.compile(r"^(?!.*--)[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?$")
# A skill-path prefix segment: RFC 3986 unreserved characters only (the first one is the URI's authority).
_PREFIX_SEGMENT = re.compile(r"^[A-Za-z0-9._~-]+$")
_KEY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-/]*$")
_MIME = mimetypes.MimeTypes()  # the built-in table only: the same answer on every machine
_MIME_OVERRIDES = {
    ".md": "text/markdown",
    ".markdown": "text/markdown",
    ".yaml": "application/yaml",
    ".yml": "application/yaml",
    ".toml": "application/toml",
    ".txt": "text/plain",
    ".js": "text/javascript",
    ".sh": "text/x-sh",
}
_TEXTUAL = ("application/json", "application/yaml", "application/toml", "application/xml")


class SkillPackageError(RegistrationError):
    """A skill package that cannot be served as given: no ``SKILL.md``, bad frontmatter or name, a file that
    escapes the folder, or a limit passed. The message names the package and what to change."""


# --- the frontmatter ----------------------------------------------------------------------------------------

# Plain YAML scalars that a YAML parser reads as something other than a string (YAML 1.1 and 1.2 alike: null,
# booleans, numbers, dates); the Agent Skills fields are all strings, so such a value must be quoted.
_NOT_A_STRING = re.compile(
    r"""^(?:~|null|true|false|yes|no|on|off|y|n
    |[-+]?(?:\d[\d_]*(?:\.[\d_]*)?|\.\d[\d_]*)(?:[eE][-+]?\d+)?
    |0x[0-9a-fA-F_]+|0o[0-7_]+|0b[01_]+
    |[-+]?\.(?:inf)|\.nan|=
    |[-+]?\d[\d_]*(?::[0-5]?\d)+(?:\.\d*)?
    |\d{4}-\d\d?-\d\d?(?:[Tt\s].*)?)$""",
    re.IGNORECASE | re.VERBOSE,
)
_INDICATORS = frozenset("-?:,[]{}#&*!|>'\"%@`")
_ESCAPES = {
    '"': '"',
    "\\": "\\",
    "/": "/",
    "n": "\n",
    "t": "\t",
    "r": "\r",
    "b": "\b",
    "f": "\f",
    "0": "\0",
    " ": " ",
}


_BLANK = " \t"  # the only whitespace YAML strips around a value (str.strip would take Unicode spaces too)
# What no YAML reader reads alike, or at all, in a frontmatter: C0 and C1 controls but tab and line feed, a
# lone CR and the YAML 1.1 line breaks (NEL, LS, PS), the non-characters and lone surrogates
_UNREADABLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\ufffe\uffff\ud800-\udfff]")
# What a value may not hold, however written (raw, or a double-quoted escape): controls but tab and line feed
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
# What a file name may not hold: it would show as something else in a listing or a terminal
_UNSAFE_NAME = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\ufffe\uffff]")
# What json.dumps leaves raw that YAML would not read back: escaped as \uXXXX, valid in a double-quoted scalar
_RENDER_ESCAPE = re.compile("[\u2028\u2029\ufeff\ufffe\uffff]")


class _Lines:
    def __init__(self, lines: list[str], first: int) -> None:
        self.lines = lines
        self.first = first  # the file line number of lines[0] (for messages)
        self.i = 0

    def where(self, i: int | None = None) -> str:
        return f"line {self.first + (self.i if i is None else i)}"


def _fail(lines: _Lines, message: str, i: int | None = None) -> SkillPackageError:
    return SkillPackageError(f"SKILL.md frontmatter, {lines.where(i)}: {message}")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _skippable(line: str) -> bool:
    stripped = line.strip(_BLANK)
    return not stripped or stripped.startswith("#")


def parse_frontmatter(text: str) -> tuple[dict[str, Any], str]:
    """``SKILL.md``'s YAML frontmatter as a dict, and the body after it.

    A strict reader of the YAML the Agent Skills fields use: ``key: value`` lines whose values are plain,
    single- or double-quoted strings (one line; a plain one may go on over more-indented lines), ``|`` and
    ``>`` block scalars, and one level of nested mapping (``metadata:``). Anything else — a list, an anchor, a
    flow collection, a plain value YAML would read as a number, boolean, null or date — is refused with its
    line number rather than read differently from a YAML parser (a host compares the two, SEP-2640). So are
    control characters but tab and line feed, a lone CR and YAML 1.1's line breaks (NEL, LS, PS) anywhere in
    it; only spaces and tabs are stripped around a value, as YAML does.
    """
    text = text.removeprefix("\ufeff")
    # the suite's reading (and most hosts'): a first line of exactly '---', up to the next line starting '---'
    match = re.match(r"---\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|\Z)", text, re.DOTALL)
    if match is None:
        raise SkillPackageError(
            "SKILL.md must begin with YAML frontmatter: a '---' line, 'name: ...' and 'description: ...' "
            "lines, and a closing '---' line"
        )
    block = match.group(1).replace("\r\n", "\n")
    bad = _UNREADABLE.search(block)
    if bad is not None:
        line = 2 + block.count("\n", 0, bad.start())
        raise SkillPackageError(
            f"SKILL.md frontmatter, line {line}: character U+{ord(bad.group()):04X} is not allowed here "
            "(a control character or a line break YAML readers do not agree on)"
        )
    lines = _Lines(block.split("\n"), 2)
    return _mapping(lines, 0, top=True), text[match.end() :]


def _mapping(lines: _Lines, indent: int, *, top: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    while lines.i < len(lines.lines):
        line = lines.lines[lines.i]
        if "\t" in line[: _indent(line) + 1] and line.strip(_BLANK):
            raise _fail(lines, "indent with spaces, not tabs")
        if _skippable(line):
            lines.i += 1
            continue
        here = _indent(line)
        if here < indent:
            break
        if here > indent:
            raise _fail(lines, "unexpected indentation")
        key, sep, rest = line[here:].partition(":")
        if not sep or not _KEY.match(key) or (rest and not rest.startswith(" ")):
            raise _fail(lines, f"expected 'key: value', got {line.strip(_BLANK)!r}")
        if key in out:
            raise _fail(lines, f"duplicate key {key!r}")
        lines.i += 1
        value = rest.strip(_BLANK)
        if not value or value.startswith("#"):
            if not top:
                raise _fail(lines, f"{key!r} has no value (nested mappings go one level deep)", lines.i - 1)
            child = _child_indent(lines, indent)
            if child is None:
                raise _fail(lines, f"{key!r} has no value", lines.i - 1)
            out[key] = _mapping(lines, child, top=False)
        else:
            out[key] = _scalar(lines, value, indent, key)
    return out


def _child_indent(lines: _Lines, indent: int) -> int | None:
    for line in lines.lines[lines.i :]:
        if not _skippable(line):
            here = _indent(line)
            return here if here > indent else None
    return None


def _scalar(lines: _Lines, value: str, indent: int, key: str) -> str:
    at = lines.i - 1
    if value[0] in "|>":
        return _block(lines, value, indent, key)
    if value[0] == '"':
        return _double_quoted(lines, value, at)
    if value[0] == "'":
        end = _single_quote_end(value)
        rest = value[end + 1 :].strip(_BLANK) if end is not None else ""
        if end is None or (rest and not rest.startswith("#")):
            raise _fail(lines, f"{key!r}: a single-quoted value must end on its line", at)
        return value[1:end].replace("''", "'")
    if value[0] in _INDICATORS and not (value[0] in "-?:" and len(value) > 1 and value[1] != " "):
        raise _fail(lines, f"{key!r}: {value!r} is not a plain string in YAML; quote it", at)
    parts = [_plain_part(lines, value, key, at)]
    while lines.i < len(lines.lines):  # a plain value goes on over more-indented lines, folded with spaces
        line = lines.lines[lines.i]
        if not line.strip(_BLANK) or _indent(line) <= indent:
            break
        parts.append(_plain_part(lines, line.strip(_BLANK), key, lines.i))
        lines.i += 1
    text = " ".join(parts)
    if _NOT_A_STRING.match(text):
        raise _fail(lines, f"{key!r}: YAML reads {text!r} as a number, boolean, null or date; quote it", at)
    return text


def _plain_part(lines: _Lines, value: str, key: str, at: int) -> str:
    cut = value.find(" #")
    if cut >= 0:
        value = value[:cut].rstrip(_BLANK)
    if ": " in value or value.endswith(":") or "\t#" in value:
        raise _fail(lines, f"{key!r}: a plain value cannot hold ': '; quote it", at)
    return value


def _single_quote_end(value: str) -> int | None:
    i = 1
    while i < len(value):
        if value[i] == "'":
            if value[i + 1 : i + 2] == "'":
                i += 2
                continue
            return i
        i += 1
    return None


def _double_quoted(lines: _Lines, value: str, at: int) -> str:
    out: list[str] = []
    i = 1
    while i < len(value):
        ch = value[i]
        if ch == '"':
            rest = value[i + 1 :].strip(_BLANK)
            if rest and not rest.startswith("#"):
                raise _fail(lines, "text after a closing quote", at)
            return "".join(out)
        if ch == "\\":
            nxt = value[i + 1 : i + 2]
            if nxt in _ESCAPES:
                out.append(_ESCAPES[nxt])
                i += 2
                continue
            width = {"x": 2, "u": 4, "U": 8}.get(nxt)
            digits = value[i + 2 : i + 2 + width] if width else ""
            if width is None or len(digits) != width or not re.fullmatch(r"[0-9a-fA-F]+", digits):
                raise _fail(lines, f"unsupported escape {value[i : i + 2]!r} in a double-quoted value", at)
            out.append(chr(int(digits, 16)))
            i += 2 + width
            continue
        out.append(ch)
        i += 1
    raise _fail(lines, "a double-quoted value must end on its line", at)


def _block(lines: _Lines, header: str, indent: int, key: str) -> str:
    at = lines.i - 1
    style, chomp = header[0], header[1:].split("#", 1)[0].strip(_BLANK)
    if chomp not in ("", "-", "+"):
        raise _fail(
            lines, f"{key!r}: block scalar header {header!r}: only '|', '>', '|-', '>-', '|+', '>+'", at
        )
    body: list[str] = []
    block_indent: int | None = None
    while lines.i < len(lines.lines):
        line = lines.lines[lines.i]
        if line.strip(_BLANK):
            here = _indent(line)
            if here <= indent:
                break
            if block_indent is None:
                block_indent = here
            elif here < block_indent:
                raise _fail(lines, f"{key!r}: a block line is less indented than the first")
            if "\t" in line[:block_indent]:
                raise _fail(lines, "indent with spaces, not tabs")
            body.append(line[block_indent:])
        else:
            body.append("")
        lines.i += 1
    while body and body[-1] == "" and chomp != "+":
        body.pop()
    trailing = 0
    if chomp == "+":
        while body and body[-1] == "":
            body.pop()
            trailing += 1
    if style == "|":
        text = "\n".join(body)
    else:
        if any(line.startswith(" ") for line in body):
            raise _fail(lines, f"{key!r}: more-indented lines in a folded ('>') block; use '|'", at)
        text, blank = "", 0
        for line in body:
            if not line:
                blank += 1
                continue
            if text:
                text += "\n" * blank if blank else " "
            text += line
            blank = 0
    if not body:
        return "\n" * trailing if chomp == "+" else ""
    return text + ("" if chomp == "-" else "\n") + "\n" * trailing


def _values(fm: Mapping[str, Any]) -> list[tuple[str, Any]]:
    return [
        (f"{key}.{sub}", item) if isinstance(v, Mapping) else (key, v)
        for key, v in fm.items()
        for sub, item in (v.items() if isinstance(v, Mapping) else [("", v)])
    ]


def _validate_frontmatter(fm: Mapping[str, Any], where: str) -> None:
    for key, v in _values(fm):  # a host shows these to people and models: no terminal control sequences
        if isinstance(v, str) and _CONTROL.search(v):
            raise SkillPackageError(
                f"{where}: frontmatter {key!r} holds a control character (only tab and line feed are allowed)"
            )
    name, description = fm.get("name"), fm.get("description")
    if not isinstance(name, str) or not name:
        raise SkillPackageError(f"{where}: the frontmatter needs a 'name'")
    if not _NAME.match(name):
        raise SkillPackageError(
            f"{where}: name {name!r} breaks the Agent Skills naming rule: 1-64 lowercase letters, digits and "
            "single hyphens, not starting or ending with a hyphen (e.g. 'purchase-requests')"
        )
    if not isinstance(description, str) or not description.strip():
        raise SkillPackageError(f"{where}: the frontmatter needs a non-empty 'description'")
    if len(description) > 1024:
        raise SkillPackageError(f"{where}: the description has {len(description)} characters; at most 1024")
    for key in ("license", "allowed-tools"):
        if key in fm and not isinstance(fm[key], str):
            raise SkillPackageError(f"{where}: {key!r} must be a string")
    if "compatibility" in fm:
        compatibility = fm["compatibility"]
        if not isinstance(compatibility, str) or not 1 <= len(compatibility) <= 500:
            raise SkillPackageError(f"{where}: 'compatibility' must be a string of 1-500 characters")
    if "metadata" in fm:
        metadata = fm["metadata"]
        if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
            raise SkillPackageError(f"{where}: 'metadata' must map keys to string values")
        reserved = [k for k in metadata if k.startswith(RESERVED_METADATA_PREFIX)]
        if reserved:
            raise SkillPackageError(
                f"{where}: metadata keys under {RESERVED_METADATA_PREFIX!r} are reserved for MCP extensions "
                f"(none is defined yet): {', '.join(reserved)}"
            )


def _render_frontmatter(fm: Mapping[str, Any]) -> str:
    """YAML that :func:`parse_frontmatter` (and any YAML 1.1 or 1.2 parser) reads back as ``fm``: every value
    a JSON string, which is a YAML double-quoted scalar, with what YAML would not read back raw (LS, PS, BOM,
    non-characters) escaped; controls were refused before."""

    def value(v: Any) -> str:
        written = json.dumps(v, ensure_ascii=False)  # controls are refused before (_validate_frontmatter)
        return _RENDER_ESCAPE.sub(lambda m: f"\\u{ord(m.group()):04x}", written)

    out = ["---"]
    for key, v in fm.items():
        if not isinstance(key, str) or not _KEY.match(key):
            raise SkillPackageError(f"frontmatter key {key!r}: use letters, digits, '_', '.', '-' and '/'")
        if isinstance(v, Mapping):
            out.append(f"{key}:")
            for sub, item in v.items():
                if not isinstance(sub, str) or not _KEY.match(sub) or not isinstance(item, str):
                    raise SkillPackageError(
                        f"frontmatter {key!r}: keys of letters, digits, '_', '.', '-', '/' and string values"
                    )
                out.append(f"  {sub}: {value(item)}")
        elif isinstance(v, str):
            out.append(
                f"{key}: {value(v)}"
            )  # quoted, the name too: YAML reads a plain 'no' or '123' otherwise
        else:
            raise SkillPackageError(f"frontmatter {key!r}: a string or a mapping of strings, not {v!r}")
    out.append("---")
    return "\n".join(out) + "\n"


# --- files --------------------------------------------------------------------------------------------------


def _mime_type(path: str, data: bytes) -> str:
    suffix = PurePosixPath(path).suffix.lower()
    guessed = _MIME_OVERRIDES.get(suffix) or _MIME.guess_type(path)[0]
    if guessed is None:
        return "text/plain" if _utf8(data) is not None else "application/octet-stream"
    return guessed


def _utf8(data: bytes) -> str | None:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return None if "\0" in text else text


@dataclass(frozen=True, slots=True)
class SkillFile:
    """One file of a package: its path in the package (``/``-separated), bytes, and what the manifest says."""

    path: str
    data: bytes = field(repr=False)
    mime_type: str
    digest: str  # "sha256:<64 lowercase hex>" of ``data``
    size: int

    @property
    def text(self) -> str | None:
        """The content as text when it is text (served as ``text``; else as a base64 ``blob``)."""
        if not (
            self.mime_type.startswith("text/")
            or self.mime_type in _TEXTUAL
            or self.mime_type.endswith(("+json", "+xml"))
        ):
            return None
        return _utf8(self.data)


def _file(path: str, data: bytes) -> SkillFile:
    return SkillFile(
        path=path,
        data=data,
        mime_type=_mime_type(path, data),
        digest="sha256:" + hashlib.sha256(data).hexdigest(),
        size=len(data),
    )


def _check_name(path: str, where: str) -> str:
    """Refuse a file path a ``skill://`` uri cannot name, or that would show as something else."""
    try:
        path.encode("utf-8")  # a name read from disk that is not UTF-8 holds surrogates (os.fsdecode)
    except UnicodeEncodeError:
        raise SkillPackageError(
            f"{where}: file name {os.fsencode(path)!r} is not UTF-8; a skill:// uri cannot name it (rename it)"
        ) from None
    if _UNSAFE_NAME.search(path):
        raise SkillPackageError(
            f"{where}: file path {path!r} holds a control character or a line break; rename it"
        )
    return path


def _check_relative(path: str, where: str) -> str:
    if not isinstance(path, str) or not path:
        raise SkillPackageError(f"{where}: a file path must be a non-empty string")
    _check_name(path, where)
    parts = path.split("/")
    if path.startswith("/") or "\\" in path or "\0" in path or any(p in ("", ".", "..") for p in parts):
        raise SkillPackageError(
            f"{where}: file path {path!r} must be relative, '/'-separated, without '.', '..' or empty parts"
        )
    return path


class SkillPackage:
    """A skill package: ``SKILL.md`` (frontmatter and instructions) and its supporting files.

    Built in code: ``SkillPackage(name="purchase-requests", description="...", instructions="# Steps ...",
    files={"reference/policy.md": "..."})`` — ``SKILL.md`` is rendered from the fields (``license``,
    ``compatibility``, ``metadata``, ``allowed_tools`` and any further ``frontmatter`` fields go into its
    frontmatter). Read from disk: :meth:`from_folder`.

    Raises :class:`SkillPackageError` at once for a bad name or description, a bad path, or a package over
    the limits (:data:`MAX_SKILL_FILES` files, :data:`MAX_SKILL_BYTES` bytes in all).
    """

    name: str
    description: str
    frontmatter: dict[str, Any]
    instructions: str
    files: tuple[SkillFile, ...]
    source: Path | None

    def __init__(
        self,
        name: str,
        description: str,
        instructions: str = "",
        *,
        files: Mapping[str, str | bytes] | None = None,
        license: str | None = None,
        compatibility: str | None = None,
        metadata: Mapping[str, str] | None = None,
        allowed_tools: str | None = None,
        frontmatter: Mapping[str, Any] | None = None,
    ) -> None:
        fm: dict[str, Any] = {"name": name, "description": description}
        for key, given in (
            ("license", license),
            ("compatibility", compatibility),
            ("metadata", dict(metadata) if metadata is not None else None),
            ("allowed-tools", allowed_tools),
        ):
            if given is not None:
                fm[key] = given
        for key, given in (frontmatter or {}).items():
            if key in fm:
                raise SkillPackageError(f"skill package {name!r}: {key!r} is given twice")
            fm[key] = given
        where = f"skill package {name!r}"
        _validate_frontmatter(fm, where)
        if not isinstance(instructions, str):
            raise SkillPackageError(f"{where}: instructions are a string (the body of SKILL.md)")
        body = instructions if not instructions or instructions.startswith("\n") else "\n" + instructions
        skill_md = (_render_frontmatter(fm) + body).encode("utf-8")
        parsed, _ = parse_frontmatter(skill_md.decode("utf-8"))
        if parsed != fm:  # a rendering this reader would not read back: refuse rather than serve a mismatch
            raise SkillPackageError(f"{where}: its frontmatter cannot be written as plain YAML strings")
        entries: list[tuple[str, bytes]] = [(SKILL_MD, skill_md)]
        for path, content in (files or {}).items():
            _check_relative(path, where)
            if path == SKILL_MD:
                raise SkillPackageError(f"{where}: SKILL.md is made from name, description and instructions")
            if isinstance(content, str):
                content = content.encode("utf-8")
            elif not isinstance(content, (bytes, bytearray)):
                raise SkillPackageError(f"{where}: file {path!r} must be str or bytes")
            entries.append((path, bytes(content)))
        self._init(fm, body, entries, None, where)

    def _init(
        self,
        fm: dict[str, Any],
        body: str,
        entries: list[tuple[str, bytes]],
        source: Path | None,
        where: str,
    ) -> None:
        _limits(len(entries), sum(len(data) for _, data in entries), where)
        paths = {path for path, _ in entries}
        for path in paths:  # a file and a directory of the same name cannot both be served
            for parent in PurePosixPath(path).parents:
                if str(parent) in paths:
                    raise SkillPackageError(f"{where}: {str(parent)!r} is both a file and a directory")
        self.name = fm["name"]
        self.description = fm["description"]
        self.frontmatter = fm
        self.instructions = body
        self.source = source
        ordered = sorted(entries, key=lambda e: (e[0] != SKILL_MD, e[0]))
        self.files = tuple(_file(path, data) for path, data in ordered)

    @classmethod
    def from_folder(cls, path: str | os.PathLike[str], *, include_hidden: bool = False) -> SkillPackage:
        """The package in folder ``path``: its ``SKILL.md`` and every file beneath it, read (and hashed) now.

        - The frontmatter's ``name`` must equal the folder's name (the Agent Skills rule).
        - Hidden files and folders (a name starting with ``.``: ``.git``, ``.DS_Store``) are left out, unless
          ``include_hidden=True``.
        - A symbolic link is followed only to a file inside the folder; one that leads outside it, or to a
          folder, is refused, as are devices, sockets and pipes.
        """
        root = Path(path)
        where = f"skill package folder {str(root)!r}"
        if not root.is_dir():
            raise SkillPackageError(f"{where}: not a folder")
        real_root = root.resolve()
        skill_md_path = root / SKILL_MD
        if not skill_md_path.is_file():
            raise SkillPackageError(f"{where}: no SKILL.md at its root (every skill package needs one)")
        entries: list[tuple[str, bytes]] = []
        total = 0
        for directory, dirnames, filenames in os.walk(root, followlinks=False):
            here = Path(directory)
            dirnames.sort()
            for name in list(dirnames):
                if name.startswith(".") and not include_hidden:
                    dirnames.remove(name)
                elif (here / name).is_symlink():
                    raise SkillPackageError(
                        f"{where}: {_rel(root, here / name)!r} is a link to a folder; copy it in instead"
                    )
            for name in sorted(filenames):
                if name.startswith(".") and not include_hidden:
                    continue
                full = here / name
                rel = _check_name(_rel(root, full), where)
                if full.is_symlink():
                    target = full.resolve()
                    if not target.is_relative_to(real_root):
                        raise SkillPackageError(f"{where}: {rel!r} is a link that leads outside the folder")
                    full = target
                info = full.stat()
                if not stat.S_ISREG(info.st_mode):
                    raise SkillPackageError(f"{where}: {rel!r} is not a regular file")
                total += info.st_size
                _limits(len(entries) + 1, total, where)
                entries.append((rel, full.read_bytes()))
        skill_md = dict(entries)[SKILL_MD]
        try:
            text = skill_md.decode("utf-8")
        except UnicodeDecodeError:
            raise SkillPackageError(f"{where}: SKILL.md is not UTF-8 text") from None
        try:
            fm, body = parse_frontmatter(text)
        except SkillPackageError as exc:
            raise SkillPackageError(f"{where}: {exc}") from None
        _validate_frontmatter(fm, where)
        # the folder as given (a link named like the skill counts), or the one it is ("." has no name)
        names = {Path(os.path.abspath(root)).name, real_root.name}
        if fm["name"] not in names:
            raise SkillPackageError(
                f"{where}: the frontmatter's name {fm['name']!r} must equal the folder's name "
                f"{real_root.name!r} (rename one of them)"
            )
        package = cls.__new__(cls)
        package._init(fm, body, entries, root, where)
        return package

    @property
    def size(self) -> int:
        """The summed size of its files, in bytes."""
        return sum(f.size for f in self.files)

    def file(self, path: str) -> SkillFile | None:
        """The file at ``path`` in the package (``"SKILL.md"``, ``"reference/policy.md"``), or None."""
        for f in self.files:
            if f.path == path:
                return f
        return None

    def __repr__(self) -> str:
        return f"SkillPackage({self.name!r}, files={len(self.files)}, size={self.size})"


def _rel(root: Path, full: Path) -> str:
    return full.relative_to(root).as_posix()


def _limits(count: int, total: int, where: str) -> None:
    if count > MAX_SKILL_FILES:
        raise SkillPackageError(
            f"{where}: more than {MAX_SKILL_FILES} files (SKILL.md included), the most a host must accept "
            "(SEP-2640); split it into several packages"
        )
    if total > MAX_SKILL_BYTES:
        raise SkillPackageError(
            f"{where}: its files come to {total} bytes, over the {MAX_SKILL_BYTES}-byte (16 MiB) limit a host "
            "must accept (SEP-2640)"
        )


# --- serving ------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ServedSkill:
    """A package as an agent serves it: its place in the ``skill://`` namespace and its entry, made once."""

    package: SkillPackage
    path: str  # the skill path: the prefix, if any, then the name ("procurement/purchase-requests")
    uri: str  # of its SKILL.md: "skill://<path>/SKILL.md"
    root: str  # its folder: "skill://<path>"
    entry: dict[str, Any]  # the SEP-2640 Skill entry: uri, frontmatter, resources (each uri, digest, size)
    files: dict[str, SkillFile]  # by uri
    directories: dict[str, list[dict[str, Any]]]  # folder uri -> its direct children, as Resource objects


def serve_package(package: SkillPackage, prefix: str = "") -> ServedSkill:
    """Place ``package`` at ``skill://<prefix>/<name>/``; ``prefix`` is an optional ``/``-separated path of
    segments (RFC 3986 unreserved characters) that groups skills (``"acme/billing"``)."""
    segments = [s for s in prefix.strip("/").split("/") if s] if prefix else []
    for segment in segments:
        if not _PREFIX_SEGMENT.match(segment) or segment in (".", ".."):
            raise SkillPackageError(
                f"skill package {package.name!r}: prefix segment {segment!r} may hold only letters, digits, "
                "'-', '.', '_' and '~'"
            )
    path = "/".join([*segments, package.name])
    root = f"skill://{path}"
    files = {f"{root}/{quote(f.path)}": f for f in package.files}
    uri = f"{root}/{SKILL_MD}"
    entry = {
        "uri": uri,
        "frontmatter": package.frontmatter,
        "resources": [{"uri": u, "digest": f.digest, "size": f.size} for u, f in files.items()],
    }
    directories: dict[str, dict[str, dict[str, Any]]] = {root: {}}
    for file_uri, f in files.items():
        parts = f.path.split("/")
        parent = root
        for part in parts[:-1]:
            child = f"{parent}/{quote(part)}"
            directories[parent].setdefault(
                child, {"uri": child, "name": part, "mimeType": DIRECTORY_MIME_TYPE}
            )
            directories.setdefault(child, {})
            parent = child
        directories[parent][file_uri] = {
            "uri": file_uri,
            "name": parts[-1],
            "mimeType": f.mime_type,
            "size": f.size,
        }
    return ServedSkill(
        package=package,
        path=path,
        uri=uri,
        root=root,
        entry=entry,
        files=files,
        directories={
            d: sorted(children.values(), key=lambda c: c["uri"]) for d, children in directories.items()
        },
    )
