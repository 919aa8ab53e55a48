from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from proxy.transforms.response.correction import (
    Problem,
    Rejected,
    correction_messages,
    describe,
)

OFFERED: dict[str, Any] = {
    "get_weather": {"type": "object", "properties": {"city": {"type": "string"},
                    "unit": {"enum": ["celsius", "fahrenheit"]}}, "required": ["city"]},
    "search": {"type": "object", "properties": {"query": {"type": "string"}}},
}


def test_unknown_tool_names_the_tools_and_the_one_it_meant() -> None:
    text = describe(Problem(rejected=(Rejected("get_wether", '{"city": "Paris"}',
                                               "unknown_tool"),)), OFFERED)
    assert "`get_wether`, which does not exist" in text
    assert "The available tools are: get_weather, search." in text
    assert "Did you mean `get_weather`?" in text
    assert '"required":["city"]' in text


def test_schema_violation_quotes_the_validator_and_the_schema() -> None:
    reason = "schema: unit: 'kelvin' is not one of ['celsius', 'fahrenheit']"
    text = describe(Problem(rejected=(Rejected("get_weather", '{"city":"Oslo","unit":"kelvin"}',
                                               reason),)), OFFERED)
    assert "does not match its parameters: unit: 'kelvin' is not one of" in text
    assert 'You sent: {"city":"Oslo","unit":"kelvin"}' in text
    assert "The parameters of `get_weather` are:" in text


def test_cut_off_and_bad_json_calls() -> None:
    cut = describe(Problem(rejected=(Rejected("search", '{"query": "a', "truncated"),)), OFFERED)
    assert "was cut off" in cut and "every bracket closed" in cut
    bad = describe(Problem(rejected=(Rejected("search", "query=a", "bad_json"),)), OFFERED)
    assert "are not valid JSON: query=a" in bad


def test_missing_and_forbidden_calls() -> None:
    required = describe(Problem(missing_call="required"), OFFERED)
    assert "A tool call is required here and you made none" in required
    named = describe(Problem(missing_call="search"), OFFERED)
    assert "You must call `search`" in named and "The parameters of `search`" in named
    forbidden = describe(Problem(forbidden_calls=("search",)), OFFERED)
    assert "no tool may be called" in forbidden and "Reply again" not in forbidden


def test_messages_keep_history_and_add_reply_and_problem() -> None:
    history = [{"role": "user", "content": "weather in Paris?"}]
    out = correction_messages(history, None, Problem(missing_call="required"), OFFERED)
    assert out[0] == history[0]
    assert out[1] == {"role": "assistant", "content": ""}
    assert out[2]["role"] == "user" and "required" in out[2]["content"]
    assert history == [{"role": "user", "content": "weather in Paris?"}]  # input untouched


@given(st.text(max_size=3000), st.text(max_size=40))
def test_long_arguments_are_clipped(arguments: str, name: str) -> None:
    text = describe(Problem(rejected=(Rejected(name, arguments, "bad_json"),)), OFFERED)
    assert len(text) < 2_000 + len(name) * 2
