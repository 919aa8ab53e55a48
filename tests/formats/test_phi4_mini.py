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
from proxy.formats.phi4_mini import FORMAT

_ANY_TEXT = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=10)


@pytest.mark.parametrize("case", cases("phi4_mini"), ids=lambda c: c["id"])
def test_sample(case: dict[str, Any]) -> None:
    check_case(FORMAT, case)


@settings(max_examples=60, deadline=None)
@given(simple_calls(_ANY_TEXT))
def test_round_trip(calls: list[ParsedCall]) -> None:
    assert_round_trip(FORMAT, calls)


def test_render_tools_lists_every_tool() -> None:
    assert_tools_listed(FORMAT)


def _parse(text: str) -> tuple[tuple[ParsedCall, ...], str | None]:
    result = FORMAT.parse(text, SCHEMAS)
    return result.calls, result.text


def test_prose_before_and_single_quotes() -> None:
    text = "I'll check.\nfunctools[{'name': 'list_directory', 'arguments': {'path': '.', 'recursive': True}}]"
    assert _parse(text) == (
        (ParsedCall("list_directory", {"path": ".", "recursive": True}),),
        "I'll check.\n",
    )


@pytest.mark.parametrize(
    "text",
    [
        'functools[{"name": "book_flight", "arguments": {"to": "JFK"}}]',
        'functools[{"name": "read_file", "arguments": {"path": "a"}}',
        "Python's functools module has partial().",
    ],
)
def test_unknown_truncated_or_prose_stay_text(text: str) -> None:
    assert _parse(text) == ((), text)


def test_mixed_array_keeps_unknown_element() -> None:
    text = 'functools[{"name": "book_flight", "arguments": {}}, {"name": "read_file", "arguments": {"path": "a"}}]'
    calls, rest = _parse(text)
    assert calls == (ParsedCall("read_file", {"path": "a"}),)
    assert rest == '{"name":"book_flight","arguments":{}}'
