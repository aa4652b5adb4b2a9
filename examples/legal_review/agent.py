"""Legal review: a small remote A2A agent that reviews a purchase for legal issues, on a2a-sdk 1.3.0's server.

It knows nothing of agentmw: it is the kind of agent another team runs, which the procurement assistant
(examples/fastapi_app) reaches through a bridge. One skill, ``review_purchase``: send it the purchase in words
(``"... total 15980"`` gives the total), or as a data part ``{"description": ..., "jurisdiction": ...,
"total": ...}``. When the purchase does not say which jurisdiction governs it, the task goes ``input-required``
and asks; the answer, sent as a follow-up message on the same task, finishes the review. The result is a text summary and a data artifact
``{"jurisdiction", "verdict", "issues"}``. The rules are a handful of keyword checks: an example, not advice.

Run it with ``python -m examples.legal_review`` (``--port``, default 8001), or
``LEGAL_REVIEW_URL=http://127.0.0.1:8001 uvicorn --factory examples.legal_review.agent:create_app --port 8001``
(``$LEGAL_REVIEW_URL`` is the address the agent card names; it must be where clients reach this process).
"""

from __future__ import annotations

import os
import re
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from a2a.helpers.proto_helpers import (
    get_data_parts,
    get_message_text,
    new_data_part,
    new_task_from_user_message,
    new_text_part,
)
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes, create_rest_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types.a2a_pb2 import AgentCapabilities, AgentCard, AgentInterface, AgentSkill, TaskState
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import BaseRoute, Route

__all__ = ["JURISDICTIONS", "QUESTION", "Review", "a2a_app", "agent_card", "create_app", "review"]

DEFAULT_URL = "http://127.0.0.1:8001"
JURISDICTIONS = {"EU": "European Union", "UK": "United Kingdom", "US": "United States"}
QUESTION = "Which jurisdiction governs this purchase? One of: EU, UK, US."
CONTRACT_THRESHOLD = 10_000.0  # above this total, a signed written contract is required
_TOTAL = re.compile(r"\btotal[:\s]+(?:EUR\s*)?(\d[\d,]*(?:\.\d+)?)", re.IGNORECASE)


@dataclass(frozen=True)
class Review:
    jurisdiction: str
    issues: tuple[str, ...]

    @property
    def verdict(self) -> str:
        return "needs_changes" if self.issues else "approved"

    def summary(self) -> str:
        if not self.issues:
            return f"No legal issues found under {JURISDICTIONS[self.jurisdiction]} rules."
        lines = "\n".join(f"- {issue}" for issue in self.issues)
        return f"{len(self.issues)} issue(s) under {JURISDICTIONS[self.jurisdiction]} rules:\n{lines}"

    def as_data(self) -> dict[str, Any]:
        return {"jurisdiction": self.jurisdiction, "verdict": self.verdict, "issues": list(self.issues)}


def find_jurisdiction(text: str) -> str | None:
    """The jurisdiction a text names: a code (EU, UK, US) or a country or union name."""
    names = {
        "EU": ("eu", "european union", "germany", "france", "netherlands"),
        "UK": ("uk", "united kingdom", "england", "scotland"),
        "US": ("us", "usa", "united states"),
    }
    words = text.lower()
    for code, spellings in names.items():
        if any(re.search(rf"\b{re.escape(s)}\b", words) for s in spellings):
            return code
    return None


def review(description: str, jurisdiction: str, total: float | None = None) -> Review:
    """The legal issues of a purchase under one jurisdiction's rules (keyword checks, an example only)."""
    text = description.lower()
    issues = []
    personal_data = any(k in text for k in ("personal data", "employee data", "customer data", "phone"))
    if personal_data and jurisdiction == "EU":
        issues.append("Personal data is processed: a GDPR Art. 28 data processing agreement is required.")
    if personal_data and jurisdiction == "UK":
        issues.append("Personal data is processed: a UK GDPR data processing agreement is required.")
    if any(k in text for k in ("subscription", "licence", "license", "saas")):
        issues.append("Software licence terms must be reviewed for auto-renewal and liability caps.")
    if jurisdiction == "US" and "encryption" in text:
        issues.append("Encryption items: check export control classification (EAR) before shipping abroad.")
    if total is not None and total > CONTRACT_THRESHOLD:
        issues.append(f"Total above {CONTRACT_THRESHOLD:,.0f}: a signed written contract is required.")
    return Review(jurisdiction, tuple(issues))


class LegalReviewExecutor(AgentExecutor):
    """One ``review_purchase`` task per purchase; a follow-up on a task waiting for input is its answer."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        message = context.message
        assert message is not None
        task = context.current_task
        if task is None:
            task = new_task_from_user_message(message)
            await event_queue.enqueue_event(task)
        # The stored task's context id, never the request's: SDK 1.3.0 may mint a new one for a follow-up.
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        if task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED:
            purchase = _purchase(task.history[0]) if task.history else {}
            jurisdiction = find_jurisdiction(get_message_text(message))
        else:
            purchase = _purchase(message)
            jurisdiction = purchase.get("jurisdiction") or find_jurisdiction(purchase["description"])
        if jurisdiction not in JURISDICTIONS:
            await updater.requires_input(updater.new_agent_message([new_text_part(QUESTION)]))
            return
        await updater.start_work(
            updater.new_agent_message([new_text_part(f"Checking {JURISDICTIONS[jurisdiction]} rules")])
        )
        result = review(purchase.get("description", ""), jurisdiction, purchase.get("total"))
        await updater.add_artifact([new_text_part(result.summary())], name="summary")
        await updater.add_artifact([new_data_part(result.as_data())], name="review")
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        task = context.current_task
        if task is not None and context.task_id:
            await TaskUpdater(event_queue, context.task_id, task.context_id).cancel()


def _purchase(message: Any) -> dict[str, Any]:
    """The purchase a message describes: its data part's fields, else the text as the description (with a
    total when it says "total <amount>")."""
    text = get_message_text(message)
    purchase: dict[str, Any] = {"description": text}
    if (total := _TOTAL.search(text)) is not None:
        purchase["total"] = float(total.group(1).replace(",", ""))
    for data in get_data_parts(message.parts):
        if isinstance(data, dict):
            purchase.update({k: v for k, v in data.items() if k in ("description", "jurisdiction", "total")})
    jurisdiction = purchase.get("jurisdiction")
    if isinstance(jurisdiction, str):
        purchase["jurisdiction"] = find_jurisdiction(jurisdiction)
    return purchase


def agent_card(url: str) -> AgentCard:
    return AgentCard(
        name="legal-review",
        version="1.0.0",
        description="Reviews purchases for legal issues: data protection, licences, export control, contracts.",
        default_input_modes=["text/plain", "application/json"],
        default_output_modes=["text/plain", "application/json"],
        capabilities=AgentCapabilities(streaming=True),
        supported_interfaces=[
            AgentInterface(url=f"{url}/a2a", protocol_binding="JSONRPC", protocol_version="1.0"),
            AgentInterface(url=f"{url}/rest", protocol_binding="HTTP+JSON", protocol_version="1.0"),
        ],
        skills=[
            AgentSkill(
                id="review_purchase",
                name="Review a purchase",
                description="Reviews a purchase for legal issues under EU, UK or US rules; asks for the jurisdiction "
                "when the purchase does not name it.",
                tags=["legal", "procurement"],
                examples=[
                    "Review: 20 company phones for the EU sales team, total 15980",
                    "Review a SaaS subscription for customer data, jurisdiction UK",
                ],
            )
        ],
    )


def a2a_app(card: AgentCard, executor: AgentExecutor, routes: Sequence[BaseRoute] = ()) -> Starlette:
    """An A2A server of a2a-sdk's own parts: ``executor`` behind the default handler and an in-memory task store,
    the card at its well-known path, JSON-RPC at ``/a2a`` and HTTP+JSON at ``/rest``, ``GET /health``, and
    ``routes`` first. The handler's running tasks are drained at shutdown."""
    handler = DefaultRequestHandler(agent_executor=executor, task_store=InMemoryTaskStore(), agent_card=card)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await handler.aclose()

    async def health(request: Request) -> PlainTextResponse:
        return PlainTextResponse("ok")

    return Starlette(
        routes=[
            *routes,
            Route("/health", health),
            *create_agent_card_routes(card, cache_control="public, max-age=60"),
            *create_jsonrpc_routes(handler, rpc_url="/a2a"),
            *create_rest_routes(handler, path_prefix="/rest"),
        ],
        lifespan=lifespan,
    )


def create_app(url: str | None = None) -> Starlette:
    """The agent's ASGI app; ``url`` (default ``$LEGAL_REVIEW_URL``, else http://127.0.0.1:8001) is where it is
    reached, as the card says."""
    base = (url or os.environ.get("LEGAL_REVIEW_URL") or DEFAULT_URL).rstrip("/")
    return a2a_app(agent_card(base), LegalReviewExecutor())
