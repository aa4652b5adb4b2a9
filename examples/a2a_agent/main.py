"""A conformance-style A2A agent: one skill whose answer is chosen by the first word of the message's text.

Run it with ``uvicorn examples.a2a_agent.main:app --port 8001`` and talk to it with any A2A client
(``a2a-sdk`` 1.3.0: see tests/test_a2a_messages.py). Each word shows one behaviour (docs/a2a.md):

=============  =====================================================================================
``message``    a message-only reply: no task is created
``status``     the task completes with a status message and no artifact (the skill returns ``None``)
``artifacts``  three artifacts: text, a file (bytes, with a filename and media type) and a link, data
``file``       every file part it received, sent back reversed as a file named ``reversed-<name>``
``data``       the data parts it received, sent back in a data artifact
``say``        ``ctx.say`` twice: two WORKING status updates carrying the text, then an answer
``stream``     one artifact in chunks (``append`` / ``lastChunk``), slowly enough to subscribe to
``ask``        asks for a name (INPUT_REQUIRED); the follow-up on the same task is in ``ctx.messages``
(other)        a summary of what it received
=============  =====================================================================================
"""

from __future__ import annotations

import asyncio
from typing import Literal

from starlette.applications import Starlette

from agentmw import Agent, AgentMiddleware, Artifact, Context, Data, File, Message, skill
from agentmw.a2a import A2ASettings
from agentmw.state import State

CHUNKS = ("The quick ", "brown fox ", "jumps over ", "the lazy dog.")


@skill(
    read_only=True,  # it changes nothing, so a repeated messageId is a new task (what the A2A TCK expects)
    tags=("conformance",),
    examples=("message hello", "artifacts", "stream", "ask"),
    input_modes=("text/plain", "application/json", "application/octet-stream"),
    output_modes=("text/plain", "application/json", "text/csv"),
)
async def conform(
    message: Message, files: list[File], ctx: Context
) -> Message | Artifact | list[Artifact] | None:
    """Show one A2A behaviour, chosen by the first word of the text.

    Summary:
        Demonstrates message replies, artifacts, files, data, streaming and status updates.
    """
    words = message.text.split()
    word, rest = (words[0].lower(), " ".join(words[1:])) if words else ("", "")
    if word == "message":
        return Message(f"pong: {rest}" if rest else "pong")
    if word == "status":
        return None
    if word == "artifacts":
        return [
            Artifact("A plain-text summary.", name="summary", description="Text"),
            Artifact(
                [
                    File(data=b"sku,qty\nL-14,2\n", name="order.csv", media_type="text/csv"),
                    File(
                        url="https://example.com/catalog.pdf",
                        name="catalog.pdf",
                        media_type="application/pdf",
                    ),
                ],
                name="files",
                description="A file with its bytes, and a link",
            ),
            Artifact(Data({"total": 3, "currency": "EUR"}), name="totals", description="Data"),
        ]
    if word == "file":
        if not files:
            return Message("Send a file part with the word 'file'.")
        return [
            Artifact(
                File(
                    data=(f.data or b"")[::-1],
                    name=f"reversed-{f.name or 'file'}",
                    media_type=f.media_type or "application/octet-stream",
                ),
                name=f"reversed-{f.name or 'file'}",
                description="The file, reversed",
            )
            for f in files
        ]
    if word == "data":
        return Artifact(
            Data({"received": [p.data for p in message.data_parts]}),
            name="data",
            description="The data parts it received",
        )
    if word == "say":
        await ctx.say("Looking at it.")
        await ctx.say("Almost done.")
        return Artifact("Said twice, then answered.", name="answer")
    if word == "stream":
        delay = float(message.data.get("delay", 0.2))
        await asyncio.sleep(delay)  # time for a client to subscribe before the first chunk
        for index, chunk in enumerate(CHUNKS):
            await ctx.artifact(
                Artifact(
                    chunk,
                    name="story",
                    artifact_id="story",
                    append=index > 0,
                    last_chunk=index == len(CHUNKS) - 1,
                )
            )
            await asyncio.sleep(delay / 4)
        return None
    if word == "ask":
        answer = await ctx.ask(
            "What is your name?", {"type": "object", "properties": {"name": {"type": "string"}}}
        )
        follow_ups = ctx.messages[1:]
        name = (answer.content or {}).get("name", "?")
        return Message(
            f"Hello, {name}. This task has {len(ctx.messages)} messages; the last said "
            f"{follow_ups[-1].text or follow_ups[-1].data!r}."
        )
    return Message(
        f"Received {len(message.parts)} parts: text {message.text!r}, {len(files)} files, "
        f"{len(message.data_parts)} data parts; metadata {dict(message.metadata)}."
    )


def build(
    store: State | None = None, *, dedupe_message_ids: bool | Literal["side-effects"] = "side-effects"
) -> tuple[Agent, Starlette]:
    agent = Agent(
        "a2a-conformance",
        "1.0.0",
        include=[conform],
        store=store,
        a2a=A2ASettings(
            description="Shows each A2A behaviour; the first word of the text picks one.",
            push=None,
            dedupe_message_ids=dedupe_message_ids,
        ),
    )
    app = Starlette()
    app.add_middleware(AgentMiddleware, agent=agent)
    return agent, app


agent, app = build()
