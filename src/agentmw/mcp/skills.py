"""MCP Skills (SEP-2640, the ``io.modelcontextprotocol/skills`` extension) on the MCP face.

The agent's skill packages (``agent.add_skill_package``, :mod:`agentmw.skill_packages`) are served here:

- ``skills/list`` (paginated) and ``skills/get`` answer each package's entry (its uri, its frontmatter as
  written, and every file's uri, ``sha256:`` digest and size), computed once when it was registered;
- ``resources/directory/read`` (declared as ``directoryRead``) lists one folder of a package;
- the files themselves are resources (``resources/read`` of ``skill://<path>/<file>``), served by the
  resource methods with the rest.

A package is one decision per caller, the same in every method (docs/skill-packages.md, "Access"): it is
served when its ``SKILL.md`` capability is visible to the caller (roles, the protected resource's ``visible``
rule, ``hide_missing_scopes``; every other file follows that capability, ``agentmw.auth.Policy.follows``),
the listing hooks keep its ``SKILL.md`` in the caller's ``resources/list`` (kind ``resources``) and its entry
in ``skills/list`` (kind ``skill_packages``). A package not served is absent from ``skills/list`` and
``resources/list``, and ``skills/get``, ``resources/directory/read`` and ``resources/read`` of any of its
files answer as for an unknown uri.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol, cast

from ..skill_packages import ServedSkill
from ._wire import INVALID_PARAMS, JsonRpcError

if TYPE_CHECKING:
    from ..capability import Capability
    from .methods import Call

__all__ = ["EXTENSION", "PAGE_SIZE", "SKILL_HANDLERS", "listed_resources", "skills_extension", "withheld"]

EXTENSION = "io.modelcontextprotocol/skills"
PAGE_SIZE = 100
"""Entries per ``skills/list`` page (an entry, with its whole manifest, is never split across pages)."""


class _SkillHost(Protocol):
    @property
    def skill_packages(self) -> Mapping[str, ServedSkill]: ...


def _packages(agent: Any) -> Mapping[str, ServedSkill]:
    return cast("_SkillHost", agent).skill_packages


def skills_extension(agent: Any) -> dict[str, Any]:
    """The extension entry the server declares in its capabilities: none until a skill package is served.
    Its settings sit inline (SEP-2133): ``directoryRead``, since ``resources/directory/read`` is served."""
    if not _packages(agent):
        return {}
    return {EXTENSION: {"directoryRead": True}}


def _shown(call: Call, kind: str, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A list as this caller is shown it: the access rules, then the listing hooks (as every MCP list)."""
    agent = call.agent
    if agent.access is not None:
        items = agent.access.visible_list(kind, items, call.scope)
    shown: list[dict[str, Any]] = agent.shown(kind, "mcp", items, call.scope, call.caller)
    return shown


def _visible(call: Call, resources: list[dict[str, Any]] | None = None) -> list[ServedSkill]:
    """The packages served to this caller, in uri order: the one decision per package (the module's
    docstring). ``resources``: the caller's ``resources/list`` before this step, when it is known already."""
    agent = call.agent
    packages = _packages(agent)
    if not packages:
        return []
    access = agent.access
    served = []
    for uri in sorted(packages):
        main = agent.resources.get(uri)  # its SKILL.md, whose rules are the package's
        if main is not None and (access is None or not access.hides(main, call.scope)):
            served.append(packages[uri])
    if resources is None:
        resources = _shown(call, "resources", call.catalog.fresh().resources)
    listed = {item.get("uri") for item in resources}  # a "resources" hook's choice counts too
    served = [s for s in served if s.uri in listed]
    entries = [s.entry for s in served]
    kept = agent.shown("skill_packages", "mcp", entries, call.scope, call.caller)
    if kept is entries:  # no listing hook filters
        return served
    by_uri = {s.uri: s for s in served}  # a hook's answer is only ever a filter of what it was shown
    return [by_uri[e["uri"]] for e in kept if isinstance(e, dict) and e.get("uri") in by_uri]


def listed_resources(call: Call, resources: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``resources/list`` as shown to this caller (``resources``, after the access rules and the listing
    hooks) without the ``SKILL.md`` of a package not served to them (one a ``skill_packages`` hook left
    out): ``resources`` itself when every package is."""
    packages = _packages(call.agent)
    if not packages:
        return resources
    served = {s.uri for s in _visible(call, resources)}
    if len(served) == len(packages):
        return resources
    return [item for item in resources if item.get("uri") not in packages or item.get("uri") in served]


def withheld(call: Call, cap: Capability) -> bool:
    """Whether ``cap`` is a file of a package not served to this caller (``resources/read`` answers it as
    an unknown uri); False at once for any other resource."""
    packages = _packages(call.agent)
    if not packages:
        return False
    policy = cap.policy
    main = policy.follows if policy is not None and policy.follows is not None else cap
    if main.uri not in packages:
        return False
    return all(s.uri != main.uri for s in _visible(call))


def _find(call: Call, uri: Any, method: str) -> ServedSkill:
    if not isinstance(uri, str):
        raise JsonRpcError(INVALID_PARAMS, f"{method} needs a string 'uri'")
    for served in _visible(call):
        if served.uri == uri:
            return served
    raise JsonRpcError(INVALID_PARAMS, f"No skill is served at {uri}", {"uri": uri})


def _cursor(value: str) -> str:
    return base64.urlsafe_b64encode(value.encode()).decode("ascii")


def _after(params: Mapping[str, Any]) -> str | None:
    cursor = params.get("cursor")
    if cursor is None:
        return None
    if isinstance(cursor, str):
        try:
            after = base64.urlsafe_b64decode(cursor.encode("ascii")).decode()
        except (binascii.Error, UnicodeError, ValueError):
            pass
        else:
            if after.startswith("skill://"):
                return after
    raise JsonRpcError(INVALID_PARAMS, "Invalid cursor: pass back a nextCursor this server returned")


async def skills_list(call: Call, params: dict[str, Any]) -> dict[str, Any]:
    """One page of entries, in uri order; the cursor names the last uri shown (so a package added or removed
    between two pages moves no other entry to a page already read)."""
    after = _after(params)
    visible = _visible(call)
    if after is not None:
        visible = [s for s in visible if s.uri > after]
    page = visible[:PAGE_SIZE]
    result: dict[str, Any] = {"skills": [s.entry for s in page]}
    if len(visible) > PAGE_SIZE:
        result["nextCursor"] = _cursor(page[-1].uri)
    return result


async def skills_get(call: Call, params: dict[str, Any]) -> dict[str, Any]:
    """The entry of the package whose ``SKILL.md`` is ``params.uri``; -32602 for any other uri."""
    return {"skill": _find(call, params.get("uri"), "skills/get").entry}


async def directory_read(call: Call, params: dict[str, Any]) -> dict[str, Any]:
    """The direct children of a package's folder (files as resources, folders as ``inode/directory``)."""
    uri = params.get("uri")
    if not isinstance(uri, str):
        raise JsonRpcError(INVALID_PARAMS, "resources/directory/read needs a string 'uri'")
    if params.get("cursor") is not None:
        raise JsonRpcError(INVALID_PARAMS, "Invalid cursor: this server returns every child on one page")
    for served in sorted(_visible(call), key=lambda s: len(s.root), reverse=True):
        # the longest root first: a package under another's path (skill://outer/inner) answers for its own
        # folders (registration keeps their folders apart, so one package holds any folder uri)
        if uri == served.root or uri.startswith(served.root + "/"):
            children = served.directories.get(uri)
            if children is not None:
                return {"resources": children}
            break
    raise JsonRpcError(INVALID_PARAMS, f"{uri} is not a directory resource this server serves", {"uri": uri})


SKILL_HANDLERS: dict[str, Callable[[Call, dict[str, Any]], Any]] = {
    "skills/list": skills_list,
    "skills/get": skills_get,
    "resources/directory/read": directory_read,
}
