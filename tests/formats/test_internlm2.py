from __future__ import annotations

from functools import partial

import pytest
from sample_corpus import parse_with

from proxy.formats.base import ParsedCall
from proxy.formats.internlm2 import FORMAT

_parse = partial(parse_with, FORMAT)


def test_calls_with_prose_around() -> None:
    calls, rest = _parse(
        'Checking.<|action_start|><|plugin|>\n{"name": "read_file", "parameters": {"path": "a"}}<|action_end|>\n<|action_start|> <|plugin|>{"name": "bash", "arguments": {"command": "ls"}}<|action_end|>Done.'
    )
    assert calls == (ParsedCall("read_file", {"path": "a"}), ParsedCall("bash", {"command": "ls"}))
    assert rest is not None and rest.split() == ["Checking.", "Done."]


@pytest.mark.parametrize(
    "text",
    [
        '<|action_start|><|plugin|>{"name": "book", "parameters": {}}<|action_end|>',
        '<|action_start|><|plugin|>{"name": "bash", "parameters": {"command": "ls"',
    ],
)
def test_unknown_tool_and_truncated_stay_text(text: str) -> None:
    assert _parse(text) == ((), text)
