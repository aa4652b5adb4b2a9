"""``agentmw inspect``: each capability, and what each protocol shows for it, read from the faces themselves.

The MCP lists come from ``tools/list`` (and the resource and prompt lists), the A2A skills from the agent card,
the AG-UI agents from their ``capabilities``, all asked in-process of ``agent.asgi()``: what a client would be
shown, not a guess from the registry.
"""

from __future__ import annotations

import ast
import inspect
import json
import os
import textwrap
from collections.abc import Callable, Iterator
from typing import Any

from ..a2ui import EXTENSION_URI as A2UI_EXTENSION_URI
from ..a2ui import MIME_TYPE as A2UI_MIME_TYPE
from ..apps import EXTENSION_ID as APPS_EXTENSION
from ..capability import APP_MIME_TYPE, Capability
from ..decorators import specs_of
from ..selection import RouteInfo, iter_routes, route_of
from ..skill_packages import ServedSkill
from ..testing import AsgiExchange, McpError, McpTestClient
from .executions import _printable
from .target import Target

__all__ = [
    "build_report",
    "capabilities_by_function",
    "render_text",
    "routes_by_endpoint",
    "sends_surfaces",
    "shown_path",
    "source_of",
]

_BASE = "http://127.0.0.1:8000"
_APPS_HOST = {"extensions": {APPS_EXTENSION: {"mimeTypes": [APP_MIME_TYPE]}}}


def capabilities_by_function(agent: Any) -> list[tuple[Callable[..., Any], list[Capability]]]:
    """The agent's capabilities, grouped by the function they serve, in registration order."""
    groups: dict[int, tuple[Callable[..., Any], list[Capability]]] = {}
    for table in (agent.tools, agent.resources, agent.templates, agent.prompts, agent.skills):
        for cap in table.values():
            groups.setdefault(id(cap.fn), (cap.fn, []))[1].append(cap)
    return list(groups.values())


def routes_by_endpoint(host: Any) -> dict[int, RouteInfo]:
    found: dict[int, RouteInfo] = {}
    if host is not None and getattr(host, "routes", None) is not None:
        for route in iter_routes(host):
            found.setdefault(id(route.endpoint), route)
    return found


def source_of(fn: Callable[..., Any]) -> str:
    """``path:line`` of a function, relative to the working directory when it is below it; for a
    ``ui_resource``, where its document was written (its file, else the declaration)."""
    declared = getattr(fn, "ui_source", None)
    if isinstance(declared, str) and declared:
        file, _, number = declared.rpartition(":")
        return f"{shown_path(file)}:{number}" if number.isdigit() and file else shown_path(declared)
    target = inspect.unwrap(fn)
    try:
        path = inspect.getsourcefile(target) or ""
        line = inspect.getsourcelines(target)[1]
    except (OSError, TypeError):
        return getattr(target, "__module__", "?")
    relative = os.path.relpath(path)
    return f"{path if relative.startswith('..') else relative}:{line}"


async def _get_json(app: Any, url: str) -> Any:
    async with AsgiExchange(app, "GET", url, headers={"accept": "application/json"}) as exchange:
        body = await exchange.read()
    return json.loads(body) if exchange.status == 200 else None


async def _mcp_or_none(mcp: McpTestClient, method: str) -> Any:
    """A method's result, or None when the server refuses it (an extension it does not serve)."""
    try:
        return await mcp.request(method, on_notification=lambda _: None)
    except McpError:
        return None


async def _faces(agent: Any) -> dict[str, Any]:
    app = agent.asgi()
    # asked as an MCP Apps host asks: an app-only tool is listed to such a client only (docs/mcp-apps.md)
    mcp = McpTestClient(app, path=agent.mcp_path, capabilities=_APPS_HOST)
    lists: dict[str, Any] = {}
    for method, key in (
        ("tools/list", "tools"),
        ("resources/list", "resources"),
        ("resources/templates/list", "resourceTemplates"),
        ("prompts/list", "prompts"),
    ):
        lists[key] = (await mcp.request(method, on_notification=lambda _: None)).get(key, [])
    # the MCP extensions the server declares (MCP Apps, Skills, tasks), and the skill packages a client is shown
    discovered = await _mcp_or_none(mcp, "server/discover")
    lists["extensions"] = ((discovered or {}).get("capabilities") or {}).get("extensions") or {}
    lists["skills"] = (
        ((await _mcp_or_none(mcp, "skills/list")) or {}).get("skills", []) if agent.skill_packages else []
    )
    card = await _get_json(app, _BASE + "/.well-known/agent-card.json") or {}
    agui = {
        name: await _get_json(app, f"{_BASE}{agent.agui_path}/{name}/capabilities") for name in agent.skills
    }
    return {"mcp": lists, "card": card, "agui": agui}


def _mcp_entry(cap: Capability, lists: dict[str, Any]) -> tuple[str, dict[str, Any] | None]:
    if cap.kind == "tool":
        return "tool", next((t for t in lists["tools"] if t["name"] == cap.name), None)
    if cap.kind == "prompt":
        return "prompt", next((p for p in lists["prompts"] if p["name"] == cap.name), None)
    if cap.uri_template is not None:
        return "resourceTemplate", next(
            (r for r in lists["resourceTemplates"] if r.get("uriTemplate") == cap.uri_template), None
        )
    return "resource", next((r for r in lists["resources"] if r.get("uri") == cap.uri), None)


async def build_report(target: Target) -> dict[str, Any]:
    """The ``inspect --json`` document."""
    agent = target.agent
    faces = await _faces(agent)
    routes = routes_by_endpoint(target.host)
    card_skills = {s["id"]: s for s in faces["card"].get("skills", [])}
    grouped_by: dict[str, list[str]] = {}
    for skill in agent.skills.values():
        for tool_name in skill.groups:
            grouped_by.setdefault(tool_name, []).append(skill.name)
    ui_tools: dict[int, list[str]] = {}  # a ui:// resource's capability -> the tools that name it
    for tool in agent.tools.values():
        found = agent.find_resource(tool.ui["resourceUri"]) if tool.ui else None
        if found is not None:
            ui_tools.setdefault(id(found[0]), []).append(tool.name)
    packages = {uri: served for uri, served in agent.skill_packages.items()}
    capabilities = []
    for fn, caps in capabilities_by_function(agent):
        route = routes.get(id(fn))
        bulk = next((route_of(c) for c in caps if route_of(c)), None)
        entry: dict[str, Any] = {
            "name": caps[0].name,
            "function": f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', '?')}",
            "source": source_of(fn),
            "kinds": [c.kind for c in caps],
            "exposure": "decorated" if specs_of(fn) else ("bulk" if bulk else "registered"),
            "route": ({"methods": sorted(route.methods), "path": route.path} if route else bulk),
            "mcp": {},
            "a2a": None,
            "agui": None,
        }
        for cap in caps:
            kind, shown = _mcp_entry(cap, faces["mcp"])
            if shown is not None:
                entry["mcp"][kind] = shown
            if cap.kind == "skill":
                entry["a2a"] = {"skill": card_skills.get(cap.name), "groups": list(cap.groups)}
                entry["agui"] = {
                    "path": target.path(f"{agent.agui_path}/{cap.name}"),
                    "capabilities": faces["agui"].get(cap.name),
                }
            if cap.kind == "tool" and cap.name in grouped_by and entry["a2a"] is None:
                entry["a2a"] = {"groupedBy": grouped_by[cap.name]}
            if cap.kind == "tool" and cap.ui is not None:
                entry["ui"] = {
                    **cap.ui,
                    "served": agent.find_resource(cap.ui["resourceUri"]) is not None,
                    "appOnly": cap.app_only,  # listed and served only to MCP Apps hosts
                }
            if cap.kind == "resource" and cap.ui is not None:
                entry["ui"] = {"mimeType": cap.mime_type, **cap.ui, "tools": ui_tools.get(id(cap), [])}
            if cap.kind == "skill" and (a2ui := _a2ui_of(cap)) is not None:
                entry["a2ui"] = a2ui
            if cap.kind == "tool":
                entry["policy"] = {
                    k: v
                    for k, v in (
                        ("gated", cap.gate is not None),
                        ("untrusted", cap.untrusted),
                        ("timeout", cap.timeout),
                        ("maxInFlight", cap.max_in_flight),
                        ("rootedPaths", list(cap.path_params)),
                    )
                    if v
                }
        served = next((packages[c.uri] for c in caps if c.uri in packages), None)
        if served is not None:  # a skill package's SKILL.md: its folder is where it comes from
            source = served.package.source
            entry["source"] = shown_path(source) if source is not None else "(built in code)"
            entry["exposure"] = "skillPackage"
        capabilities.append(entry)
    card = {k: v for k, v in faces["card"].items() if k != "skills"}
    listed = {e.get("uri") for e in faces["mcp"]["skills"]}
    return {
        "target": target.spec,
        "resolvedFrom": target.how,
        "notes": list(target.notes),
        "agent": {
            "name": agent.name,
            "version": agent.version,
            "instructions": agent.instructions,
            "paths": {
                "mcp": target.path(agent.mcp_path),
                "a2a": target.path(agent.a2a_path),
                "card": target.path("/.well-known/agent-card.json"),
                "agui": target.path(agent.agui_path),
                "approvals": target.path(agent.approvals_path),
            },
        },
        "card": card,
        "capabilities": capabilities,
        "mcpExtensions": faces["mcp"]["extensions"],
        "skillPackages": [
            _package_entry(agent, served, served.uri in listed) for served in packages.values()
        ],
        "a2ui": _a2ui_entry(agent, faces["card"]),
    }


def shown_path(path: str | os.PathLike[str]) -> str:
    """A folder as ``source_of`` shows a file: relative to the working directory when it is below it."""
    relative = os.path.relpath(path)
    return os.fspath(path) if relative.startswith("..") else relative


def _package_entry(agent: Any, served: ServedSkill, listed: bool) -> dict[str, Any]:
    """A skill package as served: its SEP-2640 entry's facts, where it comes from, and who may read it."""
    package = served.package
    policy = agent.resources[served.uri].policy
    skill_md = package.file("SKILL.md")
    return {
        "name": package.name,
        "uri": served.uri,
        "description": package.description,
        "source": shown_path(package.source) if package.source is not None else None,
        "files": [
            {"path": f.path, "mimeType": f.mime_type, "size": f.size, "digest": f.digest}
            for f in package.files
        ],
        "size": package.size,
        "skillMdDigest": skill_md.digest if skill_md is not None else None,
        "listed": listed,  # in skills/list for a caller without credentials
        "access": {"scopes": list(policy.scope_list), "roles": sorted(policy.roles)} if policy else None,
    }


def _a2ui_entry(agent: Any, card: dict[str, Any]) -> dict[str, Any] | None:
    """A2UI: the extension the card declares, and the skills that name it or send surfaces."""
    extension = next(
        (
            e
            for e in (card.get("capabilities") or {}).get("extensions") or ()
            if isinstance(e, dict) and e.get("uri") == A2UI_EXTENSION_URI
        ),
        None,
    )
    skills = [{"name": c.name, **a2ui} for c in agent.skills.values() if (a2ui := _a2ui_of(c)) is not None]
    if extension is None and not skills:
        return None
    return {"extension": extension, "skills": skills}


def _a2ui_of(cap: Capability) -> dict[str, bool] | None:
    """A skill's A2UI: whether it names the media type among its output modes, whether its code sends surfaces."""
    named, sends = A2UI_MIME_TYPE in cap.output_modes, sends_surfaces(cap)
    return {"outputMode": named, "sendsSurfaces": sends} if named or sends else None


def sends_surfaces(cap: Capability) -> bool:
    """Whether the function's own code calls ``ctx.surface(...)`` on its Context parameter (read from its
    source: a surface sent by a helper it passes the context to is not seen)."""
    ctx = cap.params.context_param
    if ctx is None:
        return False
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(inspect.unwrap(cap.fn))))
    except (OSError, TypeError, SyntaxError):
        return False
    return any(
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "surface"
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == ctx
        for node in ast.walk(tree)
    )


def _schema_line(schema: dict[str, Any] | None) -> str:
    return json.dumps(schema, separators=(", ", ": ")) if schema else "(none)"


def _indented(text: str, prefix: str) -> Iterator[str]:
    for line in (text or "(none)").splitlines():
        yield prefix + line if line.strip() else ""


def render_text(report: dict[str, Any]) -> str:
    agent = report["agent"]
    paths = agent["paths"]
    lines = [
        f"agent {agent['name']} {agent['version']}  ({report['target']}: {report['resolvedFrom']})",
        f"  MCP {paths['mcp']}   A2A {paths['a2a']} (card {paths['card']})   AG-UI {paths['agui']}/<skill>",
    ]
    lines += [f"  note: {note}" for note in report["notes"]]
    if report["card"].get("description"):
        lines.append(f"  card: {report['card']['description']}")
    extensions = report.get("mcpExtensions") or {}
    if extensions:
        lines.append(
            "  MCP extensions: "
            + ", ".join(f"{name} {json.dumps(settings)}" for name, settings in extensions.items())
        )
    card_extensions = (report["card"].get("capabilities") or {}).get("extensions") or []
    if card_extensions:
        lines.append(
            "  A2A extensions: "
            + ", ".join(
                f"{e.get('uri')}{' (required)' if e.get('required') else ''}"
                for e in card_extensions
                if isinstance(e, dict)
            )
        )
    for cap in report["capabilities"]:
        route = cap["route"]
        where = f"; {','.join(route['methods'])} {route['path']}" if route else ""
        lines += [
            "",
            f"{cap['name']}  ({' + '.join(cap['kinds'])}; {cap['exposure']}{where})  {cap['source']}",
        ]
        for kind, shown in cap["mcp"].items():
            title = f" - {shown['title']}" if shown.get("title") else ""
            label = shown.get("name") or shown.get("uri") or shown.get("uriTemplate")
            lines.append(f"  MCP {kind} {label}{title}")
            if kind == "resourceTemplate" or kind == "resource":
                lines.append(f"    uri: {shown.get('uri') or shown.get('uriTemplate')}")
            lines.append("    contract (the model reads this):")
            lines += _indented(shown.get("description", ""), "      ")
            if kind == "tool":
                lines.append(f"    input:  {_schema_line(shown.get('inputSchema'))}")
                lines.append(f"    output: {_schema_line(shown.get('outputSchema'))}")
                if shown.get("annotations"):
                    lines.append(f"    hints:  {json.dumps(shown['annotations'])}")
                if cap.get("policy"):
                    lines.append(f"    policy: {json.dumps(cap['policy'])}")
            if kind == "prompt":
                lines.append(f"    arguments: {json.dumps(shown.get('arguments', []))}")
        lines += _ui_lines(cap.get("ui"), cap["kinds"])
        a2a = cap["a2a"]
        if a2a and a2a.get("skill"):
            skill = a2a["skill"]
            lines.append(f"  A2A skill {skill['id']} - {skill['name']}")
            lines.append("    summary (the scheduler reads this on the card):")
            lines += _indented(skill.get("description", ""), "      ")
            lines.append(
                f"    tags: {', '.join(skill.get('tags', []))}"
                + (f"   examples: {'; '.join(skill['examples'])}" if skill.get("examples") else "")
            )
            if a2a.get("groups"):
                lines.append(f"    groups tools: {', '.join(a2a['groups'])}")
        elif a2a and a2a.get("groupedBy"):
            lines.append(f"  A2A: not a skill; grouped by {', '.join(a2a['groupedBy'])}")
        else:
            lines.append("  A2A: -")
        agui = cap["agui"]
        if agui:
            caps = agui.get("capabilities") or {}
            hitl = caps.get("humanInTheLoop", {})
            lines.append(
                f"  AG-UI agent POST {agui['path']}  (interrupts: {hitl.get('interrupts', False)}, "
                f"tool calls: {caps.get('tools', {}).get('supported', False)})"
            )
        else:
            lines.append("  AG-UI: -")
        if cap.get("a2ui"):
            a2ui = cap["a2ui"]
            lines.append(
                "  A2UI: "
                + (
                    "sends surfaces (ctx.surface)"
                    if a2ui["sendsSurfaces"]
                    else "sends no surface in its code"
                )
                + (
                    "; output mode declared"
                    if a2ui["outputMode"]
                    else "; output mode NOT declared (lint AMW017)"
                )
            )
    lines += _package_lines(report.get("skillPackages") or [])
    # what the app serves is others' text too (a copied skill package's frontmatter, a peer's descriptions): no
    # escape sequence in it reaches the terminal
    return _printable("\n".join(lines) + "\n", as_json=False)


def _ui_lines(ui: dict[str, Any] | None, kinds: list[str]) -> list[str]:
    """MCP Apps: a tool's UI, or what a ui:// resource asks of the host that renders it."""
    if not ui:
        return []
    if "resourceUri" in ui:
        visibility = f" (visibility: {', '.join(ui['visibility'])})" if ui.get("visibility") else ""
        if ui.get("appOnly"):
            visibility += "; app-only: only MCP Apps hosts list it"
        missing = "" if ui.get("served") else "  NOT SERVED (lint AMW013)"
        return [f"  MCP App UI: {ui['resourceUri']}{visibility}{missing}"]
    csp = ui.get("csp") or {}
    shown = (
        "; ".join(f"{field} {' '.join(origins)}" for field, origins in csp.items()) or "none (inline only)"
    )
    lines = [f"  MCP App document: {ui.get('mimeType')}", f"    csp: {shown}"]
    if ui.get("permissions"):
        lines.append(f"    permissions: {', '.join(ui['permissions'])}")
    if ui.get("domain"):
        lines.append(f"    domain: {ui['domain']}")
    if ui.get("prefersBorder") is not None:
        lines.append(f"    border: {'yes' if ui['prefersBorder'] else 'no'}")
    lines.append(f"    UI of tools: {', '.join(ui.get('tools') or []) or '(none)'}")
    return lines


def _size(n: int) -> str:
    return (
        f"{n} B" if n < 1024 else f"{n / 1024:.1f} KiB" if n < 1024 * 1024 else f"{n / 1024 / 1024:.1f} MiB"
    )


def _package_lines(packages: list[dict[str, Any]]) -> list[str]:
    """MCP skill packages (SEP-2640), as skills/list and skills/get serve them."""
    if not packages:
        return []
    lines = ["", "skill packages (MCP skills/list, skills/get):"]
    for p in packages:
        where = p["source"] or "built in code"
        access = p.get("access") or {}
        needs = " ".join(
            [
                *(f"scope {s}" for s in access.get("scopes", [])),
                *(f"role {r}" for r in access.get("roles", [])),
            ]
        )
        lines += [
            f"  {p['name']}  {p['uri']}  ({where})",
            f"    {p['description'].splitlines()[0] if p['description'] else ''}",
            f"    {len(p['files'])} file{'s' * (len(p['files']) != 1)}, {_size(p['size'])}; "
            + f"SKILL.md {p['skillMdDigest']}",
        ]
        shown = [f["path"] for f in p["files"]]
        lines.append(
            f"    files: {', '.join(shown[:12])}" + (f", +{len(shown) - 12} more" if len(shown) > 12 else "")
        )
        if needs or not p["listed"]:
            lines.append(
                f"    access: {needs or '-'}{'' if p['listed'] else '; not listed for an anonymous caller'}"
            )
    return lines
