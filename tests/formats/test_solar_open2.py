"""Solar Open 2: vLLM's tests/tool_parsers/test_solar_open2_tool_parser.py with its own
typed tool, whole and streamed in small and odd deltas."""

from __future__ import annotations

from typing import Any

import pytest
from sample_corpus import CHUNK_SIZES, stream_in

from proxy.formats import recover
from proxy.formats.base import ParsedCall
from proxy.formats.solar_open2 import FORMAT

# typed_request() of the same test file.
TYPES: dict[str, Any] = {"do_all_types": {"type": "object", "properties": {
    "s": {"type": "string"}, "i": {"type": "integer"}, "n": {"type": "number"},
    "b": {"type": "boolean"}, "arr": {"type": "array"}, "obj": {"type": "object"},
    "maybe_int": {"type": ["integer", "null"]}}}}


def _call(args: dict[str, str]) -> str:
    body = "".join(f"<|tool_arg:start|>{k}<|tool_arg:value|>{v}<|tool_arg:end|>\n"
                   for k, v in args.items())
    return f"<|tool_call:start|>do_all_types\n{body}<|tool_call:end|>"


RAW = {"s": "042", "i": "42", "n": "2.5", "b": "TRUE", "arr": "[1, 2]", "obj": '{"k": "v"}',
       "maybe_int": "null", "extra": "7"}
TYPED = {"s": "042", "i": 42, "n": 2.5, "b": True, "arr": [1, 2], "obj": {"k": "v"},
         "maybe_int": None, "extra": "7"}


def test_values_typed_by_the_schema() -> None:
    """TestTypeCoercion; a key the schema does not know stays a string."""
    result, name = recover("Sure, let me help." + _call(RAW), TYPES)
    assert (result.calls, result.text, name) == (
        (ParsedCall("do_all_types", TYPED),), "Sure, let me help.", "solar_open2")


@pytest.mark.parametrize("size", CHUNK_SIZES)
def test_streamed(size: int) -> None:
    text = "Sure, let me help." + _call(RAW) + "\n" + _call({"i": "1"})
    assert stream_in(text, TYPES, size) == (
        (ParsedCall("do_all_types", TYPED), ParsedCall("do_all_types", {"i": 1})),
        "Sure, let me help.\n")


def test_dropped_call_end_before_the_next_call() -> None:
    """test_dropped_call_end_recovers_both_calls."""
    text = ("<|tool_call:start|>do_all_types\n<|tool_arg:start|>s<|tool_arg:value|>a"
            "<|tool_arg:end|>\n" + _call({"s": "b"}))
    assert [c.arguments for c in FORMAT.parse(text, TYPES).calls] == [{"s": "a"}, {"s": "b"}]


def test_truncated_multiline_value_is_no_call() -> None:
    """test_truncated_multiline_value_returns_raw_output."""
    text = ("Writing.<|tool_call:start|>do_all_types\n<|tool_arg:start|>s<|tool_arg:value|>"
            + "".join(f"line {i}\n" for i in range(50)))
    for size in CHUNK_SIZES:
        assert stream_in(text, TYPES, size) == ((), text)
