from __future__ import annotations

import json
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.formats.jsonish import loads_lenient, loads_object, loads_strict, scan_json_value

_TEXT = st.text(
    alphabet=st.characters(codec="utf-8").filter(str.isprintable) | st.sampled_from("\n\t'\"\\"),
    max_size=12,
)
_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | _TEXT
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_TEXT, inner, max_size=4),
    max_leaves=12,
)
_CONTAINERS = st.lists(_VALUES, max_size=4) | st.dictionaries(_TEXT, _VALUES, max_size=4)
_OBJECTS = st.dictionaries(_TEXT, _VALUES, min_size=1, max_size=4)


def _with_trailing_commas(value: Any) -> str:
    """JSON text with a trailing comma after the last member of every container."""
    if isinstance(value, dict) and value:
        items = ", ".join(f"{json.dumps(k)}: {_with_trailing_commas(v)}" for k, v in value.items())
        return "{" + items + ",}"
    if isinstance(value, list) and value:
        return "[" + ", ".join(_with_trailing_commas(v) for v in value) + " , ]"
    return orjson.dumps(value).decode()


@given(_VALUES)
def test_strict_round_trip(value: Any) -> None:
    assert loads_strict(orjson.dumps(value).decode()) == value


@given(_CONTAINERS)
def test_scan_finds_the_end_of_a_dumped_value(value: Any) -> None:
    text = orjson.dumps(value).decode()
    assert scan_json_value("  " + text + " tail}", 2) == len(text) + 2


@settings(max_examples=60)
@given(_CONTAINERS, st.data())
def test_a_proper_prefix_is_never_completed(value: Any, data: st.DataObject) -> None:
    text = orjson.dumps(value).decode()
    cut = data.draw(st.integers(min_value=1, max_value=len(text) - 1))
    assert scan_json_value(text[:cut], 0) is None
    assert loads_lenient(text[:cut]) is None


@given(_OBJECTS)
def test_python_literal_repr_repairs_back(value: dict[str, Any]) -> None:
    result = loads_lenient(repr(value))
    assert result is not None
    assert result[0] == value


@given(_OBJECTS)
def test_trailing_commas_repair_back(value: dict[str, Any]) -> None:
    assert loads_lenient(_with_trailing_commas(value)) == (value, ("trailing_comma",))


@given(st.text(max_size=30))
def test_never_raises(text: str) -> None:
    loads_strict(text)
    loads_object(text)
    loads_lenient(text)
    for start in range(len(text)):
        scan_json_value(text, start)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"city": "Tokyo"}', ({"city": "Tokyo"}, ())),
        ('{"a": 1,}', ({"a": 1}, ("trailing_comma",))),
        ("{'q': 'it\\'s \"x\"'}", ({"q": 'it\'s "x"'}, ("single_quotes",))),
        ('{"q": "it\'s"}', ({"q": "it's"}, ())),
        (
            '{"a": True, "b": None, "c": False}',
            ({"a": True, "b": None, "c": False}, ("python_literals",)),
        ),
        ('{"t": "True"}', ({"t": "True"}, ())),
        ('"{\\"city\\": \\"Tokyo\\"}"', ({"city": "Tokyo"}, ("string_in_string",))),
        ("\"{'a': 1,}\"", ({"a": 1}, ("string_in_string", "single_quotes", "trailing_comma"))),
        ('{"code": "a\nb"}', ({"code": "a\nb"}, ("control_characters",))),
        ("{'e': '\\x41\\u00e9'}", ({"e": "Aé"}, ("single_quotes",))),
        ('{"url": "http://x/,}"}', ({"url": "http://x/,}"}, ())),
    ],
)
def test_ladder_cases(text: str, expected: tuple[Any, tuple[str, ...]]) -> None:
    assert loads_lenient(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        '{"a": 1',  # truncated
        '{"a": "To',  # cut inside a string
        "{'a': 'x}",
        "[1,,]",  # a missing value is not invented
        "{,}",
        '{"a": 1]',  # mismatched closer
        "{'p': '\\d'}",  # ambiguous escape
        "{'p': '\\ud800'}",  # lone surrogate
        "{a: 1}",  # unquoted keys are not in the ladder
        '{"a": 1} {"b": 2}',
        "",
        "   ",
    ],
)
def test_ladder_refuses(text: str) -> None:
    assert loads_lenient(text) is None


def test_strict_and_object() -> None:
    assert loads_strict("null") is None
    assert loads_strict("{'a': 1}") is None
    assert loads_object("[1]") is None
    assert loads_object('{"a": [1]}') == {"a": [1]}


@pytest.mark.parametrize(
    ("text", "start", "end"),
    [
        ('x {"a": "}"} y', 2, 12),
        ("['}', \"]\"]", 0, 10),
        ('{"a": "\\"}"}', 0, 12),
        ('{"a": [}', 0, None),
        ("{", 0, None),
        ("abc", 0, None),
        ("{}", 5, None),
        ("{}", -1, None),
    ],
)
def test_scan_cases(text: str, start: int, end: int | None) -> None:
    assert scan_json_value(text, start) == end
