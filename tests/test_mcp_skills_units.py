"""Skill packages without a server: the frontmatter reader, the manifest, and every package refused at
registration (docs/skill-packages.md)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from agentmw import Agent
from agentmw.errors import RegistrationError
from agentmw.skill_packages import (
    MAX_SKILL_BYTES,
    MAX_SKILL_FILES,
    SkillPackage,
    SkillPackageError,
    parse_frontmatter,
    serve_package,
)

# --- the frontmatter reader: what a YAML parser reads, or a refusal --------------------------------------------

READ = [
    (  # YAML strips only spaces and tabs around a value, not Unicode spaces
        "---\nname: a\ndescription: \u00a0x\u3000  \n---\n",
        {"name": "a", "description": "\u00a0x\u3000"},
        "",
    ),
    ("---\nname: a\ndescription: One line\n---\nBody\n", {"name": "a", "description": "One line"}, "Body\n"),
    (
        "\ufeff---\r\nname: a\r\ndescription: CRLF and a BOM\r\n---\r\n",
        {"name": "a", "description": "CRLF and a BOM"},
        "",
    ),
    (
        "---\nname: a\ndescription: goes on\n  over two lines # and a comment\n---\n",
        {"name": "a", "description": "goes on over two lines"},
        "",
    ),
    (
        "---\nname: a\ndescription: >\n  folded\n  text\n\n  second\nlicense: MIT\n---\n",
        {"name": "a", "description": "folded text\nsecond\n", "license": "MIT"},
        "",
    ),
    (
        "---\nname: a\ndescription: |-\n  literal\n    indented\n  end\n---\n",
        {"name": "a", "description": "literal\n  indented\nend"},
        "",
    ),
    ("---\nname: a\ndescription: |+\n  kept\n\n---\n", {"name": "a", "description": "kept\n\n"}, ""),
    (
        "---\nname: a\ndescription: 'it''s quoted: fine'\ncompatibility: \"needs \\\"git\\\" \\u00e9\"\n---\n",
        {"name": "a", "description": "it's quoted: fine", "compatibility": 'needs "git" é'},
        "",
    ),
    (
        (
            '---\n# a comment\nname: a\ndescription: d\nmetadata:\n  version: "1.0"\n  io.example/k: v\n'
            "allowed-tools: Bash(git:*) Read\n---\n"
        ),
        {
            "name": "a",
            "description": "d",
            "metadata": {"version": "1.0", "io.example/k": "v"},
            "allowed-tools": "Bash(git:*) Read",
        },
        "",
    ),
    ("---\nname: a\ndescription: -dash and x:y are strings\n---\n", None, ""),
]


@pytest.mark.parametrize(("text", "frontmatter", "body"), READ)
def test_the_reader_reads_the_yaml_the_agent_skills_fields_use(
    text: str, frontmatter: dict | None, body: str
) -> None:
    got, rest = parse_frontmatter(text)
    if frontmatter is None:
        frontmatter = {"name": "a", "description": "-dash and x:y are strings"}
    assert (got, rest) == (frontmatter, body)


def test_a_yaml_parser_reads_every_accepted_sample_the_same() -> None:
    import yaml  # PyYAML: FastMCP's own frontmatter reader, installed with it (the bench extra)

    for text, frontmatter, _ in READ:
        block = text.removeprefix("\ufeff").replace("\r\n", "\n").split("---\n")[1]
        assert yaml.safe_load(block) == (frontmatter or parse_frontmatter(text)[0]), text


REFUSED = [
    ("name: a\n", "must begin with YAML frontmatter"),
    ("--- \nname: a\n---\n", "must begin with YAML frontmatter"),
    ("---\nname: a\ndescription: 1.0\n---\n", "line 3: 'description': YAML reads '1.0' as a number"),
    ("---\nname: a\ndescription: yes\n---\n", "as a number, boolean, null or date; quote it"),
    ("---\nname: a\ndescription: 2024-01-01\n---\n", "or date; quote it"),
    ("---\nname: a\ndescription: ~\n---\n", "quote it"),
    ("---\nname: a\ndescription: a: b\n---\n", "cannot hold ': '"),
    ("---\nname: a\ndescription: [a, b]\n---\n", "not a plain string"),
    ("---\nname: a\ndescription: &anchor d\n---\n", "not a plain string"),
    ("---\nname: a\nname: b\n---\n", "duplicate key 'name'"),
    ("---\nname: a\ntags:\n  - x\n---\n", "line 4: expected 'key: value'"),
    ("---\nname: a\n\tdescription: d\n---\n", "tabs"),
    ('---\nname: a\ndescription: "open\n---\n', "must end on its line"),
    ('---\nname: a\ndescription: "bad \\q"\n---\n', "unsupported escape"),
    ("---\nname: a\nmetadata:\n  deep:\n    x: y\n---\n", "one level deep"),
    ("---\nname: a\ndescription: >\n  a\n    b\n---\n", "more-indented lines in a folded"),
    ("---\nname:a\n---\n", "expected 'key: value'"),
    # what YAML 1.1 reads as a line break (or refuses), or no YAML reader allows raw: refused, never read apart
    ("---\nname: a\ndescription: one\rtwo\n---\n", "line 3: character U+000D"),
    ("---\nname: a\ndescription: one\x85two\n---\n", "line 3: character U+0085"),
    ("---\nname: a\ndescription: one\u2028two\n---\n", "character U+2028"),
    ("---\nname: a\ndescription: one\u2029two\n---\n", "character U+2029"),
    ("---\nname: a\ndescription: d\n# \x1b[2J in a comment\n---\n", "line 4: character U+001B"),
    ("---\nname: a\ndescription: 'a\x7fb'\n---\n", "character U+007F"),
    ("---\nname: a\ndescription: a\x9bb\n---\n", "character U+009B"),
]


@pytest.mark.parametrize(("text", "message"), REFUSED)
def test_the_reader_refuses_what_it_would_read_differently_from_yaml(text: str, message: str) -> None:
    with pytest.raises(SkillPackageError, match=None) as caught:
        parse_frontmatter(text)
    assert message in str(caught.value)


# --- packages built in code -------------------------------------------------------------------------------------


def test_a_code_package_renders_a_skill_md_whose_frontmatter_reads_back_as_given() -> None:
    package = SkillPackage(
        "no",  # YAML would read a plain `no` as false: rendered quoted
        'Says "no": politely',
        "# Steps\n",
        license="MIT",
        metadata={"version": "1.0"},
        allowed_tools="Read",
        frontmatter={"x-owner": "team"},
        files={"ref/a.md": "é", "b.bin": b"\x00\xff"},
    )
    skill_md = package.file("SKILL.md")
    assert skill_md is not None and package.files[0] is skill_md
    frontmatter, body = parse_frontmatter(skill_md.data.decode())
    assert (
        frontmatter
        == package.frontmatter
        == {
            "name": "no",
            "description": 'Says "no": politely',
            "license": "MIT",
            "metadata": {"version": "1.0"},
            "allowed-tools": "Read",
            "x-owner": "team",
        }
    )
    assert body == "\n# Steps\n"
    binary = package.file("b.bin")
    assert binary is not None and binary.text is None and binary.mime_type == "application/octet-stream"
    text = package.file("ref/a.md")
    assert text is not None and text.text == "é" and text.mime_type == "text/markdown"


def test_a_code_package_renders_frontmatter_every_yaml_reader_reads_back_or_is_refused() -> None:
    import yaml  # PyYAML reads YAML 1.1, where NEL, LS and PS are line breaks

    package = SkillPackage("x", "LS\u2028PS\u2029BOM\ufeff é", metadata={"k": "tab\tnewline\n"})
    block = package.files[0].data.decode().split("---\n")[1]
    assert (
        yaml.safe_load(block) == package.frontmatter == parse_frontmatter(package.files[0].data.decode())[0]
    )
    assert "\u2028" not in block and "é" in block  # escaped only where YAML would not read it back
    for description in ("a\x85b", "a\x7fb", "a\x9bb", "a\x1b[2Jb", "a\rb"):
        with pytest.raises(SkillPackageError, match="'description' holds a control character"):
            SkillPackage("x", description)
    with pytest.raises(SkillPackageError, match="'metadata.k' holds a control character"):
        SkillPackage("x", "d", metadata={"k": "\x00"})


def test_a_folder_frontmatter_escape_cannot_smuggle_a_control_character(tmp_path: Path) -> None:
    folder = tmp_path / "pkg"
    folder.mkdir()
    (folder / "SKILL.md").write_text('---\nname: pkg\ndescription: "ok\\x1b]0;pwned\\x07"\n---\n')
    with pytest.raises(SkillPackageError, match="'description' holds a control character"):
        SkillPackage.from_folder(folder)


@pytest.mark.parametrize(
    ("name", "shown"),
    [
        (b"bad\xff.md", r"file name b'sub/bad\xff.md' is not UTF-8"),
        (b"two\nlines.md", r"file path 'sub/two\nlines.md' holds a control character"),
        (b"esc\x1b.md", r"file path 'sub/esc\x1b.md' holds a control character"),
    ],
)
def test_a_file_name_no_skill_uri_can_hold_is_refused_naming_it(
    tmp_path: Path, name: bytes, shown: str
) -> None:
    folder = write(tmp_path / "pkg")
    (folder / "sub").mkdir()
    with open(os.path.join(os.fsencode(folder / "sub"), name), "wb") as f:
        f.write(b"x")
    with pytest.raises(SkillPackageError) as caught:
        SkillPackage.from_folder(folder)
    assert shown in str(caught.value)
    with pytest.raises(SkillPackageError, match="control character"):
        SkillPackage("x", "d", files={"a\nb.md": "x"})


def test_the_manifest_is_the_hash_and_size_of_each_file_with_its_uri() -> None:
    package = SkillPackage("refunds", "Refunds", "Do it.", files={"examples/an email.md": "hi"})
    served = serve_package(package, "acme/billing")
    assert served.uri == "skill://acme/billing/refunds/SKILL.md"
    assert served.root == "skill://acme/billing/refunds"
    by_uri = {r["uri"]: r for r in served.entry["resources"]}
    assert list(by_uri) == [served.uri, "skill://acme/billing/refunds/examples/an%20email.md"]
    for uri, item in by_uri.items():
        data = served.files[uri].data
        assert item == {"uri": uri, "digest": "sha256:" + hashlib.sha256(data).hexdigest(), "size": len(data)}
    assert served.entry["frontmatter"] == {"name": "refunds", "description": "Refunds"}
    assert [c["uri"] for c in served.directories[served.root]] == [
        served.uri,
        "skill://acme/billing/refunds/examples",
    ]
    with pytest.raises(SkillPackageError, match="prefix segment"):
        serve_package(package, "acme/bad segment")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"name": "Bad_Name"}, "naming rule"),
        ({"name": "double--hyphen"}, "naming rule"),
        ({"name": "-lead"}, "naming rule"),
        ({"name": "x" * 65}, "naming rule"),
        ({"description": " "}, "non-empty 'description'"),
        ({"description": "d" * 1025}, "at most 1024"),
        ({"compatibility": ""}, "1-500 characters"),
        ({"metadata": {"io.modelcontextprotocol/x": "y"}}, "reserved for MCP extensions"),
        ({"files": {"../up.md": "x"}}, "must be relative"),
        ({"files": {"/abs.md": "x"}}, "must be relative"),
        ({"files": {"a//b.md": "x"}}, "must be relative"),
        ({"files": {"SKILL.md": "x"}}, "SKILL.md is made from"),
        ({"files": {"a": "x", "a/b": "y"}}, "both a file and a directory"),
        ({"files": {f"f{i}.md": "" for i in range(MAX_SKILL_FILES)}}, f"more than {MAX_SKILL_FILES} files"),
        ({"files": {"big.bin": b"\0" * MAX_SKILL_BYTES}}, "16 MiB"),
    ],
)
def test_a_bad_code_package_is_refused_when_made(options: dict, message: str) -> None:
    arguments = {"name": "ok", "description": "fine", **options}
    with pytest.raises(SkillPackageError) as caught:
        SkillPackage(**arguments)
    assert message in str(caught.value)
    assert isinstance(caught.value, RegistrationError)


def test_the_limits_themselves_are_accepted() -> None:
    files = {f"f{i}.md": "" for i in range(MAX_SKILL_FILES - 1)}
    assert len(SkillPackage("many", "Many", files=files).files) == MAX_SKILL_FILES


# --- packages read from a folder --------------------------------------------------------------------------------


def write(
    folder: Path, skill_md: str | None = "---\nname: {name}\ndescription: A skill\n---\nSteps\n"
) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    if skill_md is not None:
        (folder / "SKILL.md").write_text(skill_md.format(name=folder.name))
    return folder


def test_a_folder_is_read_with_every_file_but_hidden_ones(tmp_path: Path) -> None:
    folder = write(tmp_path / "notes")
    (folder / "sub").mkdir()
    (folder / "sub" / "b.txt").write_text("b")
    (folder / ".git").mkdir()
    (folder / ".git" / "config").write_text("x")
    (folder / ".hidden.md").write_text("h")
    package = SkillPackage.from_folder(folder)
    assert [f.path for f in package.files] == ["SKILL.md", "sub/b.txt"]
    assert package.source == folder and package.instructions == "Steps\n"
    everything = SkillPackage.from_folder(folder, include_hidden=True)
    assert [f.path for f in everything.files] == ["SKILL.md", ".git/config", ".hidden.md", "sub/b.txt"]


def test_a_link_inside_the_folder_is_served_as_the_file_it_names(tmp_path: Path) -> None:
    folder = write(tmp_path / "linked")
    (folder / "real.md").write_text("real")
    os.symlink(folder / "real.md", folder / "alias.md")
    package = SkillPackage.from_folder(folder)
    alias = package.file("alias.md")
    assert alias is not None and alias.data == b"real"


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda f: (f / "SKILL.md").unlink(), "no SKILL.md at its root"),
        (lambda f: (f / "SKILL.md").write_text("# no frontmatter\n"), "must begin with YAML frontmatter"),
        (lambda f: (f / "SKILL.md").write_bytes(b"---\nname: \xff\n---\n"), "not UTF-8"),
        (
            lambda f: (f / "SKILL.md").write_text("---\nname: other\ndescription: d\n---\n"),
            "must equal the folder's name 'pkg'",
        ),
        (
            lambda f: (f / "SKILL.md").write_text("---\nname: pkg\ndescription: 12\n---\n"),
            "line 3: 'description'",
        ),
        (lambda f: os.symlink(f.parent / "outside.md", f / "leak.md"), "leads outside the folder"),
        (lambda f: os.symlink(f.parent, f / "up"), "link to a folder"),
        (lambda f: os.mkfifo(f / "pipe"), "not a regular file"),
        (
            lambda f: [(f / f"f{i}").write_text("") for i in range(MAX_SKILL_FILES)],
            f"more than {MAX_SKILL_FILES} files",
        ),
        (lambda f: (f / "big.bin").write_bytes(b"\0" * (MAX_SKILL_BYTES + 1)), "16 MiB"),
    ],
)
def test_a_bad_folder_is_refused_with_what_to_change(tmp_path: Path, make: object, message: str) -> None:
    (tmp_path / "outside.md").write_text("secret")
    folder = write(tmp_path / "pkg")
    make(folder)  # type: ignore[operator]
    with pytest.raises(SkillPackageError) as caught:
        SkillPackage.from_folder(folder)
    assert message in str(caught.value)
    assert "'" + str(folder) + "'" in str(caught.value) or "SKILL.md" in str(caught.value)


def test_a_folder_given_as_a_link_may_be_named_like_the_link(tmp_path: Path) -> None:
    real = write(tmp_path / "realname", "---\nname: linkname\ndescription: d\n---\n")
    os.symlink(real, tmp_path / "linkname")
    assert SkillPackage.from_folder(tmp_path / "linkname").name == "linkname"
    with pytest.raises(SkillPackageError, match="must equal the folder's name 'realname'"):
        SkillPackage.from_folder(tmp_path / "realname")  # the link's name is not the folder's own
    os.symlink(real, tmp_path / "other")
    with pytest.raises(SkillPackageError, match="must equal the folder's name"):
        SkillPackage.from_folder(tmp_path / "other")


def test_a_path_that_is_no_folder_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SkillPackageError, match="not a folder"):
        SkillPackage.from_folder(tmp_path / "missing")


# --- registration -----------------------------------------------------------------------------------------------


def test_registration_refuses_a_second_package_at_the_same_uri_and_keeps_the_first() -> None:
    agent = Agent("reg", store="memory://")
    first = agent.add_skill_package(SkillPackage("same", "First"))
    with pytest.raises(SkillPackageError, match="served already"):
        agent.include(SkillPackage("same", "Second"))
    assert agent.skill_packages == {first.uri: first}
    agent.add_skill_package(SkillPackage("same", "Elsewhere"), prefix="other")
    assert sorted(agent.skill_packages) == ["skill://other/same/SKILL.md", "skill://same/SKILL.md"]
    with pytest.raises(TypeError, match="SkillPackage"):
        agent.add_skill_package("skills/same")  # type: ignore[arg-type]


def test_registration_serves_skill_md_as_a_listed_resource_and_the_rest_by_uri() -> None:
    agent = Agent("reg", store="memory://")
    before = agent.revision
    served = agent.add_skill_package(SkillPackage("pkg", "Described", files={"a.md": "a"}), roles=["ops"])
    assert agent.revision > before
    main = agent.resources[served.uri]
    assert (main.name, main.contract, main.mime_type) == ("pkg", "Described", "text/markdown")
    assert main.policy is not None and main.policy.roles == {"ops"}
    assert "skill://pkg/a.md" not in agent.resources
    found = agent.find_resource("skill://pkg/a.md")
    # a file is decided as its package is: it follows the SKILL.md capability, whose roles are {"ops"}
    assert found is not None and found[0].policy is not None and found[0].policy.follows is main
    assert agent.access is not None  # a policy makes the gatekeeper, as a tool's does
