"""Find the agent a ``module:attr`` names, and the ASGI app that serves it.

``attr`` may name (dots reach into objects: ``module:factories.build``):

- an :class:`~agentmw.Agent`: served alone, as ``agent.asgi()``;
- a FastAPI/Starlette app (or router) that carries the agent: ``app.add_middleware(AgentMiddleware, agent=...)``,
  ``app.mount(prefix, agent.asgi())`` or ``app.router.routes.extend(agent.routes())``; requests go through the
  whole app, under the prefix the agent is mounted at;
- an ``AgentMiddleware`` instance;
- a factory: a function that takes no required argument and returns any of the above (or a tuple of an agent
  and its app, as test helpers often do); it is called, and awaited when it is a coroutine function.

Without ``:attr``, the module's one ``Agent`` is used (with the module's ``app`` when that carries it). An app that
carries no agent, but whose module holds exactly one, is served with that agent alone (a note says so).
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import os
import sys
from dataclasses import dataclass, field
from typing import Any

from ..agent import Agent
from ..middleware import AgentMiddleware

__all__ = ["Target", "TargetError", "resolve"]


class TargetError(Exception):
    """``module:attr`` cannot be imported, or names nothing that carries an agent."""


@dataclass
class Target:
    spec: str
    agent: Agent
    app: Any
    """The ASGI app requests go to: the host app, or ``agent.asgi()``."""
    prefix: str = ""
    """Where the agent's paths are inside ``app`` (``/agent`` for ``app.mount("/agent", agent.asgi())``)."""
    host: Any = None
    """The host app or router, whose routes ``inspect`` and ``lint`` read; None for an agent alone."""
    how: str = ""
    notes: list[str] = field(default_factory=list)

    def path(self, agent_path: str) -> str:
        return self.prefix.rstrip("/") + agent_path


def _import(module_name: str) -> Any:
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())  # as uvicorn does: `agentmw inspect app:app` finds ./app.py
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and (module_name == exc.name or module_name.startswith(exc.name + ".")):
            raise TargetError(
                f"cannot import {module_name!r}: no such module (run from the directory that "
                f"holds it, or put it on PYTHONPATH)"
            ) from exc
        raise TargetError(f"importing {module_name} failed: {_described(exc)}") from exc
    except SyntaxError as exc:
        raise TargetError(
            f"importing {module_name} failed: SyntaxError: {exc.msg} ({exc.filename}:{exc.lineno})"
        ) from exc
    except Exception as exc:  # the module's own code raised: say what and where, without a traceback
        raise TargetError(f"importing {module_name} failed: {_described(exc)}") from exc


def _described(exc: BaseException) -> str:
    """``Type: message (file:line)``, the line being the innermost frame that raised it."""
    text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    if tb is not None:
        text += f" ({tb.tb_frame.f_code.co_filename}:{tb.tb_lineno})"
    return text


def _is_factory(value: Any) -> bool:
    if not (inspect.isfunction(value) or inspect.ismethod(value)):
        return False
    try:
        signature = inspect.signature(value)
    except (TypeError, ValueError):
        return False
    return all(
        p.default is not p.empty or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        for p in signature.parameters.values()
    )


def _agents_in(module: Any) -> list[Agent]:
    found: list[Agent] = []
    for value in vars(module).values():
        if isinstance(value, Agent) and all(value is not a for a in found):
            found.append(value)
    return found


def _carried(app: Any, prefix: str = "", depth: int = 0) -> tuple[Agent, str, str] | None:
    """The agent an app serves, where, and how it was found; None when it serves none."""
    if isinstance(app, AgentMiddleware):
        return app.agent, prefix, f"agent.asgi() mounted at {prefix!r}" if prefix else "AgentMiddleware"
    for middleware in getattr(app, "user_middleware", None) or ():
        cls = getattr(middleware, "cls", None)
        if isinstance(cls, type) and issubclass(cls, AgentMiddleware):
            agent = (getattr(middleware, "kwargs", None) or {}).get("agent")
            if agent is None:
                agent = next((a for a in getattr(middleware, "args", ()) if isinstance(a, Agent)), None)
            if isinstance(agent, Agent):
                return agent, prefix, f"app.add_middleware(AgentMiddleware) on {type(app).__name__}"
    if depth > 8:
        return None
    for route in getattr(app, "routes", None) or ():
        endpoint = getattr(route, "endpoint", None)
        owner = getattr(endpoint, "agent", None)
        if isinstance(owner, Agent) and getattr(route, "path", "").endswith(owner.mcp_path):
            return owner, prefix + route.path[: -len(owner.mcp_path)], "agent.routes() in the app's routes"
        nested = getattr(route, "app", None) or getattr(route, "original_router", None)
        if nested is not None and nested is not app and endpoint is None:
            context = getattr(route, "include_context", None)
            step = getattr(context, "prefix", "") if context is not None else getattr(route, "path", "")
            found = _carried(nested, prefix + (step or ""), depth + 1)
            if found is not None:
                return found
    return None


def _from_object(value: Any, spec: str, module: Any) -> Target:
    if isinstance(value, tuple):
        agents = [v for v in value if isinstance(v, Agent)]
        apps = [v for v in value if not isinstance(v, Agent) and callable(v)]
        if apps:
            target = _from_object(apps[0], spec, module)
            if agents and target.agent is not agents[0]:
                target.notes.append("the app carries another agent than the one returned beside it")
            return target
        if agents:
            return _from_object(agents[0], spec, module)
        raise TargetError(f"{spec} returned {value!r}: neither an agent nor an app")
    if isinstance(value, Agent):
        return Target(spec, value, value.asgi(), how="an Agent, served alone (agent.asgi())")
    found = _carried(value)
    if found is not None:
        agent, prefix, how = found
        return Target(spec, agent, value, prefix, host=value, how=how)
    if getattr(value, "routes", None) is not None or callable(value):
        agents = _agents_in(module)
        if len(agents) == 1:
            target = Target(
                spec,
                agents[0],
                agents[0].asgi(),
                host=value,
                how="the module's Agent (the app does not serve it)",
            )
            target.notes.append(
                f"{spec} carries no AgentMiddleware; using the module's agent {agents[0].name!r} on its own"
            )
            return target
    raise TargetError(
        f"{spec} is {type(value).__name__}, which carries no agentmw Agent: name an Agent, an app "
        "with AgentMiddleware, or a factory that returns one"
    )


def resolve(spec: str) -> Target:
    """The agent and app that ``spec`` (``module:attr``, or ``module``) names; :class:`TargetError` when none."""
    module_name, _, attr = spec.partition(":")
    if not module_name:
        raise TargetError(f"{spec!r}: expected module:attr, such as examples.fastapi_app.main:app")
    module = _import(module_name)
    if not attr:
        agents = _agents_in(module)
        if len(agents) != 1:
            raise TargetError(
                f"{module_name} holds {len(agents)} Agent objects; name one: {module_name}:ATTR"
            )
        host = getattr(module, "app", None)
        if host is not None:
            found = _carried(host)
            if found is not None and found[0] is agents[0]:
                return _from_object(host, spec, module)
        return _from_object(agents[0], spec, module)
    value: Any = module
    for part in attr.split("."):
        try:
            value = getattr(value, part)
        except AttributeError:
            raise TargetError(f"{module_name} has no attribute {attr!r}") from None
    if _is_factory(value):
        try:
            value = value()
            if inspect.isawaitable(value):
                value = asyncio.run(_awaited(value))
        except Exception as exc:
            raise TargetError(f"the factory {spec} failed: {_described(exc)}") from exc
    return _from_object(value, spec, module)


async def _awaited(value: Any) -> Any:
    return await value
