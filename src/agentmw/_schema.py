"""Hand-written JSON Schema 2020-12 input schemas: ``@tool(input_schema={...})``.

A signature cannot say everything a schema can (``$defs``, ``allOf``/``anyOf``, ``if``/``then``/``else``,
``additionalProperties: false``). A capability may therefore give its input schema by hand; it is then
served exactly as written, and arguments are checked against it before anything else.

Everything is done once, at registration (:func:`apply_input_schema`): the schema is checked against the
2020-12 meta-schema, its references must stay inside the document (nothing is ever fetched, SEP-2106), it
must agree with the function's parameters, and its validator is compiled. The argument model built from
the signature then becomes a subclass whose ``model_validate`` runs that validator first, so every face
that validates arguments (``invoke``, A2A's and AG-UI's asking for what is missing) checks the schema, and
a failure is the same pydantic ``ValidationError`` (the same "Invalid arguments" answer) as any other.

``jsonschema`` is an extra (``agentmw[jsonschema]``), imported here only when a capability has such a schema.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from typing import Any, ClassVar, Protocol

import pydantic
from pydantic import BaseModel, ValidationError
from pydantic_core import InitErrorDetails, PydanticCustomError

from .errors import RegistrationError


class SchemaParams(Protocol):
    """What this module reads and sets of a capability's parameters (``capability.ParamPlan``)."""

    arg_names: tuple[str, ...]
    input_model: type[BaseModel] | None
    input_schema: dict[str, Any]


__all__ = ["DIALECT", "apply_input_schema"]

DIALECT = "https://json-schema.org/draft/2020-12/schema"
_MAX_ERRORS = 5
_MAX_MESSAGE = 300
_TOO_DEEP = "the arguments are nested too deeply to be checked against the input schema"


class _SchemaChecked(BaseModel):
    """The argument model of a capability with a hand-written schema: the schema is checked first."""

    __agentmw_validator__: ClassVar[Any] = None

    @classmethod
    def model_validate(cls, obj: Any, *args: Any, **kwargs: Any) -> Any:
        errors = _errors(cls.__agentmw_validator__, obj)
        if errors:
            raise ValidationError.from_exception_data(cls.__name__, errors)
        return super().model_validate(obj, *args, **kwargs)


def _errors(validator: Any, arguments: Any) -> list[InitErrorDetails]:
    found = []
    try:
        for error in validator.iter_errors(arguments):
            found.append(error)
            if len(found) == _MAX_ERRORS:
                break
    except RecursionError:  # jsonschema recurses per level of nesting (a recursive $ref, a deep value)
        kind = PydanticCustomError("json_schema", "{reason}", {"reason": _TOO_DEEP})
        return [InitErrorDetails(type=kind, loc=(), input=None)]
    if not found:
        return []
    # jsonschema (an extra) ships no type information, and types-jsonschema is not a dependency
    from jsonschema.exceptions import best_match, relevance  # type: ignore[import-untyped]

    details: list[InitErrorDetails] = []
    for error in sorted(found, key=relevance):
        message = error.message
        if error.context:  # anyOf/oneOf: say which branch came closest, not only that none matched
            message = f"{best_match(error.context).message} (no alternative of {error.validator} matched)"
        if len(message) > _MAX_MESSAGE:
            message = message[: _MAX_MESSAGE - 1] + "…"
        kind = PydanticCustomError("json_schema", "{reason}", {"reason": message})
        details.append(InitErrorDetails(type=kind, loc=tuple(error.absolute_path), input=error.instance))
    return details


def _references(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("$ref", "$dynamicRef") and isinstance(value, str):
                yield value
            elif key not in ("const", "enum", "default", "examples"):  # values, not schemas
                yield from _references(value)
    elif isinstance(node, list):
        for item in node:
            yield from _references(item)


def _compile(schema: dict[str, Any], name: str) -> Any:
    try:
        # jsonschema (an extra) ships no type information, and types-jsonschema is not a dependency
        from jsonschema import Draft202012Validator  # type: ignore[import-untyped]
        from jsonschema.exceptions import SchemaError
        from referencing import Registry
        from referencing.exceptions import Unresolvable
        from referencing.jsonschema import DRAFT202012
    except ImportError as exc:  # pragma: no cover - depends on the installation
        raise RegistrationError(
            f"{name!r}: a hand-written input_schema needs the jsonschema package: "
            "pip install 'agentmw[jsonschema]'"
        ) from exc
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        where = "/".join(str(p) for p in exc.absolute_path) or "the root"
        raise RegistrationError(
            f"{name!r}: input_schema is not a valid JSON Schema 2020-12 (at {where}: {exc.message})"
        ) from exc
    # An empty registry that retrieves nothing: a reference can only reach this document.
    base = "urn:agentmw:input-schema"
    registry: Any = Registry().with_resource(base, DRAFT202012.create_resource(schema))
    resolver = registry.resolver(base_uri=base)
    for ref in _references(schema):
        if not ref.startswith("#"):
            raise RegistrationError(
                f"{name!r}: input_schema refers to {ref!r}; only references inside the "
                "schema (#/$defs/..., #anchor) are allowed: agentmw never fetches one"
            )
        try:
            resolver.lookup(ref)
        except Unresolvable as exc:
            raise RegistrationError(
                f"{name!r}: input_schema refers to {ref!r}, which it does not define"
            ) from exc
    validator = Draft202012Validator(schema, registry=registry)
    try:  # a reference loop that reads no deeper into the arguments ({"allOf": [{"$ref": "#"}]}) never ends
        next(validator.iter_errors({}), None)
    except RecursionError:
        raise RegistrationError(
            f"{name!r}: input_schema refers to itself without reading deeper into the "
            "arguments (a $ref loop): no call could ever be checked"
        ) from None
    return validator


def _agree(schema: Mapping[str, Any], params: SchemaParams, fields: Mapping[str, Any], name: str) -> None:
    """The top-level ``properties`` are the function's arguments; ``required`` covers its required ones."""
    properties = schema.get("properties") or {}
    required = schema.get("required") or []
    arguments = set(params.arg_names)
    problems = []
    if unknown := [p for p in required if p not in arguments]:
        problems.append(f"required properties {unknown} are not parameters of the function")
    if extra := [p for p in properties if p not in arguments]:
        problems.append(
            f"properties {extra} are not parameters of the function (their values would be dropped)"
        )
    if missing := [a for a in params.arg_names if a not in properties]:
        problems.append(f"parameters {missing} are not among the schema's top-level properties")
    if optional := [a for a, f in fields.items() if f.is_required() and a not in required]:
        problems.append(
            f"parameters {optional} have no default but the schema does not require them "
            "(give them a default, or list them in required)"
        )
    if problems:
        raise RegistrationError(
            f"{name!r}: input_schema does not agree with the function: {'; '.join(problems)}"
        )


def apply_input_schema(params: SchemaParams, schema: Mapping[str, Any], name: str) -> None:
    """Make ``schema`` the capability's input schema and put its validator in front of the argument model."""
    if not isinstance(schema, Mapping) or schema.get("type") != "object":
        raise RegistrationError(
            f"{name!r}: input_schema must be a JSON Schema object whose root has "
            '"type": "object" (MCP tool arguments are an object)'
        )
    dialect = schema.get("$schema", DIALECT)
    if not isinstance(dialect, str) or dialect.rstrip("#") != DIALECT:
        raise RegistrationError(
            f"{name!r}: input_schema declares $schema {dialect!r}; agentmw validates "
            f"JSON Schema 2020-12 ({DIALECT}), the MCP default"
        )
    if not params.arg_names or params.input_model is None:
        raise RegistrationError(f"{name!r}: input_schema describes arguments, but the function takes none")
    owned = copy.deepcopy(dict(schema))  # the caller's dict may change later; the served schema must not
    model = params.input_model
    _agree(owned, params, model.model_fields, name)
    validator = _compile(owned, name)
    checked = pydantic.create_model(model.__name__, __base__=(model, _SchemaChecked))
    assert issubclass(checked, _SchemaChecked)  # create_model's type says only "a model"
    checked.__agentmw_validator__ = validator
    params.input_model = checked
    params.input_schema = owned
