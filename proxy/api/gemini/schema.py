"""The Gemini API's Schema dialect -> JSON Schema. Pure, no I/O.

`functionDeclarations[].parameters` and `responseSchema` are written in the API's
OpenAPI-3.0 subset: upper-case `type` names (`OBJECT`, `STRING`, ...), `nullable`
instead of a `"null"` type, `anyOf`, and int64 bounds that the REST API encodes as
JSON strings (`"minItems": "1"`). The chat flow checks and rewrites JSON Schema, so
the door converts once here; `parametersJsonSchema` is JSON Schema already and is
taken as is. What the conversion cannot read is a 400 naming the field.
"""

from __future__ import annotations

from typing import Any

from proxy.errors import ApiError
from proxy.types import JSON

_TYPES = {"STRING": "string", "NUMBER": "number", "INTEGER": "integer",
          "BOOLEAN": "boolean", "ARRAY": "array", "OBJECT": "object", "NULL": "null"}
_COUNTS = ("minItems", "maxItems", "minLength", "maxLength", "minProperties", "maxProperties")
_DROPPED = ("nullable", "propertyOrdering", "example", "type")
"""keys with no JSON Schema meaning, or handled on their own."""


def bad(field: str, message: str) -> ApiError:
    """Google's 400 for a field that cannot be read (`status` INVALID_ARGUMENT)."""
    return ApiError(400, f"Invalid value at '{field}': {message}", param=field,
                    code="invalid_argument")


def camel(obj: JSON) -> JSON:
    """`obj` with its snake_case keys as the API's lowerCamelCase ones, one level deep.

    Google's JSON parser takes a message's fields under either name (proto3 JSON), and
    the google-genai SDK sends some nested ones in snake_case (`thinkingConfig:
    {"include_thoughts": ...}`); applied only to the API's own objects, never to what
    they carry (a call's `args`, a property's name)."""
    if not any("_" in key for key in obj):
        return obj
    return {_camel(key): value for key, value in obj.items()}


def _camel(key: str) -> str:
    head, *rest = key.split("_")
    return head + "".join(word[:1].upper() + word[1:] for word in rest) if head else key


def to_json_schema(schema: Any, field: str) -> JSON:
    """`schema` (the Schema dialect) as JSON Schema; `field` names it in a 400."""
    if not isinstance(schema, dict):
        raise bad(field, "a Schema must be an object")
    schema = camel(schema)
    out: JSON = {k: v for k, v in schema.items() if k not in _DROPPED}
    kind = _type(schema.get("type"), f"{field}.type")
    for key in _COUNTS:
        if key in out:
            out[key] = _count(out[key], f"{field}.{key}")
    if "properties" in schema:
        props = schema["properties"]
        if not isinstance(props, dict):
            raise bad(f"{field}.properties", "must be an object of Schemas")
        out["properties"] = {name: to_json_schema(sub, f"{field}.properties.{name}")
                             for name, sub in props.items()}
    if "items" in schema:
        out["items"] = to_json_schema(schema["items"], f"{field}.items")
    if "anyOf" in schema:
        options = schema["anyOf"]
        if not isinstance(options, list) or not options:
            raise bad(f"{field}.anyOf", "must be a non-empty list of Schemas")
        out["anyOf"] = [to_json_schema(sub, f"{field}.anyOf.{i}")
                        for i, sub in enumerate(options)]
    if "required" in schema and not _names(schema["required"]):
        raise bad(f"{field}.required", "must be a list of property names")
    if "enum" in schema and not isinstance(schema["enum"], list):
        raise bad(f"{field}.enum", "must be a list")
    nullable = schema.get("nullable")
    if nullable is not None and not isinstance(nullable, bool):
        raise bad(f"{field}.nullable", "must be true or false")
    if nullable:
        _allow_null(out, kind)
    elif kind is not None:
        out["type"] = kind
    return out


def _type(value: Any, field: str) -> str | None:
    if value is None or value == "TYPE_UNSPECIFIED":
        return None
    if not isinstance(value, str) or value.upper() not in _TYPES:
        raise bad(field, f"unknown type {value!r} (one of {', '.join(_TYPES)})")
    return _TYPES[value.upper()]


def _count(value: Any, field: str) -> int:
    """An int64 bound: a JSON number or, as the REST API encodes int64, a string."""
    if isinstance(value, bool):
        raise bad(field, "must be a non-negative integer")
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) < 19:
        return int(value)
    if isinstance(value, int) and value >= 0:
        return value
    raise bad(field, "must be a non-negative integer")


def _names(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _allow_null(out: JSON, kind: str | None) -> None:
    """`nullable: true` in JSON Schema: null joins the type (and the enum, which would
    otherwise still refuse it), or joins `anyOf` as one more option."""
    if kind is not None:
        out["type"] = [kind, "null"] if kind != "null" else "null"
    elif "anyOf" in out:
        out["anyOf"] = [*out["anyOf"], {"type": "null"}]
    if "enum" in out and None not in out["enum"]:
        out["enum"] = [*out["enum"], None]
