"""Roots, issue 9 item 6: path forms other layers read differently are refused with the rule they broke.

The first half is a corpus run against ``resolve_in_roots`` (every case, plain and percent-encoded); the
second sends a sample of every category through each face's real client: the official MCP client in both
eras, the ``a2a-sdk`` client (blocking and streamed) and the official ``@ag-ui/client`` (Node), including a
tool a skill calls with ``ctx.call``. Each refusal must be the same rejection roots refusals always were,
name its rule, and run nothing.
"""

from __future__ import annotations

import os
import unicodedata
import uuid
from pathlib import Path
from urllib.parse import quote

import httpx
import httpx2
import mcp_types as types
import pytest
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types.a2a_pb2 import Message, Part, Role, SendMessageRequest, TaskState
from google.protobuf import struct_pb2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from starlette.applications import Starlette

from agentmw import Agent, AgentMiddleware, Context, skill, tool
from agentmw.a2a import A2ASettings
from agentmw.context import ToolCallFailed
from agentmw.safety import RootedPath, human_gate
from agentmw.safety.roots import RootViolation, _char_problem, resolve_in_roots, roots_from_uris
from tests.conftest import serve


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("ambiguous")
    root, outside = base / "root", base / "outside"
    (root / "docs").mkdir(parents=True)
    outside.mkdir()
    (root / "docs" / "a.txt").write_text("inside")
    (outside / "secret.txt").write_text("secret")
    os.symlink(outside, root / "link_out")
    os.symlink(root / "loop", root / "loop")  # points at itself
    os.symlink(root / "loop_b", root / "loop_a")  # a two-link cycle
    os.symlink(root / "loop_a", root / "loop_b")
    os.symlink("../docs/cycle", root / "docs" / "cycle")  # relative, to itself
    os.symlink(root / "loop", root / "docs" / "to_loop")  # a good-looking link into a loop
    os.symlink(root / "docs", root / "docs" / "self")  # a directory cycle: not a loop, it resolves
    return {"base": base, "root": root.resolve(), "outside": outside.resolve()}


def enc(text: str) -> str:
    return quote(text, safe="")


# Each category: the paths, and the words the refusal must contain (any one of them) to name its rule.
REFUSED: dict[str, tuple[tuple[str, ...], list[str]]] = {
    "other URI schemes": (
        ("URI", "scheme"),
        [
            "http://example.com/x",
            "https://example.com/etc/passwd",
            "HTTP://EXAMPLE.COM",
            "ftp://host/file",
            "data:text/plain;base64,aGk=",
            "data:,hello",
            "javascript:alert(1)",
            "JavaScript:alert(1)",
            "smb://server/share/x",
            "s3://bucket/key",
            "jar:file:///x.jar!/y",
            "mailto:a@example.com",
            "gopher://host/",
            "vscode-remote://ssh/etc/passwd",
            "ab:x",
            "a+b-c.d:x",
            "urn:isbn:0451450523",
            "http%3A%2F%2Fexample.com%2Fx",
            "file%3A%2F%2F%2Fetc%2Fpasswd",
            "file%253A%252F%252F%252Fetc%252Fpasswd",
        ],
    ),
    "home-directory forms": (
        ("'~'",),
        [
            "~",
            "~/",
            "~/x",
            "~/.ssh/id_rsa",
            "~root/.ssh/authorized_keys",
            "~user/x",
            "~+/x",
            "~-/x",
            "~/../../etc/passwd",
            "%7E/.ssh/id_rsa",
            "%7e%2F.bashrc",
            "~%2F.bashrc",
            "%257E/x",
        ],
    ),
    "Windows drives": (
        ("drive",),
        [
            "C:\\Windows\\win.ini",
            "C:x",
            "c:/x",
            "C:",
            "C:/",
            "C:\\",
            "z:..\\outside",
            "C:../outside",
            "d:secret.txt",
            "%43:/x",
            "C%3A%5Cx",
            "C%3Ax",
            "c%253a/x",
            "E:/docs/a.txt",
        ],
    ),
    "UNC and network paths": (
        ("UNC",),
        [
            "\\\\server\\share",
            "//server/share",
            "\\\\server\\share\\x",
            "//server/share/docs/a.txt",
            "\\/server/share",
            "/\\server\\share",
            "\\\\127.0.0.1\\c$\\x",
            "//localhost/c$/x",
            "///etc/passwd",
            "%2F%2Fserver%2Fshare",
            "%5C%5Cserver%5Cshare",
            "%252F%252Fserver/share",
        ],
    ),
    "Windows device namespaces": (
        ("device-namespace",),
        [
            "\\\\?\\C:\\x",
            "\\\\.\\PhysicalDrive0",
            "//?/C:/x",
            "//./pipe/x",
            "\\??\\C:\\x",
            "\\\\.\\COM1",
            "\\\\?\\UNC\\server\\share",
            "%5C%5C%3F%5CC%3A%5Cx",
            "\\\\?\\GLOBALROOT\\Device\\x",
        ],
    ),
    "Windows device names": (
        ("device",),
        [
            "CON",
            "con",
            "NUL",
            "nul.txt",
            "docs/NUL",
            "COM1",
            "com9.log",
            "LPT1",
            "lpt3.txt",
            "AUX",
            "PRN",
            "prn.md",
            "CONIN$",
            "CONOUT$",
            "COM\u00b9",
            "LPT\u00b2.txt",
            "CON .txt",
            "docs/aux.tar.gz",
            "nul/x",
            "Con",
            "COM0",
            "%4E%55%4C",
            "docs/Clock$",
        ],
    ),
    "Windows 8.3 short names": (
        ("8.3",),
        ["PROGRA~1", "docs/SECRET~1.TXT", "GIT~1/config", "a~1", "LONGNA~12.md"],
    ),
    "invalid UTF-8 after percent-decoding": (
        ("UTF-8",),
        [
            "%c0%ae%c0%ae/",
            "%c0%ae%c0%ae/%c0%ae%c0%ae/outside/secret.txt",
            "%ff",
            "%fe%ff",
            "docs/%80",
            "%e0%80%ae%e0%80%ae/outside",
            "%f0%80%80%ae",
            "%ed%a0%80",
            "%c1%9c",
            "%c0%af",
            "%25c0%25ae%25c0%25ae/",
            "%f8%88%80%80%80",
            "docs/%c3",
            "docs/%e2%82",
            "%c0%2e",
            "docs/a%bf.txt",
            "%C0%AE%C0%AE%C0%AF",
        ],
    ),
    "lookalikes of '.', '/', '\\'": (
        ("lookalike", "normalises"),
        [
            "\uff0e\uff0e/outside/secret.txt",
            "\uff0e\uff0e\uff0foutside",
            "docs\uff0fa.txt",
            "..\uff3coutside",
            "docs\u2215a.txt",
            "..\u2044outside",
            "\u2024\u2024/outside",
            "\u2025/outside",
            "\u2026",
            "\ufe52\ufe52/outside",
            "docs\ufe68a.txt",
            "\u29f8etc\u29f8passwd",
            "..\u2216outside",
            "docs\u2571a.txt",
            "..\u29f9outside",
            "%EF%BC%8E%EF%BC%8E/outside",
            "%E2%88%95etc",
            "..\u00a5outside",
            "..\u20a9outside",
            "\u2488txt",
            "\u2100",
            "\u2219\u2219/outside",
            "docs\u0338a",
            "\u3002\uff0e/x",
            "\u2024/docs/a.txt",
        ],
    ),
    "lookalikes of ':', '~', '%'": (
        ("lookalike", "normalises"),
        [
            "C\uff1a/x",
            "docs\ufe55x",
            "docs\u2236x",
            "\uff5e/x",
            "\u223c/.ssh",
            "\uff05c0\uff05ae/x",
            "docs\ufe6a2e",
            "\u02d0x",
        ],
    ),
    "colons and NTFS streams": (
        ("':'", "scheme"),
        [
            "a.txt::$DATA",
            "docs/a.txt:Zone.Identifier",
            "docs/a:b",
            ":x",
            "docs:",
            "1:2",
            "docs/C:x",
            "%3Ax",
            "docs/::$INDEX_ALLOCATION",
        ],
    ),
    "backslash inside a name": (
        ("backslash",),
        [
            "sub\\note.md",
            "docs\\a.txt",
            "a\\",
            "\\",
            "docs/x\\y",
            "%5C",
            "docs%5ca.txt",
            "docs%255Ca.txt",
            "\\etc\\passwd",
            "..\\outside",
        ],
    ),
    "environment variables": (
        ("environment",),
        [
            "$HOME/.ssh/id_rsa",
            "${HOME}/x",
            "$(whoami)",
            "%USERPROFILE%/x",
            "docs/%TEMP%",
            "docs/$x",
            "%HOMEPATH%",
            "$PWD/../outside",
        ],
    ),
    "bidi and invisible characters": (
        ("bidirectional", "invisible"),
        [
            "docs/a\u202etxt.exe",
            "\u2066docs/a.txt",
            "docs/\u200ba.txt",
            "\ufeffdocs/a.txt",
            "docs/a\u00ad.txt",
            "docs\u2028a",
            "docs\u2029a",
            "\u061cdocs",
            "docs/\u200da",
            "docs/\u200ea",
            "%E2%80%AEdocs",
            "docs/\u2060a",
        ],
    ),
    "control characters": (
        ("control",),
        [
            "docs/\x85a",
            "docs/\x9ba",
            "docs/\x1b[2J",
            "docs/\x7f",
            "docs/\ta",
            "%1b",
            "%7f",
            "%c2%85",
            "docs\r",
            "docs/a.txt\n",
        ],
    ),
    "mis-decoded text": (
        ("mis-decoded", "surrogate"),
        ["docs/\ufffd", "%ef%bf%bd", "docs/\uffff", "docs/\ufdd0", "docs/\ud800", "\udcff", "%ef%bf%be"],
    ),
    "combining marks on '.' or '/'": (
        ("combining",),
        [".\u0301./outside", "..\u0300/outside", "docs/\u0301a", "\u0307docs"],
    ),
    "file URIs that are not local or are ambiguous": (
        ("file:",),
        [
            "file://server/share/x",
            "file://evil.example.com/etc/passwd",
            "file://127.0.0.1/etc/passwd",
            "file://localhost:8080/etc/passwd",
            "file://user@localhost/etc/passwd",
            "file:docs/a.txt",
            "file:",
            "file://",
            "file:///etc/passwd?x",
            "file:///etc/passwd#frag",
            "file:///x/docs%2Fa.txt",
            "file:///x%5Cy",
            "FILE://SERVER/x",
            "file:///C:\\x",
            "file://[::1/x",
            "file://[::1]/etc/passwd",
        ],
    ),
    "file URIs to Windows forms": (
        ("drive", "UNC"),
        [
            "file:///C:/Windows/win.ini",
            "file:///c:/x",
            "file:////server/share/x",
            "file://///server/share",
            "file://localhost/C:/x",
            "file:///%43:/x",
            "file:///C|/Windows/win.ini",
            "file:///c%7C/x",
            "file:///C%3A",
        ],
    ),
    "file URIs with invalid UTF-8": (
        ("UTF-8",),
        ["file:///%c0%ae%c0%ae/etc/passwd", "file:///%ff", "file://localhost/%c0%af"],
    ),
}

# Paths that look odd but are plain names, and stay inside.
ALLOWED = [
    "console.txt",
    "nullable.md",
    "com10",
    "auxiliary",
    "prn_report",
    "lpt",
    "conference/notes",
    "docs/a~b",
    "docs/~backup",
    "docs/backup~",
    "price$5.txt",
    "100%",
    "50% off.txt",
    "docs/a.b.c",
    "\u00fcn\u00ef.txt",
    "\u65e5\u672c\u8a9e.txt",
    "na\u00efve caf\u00e9.md",
    "emoji-\U0001f600.txt",
    "\u03a9.txt",
    "x\u00b7y",
    "\u540d\u524d\u3000\u7a7a\u767d",
    "docs/self/self/a.txt",
    "docs/%2e/a.txt",
    "docs/a.txt%2F",
    "COM",
    "LPT",
    "CONSOLE",
    "NULL",
    "docs/CON-tract",
]


def test_the_ambiguous_corpus_is_large() -> None:
    assert len(REFUSED) >= 18
    assert all(len(paths) >= 3 for _, paths in REFUSED.values())
    assert sum(len(paths) for _, paths in REFUSED.values()) >= 200


@pytest.mark.parametrize("category", list(REFUSED))
def test_ambiguous_forms_are_refused_with_their_rule(tree, category: str) -> None:
    root = str(tree["root"])
    words, paths = REFUSED[category]
    wrong = []
    for raw in paths:
        for form in (raw, raw.replace("/x", f"{root}/x")):
            try:
                wrong.append(f"accepted: {form!r} -> {resolve_in_roots(form, [root])}")
            except RootViolation as exc:
                if not any(word in str(exc) for word in words):
                    wrong.append(f"refused for another reason: {form!r}: {exc}")
    assert wrong == []


@pytest.mark.parametrize("category", list(REFUSED))
def test_encoded_ambiguous_forms_are_refused(tree, category: str) -> None:
    """Percent-encoding any refused form (once or twice) does not make it acceptable."""
    root = str(tree["root"])
    wrong = []
    for raw in REFUSED[category][1]:
        try:
            raw.encode("utf-8")
        except UnicodeEncodeError:
            continue  # a lone surrogate has no UTF-8 form to percent-encode
        for form in (enc(raw), enc(enc(raw))):
            try:
                wrong.append(f"accepted: {form!r} -> {resolve_in_roots(form, [root])}")
            except RootViolation:
                pass
    assert wrong == []


def test_plain_names_that_look_odd_stay_allowed(tree) -> None:
    root = str(tree["root"])
    wrong = []
    for raw in ALLOWED:
        try:
            resolved = resolve_in_roots(raw, [root])
            if not resolved.startswith(root + os.sep):
                wrong.append(f"outside: {raw!r} -> {resolved}")
        except RootViolation as exc:
            wrong.append(f"refused: {raw!r}: {exc}")
    assert wrong == []


def test_symlink_loops_are_refused(tree) -> None:
    root = str(tree["root"])
    loops = [
        "loop",
        "loop/x",
        "loop/../docs/a.txt",
        "loop_a",
        "loop_b/secret",
        "docs/cycle",
        "docs/cycle/x",
        "docs/to_loop",
        "docs/to_loop/x",
        "docs/../loop_a/y",
        "%6Coop",
        "docs/self/to_loop",
        f"{root}/loop",
        f"file://{root}/loop_a",
        f"file://localhost{root}/docs/cycle",
    ]
    for raw in loops:
        with pytest.raises(RootViolation, match="symlink loop"):
            resolve_in_roots(raw, [root])
    assert resolve_in_roots("docs/self/self/a.txt", [root]) == f"{root}/docs/a.txt", (
        "a directory cycle resolves"
    )


def test_file_uris_are_checked_as_the_path_they_name(tree) -> None:
    root, outside = str(tree["root"]), str(tree["outside"])
    a = f"{root}/docs/a.txt"
    for uri in (
        f"file://{root}/docs/a.txt",
        f"file://localhost{root}/docs/a.txt",
        f"file://LOCALHOST{root}/docs/a.txt",
        f"file:{root}/docs/a.txt",
        f"FILE://{root}/docs/a.txt",
        f"File://{root}/docs/%61.txt",
        f"file://{root}/docs/../docs/a.txt",
        f"file://{root}/docs//a.txt",
        f"file://{root}/./docs/a.txt",
        f"file://{quote(root)}/docs/%2561.txt",
        Path(a).as_uri(),
    ):
        assert resolve_in_roots(uri, [root]) == a, uri
    assert resolve_in_roots(f"file://{root}", [root]) == root
    assert resolve_in_roots(f"file://{root}/docs/new.txt", [root]) == f"{root}/docs/new.txt"
    for uri in (
        "file:///etc/passwd",
        "file:///",
        f"file://{root}/../outside/secret.txt",
        f"file://{root}/%2e%2e/outside/secret.txt",
        f"file://{root}/%252e%252e/outside/secret.txt",
        f"file://{root}/link_out/secret.txt",
        f"file://{outside}/secret.txt",
        f"file://localhost{outside}/secret.txt",
        f"file://{root}x/y",
    ):
        with pytest.raises(RootViolation, match="outside the allowed roots"):
            resolve_in_roots(uri, [root])
    with pytest.raises(RootViolation, match="NUL"):
        resolve_in_roots(f"file://{root}/docs/a.txt%00", [root])
    for hidden in ("\n", "\t", "\r", "\x00", "\x1b"):  # urlsplit drops tabs and newlines: refuse, never strip
        with pytest.raises(RootViolation, match="control|NUL"):
            resolve_in_roots(f"file://{root}/docs/a{hidden}.txt", [root])


def test_client_roots_must_be_local_file_uris(tree) -> None:
    root = tree["root"]
    assert roots_from_uris(
        [
            f"file://server{root}",
            f"file://localhost{root}",
            "https://x/y",
            "file:///%ff",
            f"file://{root}/%00",
        ]
    ) == [str(root)]


def test_every_nfkc_lookalike_of_a_path_character_is_refused() -> None:
    """The rule is computed, not listed: every code point whose NFKC form has '.', '/', '\\', ':', '~' or '%'."""
    missed = []
    for code in range(0x80, 0x110000):
        ch = chr(code)
        if unicodedata.category(ch) == "Cs":
            continue
        if set(unicodedata.normalize("NFKC", ch)) & set("./\\:~%") and _char_problem(ch) is None:
            missed.append(f"U+{code:04X}")
    assert missed == []


def test_the_hot_path_skips_the_unicode_work(tree, monkeypatch) -> None:
    from agentmw.safety import roots

    def fail(*_: object) -> None:
        raise AssertionError("a plain ASCII path took the slow path")

    monkeypatch.setattr(roots, "_decode", fail)
    monkeypatch.setattr(roots, "_check_form", fail)
    root = str(tree["root"])
    assert resolve_in_roots("docs/a.txt", [root]) == f"{root}/docs/a.txt"
    with pytest.raises(RootViolation, match="device"):
        resolve_in_roots("docs/nul.txt", [root])
    with pytest.raises(RootViolation, match="outside"):
        resolve_in_roots("../outside/secret.txt", [root])


# --- through every face, with each face's real client -----------------------------------------------------------

ran: list[str] = []


@tool
@skill
async def read_file(path: RootedPath) -> str:
    """Read a text file inside the roots."""
    ran.append(path)
    return Path(path).read_text()


@skill
async def read_via_tool(path: str, ctx: Context) -> str:
    """Read a file through the read_file tool (a visible tool call on AG-UI)."""
    try:
        return await ctx.call("read_file", {"path": path})
    except ToolCallFailed as exc:  # the tool's refusal becomes this skill's answer
        return f"tool refused: {exc}"


@tool
@skill
@human_gate(side_effects="Deletes the file")
async def delete_file(path: RootedPath) -> str:
    """Delete a file inside the roots, once a person approves."""
    ran.append(f"delete:{path}")
    return f"deleted {path}"


def build(root: Path) -> Starlette:
    agent = Agent("roots-ambiguous", roots=[str(root)], a2a=A2ASettings(push=None))
    agent.include(read_file)
    agent.include(read_via_tool)
    agent.include(delete_file)
    app = Starlette()
    app.add_middleware(AgentMiddleware, agent=agent)
    return app


#: One or two per category (JSON cannot carry a lone surrogate, so that one is covered above only).
SAMPLE = [
    "file:///etc/passwd",
    "file://server/share/x",
    "http://example.com/x",
    "data:,hello",
    "javascript:alert(1)",
    "~/.ssh/id_rsa",
    "~root/x",
    "C:\\Windows\\win.ini",
    "C:x",
    "c:/x",
    "\\\\server\\share",
    "//server/share",
    "\\\\?\\C:\\x",
    "CON",
    "docs/nul.txt",
    "PROGRA~1",
    "%c0%ae%c0%ae/",
    "%ff",
    "\uff0e\uff0e/outside.txt",
    "docs\uff0fa.txt",
    "..\u2215outside.txt",
    "\u2024\u2024/outside.txt",
    "a.txt::$DATA",
    "sub\\note.md",
    "$HOME/x",
    "docs/a\u202etxt",
    "docs/\x1b[2J",
    "docs/\ufffd",
    "loop",
    "file:///C:/x",
]
RULE_WORDS = (
    "outside the allowed roots",
    "URI",
    "'~'",
    "drive",
    "UNC",
    "device",
    "8.3",
    "UTF-8",
    "lookalike",
    "normalises",
    "':'",
    "backslash",
    "environment",
    "bidirectional",
    "control",
    "mis-decoded",
    "symlink loop",
    "file:",
)


def rule_named(text: str) -> bool:
    return "refused" in text and any(word in text for word in RULE_WORDS)


@pytest.fixture(scope="module")
def face(tmp_path_factory):
    root = tmp_path_factory.mktemp("faces") / "root"
    (root / "docs").mkdir(parents=True)
    (root / "docs" / "a.txt").write_text("inside")
    (root.parent / "outside.txt").write_text("secret")
    os.symlink(root / "loop", root / "loop")
    with serve(build(root)) as url:
        yield url, root.resolve()


@pytest.fixture(autouse=True)
def fresh_ran():
    ran.clear()


def official(url: str, mode: str, **kwargs: object) -> Client:
    return Client(
        streamable_http_client(f"{url}/mcp", http_client=httpx2.AsyncClient(timeout=30)),
        mode=mode,
        cache=None,
        **kwargs,
    )


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_mcp_refuses_every_ambiguous_form(face, mode: str) -> None:
    url, root = face
    async with official(url, mode) as client:
        for raw in SAMPLE:
            result = await client.call_tool("read_file", {"path": raw})
            text = result.content[0].text
            assert result.is_error is True and rule_named(text) and "Nothing was executed" in text, (
                raw,
                text,
            )
        fine = await client.call_tool("read_file", {"path": f"file://{root}/docs/a.txt"})
        assert fine.is_error is False and fine.content[0].text == "inside"
    assert ran == [f"{root}/docs/a.txt"], "no refused path reached the function"


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_mcp_client_roots_and_file_uris(face, mode: str) -> None:
    url, root = face

    async def list_roots(context) -> types.ListRootsResult:
        return types.ListRootsResult(
            roots=[
                types.Root(uri=(root / "docs").as_uri(), name="docs"),
                types.Root(uri=f"file://elsewhere{root}", name="remote host"),
            ]
        )

    async with official(url, mode, list_roots_callback=list_roots) as client:
        ok = await client.call_tool("read_file", {"path": f"file://localhost{root}/docs/a.txt"})
        assert ok.is_error is False and ok.content[0].text == "inside"
        for raw in (
            f"file://{root}/loop",
            "~/x",
            f"file://{root}/docs/../loop",
            "docs\uff0f..\uff0f..\uff0fx",
        ):
            refused = await client.call_tool("read_file", {"path": raw})
            assert refused.is_error is True and rule_named(refused.content[0].text), raw
        # the remote-host client root is ignored: the root itself stays outside the client's roots
        outside_docs = await client.call_tool("read_file", {"path": f"file://{root}/docs/../x"})
        assert outside_docs.is_error is True and "outside the allowed roots" in outside_docs.content[0].text


def a2a_message(skill_name: str, data: dict) -> Message:
    value = struct_pb2.Value()
    value.struct_value.update(data)
    msg = Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=[Part(data=value)])
    msg.metadata.update({"skill": skill_name})
    return msg


@pytest.mark.parametrize("streaming", [False, True])
async def test_a2a_refuses_every_ambiguous_form(face, streaming: bool) -> None:
    url, root = face
    async with httpx.AsyncClient(timeout=30) as http:
        card = await A2ACardResolver(http, url).get_agent_card()
        client = ClientFactory(
            ClientConfig(httpx_client=http, streaming=streaming, supported_protocol_bindings=["JSONRPC"])
        ).create(card)

        async def send(skill_name: str, path: str):
            events = [
                e
                async for e in client.send_message(
                    SendMessageRequest(message=a2a_message(skill_name, {"path": path}))
                )
            ]
            last = events[-1]
            return last.task if last.WhichOneof("payload") == "task" else last.status_update

        for raw in SAMPLE:
            task = await send("read_file", raw)
            text = task.status.message.parts[0].text
            assert task.status.state == TaskState.TASK_STATE_REJECTED and rule_named(text), (raw, text)
        via = await send("read_via_tool", "file:///etc/passwd")
        assert via.status.state == TaskState.TASK_STATE_COMPLETED
        fine = await send("read_file", f"file://{root}/docs/a.txt")
        assert fine.status.state == TaskState.TASK_STATE_COMPLETED
    assert ran == [f"{root}/docs/a.txt"], "no refused path reached the function"


def test_agui_refuses_every_ambiguous_form(face) -> None:
    from tests.test_agui_client import drive

    url, root = face
    steps = [
        {"runId": f"r{i}", "forwardedProps": {"arguments": {"path": raw}}} for i, raw in enumerate(SAMPLE)
    ]
    steps.append({"runId": "r-ok", "forwardedProps": {"arguments": {"path": f"file://{root}/docs/a.txt"}}})
    results = drive(url, "read_file", steps, "t-ambiguous")
    for raw, step in zip(SAMPLE, results):
        error = step["runError"]
        assert error["code"] == "REJECTED" and rule_named(error["message"]), (raw, error)
        assert step["events"][-1]["type"] == "RUN_ERROR"
    text = "".join(e["delta"] for e in results[-1]["events"] if e["type"] == "TEXT_MESSAGE_CONTENT")
    assert text == "inside"
    assert ran == [f"{root}/docs/a.txt"], "no refused path reached the function"


def test_agui_tool_results_carry_the_refusal(face) -> None:
    from tests.test_agui_client import drive

    url, _ = face
    picks = [
        "file:///etc/passwd",
        "~/.ssh/id_rsa",
        "C:\\x",
        "\\\\server\\share",
        "%c0%ae%c0%ae/",
        "\uff0e\uff0e/outside.txt",
        "loop",
        "sub\\note.md",
    ]
    steps = [
        {"runId": f"t{i}", "forwardedProps": {"arguments": {"path": raw}}} for i, raw in enumerate(picks)
    ]
    for raw, step in zip(picks, drive(url, "read_via_tool", steps, "t-ambiguous-tool")):
        [result] = [e for e in step["events"] if e["type"] == "TOOL_CALL_RESULT"]
        assert result["metadata"]["isError"] is True and rule_named(result["content"]), (raw, result)
        assert step["events"][-1]["type"] == "RUN_FINISHED"
    assert ran == []


GATED = [
    "file://server/share/x",
    "~/.ssh/id_rsa",
    "C:\\x",
    "//server/share",
    "%c0%ae%c0%ae/",
    "\uff0e\uff0e/outside.txt",
    "loop",
    "sub\\note.md",
    "NUL",
]


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_mcp_gated_call_is_refused_before_anyone_is_asked(face, mode: str) -> None:
    url, _ = face
    asked: list[object] = []

    async def elicit(context, params) -> types.ElicitResult:
        asked.append(params)
        return types.ElicitResult(action="accept", content={"approved": True})

    async with official(url, mode, elicitation_callback=elicit) as client:
        for raw in GATED:
            result = await client.call_tool("delete_file", {"path": raw})
            assert result.is_error is True and rule_named(result.content[0].text), (raw, result)
    assert asked == [] and ran == [], (
        "roots come before the gate: nobody approves a call that would be refused"
    )


async def test_a2a_and_agui_gated_calls_are_refused_before_anyone_is_asked(face) -> None:
    from tests.test_agui_client import drive

    url, _ = face
    async with httpx.AsyncClient(timeout=30) as http:
        card = await A2ACardResolver(http, url).get_agent_card()
        client = ClientFactory(
            ClientConfig(httpx_client=http, streaming=False, supported_protocol_bindings=["JSONRPC"])
        ).create(card)
        for raw in GATED:
            events = [
                e
                async for e in client.send_message(
                    SendMessageRequest(message=a2a_message("delete_file", {"path": raw}))
                )
            ]
            task = events[-1].task if events[-1].WhichOneof("payload") == "task" else events[-1].status_update
            assert task.status.state == TaskState.TASK_STATE_REJECTED, (raw, task.status)
            assert rule_named(task.status.message.parts[0].text)
    steps = [
        {"runId": f"g{i}", "forwardedProps": {"arguments": {"path": raw}}} for i, raw in enumerate(GATED)
    ]
    for raw, step in zip(GATED, drive(url, "delete_file", steps, "t-ambiguous-gate")):
        assert step["runError"]["code"] == "REJECTED" and rule_named(step["runError"]["message"]), raw
        assert step["pendingInterrupts"] == [], "no approval was asked for"
    assert ran == []
