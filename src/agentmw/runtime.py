"""The protocol-neutral entry of a call: :func:`invoke` runs one capability through its pipeline.

Faces build a :class:`~agentmw.context.Context` with their own channel, call :func:`invoke`, and render
the outcome onto their wire. Cancellation is not an outcome here: it propagates as the event loop's
cancellation, so each face can answer it the way its protocol says.

The stages themselves are in ``pipeline.py`` (assembled once per capability), the outcomes in
``outcomes.py``; their names are kept here too, where the faces import them from.
"""

from __future__ import annotations

from collections.abc import Coroutine, Mapping
from typing import Any, Protocol

from .capability import Capability
from .context import Context, Services
from .outcomes import Code, InputsPending, Outcome, Status, describe_validation_error
from .pipeline import Pipeline, build_pipeline, completed, validate

__all__ = [
    "Code",
    "Execution",
    "InputsPending",
    "Outcome",
    "Status",
    "completed",
    "describe_validation_error",
    "invoke",
    "pipeline_of",
    "validate",
]


class Execution(Protocol):
    """An execution's journal (``agentmw.journal.Journal``): runs the call with itself behind ctx's steps."""

    def execute(
        self,
        capability: Capability,
        arguments: Mapping[str, Any] | None,
        ctx: Context,
        *,
        idempotency_key: str | None = None,
        approval_id: str | None = None,
    ) -> Coroutine[Any, Any, Outcome]: ...


def invoke(
    capability: Capability,
    arguments: Mapping[str, Any] | None,
    ctx: Context,
    *,
    idempotency_key: str | None = None,
    approval_id: str | None = None,
    journal: Execution | None = None,
    validated: Any = None,
) -> Coroutine[Any, Any, Outcome]:
    """Run one capability for one caller through its pipeline, and classify what happened (await it).

    The pipeline (``pipeline.py``) is the capability's stages as its agent is configured, assembled at its
    first call: validate -> hooks -> access -> idempotency -> framing -> in-flight caps -> the host app's
    dependencies -> roots -> human gate -> run under the deadline -> Outcome, each stage only where it has
    something to do. Each rule lives there once, so no face can skip it.

    With a ``journal`` (``agentmw.journal``), the execution's answers, sub-calls and one-time steps are
    recorded there and a recorded one is replayed rather than run again (docs/durability.md).

    ``validated``: the capability's input model, already validated by the caller from these very
    ``arguments`` (a face that checked them to ask for what is missing), so it is not validated twice.
    """
    agent = ctx.agent
    if capability.route is None and agent is not None:
        capability = _bound(capability, ctx)
    pipeline: Pipeline | None = capability.pipeline
    if pipeline is None or not pipeline.serves(capability, agent):
        pipeline = capability.pipeline = build_pipeline(capability, agent)
    if pipeline.orphan is not None:
        return pipeline.refuse_orphan()
    if journal is not None:
        return journal.execute(
            capability, arguments, ctx, idempotency_key=idempotency_key, approval_id=approval_id
        )
    ctx.invoker = invoke
    return pipeline(arguments, ctx, idempotency_key, approval_id, validated)


def pipeline_of(capability: Capability, agent: Services | None = None) -> Pipeline:
    """The pipeline a call of ``capability`` goes through when ``agent`` serves it (None: a direct call);
    ``pipeline_of(cap, agent).stages`` names its stages."""
    pipeline: Pipeline | None = capability.pipeline
    if pipeline is None or not pipeline.serves(capability, agent):
        pipeline = capability.pipeline = build_pipeline(capability, agent)
    return pipeline


def _bound(capability: Capability, ctx: Context) -> Capability:
    """The capability as the app serving this request binds it: a handler included as a function (or served
    through ``agent.router()``, with no ``AgentMiddleware`` to start the agent) is bound to its route before its
    first call, so its route's dependencies are never skipped."""
    agent = ctx.agent
    assert agent is not None
    app = ctx.request.scope.get("app") if ctx.request is not None else None
    if app is None or agent.bound_to(app):
        return capability
    agent.bind_host(app)
    return agent.current(capability)
