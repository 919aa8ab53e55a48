from __future__ import annotations

from functools import partial

import pytest
from sample_corpus import parse_with

from proxy.formats.base import ParsedCall
from proxy.formats.granite import FORMAT

_parse = partial(parse_with, FORMAT)


def test_granite_31_array_after_tag_with_prose() -> None:
    text = 'Sure.\n<tool_call>[{"name": "read_file", "arguments": {"path": "a"}}, {"name": "bash", "arguments": {"command": "ls"}}]'
    assert _parse(text) == (
        (ParsedCall("read_file", {"path": "a"}), ParsedCall("bash", {"command": "ls"})),
        "Sure.\n",
    )


def test_granite_4_string_arguments_and_20b_function_call() -> None:
    g4 = '<tool_call>{"name": "get_weather", "arguments": "{\\"city\\": \\"Rome\\"}"}</tool_call>'
    assert _parse(g4) == ((ParsedCall("get_weather", {"city": "Rome"}),), None)
    fc = '<function_call> {"name": "read_file", "arguments": {"path": "a"}}\n<function_call> {"name": "read_file", "arguments": {"path": "b"}}'
    assert [c.arguments["path"] for c in _parse(fc)[0]] == ["a", "b"]


@pytest.mark.parametrize(
    "text",
    [
        '<|tool_call|>[{"name": "book_flight", "arguments": {"to": "JFK"}}]',
        '<|tool_call|>[{"name": "read_file", "arguments": {"path": "a"',
        "<|tool_call|>[1, 2]",
    ],
)
def test_unknown_truncated_or_not_calls_stay_text(text: str) -> None:
    assert _parse(text) == ((), text)
