"""Each FastAPI feature, as FastAPI's tutorial writes it, answers an agent as it answers HTTP (issue 21).

``tests/apps/features/`` holds tiny apps, one FastAPI feature each (path, query, header and cookie parameters and
their models, bodies, forms, extra data types, ``response_model`` and its options, status codes, errors and
exception handlers, custom responses, dependencies of every kind, security schemes, middleware, background tasks,
the ``Request``, sub-applications and ``root_path``, sync and async handlers). Every route is exposed by
decorator and in bulk, and every request of its table is sent over plain HTTP (the reference) and as an MCP
``tools/call`` in both eras (A2A and AG-UI too for a ``@skill``). ``tests/apps/differential.py`` compares them as
it does for the realistic apps of ``test_fastapi_fidelity.py``, and the app's record of side effects (a
``yield`` dependency's cleanup, a background task) must match too.

The divergences ``docs/fastapi-migration.md`` documents are asserted at the end: a path value that would reach
another route, and routes taking a file upload (refused at start).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from fastapi import FastAPI

from agentmw import RegistrationError
from tests.apps._exposure import attach_agent
from tests.apps.differential import Case, Observed, Route, compare, observe
from tests.apps.features import Feature, features
from tests.apps.features.serving import upload_app
from tests.waiting import eventually

EXPOSURES = ("decorator", "bulk")
MCP_FACES = ("mcp-2025", "mcp-2026")
SKILL_FACES = ("a2a", "agui")


@dataclass
class Built:
    """A feature app with its agent (or why the agent refused to start)."""

    feature: Feature
    app: FastAPI
    error: str | None = None
    references: dict[tuple[str, str], tuple[Observed, list[Any]]] = field(default_factory=dict)

    @property
    def effects(self) -> list[Any]:
        effects: list[Any] = self.app.state.effects
        return effects


@functools.cache
def corpus() -> dict[str, Feature]:
    return {f.name: f for f in features()}


_built: dict[tuple[str, str], Built] = {}


def build(name: str, exposure: str) -> Built:
    key = (name, exposure)
    if key not in _built:
        feature = corpus()[name]
        app = feature.create(exposure)  # type: ignore[arg-type]
        app.state.effects = []
        built = Built(feature, app)
        try:
            attach_agent(app, f"feature-{name}", exposure)  # type: ignore[arg-type]
        except Exception as exc:  # noqa: BLE001 - the agent refused to start: every case of this app reports it
            built.error = f"{type(exc).__name__}: {exc}"
        _built[key] = built
    return _built[key]


async def exchange(built: Built, face: str, route: Route, case: Case) -> tuple[Observed, list[Any]]:
    built.effects.clear()  # cleared in place: a background task holds this very list
    headers = dict(built.feature.callers[case.who]) if case.who else {}
    observed = await observe(built.app, face, route, case, headers)
    return observed, list(built.effects)


async def reference(built: Built, route: Route, case: Case) -> tuple[Observed, list[Any]]:
    key = (str(route), case.name)
    if key not in built.references:
        built.references[key] = await exchange(built, "http", route, case)
    return built.references[key]


async def differences(
    built: Built, face: str, route: Route, case: Case
) -> tuple[list[str], Observed, Observed]:
    expected, expected_effects = await reference(built, route, case)
    observed, effects = await exchange(built, face, route, case)
    findings = compare(expected, observed, case)
    if effects != expected_effects and effects == expected_effects[: len(effects)]:
        try:  # a background task may still be running: give it a bounded moment
            await eventually(lambda: built.effects == expected_effects, "the same side effects", timeout=0.5)
            effects = expected_effects
        except AssertionError:
            effects = list(built.effects)
    if effects != expected_effects:
        findings.append(f"SIDE_EFFECTS: the app recorded {effects!r}, over HTTP {expected_effects!r}")
    return findings, expected, observed


def _cases() -> Iterator[Any]:
    for feature in corpus().values():
        for route, cases in feature.routes:
            for case in cases:
                for exposure in EXPOSURES:
                    faces = MCP_FACES + (SKILL_FACES if route.skill and exposure == "decorator" else ())
                    for face in faces:
                        yield pytest.param(
                            feature.name,
                            exposure,
                            route,
                            case,
                            face,
                            id=f"{feature.name}-{exposure}-{route.tool}-{case.name}-{face}",
                        )


@pytest.mark.parametrize(("name", "exposure", "route", "case", "face"), list(_cases()))
async def test_a_feature_answers_an_agent_as_it_answers_http(
    name: str, exposure: str, route: Route, case: Case, face: str
) -> None:
    built = build(name, exposure)
    if built.error is not None:
        pytest.fail(f"{name} ({exposure}): the agent refused to start: {built.error}", pytrace=False)
    findings, expected, observed = await differences(built, face, route, case)
    assert not findings, (
        f"{name} ({exposure}) {route} [{case.name}] via {face}:\n  HTTP:  {expected.summary()}\n"
        f"  {face}: {observed.summary()}\n  " + "\n  ".join(findings)
    )


# --- the tables ask for what they name -----------------------------------------------------------------


async def test_the_features_answer_every_outcome_class_over_http() -> None:
    seen: dict[str, str] = {}
    for feature in corpus().values():
        built = build(feature.name, "bulk")
        for route, cases in feature.routes:
            for case in cases:
                http, _ = await reference(built, route, case)
                seen.setdefault(http.outcome, f"{feature.name} {route} [{case.name}]")
    assert set(seen) == {"ok", "auth_refused", "not_found", "invalid", "retryable", "failed", "redirect"}, (
        seen
    )


# --- documented divergences (docs/fastapi-migration.md, section 4) -----------------------------------------


@pytest.mark.parametrize("exposure", EXPOSURES)
async def test_a_path_value_that_routes_to_an_earlier_route_is_refused(exposure: str) -> None:
    """``GET /users/me`` is declared before ``/users/{user_id}``: over HTTP ``user_id="me"`` reaches the first
    route; an agent's ``read_user(user_id="me")`` is refused as invalid, naming the reason, and sends nothing."""
    built = build("path-order", exposure)
    route = Route("GET", "/users/{user_id}", "read_user")
    case = Case("me", path={"user_id": "me"})
    http, _ = await exchange(built, "http", route, case)
    assert http.outcome == "ok" and http.data == {"user_id": "the current user"}
    for face in MCP_FACES:
        observed, _ = await exchange(built, face, route, case)
        assert observed.outcome == "invalid" and "would reach another route" in observed.text, (
            observed.summary()
        )


@pytest.mark.parametrize("exposure", EXPOSURES)
async def test_a_path_value_with_a_slash_is_refused_unless_the_parameter_is_a_path(exposure: str) -> None:
    built = build("path-int", exposure)
    route = Route("GET", "/items/{item_id}", "read_item")
    case = Case("a-slash", path={"item_id": "3/../4"})
    http, _ = await exchange(built, "http", route, case)
    assert http.status == 404
    for face in MCP_FACES:
        observed, _ = await exchange(built, face, route, case)
        assert observed.outcome == "invalid", observed.summary()


UPLOAD_REFUSAL = "parameter 'file' is a file upload"
UPLOADS = {"POST /files/": UPLOAD_REFUSAL, "POST /uploadfile/": UPLOAD_REFUSAL}


def test_decorated_upload_routes_stop_the_agent_at_start_naming_the_route_and_parameter() -> None:
    with pytest.raises(RegistrationError) as refused:
        attach_agent(upload_app("decorator"), "feature-upload", "decorator")
    message = str(refused.value)
    assert any(route in message and reason in message for route, reason in UPLOADS.items()), message


def test_upload_routes_are_left_out_of_bulk_exposure_with_a_warning_each(caplog: Any) -> None:
    with caplog.at_level(logging.WARNING, logger="agentmw"):
        agent = attach_agent(upload_app("bulk"), "feature-upload", "bulk")
    assert set(agent.tools) == {"read_status"}, sorted(agent.tools)
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    for route, reason in UPLOADS.items():
        assert sum(route in w and reason in w for w in warned) == 1, warned


# --- what the harness learnt for these apps -----------------------------------------------------------------


def test_an_object_body_wrapped_in_result_is_compared_inside_and_named() -> None:
    http = Observed("http", "ok", {"description": "car"})
    face = Observed(
        "mcp-2026",
        "ok",
        {"result": {"description": "car", "secret": "s"}},
        '{"description": "car"}',
        extra={"structured": True},
    )
    assert compare(http, face, Case("c")) == [
        "LEAK: more data than HTTP: $.secret",
        "STRUCTURED: structuredContent is not the body (or {'result': body})",
    ]


def test_an_error_body_without_detail_is_the_detail_an_agent_must_get() -> None:
    http = Observed("http", "not_found", {"message": "Item not found"}, '{"message": "Item not found"}', 404)
    assert compare(http, Observed("mcp-2026", "not_found", text="HTTP 404: Not Found"), Case("c")) == [
        'DETAIL: the app\'s detail \'{"message": "Item not found"}\' does not reach the caller'
    ]
    assert (
        compare(
            http, Observed("mcp-2026", "not_found", text='HTTP 404: {"message": "Item not found"}'), Case("c")
        )
        == []
    )


def test_a_path_parameter_keeps_its_slashes_and_a_parameter_model_is_one_argument() -> None:
    from tests.apps.differential import _url, tool_arguments

    route = Route("GET", "/files/{file_path:path}", "read_file")
    assert _url(route, Case("c", path={"file_path": "a/b c.txt"})) == "/files/a/b%20c.txt"
    grouped = Route("GET", "/items/", "read_items", model="filter_query")
    assert tool_arguments(grouped, Case("c", query={"limit": 5})) == {"filter_query": {"limit": 5}}
