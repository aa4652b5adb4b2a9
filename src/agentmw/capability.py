"""A capability: one decorated function, analysed once at registration.

Everything a request needs (the argument validator, the JSON schemas, how to inject the context and
host dependencies, how to turn the return value into content) is computed here, so the hot path only
validates, calls and renders.
"""

from __future__ import annotations

import copy
import inspect
import re
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import pydantic
from pydantic import BaseModel, ConfigDict, TypeAdapter
from pydantic.fields import FieldInfo

from ._docstrings import parse_docstring
from ._routes import HostRoute, argument_fields
from ._schema import apply_input_schema
from ._transport import to_json_text
from .auth.access import Policy, policy_of
from .content import CONTENT_TYPES, PromptMessage, Text
from .context import Context
from .errors import RegistrationError
from .messages import MESSAGE_TYPES, Message, MessageParam, content_of, is_answer, message_param_of
from .safety.gate import GateSpec

__all__ = [
    "APP_MIME_TYPE",
    "NAME_RULE",
    "UI_SCHEME",
    "Capability",
    "CapabilityKind",
    "OutputPlan",
    "build_capability",
    "check_tool_ui_uri",
    "check_ui_uri",
    "route_output_plan",
    "ui_metadata",
]

CapabilityKind = Literal["tool", "resource", "prompt", "skill"]
NAME_RULE = re.compile(r"^[A-Za-z0-9_.\-]{1,128}$")
_TEMPLATE_VAR = re.compile(r"\{([+#]?)([A-Za-z_][A-Za-z0-9_]*)\}")
_HOST_PARAM_CLASSES = frozenset({"Depends", "Security", "Header", "Cookie"})
_PRIMITIVES = (str, int, float, bool)

# MCP Apps (SEP-1865; agentmw.apps is the public side): a tool names a ``ui://`` resource of this type
UI_SCHEME = "ui://"
APP_MIME_TYPE = "text/html;profile=mcp-app"


def check_ui_uri(uri: Any, where: str) -> str:
    """``uri`` if it is a ``ui://`` URI, else a :class:`RegistrationError` that says what ``where`` needs."""
    if not isinstance(uri, str) or not uri.startswith(UI_SCHEME) or len(uri) == len(UI_SCHEME):
        raise RegistrationError(
            f"{where}: an MCP App's UI is a ui:// resource (for example 'ui://procurement/approval.html'), "
            f"got {uri!r}"
        )
    if any(c.isspace() or not c.isprintable() for c in uri):
        raise RegistrationError(
            f"{where}: the UI resource URI {uri!r} contains whitespace or a control character"
        )
    return uri


def check_tool_ui_uri(uri: Any, where: str) -> str:
    """A tool's ``resourceUri``: one concrete ``ui://`` URI. A host reads the resource it names as it is
    written, so a template (``ui://cards/{id}``) would be fetched with ``{id}`` in it."""
    checked = check_ui_uri(uri, where)
    if "{" in checked or "}" in checked:  # not URI characters (RFC 3986): written, they are a template's
        raise RegistrationError(
            f"{where}: a tool's UI is one resource, not a template; got {checked!r} (a host reads the URI "
            f"as written: give the page one URI and let it read the tool's result for what varies)"
        )
    return checked


def _is_host_param(value: Any) -> bool:
    """A FastAPI ``Depends``/``Security``/``Header``/``Cookie`` marker, detected without importing FastAPI."""
    cls = type(value)
    return cls.__module__.startswith("fastapi") and cls.__name__ in _HOST_PARAM_CLASSES


def _is_request_type(annotation: Any) -> bool:
    if not isinstance(annotation, type):
        return False
    return any(
        c.__module__.startswith("starlette.") and c.__name__ in ("Request", "HTTPConnection")
        for c in annotation.__mro__
    )


def _is_context_type(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, Context)


@dataclass(frozen=True, slots=True)
class OutputPlan:
    """How a return value becomes content and structured data.

    ``mode`` is ``content`` (text or content parts, no schema), ``object`` (the value is a JSON object
    and is the structured content) or ``wrapped`` (a non-object value, served as ``{"result": value}``
    so that the structured content is always an object, as the 2025 MCP revisions require).
    """

    mode: Literal["content", "object", "wrapped"]
    schema: dict[str, Any] | None = None
    adapter: TypeAdapter[Any] | None = None
    primitive: type | None = None
    declared: str = ""
    """The declared return type as messages name it (``Budget``, ``list[Asset]``)."""

    def structured(self, value: Any) -> Any:
        """The structured content of ``value``, checked against the declared type.

        Raises :class:`pydantic.ValidationError` when ``value`` does not match it (``None`` from a function
        declared ``-> Budget``): the output schema is a promise to the client, so a value that breaks it
        is never served. The adapter was built at registration; a value that already has the declared
        type (a model instance, an ``int`` for ``int``) is checked without being copied.
        """
        if self.mode == "content":
            return None
        primitive = self.primitive
        if (
            primitive is not None
            and (type(value) is primitive or (primitive is float and type(value) is int))
            or self.adapter is None
        ):
            dumped = value
        else:
            adapter = self.adapter
            dumped = adapter.dump_python(adapter.validate_python(value), mode="json", warnings=False)
        return {"result": dumped} if self.mode == "wrapped" else dumped


def _content_annotation(annotation: Any) -> bool:
    if annotation in (inspect.Signature.empty, None, type(None), str, Any):
        return True
    if isinstance(annotation, type) and issubclass(
        annotation, (*CONTENT_TYPES, PromptMessage, *MESSAGE_TYPES)
    ):
        return True
    origin = typing.get_origin(annotation)
    if origin in (list, tuple, typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not Ellipsis]
        return bool(args) and all(_content_annotation(a) for a in args)
    return False


def _is_object_schema(schema: Mapping[str, Any]) -> bool:
    return (
        schema.get("type") == "object" or ("$ref" in schema and "$defs" in schema) or "properties" in schema
    )


def _output_plan(annotation: Any) -> OutputPlan:
    if _content_annotation(annotation):
        return OutputPlan(mode="content")
    if isinstance(annotation, str):
        raise RegistrationError(
            f"cannot resolve the return annotation {annotation!r}; define it at module level"
        )
    try:
        adapter: TypeAdapter[Any] = TypeAdapter(annotation)
        schema = adapter.json_schema(mode="serialization")
    except pydantic.PydanticUserError as exc:
        raise RegistrationError(f"cannot build an output schema for {annotation!r}: {exc}") from exc
    except (pydantic.PydanticSchemaGenerationError, TypeError):
        return OutputPlan(mode="content")  # not a data type pydantic knows: served as text, with no schema
    schema = _tidy_schema(schema)
    declared = _type_name(annotation)
    if _is_object_schema(schema) and _resolves_to_object(schema):
        return OutputPlan(mode="object", schema=schema, adapter=adapter, declared=declared)
    wrapped = {"type": "object", "properties": {"result": schema}, "required": ["result"]}
    if "$defs" in schema:
        wrapped["$defs"] = schema.pop("$defs")
    return OutputPlan(
        mode="wrapped",
        schema=wrapped,
        adapter=adapter,
        declared=declared,
        primitive=annotation if annotation in _PRIMITIVES else None,
    )


def route_output_plan(route: HostRoute) -> OutputPlan:
    """The output plan of a host route: the schema of what FastAPI serialises (its ``response_model``, with the
    route's include/exclude options); the value is the response body as served, never re-validated."""
    model = route.response_model
    # A route's value is data, a string or a list of strings included: its body is JSON
    if model is None or model in (Any, type(None)):
        return OutputPlan(mode="content")
    try:
        schema = TypeAdapter(model).json_schema(mode="serialization", by_alias=route.by_alias)
    except (pydantic.PydanticSchemaGenerationError, pydantic.PydanticUserError, TypeError):
        return OutputPlan(mode="content")
    schema = _filtered_schema(_tidy_schema(schema), route)
    declared = _type_name(model)
    # the adapter only types the value for ``ctx.call``; the structured content is the body as served
    adapter: TypeAdapter[Any] = TypeAdapter(model)
    if _is_object_schema(schema) and _resolves_to_object(schema):
        return OutputPlan(mode="object", schema=schema, adapter=adapter, declared=declared)
    choices = schema.get("anyOf") or schema.get("oneOf")
    if choices and all(_resolves_to_object({**c, "$defs": schema.get("$defs", {})}) for c in choices):
        # a union of models: every body is an object, served as it is; the schema says so at its top
        return OutputPlan(
            mode="object", schema={"type": "object", **schema}, adapter=adapter, declared=declared
        )
    wrapped = {"type": "object", "properties": {"result": schema}, "required": ["result"]}
    if "$defs" in schema:
        wrapped["$defs"] = schema.pop("$defs")
    return OutputPlan(mode="wrapped", schema=wrapped, adapter=adapter, declared=declared)


def _filtered_schema(schema: dict[str, Any], route: HostRoute) -> dict[str, Any]:
    """The response schema as the route's options shape the value: fields left out are not promised, and fields
    that ``exclude_unset``/``_defaults``/``_none`` may drop are not required."""
    include, exclude = route.include, route.exclude
    relax = route.exclude_unset or route.exclude_defaults or route.exclude_none
    if include is None and exclude is None and not relax:
        return schema

    def shape(node: dict[str, Any]) -> None:
        properties = node.get("properties")
        if not isinstance(properties, dict):
            return
        if include is not None:
            keep = set(include)
            node["properties"] = properties = {k: v for k, v in properties.items() if k in keep}
        if exclude is not None:
            drop = {
                k for k in exclude if not isinstance(exclude, dict) or exclude[k] is True or exclude[k] is ...
            }
            node["properties"] = properties = {k: v for k, v in properties.items() if k not in drop}
        if relax:
            node.pop("required", None)
        elif "required" in node:
            node["required"] = [r for r in node["required"] if r in properties]

    def target(node: dict[str, Any]) -> dict[str, Any]:
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            found: dict[str, Any] = schema.get("$defs", {}).get(ref.removeprefix("#/$defs/"), node)
            return found
        return node

    top = target(schema)
    if top.get("type") == "array" and isinstance(top.get("items"), dict):
        top = target(top["items"])
    if top is not schema and "$defs" in schema:  # a shared definition is shaped for this route's copy only
        name = schema["$ref"].removeprefix("#/$defs/") if "$ref" in schema else None
        top = copy.deepcopy(top)
        if name is not None:
            schema["$defs"][name] = top
        elif isinstance(schema.get("items"), dict) and "$ref" in schema["items"]:
            schema["$defs"][schema["items"]["$ref"].removeprefix("#/$defs/")] = top
    shape(top)
    return schema


def _type_name(annotation: Any) -> str:
    if isinstance(annotation, type) and not typing.get_args(annotation):
        return annotation.__qualname__
    return re.sub(r"\b[A-Za-z_][\w.]*\.(?=[A-Za-z_])", "", repr(annotation))  # list[app.Asset] -> list[Asset]


def _resolves_to_object(schema: Mapping[str, Any]) -> bool:
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        target = schema.get("$defs", {}).get(ref.removeprefix("#/$defs/"), {})
        return bool(target.get("type") == "object")
    return bool(schema.get("type") == "object")


def _tidy_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """Drop pydantic's auto-generated titles, which only repeat the property names."""

    def walk(node: Any, in_properties: bool = False) -> Any:
        if isinstance(node, dict):
            out: dict[str, Any] = {}
            for key, value in node.items():
                if key == "title" and not in_properties and isinstance(value, str):
                    continue
                out[key] = walk(value, in_properties=(key in ("properties", "$defs")))
            return out
        if isinstance(node, list):
            return [walk(v) for v in node]
        return node

    tidy: dict[str, Any] = walk(schema)
    return tidy


class _Arguments(BaseModel):
    model_config = ConfigDict(extra="ignore", arbitrary_types_allowed=True)


@dataclass(slots=True)
class ParamPlan:
    """Which parameters come from the caller's arguments, and which agentmw injects."""

    arg_names: tuple[str, ...] = ()
    context_param: str | None = None
    request_param: str | None = None
    host_params: tuple[inspect.Parameter, ...] = ()
    message_params: tuple[MessageParam, ...] = ()
    """Parameters filled from the messages (``Message``, ``File``, ``list[File]``; messages.py), not arguments."""
    path_params: tuple[str, ...] = ()
    input_model: type[BaseModel] | None = None
    input_schema: dict[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})
    # Built by the faces on first use and kept here, with the capability they belong to.
    host_dependant: Any = None
    header_params: Any = None


def _injected_by_fastapi(param: inspect.Parameter, hints: Mapping[str, Any]) -> bool:
    """A parameter FastAPI fills itself (a dependency, the request, ...), even when a route input shares its name."""
    annotation = hints.get(param.name, param.annotation)
    metadata: tuple[Any, ...] = ()
    if typing.get_origin(annotation) is typing.Annotated:
        annotation, *rest = typing.get_args(annotation)
        metadata = tuple(rest)
    if _is_host_param(param.default) or any(_is_host_param(m) for m in metadata):
        return type(param.default).__name__ in ("Depends", "Security") or any(
            type(m).__name__ in ("Depends", "Security") for m in metadata
        )
    return _is_request_type(annotation) or _is_context_type(annotation)


def _where(fn: Callable[..., Any]) -> str:
    """``file:line`` of a function's definition, for messages that must point at it."""
    target = inspect.unwrap(fn)
    code = getattr(target, "__code__", None)
    if code is None:
        return repr(target)
    return f"{code.co_filename}:{code.co_firstlineno}"


def _hints(fn: Callable[..., Any]) -> dict[str, Any]:
    """The function's resolved annotations.

    With ``from __future__ import annotations`` every annotation is a string, and a function defined
    inside another one may name types only that function's locals hold. agentmw's own names (``Context``)
    always resolve; any other annotation that cannot be resolved stays a string and is reported.
    """
    namespace = {"Context": Context}
    try:
        return typing.get_type_hints(fn, localns=namespace, include_extras=True)
    except Exception:  # noqa: BLE001, S110 (any failure: annotations resolved one by one below)
        pass
    hints: dict[str, Any] = {}
    module_globals = getattr(inspect.unwrap(fn), "__globals__", {})
    for key, annotation in getattr(inspect.unwrap(fn), "__annotations__", {}).items():
        if isinstance(annotation, str):
            try:
                annotation = eval(annotation, module_globals, namespace)
            except Exception:  # noqa: BLE001, S110 (left a string, reported where it is used)
                pass
        hints[key] = annotation
    return hints


def _analyse_parameters(
    fn: Callable[..., Any], name: str, param_docs: Mapping[str, str], route: HostRoute | None = None
) -> ParamPlan:
    """The parameters' plan. For a host route (``route``), the arguments are exactly the route's path, query and
    body inputs, its dependencies' included; everything else of the signature is FastAPI's to inject."""
    signature = inspect.signature(fn)
    hints = _hints(fn)
    plan = ParamPlan()
    fields: dict[str, Any] = {}
    host: list[inspect.Parameter] = []
    paths: list[str] = []
    for param in signature.parameters.values():
        if route is not None and (param.name not in route.params or _injected_by_fastapi(param, hints)):
            continue
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            star = "*" if param.kind is param.VAR_POSITIONAL else "**"
            raise RegistrationError(
                f"{name!r} ({_where(fn)}): parameter {star}{param.name} cannot be served: a caller's arguments are "
                f"named, and {star}{param.name} has no schema. Declare each argument as a named parameter."
            )
        annotation = hints.get(param.name, param.annotation)
        bare = annotation
        metadata: tuple[Any, ...] = ()
        if typing.get_origin(annotation) is typing.Annotated:
            bare, *rest = typing.get_args(annotation)
            metadata = tuple(rest)
        if _is_context_type(bare):
            plan.context_param = param.name
            continue
        if _is_request_type(bare):
            plan.request_param = param.name
            continue
        special = message_param_of(param.name, bare, param.default is not inspect.Parameter.empty)
        if special is not None:
            plan.message_params += (special,)
            continue
        if _is_host_param(param.default) or any(_is_host_param(m) for m in metadata):
            host.append(param.replace(annotation=annotation))
            continue
        if any(type(m).__name__ == "PathParameter" for m in metadata):
            paths.append(param.name)
        if annotation is inspect.Parameter.empty:
            annotation = Any
        elif isinstance(annotation, str):
            raise RegistrationError(
                f"{name!r}: cannot resolve the annotation {annotation!r} of parameter "
                f"{param.name!r}; import it at module level"
            )
        default = param.default
        if default is inspect.Parameter.empty:
            default = ...
        description = param_docs.get(param.name)
        if isinstance(default, FieldInfo):
            if description and not default.description:
                default = copy.copy(default)  # the host app's own Query()/Body() must not change
                default.description = description
            fields[param.name] = (annotation, default)
        elif description:
            fields[param.name] = (annotation, pydantic.Field(default, description=description))
        else:
            fields[param.name] = (annotation, default)
    if route is not None:
        fields.update(argument_fields(route, set(fields)))
    plan.host_params = tuple(host)
    plan.path_params = tuple(paths)
    plan.arg_names = tuple(fields)
    model_name = re.sub(r"\W", "_", name) + "_arguments"
    try:
        plan.input_model = pydantic.create_model(model_name, __base__=_Arguments, **fields)
        schema = plan.input_model.model_json_schema()
    except (pydantic.PydanticSchemaGenerationError, pydantic.PydanticUserError, TypeError) as exc:
        for field_name, (annotation, _default) in fields.items():
            try:
                TypeAdapter(annotation, config=ConfigDict(arbitrary_types_allowed=True)).json_schema()
            except Exception:  # noqa: BLE001 (the field with no schema, whatever pydantic raises)
                raise RegistrationError(
                    f"{name!r} ({_where(fn)}): parameter {field_name!r} has the type {_type_name(annotation)}, which "
                    f"has no JSON schema, so no caller could send it. Use a pydantic model or a JSON type, or have "
                    f"the value injected (a FastAPI dependency, Context)."
                ) from exc
        raise RegistrationError(f"{name!r}: cannot build an input schema from the signature: {exc}") from exc
    schema = _tidy_schema(schema)
    schema.setdefault("properties", {})
    plan.input_schema = schema
    return plan


@dataclass(eq=False, slots=True)
class Capability:
    """A decorated function with everything the faces need, built once."""

    kind: CapabilityKind
    name: str
    fn: Callable[..., Any]
    contract: str
    summary: str
    params: ParamPlan
    output: OutputPlan
    is_async: bool
    is_async_gen: bool
    title: str | None = None
    annotations: dict[str, Any] | None = None
    uri: str | None = None
    uri_template: str | None = None
    uri_pattern: re.Pattern[str] | None = None
    mime_type: str | None = None
    tags: tuple[str, ...] = ()
    examples: tuple[str, ...] = ()
    completions: dict[str, Callable[..., Any]] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)
    untrusted: bool = False
    input_modes: tuple[str, ...] = ()
    output_modes: tuple[str, ...] = ()
    groups: tuple[str, ...] = ()
    timeout: float | None = None
    max_in_flight: int | None = None
    gate: GateSpec | None = None
    """Its ``@human_gate``: a person approves each call first (safety/gate.py)."""
    path_params: tuple[str, ...] = ()
    policy: Policy | None = None
    """What it asks of its caller (``agentmw.auth.Policy``: scopes, roles, a rate limit); None: nothing."""

    text_parameter: str | None = None
    """The one string parameter a plain-text message can fill, when the signature has exactly one."""

    data_parameter: str | None = None
    """The one pydantic-model parameter a data part fills whole, when the signature has exactly one."""

    replies_with_message: bool = False
    """Its return annotation names :class:`~agentmw.messages.Message`: on A2A it may answer without a task."""

    task_support: str | None = None
    """``"optional"`` or ``"required"``: an MCP caller that takes tasks gets a task handle (docs/mcp.md)."""

    ask_first: bool = False
    """Its questions before ``ctx.continue_as_task()`` are asked before the MCP task exists."""

    ui: dict[str, Any] | None = None
    """MCP Apps (docs/mcp-apps.md): a tool's ``_meta.ui`` (``resourceUri``, and ``visibility`` when given); a
    ``ui://`` resource's ``_meta.ui`` (``csp``, ``permissions``, ``domain``, ``prefersBorder``; ``{}`` when it
    declares none). None for everything else. Built at registration; the MCP lists serve it as it is."""

    app_only: bool = False
    """A tool whose UI ``visibility`` leaves out ``"model"``: only an MCP App calls it, so the MCP face lists
    and serves it only to clients that render MCP Apps (docs/mcp-apps.md, "Visibility"). Precomputed: the
    per-call check is this one attribute."""

    route: HostRoute | None = None
    """The FastAPI route whose endpoint ``fn`` is: a call goes through the app as HTTP would (``_dispatch.py``)."""

    never_suspends: bool = False
    """A coroutine function whose own code has no ``await``, ``async for`` or ``async with``: its coroutine
    ends in its first step, so a task may run it eagerly, in the request (``agentmw.tasks.runner``)."""

    pipeline: Any = field(default=None, repr=False)
    """Its stages as its agent is configured (an ``agentmw.pipeline.Pipeline``), assembled at its first call
    and assembled again when that configuration changes (``runtime.invoke``)."""

    @property
    def input_schema(self) -> dict[str, Any]:
        return self.params.input_schema

    @property
    def output_schema(self) -> dict[str, Any] | None:
        return self.output.schema

    @property
    def argument_names(self) -> tuple[str, ...]:
        return self.params.arg_names

    @property
    def side_effects(self) -> bool:
        """Whether calling it changes something (so idempotency keys apply): all but read-only tools."""
        return not (self.annotations or {}).get("readOnlyHint", False) and self.kind in ("tool", "skill")

    def match_uri(self, uri: str) -> dict[str, str] | None:
        """The template variables of ``uri``, or None when this resource does not serve it."""
        if self.uri is not None:
            return {} if uri == self.uri else None
        if self.uri_pattern is None:
            return None
        match = self.uri_pattern.fullmatch(uri)
        return match.groupdict() if match else None


_SUSPENDING = frozenset({"GET_AWAITABLE", "GET_AITER", "GET_ANEXT", "BEFORE_ASYNC_WITH", "YIELD_VALUE"})


def _never_suspends(fn: Callable[..., Any]) -> bool:
    """Whether ``fn`` is a plain coroutine function none of whose own instructions can suspend it. Only its own
    code counts (what it calls without awaiting cannot suspend it), and only a real function: a callable
    object or a wrapper whose code is not what runs is assumed to suspend."""
    # the code's own flag, not iscoroutinefunction: on 3.12+ a plain def marked with markcoroutinefunction
    # passes that, and the awaitable it returns may suspend
    if type(fn) is not types.FunctionType or not fn.__code__.co_flags & inspect.CO_COROUTINE:
        return False
    import dis

    return not any(instruction.opname in _SUSPENDING for instruction in dis.get_instructions(fn))


def _template_pattern(template: str) -> re.Pattern[str]:
    out, last = [], 0
    for match in _TEMPLATE_VAR.finditer(template):
        out.append(re.escape(template[last : match.start()]))
        operator, var = match.groups()
        out.append(f"(?P<{var}>.+)" if operator else f"(?P<{var}>[^/?#]+)")
        last = match.end()
    out.append(re.escape(template[last:]))
    return re.compile("".join(out))


def build_capability(
    kind: CapabilityKind,
    fn: Callable[..., Any],
    *,
    name: str | None = None,
    title: str | None = None,
    contract: str | None = None,
    summary: str | None = None,
    annotations: Mapping[str, Any] | None = None,
    uri: str | None = None,
    mime_type: str | None = None,
    tags: tuple[str, ...] = (),
    examples: tuple[str, ...] = (),
    completions: Mapping[str, Callable[..., Any]] | None = None,
    meta: Mapping[str, Any] | None = None,
    untrusted: bool = False,
    input_modes: tuple[str, ...] = (),
    output_modes: tuple[str, ...] = (),
    groups: tuple[str, ...] = (),
    timeout: float | None = None,
    max_in_flight: int | None = None,
    scopes: tuple[str, ...] | list[str] | None = None,
    roles: tuple[str, ...] | list[str] | None = None,
    rate_limit: Any = None,
    input_schema: Mapping[str, Any] | None = None,
    task: str | None = None,
    ask_first: bool = False,
    route: HostRoute | None = None,
    ui: Mapping[str, Any] | None = None,
) -> Capability:
    target = inspect.unwrap(fn)
    name = name or getattr(target, "__name__", None) or ""
    if kind in ("tool", "prompt", "skill") and not NAME_RULE.fullmatch(name):
        raise RegistrationError(
            f"{kind} name {name!r} is invalid: MCP names are 1-128 characters of A-Z, a-z, 0-9, '_', '-' and '.'"
        )
    if task not in (None, "optional", "required") or (task is not None and kind != "tool"):
        raise RegistrationError(f"{name!r}: task is 'optional' or 'required', on a tool (got {task!r})")
    if ask_first and task is None:
        raise RegistrationError(f"{name!r}: ask_first needs task='optional' or task='required'")
    docs = parse_docstring(inspect.getdoc(target))
    if route is None and inspect.isgeneratorfunction(target):
        raise RegistrationError(
            f"{name!r} ({_where(fn)}) is a generator function: its items would be collected, not streamed. Make it "
            f"an async generator (async def ... yield) to stream its items, or return the whole value."
        )
    params = _analyse_parameters(fn, name, docs.params, route)
    if input_schema is not None:  # hand-written, served as written and checked before the model (_schema.py)
        if kind not in ("tool", "skill"):
            raise RegistrationError(f"{name!r}: input_schema is for tools and skills, not a {kind}")
        apply_input_schema(params, input_schema, name)
    return_annotation = _hints(target).get("return", inspect.Signature.empty)
    is_async_gen = inspect.isasyncgenfunction(target)
    serves_results = kind in ("tool", "skill") and not is_async_gen
    if route is not None:
        output = route_output_plan(route) if serves_results else OutputPlan(mode="content")
    else:
        output = _output_plan(return_annotation) if serves_results else OutputPlan(mode="content")

    uri_template = pattern = None
    if kind == "resource":
        if not uri:
            raise RegistrationError(f"resource {name!r} needs a uri")
        variables = [m.group(2) for m in _TEMPLATE_VAR.finditer(uri)]
        if variables:
            missing = [v for v in variables if v not in params.arg_names]
            if missing:
                raise RegistrationError(
                    f"resource {uri!r}: template variables {missing} are not parameters of {name}"
                )
            uri_template, pattern, uri = uri, _template_pattern(uri), None
        elif params.input_model is not None and any(
            f.is_required() for f in params.input_model.model_fields.values()
        ):
            raise RegistrationError(f"resource {uri!r} has required parameters but no template variables")
    ui_meta, mime_type = ui_metadata(kind, name, uri or uri_template, ui, mime_type)
    for arg in completions or {}:
        if arg not in params.arg_names:
            raise RegistrationError(f"{name!r}: completion given for unknown argument {arg!r}")

    clean_annotations = None
    if annotations:
        allowed = {"title", "readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"}
        unknown = set(annotations) - allowed
        if unknown:
            raise RegistrationError(f"{name!r}: unknown tool annotations {sorted(unknown)}")
        clean_annotations = dict(annotations)

    text_parameter = data_parameter = None
    if params.input_model is not None:
        fields = params.input_model.model_fields
        strings = [n for n, f in fields.items() if f.annotation is str]
        if len(strings) == 1 and {n for n, f in fields.items() if f.is_required()} <= set(strings):
            text_parameter = strings[0]
        models = [
            n
            for n, f in fields.items()
            if isinstance(f.annotation, type) and issubclass(f.annotation, BaseModel)
        ]
        data_parameter = models[0] if len(models) == 1 else None
    description = contract if contract is not None else docs.contract
    return Capability(
        kind=kind,
        name=name,
        fn=fn,
        contract=description,
        summary=summary if summary is not None else (docs.summary or description.split("\n", 1)[0]),
        params=params,
        output=output,
        is_async=inspect.iscoroutinefunction(target) or inspect.iscoroutinefunction(fn),
        is_async_gen=is_async_gen,
        never_suspends=route is None and _never_suspends(fn),
        route=route,
        title=title,
        annotations=clean_annotations,
        uri=uri,
        uri_template=uri_template,
        uri_pattern=pattern,
        mime_type=mime_type,
        tags=tuple(tags),
        examples=tuple(examples),
        completions=dict(completions or {}),
        meta=dict(meta or {}),
        untrusted=untrusted,
        input_modes=tuple(input_modes),
        output_modes=tuple(output_modes),
        groups=tuple(groups),
        text_parameter=text_parameter,
        data_parameter=data_parameter,
        replies_with_message=_names_message(return_annotation),
        timeout=timeout,
        max_in_flight=max_in_flight,
        gate=getattr(target, "__agentmw_gate__", None) or getattr(fn, "__agentmw_gate__", None),
        path_params=params.path_params,
        policy=_policy(scopes, roles, rate_limit),
        task_support=task,
        ask_first=ask_first,
        ui=ui_meta,
        app_only=kind == "tool"
        and ui_meta is not None
        and "model" not in ui_meta.get("visibility", ("model",)),
    )


def ui_metadata(
    kind: CapabilityKind, name: str, uri: str | None, ui: Mapping[str, Any] | None, mime_type: str | None
) -> tuple[dict[str, Any] | None, str | None]:
    """A capability's MCP Apps metadata, checked, and its mime type: a ``ui://`` resource is an app's UI, so its
    type is ``text/html;profile=mcp-app`` (hosts render nothing else), given or not."""
    if kind == "resource":
        if uri is None or not uri.startswith(UI_SCHEME):
            if ui is not None:
                raise RegistrationError(f"resource {uri!r}: ui= is for a ui:// resource (an MCP App's UI)")
            return None, mime_type
        if mime_type is not None and mime_type != APP_MIME_TYPE:
            raise RegistrationError(
                f"resource {uri!r}: a ui:// resource is an MCP App's UI, served as {APP_MIME_TYPE!r}; "
                f"got mime_type={mime_type!r} (leave it out)"
            )
        return dict(ui or {}), APP_MIME_TYPE
    if ui is None:
        return None, mime_type
    if kind != "tool":
        raise RegistrationError(f"{name!r}: ui= is for tools (an MCP App renders beside a tool's result)")
    check_tool_ui_uri(ui.get("resourceUri"), f"tool {name!r}")
    return dict(ui), mime_type


def _policy(scopes: Any, roles: Any, rate_limit: Any) -> Policy | None:
    if not scopes and not roles and rate_limit is None:
        return None
    return policy_of(scopes, roles, rate_limit)


def _names_message(annotation: Any) -> bool:
    if annotation is Message:
        return True
    return any(_names_message(a) for a in typing.get_args(annotation))


def text_of(value: Any) -> list[Any]:
    """Content parts for a value returned by a content-mode capability."""
    if value is None:
        return []
    if isinstance(value, str):
        return [Text(value)]
    if isinstance(value, CONTENT_TYPES):
        return [value]
    if isinstance(value, (list, tuple)) and all(isinstance(v, (*CONTENT_TYPES, str)) for v in value):
        return [Text(v) if isinstance(v, str) else v for v in value]
    if is_answer(value) or isinstance(value, MESSAGE_TYPES):
        return content_of(value)
    return [Text(to_json_text(value))]
