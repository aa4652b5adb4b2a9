"""The protocol-neutral pipeline: validate, inject, run, and turn the result into an :class:`Outcome`.

Faces build a :class:`~agentmw.context.Context` with their own channel, call :func:`invoke`, and render
the outcome onto their wire. Cancellation is not an outcome here: it propagates as the event loop's
cancellation, so each face can answer it the way its protocol says.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Literal

import anyio.to_thread
from pydantic import ValidationError

from .capability import Capability, text_of
from .content import Text
from .context import Ask, ClientCapabilityMissing, Context, InputRequest
from .errors import AgentError, NeedsInput, Permanent, Rejected, Retryable

__all__ = ["Outcome", "OutcomeStatus", "InputsPending", "invoke", "describe_validation_error"]

logger = logging.getLogger("agentmw")

OutcomeStatus = Literal["completed", "needs_input", "failed", "rejected", "canceled"]
_RETRYABLE_HTTP = frozenset({408, 425, 429, 502, 503, 504})


class InputsPending(BaseException):
    """Raised by a channel that cannot wait in place: the call ends now with these questions.

    A BaseException, like cancellation, so that a function's own ``except Exception`` cannot swallow it.
    """

    def __init__(self, requests: Mapping[str, InputRequest], answered: Mapping[str, Any] | None = None) -> None:
        super().__init__("input required")
        self.requests = dict(requests)
        self.answered = dict(answered or {})


@dataclass(slots=True)
class Outcome:
    status: OutcomeStatus
    content: list[Any] = field(default_factory=list)
    structured: Any = None
    message: str = ""
    retryable: bool = False
    retry_after: float | None = None
    pending: dict[str, InputRequest] | None = None
    code: str | None = None
    data: Any = None
    value: Any = None

    @property
    def is_error(self) -> bool:
        return self.status in ("failed", "rejected")


def describe_validation_error(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors(include_url=False):
        loc = ".".join(str(p) for p in err.get("loc", ())) or "arguments"
        parts.append(f"{loc}: {err.get('msg', 'invalid')}")
    return "Invalid arguments: " + "; ".join(parts)


def _sanitized(capability: Capability, exc: BaseException) -> str:
    """What a caller learns of an unexpected exception: its type, never its message or traceback.

    Exception messages routinely carry internals (paths, queries, credentials); a function that wants
    the caller to read a message raises ``Permanent``, ``Retryable`` or ``Rejected`` with it.
    """
    return f"{capability.name} failed with an internal error ({type(exc).__name__}); details are in the server log"


def _http_exception_outcome(exc: Exception) -> Outcome | None:
    status = getattr(exc, "status_code", None)
    if not isinstance(status, int) or type(exc).__name__ not in ("HTTPException",):
        return None
    detail = getattr(exc, "detail", "") or ""
    if not isinstance(detail, str):
        detail = json.dumps(detail, default=str)
    headers = getattr(exc, "headers", None) or {}
    retry_after = None
    raw = headers.get("Retry-After") or headers.get("retry-after")
    if raw is not None:
        try:
            retry_after = float(raw)
        except ValueError:
            retry_after = None
    retryable = status in _RETRYABLE_HTTP or status >= 500 and status != 501
    return Outcome(
        status="failed",
        content=[Text(f"HTTP {status}: {detail}".rstrip(": "))],
        message=f"HTTP {status}: {detail}",
        retryable=retryable,
        retry_after=retry_after,
        code=f"http_{status}",
        data={"status": status, "detail": detail},
    )


async def _call(capability: Capability, kwargs: dict[str, Any], ctx: Context) -> Any:
    fn = capability.fn
    if capability.is_async_gen:
        parts: list[str] = []
        async for item in fn(**kwargs):
            text = item if isinstance(item, str) else json.dumps(item, default=str)
            parts.append(text)
            await ctx.say(text)
        return "".join(parts)
    if capability.is_async:
        return await fn(**kwargs)
    result = await anyio.to_thread.run_sync(partial(fn, **kwargs))
    if hasattr(result, "__await__"):  # a sync wrapper around a coroutine function
        result = await result
    return result


def completed(capability: Capability, value: Any) -> Outcome:
    if capability.kind in ("resource", "prompt"):  # they render their raw value themselves
        return Outcome(status="completed", value=value)
    output = capability.output
    if output.mode == "content":
        return Outcome(status="completed", content=text_of(value), value=value)
    structured = output.structured(value)
    return Outcome(
        status="completed",
        content=[Text(json.dumps(structured, separators=(",", ":"), ensure_ascii=False))],
        structured=structured,
        value=value,
    )


async def invoke(capability: Capability, arguments: Mapping[str, Any] | None, ctx: Context) -> Outcome:
    """Run one capability for one caller and classify what happened."""
    params = capability.params
    if arguments is None:
        arguments = {}
    elif not isinstance(arguments, Mapping):
        return Outcome(status="rejected", message="Invalid arguments: expected an object", code="invalid_arguments")
    model = params.input_model
    if params.arg_names and model is not None:
        try:
            kwargs = dict(model.model_validate(arguments).__dict__)
        except ValidationError as exc:
            return Outcome(status="rejected", message=describe_validation_error(exc), code="invalid_arguments")
    else:
        kwargs = {}
    if params.context_param:
        kwargs[params.context_param] = ctx
    if params.request_param:
        kwargs[params.request_param] = ctx.request
    try:
        if params.host_params:
            from ._host import HostDependencyError, resolve_host_dependencies

            async with AsyncExitStack() as stack:
                try:
                    kwargs.update(await resolve_host_dependencies(capability, ctx.request, stack))
                except HostDependencyError as exc:
                    return Outcome(status="rejected", message=f"Invalid request: {exc}", code="invalid_arguments")
                value = await _call(capability, kwargs, ctx)
        else:
            value = await _call(capability, kwargs, ctx)
        await ctx.sync_state()
    except InputsPending as pending:
        return Outcome(status="needs_input", pending=pending.requests, data=pending.answered)
    except NeedsInput as exc:
        # The function has returned: an answer cannot resume it, so faces without a task to park it in
        # report the question (code "raised") instead of starting an answer round.
        return Outcome(status="needs_input", pending={"question": Ask(exc.question, exc.schema)},
                       message=exc.question, code="raised")
    except Retryable as exc:
        when = f" Retry after {exc.retry_after:g} seconds." if exc.retry_after is not None else " Retry later."
        return Outcome(status="failed", content=[Text(exc.message + when)], message=exc.message, retryable=True,
                       retry_after=exc.retry_after, code="retryable", data=exc.data)
    except Rejected as exc:
        return Outcome(status="rejected", message=exc.message, code="rejected", data=exc.data)
    except (Permanent, AgentError) as exc:
        return Outcome(status="failed", content=[Text(exc.message)], message=exc.message, code="permanent",
                       data=exc.data)
    except ClientCapabilityMissing as exc:
        return Outcome(status="rejected", message=str(exc), code="missing_capability", data=exc.capability,
                       pending=exc.requests or None)
    except Exception as exc:
        mapped = _http_exception_outcome(exc)
        if mapped is not None:
            return mapped
        logger.exception("capability %r raised", capability.name)
        message = _sanitized(capability, exc)
        return Outcome(status="failed", content=[Text(message)], message=message, code="permanent")
    return completed(capability, value)
