"""Typing the raw text values of the XML-like formats by the offered schema.

Owns: turning one parameter's text (Qwen3-Coder, GLM-4.5, MiniMax-M2, where
the wire has no types) into a JSON value using that parameter's schema, and
the reverse for rendering. Must not: convert a string-typed parameter, guess
a type the schema does not state, or raise; a value that cannot be converted
stays the string the model wrote so the response checks can see it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from proxy.formats.blocks import dumps
from proxy.formats.json_scan import json_int
from proxy.formats.jsonish import loads_lenient
from proxy.types import JSON

_INTEGER = re.compile(r"[+-]?\d+")
_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def schema_types(schema: Any) -> tuple[str, ...]:
    """The JSON types a parameter schema allows (type, type lists, anyOf/oneOf)."""
    if not isinstance(schema, Mapping):
        return ()
    found: list[str] = []
    kind = schema.get("type")
    if isinstance(kind, str):
        found.append(kind)
    elif isinstance(kind, list):
        found.extend(k for k in kind if isinstance(k, str))
    for key in ("anyOf", "oneOf"):
        options = schema.get(key)
        if isinstance(options, list):
            for option in options:
                found.extend(schema_types(option))
    if schema.get("nullable") is True:
        found.append("null")
    return tuple(dict.fromkeys(found))


def property_schema(parameters: JSON, key: str) -> Any:
    """The schema of one property of a tool's parameters, or None."""
    properties = parameters.get("properties")
    return properties.get(key) if isinstance(properties, Mapping) else None


def known_key(parameters: JSON, key: str) -> bool:
    """Whether the schema names this property (any key if it lists none)."""
    properties = parameters.get("properties")
    return not isinstance(properties, Mapping) or not properties or key in properties


def convert(raw: str, schema: Any) -> Any:
    """The value for `raw` under `schema`; raw itself when nothing fits."""
    types = schema_types(schema)
    if not types or "string" in types:
        return raw
    text = raw.strip()
    for kind in ("null", "boolean", "integer", "number", "object", "array"):
        if kind in types or (kind == "null" and text.lower() in ("null", "none")):
            found, value = _as(kind, text)
            if found:
                return value
    return raw


def _as(kind: str, text: str) -> tuple[bool, Any]:
    if kind == "null":
        return text.lower() in ("null", "none"), None
    if kind == "boolean":
        lowered = text.lower()
        return lowered in ("true", "false"), lowered == "true"
    if kind == "integer":
        value = _integer(text)
        return (value is not None), value
    if kind == "number":
        if (value := _integer(text)) is not None:
            return True, value
        if _NUMBER.fullmatch(text) and math.isfinite(float(text)):
            return True, float(text)
        return False, None
    decoded = loads_lenient(text)
    wanted = dict if kind == "object" else list
    if decoded is not None and isinstance(decoded[0], wanted):
        return True, decoded[0]
    return False, None


def _integer(text: str) -> int | float | None:
    if not _INTEGER.fullmatch(text):
        return None
    try:
        return json_int(int(text))
    except ValueError:  # beyond Python's digit limit for int(): not a number we keep
        return None


def render_value(value: Any) -> str:
    """A value as the templates write it: strings raw, everything else JSON."""
    return value if isinstance(value, str) else dumps(value)
