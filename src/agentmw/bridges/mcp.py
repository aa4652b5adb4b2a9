"""A remote MCP server as capabilities of the agent: its tools, resources and prompts (docs/bridges.md).

The peer is spoken to with the official ``mcp`` client (the ``bridge-mcp`` extra), pinned to one revision:
``2025-11-25`` (the ``initialize`` handshake) or ``2026-07-28`` (stateless, ``server/discover``). Connections are
kept between calls (``_mcp_connections``): one client serves every call at 2026-07-28, a session serves one call at
a time at 2025-11-25. Every call's remote questions (elicitation, ``input_required``), progress and log messages
are routed to that call alone, and nothing is shared between peers.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import json
import keyword
import logging
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pydantic
from pydantic import BaseModel, ConfigDict

from ..capability import _TEMPLATE_VAR, Capability, CapabilityKind, OutputPlan, ParamPlan, build_capability
from ..content import Audio, EmbeddedResource, Image, PromptMessage, ResourceLink, Text
from ..context import ClientCapabilityMissing, Context
from ..errors import NeedsInput, Permanent, Rejected, Retryable
from ..messages import Artifact, Data
from ..safety.framing import escape
from ._mcp_connections import OUTBOUND, Connections, Relay
from ._mcp_transport import TOO_LARGE, UNSENT, own_error, transport
from ._peer import BridgeError, Peer, ServiceAccount, VersionMismatch, safe_name

if TYPE_CHECKING:
    from mcp import Client

__all__ = ["DEFAULT_MAX_EVENT_BYTES", "HANDSHAKE_REVISION", "MCP_REVISIONS", "STATELESS_REVISION", "McpPeer"]

logger = logging.getLogger("agentmw.bridges")

HANDSHAKE_REVISION = "2025-11-25"
"""The handshake-era MCP revision a bridge can pin (``initialize``, sessions)."""
STATELESS_REVISION = "2026-07-28"
"""The stateless MCP revision a bridge can pin (``server/discover``, no sessions)."""
MCP_REVISIONS = (HANDSHAKE_REVISION, STATELESS_REVISION)
"""Every revision an :class:`McpPeer` can pin. Constants: never "latest"."""


class _Unset(str):
    """The default of an argument the caller left out: never sent to the peer."""


_UNSET = _Unset("")
_JSON_TYPES = ("application/json",)
# JSON Schema keywords whose values are data (a default, examples), not text about the schema: left as they are
_SCHEMA_DATA = frozenset({"default", "examples", "const", "enum"})
_PARAMETER_BUDGET = 500
DEFAULT_MAX_EVENT_BYTES = 1024 * 1024
"""The largest server-sent event an :class:`McpPeer` reads by default (the ``mcp`` client's own limit)."""
_CANCEL_BOUND_SECONDS = 2.0  # how long a cancelled call waits for its notifications/cancelled to go out
_NO_LOG_CHANNEL = frozenset({"a2a", "agui"})  # the faces whose callers see no log messages, only progress
# Hint values that ask clients for *less* caution. A peer's word is not enough for them (the MCP spec: hints are
# untrusted unless the server is): re-served by this agent they would read as its own word, and readOnlyHint
# would switch off idempotency keys. Values that ask for more caution are kept.
_REASSURING = {"readOnlyHint": True, "idempotentHint": True, "destructiveHint": False, "openWorldHint": False}


def _is_json(mime: str | None) -> bool:
    return bool(mime) and (mime in _JSON_TYPES or str(mime).endswith("+json"))


class _Arguments(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)


def _field_name(name: str, index: int) -> str:
    ok = (
        name.isidentifier()
        and not keyword.iskeyword(name)
        and not name.startswith("_")
        and not hasattr(BaseModel, name)
        and name != "ctx"
    )
    return name if ok else f"arg{index}"


def _arguments_model(
    model_name: str, properties: Mapping[str, Any], required: Any
) -> tuple[type[BaseModel], dict[str, str]]:
    """A model that checks which arguments are present (their types are the peer's to check) and maps the
    Python field names back to the peer's argument names."""
    fields: dict[str, Any] = {}
    names: dict[str, str] = {}
    required = set(required or ())
    for index, remote in enumerate(properties):
        field = _field_name(remote, index)
        names[field] = remote
        description = (
            (properties[remote] or {}).get("description") if isinstance(properties[remote], dict) else None
        )
        default = ... if remote in required else _UNSET
        fields[field] = (
            Any,
            pydantic.Field(
                default,
                alias=remote if field != remote else None,
                description=description if isinstance(description, str) else None,
            ),
        )
    model = pydantic.create_model(
        safe_name(model_name).replace(".", "_").replace("-", "_") + "_arguments",
        __base__=_Arguments,
        **fields,
    )
    return model, names


def _outbound_auth() -> Any:
    """httpx2 auth that adds the current call's outbound headers (set per call in a context variable), so one
    connection pool serves every caller without one caller's headers reaching another's request."""
    import httpx2

    class Outbound(httpx2.Auth):
        def auth_flow(self, request: Any) -> Any:
            for key, value in OUTBOUND.get({}).items():
                request.headers[key] = value
            yield request

    return Outbound()


class McpPeer(Peer):
    """A remote MCP server whose tools, resources and prompts become capabilities of the agent.

    Each remote tool becomes a tool, and a skill too (A2A card, AG-UI agent) unless it is grouped; each static
    resource a resource, each resource template a template; each prompt a prompt. Connections are kept between
    calls (``pool_size``), and each call's traffic stays its own.

    Args:
        url: the MCP endpoint (ending ``/mcp`` usually).
        trust_hints: re-serve the peer's tool hints as they are. By default a hint that asks for less caution
            (``readOnlyHint`` or ``idempotentHint`` true, ``destructiveHint`` or ``openWorldHint`` false) is
            dropped: the peer's word is not the agent's.
        revision: the MCP revision the peer must speak: ``"2025-11-25"`` or ``"2026-07-28"``
            (:data:`MCP_REVISIONS`). Checked at start; there is no fallback to another one.
        group: ``{"skill_id": ["tool_a", "tool_b"]}``: serve these remote tools as one skill (schedulers think
            in business capabilities, not endpoints); an A2A message names the tool in its metadata
            (``{"skill": "skill_id", "tool": "tool_a"}``) or as the data part ``{"tool": ..., "arguments": ...}``.
        tools: the remote tool names to bridge (default: all).
        skills: serve the ungrouped tools as skills too (default True).
        resources, prompts: bridge the peer's resources (static ones and templates) and its prompts (default
            True).
        pool_size: connections kept open between calls. At 2025-11-25 the most idle sessions kept (a session
            serves one call at a time; more calls at once open more, closed after); at 2026-07-28 any value
            above 0 keeps the one client every call shares. 0: every call opens its own connection.
        pool_idle_seconds: a kept connection unused this long is closed.
        max_event_bytes: the largest server-sent event read from the peer, in bytes (default 1 MiB, the ``mcp``
            client's own limit; None: no limit). In the handshake era a tool's result comes as one event, so a
            larger result fails with an error naming this option. It bounds what one answer can make the agent
            hold in memory: raise it for a peer you trust to send large results.
        Every other argument is :class:`~agentmw.bridges.Peer`'s.
    """

    protocol = "MCP"

    def __init__(
        self,
        url: str,
        revision: str,
        *,
        group: Mapping[str, list[str]] | None = None,
        tools: list[str] | None = None,
        skills: bool = True,
        resources: bool = True,
        prompts: bool = True,
        trust_hints: bool = False,
        pool_size: int = 4,
        pool_idle_seconds: float = 60.0,
        max_event_bytes: int | None = DEFAULT_MAX_EVENT_BYTES,
        **options: Any,
    ) -> None:
        super().__init__(url, **options)
        if max_event_bytes is not None and max_event_bytes <= 0:
            raise ValueError("max_event_bytes is more than 0, or None for no limit")
        self.max_event_bytes = max_event_bytes
        if revision not in MCP_REVISIONS:
            raise ValueError(f"McpPeer pins one of {list(MCP_REVISIONS)}, not {revision!r}")
        if pool_size < 0 or pool_idle_seconds <= 0:
            raise ValueError("pool_size is 0 or more, pool_idle_seconds more than 0")
        self.revision = revision
        self.group = {k: list(v) for k, v in (group or {}).items()}
        self.tools = list(tools) if tools is not None else None
        self.serve_skills = skills
        self.serve_resources = resources
        self.serve_prompts = prompts
        self.trust_hints = trust_hints
        self.server_info: dict[str, Any] = {}
        self._discover: Any = None
        self._http: Any = None
        self._http_loop: Any = None
        self._text_tools: set[str] = set()  # tools whose structured content is only a wrapped string
        # tools the peer lists as read-only or idempotent: a call of one cut off before its answer is re-issued
        self._repeatable: set[str] = set()
        self.connections = Connections(
            self._open,
            shared=revision == STATELESS_REVISION,
            size=pool_size,
            idle_seconds=pool_idle_seconds,
            spoils=_spoils,
        )

    async def aclose(self) -> None:
        """Close the connections kept open to the peer (they also close themselves when idle), and the HTTP
        client they share (made again by the next call)."""
        await self.connections.aclose()
        if self._http is not None and self._http_loop is asyncio.get_running_loop():
            http, self._http = self._http, None
            await http.aclose()

    # --- connections ---------------------------------------------------------------------------------
    def _http_client(self) -> Any:
        import httpx2

        loop = asyncio.get_running_loop()
        if self._http is None or self._http_loop is not loop:
            self._http = httpx2.AsyncClient(
                auth=_outbound_auth(),
                follow_redirects=False,
                timeout=httpx2.Timeout(self.timeout, read=max(self.timeout, 300.0)),
            )
            self._http_loop = loop
        return self._http

    @asynccontextmanager
    async def _open(self, headers: Mapping[str, str], callbacks: dict[str, Any]) -> AsyncIterator[Client]:
        """One connection to the peer at the pinned revision (run in the connection's own task, whose context
        holds the credential's ``headers``)."""
        from mcp import Client

        stateless = self.revision == STATELESS_REVISION
        client = Client(
            transport(self.url, self._http_client(), self.max_event_bytes),
            mode=STATELESS_REVISION if stateless else "legacy",
            prior_discover=self._discover,
            cache=None,
            read_timeout_seconds=self.timeout,
            log_level="info" if stateless else None,
            **callbacks,
        )
        try:
            await client.__aenter__()
        except RuntimeError as exc:  # the mcp client refuses a revision it does not know at all
            raise VersionMismatch(self.name or self.url, "MCP", self.revision, str(exc)) from exc
        except Exception as exc:
            refused = _unsupported_version(exc)
            if refused is not None:  # -32022: the peer names the revisions it speaks
                raise VersionMismatch(self.name or self.url, "MCP", self.revision, refused) from exc
            raise
        try:
            if not stateless and client.protocol_version != self.revision:
                raise VersionMismatch(self.name or self.url, "MCP", self.revision, client.protocol_version)
            yield client
        finally:
            await client.__aexit__(None, None, None)

    async def _start_headers(self) -> dict[str, str]:
        if self.credential is None:
            return {}
        if isinstance(self.credential, ServiceAccount):
            return dict(self.credential.headers)
        found = await self.credential(None, self)
        return dict(found.headers) if isinstance(found, ServiceAccount) else dict(found)

    # --- start ---------------------------------------------------------------------------------------
    async def _connect(self) -> list[Capability]:
        from mcp.shared.exceptions import MCPError

        headers = await self._start_headers()
        try:
            async with self.connections.lease(_key(headers), headers, headers, None) as connection:
                client = connection.client
                if self.revision == STATELESS_REVISION:
                    await self._check_discover(client)
                info = client.server_info
                self.server_info = info.model_dump(mode="json") if info is not None else {}
                if self.name is None:
                    self.name = safe_name(str(self.server_info.get("name") or "") or "mcp")
                capabilities = client.server_capabilities
                tools = await _all(client.list_tools, "tools") if capabilities.tools is not None else []
                tools = [tool for tool in tools if _for_models(tool)]
                resources = (
                    await _all(client.list_resources, "resources")
                    if capabilities.resources is not None and self.serve_resources
                    else []
                )
                templates = (
                    await _all(client.list_resource_templates, "resource_templates")
                    if capabilities.resources is not None and self.serve_resources
                    else []
                )
                prompts = (
                    await _all(client.list_prompts, "prompts")
                    if capabilities.prompts is not None and self.serve_prompts
                    else []
                )
        except (BridgeError, asyncio.CancelledError):
            raise
        except MCPError as exc:
            if own_error(exc) is not None:  # the client's own: no answer from the peer
                raise BridgeError(
                    f"MCP peer at {self.url} could not be reached: {exc.error.message}"
                ) from exc
            raise BridgeError(f"MCP peer at {self.url}: {exc}") from exc
        except Exception as exc:
            raise BridgeError(
                f"MCP peer at {self.url} could not be reached: {type(exc).__name__}: {exc}"
            ) from exc
        return self._build(tools, resources, templates, prompts)

    async def _check_discover(self, client: Client) -> None:
        import mcp_types
        from mcp.shared.exceptions import MCPError

        try:
            raw = await client.session.send_discover(self.revision)
        except MCPError as exc:
            data = exc.error.data if isinstance(exc.error.data, dict) else {}
            offered = (
                data.get("supported") or f"only the handshake era (server/discover answered {exc.error.code})"
            )
            raise VersionMismatch(self.name or self.url, "MCP", self.revision, offered) from exc
        result = mcp_types.DiscoverResult.model_validate(raw)
        if self.revision not in result.supported_versions:
            raise VersionMismatch(
                self.name or self.url, "MCP", self.revision, list(result.supported_versions)
            )
        client.session.adopt(result)
        self._discover = result

    def _build(
        self, tools: list[Any], resources: list[Any], templates: list[Any], prompts: list[Any]
    ) -> list[Capability]:
        by_name = {t.name: t for t in tools}
        chosen = self.tools if self.tools is not None else list(by_name)
        missing = [t for t in chosen if t not in by_name] + [
            t for names in self.group.values() for t in names if t not in by_name
        ]
        if missing:
            raise BridgeError(
                f"MCP peer {self.name!r} has no tool {missing[0]!r}; it lists {sorted(by_name)}"
            )
        grouped = {t for names in self.group.values() for t in names}
        out: list[Capability] = []
        for name in dict.fromkeys([*chosen, *grouped]):
            tool_cap = self._tool(by_name[name])
            out.append(tool_cap)
            if self.serve_skills and name not in grouped:
                out.append(_as_kind(tool_cap, "skill"))
        for skill_id, names in self.group.items():
            out.append(self._group(skill_id, names))
        out.extend(self._resource(r) for r in resources)
        out.extend(c for c in (self._template(t) for t in templates) if c is not None)
        out.extend(self._prompt(p) for p in prompts)
        return out

    def _tool(self, tool: Any) -> Capability:
        remote = tool.name
        schema = dict(tool.input_schema or {"type": "object", "properties": {}})
        declared = schema.get("properties")
        properties: dict[str, Any] = declared if isinstance(declared, dict) else {}
        model, names = _arguments_model(f"{self.name}_{remote}", properties, schema.get("required"))

        async def remote_tool(ctx: Context, **fields: Any) -> Any:
            arguments = {names[k]: v for k, v in fields.items() if k in names and v is not _UNSET}
            return await self.call_tool(ctx, remote, arguments)

        output = tool.output_schema
        # structured data stays data; a result that is only text (an SDK's {"result": "..."} wrapping of a str)
        # is text, and is framed like any other remote text
        if isinstance(output, dict) and _wrapped_text(output):
            self._text_tools.add(remote)
        shown = safe_name(remote)  # the peer's name, as it may appear in the agent's own words
        plan = (
            OutputPlan(mode="object", schema=self._schema(output, f"tool {shown} output"))
            if isinstance(output, dict) and output.get("type") == "object" and not _wrapped_text(output)
            else OutputPlan(mode="content")
        )
        description = self.describe(tool.description or "", f"tool {shown}")
        strings = [f for f, r in names.items() if (properties.get(r) or {}).get("type") == "string"]
        annotations = None
        if tool.annotations is not None:
            hints = tool.annotations.model_dump(by_alias=True, exclude_none=True)
            if hints.get("readOnlyHint") is True or hints.get("idempotentHint") is True:
                # the peer's own word about running its tool twice: enough to re-issue a call it cut off,
                # though not to re-serve as this agent's word (below)
                self._repeatable.add(remote)
            annotations = {
                k: v
                for k, v in hints.items()
                if k.endswith("Hint")
                and (self.trust_hints or k not in _REASSURING or v is not _REASSURING[k])
            } or None
        return Capability(
            kind="tool",
            name=f"{self.prefix}{safe_name(remote)}",
            fn=remote_tool,
            contract=f"The tool {shown!r} of the remote MCP server {self.name}. What the server says of it:\n"
            f"{description}"
            if description
            else f"The tool {shown!r} of the remote MCP server {self.name}.",
            summary=description or f"{shown} (remote MCP server {self.name})",
            params=ParamPlan(
                arg_names=tuple(names),
                context_param="ctx",
                input_model=model,
                input_schema=self._schema(schema, f"tool {shown} parameters"),
            ),
            output=plan,
            is_async=True,
            is_async_gen=False,
            title=escape(tool.title or f"{self.name}: {shown}")[:200],
            annotations=annotations,
            meta={"agentmw/bridge": {"protocol": "MCP", "peer": self.name, "tool": remote}},
            text_parameter=strings[0]
            if len(strings) == 1 and set(schema.get("required") or ()) <= {names[strings[0]]}
            else None,
        )

    def _schema(self, schema: Any, what: str) -> Any:
        """A peer's JSON Schema as served: every ``description`` framed (models read them as they read tool
        descriptions), ``title`` labels left out; the values of data keywords (``default``, ``enum``...) kept."""
        if isinstance(schema, list):
            return [self._schema(item, what) for item in schema]
        if not isinstance(schema, dict):
            return schema
        out: dict[str, Any] = {}
        for key, value in schema.items():
            if key == "description" and isinstance(value, str):
                out[key] = (
                    self.frame(value, what, min(self.description_budget, _PARAMETER_BUDGET))
                    if value
                    else value
                )
            elif key == "title" and isinstance(value, str):
                continue  # a label for people, and a channel for text: the peer's is left out
            elif key in _SCHEMA_DATA:
                out[key] = value
            else:
                out[key] = self._schema(value, what)
        return out

    def _group(self, skill_id: str, tools: list[str]) -> Capability:
        prefixed = [f"{self.prefix}{safe_name(t)}" for t in tools]
        lookup = dict(zip(prefixed, tools, strict=True)) | dict(zip(tools, tools, strict=True))

        async def grouped(ctx: Context, tool: str, arguments: dict[str, Any] | None = None) -> Any:
            remote = lookup.get(tool)
            if remote is None:
                raise Rejected(
                    f"Skill {skill_id!r} groups the tools {prefixed}; {tool!r} is not one of them."
                )
            return await self.call_tool(ctx, remote, dict(arguments or {}))

        cap = build_capability(
            "skill",
            grouped,
            name=f"{self.prefix}{safe_name(skill_id)}",
            contract=f"Groups the tools {prefixed} of the remote MCP server {self.name}: name one "
            "as `tool`, with its `arguments`.",
            summary=f"{skill_id}: {', '.join(tools)} (remote MCP server {self.name})",
            groups=tuple(prefixed),
        )
        cap.params.input_schema["properties"]["tool"]["enum"] = prefixed
        cap.meta["agentmw/bridge"] = {"protocol": "MCP", "peer": self.name, "tools": list(tools)}
        return cap

    def _resource(self, resource: Any) -> Capability:
        uri = str(resource.uri)

        async def remote_resource(ctx: Context) -> Any:
            return await self.read_resource(ctx, uri)

        return build_capability(
            "resource",
            remote_resource,
            name=f"{self.prefix}{safe_name(resource.name or uri)}",
            uri=uri,
            mime_type=resource.mime_type,
            title=escape(resource.title or resource.name or uri)[:200],
            contract=self.describe(resource.description or "", f"resource {uri}"),
        )

    def _template(self, template: Any) -> Capability | None:
        """A remote resource template as a local one: the same URI template; a read expands it with the
        variables matched and reads that URI from the peer. A template in a form the agent's matcher does not
        serve (RFC 6570 beyond ``{var}``, ``{+var}`` and ``{#var}``) is left out."""
        uri_template = str(template.uri_template)
        variables = [m.group(2) for m in _TEMPLATE_VAR.finditer(uri_template)]
        if (
            not variables
            or len(set(variables)) != len(variables)
            or uri_template.count("{") != len(variables)
            or any(keyword.iskeyword(v) or v.startswith("_") or hasattr(BaseModel, v) for v in variables)
        ):
            logger.info(
                "MCP peer %s: the resource template %r is in a form this agent does not serve; left out",
                self.name,
                uri_template[:200],
            )
            return None

        async def remote_template(_bridge_context: Context, **values: str) -> Any:
            return await self.read_resource(
                _bridge_context, _TEMPLATE_VAR.sub(lambda m: str(values.get(m.group(2), "")), uri_template)
            )

        # the template's variables are the function's parameters (build_capability checks and matches them)
        remote_template.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
            [
                inspect.Parameter(
                    "_bridge_context", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=Context
                ),
                *(inspect.Parameter(v, inspect.Parameter.KEYWORD_ONLY, annotation=str) for v in variables),
            ]
        )
        remote_template.__annotations__ = {"_bridge_context": Context, **dict.fromkeys(variables, str)}
        shown = safe_name(template.name or uri_template)
        return build_capability(
            "resource",
            remote_template,
            name=f"{self.prefix}{shown}",
            uri=uri_template,
            mime_type=template.mime_type,
            title=escape(template.title or template.name or uri_template)[:200],
            contract=self.describe(template.description or "", f"resource template {shown}"),
            meta={"agentmw/bridge": {"protocol": "MCP", "peer": self.name, "resourceTemplate": uri_template}},
        )

    def _prompt(self, prompt: Any) -> Capability:
        remote = prompt.name
        arguments = list(prompt.arguments or [])
        properties = {
            a.name: {
                "type": "string",
                **(
                    {
                        "description": self.frame(
                            a.description,
                            f"prompt {safe_name(remote)} argument",
                            min(self.description_budget, _PARAMETER_BUDGET),
                        )
                    }
                    if a.description
                    else {}
                ),
            }
            for a in arguments
        }
        required = [a.name for a in arguments if a.required]
        model, names = _arguments_model(f"{self.name}_{remote}", properties, required)

        async def remote_prompt(ctx: Context, **fields: Any) -> Any:
            given = {names[k]: str(v) for k, v in fields.items() if k in names and v is not _UNSET}
            return await self.get_prompt(ctx, remote, given)

        schema = {"type": "object", "properties": properties, "required": required}
        return Capability(
            kind="prompt",
            name=f"{self.prefix}{safe_name(remote)}",
            fn=remote_prompt,
            contract=self.describe(prompt.description or "", f"prompt {safe_name(remote)}"),
            summary=f"{safe_name(remote)} (remote MCP server {self.name})",
            params=ParamPlan(
                arg_names=tuple(names), context_param="ctx", input_model=model, input_schema=schema
            ),
            output=OutputPlan(mode="content"),
            is_async=True,
            is_async_gen=False,
            title=escape(prompt.title or remote)[:200],
            meta={"agentmw/bridge": {"protocol": "MCP", "peer": self.name, "prompt": remote}},
        )

    # --- calls ---------------------------------------------------------------------------------------
    async def call_tool(self, ctx: Context, tool: str, arguments: dict[str, Any]) -> Any:
        what = f"tool {tool}"
        meta = {"agentmw/idempotencyKey": uuid.uuid4().hex} if self.retries else None
        result = await self._exchange(
            ctx,
            what,
            lambda client, progress: client.call_tool(tool, arguments, progress_callback=progress, meta=meta),
            repeatable=tool in self._repeatable,
        )
        if result.is_error:
            text = "".join(getattr(block, "text", "") for block in result.content) or "(no message)"
            message = f"The tool {tool} of the MCP peer {self.name} failed: {self.frame(text, what)}"
            meta_out = result.meta or {}
            if meta_out.get("agentmw/retryable"):
                raise Retryable(message, retry_after=meta_out.get("agentmw/retryAfter"))
            raise Permanent(message)
        structured = result.structured_content
        if structured is None or tool in self._text_tools:
            return [self._content(block, what) for block in result.content]
        capability = ctx.capability
        if capability is not None and capability.output.mode == "object":
            return structured  # structured data stays data: checked against the tool's output schema
        # a tool without an output schema, or one of a group: the data as a data part (MCP structured content,
        # an A2A data part, AG-UI's run result), with the content that is not its JSON mirror
        mirror = json.dumps(structured, sort_keys=True)
        rest = [
            self._content(block, what)
            for block in result.content
            if not (getattr(block, "type", None) == "text" and _same_json(block.text, mirror))
        ]
        return Artifact((Data(structured, "application/json"), *rest), name="result")

    async def read_resource(self, ctx: Context, uri: str) -> Any:
        what = f"resource {uri}"
        result = await self._exchange(
            ctx, what, lambda client, progress: client.read_resource(uri), repeatable=True
        )
        out = []
        for item in result.contents:
            mime = item.mime_type
            if getattr(item, "blob", None) is not None:
                out.append(EmbeddedResource(str(item.uri), blob=item.blob, mime_type=mime))
            else:
                text = item.text if _is_json(mime) else self.frame(item.text, what)
                out.append(EmbeddedResource(str(item.uri), text=text, mime_type=mime))
        return out

    async def get_prompt(self, ctx: Context, prompt: str, arguments: dict[str, str]) -> Any:
        what = f"prompt {prompt}"
        result = await self._exchange(
            ctx, what, lambda client, progress: client.get_prompt(prompt, arguments), repeatable=True
        )
        return [PromptMessage(m.role, self._content(m.content, what)) for m in result.messages]

    def _content(self, block: Any, what: str) -> Any:
        kind = getattr(block, "type", None)
        if kind == "text":
            return Text(self.frame(block.text, what))
        if kind == "image":
            return Image(block.data, block.mime_type)
        if kind == "audio":
            return Audio(block.data, block.mime_type)
        if kind == "resource_link":
            return ResourceLink(
                str(block.uri),
                escape(block.name)[:200],
                block.mime_type,
                self.describe(block.description or "", what) or None,
            )
        if kind == "resource":
            inner = block.resource
            if getattr(inner, "blob", None) is not None:
                return EmbeddedResource(str(inner.uri), blob=inner.blob, mime_type=inner.mime_type)
            text = inner.text if _is_json(inner.mime_type) else self.frame(inner.text, what)
            return EmbeddedResource(str(inner.uri), text=text, mime_type=inner.mime_type)
        return Text(self.frame(str(block), what))

    async def _exchange(
        self,
        ctx: Context,
        what: str,
        operation: Callable[[Any, Any], Awaitable[Any]],
        *,
        repeatable: bool,
    ) -> Any:
        """Run ``operation`` on a connection this call leases: the peer's progress, log messages and questions
        reach this call's :class:`Relay` alone, and are relayed to ``ctx`` from this task (a question the caller
        cannot answer in place ends the call).

        The ``mcp`` client's own errors (``_mcp_transport``) are transport failures, not the peer's answer: a
        request that never reached the peer is sent again (within ``retries``); one cut off before its answer
        is re-issued (with a fresh request id, as the client gives every request) only when running it twice
        is harmless (``repeatable``: a read-only or idempotent tool, a resource, a prompt), else it ends as
        "may have run". Either way the peer's breaker counts a failure."""
        import httpx2
        import mcp_types
        from mcp.shared.exceptions import MCPError

        credential, trace = await self.outbound(ctx, what)
        self.check_breaker()
        relay = Relay()
        call = _Call()
        attempt = 0
        fresh = False
        try:
            while True:
                lease = self.connections.lease(
                    _key(credential), credential, {**credential, **trace}, relay, fresh=fresh
                )
                try:
                    async with lease as connection:
                        result = await self._pump(
                            ctx, what, operation(connection.client, relay.progress), relay, call
                        )
                    break
                except (BridgeError, asyncio.CancelledError):
                    raise
                except MCPError as exc:
                    own = own_error(exc)
                    if own is not None and own.kind == TOO_LARGE:
                        raise Permanent(
                            f"The answer of the MCP peer {self.name} to {what} is larger than the "
                            f"{own.limit} bytes this bridge reads in one event; a peer trusted to send more "
                            "can be given a larger McpPeer(max_event_bytes=...)."
                        ) from None
                    if own is not None:
                        if (own.kind == UNSENT or repeatable) and attempt < self.retries:
                            attempt += 1
                            fresh = True
                            await asyncio.sleep(min(0.25 * 2**attempt, 4.0))
                            continue
                        self.breaker.record(False)
                        raise self._transport_failure(what, own.kind, repeatable, attempt) from None
                    if lease.reused and not fresh and _session_gone(exc):
                        fresh = (
                            True  # a kept session the peer has forgotten: it never ran the call; a new one
                        )
                        continue
                    # only the peer's own faults count against it: a request it refuses is the caller's, and
                    # must not let one caller cut the peer off for all
                    self.breaker.record(exc.error.code not in (-32603,))
                    text = self.frame(exc.error.message or "", f"{what} error")
                    if exc.error.code in (-32600, -32601, -32602, -32002):
                        raise Rejected(
                            f"The MCP peer {self.name} refused the request ({exc.error.code}): {text}"
                        ) from None
                    raise Permanent(f"The MCP peer {self.name} failed ({exc.error.code}): {text}") from None
                except (httpx2.TransportError, OSError, ExceptionGroup) as exc:
                    if (
                        attempt < self.retries
                    ):  # only with retries configured: the call carries an idempotency key
                        attempt += 1
                        await asyncio.sleep(min(0.25 * 2**attempt, 4.0))
                        continue
                    self.breaker.record(False)
                    raise Retryable(
                        f"The MCP peer {self.name} could not be reached ({type(exc).__name__}).",
                        retry_after=5,
                    ) from None
        except BaseException:
            self.breaker.abandon()  # cancelled, or failed on our side: a trial call it was is given up
            raise
        finally:
            relay.close()
        self.breaker.record(True)
        if call.unanswered:
            raise NeedsInput(
                f"The MCP peer {self.name} asked a question this caller cannot answer in place: "
                f"{call.unanswered[0]}",
                data={"peer": self.name, "target": what},
            )
        if isinstance(result, mcp_types.InputRequiredResult):
            raise NeedsInput(f"The MCP peer {self.name} needs input for {what}.")
        return result

    def _transport_failure(self, what: str, kind: str, repeatable: bool, attempts: int) -> Retryable:
        data = {"peer": self.name, "target": what}
        if kind == UNSENT:
            return Retryable(f"The MCP peer {self.name} could not be reached.", retry_after=5, data=data)
        if repeatable:
            tried = f" (re-issued {attempts} time{'s' if attempts != 1 else ''})" if attempts else ""
            return Retryable(
                f"The connection to the MCP peer {self.name} was cut before it answered {what}{tried}.",
                retry_after=5,
                data=data,
            )
        # neither a refusal of the peer's nor a failure it reported: the call may well have done its work
        return Retryable(
            f"The connection to the MCP peer {self.name} was cut before it answered {what}: the call may have "
            "run on the peer, and it was not repeated (the peer does not list it as read-only or idempotent). "
            "Check whether it took effect before repeating it.",
            data={**data, "may_have_run": True},
        )

    async def _pump(
        self, ctx: Context, what: str, operation: Awaitable[Any], relay: Relay, call: _Call
    ) -> Any:
        events = relay.events
        running = asyncio.ensure_future(operation)
        try:
            while True:
                getter = asyncio.ensure_future(events.get())
                await asyncio.wait({running, getter}, return_when=asyncio.FIRST_COMPLETED)
                if not getter.done():
                    getter.cancel()
                    break
                await self._relay(ctx, what, getter.result(), call)
            while not events.empty():  # what arrived with the result
                await self._relay(ctx, what, events.get_nowait(), call)
            return running.result()
        finally:
            if not running.done():
                # the client tells the peer (notifications/cancelled at 2025-11-25, the response stream closed
                # at 2026-07-28) as the operation unwinds; that is waited for, but never for long
                running.cancel()
                await asyncio.wait({running}, timeout=_CANCEL_BOUND_SECONDS)
            while not events.empty():
                event = events.get_nowait()
                if event[0] == "ask" and not event[2].done():
                    event[2].cancel()

    async def _relay(self, ctx: Context, what: str, event: tuple[Any, ...], call: _Call) -> None:
        import mcp_types

        kind = event[0]
        if kind == "progress":
            _, progress, total, message = event
            if call.seen and progress <= call.progress:
                # a tick already relayed, or an older one: a stream resumed from a stale event id, or a call
                # re-issued after a cut starting over. Each face sees each tick once, in order.
                return
            call.seen = True
            call.progress, call.total = progress, total
            await ctx.progress(progress, total, self.frame(message, f"{what} progress") if message else None)
        elif kind == "log":
            params = event[1]
            data = params.data if not isinstance(params.data, str) else self.frame(params.data, f"{what} log")
            await ctx.log(params.level, data, logger=f"{self.name}")
            if ctx.face in _NO_LOG_CHANNEL and params.level != "debug":
                # A2A and AG-UI have no log channel: there the peer's message is an update of the call's
                # progress (an A2A WORKING status, an AG-UI progress activity), its count unchanged
                text = data if isinstance(data, str) else self.frame(json.dumps(data), f"{what} log")
                await ctx.progress(call.progress, call.total, text)
        elif kind == "ask":
            _, params, answered = event
            call.asks += 1
            question = self.frame(getattr(params, "message", "") or "", f"{what} question")
            schema = dict(getattr(params, "requested_schema", None) or {"type": "object", "properties": {}})
            try:
                answer = await ctx.ask(question, schema, key=f"bridge:{self.name}:{what}:ask-{call.asks}")
            except ClientCapabilityMissing:
                call.unanswered.append(question)
                answered.set_result(mcp_types.ElicitResult(action="cancel"))
                return
            except BaseException:
                answered.cancel()
                raise
            answered.set_result(
                mcp_types.ElicitResult(
                    action=answer.action, content=answer.content if answer.accepted else None
                )
            )


@dataclass(slots=True)
class _Call:
    """What one bridged call has seen of the peer: its questions, its last progress."""

    asks: int = 0
    seen: bool = False  # whether any progress was relayed yet
    progress: float = 0.0
    total: float | None = None
    unanswered: list[str] = field(default_factory=list)


def _for_models(tool: Any) -> bool:
    """Whether a remote tool is meant for models: one whose MCP Apps visibility (``_meta.ui.visibility``, SEP-1865)
    leaves out ``"model"`` is a button of the peer's own UI, which this agent does not render; served to its callers
    it would hand a model what the peer keeps for a person's click."""
    ui = (getattr(tool, "meta", None) or {}).get("ui")
    visibility = ui.get("visibility") if isinstance(ui, dict) else None
    return not isinstance(visibility, list) or "model" in visibility


async def _all(method: Callable[..., Awaitable[Any]], attribute: str) -> list[Any]:
    """Every page of a list method (a peer that pages without end is cut at 100 pages)."""
    items: list[Any] = []
    cursor = None
    for _ in range(100):
        page = await method(cursor=cursor)
        items.extend(getattr(page, attribute))
        cursor = page.next_cursor
        if not cursor:
            break
    return items


def _key(credential: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """Kept connections are per credential: a 2025-11-25 session belongs to the credential that opened it."""
    return tuple(sorted((k.lower(), v) for k, v in credential.items()))


def _session_gone(exc: Any) -> bool:
    """The peer does not know the session (it expired, or the peer restarted): answered before the call ran."""
    message = (exc.error.message or "").lower()
    return exc.error.code == -32600 and ("session not found" in message or "session terminated" in message)


def _spoils(exc: BaseException) -> bool:
    """Whether an error ends a connection every call shares (2026-07-28): anything but an answer of the peer's
    (its JSON-RPC errors are answers; the client's own "connection closed" is not)."""
    from mcp.shared.exceptions import MCPError

    return not isinstance(exc, MCPError) or exc.error.code == -32000


def _unsupported_version(exc: BaseException) -> Any:
    """The versions an UnsupportedProtocolVersion error (-32022) names, wherever it is in an exception group."""
    from mcp.shared.exceptions import MCPError

    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = _unsupported_version(inner)
            if found is not None:
                return found
        return None
    if isinstance(exc, MCPError) and exc.error.code == -32022:
        data = exc.error.data if isinstance(exc.error.data, dict) else {}
        return data.get("supported") or exc.error.message
    return None


def _same_json(text: str, mirror: str) -> bool:
    try:
        return json.dumps(json.loads(text), sort_keys=True) == mirror
    except (ValueError, RecursionError):
        return False


def _wrapped_text(schema: Mapping[str, Any]) -> bool:
    properties = schema.get("properties")
    return (
        isinstance(properties, dict)
        and list(properties) == ["result"]
        and (properties["result"] or {}).get("type") == "string"
    )


def _as_kind(cap: Capability, kind: CapabilityKind) -> Capability:
    """The same function as another kind (a remote tool served as a skill too)."""
    return dataclasses.replace(cap, kind=kind)
