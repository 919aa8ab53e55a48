from __future__ import annotations

from sample_corpus import (
    SCHEMAS,
)

from proxy.formats.base import ParsedCall
from proxy.formats.kimi_k2 import FORMAT


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
