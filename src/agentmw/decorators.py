"""``@tool``, ``@resource`` and ``@prompt``: mark a function as a capability and hand it back unchanged.

The decorators return the very function they were given, so it stays callable exactly as before and a
FastAPI route handler keeps serving its route, whichever order the decorators are stacked in. The
mark is read when an :class:`~agentmw.Agent` includes the function (``agent.include(...)``), or the
decorator is used as a method of an agent (``@agent.tool``), which registers at once.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar, overload

from .capability import CapabilityKind, check_tool_ui_uri, ui_metadata
from .errors import RegistrationError

if TYPE_CHECKING:
    from .apps import UI, UiResource

__all__ = ["CapabilitySpec", "prompt", "resource", "skill", "specs_of", "tool"]

F = TypeVar("F", bound=Callable[..., Any])
MARK = "__agentmw_specs__"


@dataclass(frozen=True, slots=True)
class CapabilitySpec:
    kind: CapabilityKind
    options: Mapping[str, Any] = field(default_factory=dict)


def specs_of(fn: Any) -> tuple[CapabilitySpec, ...]:
    return tuple(getattr(fn, MARK, ()))


MARKED: weakref.WeakSet[Any] = weakref.WeakSet()
"""Every function a decorator marked, so that the first request can warn about those no agent serves."""
SERVED: weakref.WeakSet[Any] = weakref.WeakSet()
"""Every function an agent registered."""


def _mark(fn: F, spec: CapabilitySpec) -> F:
    existing = list(getattr(fn, MARK, ()))
    existing.append(spec)
    try:
        setattr(fn, MARK, tuple(existing))
    except (AttributeError, TypeError) as exc:  # builtins, some C callables
        raise TypeError(f"agentmw cannot decorate {fn!r}: it does not accept attributes") from exc
    try:
        MARKED.add(fn)
    except TypeError:  # not weakly referenceable: never warned about
        pass
    return fn


def tool_options(
    name: str | None = None,
    *,
    title: str | None = None,
    contract: str | None = None,
    summary: str | None = None,
    read_only: bool | None = None,
    destructive: bool | None = None,
    idempotent: bool | None = None,
    open_world: bool | None = None,
    tags: tuple[str, ...] = (),
    examples: tuple[str, ...] = (),
    untrusted: bool = False,
    meta: Mapping[str, Any] | None = None,
    timeout: float | None = None,
    max_in_flight: int | None = None,
    scopes: tuple[str, ...] | list[str] | None = None,
    roles: tuple[str, ...] | list[str] | None = None,
    rate_limit: Any = None,
    input_schema: Mapping[str, Any] | None = None,
    task: str | None = None,
    ask_first: bool = False,
    ui: UI | str | None = None,
) -> dict[str, Any]:
    annotations = {
        key: value
        for key, value in (
            ("title", title),
            ("readOnlyHint", read_only),
            ("destructiveHint", destructive),
            ("idempotentHint", idempotent),
            ("openWorldHint", open_world),
        )
        if value is not None
    }
    return {
        "name": name,
        "title": title,
        "contract": contract,
        "summary": summary,
        "annotations": annotations or None,
        "tags": tuple(tags),
        "examples": tuple(examples),
        "untrusted": untrusted,
        "meta": meta,
        "timeout": timeout,
        "max_in_flight": max_in_flight,
        "input_schema": input_schema,
        "task": task,
        "ask_first": ask_first,
        "ui": _tool_ui(ui, name),
        **_access(scopes, roles, rate_limit),
    }


def _tool_ui(ui: Any, name: str | None) -> dict[str, Any] | None:
    """A tool's ``ui=`` as its ``_meta.ui``: a ``ui://`` URI, or an :class:`agentmw.apps.UI` (checked when made)."""
    if ui is None:
        return None
    if isinstance(ui, str):
        return {"resourceUri": check_tool_ui_uri(ui, f"@tool(ui=...){f' of {name!r}' if name else ''}")}
    meta = getattr(ui, "tool_meta", None)
    if not callable(meta):
        raise RegistrationError(
            f"@tool(ui=...) takes a ui:// URI or an agentmw.apps.UI, got {type(ui).__name__}"
        )
    value: dict[str, Any] = meta()
    return value


# the keys of a ui:// resource's ``_meta.ui`` (UiResource.as_meta): what tells a UiResource from the other
# value objects, which this module cannot import (agentmw.apps builds on it)
_RESOURCE_UI_KEYS = frozenset({"csp", "permissions", "domain", "prefersBorder"})


def _resource_ui(ui: Any, uri: str) -> dict[str, Any] | None:
    """A ``ui://`` resource's ``ui=`` (an :class:`agentmw.apps.UiResource`) as its ``_meta.ui``."""
    if ui is None:
        return None
    as_meta = getattr(ui, "as_meta", None)
    meta = as_meta() if callable(as_meta) and not isinstance(ui, type) else None
    if not isinstance(meta, dict) or not set(meta) <= _RESOURCE_UI_KEYS:
        raise RegistrationError(
            f"@resource({uri!r}, ui=...) takes an agentmw.apps.UiResource (csp=, permissions=, domain=, "
            f"prefers_border=), got {type(ui).__name__}"
        )
    return meta


def _access(scopes: Any, roles: Any, rate_limit: Any) -> dict[str, Any]:
    """``scopes``, ``roles`` and ``rate_limit`` (docs/auth.md), only where given."""
    return {
        key: value
        for key, value in (("scopes", scopes), ("roles", roles), ("rate_limit", rate_limit))
        if value is not None
    }


@overload
def tool(fn: F, /) -> F: ...
@overload
def tool(
    fn: None = None,
    /,
    *,
    name: str | None = None,
    title: str | None = None,
    contract: str | None = None,
    summary: str | None = None,
    read_only: bool | None = None,
    destructive: bool | None = None,
    idempotent: bool | None = None,
    open_world: bool | None = None,
    tags: tuple[str, ...] = (),
    examples: tuple[str, ...] = (),
    untrusted: bool = False,
    meta: Mapping[str, Any] | None = None,
    timeout: float | None = None,
    max_in_flight: int | None = None,
    scopes: list[str] | None = None,
    roles: list[str] | None = None,
    rate_limit: Any = None,
    input_schema: Mapping[str, Any] | None = None,
    task: str | None = None,
    ask_first: bool = False,
    ui: UI | str | None = None,
) -> Callable[[F], F]: ...
def tool(fn: Any = None, /, **options: Any) -> Any:
    """Mark a function as a model-controlled tool.

    ``read_only``, ``destructive``, ``idempotent`` and ``open_world`` become the MCP tool annotation
    hints; ``contract`` and ``summary`` override the two descriptions taken from the docstring.
    ``untrusted`` frames its text output as data; ``timeout`` (seconds) is a hard deadline that cancels
    it even when nobody waits; ``max_in_flight`` caps its concurrent calls. ``scopes`` (every one needed),
    ``roles`` (any one needed: without, it is hidden) and ``rate_limit`` (an ``agentmw.auth.RateLimit``) are
    checked before anything else runs (docs/auth.md); the same three work on resources, prompts and skills.
    ``input_schema`` replaces the schema derived from the signature with a hand-written JSON Schema 2020-12,
    served as written; arguments are validated against it, then against the signature (docs/tool.md).
    ``task`` (``"optional"`` or ``"required"``) lets an MCP caller that takes tasks get a task handle and poll
    it instead of waiting; ``ask_first`` makes the questions asked before ``ctx.continue_as_task()`` come
    before the task exists (docs/mcp.md, "Tasks"). ``ui`` (a ``ui://`` URI, or an :class:`agentmw.apps.UI` with
    a visibility) names the MCP App a host renders beside its result (docs/mcp-apps.md); on a FastAPI route too.
    """
    spec = CapabilitySpec("tool", tool_options(**options))
    if fn is not None:
        return _mark(fn, spec)
    return lambda f: _mark(f, spec)


def resource(
    uri: str,
    *,
    name: str | None = None,
    title: str | None = None,
    contract: str | None = None,
    summary: str | None = None,
    mime_type: str | None = None,
    completions: Mapping[str, Callable[..., Any]] | None = None,
    scopes: list[str] | None = None,
    roles: list[str] | None = None,
    rate_limit: Any = None,
    ui: UiResource | None = None,
) -> Callable[[F], F]:
    """Mark a function as an application-controlled resource at ``uri``.

    A URI with ``{variables}`` is a template: each variable is a parameter of the function.
    ``completions`` maps a variable to a function that suggests values for a partial input.
    A ``ui://`` URI makes it an MCP App's UI, served as ``text/html;profile=mcp-app``; ``ui`` (an
    :class:`agentmw.apps.UiResource`) adds its CSP domains, permissions, domain and border (docs/mcp-apps.md).
    """
    ui_meta = _resource_ui(ui, uri)
    ui_metadata("resource", name or uri, uri, ui_meta, mime_type)  # a wrong declaration fails here, not later
    spec = CapabilitySpec(
        "resource",
        {
            "uri": uri,
            "name": name,
            "title": title,
            "contract": contract,
            "summary": summary,
            "mime_type": mime_type,
            "completions": completions,
            "ui": ui_meta,
            **_access(scopes, roles, rate_limit),
        },
    )
    return lambda f: _mark(f, spec)


@overload
def prompt(fn: F, /) -> F: ...
@overload
def prompt(
    fn: None = None,
    /,
    *,
    name: str | None = None,
    title: str | None = None,
    contract: str | None = None,
    summary: str | None = None,
    completions: Mapping[str, Callable[..., Any]] | None = None,
    scopes: list[str] | None = None,
    roles: list[str] | None = None,
    rate_limit: Any = None,
) -> Callable[[F], F]: ...
def prompt(fn: Any = None, /, **options: Any) -> Any:
    """Mark a function as a user-controlled prompt template; it returns text or ``PromptMessage`` items."""
    spec = CapabilitySpec("prompt", dict(options))
    if fn is not None:
        return _mark(fn, spec)
    return lambda f: _mark(f, spec)


def skill(
    fn: Any = None,
    /,
    *,
    name: str | None = None,
    title: str | None = None,
    contract: str | None = None,
    summary: str | None = None,
    read_only: bool | None = None,
    idempotent: bool | None = None,
    tags: tuple[str, ...] = (),
    examples: tuple[str, ...] = (),
    input_modes: tuple[str, ...] = (),
    output_modes: tuple[str, ...] = (),
    tools: tuple[Callable[..., Any], ...] = (),
    untrusted: bool = False,
    timeout: float | None = None,
    max_in_flight: int | None = None,
    scopes: list[str] | None = None,
    roles: list[str] | None = None,
    rate_limit: Any = None,
    input_schema: Mapping[str, Any] | None = None,
) -> Any:
    """Mark a function as a business capability for other agents and UIs: an A2A skill.

    The *summary* (docstring ``Summary:`` section) is what the agent card shows. ``tools`` lists
    ``@tool`` functions this skill groups: an A2A message may call one of them by naming the skill and
    the tool in its metadata. ``read_only`` (it changes nothing) and ``idempotent`` (running it twice does
    no more than once) say whether a repeat can do harm: a repeated A2A ``messageId`` is answered with the
    first task only when it can (``A2ASettings.dedupe_message_ids``), and idempotency keys apply to skills
    that are not read-only.
    """
    annotations = {
        key: value
        for key, value in (("readOnlyHint", read_only), ("idempotentHint", idempotent))
        if value is not None
    }
    spec = CapabilitySpec(
        "skill",
        {
            "name": name,
            "title": title,
            "contract": contract,
            "summary": summary,
            "annotations": annotations or None,
            "tags": tuple(tags),
            "examples": tuple(examples),
            "input_modes": tuple(input_modes),
            "output_modes": tuple(output_modes),
            "groups": tuple(getattr(t, "__name__", str(t)) for t in tools),
            "untrusted": untrusted,
            "timeout": timeout,
            "max_in_flight": max_in_flight,
            "input_schema": input_schema,
            **_access(scopes, roles, rate_limit),
        },
    )
    if fn is not None:
        return _mark(fn, spec)
    return lambda f: _mark(f, spec)
