from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sample_corpus import SCHEMAS, assert_round_trip, assert_tools_listed, simple_calls

from proxy.formats.base import ParsedCall
from proxy.formats.gpt_oss import FORMAT

_ANY_TEXT = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=10)


def _parse(text: str) -> tuple[tuple[ParsedCall, ...], str | None]:
    result = FORMAT.parse(text, SCHEMAS)
    return result.calls, result.text


def test_analysis_removed_call_recovered_both_recipient_positions() -> None:
    text = (
        "<|channel|>analysis<|message|>Need the file.<|end|>"
        "<|start|>assistant<|channel|>commentary<|message|>Reading it.<|end|>"
        "<|start|>assistant<|channel|>commentary to=functions.read_file <|constrain|>json"
        '<|message|>{"path": "a"}<|call|>'
        '<|start|>assistant to=functions.bash<|channel|>commentary json<|message|>{"command": "ls"}<|call|>'
    )
    calls, rest = _parse(text)
    assert calls == (ParsedCall("read_file", {"path": "a"}), ParsedCall("bash", {"command": "ls"}))
    assert rest is not None and rest.strip() == "Reading it."


@pytest.mark.parametrize(
    "text",
    [
        '<|channel|>commentary to=functions.book <|constrain|>json<|message|>{"to": "JFK"}<|call|>',
        '<|channel|>commentary to=functions.bash <|constrain|>json<|message|>{"command": "ls',
        "<|channel|>final<|message|>Just an answer.<|return|>",
    ],
)
def test_unknown_truncated_and_plain_answers_stay_text(text: str) -> None:
    assert _parse(text) == ((), text)


@settings(max_examples=40, deadline=None)
@given(simple_calls(_ANY_TEXT))
def test_round_trip(calls: list[ParsedCall]) -> None:
    assert_round_trip(FORMAT, calls)


def test_render_tools_lists_every_tool() -> None:
    assert_tools_listed(FORMAT)
