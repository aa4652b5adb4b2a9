"""MCP Skills (SEP-2640) with real clients: the official ``mcp`` client in both eras, FastMCP's skills client
(2026 only, as it requires), and raw JSON-RPC for the errors and pagination.

Every file of every entry is read back with ``resources/read`` and re-hashed: the manifest's digest and size
must be those of the bytes the client receives.
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import httpx2
import mcp_types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from pydantic import TypeAdapter

from agentmw import Agent
from agentmw.auth import Principal, ProtectedResource
from agentmw.mcp import skills as mcp_skills
from agentmw.skill_packages import SkillPackage
from agentmw.testing import McpError, McpTestClient

HANDSHAKE, MODERN = "2025-11-25", "2026-07-28"
ERAS = [HANDSHAKE, MODERN]
BASE = "http://127.0.0.1:8000"
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)
PDF_SKILL_MD = """---
name: pdf-processing
description: >
  Extract, fill, and assemble PDF documents.
  Use it for forms.
license: Apache-2.0
metadata:
  version: "2.1.0"
---

# PDF processing

Fill the form as `references/FORMS.md` says.
"""
PDF_FRONTMATTER = {
    "name": "pdf-processing",
    "description": "Extract, fill, and assemble PDF documents. Use it for forms.\n",
    "license": "Apache-2.0",
    "metadata": {"version": "2.1.0"},
}
TOKENS = {
    "hr": Principal("alice", roles={"hr"}, scopes={"audit:read"}),
    "plain": Principal("bob"),
}


def pdf_folder(root: Path) -> Path:
    folder = root / "pdf-processing"
    (folder / "references").mkdir(parents=True)
    (folder / "assets").mkdir()
    (folder / "SKILL.md").write_text(PDF_SKILL_MD)
    (folder / "references" / "FORMS.md").write_text("# Forms\n\nÉcrire les champs, never guess.\n")
    (folder / "assets" / "logo.png").write_bytes(PNG)
    (folder / ".DS_Store").write_bytes(b"\0hidden")  # hidden: left out
    return folder


def build(root: Path, *, auth: bool = False) -> Agent:
    resource = None
    if auth:
        resource = ProtectedResource(
            authorization_servers=["https://issuer.example"],
            verifier=lambda token, _resource: TOKENS.get(token),
            anonymous=True,
        )
    agent = Agent("skills", store="memory://", auth=resource)
    agent.include(SkillPackage.from_folder(pdf_folder(root)))
    agent.add_skill_package(
        SkillPackage(
            "purchase-requests",
            "How to file a purchase request with this server's tools",
            "# Purchase requests\n\n1. Search the catalog.\n2. Submit.\n",
            files={"reference/policy.md": "Anything over 1000 EUR needs approval.\n"},
        ),
        prefix="procurement",
    )
    if auth:
        agent.add_skill_package(SkillPackage("payroll", "Run the payroll", "Secret steps."), roles=["hr"])
        agent.add_skill_package(
            SkillPackage("audit-trail", "Read the audit trail", "Steps.", files={"notes.txt": "n"}),
            scopes=["audit:read"],
        )
    return agent


@pytest.fixture
def app(tmp_path: Path) -> Any:
    return build(tmp_path).asgi()


@pytest.fixture
def guarded(tmp_path: Path) -> Any:
    return build(tmp_path, auth=True).asgi()


# --- the official client ----------------------------------------------------------------------------------


class _ListParams(mcp_types.PaginatedRequestParams):
    pass


class _GetParams(mcp_types.RequestParams):
    uri: str


class ListSkills(mcp_types.Request[_ListParams, Literal["skills/list"]]):
    method: Literal["skills/list"] = "skills/list"
    params: _ListParams


class GetSkill(mcp_types.Request[_GetParams, Literal["skills/get"]]):
    method: Literal["skills/get"] = "skills/get"
    params: _GetParams


class _DirParams(mcp_types.RequestParams):
    uri: str


class ReadDirectory(mcp_types.Request[_DirParams, Literal["resources/directory/read"]]):
    method: Literal["resources/directory/read"] = "resources/directory/read"
    params: _DirParams


RAW = TypeAdapter(dict[str, Any])


def official(app: Any, mode: str, token: str | None = None) -> Client:
    headers = {"authorization": f"Bearer {token}"} if token else None
    http = httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url=BASE, headers=headers)
    return Client(streamable_http_client(f"{BASE}/mcp", http_client=http), mode=mode, cache=None)


def _bytes(content: Any) -> bytes:
    if isinstance(content, mcp_types.TextResourceContents):
        return content.text.encode("utf-8")
    return base64.b64decode(content.blob)


async def _verified(client: Client, entry: dict[str, Any]) -> dict[str, bytes]:
    """Every file of ``entry`` read with resources/read, each checked against its digest and size."""
    read: dict[str, bytes] = {}
    for item in entry["resources"]:
        result = await client.read_resource(item["uri"])
        (content,) = result.contents
        assert content.uri == item["uri"]
        data = _bytes(content)
        assert len(data) == item["size"], item["uri"]
        assert "sha256:" + hashlib.sha256(data).hexdigest() == item["digest"], item["uri"]
        read[item["uri"]] = data
    return read


@pytest.mark.parametrize("mode", ["legacy", MODERN])
async def test_the_official_client_lists_gets_and_verifies_every_file(app: Any, mode: str) -> None:
    async with official(app, mode) as client:
        if mode == "legacy":
            extensions = client.server_capabilities.extensions or {}
            assert extensions["io.modelcontextprotocol/skills"] == {"directoryRead": True}
        listed = await client.session.send_request(ListSkills(params=_ListParams()), RAW)
        entries = listed["skills"]
        assert [e["uri"] for e in entries] == [
            "skill://pdf-processing/SKILL.md",
            "skill://procurement/purchase-requests/SKILL.md",
        ]
        assert "nextCursor" not in listed
        if mode == MODERN:
            assert listed["ttlMs"] == 0 and listed["cacheScope"] == "private"
        pdf = entries[0]
        assert pdf["frontmatter"] == PDF_FRONTMATTER
        assert sorted(r["uri"] for r in pdf["resources"]) == [
            "skill://pdf-processing/SKILL.md",
            "skill://pdf-processing/assets/logo.png",
            "skill://pdf-processing/references/FORMS.md",
        ]
        files = await _verified(client, pdf)
        assert files["skill://pdf-processing/SKILL.md"].decode() == PDF_SKILL_MD
        assert files["skill://pdf-processing/assets/logo.png"] == PNG
        code = await _verified(client, entries[1])
        assert (
            code["skill://procurement/purchase-requests/SKILL.md"]
            .decode()
            .startswith('---\nname: "purchase-requests"\ndescription: "How to file')
        )
        for entry in entries:
            got = await client.session.send_request(GetSkill(params=_GetParams(uri=entry["uri"])), RAW)
            assert got["skill"] == entry and "nextCursor" not in got
        # the SKILL.md is a listed resource named and described from its frontmatter
        resources = {r.uri: r for r in (await client.list_resources()).resources}
        main = resources["skill://pdf-processing/SKILL.md"]
        assert (main.name, main.description, main.mime_type) == (
            "pdf-processing",
            PDF_FRONTMATTER["description"],
            "text/markdown",
        )
        assert "skill://pdf-processing/references/FORMS.md" not in resources  # read by uri, from the manifest
        folder = await client.session.send_request(
            ReadDirectory(params=_DirParams(uri="skill://pdf-processing")), RAW
        )
        assert [(r["name"], r["mimeType"]) for r in folder["resources"]] == [
            ("SKILL.md", "text/markdown"),
            ("assets", "inode/directory"),
            ("references", "inode/directory"),
        ]


@pytest.mark.parametrize("mode", ["legacy", MODERN])
async def test_the_official_client_gets_invalid_params_for_what_is_not_served(app: Any, mode: str) -> None:
    async with official(app, mode) as client:
        for request in (
            GetSkill(params=_GetParams(uri="skill://nothing-here/SKILL.md")),
            GetSkill(params=_GetParams(uri="skill://pdf-processing/references/FORMS.md")),  # a file, no skill
            ReadDirectory(params=_DirParams(uri="skill://pdf-processing/SKILL.md")),
            ReadDirectory(params=_DirParams(uri="skill://pdf-processing/missing")),
            ListSkills(params=_ListParams(cursor="not-a-cursor")),
        ):
            with pytest.raises(MCPError) as caught:
                await client.session.send_request(request, RAW)
            assert caught.value.error.code == -32602, request
        with pytest.raises(MCPError) as caught:
            await client.read_resource("skill://pdf-processing/nope.md")
        assert caught.value.error.code == (-32002 if mode == "legacy" else -32602)


# --- FastMCP's skills client --------------------------------------------------------------------------------


async def test_fastmcp_skills_client_validates_and_reads_every_entry(app: Any) -> None:
    from fastmcp import Client as FastMCPClient
    from fastmcp.client.transports import StreamableHttpTransport
    from fastmcp.skills import SkillsClientExtension

    def factory(**options: Any) -> httpx2.AsyncClient:  # FastMCP passes headers, timeout, auth, redirects
        options.pop("timeout", None)
        return httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url=BASE, **options)

    transport = StreamableHttpTransport(f"{BASE}/mcp", httpx_client_factory=factory)
    async with FastMCPClient(transport, extensions=[SkillsClientExtension()]) as client:
        assert client.protocol_version == MODERN  # "auto": discovered, so the server's extensions are known
        skills = await client.list_skills()  # FastMCP's models check the entry: name rule, manifest, uris
        assert [s.uri for s in skills] == [
            "skill://pdf-processing/SKILL.md",
            "skill://procurement/purchase-requests/SKILL.md",
        ]
        assert skills[0].frontmatter.root == PDF_FRONTMATTER
        for skill in skills:
            assert (await client.get_skill(skill.uri)) == skill
            assert isinstance(skill.resources, list)
            for item in skill.resources:
                (content,) = await client.read_resource(item.uri)
                data = (
                    content.text.encode()
                    if isinstance(content, mcp_types.TextResourceContents)
                    else base64.b64decode(content.blob)
                )
                assert (len(data), "sha256:" + hashlib.sha256(data).hexdigest()) == (item.size, item.digest)


# --- raw JSON-RPC: errors, pagination, cache attributes ------------------------------------------------------


@pytest.fixture
def many(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    monkeypatch.setattr(mcp_skills, "PAGE_SIZE", 2)
    agent = Agent("many", store="memory://")
    for i in range(5):
        agent.add_skill_package(SkillPackage(f"skill-{i}", f"Skill {i}", files={"a.md": str(i)}), prefix="p")
    yield agent.asgi()


@pytest.mark.parametrize("era", ERAS)
async def test_pages_end_hold_whole_entries_and_take_only_their_own_cursors(many: Any, era: str) -> None:
    async with McpTestClient(many, era=era) as client:
        seen: list[str] = []
        cursor = None
        pages = 0
        while True:
            result = await client.request("skills/list", {"cursor": cursor} if cursor else {})
            pages += 1
            assert len(result["skills"]) <= 2
            for entry in result["skills"]:
                assert len(entry["resources"]) == 2  # SKILL.md and a.md, never split
            seen += [e["uri"] for e in result["skills"]]
            cursor = result.get("nextCursor")
            if cursor is None:
                break
        assert pages == 3
        assert seen == [f"skill://p/skill-{i}/SKILL.md" for i in range(5)]
        for bad in ("%%%", 42, base64.urlsafe_b64encode(b"https://x").decode()):
            with pytest.raises(McpError) as caught:
                await client.request("skills/list", {"cursor": bad})
            assert caught.value.code == -32602


@pytest.mark.parametrize("era", ERAS)
async def test_malformed_params_are_invalid_params_with_the_eras_status(app: Any, era: str) -> None:
    async with McpTestClient(app, era=era) as client:
        for method, params in (
            ("skills/get", {}),
            ("skills/get", {"uri": 7}),
            ("resources/directory/read", {}),
            ("resources/directory/read", {"uri": "skill://pdf-processing", "cursor": "x"}),
        ):
            with pytest.raises(McpError) as caught:
                await client.request(method, params)
            assert caught.value.code == -32602, (method, params)
            assert caught.value.status == (400 if era == MODERN else 200)
        body = {"jsonrpc": "2.0", "id": 9, "method": "skills/list", "params": [1]}
        headers = client.headers_for("skills/list", None)
        response = await client.post(body, headers)
        assert response.json()["error"]["code"] == -32602
        assert (
            response.status_code == 400
        )  # a malformed envelope, refused before any method runs, in both eras


async def test_stateless_results_carry_the_result_type_and_cache_attributes(app: Any) -> None:
    async with McpTestClient(app, era=MODERN) as client:
        for method, params in (
            ("skills/list", {}),
            ("skills/get", {"uri": "skill://pdf-processing/SKILL.md"}),
        ):
            result = await client.request(method, params)
            assert (result["resultType"], result["ttlMs"], result["cacheScope"]) == ("complete", 0, "private")
            assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "skills"
        folder = await client.request(
            "resources/directory/read", {"uri": "skill://pdf-processing/references"}
        )
        assert folder["resultType"] == "complete" and "ttlMs" not in folder  # not a CacheableResult
        assert [r["name"] for r in folder["resources"]] == ["FORMS.md"]
        discovered = await client.request("server/discover")
        assert discovered["capabilities"]["extensions"]["io.modelcontextprotocol/skills"] == {
            "directoryRead": True
        }


async def test_an_agent_without_packages_declares_no_skills_extension() -> None:
    agent = Agent("none", store="memory://")
    async with McpTestClient(agent.asgi(), era=MODERN) as client:
        discovered = await client.request("server/discover")
        assert "io.modelcontextprotocol/skills" not in discovered["capabilities"].get("extensions", {})
        assert (await client.request("skills/list"))["skills"] == []


# --- access ----------------------------------------------------------------------------------------------------


def _as(token: str | None) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"} if token else {}


@pytest.mark.parametrize("era", ERAS)
async def test_a_package_behind_a_role_is_invisible_to_a_caller_without_it(guarded: Any, era: str) -> None:
    payroll = "skill://payroll/SKILL.md"
    async with McpTestClient(guarded, era=era, headers=_as("plain")) as client:
        listed = [e["uri"] for e in (await client.request("skills/list"))["skills"]]
        assert payroll not in listed and "skill://audit-trail/SKILL.md" in listed
        resources = [r["uri"] for r in (await client.request("resources/list"))["resources"]]
        assert payroll not in resources
        for method, params, code in (
            ("skills/get", {"uri": payroll}, -32602),
            ("resources/directory/read", {"uri": "skill://payroll"}, -32602),
            ("resources/read", {"uri": payroll}, -32602 if era == MODERN else -32002),
        ):
            with pytest.raises(McpError) as caught:
                await client.request(method, params)
            assert caught.value.code == code, method
    async with McpTestClient(guarded, era=era, headers=_as("hr")) as client:
        listed = [e["uri"] for e in (await client.request("skills/list"))["skills"]]
        assert payroll in listed
        assert (await client.request("skills/get", {"uri": payroll}))["skill"]["uri"] == payroll
        read = await client.request("resources/read", {"uri": payroll})
        assert "Secret steps." in read["contents"][0]["text"]


@pytest.mark.parametrize("era", ERAS)
async def test_a_package_behind_a_scope_is_listed_but_its_files_are_refused(guarded: Any, era: str) -> None:
    audit = "skill://audit-trail/SKILL.md"
    for token, status in ((None, 401), ("plain", 403)):
        async with McpTestClient(guarded, era=era, headers=_as(token)) as client:
            assert (await client.request("skills/get", {"uri": audit}))["skill"]["uri"] == audit
            for uri in (audit, "skill://audit-trail/notes.txt"):
                params = client.envelope({"uri": uri})
                body = {"jsonrpc": "2.0", "id": 3, "method": "resources/read", "params": params}
                response = await client.post(body, client.headers_for("resources/read", params))
                assert response.status_code == status, (token, uri, response.text)
                challenge = response.headers["www-authenticate"]
                assert ('error="insufficient_scope"' in challenge) == (status == 403), challenge
    async with McpTestClient(guarded, era=era, headers=_as("hr")) as client:
        read = await client.request("resources/read", {"uri": "skill://audit-trail/notes.txt"})
        assert read["contents"][0]["text"] == "n"


async def test_a_listing_hook_hides_packages_as_it_hides_tools(tmp_path: Path) -> None:
    agent = build(tmp_path)

    class OnlyPdf:
        def listing(self, listing: Any) -> Any:
            if listing.kind != "skill_packages":
                return None
            return [item for item in listing.items if "pdf" in item["uri"]]

    agent.use(OnlyPdf())
    async with McpTestClient(agent.asgi(), era=MODERN) as client:
        listed = [e["uri"] for e in (await client.request("skills/list"))["skills"]]
        assert listed == ["skill://pdf-processing/SKILL.md"]
        with pytest.raises(McpError) as caught:
            await client.request("skills/get", {"uri": "skill://procurement/purchase-requests/SKILL.md"})
        assert caught.value.code == -32602


# --- the example's package -------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["legacy", MODERN])
async def test_the_example_serves_its_purchase_requests_skill_naming_only_tools_it_has(mode: str) -> None:
    from examples.fastapi_app.main import agent, app

    async with official(app, mode) as client:
        got = await client.session.send_request(
            GetSkill(params=_GetParams(uri="skill://purchase-requests/SKILL.md")), RAW
        )
        entry = got["skill"]
        assert entry["frontmatter"]["name"] == "purchase-requests"
        files = await _verified(client, entry)
    assert sorted(files) == [
        "skill://purchase-requests/SKILL.md",
        "skill://purchase-requests/reference/checklist.md",
    ]
    instructions = files["skill://purchase-requests/SKILL.md"].decode()
    named = set(
        re.findall(r"`([a-z]+(?:_[a-z]+)+)`", instructions)
    )  # the snake_case names it tells a model to use
    assert named and named <= set(agent.tools) | set(agent.skills), (
        named - set(agent.tools) - set(agent.skills)
    )
    assert "reference/checklist.md" in instructions  # the file it points to is in the package
