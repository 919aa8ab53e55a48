from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sample_corpus import SCHEMAS, assert_round_trip, assert_tools_listed, simple_calls

from proxy.formats.base import ParsedCall
from proxy.formats.jamba import FORMAT

_ANY_TEXT = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=10)


def _parse(text: str) -> tuple[tuple[ParsedCall, ...], str | None]:
    result = FORMAT.parse(text, SCHEMAS)
    return result.calls, result.text


def test_calls_with_prose_around() -> None:
    calls, rest = _parse(
        'Checking.\n<tool_calls>[{"name": "read_file", "arguments": {"path": "a"}}, {"name": "bash", "arguments": {"command": "ls"}}]</tool_calls>\nDone.'
    )
    assert calls == (ParsedCall("read_file", {"path": "a"}), ParsedCall("bash", {"command": "ls"}))
    assert rest is not None and rest.split() == ["Checking.", "Done."]


@pytest.mark.parametrize(
    "text",
    [
        '<tool_calls>[{"name": "book", "arguments": {}}]</tool_calls>',
        '<tool_calls>[{"name": "bash", "arguments": {"command": "ls',
    ],
)
def test_unknown_tool_and_truncated_stay_text(text: str) -> None:
    assert _parse(text) == ((), text)


@settings(max_examples=40, deadline=None)
@given(simple_calls(_ANY_TEXT))
def test_round_trip(calls: list[ParsedCall]) -> None:
    assert_round_trip(FORMAT, calls)


def test_render_tools_lists_every_tool() -> None:
    assert_tools_listed(FORMAT)
