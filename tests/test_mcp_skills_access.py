"""A skill package is one access decision per caller, whichever of its files or methods is asked for
(docs/skill-packages.md, "Access"): the rules of its SKILL.md capability (roles, scopes, the protected
resource's ``visible`` rule, rate limits) and the listing hooks decide for every file, in both eras.

Each test here was a hole once: a ``visible`` rule or a listing hook that hid a package's SKILL.md but left its
other files readable, a rate limit counted per file, a nested package whose folder could not be read.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from agentmw import Agent
from agentmw.auth import Principal, ProtectedResource, RateLimit
from agentmw.capability import Capability
from agentmw.skill_packages import SkillPackage, SkillPackageError
from agentmw.testing import McpError, McpTestClient

HANDSHAKE, MODERN = "2025-11-25", "2026-07-28"
ERAS = [HANDSHAKE, MODERN]
TOKENS = {"hr": Principal("alice", roles={"hr"}), "plain": Principal("bob")}
PAYROLL = "skill://payroll/SKILL.md"
SALARIES = "skill://payroll/data/salaries.csv"


def _as(token: str | None) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"} if token else {}


def _resource(**options: Any) -> ProtectedResource:
    return ProtectedResource(
        authorization_servers=["https://issuer.example"],
        verifier=lambda token, _resource: TOKENS.get(token),
        anonymous=True,
        **options,
    )


def _payroll() -> SkillPackage:
    return SkillPackage(
        "payroll", "Run the payroll", "SECRET-STEPS", files={"data/salaries.csv": "alice,SECRET-SALARY"}
    )


def _unknown_read(era: str) -> int:
    return -32602 if era == MODERN else -32002


async def _refused(client: McpTestClient, method: str, params: dict[str, Any]) -> int:
    with pytest.raises(McpError) as caught:
        await client.request(method, params)
    return caught.value.code


async def _hidden_everywhere(client: McpTestClient, era: str) -> None:
    """Nothing of the payroll package reaches this caller: not listed, every read answered as unknown."""
    assert "payroll" not in json.dumps(await client.request("skills/list"))
    assert "payroll" not in json.dumps(await client.request("resources/list"))
    assert await _refused(client, "skills/get", {"uri": PAYROLL}) == -32602
    for folder in ("skill://payroll", "skill://payroll/data"):
        assert await _refused(client, "resources/directory/read", {"uri": folder}) == -32602
    for uri in (PAYROLL, SALARIES):
        assert await _refused(client, "resources/read", {"uri": uri}) == _unknown_read(era), uri


async def _served_whole(client: McpTestClient) -> None:
    assert PAYROLL in [e["uri"] for e in (await client.request("skills/list"))["skills"]]
    assert PAYROLL in [r["uri"] for r in (await client.request("resources/list"))["resources"]]
    assert (await client.request("skills/get", {"uri": PAYROLL}))["skill"]["uri"] == PAYROLL
    folder = await client.request("resources/directory/read", {"uri": "skill://payroll/data"})
    assert [r["uri"] for r in folder["resources"]] == [SALARIES]
    read = await client.request("resources/read", {"uri": SALARIES})
    assert read["contents"][0]["text"] == "alice,SECRET-SALARY"


@pytest.mark.parametrize("era", ERAS)
async def test_a_visible_rule_written_for_the_package_decides_for_every_file(era: str) -> None:
    seen: list[str] = []

    def visible(principal: Principal | None, cap: Capability) -> bool:
        seen.append(cap.name)
        return cap.name != "payroll" or (principal is not None and "hr" in principal.roles)

    agent = Agent("v", store="memory://", auth=_resource(visible=visible))
    agent.include(_payroll())
    for token in (None, "plain"):
        async with McpTestClient(agent.asgi(), era=era, headers=_as(token)) as client:
            await _hidden_everywhere(client, era)
    async with McpTestClient(agent.asgi(), era=era, headers=_as("hr")) as client:
        await _served_whole(client)
    assert "data/salaries.csv" not in seen  # the rule is asked about the package, never about a file of it


@pytest.mark.parametrize("era", ERAS)
async def test_roles_and_hide_missing_scopes_hide_the_files_too(era: str) -> None:
    agent = Agent("r", store="memory://", auth=_resource(hide_missing_scopes=True))
    agent.add_skill_package(_payroll(), roles=["hr"])
    agent.add_skill_package(SkillPackage("audit", "Audit", "a", files={"log.txt": "SECRET"}), scopes=["x:y"])
    async with McpTestClient(agent.asgi(), era=era, headers=_as("plain")) as client:
        await _hidden_everywhere(client, era)
        assert await _refused(client, "resources/read", {"uri": "skill://audit/log.txt"}) == _unknown_read(
            era
        )
    async with McpTestClient(agent.asgi(), era=era, headers=_as("hr")) as client:
        await _served_whole(client)


def _hiding(kind: str) -> Agent:
    agent = Agent("h", store="memory://")
    agent.include(SkillPackage("open-one", "open", "o"))
    agent.include(_payroll())

    class Hide:
        def listing(self, listing: Any) -> Any:
            if listing.kind != kind:
                return None
            return [item for item in listing.items if "payroll" not in json.dumps(item)]

    agent.use(Hide())
    return agent


@pytest.mark.parametrize("kind", ["skill_packages", "resources"])
@pytest.mark.parametrize("era", ERAS)
async def test_a_listing_hook_that_leaves_a_package_out_hides_it_from_every_method(
    kind: str, era: str
) -> None:
    async with McpTestClient(_hiding(kind).asgi(), era=era) as client:
        await _hidden_everywhere(client, era)
        listed = [e["uri"] for e in (await client.request("skills/list"))["skills"]]
        assert listed == ["skill://open-one/SKILL.md"]  # the others are still served
        read = await client.request("resources/read", {"uri": "skill://open-one/SKILL.md"})
        assert "o" in read["contents"][0]["text"]


async def test_a_package_rate_limit_is_one_budget_over_all_its_files() -> None:
    agent = Agent("r", store="memory://")
    files = {f"f{i}.md": f"file {i}" for i in range(5)}
    served = agent.add_skill_package(
        SkillPackage("limited", "d", "i", files=files), rate_limit=RateLimit(3, per=60)
    )
    agent.include(SkillPackage("free", "d", "i", files={"a.md": "a"}))
    read = 0
    async with McpTestClient(agent.asgi(), era=MODERN) as client:
        for uri in served.files:
            try:
                await client.request("resources/read", {"uri": uri})
            except McpError as exc:
                assert "Rate limit of 3" in exc.message, exc.message
            else:
                read += 1
        assert read == 3  # 6 files, one budget of 3 reads a minute
        for _ in range(4):  # another package is not counted in it
            await client.request("resources/read", {"uri": "skill://free/a.md"})


@pytest.mark.parametrize("era", ERAS)
async def test_a_package_under_another_packages_path_serves_its_own_folder(era: str) -> None:
    agent = Agent("n", store="memory://")
    agent.include(SkillPackage("outer", "outer", "o", files={"f.md": "f"}))
    agent.add_skill_package(SkillPackage("inner", "inner", "i", files={"g.md": "g"}), prefix="outer")
    async with McpTestClient(agent.asgi(), era=era) as client:
        inner = await client.request("resources/directory/read", {"uri": "skill://outer/inner"})
        outer = await client.request("resources/directory/read", {"uri": "skill://outer"})
    assert [r["uri"] for r in inner["resources"]] == [
        "skill://outer/inner/SKILL.md",
        "skill://outer/inner/g.md",
    ]
    assert [r["uri"] for r in outer["resources"]] == ["skill://outer/SKILL.md", "skill://outer/f.md"]


def test_a_package_in_a_folder_of_another_is_refused_whichever_comes_first() -> None:
    inner = SkillPackage("inner", "inner", "i", files={"g.md": "g"})
    outer = SkillPackage("outer", "outer", "o", files={"inner/notes.md": "n"})
    first = Agent("a", store="memory://")
    first.include(outer)
    with pytest.raises(SkillPackageError, match="would be a folder of the package at skill://outer/SKILL.md"):
        first.add_skill_package(inner, prefix="outer")
    second = Agent("b", store="memory://")
    second.add_skill_package(inner, prefix="outer")
    with pytest.raises(SkillPackageError, match="skill://outer/inner/ would be a folder"):
        second.include(outer)
    assert list(second.skill_packages) == ["skill://outer/inner/SKILL.md"]  # nothing of the refused one
