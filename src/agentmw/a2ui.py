"""A2UI surfaces: UI described as data, which the client draws with its own widgets (docs/a2ui.md).

A function builds a :class:`Surface` from a few typed components of A2UI's basic catalog and sends it with
``await ctx.surface(surface)``; the faces carry it: A2A as data parts under the A2UI extension (when the client
activates it), AG-UI as the activity events A2UI-capable front ends render. MCP has no place for it (dropped).

The version spoken is A2UI **v0.9** (messages ``createSurface``, ``updateComponents``, ``updateDataModel``,
``deleteSurface``, each with ``"version": "v0.9"``): the one the AG-UI A2UI middleware emits and the official
web renderer (``@a2ui/lit``'s ``v0_9``) draws. Everything is checked when the surface is built, so a mistake is
a ``ValueError``/``TypeError`` in the function, not a blank panel in someone's browser. No dependency: the
checks are this module's own (the tests hold them to the official JSON schema).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, TypeAlias

__all__ = [
    "AGUI_ACTIVITY_TYPE",
    "AGUI_OPERATIONS_KEY",
    "BASIC_CATALOG_ID",
    "CLIENT_CAPABILITIES_KEY",
    "EXTENSION_URI",
    "MIME_TYPE",
    "VERSION",
    "A2UIError",
    "Bind",
    "Button",
    "Card",
    "Column",
    "Component",
    "Divider",
    "Event",
    "Image",
    "List",
    "Ref",
    "Row",
    "Surface",
    "Template",
    "Text",
    "data_update",
    "delete_surface",
    "folded",
    "validate_message",
    "validate_messages",
]

VERSION = "v0.9"
"""The A2UI protocol version of every message (its ``version`` field)."""
EXTENSION_URI = "https://a2ui.org/a2a-extension/a2ui/v0.9"
"""The A2A extension's URI for this version: on the card, in ``A2A-Extensions``, in ``message.extensions``."""
MIME_TYPE = "application/json+a2ui"
"""``metadata.mimeType`` (and ``mediaType``) of an A2A data part holding one A2UI message (v0.8 and v0.9)."""
BASIC_CATALOG_ID = "https://a2ui.org/specification/v0_9/catalogs/basic/catalog.json"
"""The basic catalog, whose components this module builds."""
CLIENT_CAPABILITIES_KEY = "a2uiClientCapabilities"
"""The A2A ``message.metadata`` key an A2UI client announces its versions and catalogs under."""
AGUI_ACTIVITY_TYPE = "a2ui-surface"
"""AG-UI ``ACTIVITY_SNAPSHOT.activityType`` of a surface (``@ag-ui/a2ui-middleware``, CopilotKit)."""
AGUI_OPERATIONS_KEY = "a2ui_operations"
"""The key of the A2UI messages in that activity's ``content``."""


class A2UIError(ValueError):
    """A surface or message that A2UI clients would refuse (or draw wrongly); says where."""


# --- values -----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Bind:
    """A value read from the surface's data model at ``path`` (a JSON Pointer such as ``"/budget/left"``,
    or relative inside a :class:`Template`), so a later :func:`data_update` changes what is shown."""

    path: str

    def __post_init__(self) -> None:
        if not isinstance(self.path, str) or not self.path:
            raise A2UIError(f"Bind path must be a non-empty string, not {self.path!r}")
        _pointer(self.path, "Bind path")

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path}


@dataclass(frozen=True, slots=True)
class Ref:
    """A child given by the id of a component defined elsewhere in the surface (``Surface(extra=...)``)."""

    id: str

    def __post_init__(self) -> None:
        _check_id(self.id, "Ref")


@dataclass(frozen=True, slots=True)
class Event:
    """A button's action: the client sends the server an event ``name`` with ``context`` (values literal or
    :class:`Bind`)."""

    name: str
    context: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise A2UIError(f"Event name must be a non-empty string, not {self.name!r}")
        for key, value in (self.context or {}).items():
            if not isinstance(key, str):
                raise A2UIError(f"Event {self.name!r}: context keys must be strings, not {key!r}")
            _dynamic(value, f"Event {self.name!r} context[{key!r}]", "value")

    def to_json(self) -> dict[str, Any]:
        event: dict[str, Any] = {"name": self.name}
        if self.context:
            event["context"] = {k: _value_json(v) for k, v in self.context.items()}
        return {"event": event}


DynamicString: TypeAlias = "str | Bind"
Child: TypeAlias = "Component | Ref | str"  # a str is a Text of that string


def _check_id(value: Any, where: str) -> None:
    if not isinstance(value, str) or not value:
        raise A2UIError(f"{where}: a component id must be a non-empty string, not {value!r}")


def _finite(value: float, where: str) -> None:
    if isinstance(value, float) and not math.isfinite(value):
        raise A2UIError(f"{where}: {value!r} is not a JSON number")


_MAX_DEPTH = 100
"""How deep a surface's component tree and a data value may nest: far beyond any drawn UI, and well inside
Python's recursion limit and a client's (a renderer draws the tree recursively)."""


def _pointer(path: str, where: str) -> None:
    """A JSON Pointer (RFC 6901) may escape only ``~0`` (``~``) and ``~1`` (``/``); a client refuses the rest."""
    at = path.find("~")
    while at != -1:
        if path[at + 1 : at + 2] not in ("0", "1"):
            raise A2UIError(f"{where} {path!r}: '~' must be followed by 0 or 1 (a JSON Pointer escape)")
        at = path.find("~", at + 2)


def _dynamic(value: Any, where: str, kind: Literal["string", "value"]) -> None:
    """A DynamicString (str or Bind) or, for ``kind="value"``, a DynamicValue (also number, bool, array)."""
    if isinstance(value, (str, Bind)):
        return
    if kind == "value" and isinstance(value, (bool, int, float)):
        _finite(value, where)
        return
    if kind == "value" and isinstance(value, (list, tuple)):
        _json(list(value), where)
        return
    wanted = "a string or Bind" if kind == "string" else "a string, number, boolean, list or Bind"
    raise A2UIError(f"{where} must be {wanted}, not {type(value).__name__}")


def _value_json(value: Any) -> Any:
    if isinstance(value, Bind):
        return value.to_json()
    if isinstance(value, tuple):
        return list(value)
    return value


def _json(value: Any, where: str, inside: tuple[int, ...] = ()) -> None:
    """A JSON value: what the data model holds. ``inside`` holds the ids of the containers around ``value``:
    one that holds itself has no JSON form, and nesting is bounded by ``_MAX_DEPTH``."""
    if value is None or isinstance(value, (str, bool, int)):
        return
    if isinstance(value, float):
        _finite(value, where)
        return
    if not isinstance(value, (list, tuple, Mapping)):
        raise A2UIError(f"{where}: {type(value).__name__} is not JSON")
    if id(value) in inside:
        raise A2UIError(f"{where}: the value contains itself (no JSON form)")
    if len(inside) >= _MAX_DEPTH:
        raise A2UIError(f"{where}: nested more than {_MAX_DEPTH} levels deep")
    inside = (*inside, id(value))
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                raise A2UIError(f"{where}: object keys must be strings, not {key!r}")
            _json(item, f"{where}.{key}", inside)
    else:
        for index, item in enumerate(value):
            _json(item, f"{where}[{index}]", inside)


def _choice(value: Any, allowed: tuple[str, ...], where: str) -> None:
    if value is not None and value not in allowed:
        raise A2UIError(f"{where} must be one of {', '.join(allowed)}, not {value!r}")


# --- components -------------------------------------------------------------------------------------

_JUSTIFY = ("start", "center", "end", "spaceBetween", "spaceAround", "spaceEvenly", "stretch")
_ALIGN = ("start", "center", "end", "stretch")
_TEXT_VARIANTS = ("h1", "h2", "h3", "h4", "h5", "caption", "body")
_IMAGE_FITS = ("contain", "cover", "fill", "none", "scaleDown")
_IMAGE_VARIANTS = ("icon", "avatar", "smallFeature", "mediumFeature", "largeFeature", "header")
_BUTTON_VARIANTS = ("default", "primary", "borderless")


class Component(ABC):
    """One component of the basic catalog. ``id`` is optional: the surface names the root ``root`` and the
    others after their place in the tree; give one to :class:`Ref` it, or to keep it stable across updates.
    ``weight`` is the flex-grow of a direct child of a Row or Column."""

    name: ClassVar[str]
    id: str | None
    weight: float | None

    def _common(self, id: str | None, weight: float | None) -> None:
        if id is not None:
            _check_id(id, self.name)
        if weight is not None and (isinstance(weight, bool) or not isinstance(weight, (int, float))):
            raise A2UIError(f"{self.name} weight must be a number, not {type(weight).__name__}")
        if weight is not None:
            _finite(weight, f"{self.name} weight")
        self.id = id
        self.weight = weight

    def children(self) -> Iterator[Component | Ref]:
        """The components this one places (its template's too), in order."""
        return iter(())

    @abstractmethod
    def props(self, ids: Mapping[int, str]) -> dict[str, Any]:
        """Its properties but ``id`` and ``component``; ``ids`` names each child component (by ``id()``)."""

    def __repr__(self) -> str:
        return f"{self.name}(id={self.id!r})"


def _as_child(value: Any, where: str) -> Component | Ref:
    if isinstance(value, (Component, Ref)):
        return value
    if isinstance(value, str):
        return Text(value)
    raise A2UIError(f"{where}: a child must be a component, a Ref or a string, not {type(value).__name__}")


def _child_id(child: Component | Ref, ids: Mapping[int, str]) -> str:
    return child.id if isinstance(child, Ref) else ids[id(child)]


class Text(Component):
    """Text (simple Markdown); ``variant`` h1..h5, caption or body."""

    name = "Text"

    def __init__(
        self,
        text: DynamicString,
        *,
        variant: Literal["h1", "h2", "h3", "h4", "h5", "caption", "body"] | None = None,
        id: str | None = None,
        weight: float | None = None,
    ) -> None:
        self._common(id, weight)
        _dynamic(text, "Text text", "string")
        _choice(variant, _TEXT_VARIANTS, "Text variant")
        self.text = text
        self.variant = variant

    def props(self, ids: Mapping[int, str]) -> dict[str, Any]:
        out: dict[str, Any] = {"text": _value_json(self.text)}
        if self.variant is not None:
            out["variant"] = self.variant
        return out


class Image(Component):
    name = "Image"

    def __init__(
        self,
        url: DynamicString,
        *,
        description: DynamicString | None = None,
        fit: Literal["contain", "cover", "fill", "none", "scaleDown"] | None = None,
        variant: Literal["icon", "avatar", "smallFeature", "mediumFeature", "largeFeature", "header"]
        | None = None,
        id: str | None = None,
        weight: float | None = None,
    ) -> None:
        self._common(id, weight)
        _dynamic(url, "Image url", "string")
        if description is not None:
            _dynamic(description, "Image description", "string")
        _choice(fit, _IMAGE_FITS, "Image fit")
        _choice(variant, _IMAGE_VARIANTS, "Image variant")
        self.url, self.description, self.fit, self.variant = url, description, fit, variant

    def props(self, ids: Mapping[int, str]) -> dict[str, Any]:
        out: dict[str, Any] = {"url": _value_json(self.url)}
        if self.description is not None:
            out["description"] = _value_json(self.description)
        if self.fit is not None:
            out["fit"] = self.fit
        if self.variant is not None:
            out["variant"] = self.variant
        return out


@dataclass(frozen=True, slots=True)
class Template:
    """Children made from a list in the data model: one ``component`` per item of the list at ``path``,
    its :class:`Bind` paths relative to the item."""

    component: Component | Ref
    path: str

    def __post_init__(self) -> None:
        if not isinstance(self.component, (Component, Ref)):
            raise A2UIError(f"Template component must be a component or a Ref, not {self.component!r}")
        if not isinstance(self.path, str) or not self.path:
            raise A2UIError(f"Template path must be a non-empty string, not {self.path!r}")
        _pointer(self.path, "Template path")


class _Container(Component):
    def __init__(self, children: tuple[Any, ...], id: str | None, weight: float | None) -> None:
        self._common(id, weight)
        if len(children) == 1 and isinstance(children[0], Template):
            self.template: Template | None = children[0]
            self.items: tuple[Component | Ref, ...] = ()
        else:
            self.template = None
            self.items = tuple(_as_child(c, f"{self.name} child {i}") for i, c in enumerate(children))

    def children(self) -> Iterator[Component | Ref]:
        if self.template is not None:
            yield self.template.component
        yield from self.items

    def _children_json(self, ids: Mapping[int, str]) -> Any:
        if self.template is not None:
            return {"componentId": _child_id(self.template.component, ids), "path": self.template.path}
        return [_child_id(c, ids) for c in self.items]


class _Line(_Container):
    def __init__(
        self,
        *children: Child | Template,
        justify: Literal["start", "center", "end", "spaceBetween", "spaceAround", "spaceEvenly", "stretch"]
        | None = None,
        align: Literal["start", "center", "end", "stretch"] | None = None,
        id: str | None = None,
        weight: float | None = None,
    ) -> None:
        super().__init__(children, id, weight)
        _choice(justify, _JUSTIFY, f"{self.name} justify")
        _choice(align, _ALIGN, f"{self.name} align")
        self.justify, self.align = justify, align

    def props(self, ids: Mapping[int, str]) -> dict[str, Any]:
        out: dict[str, Any] = {"children": self._children_json(ids)}
        if self.justify is not None:
            out["justify"] = self.justify
        if self.align is not None:
            out["align"] = self.align
        return out


class Row(_Line):
    """Children side by side (``Row(a, b)``, or ``Row(Template(...))`` for one per item of a list)."""

    name = "Row"


class Column(_Line):
    """Children one above the other."""

    name = "Column"


class List(_Container):
    """A scrolling list of children (``direction`` vertical or horizontal)."""

    name = "List"

    def __init__(
        self,
        *children: Child | Template,
        direction: Literal["vertical", "horizontal"] | None = None,
        align: Literal["start", "center", "end", "stretch"] | None = None,
        id: str | None = None,
        weight: float | None = None,
    ) -> None:
        super().__init__(children, id, weight)
        _choice(direction, ("vertical", "horizontal"), "List direction")
        _choice(align, _ALIGN, "List align")
        self.direction, self.align = direction, align

    def props(self, ids: Mapping[int, str]) -> dict[str, Any]:
        out: dict[str, Any] = {"children": self._children_json(ids)}
        if self.direction is not None:
            out["direction"] = self.direction
        if self.align is not None:
            out["align"] = self.align
        return out


class Card(Component):
    """A card around one child (a Column to hold several)."""

    name = "Card"

    def __init__(self, child: Child, *, id: str | None = None, weight: float | None = None) -> None:
        self._common(id, weight)
        self.child = _as_child(child, "Card child")

    def children(self) -> Iterator[Component | Ref]:
        yield self.child

    def props(self, ids: Mapping[int, str]) -> dict[str, Any]:
        return {"child": _child_id(self.child, ids)}


class Divider(Component):
    name = "Divider"

    def __init__(
        self,
        *,
        axis: Literal["horizontal", "vertical"] | None = None,
        id: str | None = None,
        weight: float | None = None,
    ) -> None:
        self._common(id, weight)
        _choice(axis, ("horizontal", "vertical"), "Divider axis")
        self.axis = axis

    def props(self, ids: Mapping[int, str]) -> dict[str, Any]:
        return {"axis": self.axis} if self.axis is not None else {}


class Button(Component):
    """A button whose ``child`` (a string is its label) sends ``action`` (an :class:`Event`) when pressed."""

    name = "Button"

    def __init__(
        self,
        child: Child,
        *,
        action: Event,
        variant: Literal["default", "primary", "borderless"] | None = None,
        id: str | None = None,
        weight: float | None = None,
    ) -> None:
        self._common(id, weight)
        if not isinstance(action, Event):
            raise A2UIError(f"Button action must be an Event, not {type(action).__name__}")
        _choice(variant, _BUTTON_VARIANTS, "Button variant")
        self.child = _as_child(child, "Button child")
        self.action, self.variant = action, variant

    def children(self) -> Iterator[Component | Ref]:
        yield self.child

    def props(self, ids: Mapping[int, str]) -> dict[str, Any]:
        out: dict[str, Any] = {"child": _child_id(self.child, ids), "action": self.action.to_json()}
        if self.variant is not None:
            out["variant"] = self.variant
        return out


# --- the surface ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Surface:
    """One A2UI surface: an id, a tree of components from ``root`` and the data model they bind to.

    Built and checked at once: every child resolves, no component appears twice or contains itself, the root
    is named ``root``, the data is JSON. ``extra`` holds components reached only by :class:`Ref`.
    """

    surface_id: str
    root: Component
    data: Mapping[str, Any] | None = None
    extra: Sequence[Component] = ()
    catalog_id: str = BASIC_CATALOG_ID
    send_data_model: bool = False
    components: tuple[dict[str, Any], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.surface_id, str) or not self.surface_id:
            raise A2UIError(f"surface_id must be a non-empty string, not {self.surface_id!r}")
        if not isinstance(self.root, Component):
            raise A2UIError(f"root must be a component, not {type(self.root).__name__}")
        if self.root.id not in (None, "root"):
            raise A2UIError(f"the root component's id is always 'root', not {self.root.id!r}")
        if not isinstance(self.catalog_id, str) or not self.catalog_id:
            raise A2UIError("catalog_id must be a non-empty string")
        if self.data is not None:
            if not isinstance(self.data, Mapping):
                raise A2UIError(f"data must be an object, not {type(self.data).__name__}")
            _json(self.data, "data")
        object.__setattr__(self, "components", tuple(_flatten(self.root, tuple(self.extra))))

    def messages(self, *, create: bool = True) -> list[dict[str, Any]]:
        """The A2UI messages that draw it: ``createSurface`` (unless ``create=False``: an update of a surface
        the client has), ``updateComponents``, and ``updateDataModel`` when it has data."""
        out: list[dict[str, Any]] = []
        if create:
            begin: dict[str, Any] = {"surfaceId": self.surface_id, "catalogId": self.catalog_id}
            if self.send_data_model:
                begin["sendDataModel"] = True
            out.append({"version": VERSION, "createSurface": begin})
        out.append(
            {
                "version": VERSION,
                "updateComponents": {
                    "surfaceId": self.surface_id,
                    "components": [dict(c) for c in self.components],
                },
            }
        )
        if self.data is not None:
            out.append(data_update(self.surface_id, self.data))
        return out


def data_update(surface_id: str, value: Any, path: str = "/") -> dict[str, Any]:
    """An ``updateDataModel`` message: ``value`` at ``path`` (``/`` the whole model)."""
    if not isinstance(surface_id, str) or not surface_id:
        raise A2UIError("surface_id must be a non-empty string")
    if not isinstance(path, str) or not path.startswith("/"):
        raise A2UIError(f"path must be a JSON Pointer starting with '/', not {path!r}")
    _pointer(path, "path")
    _json(value, "value")
    update: dict[str, Any] = {"surfaceId": surface_id, "value": value}
    if path != "/":
        update["path"] = path
    return {"version": VERSION, "updateDataModel": update}


def delete_surface(surface_id: str) -> dict[str, Any]:
    """A ``deleteSurface`` message."""
    if not isinstance(surface_id, str) or not surface_id:
        raise A2UIError("surface_id must be a non-empty string")
    return {"version": VERSION, "deleteSurface": {"surfaceId": surface_id}}


def folded(messages: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The messages that draw one surface from nothing as ``messages`` leave it: its ``createSurface``, one
    ``updateComponents`` with every component (a later one replacing an earlier one of the same id), and the
    data updates in order, less those a later one overwrites (at the same path or above it; ``/`` is the whole
    model); after a ``deleteSurface``, nothing."""
    held: list[dict[str, Any]] = []
    for message in messages:
        if "deleteSurface" in message:
            held = []
        elif "createSurface" in message:
            held = [dict(message)]
        elif "updateComponents" in message:
            for index, earlier in enumerate(held):
                if "updateComponents" in earlier:
                    components = {c["id"]: c for c in earlier["updateComponents"]["components"]}
                    components.update((c["id"], c) for c in message["updateComponents"]["components"])
                    body = dict(earlier["updateComponents"], components=list(components.values()))
                    held[index] = dict(earlier, updateComponents=body)
                    break
            else:
                held.append(dict(message))
        elif "updateDataModel" in message:
            # what this update writes replaces every earlier write at its path or below it, so a value updated
            # in a loop (a progress counter) keeps a snapshot the size of the surface, not of the run
            path = _model_path(message)
            held = [m for m in held if "updateDataModel" not in m or not _within(_model_path(m), path)]
            held.append(dict(message))
    return held


def _model_path(message: Mapping[str, Any]) -> str:
    path = message["updateDataModel"].get("path", "/")
    return path if isinstance(path, str) and path else "/"


def _within(path: str, parent: str) -> bool:
    """Whether the JSON Pointer ``path`` is ``parent`` or below it (``/`` is above everything)."""
    return parent == "/" or path == parent or path.startswith(parent + "/")


def _walk(root: Component, extra: tuple[Component, ...]) -> list[Component]:
    """Every component object of the tree and of ``extra``, each once, in depth-first order; one object in two
    places is refused (a client draws a component once: use a Ref to the same id)."""
    seen: dict[int, Component] = {}
    order: list[Component] = []

    def visit(component: Component, where: str, depth: int) -> None:
        if id(component) in seen:
            raise A2UIError(f"{where}: {component!r} appears twice in the surface; Ref its id instead")
        if depth > _MAX_DEPTH:
            raise A2UIError(f"{where}: the component tree is nested more than {_MAX_DEPTH} levels deep")
        seen[id(component)] = component
        order.append(component)
        for index, child in enumerate(component.children()):
            if isinstance(child, Component):
                visit(child, f"{where} > {component.name}[{index}]", depth + 1)

    visit(root, "root", 1)
    for index, component in enumerate(extra):
        if not isinstance(component, Component):
            raise A2UIError(f"extra[{index}] must be a component, not {type(component).__name__}")
        visit(component, f"extra[{index}]", 1)
    return order


def _flatten(root: Component, extra: tuple[Component, ...]) -> Iterable[dict[str, Any]]:
    order = _walk(root, extra)
    ids: dict[int, str] = {id(root): "root"}
    taken: dict[str, Component] = {"root": root}
    for component in order:
        if component.id is not None and component is not root:
            if component.id in taken:
                raise A2UIError(f"two components have the id {component.id!r}")
            taken[component.id] = component
            ids[id(component)] = component.id
    counter = 0
    for component in order:  # the others, named by position: stable for the same tree
        if id(component) not in ids:
            counter += 1
            while f"{component.name.lower()}-{counter}" in taken:
                counter += 1
            name = f"{component.name.lower()}-{counter}"
            taken[name] = component
            ids[id(component)] = name
    by_id = {ids[id(c)]: c for c in order}
    for component in order:  # every Ref resolves
        for child in component.children():
            if isinstance(child, Ref) and child.id not in by_id:
                raise A2UIError(
                    f"{component.name} {ids[id(component)]!r} refers to {child.id!r}, which is not defined"
                )
    _acyclic({ids[id(c)]: [_child_id(k, ids) for k in c.children()] for c in order}, "surface")
    for component in order:
        entry: dict[str, Any] = {"id": ids[id(component)], "component": component.name}
        entry.update(component.props(ids))
        if component.weight is not None:
            entry["weight"] = component.weight
        yield entry


def _acyclic(edges: Mapping[str, Sequence[str]], where: str) -> None:
    """A child id can point back up the tree; a client would recurse forever."""
    state: dict[str, int] = {}  # 1 on the current path, 2 done
    for start in edges:
        if state.get(start):
            continue
        stack: list[tuple[str, Iterator[str]]] = [(start, iter(edges[start]))]
        state[start] = 1
        while stack:
            node, rest = stack[-1]
            nxt = next(rest, None)
            if nxt is None:
                state[node] = 2
                stack.pop()
            elif state.get(nxt) == 1:
                path = [n for n, _ in stack] + [nxt]
                raise A2UIError(f"{where}: components form a cycle: {' > '.join(path[path.index(nxt) :])}")
            elif not state.get(nxt):
                state[nxt] = 1
                stack.append((nxt, iter(edges.get(nxt, ()))))


# --- checking messages that were not built here --------------------------------------------------------

_MESSAGE_KEYS = ("createSurface", "updateComponents", "updateDataModel", "deleteSurface")
_STRING = "dynamic string"
_CHILDREN = "children"
_ID = "component id"
# per component of the basic catalog this module builds: property -> kind or enum; required properties
_SPECS: dict[str, tuple[dict[str, Any], frozenset[str]]] = {
    "Text": ({"text": _STRING, "variant": _TEXT_VARIANTS}, frozenset({"text"})),
    "Image": (
        {"url": _STRING, "description": _STRING, "fit": _IMAGE_FITS, "variant": _IMAGE_VARIANTS},
        frozenset({"url"}),
    ),
    "Row": ({"children": _CHILDREN, "justify": _JUSTIFY, "align": _ALIGN}, frozenset({"children"})),
    "Column": ({"children": _CHILDREN, "justify": _JUSTIFY, "align": _ALIGN}, frozenset({"children"})),
    "List": (
        {"children": _CHILDREN, "direction": ("vertical", "horizontal"), "align": _ALIGN},
        frozenset({"children"}),
    ),
    "Card": ({"child": _ID}, frozenset({"child"})),
    "Divider": ({"axis": ("horizontal", "vertical")}, frozenset()),
    "Button": (
        {"child": _ID, "action": "action", "variant": _BUTTON_VARIANTS, "checks": "checks"},
        frozenset({"child", "action"}),
    ),
}
# the rest of the basic catalog: the name is known, its properties are the client's to check
_OTHER_BASIC = frozenset(
    {
        "Icon",
        "Video",
        "AudioPlayer",
        "Tabs",
        "Modal",
        "TextField",
        "CheckBox",
        "ChoicePicker",
        "Slider",
        "DateTimeInput",
    }
)


def validate_message(message: Any) -> None:
    """Check one server-to-client A2UI v0.9 message (built elsewhere: by hand, by a model) as the official
    schema does for the envelope and for the basic-catalog components this module builds; raise
    :class:`A2UIError` naming the first problem."""
    if not isinstance(message, Mapping):
        raise A2UIError(f"an A2UI message is an object, not {type(message).__name__}")
    if message.get("version") != VERSION:
        raise A2UIError(f"version must be {VERSION!r}, not {message.get('version')!r}")
    kinds = [k for k in message if k != "version"]
    if len(kinds) != 1 or kinds[0] not in _MESSAGE_KEYS:
        raise A2UIError(f"an A2UI message has exactly one of {', '.join(_MESSAGE_KEYS)}; got {kinds}")
    kind = kinds[0]
    body = message[kind]
    if not isinstance(body, Mapping):
        raise A2UIError(f"{kind} must be an object")
    allowed = {
        "createSurface": {"surfaceId", "catalogId", "theme", "sendDataModel"},
        "updateComponents": {"surfaceId", "components"},
        "updateDataModel": {"surfaceId", "path", "value"},
        "deleteSurface": {"surfaceId"},
    }[kind]
    unknown = sorted(set(body) - allowed)
    if unknown:
        raise A2UIError(f"{kind} has unknown field(s) {', '.join(unknown)}")
    if not isinstance(body.get("surfaceId"), str):
        raise A2UIError(f"{kind}.surfaceId must be a string")
    if kind == "createSurface":
        if not isinstance(body.get("catalogId"), str):
            raise A2UIError("createSurface.catalogId must be a string")
        if "sendDataModel" in body and not isinstance(body["sendDataModel"], bool):
            raise A2UIError("createSurface.sendDataModel must be a boolean")
        if "theme" in body and not isinstance(body["theme"], Mapping):
            raise A2UIError("createSurface.theme must be an object")
    elif kind == "updateDataModel":
        if "path" in body:
            if not isinstance(body["path"], str):
                raise A2UIError("updateDataModel.path must be a string")
            _pointer(body["path"], "updateDataModel.path")
        if "value" in body:  # what json.dumps would write as NaN, or could not write at all
            _json(body["value"], "updateDataModel.value")
    elif kind == "updateComponents":
        components = body.get("components")
        if not isinstance(components, list) or not components:
            raise A2UIError("updateComponents.components must be a non-empty list")
        for index, component in enumerate(components):
            _validate_component(component, f"updateComponents.components[{index}]")


def validate_messages(messages: Iterable[Any]) -> None:
    """Check a stream of A2UI v0.9 messages as a client applies them: each one (:func:`validate_message`),
    then per surface: created before it is updated, once; component ids unique; every child id defined by
    the end; a ``root`` component; no cycle."""
    created: set[str] = set()
    components: dict[str, dict[str, Mapping[str, Any]]] = {}
    for index, message in enumerate(messages):
        try:
            validate_message(message)
        except A2UIError as exc:
            raise A2UIError(f"message {index}: {exc}") from None
        kind = next(k for k in message if k != "version")
        surface = message[kind]["surfaceId"]
        if kind == "createSurface":
            if surface in created:
                raise A2UIError(f"message {index}: surface {surface!r} is created twice")
            created.add(surface)
            components[surface] = {}
        elif surface not in created:
            raise A2UIError(f"message {index}: {kind} of surface {surface!r}, which was not created")
        elif kind == "deleteSurface":
            created.discard(surface)
            del components[surface]
        elif kind == "updateComponents":
            seen: set[str] = set()
            for component in message[kind]["components"]:
                if component["id"] in seen:
                    raise A2UIError(f"message {index}: two components have the id {component['id']!r}")
                seen.add(component["id"])
                components[surface][component["id"]] = component
    for surface, defined in components.items():
        if not defined:
            continue
        if "root" not in defined:
            raise A2UIError(f"surface {surface!r} has no component with the id 'root'")
        edges: dict[str, list[str]] = {}
        for cid, component in defined.items():
            edges[cid] = _referenced(component)
            for child in edges[cid]:
                if child not in defined:
                    raise A2UIError(f"surface {surface!r}: {cid!r} refers to {child!r}, which is not defined")
        _acyclic(edges, f"surface {surface!r}")


def _referenced(component: Mapping[str, Any]) -> list[str]:
    out: list[str] = []
    for key in ("child", "children"):
        value = component.get(key)
        if isinstance(value, str):
            out.append(value)
        elif isinstance(value, list):
            out.extend(v for v in value if isinstance(v, str))
        elif isinstance(value, Mapping) and isinstance(value.get("componentId"), str):
            out.append(value["componentId"])
    return out


def _validate_component(component: Any, where: str) -> None:
    if not isinstance(component, Mapping):
        raise A2UIError(f"{where} must be an object")
    if not isinstance(component.get("id"), str):
        raise A2UIError(f"{where}.id must be a string")
    name = component.get("component")
    if name in _OTHER_BASIC:
        return
    if name not in _SPECS:
        raise A2UIError(f"{where}: {name!r} is not a component of the basic catalog")
    props, required = _SPECS[name]
    where = f"{where} ({name} {component['id']!r})"
    for key in required:
        if key not in component:
            raise A2UIError(f"{where} needs {key!r}")
    for key, value in component.items():
        if key in ("id", "component"):
            continue
        if key == "weight":
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise A2UIError(f"{where}.weight must be a number")
            continue
        if key == "accessibility":
            if not isinstance(value, Mapping):
                raise A2UIError(f"{where}.accessibility must be an object")
            continue
        kind = props.get(key)
        if kind is None:
            raise A2UIError(f"{where} has no property {key!r}")
        _validate_prop(kind, value, f"{where}.{key}")


def _validate_prop(kind: Any, value: Any, where: str) -> None:
    if isinstance(kind, tuple):
        if value not in kind:
            raise A2UIError(f"{where} must be one of {', '.join(kind)}, not {value!r}")
    elif kind == _STRING:
        if not (isinstance(value, str) or _is_binding(value) or _is_call(value)):
            raise A2UIError(f"{where} must be a string, a {{'path': ...}} binding or a function call")
    elif kind == _ID:
        if not isinstance(value, str):
            raise A2UIError(f"{where} must be a component id (a string)")
    elif kind == _CHILDREN:
        if isinstance(value, list):
            if not all(isinstance(v, str) for v in value):
                raise A2UIError(f"{where} must list component ids (strings)")
        elif not (
            isinstance(value, Mapping)
            and set(value) == {"componentId", "path"}
            and all(isinstance(v, str) for v in value.values())
        ):
            raise A2UIError(f"{where} must be a list of ids or {{'componentId': ..., 'path': ...}}")
    elif kind == "action":
        if not isinstance(value, Mapping) or len(value) != 1:
            raise A2UIError(f"{where} must be {{'event': ...}} or {{'functionCall': ...}}")
        if "event" in value:
            event = value["event"]
            if not isinstance(event, Mapping) or not isinstance(event.get("name"), str):
                raise A2UIError(f"{where}.event needs a string 'name'")
            if set(event) - {"name", "context"}:
                raise A2UIError(f"{where}.event has unknown field(s)")
            if "context" in event and not isinstance(event["context"], Mapping):
                raise A2UIError(f"{where}.event.context must be an object")
        elif not _is_call(value.get("functionCall")):
            raise A2UIError(f"{where} must be {{'event': ...}} or {{'functionCall': ...}}")
    elif kind == "checks" and not isinstance(value, list):
        raise A2UIError(f"{where} must be a list")


def _is_binding(value: Any) -> bool:
    if not (isinstance(value, Mapping) and set(value) == {"path"} and isinstance(value["path"], str)):
        return False
    try:
        _pointer(value["path"], "path")
    except A2UIError:
        return False
    return True


def _is_call(value: Any) -> bool:
    return isinstance(value, Mapping) and isinstance(value.get("call"), str)
