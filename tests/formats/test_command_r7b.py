from __future__ import annotations

from functools import partial

import pytest
from sample_corpus import parse_with

from proxy.formats.base import ParsedCall
from proxy.formats.command_r7b import FORMAT

_parse = partial(parse_with, FORMAT)


def test_calls_with_prose_around() -> None:
    calls, rest = _parse(
        '<|START_THINKING|>I should look.<|END_THINKING|><|START_RESPONSE|>Checking.<|END_RESPONSE|><|START_ACTION|>[{"tool_call_id": "0", "tool_name": "read_file", "parameters": {"path": "a"}}, {"tool_call_id": "1", "tool_name": "bash", "parameters": {"command": "ls"}}]<|END_ACTION|>\nDone.'
    )
    assert calls == (ParsedCall("read_file", {"path": "a"}), ParsedCall("bash", {"command": "ls"}))
    assert rest is not None and rest.split() == ["Checking.", "Done."]


@pytest.mark.parametrize(
    "text",
    [
        '<|START_ACTION|>[{"tool_call_id": "0", "tool_name": "book", "parameters": {}}]<|END_ACTION|>',
        '<|START_ACTION|>[{"tool_call_id": "0", "tool_name": "bash", "parameters": {"command": "ls"}',
    ],
)
def test_unknown_tool_and_truncated_stay_text(text: str) -> None:
    assert _parse(text) == ((), text)
