from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from proxy.formats.xml_values import convert, render_value, schema_types

_OBJECT = {"type": "object", "properties": {"a": {"type": "string"}}}


@pytest.mark.parametrize(
    ("raw", "schema", "expected"),
    [
        ("3", {"type": "integer"}, 3),
        ("-3", {"type": "integer"}, -3),
        ("3.5", {"type": "integer"}, "3.5"),
        ("ten", {"type": "integer"}, "ten"),
        ("0.25", {"type": "number"}, 0.25),
        ("2", {"type": "number"}, 2),
        ("1e3", {"type": "number"}, 1000.0),
        ("nan", {"type": "number"}, "nan"),
        ("TRUE", {"type": "boolean"}, True),
        ("false", {"type": "boolean"}, False),
        ("yes", {"type": "boolean"}, "yes"),
        ("null", {"type": "integer"}, None),
        ("None", {"type": ["integer", "null"]}, None),
        ('{"a": "b"}', _OBJECT, {"a": "b"}),
        ("{'a': 'b', 'c': None,}", _OBJECT, {"a": "b", "c": None}),
        ("['x', 'y']", {"type": "array"}, ["x", "y"]),
        ("[1, 2", {"type": "array"}, "[1, 2"),
        ('{"a": 1}', {"type": "array"}, '{"a": 1}'),
        ("12", {"type": "string"}, "12"),
        ("null", {"type": "string"}, "null"),
        ("12", {"anyOf": [{"type": "string"}, {"type": "integer"}]}, "12"),
        ("12", {"anyOf": [{"type": "null"}, {"type": "integer"}]}, 12),
        ("12", None, "12"),
        ("12", {}, "12"),
        ("1" * 30, {"type": "integer"}, float("1" * 30)),
        ("1" * 5000, {"type": "integer"}, "1" * 5000),
    ],
)
def test_convert(raw: str, schema: Any, expected: Any) -> None:
    value = convert(raw, schema)
    assert value == expected
    assert type(value) is type(expected)


def test_schema_types() -> None:
    assert schema_types({"type": "integer", "nullable": True}) == ("integer", "null")
    assert schema_types("nonsense") == ()


@given(st.text())
def test_string_parameters_are_never_converted(raw: str) -> None:
    assert convert(raw, {"type": "string"}) == raw


# Beyond 64 bits an integer decodes to a float, as orjson does (blocks.json_int).
@given(st.integers(-(2**63), 2**64 - 1) | st.booleans() | st.lists(st.text(max_size=5), max_size=3))
def test_render_then_convert_round_trips(value: Any) -> None:
    kind = {bool: "boolean", int: "integer", list: "array"}[type(value)]
    assert convert(render_value(value), {"type": kind}) == value
