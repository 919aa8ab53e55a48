from __future__ import annotations

import pytest
from sample_corpus import (
    SCHEMAS,
)

from proxy.formats.base import ParsedCall
from proxy.formats.json_block import FORMAT

OSLO = ParsedCall("get_weather", {"city": "Oslo"})
W = '{"name": "get_weather", "arguments": {"city": "Oslo"}}'


def _parse(text: str) -> tuple[list[ParsedCall], str | None]:
    result = FORMAT.parse(text, SCHEMAS)
    return list(result.calls), result.text


@pytest.mark.parametrize(
    ("text", "calls", "rest"),
    [
        ("```json\n" + W + "\n```", [OSLO], None),
        (
            "I'll check.\n\n```json\n" + W + "\n```\nOne moment.",
            [OSLO],
            "I'll check.\n\n\nOne moment.",
        ),
        ("```json\n[" + W + ", " + W + "]\n```", [OSLO, OSLO], None),
        ("```json\n" + W, [OSLO], None),  # closing fence missing (json-block-010)
        ("  " + W + "  ", [OSLO], None),  # whole reply, unfenced
        ('{"tool_calls": [' + W + "]}", [OSLO], None),
        ('{"tool_call": ' + W + "}", [OSLO], None),
        (
            '{"type": "function", "function": {"name": "get_weather", "arguments": "{\\"city\\": \\"Oslo\\"}"}}',
            [OSLO],
            None,
        ),
        (
            '```json\n{"name": "write_file", "arguments": {"path": "a.py", "content": "x = 1\n\ty = 2"}}\n```',
            [ParsedCall("write_file", {"path": "a.py", "content": "x = 1\n\ty = 2"})],
            None,
        ),
        (
            '```json\n{"name": "read_file", "arguments": {"path": "C:\\Users\\dev\\a.txt"}}\n```',
            [ParsedCall("read_file", {"path": "C:\\Users\\dev\\a.txt"})],
            None,
        ),
        (
            '```json\n{/* call */ "name": "get_weather", // the tool\n "arguments": {"city": "Oslo"}}\n```',
            [OSLO],
            None,
        ),
        (
            '```json\n{"arguments": {"assignee": {"name": "Bo"}, "title": "t"}, "name": "create_issue"}\n```',
            [ParsedCall("create_issue", {"assignee": {"name": "Bo"}, "title": "t"})],
            None,
        ),
    ],
)
def test_shapes(text: str, calls: list[ParsedCall], rest: str | None) -> None:
    got, left = _parse(text)
    assert got == calls
    assert (left.split() if left else None) == (rest.split() if rest else None)


@pytest.mark.parametrize(
    "text",
    [
        '```json\n{"name": "Alice", "email": "a@example.com"}\n```',
        "Run `" + W + "` to call it.",
        "In JSON, e.g. " + W + ", keys are quoted.",
        "```python\nprint(" + W + ")\n```",
        "Example:\n```json\n" + W + "\nmore\n```",
        '```json\n{"name": "get_weather", "arguments": {"city": "Os',
        '```json\n{"name": "get_weather", "arguments": {"city": "Oslo"}\n```',
        "[1, 2, 3]",
        "{}",
    ],
)
def test_not_calls(text: str) -> None:
    assert _parse(text) == ([], text)


def test_fence_with_unknown_tool_stays_verbatim() -> None:
    text = '```json\n{"name": "book_flight", "arguments": {}}\n```'
    assert _parse(text) == ([], text)
