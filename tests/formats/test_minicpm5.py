"""MiniCPM 5: vLLM's tests/tool_parsers/test_minicpm5xml_tool_parser.py with its own
tools, whole and streamed in small and odd deltas."""

from __future__ import annotations

from typing import Any

import pytest
from sample_corpus import CHUNK_SIZES, stream_in

from proxy.formats import recover
from proxy.formats.base import ParsedCall
from proxy.formats.minicpm5 import FORMAT

# make_tools_weather() and make_tools_sum() of the same test file.
TOOLS: dict[str, Any] = {
    "get_weather": {"type": "object", "properties": {"city": {"type": "string"},
                                                     "date": {"type": "string"}},
                    "required": ["city"]},
    "sum_values": {"type": "object", "properties": {"nums": {"type": "array"},
                                                    "exact": {"type": "boolean"}},
                   "required": ["nums"]},
}
# test_multiple_calls_interleaved_text.
TWO = ('Head\n<function name="get_weather"><param name="city">北京</param></function>\n'
       'TXT\n<function name="sum_values"><param name="nums">[7,8,9]</param>'
       '<param name="exact">false</param></function>\nTail\n')
CALLS = (ParsedCall("get_weather", {"city": "北京"}),
         ParsedCall("sum_values", {"nums": [7, 8, 9], "exact": False}))


def test_two_calls_typed_with_prose_kept() -> None:
    result, name = recover(TWO, TOOLS)
    assert (result.calls, name) == (CALLS, "minicpm5")
    assert result.text == "Head\n\nTXT\n\nTail\n"


@pytest.mark.parametrize("size", CHUNK_SIZES)
def test_two_calls_streamed(size: int) -> None:
    """test_extract_tool_calls_streaming_partial_chunks, in every delta size."""
    assert stream_in(TWO, TOOLS, size) == (CALLS, "Head\n\nTXT\n\nTail\n")


@pytest.mark.parametrize("text", [
    '<functionname="get_weather"><paramname="city">上海</param></function>',
    '<function\u0120name="get_weather"><paramname="city">上海</param></function>',
], ids=["collapsed", "tokenizer-space"])
def test_tokenizer_spellings(text: str) -> None:
    """test_collapsed_function_and_param_tags, test_collapsed_param_tags_with_tokenizer_space_function."""
    assert FORMAT.parse(text, TOOLS).calls == (ParsedCall("get_weather", {"city": "上海"}),)


def test_zero_parameters() -> None:
    """test_no_required_and_zero_param_valid."""
    noop = {"noop": {"type": "object", "properties": {"note": {"type": "string"}}}}
    assert FORMAT.parse('<function name="noop"></function>\n', noop).calls == (
        ParsedCall("noop", {}),)


def test_a_value_holding_markup_ends_at_the_structural_close() -> None:
    text = ('<function name="get_weather"><param name="city">a</param>b</param>'
            '<param name="date">x</param></function>')
    assert FORMAT.parse(text, TOOLS).calls == (
        ParsedCall("get_weather", {"city": "a</param>b", "date": "x"}),)


def test_a_run_of_calls_without_close_costs_no_rescans() -> None:
    """Hostile model output: each value used to look for its close past every later
    call (171 KB took 11 s); the next call's start ends the search now."""
    import time

    text = '<function name="get_weather"><param name="city">x</param>' * 3000
    started = time.process_time()
    assert recover(text, TOOLS)[0].calls == ()
    assert time.process_time() - started < 5
