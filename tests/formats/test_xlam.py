from __future__ import annotations

from functools import partial

import pytest
from sample_corpus import parse_with

from proxy.formats.base import ParsedCall
from proxy.formats.xlam import FORMAT

_CALL = '{"name": "read_file", "arguments": {"path": "a"}}'


_parse = partial(parse_with, FORMAT)


@pytest.mark.parametrize(
    ("text", "rest"),
    [
        (f"Let me read it.\n[{_CALL}]", "Let me read it.\n"),
        (f"```json\n[{_CALL}]\n```", None),
        (f"Here:\n```\n{_CALL}\n```\nDone.", "Here:\n\nDone."),
        (f"[TOOL_CALLS] [{_CALL}]", None),
        (f"<tool_call>[{_CALL}]</tool_call>", None),
        (f"<think>x</think>[{_CALL}]", "<think>x</think>"),
    ],
)
def test_where_the_array_is_found(text: str, rest: str | None) -> None:
    assert _parse(text) == ((ParsedCall("read_file", {"path": "a"}),), rest)


@pytest.mark.parametrize(
    "text",
    [
        f"The reply looks like [{_CALL}] in practice.",
        '[{"name": "book_flight", "arguments": {"to": "JFK"}}]',
        '[{"name": "read_file", "arguments": {"path": "a"',
        '{"key": "value", "list": [1, 2]}',
        f"```python\nx = [{_CALL}]\n```",
        f"Example:\n```json\n[{_CALL}]\nmore text\n```",
    ],
)
def test_not_calls(text: str) -> None:
    assert _parse(text) == ((), text)


def test_truncated_pretty_array_does_not_yield_its_complete_inner_object() -> None:
    text = '[\n  {"name": "read_file", "arguments": {"path": "a"}}\n'
    assert _parse(text) == ((), text)
