from __future__ import annotations

from functools import partial

import pytest
from sample_corpus import SCHEMAS, parse_with

from proxy.formats import recover
from proxy.formats.base import ParsedCall
from proxy.formats.command_r7b import FORMAT

_parse = partial(parse_with, FORMAT)


def _recover(text: str) -> tuple[tuple[ParsedCall, ...], str | None]:
    result, _ = recover(text, SCHEMAS)
    return result.calls, result.text


def test_calls_with_prose_around() -> None:
    # The thinking block is reasoning (formats.detect), removed before the format parses.
    calls, rest = _recover(
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
