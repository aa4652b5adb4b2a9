"""``agentmw inspect``: each capability, and what each protocol shows for it, read from the faces themselves.

The MCP lists come from ``tools/list`` (and the resource and prompt lists), the A2A skills from the agent card,
the AG-UI agents from their ``capabilities``, all asked in-process of ``agent.asgi()``: what a client would be
shown, not a guess from the registry.
"""

from __future__ import annotations

import inspect
import json
import os
from collections.abc import Callable, Iterator
from typing import Any

from ..capability import Capability
from ..decorators import specs_of
from ..selection import RouteInfo, iter_routes, route_of
from ..testing import AsgiExchange, McpTestClient
from .target import Target

__all__ = ["build_report", "capabilities_by_function", "render_text", "routes_by_endpoint", "source_of"]

_BASE = "http://127.0.0.1:8000"


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
    """``path:line`` of a function, relative to the working directory when it is below it."""
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


async def _faces(agent: Any) -> dict[str, Any]:
    app = agent.asgi()
    mcp = McpTestClient(app, path=agent.mcp_path)
    lists: dict[str, Any] = {}
    for method, key in (
        ("tools/list", "tools"),
        ("resources/list", "resources"),
        ("resources/templates/list", "resourceTemplates"),
        ("prompts/list", "prompts"),
    ):
        lists[key] = (await mcp.request(method, on_notification=lambda _: None)).get(key, [])
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
        capabilities.append(entry)
    card = {k: v for k, v in faces["card"].items() if k != "skills"}
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
    }


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
    return "\n".join(lines) + "\n"
