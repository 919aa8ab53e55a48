from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sample_corpus import (
    SCHEMAS,
    squash,
)

from proxy.formats import recover
from proxy.formats.base import ParsedCall
from proxy.formats.kimi_k2 import FORMAT
from proxy.formats.stream import StreamRecovery


def _call(call_id: str, args: str) -> str:
    return f"<|tool_call_begin|>{call_id}<|tool_call_argument_begin|>{args}<|tool_call_end|>"


def test_variants_prose_and_missing_section_end() -> None:
    text = (
        "Looking.\n<|tool_call_section_begin|> "
        + _call("read_file:1", '{"path": "a"}')
        + "\n"
        + _call(" functions.bash:2 ", "{'command': 'ls', 'timeout': None}")
    )
    result = FORMAT.parse(text, SCHEMAS)
    assert result.calls == (
        ParsedCall("read_file", {"path": "a"}),
        ParsedCall("bash", {"command": "ls", "timeout": None}),
    )
    assert result.text == "Looking.\n"


def test_bare_counter_id_only_when_one_schema_fits() -> None:
    section = "<|tool_calls_section_begin|>{}<|tool_calls_section_end|>"
    fits_one = section.format(_call("0", '{"expression": "1+1"}'))
    assert FORMAT.parse(fits_one, SCHEMAS).calls == (
        ParsedCall("calculate", {"expression": "1+1"}),
    )
    ambiguous = section.format(_call("0", '{"path": "a"}'))
    assert FORMAT.parse(ambiguous, SCHEMAS).calls == ()


def test_unknown_truncated_and_unclosed_think() -> None:
    unknown = (
        "<|tool_calls_section_begin|>"
        + _call("functions.book:0", "{}")
        + "<|tool_calls_section_end|>"
    )
    assert FORMAT.parse(unknown, SCHEMAS).text == unknown
    cut = '<|tool_calls_section_begin|><|tool_call_begin|>functions.bash:0<|tool_call_argument_begin|>{"command": "ls'
    assert (FORMAT.parse(cut, SCHEMAS).calls, FORMAT.parse(cut, SCHEMAS).text) == ((), cut)
    think = "<think>I need the file.\n<|tool_calls_section_begin|>" + _call(
        "functions.read_file:0", '{"path": "x"}'
    )
    result = FORMAT.parse(think, SCHEMAS)
    assert (result.calls, result.text) == ((ParsedCall("read_file", {"path": "x"}),), None)


SECTION = "<|tool_calls_section_begin|>{}<|tool_calls_section_end|>"
WEATHER = SECTION.format(_call("functions.get_weather:0", '{"city": "A"}'))
# kimi-k2-005: K2 Thinking leaves `<think>` unclosed and goes straight to its tools.
UNCLOSED = "<think>The user wants the weather in A; I will call the tool.\n" + WEATHER
# A section marker inside a closed think block is a thought, or a mention of the format.
THOUGHT = (
    "<think>\nI could call " + WEATHER + " but the user only asked a definition.\n</think>\n"
    "A barometer measures air pressure."
)
MENTION = (
    "<think>\nKimi's format uses <|tool_calls_section_begin|> tokens, not relevant.\n"
    "</think>\nA barometer measures air pressure."
)
THINK_CASES = [
    (UNCLOSED, [ParsedCall("get_weather", {"city": "A"})], None),
    (UNCLOSED + "\nWaiting for it.", [ParsedCall("get_weather", {"city": "A"})], "Waiting for it."),
    (THOUGHT, [], "A barometer measures air pressure."),
    (MENTION, [], "A barometer measures air pressure."),
    ("<think>\nsee " + WEATHER + "\n</think>\n" + WEATHER,
     [ParsedCall("get_weather", {"city": "A"})], None),
]


def _streamed(text: str, cuts: list[int], keep: bool) -> tuple[list[ParsedCall], str]:
    parser = StreamRecovery({"get_weather": SCHEMAS["get_weather"]}, keep_reasoning=keep)
    out: list[str | ParsedCall] = []
    bounds = sorted({0, len(text), *(c for c in cuts if c <= len(text))})
    for start, end in itertools.pairwise(bounds):
        out += parser.feed(text[start:end])
    out += parser.flush()
    return [i for i in out if isinstance(i, ParsedCall)], "".join(
        i for i in out if isinstance(i, str))


@pytest.mark.parametrize(("text", "calls", "rest"), THINK_CASES)
def test_a_section_marker_ends_only_reasoning_left_unclosed(
    text: str, calls: list[ParsedCall], rest: str | None
) -> None:
    tools = {"get_weather": SCHEMAS["get_weather"]}
    result, _ = recover(text, tools)
    assert (list(result.calls), squash(result.text)) == (calls, rest)
    kept, _ = recover(text, tools, keep_reasoning=True)
    assert list(kept.calls) == calls
    if not calls:
        # The thought stays whole in the reasoning: nothing of it leaks past `</think>`.
        assert squash(kept.text) == squash(text)


@settings(max_examples=100, deadline=None)
@given(case=st.sampled_from(THINK_CASES), cuts=st.lists(st.integers(0, 250), max_size=6),
       keep=st.booleans())
def test_streamed_think_with_a_section_marker_is_what_the_whole_text_gives(
    case: tuple[str, list[ParsedCall], str | None], cuts: list[int], keep: bool
) -> None:
    text = case[0]
    whole, _ = recover(text, {"get_weather": SCHEMAS["get_weather"]}, keep_reasoning=keep)
    calls, streamed = _streamed(text, cuts, keep)
    assert calls == list(whole.calls)
    assert squash(streamed) == squash(whole.text)
