from __future__ import annotations

from typing import Any

import pytest

from proxy.transforms.response.repair import repair_arguments, repair_name, repair_to_schema

OFFERED: dict[str, Any] = {"get_weather": {}, "Search": {}, "search": {}}


@pytest.mark.parametrize(
    ("name", "rename", "expected"),
    [
        ("GET_WEATHER", {}, "get_weather"),
        ("SEARCH", {}, None),  # two candidates: no guess
        ("Weather_V2", {"weather_v2": "get_weather"}, "get_weather"),
        ("Weather_V2", {"weather_v2": "gone"}, None),
        ("fetch", {}, None),
    ],
)
def test_repair_name(name: str, rename: dict[str, str], expected: str | None) -> None:
    assert repair_name(name, OFFERED, rename) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("{'a': 1,}", ({"a": 1}, ("single_quotes", "trailing_comma"))),
        ('"{\\"a\\": 1}"', ({"a": 1}, ("string_in_string",))),
        ("[1, 2,]", None),  # repaired, but not an object
        ('{"a": ', None),
    ],
)
def test_repair_arguments(text: str, expected: Any) -> None:
    assert repair_arguments(text) == expected


SCHEMA = {
    "type": "object",
    "properties": {
        "filter": {"type": "object"},
        "ids": {"type": "array"},
        "note": {"type": "string"},
    },
}


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        (
            {"filter": '{"a": 1}', "ids": "[1, 2]"},
            ({"filter": {"a": 1}, "ids": [1, 2]}, ("string_in_string",)),
        ),
        ({"note": '{"a": 1}'}, ({"note": '{"a": 1}'}, ())),  # the client wants a string
        ({"filter": "[1]"}, ({"filter": "[1]"}, ())),  # wrong container: no guess
        ({"filter": "{'a': 1}"}, ({"filter": "{'a': 1}"}, ())),  # strict only
        ({"other": '{"a": 1}'}, ({"other": '{"a": 1}'}, ())),
    ],
)
def test_repair_to_schema(arguments: dict[str, Any], expected: Any) -> None:
    before = dict(arguments)
    assert repair_to_schema(arguments, SCHEMA) == expected
    assert arguments == before


@pytest.mark.parametrize("schema", [None, True, {"properties": []}, {"type": "object"}])
def test_repair_to_schema_ignores_odd_schemas(schema: Any) -> None:
    assert repair_to_schema({"filter": "{}"}, schema) == ({"filter": "{}"}, ())
