from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sample_corpus import (
    SCHEMAS,
    assert_round_trip,
    assert_tools_listed,
    cases,
    check_case,
    simple_calls,
)

from proxy.formats.base import ParsedCall
from proxy.formats.xlam import FORMAT

_ANY_TEXT = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=10)
_CALL = '{"name": "read_file", "arguments": {"path": "a"}}'


def _parse(text: str) -> tuple[tuple[ParsedCall, ...], str | None]:
    result = FORMAT.parse(text, SCHEMAS)
    return result.calls, result.text


@pytest.mark.parametrize("case", cases("xlam"), ids=lambda c: c["id"])
def test_sample(case: dict[str, Any]) -> None:
    check_case(FORMAT, case)


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


@settings(max_examples=60, deadline=None)
@given(simple_calls(_ANY_TEXT))
def test_round_trip(calls: list[ParsedCall]) -> None:
    assert_round_trip(FORMAT, calls)


def test_render_tools_lists_every_tool() -> None:
    assert_tools_listed(FORMAT)


def test_truncated_pretty_array_does_not_yield_its_complete_inner_object() -> None:
    text = '[\n  {"name": "read_file", "arguments": {"path": "a"}}\n'
    assert _parse(text) == ((), text)
