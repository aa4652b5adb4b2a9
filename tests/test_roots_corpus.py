"""Roots: a corpus of well over 100 paths, symlink escapes built in a temporary directory."""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import quote

import pytest

from agentmw.safety.roots import RootViolation, intersect, resolve_in_roots, roots_from_uris


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("roots")
    root, outside, sibling = base / "root", base / "outside", base / "rootx"
    (root / "docs").mkdir(parents=True)
    (root / "deep" / "er").mkdir(parents=True)
    outside.mkdir()
    sibling.mkdir()
    (root / "docs" / "a.txt").write_text("a")
    (outside / "secret.txt").write_text("secret")
    (sibling / "file").write_text("x")
    os.symlink(outside, root / "link_out")
    os.symlink(root / "docs", root / "link_in")
    os.symlink("..", root / "docs" / "up")
    os.symlink("../../../outside/secret.txt", root / "deep" / "er" / "loot")
    os.symlink(root / "chain2", root / "chain1")
    os.symlink(outside, root / "chain2")
    os.symlink(outside / "secret.txt", root / "docs" / "looks_fine.txt")
    return {"base": base, "root": root, "outside": outside, "sibling": sibling}


def enc(text: str) -> str:
    return quote(text, safe="")


def double(text: str) -> str:
    return quote(quote(text, safe=""), safe="")


INSIDE = [
    "docs/a.txt",
    "./docs/a.txt",
    "docs/./a.txt",
    "docs//a.txt",
    "docs/../docs/a.txt",
    "link_in/a.txt",
    "docs/up/docs/a.txt",
    "docs/new-file.txt",
    "deep/er",
    "deep/er/../../docs",
    "docs/~not-expanded",
    "docs/a.txt/",
    "docs",
    ".",
    "docs/.hidden",
    "sp ace/x",
    "ünï/cödé.txt",
    "a" * 200,
]
ESCAPES = [
    "../outside/secret.txt",
    "docs/../../outside/secret.txt",
    "..",
    "../",
    "../root/../outside",
    "link_out/secret.txt",
    "link_out",
    "chain1/secret.txt",
    "deep/er/loot",
    "docs/looks_fine.txt",
    "docs/up/../outside/secret.txt",
    "deep/../../outside",
    "../rootx/file",
    "./../outside",
    "docs/../../../../../../etc/passwd",
]
ABSOLUTE_OUT = ["/etc/passwd", "/", "/root", "/tmp", "/proc/self/environ"]
# "~/not-expanded" was read literally (inside) until issue 9: a leading "~" is a home-directory form, now refused.
HOME_FORMS = ["~/not-expanded", "~", "~/", "~root/x"]
MALFORMED = [
    "",
    "docs/a.txt\x00.png",
    "docs/a.txt%00",
    "docs/\x01file",
    "docs\\..\\..\\outside",
    "..\\outside\\secret.txt",
    "docs%5C..%5C..%5Coutside",
    "%00",
    "docs/\nfile",
]


def corpus(tree: dict[str, Path]) -> list[tuple[str, bool]]:
    root, outside, sibling = tree["root"], tree["outside"], tree["sibling"]
    cases: list[tuple[str, bool]] = []
    for path in INSIDE:
        cases += [(path, True), (enc(path), True), (double(path), True), (f"{root}/{path}", True)]
    for path in ESCAPES:
        cases += [
            (path, False),
            (enc(path), False),
            (double(path), False),
            (f"{root}/{path}", False),
            (path.replace("..", "%2e%2e"), False),
            (path.replace("..", "%252e%252e"), False),
        ]
    for path in ABSOLUTE_OUT:
        cases += [(path, False), (enc(path), False)]
    cases += [(path, False) for path in MALFORMED]
    for path in HOME_FORMS:
        cases += [(path, False), (enc(path), False), (double(path), False)]
    cases += [
        (str(outside / "secret.txt"), False),
        (str(sibling / "file"), False),
        (f"{root}x/file", False),
        (str(root), True),
        (f"{root}/", True),
        ("..foo", True),
        (quote(quote(quote(quote(quote("..")))), safe=""), False),
        # names ending in a dot, which Windows drops (issue 22 item 7, docs/safety.md): refused
        (f"file-in-root-{'..'}", False),
        ("...", False),
        ("foo..", False),
    ]
    return cases


def test_the_corpus_is_large(tree) -> None:
    assert len(corpus(tree)) >= 100


def test_corpus(tree) -> None:
    root = str(tree["root"].resolve())
    wrong = []
    for raw, allowed in corpus(tree):
        try:
            resolved = resolve_in_roots(raw, [root])
            if not allowed:
                wrong.append(f"allowed but must be refused: {raw!r} -> {resolved}")
            elif not (resolved == root or resolved.startswith(root + os.sep)):
                wrong.append(f"resolved outside the root: {raw!r} -> {resolved}")
        except RootViolation as exc:
            if allowed:
                wrong.append(f"refused but is inside: {raw!r} ({exc})")
    assert wrong == []


def test_resolution_follows_symlinks_to_their_target(tree) -> None:
    root = str(tree["root"].resolve())
    assert resolve_in_roots("link_in/a.txt", [root]) == str(tree["root"] / "docs" / "a.txt")


def test_case_insensitive_file_systems(tree) -> None:
    root = str(tree["root"].resolve())
    upper = root.replace("/root", "/ROOT")
    assert resolve_in_roots(f"{upper}/docs/a.txt", [root], case_insensitive=True)
    with pytest.raises(RootViolation):
        resolve_in_roots(f"{upper}/docs/a.txt", [root], case_insensitive=False)
    with pytest.raises(RootViolation):
        resolve_in_roots(f"{upper}/../outside/secret.txt", [root], case_insensitive=True)


def test_no_roots_means_no_paths(tree) -> None:
    with pytest.raises(RootViolation, match="no roots"):
        resolve_in_roots("docs/a.txt", [])


def test_client_roots_intersect_with_the_servers(tree) -> None:
    root, docs = tree["root"].resolve(), (tree["root"] / "docs").resolve()
    client = roots_from_uris([docs.as_uri(), tree["outside"].resolve().as_uri(), "https://example.com/x"])
    allowed = intersect([str(root)], client)
    assert allowed == [str(docs)]
    with pytest.raises(RootViolation):
        resolve_in_roots(str(root / "deep"), allowed)
    assert intersect([str(docs)], [str(root)]) == [str(docs)]
    assert intersect([str(root)], None) == [str(root)]
