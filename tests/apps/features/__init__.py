"""Tiny FastAPI apps, each showing one FastAPI feature the way FastAPI's own tutorial writes it, with a table of
requests for each route: the corpus of ``tests/test_fastapi_features.py`` (issue 21's differential, in small).

Each app is a ``create(exposure)`` function that returns a plain FastAPI app whose handlers carry ``@tool`` (some
``@skill``) in the ``decorator`` build and nothing in the ``bulk`` one (``tests/apps/_exposure.py``); the test
attaches the agent. Handlers that have a side effect FastAPI would make (a background task, a dependency's
cleanup) append to ``app.state.effects``, which the differential compares after each request as it compares
the shop's database.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI, Request

from .._exposure import Exposure
from ..differential import Case, Route

__all__ = ["CALLERS", "Feature", "Table", "effects_of", "feature", "features"]

Table = list[tuple[Route, list[Case]]]

CALLERS: dict[str, dict[str, str]] = {
    "token": {"x-token": "fake-super-secret-token"},
    "bad-token": {"x-token": "guessed"},
    "token-and-key": {"x-token": "fake-super-secret-token", "x-key": "fake-super-secret-key"},
    "token-bad-key": {"x-token": "fake-super-secret-token", "x-key": "guessed"},
    "bearer-johndoe": {"authorization": "Bearer johndoe"},
    "bearer-alice": {"authorization": "Bearer alice"},
    "bearer-unknown": {"authorization": "Bearer mallory"},
    "basic-stanley": {"authorization": "Basic c3RhbmxleWpvYmVzb246c3dvcmRmaXNo"},  # stanleyjobeson:swordfish
    "basic-wrong": {"authorization": "Basic c3RhbmxleWpvYmVzb246Z3Vlc3M="},  # stanleyjobeson:guess
    "api-key": {"x-api-key": "key-7f3a"},
    "api-cookie": {"cookie": "session=key-7f3a"},
    "wrong-api-cookie": {"cookie": "session=guess"},
    "ads-cookie": {"cookie": "ads_id=ad-1234"},
    "last-query-cookie": {"cookie": "last_query=from-cookie"},
    "session-cookies": {"cookie": "session_id=s-1; fatebook_tracker=ft-9"},
    "tenant": {"x-tenant": "acme"},
    "scoped-items": {"authorization": "Bearer johndoe:me,items"},
    "scoped-me": {"authorization": "Bearer johndoe:me"},
    "scoped-none": {"authorization": "Bearer johndoe:"},
    "localhost": {"host": "localhost:8000"},
    "odd-headers": {"strange_header": "underscored", "x-token": "one"},
    "save-data": {"save-data": "true", "x-tag": "a"},
}


@dataclass(frozen=True)
class Feature:
    """One tiny app: its name, how to build it, its routes with their requests, and its callers' headers."""

    name: str
    create: Callable[[Exposure], FastAPI]
    routes: Table
    callers: Mapping[str, Mapping[str, str]] = field(default_factory=lambda: CALLERS)


_registered: list[Feature] = []


def feature(
    name: str, routes: Table
) -> Callable[[Callable[[Exposure], FastAPI]], Callable[[Exposure], FastAPI]]:
    """Register ``create`` as the feature app ``name`` with the table ``routes``."""

    def register(create: Callable[[Exposure], FastAPI]) -> Callable[[Exposure], FastAPI]:
        _registered.append(Feature(name, create, routes))
        return create

    return register


def effects_of(request: Request) -> list[Any]:
    """The app's record of side effects (a dependency's cleanup, a background task), compared with HTTP's."""
    effects: list[Any] = request.app.state.effects
    return effects


def features() -> list[Feature]:
    """Every feature app of the corpus (importing the modules registers them; nothing is built)."""
    from . import bodies, dependencies, params, responses, serving  # noqa: F401  (they register themselves)

    return list(_registered)
