from __future__ import annotations

from functools import partial

import pytest
from sample_corpus import parse_with

from proxy.formats.apertus import FORMAT
from proxy.formats.base import ParsedCall

_parse = partial(parse_with, FORMAT)


def test_calls_with_prose_around() -> None:
    calls, rest = _parse(
        'Checking.\n<|tools_prefix|>[{"read_file": {"path": "a"}}, {"bash": {"command": "ls"}}]<|tools_suffix|>\nDone.'
    )
    assert calls == (ParsedCall("read_file", {"path": "a"}), ParsedCall("bash", {"command": "ls"}))
    assert rest is not None and rest.split() == ["Checking.", "Done."]


@pytest.mark.parametrize(
    "text",
    [
        '<|tools_prefix|>[{"book": {"to": "JFK"}}]<|tools_suffix|>',
        '<|tools_prefix|>[{"bash": {"command": "ls"}}',
    ],
)
def test_unknown_tool_and_truncated_stay_text(text: str) -> None:
    assert _parse(text) == ((), text)
