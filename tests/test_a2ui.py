"""agentmw.a2ui, pure: the builder's messages pass the official A2UI v0.9 JSON schema (vendored in
tests/a2ui_schema), its mistakes are refused when built, and validate_message refuses what the schema refuses."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from referencing import Registry, Resource

from agentmw import Context, a2ui
from agentmw.a2ui import (
    A2UIError,
    Bind,
    Button,
    Card,
    Column,
    Divider,
    Event,
    Image,
    List,
    Ref,
    Row,
    Surface,
    Template,
    Text,
)
from agentmw.events import SurfaceUpdate

SCHEMAS = Path(__file__).parent / "a2ui_schema"


@pytest.fixture(scope="module")
def official() -> Draft202012Validator:
    docs = {
        name: json.loads((SCHEMAS / name).read_text())
        for name in ("server_to_client.json", "common_types.json", "basic_catalog.json")
    }
    registry: Registry = Registry()
    for doc in docs.values():
        registry = registry.with_resource(doc["$id"], Resource.from_contents(doc))
    # server_to_client.json and common_types.json name the catalog "catalog.json" beside them
    registry = registry.with_resource(
        "https://a2ui.org/specification/v0_9/catalog.json", Resource.from_contents(docs["basic_catalog.json"])
    )
    return Draft202012Validator(docs["server_to_client.json"], registry=registry)


def _errors(validator: Draft202012Validator, message: Any) -> list[str]:
    return [e.message for e in validator.iter_errors(message)]


def budget() -> Surface:
    return Surface(
        "budget",
        Card(
            Column(
                Text("Engineering", variant="h3"),
                Row("Remaining", Text(Bind("/remaining"), id="remaining"), justify="spaceBetween"),
                Divider(),
                Image("https://example.com/chart.png", description="chart", fit="contain"),
                List(Template(Row(Text(Bind("name")), Text(Bind("amount"))), "/lines")),
                Button(
                    "Refresh",
                    action=Event(
                        "refresh", {"department": "engineering", "left": Bind("/remaining"), "n": 2}
                    ),
                    variant="primary",
                ),
                align="stretch",
            )
        ),
        data={"remaining": "1,200.00", "lines": [{"name": "Monitors", "amount": "898.00"}]},
    )


def test_every_message_the_builder_makes_passes_the_official_schema(official) -> None:
    messages = budget().messages()
    assert [next(k for k in m if k != "version") for m in messages] == [
        "createSurface",
        "updateComponents",
        "updateDataModel",
    ]
    for message in messages:
        assert _errors(official, message) == [], message
    update = budget().messages(create=False)
    assert [next(k for k in m if k != "version") for m in update] == ["updateComponents", "updateDataModel"]
    for message in (a2ui.data_update("budget", 3, "/x"), a2ui.delete_surface("budget")):
        assert _errors(official, message) == []
    a2ui.validate_messages(messages)


def test_ids_root_and_references(official) -> None:
    components = {c["id"]: c for c in budget().components}
    assert components["root"] == {"id": "root", "component": "Card", "child": "column-1"}
    column = components["column-1"]
    assert column["children"][0] == "text-2" and "remaining" in components
    [listed] = [c for c in components.values() if c["component"] == "List"]
    template = listed["children"]
    assert set(template) == {"componentId", "path"} and template["path"] == "/lines"
    assert components[template["componentId"]]["component"] == "Row"
    shared = Text("shared", id="note")
    surface = Surface("s", Column(Ref("note"), Card(Ref("note"))), extra=[shared])
    ids = [c["id"] for c in surface.components]
    assert ids == ["root", "card-1", "note"]
    for message in surface.messages():
        assert _errors(official, message) == []
    # the same tree names its components the same way: an update replaces them in place
    assert [c["id"] for c in budget().components] == [c["id"] for c in budget().components]


def _self_holding() -> dict[str, Any]:
    data: dict[str, Any] = {"name": "x"}
    data["again"] = [data]
    return data


def _nested(depth: int) -> dict[str, Any]:
    data: dict[str, Any] = {}
    for _ in range(depth):
        data = {"v": data}
    return data


def _deep_tree(depth: int) -> Column:
    node: Column = Column(Text("leaf"))
    for _ in range(depth):
        node = Column(node)
    return node


def test_json_pointer_escapes_and_bounded_nesting_that_are_fine() -> None:
    assert Bind("/a~0b~1c").path == "/a~0b~1c" and Bind("name").path == "name"  # relative, in a Template
    shared = {"k": 1}
    Surface("s", _deep_tree(90), data={"a": shared, "b": shared, "deep": _nested(90)})  # shared, not a cycle


@pytest.mark.parametrize(
    ("build", "says"),
    [
        (lambda: Surface("s", Column(Ref("nowhere"))), "'nowhere', which is not defined"),
        (lambda: Surface("s", Text("x", id="main")), "root component's id is always 'root'"),
        (
            lambda: Surface("s", Column(Text("a", id="x"), Text("b", id="x"))),
            "two components have the id 'x'",
        ),
        (lambda: Surface("", Text("x")), "surface_id"),
        (lambda: Surface("s", "text"), "root must be a component"),  # type: ignore[arg-type]
        (lambda: Surface("s", Text("x"), data={"n": float("nan")}), "not a JSON number"),
        (lambda: Surface("s", Text("x"), data={"when": object()}), "is not JSON"),
        (lambda: Surface("s", Text("x"), data=[1]), "data must be an object"),  # type: ignore[arg-type]
        (lambda: Text(5), "Text text must be a string or Bind"),  # type: ignore[arg-type]
        (lambda: Text("x", variant="huge"), "Text variant must be one of"),  # type: ignore[arg-type]
        (lambda: Row(justify="left"), "Row justify must be one of"),  # type: ignore[arg-type]
        (lambda: Column(3), "a child must be a component"),  # type: ignore[arg-type]
        (lambda: Button("Go", action="go"), "Button action must be an Event"),  # type: ignore[arg-type]
        (lambda: Event("go", {"x": {"nested": 1}}), "must be a string, number, boolean, list or Bind"),
        (lambda: Event(""), "Event name"),
        (lambda: Bind(""), "Bind path"),
        (lambda: Text("x", weight=True), "weight must be a number"),  # type: ignore[arg-type]
        (lambda: a2ui.data_update("s", 1, "x"), "JSON Pointer"),
        (lambda: Bind("/a~2b"), "'~' must be followed by 0 or 1"),
        (lambda: Bind("/a~"), "'~' must be followed by 0 or 1"),
        (lambda: Template(Text("x"), "/rows~"), "'~' must be followed by 0 or 1"),
        (lambda: a2ui.data_update("s", 1, "/x~9"), "'~' must be followed by 0 or 1"),
        (lambda: a2ui.data_update("s", float("inf"), "/x"), "not a JSON number"),
        (lambda: Surface("s", Text("x"), data=_self_holding()), "contains itself"),
        (lambda: Surface("s", Text("x"), data=_nested(150)), "nested more than 100 levels"),
        (lambda: Surface("s", _deep_tree(3000)), "nested more than 100 levels deep"),
    ],
)
def test_mistakes_are_refused_when_built(build, says) -> None:
    with pytest.raises(A2UIError) as caught:
        build()
    assert says in str(caught.value)


def test_a_component_in_two_places_and_cycles_are_refused() -> None:
    twice = Text("x")
    with pytest.raises(A2UIError, match="appears twice"):
        Surface("s", Column(twice, twice))
    looped = Column(Ref("loop"), id="loop")
    with pytest.raises(A2UIError, match="cycle: loop > loop"):
        Surface("s", Card(looped))
    a = Column(Ref("b"), id="a")
    b = Column(Ref("a"), id="b")
    with pytest.raises(A2UIError, match="cycle"):
        Surface("s", Card(a), extra=[b])


def test_folded_keeps_what_draws_the_surface_from_nothing() -> None:
    create, components, data = budget().messages()
    extra = {
        "version": "v0.9",
        "updateComponents": {
            "surfaceId": "budget",
            "components": [
                {"id": "remaining", "component": "Text", "text": "gone"},
                {"id": "new", "component": "Divider"},
            ],
        },
    }
    path = a2ui.data_update("budget", "1", "/remaining")
    whole = a2ui.data_update("budget", {"remaining": "2"})
    drawn = a2ui.folded([create, components, data, path, extra])
    assert [next(k for k in m if k != "version") for m in drawn] == [
        "createSurface",
        "updateComponents",
        "updateDataModel",
        "updateDataModel",
    ]
    merged = {c["id"]: c for c in drawn[1]["updateComponents"]["components"]}
    assert merged["remaining"]["text"] == "gone" and "new" in merged and "root" in merged
    assert a2ui.folded([create, components, data, path, whole]) == [create, components, whole]
    assert a2ui.folded([create, components, a2ui.delete_surface("budget")]) == []
    a2ui.validate_messages(drawn)


def _valid_pair() -> list[dict[str, Any]]:
    return budget().messages()


BAD_MESSAGES = [
    ("no version", lambda m: m.pop("version")),
    ("v0.8", lambda m: m.__setitem__("version", "v0.8")),
    ("two kinds", lambda m: m.__setitem__("deleteSurface", {"surfaceId": "budget"})),
    ("unknown field", lambda m: m["updateComponents"].__setitem__("extra", 1)),
    ("no surface id", lambda m: m["updateComponents"].pop("surfaceId")),
    ("empty components", lambda m: m["updateComponents"].__setitem__("components", [])),
    ("unknown component", lambda m: m["updateComponents"]["components"][0].__setitem__("component", "Blink")),
    ("missing required", lambda m: m["updateComponents"]["components"][0].pop("child")),
    ("unknown property", lambda m: m["updateComponents"]["components"][0].__setitem__("colour", "red")),
    ("bad enum", lambda m: m["updateComponents"]["components"][2].__setitem__("variant", "huge")),
    ("bad text", lambda m: m["updateComponents"]["components"][2].__setitem__("text", 5)),
    ("bad children", lambda m: m["updateComponents"]["components"][1].__setitem__("children", [1])),
    ("no id", lambda m: m["updateComponents"]["components"][0].pop("id")),
]


@pytest.mark.parametrize(("what", "spoil"), BAD_MESSAGES, ids=[b[0] for b in BAD_MESSAGES])
def test_validate_message_refuses_what_the_official_schema_refuses(official, what, spoil) -> None:
    message = copy.deepcopy(_valid_pair()[1])
    a2ui.validate_message(message)
    assert _errors(official, message) == []
    spoil(message)
    assert _errors(official, message), f"the official schema accepts {what}: the case proves nothing"
    with pytest.raises(A2UIError):
        a2ui.validate_message(message)


@pytest.mark.parametrize(
    ("value", "says"),
    [
        (float("nan"), "not a JSON number"),
        ({"n": [float("-inf")]}, "not a JSON number"),
        (b"bytes", "is not JSON"),
        (_nested(5000), "nested more than 100 levels"),
        (_self_holding(), "contains itself"),
    ],
    ids=["nan", "inf", "bytes", "deep", "cycle"],
)
def test_validate_message_refuses_a_data_value_that_is_not_json(value, says) -> None:
    message = {"version": "v0.9", "updateDataModel": {"surfaceId": "d", "path": "/", "value": value}}
    with pytest.raises(A2UIError, match=says):
        a2ui.validate_message(message)
    bad_path = {"version": "v0.9", "updateDataModel": {"surfaceId": "d", "path": "/a~2", "value": 1}}
    with pytest.raises(A2UIError, match="JSON Pointer escape"):
        a2ui.validate_message(bad_path)
    a2ui.validate_message(
        {"version": "v0.9", "updateDataModel": {"surfaceId": "d", "path": "/a~1b", "value": 1}}
    )


def test_folded_keeps_one_write_per_path_so_a_snapshot_stays_the_size_of_the_surface() -> None:
    surface = Surface("p", Column(Text(Bind("/progress")), Text(Bind("/step/name"))), data={"progress": "0"})
    drawn = surface.messages()
    for i in range(1, 1001):
        drawn = a2ui.folded([*drawn, a2ui.data_update("p", str(i), "/progress")])
    assert len(drawn) == 4, "createSurface, components, the whole model, only the last /progress"
    assert drawn[-1]["updateDataModel"] == {"surfaceId": "p", "path": "/progress", "value": "1000"}
    step = a2ui.data_update("p", {"name": "a", "n": 1}, "/step")
    name = a2ui.data_update("p", "b", "/step/name")
    sibling = a2ui.data_update("p", "x", "/stepper")  # not below /step: a prefix of the name is not a parent
    kept = a2ui.folded([*drawn, step, name, sibling])
    assert kept[-3:] == [step, name, sibling], "a write below an earlier one is applied after it, in order"
    again = a2ui.data_update("p", {"name": "c"}, "/step")
    assert a2ui.folded([*drawn, step, name, sibling, again])[-3:] == [drawn[-1], sibling, again]
    whole = a2ui.data_update("p", {"progress": "done"})
    assert a2ui.folded([*drawn, step, name, sibling, whole]) == [*drawn[:2], whole]
    a2ui.validate_messages(a2ui.folded([*drawn, step, name, sibling, again]))


def test_validate_messages_checks_the_surface_as_a_client_applies_it() -> None:
    create, components, data = budget().messages()
    a2ui.validate_messages([create, components, data])
    with pytest.raises(A2UIError, match="was not created"):
        a2ui.validate_messages([components])
    with pytest.raises(A2UIError, match="created twice"):
        a2ui.validate_messages([create, create])
    rootless = copy.deepcopy(components)
    rootless["updateComponents"]["components"][0]["id"] = "top"
    with pytest.raises(A2UIError, match="no component with the id 'root'"):
        a2ui.validate_messages([create, rootless])
    dangling = copy.deepcopy(components)
    dangling["updateComponents"]["components"][0]["child"] = "ghost"
    with pytest.raises(A2UIError, match="'ghost', which is not defined"):
        a2ui.validate_messages([create, dangling])
    looped = copy.deepcopy(components)
    looped["updateComponents"]["components"][1]["children"].append("root")
    with pytest.raises(A2UIError, match="cycle"):
        a2ui.validate_messages([create, looped])
    a2ui.validate_messages([create, components, a2ui.delete_surface("budget"), create, components])


class _Watcher:
    def __init__(self) -> None:
        self.events: list[Any] = []

    def supports(self, capability: str) -> bool:
        return False

    async def progress(self, progress: float, total: float | None, message: str | None) -> None:
        return None

    async def log(self, level: str, data: Any, logger: str | None) -> None:
        return None

    async def gather(self, requests: Any) -> dict[str, Any]:
        return {}

    async def emit(self, event: Any) -> None:
        self.events.append(event)


async def test_ctx_surface_creates_once_then_updates() -> None:
    watcher = _Watcher()
    ctx = Context(channel=watcher)
    await ctx.surface(budget())
    await ctx.surface(budget())
    await ctx.surface_data("budget", "1,100.00", "/remaining")
    await ctx.delete_surface("budget")
    first, again, data, deleted = watcher.events
    assert all(isinstance(e, SurfaceUpdate) and e.surface_id == "budget" for e in watcher.events)
    assert "createSurface" in first.messages[0] and first.drawn == first.messages
    assert "updateComponents" in again.messages[0] and again.drawn == first.messages, "the same tree again"
    assert data.messages == (a2ui.data_update("budget", "1,100.00", "/remaining"),)
    assert data.drawn == (*first.messages, *data.messages), "what draws it from nothing, as it now is"
    assert deleted.messages == (a2ui.delete_surface("budget"),) and deleted.drawn == ()
    a2ui.validate_messages([m for e in watcher.events for m in e.messages])
    with pytest.raises(ValueError, match="no surface 'budget' was shown"):
        await ctx.surface_data("budget", 1)
    with pytest.raises(TypeError, match="takes an agentmw.a2ui.Surface"):
        await ctx.surface({"createSurface": {}})  # type: ignore[arg-type]


async def test_nobody_watching_sends_nothing() -> None:
    ctx = Context()  # an MCP tool call: no one receives events
    await ctx.surface(budget())
    await ctx.surface_data("never-shown", 1)  # nothing is sent, so nothing is refused


def test_the_example_bundles_carry_each_bundled_package_license() -> None:
    """static/vendor/LICENSES.txt (written by web/build.mjs) names every package the bundles hold, at the
    version the lock file installs, with its license text: Apache-2.0 (@a2ui/*) and MIT (zod) ask for it."""
    example = Path(__file__).parent.parent / "examples" / "fastapi_app"
    text = (example / "static" / "vendor" / "LICENSES.txt").read_text()
    lock = json.loads((example / "web" / "package-lock.json").read_text())["packages"]
    sections = text.split("=" * 78 + "\n")[1:]
    heads = dict(zip(sections[0::2], sections[1::2], strict=True))
    named: dict[str, tuple[str, str, str]] = {}
    for head, body in heads.items():
        name_version, license_, bundles = (
            head.strip().replace(", license ", "|").replace(", in ", "|").split("|")
        )
        name, version = name_version.rsplit(" ", 1)
        named[name] = (version, license_, body)
        assert lock[f"node_modules/{name}"]["version"] == version, (
            f"{name}: LICENSES.txt is stale, rerun build"
        )
        assert body.startswith("--- ") and len(body) > 300, f"{name}: no license text"
        assert set(bundles.split(", ")) <= {"a2ui.js", "ag-ui-client.js"}
    for name in ("@a2ui/lit", "@a2ui/web_core", "@ag-ui/client", "lit", "zod"):
        assert name in named, f"{name} is bundled but not in LICENSES.txt"
    for name in ("@a2ui/lit", "@a2ui/web_core"):
        assert named[name][1] == "Apache-2.0" and "Apache License" in named[name][2]
    assert named["zod"][1] == "MIT" and "Permission is hereby granted" in named["zod"][2]
