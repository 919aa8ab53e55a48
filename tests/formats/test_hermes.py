from __future__ import annotations

import pytest
from sample_corpus import SCHEMAS

from proxy.formats import recover
from proxy.formats.base import ParsedCall
from proxy.formats.hermes import FORMAT

W = '{"name": "get_weather", "arguments": {"city": "Oslo"}}'
OSLO = ParsedCall("get_weather", {"city": "Oslo"})


def _parse(text: str) -> tuple[list[ParsedCall], str | None]:
    result = FORMAT.parse(text, SCHEMAS)
    return list(result.calls), result.text


@pytest.mark.parametrize(
    ("text", "calls", "rest"),
    [
        ("<tool_call>" + W + "</tool_call>", [OSLO], None),  # no newlines (hermes-003)
        ("<tool_call>\n" + W, [OSLO], None),  # close tag missing, JSON complete (hermes-008)
        (W + "\n</tool_call>", [OSLO], None),  # opener dropped, orphan close (hermes-015)
        ("<tool_call>\n" + W + "\n" + W + "\n</tool_call>", [OSLO, OSLO], None),  # two in one block
        (
            '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo",},}\n</tool_call>',
            [OSLO],
            None,
        ),
        (
            "<tool_call>\n{'name': 'get_weather', 'arguments': {'city': 'Oslo'}}\n</tool_call>",
            [OSLO],
            None,
        ),
        (
            '<tool_call>{"name": "get_weather", "arguments": "{\\"city\\": \\"Oslo\\"}"}</tool_call>',
            [OSLO],
            None,
        ),
        (
            '<tool_call>{"name": "get_weather", "parameters": {"city": "Oslo"}}</tool_call>',
            [OSLO],
            None,
        ),
        (
            '<tool_call>{"name": "list_directory"}</tool_call>',
            [ParsedCall("list_directory", {})],
            None,
        ),
        (
            '<tool_call>{"name": "list_directory", "arguments": ""}</tool_call>',
            [ParsedCall("list_directory", {})],
            None,
        ),
        ("<function_call>" + W + "</function_call>", [OSLO], None),
        ("<tool_call>[" + W + ", " + W + "]", [OSLO, OSLO], None),
        (W + "\n" + W, [OSLO, OSLO], None),  # qwen2.5-coder bare leaks
        (W + "\n\n" + W + "\nThat is all.", [OSLO, OSLO], "That is all."),
        ("Before.\n<tool_call>\n" + W + "\n</tool_call>\nAfter.", [OSLO], "Before.\n\nAfter."),
    ],
)
def test_shapes(text: str, calls: list[ParsedCall], rest: str | None) -> None:
    got, text_left = _parse(text)
    assert got == calls
    assert (text_left.split() if text_left else None) == (rest.split() if rest else None)


def test_close_tag_inside_a_string_argument() -> None:
    text = '<tool_call>\n{"name": "write_file", "arguments": {"path": "a.md", "content": "use </tool_call> here"}}\n</tool_call>'
    assert _parse(text) == (
        [ParsedCall("write_file", {"path": "a.md", "content": "use </tool_call> here"})],
        None,
    )


def test_nested_name_is_not_the_function_name() -> None:
    text = '<tool_call>{"arguments": {"assignee": {"name": "Dana"}, "title": "t"}, "name": "create_issue"}</tool_call>'
    (call,), _ = _parse(text)
    assert call.name == "create_issue"


@pytest.mark.parametrize(
    "text",
    [
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Os',
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}',
        "The <tool_call> tag wraps a call.",
        "Use `<tool_call>" + W + "</tool_call>` to call.",
        "e.g. " + W + " in a sentence",
        '{"name": "Alice", "age": 30}',
        '{"name": "get_weather", "description": "Current weather"}',
        "Answer:\n\n```xml\n<tool_call>\n" + W + "\n</tool_call>\n```\n\nThat is the format.",
    ],
)
def test_not_calls(text: str) -> None:
    calls, rest = _parse(text)
    assert calls == [] and rest == text


def test_unknown_tool_stays_verbatim_next_to_a_known_one() -> None:
    unknown = '<tool_call>\n{"name": "book_flight", "arguments": {}}\n</tool_call>'
    calls, rest = _parse(unknown + "\n<tool_call>\n" + W + "\n</tool_call>")
    assert calls == [OSLO] and rest is not None and rest.strip() == unknown


def test_whole_reply_fence_around_a_call_is_a_call() -> None:
    result, name = recover("```xml\n<tool_call>\n" + W + "\n</tool_call>\n```", SCHEMAS)
    assert list(result.calls) == [OSLO] and result.text is None and name == "hermes"


def test_call_inside_closed_think_is_not_a_call() -> None:
    text = "<think>I could do <tool_call>" + W + "</tool_call></think>No need."
    result, _ = recover(text, SCHEMAS)
    assert result.calls == () and result.text == "No need."
    kept, _ = recover(text, SCHEMAS, keep_reasoning=True)
    assert kept.calls == () and kept.text == text


def test_forced_open_thinking_then_call() -> None:
    result, _ = recover("reasoning here\n</think>\n<tool_call>" + W + "</tool_call>", SCHEMAS)
    assert list(result.calls) == [OSLO] and result.text is None
