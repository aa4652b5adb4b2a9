"""``agentmw lint``: the rules that make a capability safe and usable, each with a stable code, a message and a fix.

| code | level | rule |
|---|---|---|
| AMW001 | error (warning for resources, prompts) | the capability has a contract (the description a model reads) |
| AMW002 | error for skills, warning for tools | it has a summary of its own (the card shows a skill's) |
| AMW003 | error | the summary says something else than the contract |
| AMW004 | error | a tool with side effects is gated, idempotent, or takes an idempotency key |
| AMW005 | error (warning when only likely) | a tool that returns outside text is marked ``untrusted`` |
| AMW006 | error (warning when only the name says so) | a path parameter is a ``RootedPath`` |
| AMW007 | warning | descriptions keep to their length budgets |
| AMW008 | error | a tool or skill declares its output type |
| AMW009 | error (warning for generated-looking names) | names are stable: none collide once case and separators are folded; none of the ``--baseline`` is gone |
| AMW010 | error | a skill is not a one-to-one copy of the one tool it groups |
| AMW011 | warning | a route exposed in bulk (no decorator) has derived descriptions |
| AMW012 | retired | (was: a route's ``dependencies=[...]`` do not run for agent calls; they do now) |

Codes never change meaning; new rules get new codes.
"""

from __future__ import annotations

import inspect
import json
import pathlib
import re
import typing
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any, Literal

from .._docstrings import parse_docstring
from ..capability import Capability, _hints
from ..decorators import specs_of
from ..selection import RouteInfo, route_of
from .report import capabilities_by_function, routes_by_endpoint, source_of

__all__ = ["CONTRACT_BUDGET", "RULES", "SUMMARY_BUDGET", "Finding", "baseline_names", "lint_agent"]

Level = Literal["error", "warning"]

CONTRACT_BUDGET = 1024  # characters; many model APIs cut or refuse longer tool descriptions
SUMMARY_BUDGET = 200  # a scheduler compares many summaries side by side
PARAMETER_BUDGET = 300

RULES: dict[str, str] = {
    "AMW001": "contract present",
    "AMW002": "summary present",
    "AMW003": "summary distinct from the contract",
    "AMW004": "side effects gated or idempotent",
    "AMW005": "outside text marked untrusted",
    "AMW006": "path parameters are RootedPath",
    "AMW007": "description length budgets",
    "AMW008": "output type declared",
    "AMW009": "names stable",
    "AMW010": "grouped skills are not copies of tools",
    "AMW011": "route exposed in bulk",
}
RETIRED = frozenset({"AMW012"})
"""Codes no rule reports any more; never given to a new rule."""

_PATH_NAME = re.compile(r"(^|_)(path|paths|file|files|filename|filepath|dir|dirs|directory|folder)$")
_URL_NAME = re.compile(r"(^|_)(url|urls|uri|link|endpoint)$")
_GENERATED_NAME = re.compile(r"__.*_(get|post|put|patch|delete|head|options)$")
_IDEMPOTENCY_PARAM = re.compile(r"(^|_)idempotency_key$")
_SUMMARY_SECTION = re.compile(r"^Summary:\s*$", re.MULTILINE)  # parse_docstring falls back to the first line


@dataclass(frozen=True, slots=True)
class Finding:
    code: str
    level: Level
    kind: str
    name: str
    message: str
    """Reads after the capability: ``tool search_assets`` + `` has no summary...``."""
    fix: str
    source: str = ""

    def line(self) -> str:
        where = f"{self.source}: " if self.source else ""
        return f"{where}{self.code} {self.level}: {self.kind} {self.name} {self.message}\n    fix: {self.fix}"

    def to_dict(self) -> dict[str, str]:
        return asdict(self)


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().rstrip(".").lower()


def _summary_given(cap: Capability) -> bool:
    for spec in specs_of(cap.fn):
        if spec.kind == cap.kind and spec.options.get("summary"):
            return True
    doc = inspect.getdoc(inspect.unwrap(cap.fn)) or ""
    return _SUMMARY_SECTION.search(doc) is not None and bool(parse_docstring(doc).summary)


def _annotation(cap: Capability, name: str) -> Any:
    model = cap.params.input_model
    field = model.model_fields.get(name) if model is not None else None
    return field.annotation if field is not None else None


def _is_path_type(annotation: Any) -> bool:
    if isinstance(annotation, type):
        return issubclass(annotation, (pathlib.PurePath,))
    return any(_is_path_type(a) for a in typing.get_args(annotation))


def _is_url_type(annotation: Any) -> bool:
    if isinstance(annotation, type):
        return annotation.__module__.startswith("pydantic") and "Url" in annotation.__name__
    return any(_is_url_type(a) for a in typing.get_args(annotation))


def _returns_declared(cap: Capability) -> bool:
    if (
        cap.route is not None
    ):  # FastAPI's response_model (or a return annotation it serialises with) is the type
        return cap.route.response_model not in (None, Any)
    annotation = _hints(inspect.unwrap(cap.fn)).get("return", inspect.Signature.empty)
    return annotation is not inspect.Signature.empty and annotation is not Any


class _Linter:
    def __init__(
        self, agent: Any, routes: Mapping[int, RouteInfo], baseline: Mapping[str, Iterable[str]] | None
    ):
        self.agent = agent
        self.routes = routes
        self.baseline = baseline
        self.findings: list[Finding] = []

    def add(
        self,
        code: str,
        level: Level,
        cap: Capability | None,
        message: str,
        fix: str,
        kind: str = "",
        name: str = "",
    ) -> None:
        self.findings.append(
            Finding(
                code,
                level,
                cap.kind if cap else kind,
                cap.name if cap else name,
                message,
                fix,
                source_of(cap.fn) if cap else "",
            )
        )

    # --- per capability ------------------------------------------------------------------------------
    def descriptions(self, cap: Capability) -> None:
        if not cap.contract.strip():
            self.add(
                "AMW001",
                "error" if cap.kind in ("tool", "skill") else "warning",
                cap,
                "has no contract: MCP shows no description, so a model cannot tell when to use it",
                "write a docstring (what it does, its arguments and limits, when not to use it), or pass contract=",
            )
            return
        if cap.kind in ("tool", "skill") and not _summary_given(cap):
            self.add(
                "AMW002",
                "error" if cap.kind == "skill" else "warning",
                cap,
                "has no summary: the contract's first line stands in for it"
                + (" on the A2A card" if cap.kind == "skill" else ""),
                "add a `Summary:` section to the docstring (which business need it serves, how it differs from "
                "its neighbours), or pass summary=",
            )
        elif cap.kind in ("tool", "skill"):
            first_paragraph = cap.contract.strip().split("\n\n", 1)[0]
            if _norm(cap.summary) in (
                _norm(cap.contract),
                _norm(first_paragraph),
                _norm(cap.contract.split("\n")[0]),
            ):
                self.add(
                    "AMW003",
                    "error",
                    cap,
                    "has a summary that repeats its contract",
                    "the summary is for a scheduler choosing between capabilities: say which need it serves, "
                    "not how to call it",
                )
        if len(cap.contract) > CONTRACT_BUDGET:
            self.add(
                "AMW007",
                "warning",
                cap,
                f"has a contract of {len(cap.contract)} characters "
                f"(budget {CONTRACT_BUDGET}); clients cut or refuse long descriptions",
                "keep the contract to what a model needs; move background to docs",
            )
        if cap.kind in ("tool", "skill") and len(cap.summary) > SUMMARY_BUDGET:
            self.add(
                "AMW007",
                "warning",
                cap,
                f"has a summary of {len(cap.summary)} characters (budget {SUMMARY_BUDGET})",
                "one or two sentences: the need it serves",
            )
        for name, schema in cap.input_schema.get("properties", {}).items():
            text = schema.get("description", "") if isinstance(schema, dict) else ""
            if len(text) > PARAMETER_BUDGET:
                self.add(
                    "AMW007",
                    "warning",
                    cap,
                    f"has an argument {name!r} described in {len(text)} characters "
                    f"(budget {PARAMETER_BUDGET})",
                    "shorten the Args: entry",
                )

    def side_effects(self, cap: Capability) -> None:
        if cap.kind != "tool" or not cap.side_effects or cap.gate is not None:
            return
        if (cap.annotations or {}).get("idempotentHint") is True:
            return
        if any(_IDEMPOTENCY_PARAM.search(n) for n in cap.argument_names):
            return
        self.add(
            "AMW004",
            "error",
            cap,
            "may change things (it is not read_only) but is neither gated nor idempotent: "
            "a model's retry or a replayed call does it twice, unasked",
            "@tool(read_only=True) if it changes nothing; @human_gate(side_effects=...) to have a person "
            "approve each call; or make repeats harmless (an idempotency_key argument) and say so with "
            "idempotent=True",
        )

    def untrusted(self, cap: Capability) -> None:
        if cap.kind not in ("tool", "skill") or cap.untrusted:
            return
        hints = cap.annotations or {}
        fetches = [n for n in cap.argument_names if _URL_NAME.search(n) or _is_url_type(_annotation(cap, n))]
        fix = (
            "mark it untrusted=True so its text reaches models framed as data; or, if the text is the app's own, "
            "say so with open_world=False"
        )
        if hints.get("openWorldHint") is True or fetches:
            why = (
                "declares open_world=True" if hints.get("openWorldHint") is True else f"takes {fetches[0]!r}"
            )
            self.add(
                "AMW005",
                "error",
                cap,
                f"{why}, so it returns outside text, but is not "
                "marked untrusted: instructions hidden in that text reach the model as if they were yours",
                fix,
            )
        elif cap.kind == "tool" and cap.output.mode == "content" and "openWorldHint" not in hints:
            self.add(
                "AMW005",
                "warning",
                cap,
                "returns text and does not say where it comes "
                "from (MCP reads a missing open_world hint as true: outside text)",
                fix,
            )

    def paths(self, cap: Capability) -> None:
        route = self.routes.get(id(cap.fn))
        route_paths = set(re.findall(r"\{(\w+):path\}", route.path)) if route else set()
        for name in cap.argument_names:
            if name in cap.path_params:
                continue
            annotation = _annotation(cap, name)
            if _is_path_type(annotation) or name in route_paths:
                why = (
                    "is a filesystem path" if _is_path_type(annotation) else "is a {...:path} route parameter"
                )
                self.add(
                    "AMW006",
                    "error",
                    cap,
                    f"takes {name!r}, which {why} but not a "
                    "RootedPath: nothing keeps it inside the agent's roots ('../../etc/passwd')",
                    f"declare `{name}: RootedPath` (agentmw.safety) and give Agent(roots=[...])",
                )
            elif annotation is str and _PATH_NAME.search(name):
                self.add(
                    "AMW006",
                    "warning",
                    cap,
                    f"takes {name!r}, which looks like a path but is a plain str",
                    f"if it names a file, declare `{name}: RootedPath`; otherwise rename it",
                )

    def output(self, cap: Capability) -> None:
        if cap.kind not in ("tool", "skill") or cap.is_async_gen or _returns_declared(cap):
            return
        self.add(
            "AMW008",
            "error",
            cap,
            "declares no return type: MCP gets no output schema and clients cannot check what comes back",
            "annotate the return type (a model, list[Model], str, None...)",
        )

    def route(self, fn: Any, caps: list[Capability]) -> None:
        cap = caps[0]
        bulk = route_of(cap)
        if bulk is not None and not specs_of(fn):
            self.add(
                "AMW011",
                "warning",
                cap,
                f"is exposed in bulk from {','.join(bulk['methods'])} "
                f"{bulk['path']}: its description and hints are derived from the route",
                "decorate the handler with @tool and write its contract and summary (or leave it out of the "
                "selection)",
            )

    # --- across capabilities -------------------------------------------------------------------------
    def names(self) -> None:
        agent = self.agent
        for kind, table in (("tool", agent.tools), ("skill", agent.skills), ("prompt", agent.prompts)):
            folded: dict[str, str] = {}
            for name, cap in table.items():
                key = re.sub(r"[-_.]", "", name).lower()
                if key in folded:
                    self.add(
                        "AMW009",
                        "error",
                        cap,
                        f"and {kind} {folded[key]!r} differ only in case or "
                        "separators: clients that fold them see one name",
                        "rename one of them",
                    )
                folded.setdefault(key, name)
                if _GENERATED_NAME.search(name):
                    self.add(
                        "AMW009",
                        "warning",
                        cap,
                        "has a name that looks generated from a path and "
                        "method: it changes whenever the route does",
                        "give it a name of its own (name= or the route's operation_id)",
                    )
        if self.baseline is None:
            return
        current = {
            "tool": set(agent.tools),
            "skill": set(agent.skills),
            "prompt": set(agent.prompts),
            "resource": {
                c.uri or c.uri_template for c in (*agent.resources.values(), *agent.templates.values())
            },
        }
        for kind, names in self.baseline.items():
            for name in sorted(set(names) - current.get(kind, set())):
                self.add(
                    "AMW009",
                    "error",
                    None,
                    "is in the baseline but no longer served: clients "
                    "and other agents that call it by name break",
                    "keep the name (name=...), or update the baseline when the removal is intended",
                    kind=kind,
                    name=name,
                )

    def copies(self) -> None:
        for skill in self.agent.skills.values():
            if len(skill.groups) != 1:
                continue
            tool = self.agent.tools.get(skill.groups[0])
            if tool is None or tool.fn is skill.fn:
                continue
            if set(skill.argument_names) == set(tool.argument_names):
                self.add(
                    "AMW010",
                    "error",
                    skill,
                    f"groups only tool {tool.name!r} and takes the "
                    "same arguments: a one-to-one copy adds a card entry, not a capability",
                    "make the skill a business capability over several tools (or several steps), or serve the "
                    "tool alone",
                )

    def run(self) -> list[Finding]:
        for fn, caps in capabilities_by_function(self.agent):
            for cap in caps:
                self.descriptions(cap)
                self.side_effects(cap)
                self.untrusted(cap)
                self.paths(cap)
                self.output(cap)
            self.route(fn, caps)
        self.names()
        self.copies()
        return self.findings


def lint_agent(
    agent: Any, *, host: Any = None, baseline: Mapping[str, Iterable[str]] | None = None
) -> list[Finding]:
    """Every finding for ``agent`` (``host``: the app whose routes serve its handlers, for the route rules)."""
    findings = _Linter(agent, routes_by_endpoint(host), baseline).run()
    return sorted(findings, key=_position)


def _position(finding: Finding) -> tuple[str, int, str]:
    path, _, line = finding.source.rpartition(":")
    return (path, int(line), finding.code) if line.isdigit() else (finding.source, 0, finding.code)


def baseline_names(text: str) -> dict[str, list[str]]:
    """The names a baseline holds: an ``agentmw inspect --json`` document, or ``{"tool": [...], "skill": [...]}``."""
    data = json.loads(text)
    if "capabilities" not in data:
        return {kind: list(names) for kind, names in data.items()}
    names: dict[str, list[str]] = {}
    for cap in data["capabilities"]:
        for kind, shown in cap.get("mcp", {}).items():
            key = "resource" if kind.startswith("resource") else kind
            names.setdefault(key, []).append(
                shown.get("name") if key != "resource" else shown.get("uri") or shown.get("uriTemplate")
            )
        if cap.get("a2a") and cap["a2a"].get("skill"):
            names.setdefault("skill", []).append(cap["a2a"]["skill"]["id"])
    return names
