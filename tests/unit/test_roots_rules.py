"""safety/roots.py: each path rule refuses with its own message, word for word (the message is the rule the
client broke, returned as the tool error, docs/safety.md "Path rules"), and the edges of the checks a
mutation run found unguarded: drive letters in file URIs, the percent-decoding depth, case-insensitive
roots, a root of '/', and client roots after an unusable one (docs/testing.md)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agentmw.safety import roots
from agentmw.safety.roots import PathParameter, RootViolation, intersect, resolve_in_roots, roots_from_uris

LOOKALIKE = "lookalikes of '.', '/', '\\', ':', '~' and '%' are refused"
DEVICE = (
    "(CON, PRN, AUX, NUL, COM0-9, LPT0-9, CONIN$, CONOUT$, CLOCK$); device names are refused in every part "
    "of a path, with or without an extension"
)
DRIVE_URI = (
    "it is a Windows drive path in a file:// URI (file:///C:/ or file:///C|/); drive letters are refused"
)
COLON = (
    "it contains ':', which names a drive, a URI scheme or an NTFS alternate data stream elsewhere; ':' is "
    "refused in paths"
)
QUERY = "a file:// URI with a query or fragment ('?', '#') is ambiguous"
CONTROL = "the path contains control characters"
ENV = (
    "it contains an environment-variable form ($NAME, ${NAME}, $(cmd), %NAME%) that shells and Windows expand; "
    "these are refused"
)
HOME = (
    "it starts with '~', a home-directory form (~, ~/x, ~user/x) that shells and expanduser read differently; "
    "give a path relative to the root"
)
UNC = "it starts with two separators: a UNC or network path (\\\\server\\share, //server/share); these are refused"


@pytest.fixture
def root(tmp_path: Path) -> str:
    base = tmp_path / "root"
    base.mkdir()
    return os.path.realpath(base)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("", "the path must be a non-empty string"),
        (None, "the path must be a non-empty string"),
        (b"x", "the path must be a non-empty string"),
        ("a\x00b", "the path contains a NUL byte"),
        (
            "file://host/x",
            (
                "a file:// URI must name a local path, but its host is 'host' (only an empty host or "
                "'localhost' is accepted)"
            ),
        ),
        ("file:///x?q", QUERY),
        ("file:///x#f", QUERY),
        ("file:///x?", QUERY),
        ("file:///x#", QUERY),
        ("file:x", "a file: URI must name an absolute path (file:///...)"),
        ("file:///a%2Fb", "a file:// URI has an encoded separator (%2F or %5C) inside a name"),
        ("file:///a%2fb", "a file:// URI has an encoded separator (%2F or %5C) inside a name"),
        ("file:///a%5Cb", "a file:// URI has an encoded separator (%2F or %5C) inside a name"),
        ("file:///a%5cb", "a file:// URI has an encoded separator (%2F or %5C) inside a name"),
        ("file:///a\\b", "a file:// URI contains a backslash"),
        ("file:///C:/x", DRIVE_URI),
        ("file:///c|/x", DRIVE_URI),
        ("file:///c:x", "it is a Windows drive path (c:); drive letters are refused"),
        ("file:///x\ty", CONTROL),
        ("file:///a\x00b", CONTROL),
        ("file://[/x", "it is not a well-formed file:// URI"),
        (
            "%c0%ae",
            (
                "it is not valid UTF-8 after percent-decoding (overlong or stray bytes such as %c0%ae or %ff are "
                "refused, not read as other characters)"
            ),
        ),
        ("x%2525252541", "the path is percent-encoded too many times"),  # five decodes
        ("a\u2215b", f"it contains U+2215 (DIVISION SLASH), a lookalike of '/'; {LOOKALIKE}"),
        ("a\x07b", CONTROL),
        ("a\x7fb", CONTROL),
        ("\u00e9\x07", CONTROL),
        (
            "a\u202eb",
            (
                "it contains U+202E (RIGHT-TO-LEFT OVERRIDE), a bidirectional control that reorders how the path "
                "is displayed"
            ),
        ),
        ("a\u200bb", "it contains U+200B (ZERO WIDTH SPACE), an invisible formatting or separator character"),
        ("a\ud800b", "it contains a lone surrogate, which is not valid Unicode"),
        (
            "a\ufffdb",
            (
                "it contains U+FFFD (REPLACEMENT CHARACTER), a replacement or non-character: the path was "
                "mis-decoded somewhere"
            ),
        ),
        (
            "a\ufdd0b",
            "it contains U+FDD0, a replacement or non-character: the path was mis-decoded somewhere",
        ),
        (
            "a\uff0eb",
            f"it contains U+FF0E (FULLWIDTH FULL STOP), which normalises (NFKC) to '.'; {LOOKALIKE}",
        ),
        (
            "./\u0301x",
            (
                "it contains a combining mark (U+0301) on '.', '/' or the start of a name, which hides what the "
                "name is"
            ),
        ),
        (
            "\\\\?\\C:\\x",
            "it is a Windows device-namespace path (\\\\?\\, \\\\.\\, \\??\\); these are refused",
        ),
        ("//server/share", UNC),
        ("\\\\server\\share", UNC),
        ("C:\\x", "it is a Windows drive path (C:); drive letters are refused"),
        ("c:x", "it is a Windows drive path (c:); drive letters are refused"),
        ("/C:/x", COLON),
        ("a/b:c", COLON),
        (
            "http://x",
            "it is a URI with the scheme 'http:'; only local file:// URIs are accepted, as the path they name",
        ),
        ("%66ile:///x", "it is a percent-encoded file: URI; send the file:// URI itself, or the path"),
        ("%46ILE:///x", "it is a percent-encoded file: URI; send the file:// URI itself, or the path"),
        ("~/x", HOME),
        ("~", HOME),
        (
            "a\\b",
            (
                "the path contains a backslash; use '/' as the separator (a backslash is a separator on Windows, so "
                "'sub\\note.md' is refused rather than read as one name)"
            ),
        ),
        ("con", f"it names the Windows device 'con' {DEVICE}"),
        ("x/NUL.txt", f"it names the Windows device 'NUL' {DEVICE}"),
        ("\u00e9/aux", f"it names the Windows device 'aux' {DEVICE}"),
        ("PROGRA~1", "it contains a Windows 8.3 short name (like PROGRA~1), which names another file there"),
        ("$HOME/x", ENV),
        ("%TEMP%", ENV),
        ("/etc/passwd", "'/etc/passwd' is outside the allowed roots"),
        ("\u00e9/../../etc", "'\u00e9/../../etc' is outside the allowed roots"),
    ],
)
def test_each_rule_refuses_with_its_message(root: str, raw: object, message: str) -> None:
    with pytest.raises(RootViolation) as info:
        resolve_in_roots(raw, [root])
    assert str(info.value) == message


def test_no_roots_no_paths() -> None:
    with pytest.raises(RootViolation) as info:
        resolve_in_roots("x", [])
    assert str(info.value) == "no roots are allowed here, so no path is"


def test_percent_decoding_stops_after_five_rounds(root: str) -> None:
    assert resolve_in_roots("x%25252541", [root]) == os.path.join(root, "xA")  # four decodes


def test_a_combining_mark_after_a_letter_is_a_name(root: str) -> None:
    assert resolve_in_roots("X\u0301y", [root]) == os.path.join(root, "X\u0301y")
    assert resolve_in_roots("file://" + root + "/n%C3%A9", [root]) == os.path.join(root, "n\u00e9")
    assert resolve_in_roots("file://localhost" + root + "/a", [root]) == os.path.join(root, "a")


def test_a_root_of_slash_holds_every_absolute_path() -> None:
    assert roots._inside("/etc", "/", False) is True
    assert roots._inside("/", "/", False) is True
    assert resolve_in_roots("/tmp", ["/"]) == os.path.realpath("/tmp")


def test_case_insensitive_comparison_folds_both_sides() -> None:
    assert roots._inside("/a/b/x", "/A/B", True) is True
    assert roots._inside("/A/B/x", "/a/b", True) is True
    assert roots._inside("/a/b/x", "/A/B", False) is False
    assert roots._inside("/a/bc", "/a/b", True) is False


def test_intersect(tmp_path: Path) -> None:
    upper = tmp_path / "Upper"
    (upper / "x").mkdir(parents=True)
    real = os.path.realpath(upper)
    lower_child = os.path.join(os.path.realpath(tmp_path), "upper", "x")
    lower = os.path.join(os.path.realpath(tmp_path), "upper")
    assert intersect([str(upper)], None) == [real]
    assert intersect([str(upper)], [lower_child]) == []  # case-sensitive by default
    assert intersect([str(upper)], [lower_child], True) == [lower_child]
    assert intersect([str(upper / "x")], [lower], True) == [os.path.join(real, "x")]
    assert intersect([str(upper)], [os.path.join(real, "x"), os.path.join(real, "x")]) == [
        os.path.join(real, "x")
    ]


def test_roots_from_uris_skips_what_it_cannot_use(tmp_path: Path) -> None:
    real = os.path.realpath(tmp_path)
    good = "file://" + real
    assert roots_from_uris(["http://x/y", good]) == [real]
    assert roots_from_uris(["file:///%ff", good]) == [real]
    assert roots_from_uris(["file://[bad", good]) == [real]
    assert roots_from_uris(["file://other/x", "file:", "file:///a%00b", good, "FILE://localhost" + real]) == [
        real,
        real,
    ]


def test_loops_is_false_for_a_path_the_os_cannot_take() -> None:
    assert roots._loops("a\x00b") is False
    assert roots._loops("/definitely/not/there") is False


def test_path_parameter_repr() -> None:
    assert repr(PathParameter()) == "PathParameter()"


def test_comparison_is_case_sensitive_unless_asked(tmp_path: Path) -> None:
    upper = tmp_path / "Root"
    upper.mkdir()
    lower_path = os.path.join(os.path.realpath(tmp_path), "root", "x")  # no such directory: realpath keeps it
    with pytest.raises(RootViolation) as info:
        resolve_in_roots(lower_path, [os.path.realpath(upper)])
    assert str(info.value) == f"{lower_path!r} is outside the allowed roots"
    assert resolve_in_roots(lower_path, [os.path.realpath(upper)], case_insensitive=True) == lower_path


@pytest.mark.parametrize("raw", ["loop", "loop/x", "sub/../loop/x"])
def test_a_symlink_loop_is_refused_with_its_message(root: str, raw: str) -> None:
    os.symlink(os.path.join(root, "loop"), os.path.join(root, "loop"))
    os.mkdir(os.path.join(root, "sub"))
    with pytest.raises(RootViolation) as info:
        resolve_in_roots(raw, [root])
    assert str(info.value) == "it goes through a symlink loop (a link that, followed, leads back to itself)"


def test_a_relative_path_is_taken_from_the_base(root: str) -> None:
    os.mkdir(os.path.join(root, "sub"))
    assert resolve_in_roots("a.txt", [root], base=os.path.join(root, "sub")) == os.path.join(
        root, "sub", "a.txt"
    )
    assert resolve_in_roots(os.path.join(root, "b"), [root], base="/elsewhere") == os.path.join(root, "b")
