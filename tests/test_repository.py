"""The git tree works on any machine: no tracked symlinks, and no tracked file that names a path of the
machine it was written on (a folder like ``/work/...`` or a home directory exists nowhere else).

Skips when the tests do not run from a git checkout (an sdist, an unpacked archive) or git is absent.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SELF = Path(__file__).resolve().relative_to(ROOT).as_posix()

# Folders that only exist on a build or development machine (this file, which names them, is not searched).
# A path must start the word: "docs/work/x" and "../root/x" are relative and fine; "/root" alone (test data
# for the roots check) names no folder's content and is fine too, only "/root/..." is flagged.
MACHINE_PREFIXES = [
    r"/work/",
    r"/root/",
    r"/home/[^/\s\"'`]+/",
    r"/Users/[^/\s\"'`]+/",
    r"/tmp/",
    r"/private/(?:tmp|var)/",
    r"/var/folders/",
    r"/mnt/(?:data|c)/",
    r"[A-Za-z]:\\\\?Users\\\\?",
]
# A URL with a host ("https://registry.npmjs.org/root/-/root-1.0.0.tgz" in a lockfile) names no local
# path, so URLs are removed before the search; "file://" URLs do name one and are kept as paths.
URL = re.compile(r"\b(?!file:)[A-Za-z][A-Za-z0-9+.-]*://[^\s\"'<>`)\]]*")


def git(*args: str) -> bytes:
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, check=True, timeout=60).stdout


@pytest.fixture(scope="module")
def tracked() -> list[tuple[str, str]]:
    """``(mode, path)`` of every tracked file."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    try:
        top = git("rev-parse", "--show-toplevel").decode().strip()
    except subprocess.CalledProcessError:
        pytest.skip("not a git checkout (the tree checks run on a clone)")
    if Path(top).resolve() != ROOT:
        pytest.skip(f"the project is not the root of its git checkout ({top})")
    entries = []
    for entry in git("ls-files", "-s", "-z").split(b"\0"):
        if entry:
            meta, path = entry.decode("utf-8", "surrogateescape").split("\t", 1)
            entries.append((meta.split()[0], path))
    return entries


def machine_paths() -> re.Pattern[str]:
    """This machine's own folders (the checkout, the home directory), then the known build-machine ones."""
    own = set()
    for path in (ROOT, Path(os.path.abspath(__file__)).parents[1], Path.home()):
        if len(path.parts) >= 3:  # "/work/main", "/home/ana"; never "/" or a lone top folder like "/srv"
            own.add(re.escape(str(path)) + r"(?=[/\\\"'`\s]|$)")
    alternatives = sorted(own, key=len, reverse=True) + MACHINE_PREFIXES
    return re.compile(r"(?<![\w.~/\\-])(?:" + "|".join(alternatives) + ")")


def test_no_symlinks_are_tracked(tracked: list[tuple[str, str]]) -> None:
    links = [path for mode, path in tracked if mode == "120000"]
    assert links == [], (
        f"tracked symlinks point at folders of one machine and break every other clone: {links}; "
        "untrack them (git rm --cached) and list them in .gitignore without a trailing slash"
    )


def test_no_tracked_file_names_a_path_of_this_machine(tracked: list[tuple[str, str]]) -> None:
    pattern = machine_paths()
    found = []
    for mode, path in tracked:
        if mode not in {"100644", "100755"} or path == SELF:
            continue
        try:
            data = (ROOT / path).read_bytes()
        except FileNotFoundError:  # deleted in the working tree, not yet committed
            continue
        if b"\0" in data[:8192]:
            continue  # binary
        text = URL.sub(" ", data.decode("utf-8", "replace")).replace("file://", " ")
        for number, line in enumerate(text.splitlines(), 1):
            match = pattern.search(line)
            if match:
                found.append(f"{path}:{number}: {match.group(0)!r} in {line.strip()[:120]!r}")
    assert found == [], "tracked files name absolute paths of a build machine:\n" + "\n".join(found)


def test_the_checks_see_what_they_look_for() -> None:
    """The pattern catches the paths that broke clones before, and leaves URLs and relative paths alone."""
    pattern = machine_paths()
    for bad in [
        "/work/deps",
        "see /root/.cache/x",
        '"/home/ana/src/agentmw"',
        str(ROOT / "x"),
        "C:\\Users\\ana\\x",
        "/tmp/build-1/out",
    ]:
        assert pattern.search(URL.sub(" ", bad).replace("file://", " ")), bad
    assert pattern.search(URL.sub(" ", "file:///work/x").replace("file://", " "))
    for fine in [
        "https://registry.npmjs.org/root/-/root-1.0.0.tgz",
        "src/work/x",
        "../root/../outside",
        '"/root"',
        "/etc/passwd",
        "file:///srv/data",
        "~/work/x",
    ]:
        assert not pattern.search(URL.sub(" ", fine).replace("file://", " ")), fine
