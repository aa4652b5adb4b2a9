"""MCP Apps (SEP-1865, the ``io.modelcontextprotocol/ui`` extension): a tool's UI, rendered by the host.

A tool names a ``ui://`` resource (``@tool(ui="ui://procurement/approval.html")``); the resource is an HTML
document served as ``text/html;profile=mcp-app``. A host that supports the extension reads it, renders it in a
sandboxed iframe beside the tool's result, and relays the page's requests (``tools/call``, ...) to the server
with the user's own credentials, so every access rule applies as to any other call. A host that does not
shows the tool's text result: a tool with a UI still answers with meaningful text (SEP-2133).

The value objects here only describe; :func:`ui_resource` builds the resource, and the MCP face serves both
(``agentmw.mcp.apps``). See docs/mcp-apps.md.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, get_args

from .capability import APP_MIME_TYPE, UI_SCHEME, check_tool_ui_uri, check_ui_uri
from .decorators import resource
from .errors import RegistrationError

__all__ = [
    "APP_MIME_TYPE",
    "EXTENSION_ID",
    "UI",
    "UI_SCHEME",
    "UiCsp",
    "UiPermissions",
    "UiResource",
    "Visibility",
    "client_supports_apps",
    "ui_resource",
]

EXTENSION_ID = "io.modelcontextprotocol/ui"
"""The extension's identifier in ``capabilities.extensions`` (SEP-2133), on both sides."""

Visibility = Literal["model", "app"]
"""Who may call a tool that has a UI: the model (it is in the model's tool list), the app (the page, through the
host), or both (the spec's default when ``visibility`` is left out)."""

# A CSP source as the spec's examples write them: a scheme, a host (its first label may be ``*``), a port.
# Nothing else: a value with a space or ';' would add directives to the policy the host builds from it.
_SOURCE = re.compile(r"^(https?|wss?)://(\*\.)?[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*(:(?P<port>\d{1,5}|\*))?$")
# what a host may splice into a sandbox origin or a CSP: a character that ends or quotes a directive, a
# header or an attribute has no place in a host name
_DOMAIN_FORBIDDEN = frozenset(";,'\"<>\\`")


def _is_source(value: str) -> bool:
    match = _SOURCE.fullmatch(value)
    if match is None:
        return False
    port = match.group("port")
    return port is None or port == "*" or 1 <= int(port) <= 65535


def _sources(values: Iterable[str], field: str) -> tuple[str, ...]:
    if isinstance(values, str):
        raise RegistrationError(f"UiCsp({field}=...) takes a list of origins, got the string {values!r}")
    out = tuple(values)
    for value in out:
        if not isinstance(value, str) or not _is_source(value):
            raise RegistrationError(
                f"UiCsp({field}=...): {value!r} is not an origin such as 'https://api.example.com', "
                f"'wss://events.example.com' or 'https://*.example.com'"
            )
    return out


@dataclass(frozen=True, slots=True)
class UI:
    """A tool's UI: the ``ui://`` resource a host renders, and who may call the tool.

    ``visibility=("app",)`` keeps the tool out of the model's tool list (the host filters it) for a tool only the
    page calls, such as a button's action; ``("model",)`` keeps the page from calling it. Left out, both may.
    """

    uri: str
    visibility: tuple[Visibility, ...] | None = None

    def __post_init__(self) -> None:
        check_tool_ui_uri(self.uri, "UI(...)")
        if self.visibility is None:
            return
        if isinstance(self.visibility, str):
            raise RegistrationError(
                f"UI(visibility=...) takes a tuple such as ('app',), got {self.visibility!r}"
            )
        visibility = tuple(self.visibility)
        allowed = get_args(Visibility)
        if (
            not visibility
            or any(v not in allowed for v in visibility)
            or len(set(visibility)) != len(visibility)
        ):
            raise RegistrationError(
                f"UI(visibility=...) is a non-empty tuple of distinct 'model' and 'app', got {self.visibility!r}"
            )
        object.__setattr__(self, "visibility", visibility)

    def tool_meta(self) -> dict[str, Any]:
        """The tool's ``_meta.ui``."""
        meta: dict[str, Any] = {"resourceUri": self.uri}
        if self.visibility is not None:
            meta["visibility"] = list(self.visibility)
        return meta


@dataclass(frozen=True, slots=True)
class UiCsp:
    """The origins a UI may reach, from which the host builds the iframe's Content-Security-Policy.

    ``connect_domains``: ``fetch``, XHR and WebSocket (``connect-src``); ``resource_domains``: scripts, styles,
    images, fonts and media; ``frame_domains``: nested iframes (``frame-src``); ``base_uri_domains``: the
    document's ``<base>`` (``base-uri``). Left empty, the host allows none: the page runs on what it inlines.
    """

    connect_domains: tuple[str, ...] = ()
    resource_domains: tuple[str, ...] = ()
    frame_domains: tuple[str, ...] = ()
    base_uri_domains: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for field in ("connect_domains", "resource_domains", "frame_domains", "base_uri_domains"):
            object.__setattr__(self, field, _sources(getattr(self, field), field))

    def as_meta(self) -> dict[str, list[str]]:
        """``_meta.ui.csp``: the fields that list an origin."""
        fields = (
            ("connectDomains", self.connect_domains),
            ("resourceDomains", self.resource_domains),
            ("frameDomains", self.frame_domains),
            ("baseUriDomains", self.base_uri_domains),
        )
        return {key: list(values) for key, values in fields if values}


@dataclass(frozen=True, slots=True)
class UiPermissions:
    """The iframe permissions a UI asks for; the host decides whether to grant them."""

    camera: bool = False
    microphone: bool = False
    geolocation: bool = False
    clipboard_write: bool = False

    def as_meta(self) -> dict[str, dict[str, Any]]:
        """``_meta.ui.permissions``: each one asked for is an empty object, as the spec writes it."""
        fields = (
            ("camera", self.camera),
            ("microphone", self.microphone),
            ("geolocation", self.geolocation),
            ("clipboardWrite", self.clipboard_write),
        )
        return {key: {} for key, wanted in fields if wanted}


@dataclass(frozen=True, slots=True)
class UiResource:
    """A ``ui://`` resource's ``_meta.ui``: its CSP origins, permissions, dedicated origin and border preference.

    ``domain`` is the dedicated origin the UI asks to run on (its format is the host's: for instance a hash of
    the server's URL under the host's sandbox domain); ``prefers_border`` asks the host to draw (True) or not
    draw (False) a border around it.
    """

    csp: UiCsp | None = None
    permissions: UiPermissions | None = None
    domain: str | None = None
    prefers_border: bool | None = None

    def __post_init__(self) -> None:
        domain = self.domain
        if domain is not None and (
            not isinstance(domain, str)
            or not domain
            or any(c.isspace() or not c.isprintable() or c in _DOMAIN_FORBIDDEN for c in domain)
        ):
            raise RegistrationError(
                f"UiResource(domain=...) is a host name or origin (no space, control character, quote, "
                f"';', ',', '<', '>'), got {domain!r}"
            )

    def as_meta(self) -> dict[str, Any]:
        """``_meta.ui`` of the resource, in both ``resources/list`` and the ``resources/read`` contents."""
        meta: dict[str, Any] = {}
        csp = self.csp.as_meta() if self.csp is not None else {}
        if csp:
            meta["csp"] = csp
        permissions = self.permissions.as_meta() if self.permissions is not None else {}
        if permissions:
            meta["permissions"] = permissions
        if self.domain is not None:
            meta["domain"] = self.domain
        if self.prefers_border is not None:
            meta["prefersBorder"] = self.prefers_border
        return meta


def ui_resource(
    uri: str,
    *,
    html: str | None = None,
    file: str | Path | None = None,
    csp: UiCsp | None = None,
    permissions: UiPermissions | None = None,
    domain: str | None = None,
    prefers_border: bool | None = None,
    name: str | None = None,
    title: str | None = None,
    description: str | None = None,
    scopes: list[str] | None = None,
    roles: list[str] | None = None,
) -> Callable[[], str]:
    """An MCP App's UI as a resource: a function marked ``@resource(uri)`` that returns the HTML.

    Give the document as ``html`` or as a ``file`` (read once, here, as UTF-8: a missing file fails at start-up,
    no request reads the disk, and an edit shows after a restart). Register the function like any other
    (``Agent(include=[...])`` or ``agent.include(...)``); ``scopes`` and ``roles`` apply to ``resources/read``
    as to any resource. Its name is ``name``, else the URI.
    """
    check_ui_uri(uri, "ui_resource(...)")
    if (html is None) == (file is None):
        raise RegistrationError(
            f"ui_resource({uri!r}): give the document as html=... or as file=..., one of them"
        )
    if file is not None:
        try:
            html = Path(file).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise RegistrationError(f"ui_resource({uri!r}): cannot read {str(file)!r}: {exc}") from exc
    if not isinstance(html, str) or not html.strip():
        raise RegistrationError(f"ui_resource({uri!r}): the HTML document is empty")
    document: str = html

    def serve() -> str:
        return document

    label = name or uri
    serve.__name__ = serve.__qualname__ = re.sub(r"\W", "_", label)
    # where the document was written, for messages about it (``agentmw lint``): the file, else the declaration
    caller = sys._getframe(1)
    where = str(file) if file is not None else f"{caller.f_code.co_filename}:{caller.f_lineno}"
    serve.ui_source = where  # type: ignore[attr-defined]
    meta = UiResource(csp=csp, permissions=permissions, domain=domain, prefers_border=prefers_border)
    marked: Callable[[], str] = resource(
        uri,
        name=label,
        title=title,
        contract=description or "",
        summary=description or "",
        ui=meta,
        scopes=scopes,
        roles=roles,
    )(serve)
    return marked


def client_supports_apps(capabilities: Mapping[str, Any] | None) -> bool:
    """Whether a client's capabilities (``initialize``'s, or a 2026 request's) declare MCP Apps: the extension,
    with ``text/html;profile=mcp-app`` among its ``mimeTypes``, as the official SDKs check it."""
    extensions = (capabilities or {}).get("extensions")
    settings = extensions.get(EXTENSION_ID) if isinstance(extensions, Mapping) else None
    mime_types = settings.get("mimeTypes") if isinstance(settings, Mapping) else None
    return isinstance(mime_types, (list, tuple)) and APP_MIME_TYPE in mime_types
