"""google-adk's ``RemoteA2aAgent`` as the root agent of an ADK ``Runner``: no model, the agent is remote.

Run by the ADK venv's python (``.deps/adk``, made by scripts/setup-tools). Reads ``{"card": <url>, "turns":
[<text>, ...]}`` on stdin, sends each turn as a user message in one ADK session (text only, as ADK does),
and prints one JSON object: for each turn, the events ADK made of the remote agent's answers (author, text,
the A2A task and context ids ADK recorded, whether ADK asks the user for input, partial or not), the remote
agent's events the session kept (what the next turn, or a model reading the session, sees), and the ADK
artifacts saved.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from google.adk.agents.remote_a2a_agent import RemoteA2aAgent
from google.adk.artifacts import InMemoryArtifactService
from google.adk.runners import Runner
from google.adk.sessions import InMemorySessionService
from google.genai import types


def describe(event: Any) -> dict[str, Any]:
    parts = (event.content.parts or []) if event.content else []
    meta = event.custom_metadata or {}
    return {
        "author": event.author,
        "id": event.id,
        "partial": bool(event.partial),
        "text": "".join(p.text or "" for p in parts if not getattr(p, "thought", False)),
        "calls": [
            {"name": p.function_call.name, "args": p.function_call.args} for p in parts if p.function_call
        ],
        "task_id": meta.get("a2a:task_id"),
        "context_id": meta.get("a2a:context_id"),
        "meta": {k: v for k, v in meta.items() if isinstance(v, (str, int, float, bool)) or v is None},
        "error": event.error_message or event.error_code,
    }


async def main() -> None:
    request = json.load(sys.stdin)
    agent = RemoteA2aAgent(name="remote", agent_card=request["card"], timeout=request.get("timeout", 30))
    sessions = InMemorySessionService()
    artifacts = InMemoryArtifactService()
    runner = Runner(app_name="tp", agent=agent, session_service=sessions, artifact_service=artifacts)
    session = await sessions.create_session(app_name="tp", user_id="u")
    turns = []
    for text in request["turns"]:
        message = types.Content(role="user", parts=[types.Part(text=text)])
        events = [
            describe(e)
            async for e in runner.run_async(user_id="u", session_id=session.id, new_message=message)
        ]
        turns.append(events)
    keys = await artifacts.list_artifact_keys(app_name="tp", user_id="u", session_id=session.id)
    kept = await sessions.get_session(app_name="tp", user_id="u", session_id=session.id)
    history = [describe(e) for e in (kept.events if kept else []) if e.author != "user"]
    print(json.dumps({"turns": turns, "artifacts": keys, "session": history}, default=str))


asyncio.run(main())
