"""Translate core shapes to MCP shapes: capability descriptors, content blocks, results."""

from __future__ import annotations

import base64
from typing import Any

from .._transport import to_json_text
from ..capability import Capability
from ..content import Audio, EmbeddedResource, Image, PromptMessage, ResourceLink, Text
from ..context import Ask, InputRequest, ListRoots, Sample

__all__ = [
    "content_block",
    "input_request",
    "prompt_descriptor",
    "prompt_messages",
    "resource_contents",
    "resource_descriptor",
    "template_descriptor",
    "tool_descriptor",
]


def tool_descriptor(cap: Capability) -> dict[str, Any]:
    tool: dict[str, Any] = {"name": cap.name, "inputSchema": cap.input_schema}
    if cap.title:
        tool["title"] = cap.title
    if cap.contract:
        tool["description"] = cap.contract
    if cap.output_schema is not None:
        tool["outputSchema"] = cap.output_schema
    if cap.annotations:
        tool["annotations"] = cap.annotations
    if cap.task_support is not None:  # the tasks extension (docs/mcp.md, "Tasks")
        tool["execution"] = {"taskSupport": cap.task_support}
    if cap.ui is not None:  # MCP Apps (docs/mcp-apps.md); the flat key is the one hosts before _meta.ui read
        tool["_meta"] = {"ui": cap.ui, "ui/resourceUri": cap.ui["resourceUri"]}
    return tool


def _described(cap: Capability, out: dict[str, Any]) -> dict[str, Any]:
    for key, value in (("title", cap.title), ("description", cap.contract), ("mimeType", cap.mime_type)):
        if value:
            out[key] = value
    if (
        cap.ui
    ):  # a ui:// resource's CSP, permissions, ...: hosts read the contents' copy, this one as a fallback
        out["_meta"] = {"ui": cap.ui}
    return out


def resource_descriptor(cap: Capability) -> dict[str, Any]:
    return _described(cap, {"uri": cap.uri, "name": cap.name})


def template_descriptor(cap: Capability) -> dict[str, Any]:
    return _described(cap, {"uriTemplate": cap.uri_template, "name": cap.name})


def prompt_descriptor(cap: Capability) -> dict[str, Any]:
    arguments = []
    model = cap.params.input_model
    if model is not None:
        for name, info in model.model_fields.items():
            arg: dict[str, Any] = {"name": name, "required": info.is_required()}
            if info.description:
                arg["description"] = info.description
            arguments.append(arg)
    out: dict[str, Any] = {"name": cap.name, "arguments": arguments}
    if cap.title:
        out["title"] = cap.title
    if cap.contract:
        out["description"] = cap.contract
    return out


def content_block(part: Any) -> dict[str, Any]:
    if isinstance(part, Text):
        return {"type": "text", "text": part.text}
    if isinstance(part, str):
        return {"type": "text", "text": part}
    if isinstance(part, Image):
        return {"type": "image", "data": part.base64, "mimeType": part.mime_type}
    if isinstance(part, Audio):
        return {"type": "audio", "data": part.base64, "mimeType": part.mime_type}
    if isinstance(part, ResourceLink):
        link: dict[str, Any] = {"type": "resource_link", "uri": part.uri, "name": part.name}
        if part.mime_type:
            link["mimeType"] = part.mime_type
        if part.description:
            link["description"] = part.description
        return link
    if isinstance(part, EmbeddedResource):
        return {"type": "resource", "resource": embedded_contents(part)}
    raise TypeError(f"cannot render {type(part).__name__} as MCP content")


def embedded_contents(part: EmbeddedResource) -> dict[str, Any]:
    out: dict[str, Any] = {"uri": part.uri}
    if part.mime_type:
        out["mimeType"] = part.mime_type
    if part.blob is not None:
        out["blob"] = part.blob if isinstance(part.blob, str) else base64.b64encode(part.blob).decode("ascii")
    else:
        out["text"] = part.text or ""
    return out


def resource_contents(cap: Capability, uri: str, value: Any) -> list[dict[str, Any]]:
    """A resource function's return value as ``ReadResourceResult.contents``."""
    items = value if isinstance(value, list) else [value]
    contents = []
    for item in items:
        if isinstance(item, EmbeddedResource):
            contents.append(embedded_contents(item))
            continue
        entry: dict[str, Any] = {"uri": uri}
        if cap.mime_type:
            entry["mimeType"] = cap.mime_type
        if cap.ui:  # an MCP App's UI: the host builds the iframe's CSP and permissions from this copy
            entry["_meta"] = {"ui": cap.ui}
        if isinstance(item, (bytes, bytearray)):
            entry["blob"] = base64.b64encode(item).decode("ascii")
        elif isinstance(item, str):
            entry["text"] = item
        else:
            entry["text"] = to_json_text(item)
            entry.setdefault("mimeType", "application/json")
        contents.append(entry)
    return contents


def prompt_messages(value: Any) -> list[dict[str, Any]]:
    items = value if isinstance(value, list) else [value]
    messages = []
    for item in items:
        if isinstance(item, PromptMessage):
            content = item.content if not isinstance(item.content, str) else Text(item.content)
            messages.append({"role": item.role, "content": content_block(content)})
        else:
            messages.append(
                {"role": "user", "content": content_block(item if not isinstance(item, str) else Text(item))}
            )
    return messages


def input_request(request: InputRequest) -> dict[str, Any]:
    """A core input request as the MCP client request that answers it."""
    if isinstance(request, Ask):
        return {
            "method": "elicitation/create",
            "params": {"message": request.message, "requestedSchema": dict(request.schema)},
        }
    if isinstance(request, Sample):
        params: dict[str, Any] = {
            "messages": [{"role": "user", "content": {"type": "text", "text": request.prompt}}],
            "maxTokens": request.max_tokens,
        }
        if request.system_prompt:
            params["systemPrompt"] = request.system_prompt
        return {"method": "sampling/createMessage", "params": params}
    if isinstance(request, ListRoots):
        return {"method": "roots/list", "params": {}}
    raise TypeError(type(request).__name__)
