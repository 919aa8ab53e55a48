"""The Schema dialect -> JSON Schema: any Schema converts to a valid JSON Schema that
accepts exactly the values the Gemini Schema describes (null only where nullable)."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.api.gemini.schema import to_json_schema
from proxy.errors import ApiError

Pair = tuple[dict[str, Any], Any]
"""a Gemini Schema and a value it describes."""

_NAMES = st.text(st.sampled_from("abcxyz_"), min_size=1, max_size=6)


def _nullable(pair: Pair, draw: Any) -> Pair:
    schema, value = pair
    if draw(st.booleans()):
        return {**schema, "nullable": True}, draw(st.sampled_from([value, None]))
    return pair


@st.composite
def scalar(draw: Any) -> Pair:
    kind = draw(st.sampled_from(["STRING", "INTEGER", "NUMBER", "BOOLEAN", "string"]))
    if kind in ("STRING", "string"):
        if draw(st.booleans()):
            options = draw(st.lists(st.text(max_size=5), min_size=1, max_size=4, unique=True))
            pair: Pair = ({"type": kind, "enum": options}, draw(st.sampled_from(options)))
        else:
            fmt = draw(st.sampled_from([None, "date-time", "enum"]))
            schema = {"type": kind, "maxLength": "99"} if fmt is None else \
                {"type": kind, "format": fmt}
            pair = (schema, "2026-11-28T07:00:00Z" if fmt == "date-time" else "x")
    elif kind == "INTEGER":
        pair = ({"type": kind, "minimum": 0}, draw(st.integers(0, 99)))
    elif kind == "NUMBER":
        pair = ({"type": kind}, draw(st.floats(allow_nan=False, allow_infinity=False)))
    else:
        pair = ({"type": kind, "description": "flag"}, draw(st.booleans()))
    return _nullable(pair, draw)


def nested(children: st.SearchStrategy[Pair]) -> st.SearchStrategy[Pair]:
    @st.composite
    def obj(draw: Any) -> Pair:
        props = draw(st.dictionaries(_NAMES, children, max_size=4))
        required = [k for k in props if draw(st.booleans())]
        value = {k: v for k, (_, v) in props.items()
                 if k in required or draw(st.booleans())}
        schema = {"type": "OBJECT", "properties": {k: s for k, (s, _) in props.items()},
                  "required": required, "propertyOrdering": list(props)}
        return _nullable((schema, value), draw)

    @st.composite
    def array(draw: Any) -> Pair:
        item_schema, item = draw(children)
        count = draw(st.integers(0, 3))
        return _nullable(({"type": "ARRAY", "items": item_schema, "minItems": "0"},
                          [item] * count), draw)

    @st.composite
    def any_of(draw: Any) -> Pair:
        options = draw(st.lists(children, min_size=1, max_size=3))
        chosen = draw(st.sampled_from(options))
        return _nullable(({"anyOf": [s for s, _ in options]}, chosen[1]), draw)

    return st.one_of(obj(), array(), any_of())


SCHEMAS = st.recursive(scalar(), nested, max_leaves=12)


def _types(schema: Any) -> list[Any]:
    if isinstance(schema, dict):
        found = [schema["type"]] if "type" in schema else []
        return found + [t for v in schema.values() for t in _types(v)]
    if isinstance(schema, list):
        return [t for v in schema for t in _types(v)]
    return []


@settings(max_examples=200, deadline=None)
@given(SCHEMAS)
def test_converted_schema_accepts_what_the_gemini_schema_describes(pair: Pair) -> None:
    schema, value = pair
    converted = to_json_schema(schema, "parameters")
    jsonschema.Draft202012Validator.check_schema(converted)
    jsonschema.validate(value, converted, format_checker=None)
    assert "nullable" not in str(converted) and "propertyOrdering" not in str(converted)
    for kind in _types(converted):
        names = kind if isinstance(kind, list) else [kind]
        assert all(n in ("string", "integer", "number", "boolean", "object", "array", "null")
                   for n in names)
    if isinstance(converted.get("type"), str) and converted["type"] != "null":
        with pytest.raises(jsonschema.ValidationError):  # not nullable: null is refused
            jsonschema.validate(None, converted)


def test_the_dialect_mapped() -> None:
    schema = {"type": "OBJECT", "nullable": False, "properties": {
        "when": {"type": "STRING", "format": "date-time", "nullable": True},
        "mode": {"type": "STRING", "enum": ["a", "b"], "nullable": True},
        "tags": {"type": "ARRAY", "items": {"type": "STRING"}, "maxItems": "5"},
        "either": {"anyOf": [{"type": "INTEGER"}, {"type": "STRING"}], "nullable": True}},
        "required": ["mode"]}
    assert to_json_schema(schema, "p") == {"type": "object", "properties": {
        "when": {"type": ["string", "null"], "format": "date-time"},
        "mode": {"type": ["string", "null"], "enum": ["a", "b", None]},
        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 5},
        "either": {"anyOf": [{"type": "integer"}, {"type": "string"}, {"type": "null"}]}},
        "required": ["mode"]}


@pytest.mark.parametrize(("schema", "field"), [
    ({"type": "WHATEVER"}, "p.type"),
    ({"type": "OBJECT", "properties": {"a": {"type": 3}}}, "p.properties.a.type"),
    ({"type": "ARRAY", "items": "STRING"}, "p.items"),
    ({"type": "STRING", "minLength": "-1"}, "p.minLength"),
    ({"type": "OBJECT", "required": "a"}, "p.required"),
    ({"anyOf": []}, "p.anyOf"),
    ({"type": "STRING", "nullable": "yes"}, "p.nullable"),
    ("OBJECT", "p"),
])
def test_what_cannot_be_read_is_a_400_naming_the_field(schema: Any, field: str) -> None:
    with pytest.raises(ApiError) as caught:
        to_json_schema(schema, "p")
    assert caught.value.status == 400 and caught.value.param == field
    assert field in caught.value.message
