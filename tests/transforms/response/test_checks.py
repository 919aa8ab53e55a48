from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from proxy.transforms.response.checks import CallVerdict, SchemaCache, check_call
from proxy.types import InvalidPolicy

# Not support.tools' schema: an enum and a nested object give the checks more to find.
WEATHER_WITH_OPTIONS = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "units": {"type": "string", "enum": ["c", "f"]},
        "filter": {"type": "object"},
    },
    "required": ["city"],
}
OFFERED: dict[str, Any] = {
    "get_weather": WEATHER_WITH_OPTIONS,
    "list_files": {"type": "object", "properties": {}},
    "no_params": None,
    "broken_schema": {"type": "nonsense"},
    "dangling_ref": {"$ref": "#/$defs/missing"},
}
RENAME = {"weather_v2": "get_weather"}


def _check(name: str, arguments: str, policy: InvalidPolicy = "drop") -> CallVerdict:
    return check_call(name, arguments, OFFERED, policy, RENAME, SchemaCache())


@pytest.mark.parametrize(
    ("name", "arguments", "policy", "expected"),
    [
        (
            "get_weather",
            '{"city": "Tokyo"}',
            "drop",
            CallVerdict(True, "get_weather", '{"city": "Tokyo"}'),
        ),
        (
            "weather_v2",
            '{"city":"Tokyo"}',
            "drop",
            CallVerdict(True, "get_weather", '{"city":"Tokyo"}'),
        ),
        ("list_files", "", "drop", CallVerdict(True, "list_files", "{}")),
        ("list_files", "  ", "drop", CallVerdict(True, "list_files", "{}")),
        ("no_params", '{"x": 1}', "drop", CallVerdict(True, "no_params", '{"x": 1}')),
        ("broken_schema", "{}", "drop", CallVerdict(True, "broken_schema", "{}")),
        ("dangling_ref", "{}", "drop", CallVerdict(True, "dangling_ref", "{}")),
        ("rm_rf", "{}", "drop", CallVerdict(False, "rm_rf", "{}", (), "unknown_tool")),
        (
            "Get_Weather",
            '{"city":"T"}',
            "drop",
            CallVerdict(False, "Get_Weather", '{"city":"T"}', (), "unknown_tool"),
        ),
        (
            "get_weather",
            '{"city": "To',
            "drop",
            CallVerdict(False, "get_weather", '{"city": "To', (), "bad_json"),
        ),
        (
            "get_weather",
            "[1]",
            "drop",
            CallVerdict(False, "get_weather", "[1]", (), "not_an_object"),
        ),
        (
            "get_weather",
            "null",
            "drop",
            CallVerdict(False, "get_weather", "null", (), "not_an_object"),
        ),
        (
            "get_weather",
            '{"town": "x"}',
            "drop",
            CallVerdict(
                False, "get_weather", '{"town": "x"}', (), "schema: 'city' is a required property"
            ),
        ),
        (
            "get_weather",
            '{"city": "x", "units": "k"}',
            "drop",
            CallVerdict(
                False,
                "get_weather",
                '{"city": "x", "units": "k"}',
                (),
                "schema: units: 'k' is not one of ['c', 'f']",
            ),
        ),
    ],
)
def test_verdicts(name: str, arguments: str, policy: InvalidPolicy, expected: CallVerdict) -> None:
    assert _check(name, arguments, policy) == expected


@pytest.mark.parametrize(
    ("name", "arguments", "expected"),
    [
        (
            "Get_Weather",
            '{"city":"T"}',
            CallVerdict(True, "get_weather", '{"city":"T"}', ("name_case",)),
        ),
        (
            "WEATHER_V2",
            '{"city":"T"}',
            CallVerdict(True, "get_weather", '{"city":"T"}', ("name_case",)),
        ),
        (
            "get_weather",
            "{'city': 'T',}",
            CallVerdict(True, "get_weather", '{"city":"T"}', ("single_quotes", "trailing_comma")),
        ),
        (
            "get_weather",
            '"{\\"city\\": \\"T\\"}"',
            CallVerdict(True, "get_weather", '{"city":"T"}', ("string_in_string",)),
        ),
        (
            "get_weather",
            '{"city": "T", "filter": "{\\"a\\": 1}"}',
            CallVerdict(
                True, "get_weather", '{"city":"T","filter":{"a":1}}', ("string_in_string",)
            ),
        ),
        (
            "GET_WEATHER",
            '{"city": "T", "flag": True}',
            CallVerdict(
                True, "get_weather", '{"city":"T","flag":true}', ("name_case", "python_literals")
            ),
        ),
        (
            "get_weather",
            '{"city": "To',
            CallVerdict(False, "get_weather", '{"city": "To', (), "bad_json"),
        ),
        (
            "get_weather",
            "{'town': 'x'}",
            CallVerdict(
                False,
                "get_weather",
                "{'town': 'x'}",
                ("single_quotes",),
                "schema: 'city' is a required property",
            ),
        ),
        ("nope", "{}", CallVerdict(False, "nope", "{}", (), "unknown_tool")),
    ],
)
def test_repair_policy(name: str, arguments: str, expected: CallVerdict) -> None:
    assert _check(name, arguments, "repair") == expected


def test_repair_refuses_an_ambiguous_name() -> None:
    offered = {"Search": WEATHER_WITH_OPTIONS, "search": WEATHER_WITH_OPTIONS}
    verdict = check_call("SEARCH", '{"city":"x"}', offered, "repair", {}, SchemaCache())
    assert verdict == CallVerdict(False, "SEARCH", '{"city":"x"}', (), "unknown_tool")


@pytest.mark.parametrize(
    ("name", "arguments", "reason"),
    [
        ("rm_rf", "{}", "unknown_tool"),
        ("get_weather", "{'city'", "bad_json"),
        ("get_weather", "{}", "schema: 'city' is a required property"),
    ],
)
def test_keep_keeps_everything_unchanged(name: str, arguments: str, reason: str) -> None:
    assert _check(name, arguments, "keep") == CallVerdict(True, name, arguments, (), reason)


def test_cache_compiles_each_schema_once() -> None:
    cache = SchemaCache(maxsize=4)
    first = cache.validator({"type": "object", "required": ["a"]})
    assert cache.validator({"required": ["a"], "type": "object"}) is first
    assert cache.validator({"type": "object"}) is not first


def test_inputs_are_not_mutated() -> None:
    offered = orjson.loads(orjson.dumps(OFFERED))
    _check("get_weather", '{"city": "T", "filter": "{\\"a\\": 1}"}', "repair")
    assert offered == OFFERED


@given(
    st.dictionaries(
        st.text(max_size=5), st.integers(-(2**63), 2**63 - 1) | st.text(max_size=5), max_size=4
    ),
    st.text(min_size=1),
)
def test_valid_calls_always_pass_unchanged(extra: dict[str, Any], city: str) -> None:
    text = orjson.dumps({**extra, "city": city}).decode()
    policies: tuple[InvalidPolicy, ...] = ("drop", "repair", "keep")
    for policy in policies:
        assert _check("get_weather", text, policy) == CallVerdict(True, "get_weather", text)


@given(st.text(max_size=40))
def test_never_raises_on_model_output(arguments: str) -> None:
    policies: tuple[InvalidPolicy, ...] = ("drop", "repair", "keep")
    for policy in policies:
        verdict = _check("get_weather", arguments, policy)
        if verdict.ok and policy != "keep":
            assert isinstance(orjson.loads(verdict.arguments), dict)
