"""The public API, as a snapshot: what each public package exports (its ``__all__``) and the signature of every
exported callable, with the public methods and properties of each exported class.

A change here is a change users see: when it is intended, regenerate the snapshot and say it in CHANGELOG.md:

    .venv/bin/python tests/test_public_api.py

(or ``AGENTMW_UPDATE_API_SNAPSHOT=1 pytest tests/test_public_api.py``), then commit ``tests/api_snapshot.txt``.
"""

from __future__ import annotations

import difflib
import importlib
import inspect
import os
import re
import sys
from pathlib import Path
from typing import Any

PUBLIC = (
    "agentmw",
    "agentmw.a2a",
    "agentmw.auth",
    "agentmw.bridges",
    "agentmw.observability",
    "agentmw.state",
    "agentmw.testing",
)
SNAPSHOT = Path(__file__).with_name("api_snapshot.txt")
UPDATE = "AGENTMW_UPDATE_API_SNAPSHOT"
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")  # a default's repr names where it lives: not part of the API
_PLAIN = (str, bytes, int, float, bool, type(None))


def _signature(obj: Any) -> str:
    try:
        return _ADDRESS.sub("", str(inspect.signature(obj)))
    except (TypeError, ValueError):  # a builtin, or a class whose signature cannot be read
        return "(...)"


def _members(cls: type) -> list[str]:
    """The public methods and properties ``cls`` defines or inherits from agentmw classes (not builtins')."""
    lines: dict[str, str] = {}
    for owner in reversed(cls.__mro__):
        if not owner.__module__.startswith("agentmw"):
            continue
        for name, value in vars(owner).items():
            if name.startswith("_"):
                continue
            if isinstance(value, property):
                lines[name] = f"    .{name} (property)"
            elif isinstance(value, (staticmethod, classmethod)):
                lines[name] = f"    .{name}{_signature(value.__func__)}"
            elif inspect.isfunction(value):
                lines[name] = f"    .{name}{_signature(value)}"
    return [lines[name] for name in sorted(lines)]


def _entry(name: str, obj: Any) -> list[str]:
    if inspect.isclass(obj):
        return [f"  class {name}{_signature(obj)}", *_members(obj)]
    if inspect.isfunction(obj) or inspect.isbuiltin(obj):
        return [f"  def {name}{_signature(obj)}"]
    if isinstance(obj, _PLAIN) or (
        isinstance(obj, (tuple, frozenset)) and all(isinstance(v, _PLAIN) for v in obj)
    ):
        shown = sorted(obj, key=repr) if isinstance(obj, frozenset) else obj
        return [f"  {name} = {shown!r}"]
    if callable(obj):
        return [f"  {name}: {type(obj).__qualname__}{_signature(obj)}"]
    return [f"  {name}: {type(obj).__qualname__}"]


def render() -> str:
    """The snapshot's text, made from the packages as they are now."""
    lines: list[str] = []
    for package in PUBLIC:
        module = importlib.import_module(package)
        exported = sorted(module.__all__)
        lines.append(f"[{package}] __all__ = {exported}")
        for name in exported:
            lines.extend(_entry(name, getattr(module, name)))
        lines.append("")
    return "\n".join(lines)


def test_every_public_package_declares_what_it_exports() -> None:
    for package in PUBLIC:
        module = importlib.import_module(package)
        exported = getattr(module, "__all__", None)
        assert exported is not None, f"{package} has no __all__"
        assert len(set(exported)) == len(exported), f"{package}.__all__ names something twice"
        missing = [name for name in exported if not hasattr(module, name)]
        assert not missing, f"{package}.__all__ names what it does not have: {missing}"


def test_the_public_api_is_the_snapshot() -> None:
    now = render()
    if os.environ.get(UPDATE):
        SNAPSHOT.write_text(now, encoding="utf-8")
    kept = SNAPSHOT.read_text(encoding="utf-8") if SNAPSHOT.exists() else ""
    if now != kept:
        diff = "\n".join(
            difflib.unified_diff(kept.splitlines(), now.splitlines(), "api_snapshot.txt", "now", lineterm="")
        )
        raise AssertionError(
            "the public API changed (- the snapshot, + now). If that is intended, regenerate the snapshot with "
            f"`.venv/bin/python tests/test_public_api.py` (or {UPDATE}=1 pytest tests/test_public_api.py), "
            "commit tests/api_snapshot.txt and say it in CHANGELOG.md:\n" + diff
        )


if __name__ == "__main__":
    SNAPSHOT.write_text(render(), encoding="utf-8")
    print(f"wrote {SNAPSHOT}", file=sys.stderr)
