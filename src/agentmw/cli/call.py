"""``agentmw call``: run one capability in-process, through the real pipeline, over the face a client would use.

The request goes to the target's ASGI app (the host app and its middleware, or ``agent.asgi()``) at the path
the agent is mounted at, exactly as a client's would; only the socket is missing.
"""

from __future__ import annotations

import asyncio
import importlib.util
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..mcp.tasks import EXTENSION
from ..testing import A2ACallError, A2ATestClient, AguiHttpError, AguiTestClient, McpError, McpTestClient
from .progress import Progress
from .target import Target

__all__ = ["EXIT_FAILED", "EXIT_NEEDS_INPUT", "CallResult", "call", "default_protocol"]

EXIT_FAILED = 1  # the capability failed, was rejected or cancelled
EXIT_NEEDS_INPUT = 3  # it asked a question (or an approval): nobody here can answer it
ANSWERS_LATER: dict[str, dict[str, Any]] = {"elicitation": {}, "sampling": {}, "roots": {}}
"""What a call of a task tool declares: its questions park the task (exit 3, the task shows them)."""


@dataclass
class CallResult:
    output: Any
    exit_code: int = 0


def default_protocol(target: Target, name: str) -> str:
    agent = target.agent
    if name in agent.tools or name in agent.prompts or agent.find_resource(name) is not None:
        return "mcp"
    if name in agent.skills:
        return "a2a"
    return "mcp"


def _progress_text(params: Mapping[str, Any]) -> str:
    done, total, message = params.get("progress"), params.get("total"), params.get("message") or ""
    count = f"{done:g}/{total:g}" if total else (f"{done:g}" if done is not None else "")
    return f"{message} ({count})" if message and count else message or count


async def _mcp(
    target: Target, name: str, arguments: Any, headers: Mapping[str, str], progress: Progress
) -> CallResult:
    agent = target.agent
    # A plain call declares nothing it cannot answer: a gate then gives an out-of-band approval id (which
    # someone can act on), and a question is refused as needing a capability (exit 3 all the same). A tool that
    # runs only as a task is called as one, and polled here until it ends or parks on its questions.
    capabilities: dict[str, Any] = {}
    tool = agent.tools.get(name)
    if tool is not None and tool.task_support == "required":
        capabilities = {**ANSWERS_LATER, "extensions": {EXTENSION: {}}}
    client = McpTestClient(
        target.app, path=target.path(agent.mcp_path), headers=headers, capabilities=capabilities
    )

    def notified(message: dict[str, Any]) -> None:
        params = message.get("params") or {}
        if message.get("method") == "notifications/progress":
            progress.update(_progress_text(params))
        elif message.get("method") == "notifications/message":
            progress.update(str(params.get("data", "")))

    try:
        if name in agent.tools:
            result = await client.request(
                "tools/call",
                {"name": name, "arguments": arguments, "_meta": {"progressToken": "agentmw-cli"}},
                on_notification=notified,
            )
            if result.get("resultType") == "task":
                return await _until_settled(client, result, progress)
            meta = result.get("_meta") or {}
            asked = (
                meta.get("agentmw/inputRequests")
                or meta.get("agentmw/approval")
                or result.get("inputRequests")
            )
            if result.get("resultType") == "input_required" or asked:  # a question, or an approval to decide
                return CallResult(result, EXIT_NEEDS_INPUT)
            return CallResult(result, EXIT_FAILED if result.get("isError") else 0)
        if name in agent.prompts:
            return CallResult(
                await client.request(
                    "prompts/get", {"name": name, "arguments": arguments}, on_notification=notified
                )
            )
        if agent.find_resource(name) is not None:
            return CallResult(await client.request("resources/read", {"uri": name}, on_notification=notified))
    except McpError as exc:
        needs = (exc.data or {}).get("requiredCapabilities") if isinstance(exc.data, dict) else None
        asks = isinstance(needs, dict) and bool(
            set(needs) & set(ANSWERS_LATER)
        )  # it asked the caller something
        return CallResult(
            {"error": {"code": exc.code, "message": exc.message, "data": exc.data}},
            EXIT_NEEDS_INPUT if asks else EXIT_FAILED,
        )
    raise LookupError(f"no tool, prompt or resource {name!r} is served over MCP")


async def _until_settled(client: McpTestClient, task: dict[str, Any], progress: Progress) -> CallResult:
    """Poll an MCP task (2026) until it ends or waits for input; its status message is the progress."""
    while task.get("status") == "working":
        await asyncio.sleep(min(max(task.get("pollIntervalMs") or 500, 50), 1000) / 1000)
        task = await client.request("tasks/get", {"taskId": task["taskId"]})
        if task.get("statusMessage"):
            progress.update(task["statusMessage"])
    status = task.get("status")
    if status == "input_required" and "inputRequests" not in task:
        # the task's creation says only that it waits; tasks/get names what it asks
        task = await client.request("tasks/get", {"taskId": task["taskId"]})
    if status == "completed":
        return CallResult(task, EXIT_FAILED if (task.get("result") or {}).get("isError") else 0)
    return CallResult(task, EXIT_NEEDS_INPUT if status == "input_required" else EXIT_FAILED)


def _message_arguments(arguments: Any) -> dict[str, Any]:
    return {"text": arguments} if isinstance(arguments, str) else {"data": arguments}


async def _a2a(
    target: Target, name: str, arguments: Any, headers: Mapping[str, str], progress: Progress
) -> CallResult:
    agent = target.agent
    tool: str | None = None
    if name in agent.skills:
        skill = name
    else:
        grouping = next((s.name for s in agent.skills.values() if name in s.groups), None)
        if grouping is None:
            raise LookupError(
                f"no skill {name!r} (nor a skill that groups a tool {name!r}) is served over A2A"
            )
        skill, tool = grouping, name
    validate = (
        importlib.util.find_spec("a2a") is not None
    )  # check events with a2a-sdk's models when it is there
    client = A2ATestClient(target.app, path=target.path(agent.a2a_path), headers=headers, validate=validate)
    task: dict[str, Any] | None = None
    try:
        async with client.stream(skill=skill, tool=tool, **_message_arguments(arguments)) as live:
            async for event in live:
                if "message" in event:
                    return CallResult(event)
                if "task" in event:
                    task = event["task"]
                update = event.get("statusUpdate")
                if update:
                    text = " ".join(
                        p.get("text", "") for p in (update["status"].get("message") or {}).get("parts", [])
                    )
                    progress.update(
                        f"{update['status']['state'].removeprefix('TASK_STATE_').lower()} {text}".strip()
                    )
        if task is None:
            return CallResult({"events": live.events}, EXIT_FAILED)
        final = await client.get(task["id"], history_length=0)  # the outcome; the history is the events
    except A2ACallError as exc:
        return CallResult(
            {"error": {"code": exc.code, "message": exc.message, "data": exc.data}}, EXIT_FAILED
        )
    state = final["status"]["state"]
    code = (
        0
        if state == "TASK_STATE_COMPLETED"
        else EXIT_NEEDS_INPUT
        if state in ("TASK_STATE_INPUT_REQUIRED", "TASK_STATE_AUTH_REQUIRED")
        else EXIT_FAILED
    )
    return CallResult({"task": final}, code)


async def _agui(
    target: Target, name: str, arguments: Any, headers: Mapping[str, str], progress: Progress, events: bool
) -> CallResult:
    agent = target.agent
    if name not in agent.skills:
        raise LookupError(f"no skill {name!r} is served over AG-UI")
    client = AguiTestClient(target.app, path=target.path(agent.agui_path), headers=headers)
    text = arguments if isinstance(arguments, str) else None
    options: dict[str, Any] = {} if text is not None else {"arguments": arguments}
    try:
        async with client.stream(name, text, **options) as live:
            async for event in live:
                kind = event["type"]
                if kind == "STEP_STARTED":
                    progress.update(f"step {event.get('stepName', '')}")
                elif kind == "ACTIVITY_SNAPSHOT" and event.get("activityType") == "progress":
                    progress.update(_progress_text(event.get("content") or {}))
                elif kind == "TOOL_CALL_START":
                    progress.update(f"calling {event.get('toolCallName', '')}")
    except AguiHttpError as exc:
        return CallResult({"error": {"status": exc.status, "detail": exc.detail}}, EXIT_FAILED)
    run = live.run
    summary: dict[str, Any] = {
        "threadId": run.thread_id,
        "runId": run.run_id,
        "outcome": run.outcome,
        "text": run.text,
        "result": run.result,
        "state": run.state,
    }
    if run.interrupts:
        summary["interrupts"] = run.interrupts
    if run.error:
        summary["error"] = run.error
    if events:
        summary["events"] = run.events
    code = EXIT_FAILED if run.error else EXIT_NEEDS_INPUT if run.interrupts else 0
    return CallResult(summary, code)


async def call(
    target: Target,
    name: str,
    arguments: Any,
    *,
    protocol: str | None = None,
    headers: Mapping[str, str] | None = None,
    events: bool = False,
    progress: Progress,
) -> CallResult:
    """Run ``name`` with ``arguments`` (a JSON object; a string is a text message on A2A and AG-UI)."""
    protocol = protocol or default_protocol(target, name)
    headers = dict(headers or {})
    if protocol == "mcp":
        if not isinstance(arguments, dict):
            raise ValueError('MCP arguments are a JSON object, such as \'{"query": "laptop"}\'')
        return await _mcp(target, name, arguments, headers, progress)
    if protocol == "a2a":
        return await _a2a(target, name, arguments, headers, progress)
    if protocol == "agui":
        return await _agui(target, name, arguments, headers, progress, events)
    raise ValueError(f"unknown protocol {protocol!r}")
