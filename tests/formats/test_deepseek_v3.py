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
from proxy.formats.deepseek_v3 import FORMAT

_ANY_TEXT = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=10)


@pytest.mark.parametrize("case", cases("deepseek_v3"), ids=lambda c: c["id"])
def test_sample(case: dict[str, Any]) -> None:
    check_case(FORMAT, case)


@settings(max_examples=60, deadline=None)
@given(simple_calls(_ANY_TEXT))
def test_round_trip(calls: list[ParsedCall]) -> None:
    assert_round_trip(FORMAT, calls)


def test_render_tools_lists_every_tool() -> None:
    assert_tools_listed(FORMAT)


_V3 = "<｜tool▁call▁begin｜>function<｜tool▁sep｜>{name}\n```json\n{args}\n```<｜tool▁call▁end｜>"


def test_two_calls_prose_missing_calls_end_and_eos() -> None:
    text = (
        "Let me look.<｜tool▁calls▁begin｜>"
        + _V3.format(name="read_file", args='{"path": "a"}')
        + "\n"
        + _V3.format(name="bash", args='{\n  "command": "ls",\n  "timeout": 5,\n}')
        + "<｜end▁of▁sentence｜>"
    )
    result = FORMAT.parse(text, SCHEMAS)
    assert result.calls == (
        ParsedCall("read_file", {"path": "a"}),
        ParsedCall("bash", {"command": "ls", "timeout": 5}),
    )
    assert result.text == "Let me look."


@pytest.mark.parametrize(
    "opener",
    [
        "<｜tool_calls_begin｜>",
        "<｜tool calls begin｜>",
        "<｜tool\\_calls\\_begin｜>",
        "<｜tool▁calls｜>",
    ],
)
def test_misspelled_openers(opener: str) -> None:
    text = opener + _V3.format(name="read_file", args='{"path": "a"}') + "<｜tool▁calls▁end｜>"
    assert FORMAT.parse(text, SCHEMAS).calls == (ParsedCall("read_file", {"path": "a"}),)


def test_unknown_mixed_and_truncated() -> None:
    unknown = _V3.format(name="book_flight", args='{"to": "JFK"}')
    only = f"<｜tool▁calls▁begin｜>{unknown}<｜tool▁calls▁end｜>"
    assert (FORMAT.parse(only, SCHEMAS).calls, FORMAT.parse(only, SCHEMAS).text) == ((), only)
    mixed = FORMAT.parse(
        f"<｜tool▁calls▁begin｜>{unknown}\n" + _V3.format(name="read_file", args='{"path": "b"}'),
        SCHEMAS,
    )
    assert mixed.calls == (ParsedCall("read_file", {"path": "b"}),)
    assert mixed.text == unknown
    cut = '<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>bash\n```json\n{"command": "rm'
    assert (FORMAT.parse(cut, SCHEMAS).calls, FORMAT.parse(cut, SCHEMAS).text) == ((), cut)
