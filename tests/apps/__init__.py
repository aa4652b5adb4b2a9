"""A corpus of small FastAPI apps written the way FastAPI users write them (issue 21), for the differential test
``tests/test_fastapi_fidelity.py``: every route is sent over plain HTTP and through each agent face, and the
answers must match.

Each app module has ``create_api(exposure, database)`` (the plain FastAPI app, its handlers marked with ``@tool``
when ``exposure == "decorator"``), ``build_agent(app, exposure)`` (the agent: the marked handlers, or the app's
routes in bulk), ``create_app(...)`` (both, with ``AgentMiddleware``), ``init_db(path)`` (a seeded SQLite file)
and a module-level ``app``.
"""

from __future__ import annotations

__all__: list[str] = []
