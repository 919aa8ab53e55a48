from __future__ import annotations

from functools import partial

import pytest
from sample_corpus import parse_with

from proxy.formats.base import ParsedCall
from proxy.formats.gpt_oss import FORMAT

_parse = partial(parse_with, FORMAT)


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
