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
from proxy.formats.deepseek_v31 import FORMAT

_ANY_TEXT = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=10)


@pytest.mark.parametrize("case", cases("deepseek_v31"), ids=lambda c: c["id"])
def test_sample(case: dict[str, Any]) -> None:
    check_case(FORMAT, case)


@settings(max_examples=60, deadline=None)
@given(simple_calls(_ANY_TEXT))
def test_round_trip(calls: list[ParsedCall]) -> None:
    assert_round_trip(FORMAT, calls)


def test_render_tools_lists_every_tool() -> None:
    assert_tools_listed(FORMAT)


def test_v31_chain_with_prose_and_unknown_tool() -> None:
    text = (
        "Two lookups.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>"
        '{"city": "Oslo"}<｜tool▁call▁end｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>'
        '{"city": "Bergen"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>'
    )
    result = FORMAT.parse(text, SCHEMAS)
    assert [c.arguments["city"] for c in result.calls] == ["Oslo", "Bergen"]
    assert result.text == "Two lookups."
    unknown = (
        '<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>book<｜tool▁sep｜>{"a": 1}<｜tool▁call▁end｜>'
    )
    assert FORMAT.parse(unknown, SCHEMAS).text == unknown


def test_truncated_second_call_keeps_everything_as_text() -> None:
    text = (
        '<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>read_file<｜tool▁sep｜>{"path": "a"}<｜tool▁call▁end｜>'
        '<｜tool▁call▁begin｜>read_file<｜tool▁sep｜>{"path": "b'
    )
    result = FORMAT.parse(text, SCHEMAS)
    assert (result.calls, result.text) == ((), text)
