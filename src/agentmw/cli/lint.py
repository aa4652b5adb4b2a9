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
| AMW013 | error | a tool's MCP App UI (``ui=``) is a served ``ui://`` resource of type ``text/html;profile=mcp-app`` |
| AMW014 | error (warning when only likely) | an MCP App's document loads only what its CSP allows: no relative URL, no origin it does not declare |
| AMW015 | error | a skill package folder is a package: ``SKILL.md`` at its root, valid frontmatter, its name the folder's, within the limits |
| AMW016 | warning | the links of a skill package's ``SKILL.md`` lead to files the package holds |
| AMW017 | warning | a capability that sends A2UI surfaces is served where they are shown: a skill declares A2UI among its output modes |

Codes never change meaning; new rules get new codes.
"""

from __future__ import annotations

import inspect
import json
import os
import pathlib
import posixpath
import re
import typing
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from html.parser import HTMLParser
from pathlib import PurePosixPath
from typing import Any, Literal
from urllib.parse import unquote, urlsplit

from .._docstrings import parse_docstring
from ..a2ui import MIME_TYPE as A2UI_MIME_TYPE
from ..capability import APP_MIME_TYPE, Capability, _hints
from ..decorators import specs_of
from ..selection import RouteInfo, route_of
from ..skill_packages import MAX_SKILL_BYTES, MAX_SKILL_FILES, SkillPackage, SkillPackageError, serve_package
from .report import capabilities_by_function, routes_by_endpoint, sends_surfaces, shown_path, source_of

__all__ = [
    "CONTRACT_BUDGET",
    "EXTENSION_RULES",
    "RULES",
    "SUMMARY_BUDGET",
    "Finding",
    "baseline_names",
    "lint_agent",
    "lint_skill_package",
]

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
    "AMW013": "MCP App UI resource served",
    "AMW014": "MCP App document within its CSP",
    "AMW015": "skill package folder valid",
    "AMW016": "skill package links resolve",
    "AMW017": "A2UI surfaces shown",
}
EXTENSION_RULES = frozenset({"AMW013", "AMW014", "AMW015", "AMW016", "AMW017"})
"""The rules of MCP Apps, MCP skill packages and A2UI (issue 26)."""
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

    # --- MCP Apps, skill packages, A2UI ---------------------------------------------------------------
    def app_ui(self, cap: Capability) -> None:
        if cap.kind != "tool" or not cap.ui:
            return
        uri = cap.ui["resourceUri"]
        found = self.agent.find_resource(uri)
        if found is None:
            self.add(
                "AMW013",
                "error",
                cap,
                f"names the UI {uri!r}, which this agent does not serve: a host with MCP Apps finds no "
                "document to render beside its result",
                "serve it (agentmw.apps.ui_resource(uri, file=...) or @resource(uri), then include it in the "
                "Agent), or correct the URI",
            )
        elif found[0].mime_type != APP_MIME_TYPE:
            self.add(
                "AMW013",
                "error",
                cap,
                f"names the UI {uri!r}, served as {found[0].mime_type!r}: hosts render only "
                f"{APP_MIME_TYPE!r}",
                "serve the UI with agentmw.apps.ui_resource, which gives it that type",
            )

    def app_document(self, cap: Capability) -> None:
        if cap.kind != "resource" or cap.ui is None or cap.uri is None:
            return
        html = _ui_document(cap)
        if html is None:
            return
        declared = cap.ui.get("csp") or {}
        seen: set[tuple[str, str]] = set()
        for load in _loads(html):
            key = (load.url, load.field)
            if key in seen:
                continue
            seen.add(key)
            origin = _origin(load.url)
            if origin is None:
                self.add(
                    "AMW014",
                    "error",
                    cap,
                    f"loads {load.url!r} ({load.what}), a relative URL: the host renders the document on its "
                    "own, with nothing behind ui:// to fetch it from",
                    "inline it in the document (a <script>, a <style>, a data: URL), or load it from an origin "
                    f"the CSP declares ({load.field})",
                )
            elif not any(_allows(source, origin) for source in declared.get(load.field, ())):
                self.add(
                    "AMW014",
                    "error" if load.certain else "warning",
                    cap,
                    f"{'loads' if load.certain else 'seems to reach'} {load.url!r} ({load.what}), but its "
                    f"CSP does not declare {origin} in {load.field}: the host's policy blocks it",
                    f"add {origin!r} to UiCsp({_CSP_ARGUMENT[load.field]}=...) of its ui_resource "
                    "(or inline what it loads)",
                )

    def surfaces(self, cap: Capability) -> None:
        if cap.kind not in ("tool", "skill") or not sends_surfaces(cap):
            return
        if cap.kind == "skill" and A2UI_MIME_TYPE not in cap.output_modes:
            self.add(
                "AMW017",
                "warning",
                cap,
                "sends A2UI surfaces (ctx.surface) but does not name A2UI among its output modes: the card "
                "does not declare the A2UI extension, so A2A clients never ask for the surfaces and are "
                "never sent them (AG-UI front ends still are)",
                f'@skill(output_modes=("text/plain", "{A2UI_MIME_TYPE}")) (agentmw.a2ui.MIME_TYPE)',
            )
        elif cap.kind == "tool" and not any(cap.name in s.groups for s in self.agent.skills.values()):
            self.add(
                "AMW017",
                "warning",
                cap,
                "sends A2UI surfaces (ctx.surface), but it is only a tool, and MCP has no place for "
                "them: they are dropped",
                "send them from a skill (A2A and AG-UI show them), or group the tool in one",
            )

    def skill_packages(self) -> None:
        for served in self.agent.skill_packages.values():
            package = served.package
            self.findings += _package_links(package, shown_path(package.source) if package.source else "")

    def run(self) -> list[Finding]:
        for fn, caps in capabilities_by_function(self.agent):
            for cap in caps:
                self.descriptions(cap)
                self.side_effects(cap)
                self.untrusted(cap)
                self.paths(cap)
                self.output(cap)
                self.app_ui(cap)
                self.app_document(cap)
                self.surfaces(cap)
            self.route(fn, caps)
        self.names()
        self.copies()
        self.skill_packages()
        return self.findings


# --- MCP Apps: what a UI document loads ----------------------------------------------------------------

_APPS_MODULE = "agentmw.apps"  # where ui_resource defines the functions it returns

_CSP_ARGUMENT = {
    "connectDomains": "connect_domains",
    "resourceDomains": "resource_domains",
    "frameDomains": "frame_domains",
    "baseUriDomains": "base_uri_domains",
}
_LOADABLE = ("http", "https", "ws", "wss")
_LINK_LOADS = frozenset({"stylesheet", "modulepreload", "preload", "icon"})
_MEDIA = frozenset({"img", "audio", "video", "source", "track"})
_CSS_URL = re.compile(r"""url\(\s*["']?([^"')\s]+)|@import\s+["']([^"']+)["']""")
_IMPORT = re.compile(
    r"""\bimport\s*(?:[\w$*{}\s,]+?\s*from\s*)?["']([^"']+)["']|\bimport\(\s*["']([^"']+)["']"""
)
_CONNECT = re.compile(
    r"""\b(fetch|new\s+WebSocket|new\s+EventSource)\s*\(\s*["'`]((?:https?|wss?)://[^"'`\s]+)"""
)


@dataclass(frozen=True, slots=True)
class _Load:
    url: str
    field: str  # the _meta.ui.csp field that must declare its origin
    what: str
    certain: bool = True  # markup and imports load for certain; a URL in script text only likely


class _Loads(HTMLParser):
    """What an HTML document loads from elsewhere: its markup's URLs, its styles' and scripts' imports."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.loads: list[_Load] = []
        self._in: str | None = None  # "script" or "style" while reading one's text

    def _add(self, url: str | None, field: str, what: str, certain: bool = True) -> None:
        url = (url or "").strip()
        if not url or url.startswith("#") or "${" in url:
            return
        scheme = urlsplit(url).scheme.lower()
        if scheme and scheme not in _LOADABLE:  # data:, blob:, mailto:, javascript: ... load nothing remote
            return
        if not scheme and not url.startswith(("/", ".")) and field != "resourceDomains":
            return
        self.loads.append(_Load(url, field, what, certain))

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "script":
            self._add(a.get("src"), "resourceDomains", "a <script src>")
            self._in = "script"
        elif tag == "style":
            self._in = "style"
        elif tag == "link" and _LINK_LOADS & set((a.get("rel") or "").lower().split()):
            self._add(a.get("href"), "resourceDomains", f"a <link rel={a.get('rel')}>")
        elif tag in _MEDIA:
            self._add(a.get("src"), "resourceDomains", f"an <{tag} src>")
            for candidate in (a.get("srcset") or "").split(","):
                self._add(candidate.strip().split(" ")[0], "resourceDomains", f"an <{tag} srcset>")
        elif tag in ("iframe", "frame"):
            self._add(a.get("src"), "frameDomains", f"an <{tag} src>")
        elif tag == "base":
            self._add(a.get("href"), "baseUriDomains", "its <base href>")
        if a.get("style"):
            self._css(a["style"] or "")

    def handle_endtag(self, tag: str) -> None:
        if tag in ("script", "style"):
            self._in = None

    def _css(self, text: str) -> None:
        for match in _CSS_URL.finditer(text):
            self._add(match.group(1) or match.group(2), "resourceDomains", "a CSS url() or @import")

    def handle_data(self, data: str) -> None:
        if self._in == "style":
            self._css(data)
        elif self._in == "script":
            for match in _IMPORT.finditer(data):
                url = match.group(1) or match.group(2)
                if (
                    url.startswith(("/", ".")) or "://" in url
                ):  # a bare specifier needs an import map: not ours
                    self._add(url, "resourceDomains", "a script's import")
            for match in _CONNECT.finditer(data):
                call = re.sub(r"\s+", " ", match.group(1))
                self._add(match.group(2), "connectDomains", f"{call}(...) in a script", certain=False)


def _loads(html: str) -> list[_Load]:
    parser = _Loads()
    parser.feed(html)
    parser.close()
    return parser.loads


def _origin(url: str) -> str | None:
    """``scheme://host[:port]`` of an absolute URL (``//host`` is https, as under the host's https page); None
    for a relative one."""
    parts = urlsplit("https:" + url if url.startswith("//") else url)
    if not parts.scheme or not parts.hostname:
        return None
    return f"{parts.scheme.lower()}://{parts.hostname}" + (f":{parts.port}" if parts.port else "")


_SCHEMES_ALLOWED = {"http": _LOADABLE, "https": ("https", "wss"), "ws": ("ws", "wss"), "wss": ("wss",)}


def _allows(source: str, origin: str) -> bool:
    """Whether a CSP source (``https://api.example.com``, ``https://*.example.com``, ``wss://x:*``) matches an
    origin, by CSP's rules: a scheme allows its secure upgrade, ``*.`` any subdomain, no port the default."""
    src_scheme, _, src_rest = source.partition("://")
    scheme, _, rest = origin.partition("://")
    if scheme not in _SCHEMES_ALLOWED.get(src_scheme.lower(), ()):
        return False
    src_host, _, src_port = src_rest.lower().partition(":")
    host, _, port = rest.partition(":")
    if src_host.startswith("*."):
        if not host.endswith(src_host[1:]):
            return False
    elif host != src_host:
        return False
    return src_port == "*" or src_port == port


def _ui_document(cap: Capability) -> str | None:
    """The HTML of a ``ui_resource``: its function only returns the document it read when it was declared. Lint
    runs no other function (a hand-written ``@resource("ui://...")`` may do anything), so it reads no other."""
    fn = inspect.unwrap(cap.fn)
    if getattr(fn, "__module__", None) != _APPS_MODULE or cap.is_async or cap.params.arg_names:
        return None
    try:
        value = fn()
    except Exception:  # noqa: BLE001 (it cannot fail; if it did, there is no document to check)
        return None
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    return value if isinstance(value, str) else None


# --- skill packages --------------------------------------------------------------------------------------

_MD_LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+[\"'(][^)]*)?\)")
_FENCE = re.compile(r"^\s*(```|~~~)")
_INLINE_CODE = re.compile(r"`[^`]*`")
_PACKAGE_FIX = (
    "give the folder the Agent Skills layout: SKILL.md at its root, its frontmatter's name the folder's name "
    "(lowercase letters, digits, single hyphens) and a description of at most 1,024 characters; at most "
    f"{MAX_SKILL_FILES} files and {MAX_SKILL_BYTES // (1024 * 1024)} MiB (docs/skill-packages.md)"
)


def _package_links(package: SkillPackage, where: str) -> list[Finding]:
    """AMW016: each relative link of SKILL.md's instructions names a file (or folder) of the package."""
    skill_md = package.file("SKILL.md")
    text = skill_md.text if skill_md is not None else None
    if not text:
        return []
    paths = {f.path for f in package.files}
    folders = {str(parent) for p in paths for parent in PurePosixPath(p).parents}
    findings: list[Finding] = []
    lines = text.splitlines()
    start = 0
    if lines and lines[0].strip() == "---":  # the frontmatter is not instructions
        start = next((i + 1 for i in range(1, len(lines)) if lines[i].startswith("---")), 0)
    fenced = False
    for number, line in enumerate(lines[start:], start + 1):
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if fenced:
            continue
        for match in _MD_LINK.finditer(_INLINE_CODE.sub("", line)):
            target = match.group(1)
            parts = urlsplit(target)
            if parts.scheme or parts.netloc or not parts.path or target.startswith("/"):
                continue  # a web link, an anchor, or an absolute path: not a file of the package
            path = posixpath.normpath(unquote(parts.path))
            if path in paths or path in folders:
                continue
            outside = path == ".." or path.startswith("../")
            findings.append(
                Finding(
                    "AMW016",
                    "warning",
                    "skill package",
                    package.name,
                    f"links to {target!r} in SKILL.md, which "
                    + (
                        "leads outside the package: a host serves only the package's own files"
                        if outside
                        else "the package does not hold: a model that follows the link finds nothing"
                    ),
                    "add the file to the package's folder (hidden files, named with a leading '.', are left "
                    "out), or correct the link",
                    f"{where}/SKILL.md:{number}" if package.source is not None else "",
                )
            )
    return findings


def lint_skill_package(path: str | os.PathLike[str]) -> list[Finding]:
    """The findings for a skill package folder, or for a folder of them (each subfolder one package), as
    :class:`SkillPackage.from_folder` reads it: AMW015 when it cannot be served, else AMW016. Raises
    ``ValueError`` when ``path`` is not a folder."""
    root = pathlib.Path(path)
    if not root.is_dir():
        raise ValueError(f"{os.fspath(path)!r} is not a folder")
    folders = [root]
    if not (root / "SKILL.md").exists():
        children = sorted(c for c in root.iterdir() if c.is_dir() and not c.name.startswith("."))
        if any((c / "SKILL.md").exists() for c in children):
            folders = (
                children  # a folder of packages: each subfolder is one (and one without SKILL.md is wrong)
            )
    findings: list[Finding] = []
    for folder in folders:
        shown = shown_path(folder)
        try:
            package = SkillPackage.from_folder(folder)
            serve_package(package)  # what agent.include() does next: its uris too
        except (SkillPackageError, ValueError) as exc:  # (a file name quote() cannot encode is a ValueError)
            detail = (
                str(exc).removeprefix(f"skill package folder {str(folder)!r}: ")
                if isinstance(exc, SkillPackageError)
                else f"a file's name cannot be written in a skill:// uri ({exc})"
            )
            findings.append(
                Finding(
                    "AMW015",
                    "error",
                    "skill package folder",
                    pathlib.Path(os.path.abspath(folder)).name,  # as given ("." has no name)
                    f"cannot be served: {detail}",
                    _PACKAGE_FIX,
                    shown,
                )
            )
            continue
        findings += _package_links(package, shown)
    return sorted(findings, key=_position)


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
