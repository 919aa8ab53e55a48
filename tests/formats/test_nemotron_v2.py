from __future__ import annotations

import pytest
from sample_corpus import SCHEMAS

from proxy.formats.base import ParsedCall
from proxy.formats.nemotron_v2 import FORMAT


def _parse(text: str) -> tuple[tuple[ParsedCall, ...], str | None]:
    result = FORMAT.parse(text, SCHEMAS)
    return result.calls, result.text


def test_calls_with_prose_around() -> None:
    calls, rest = _parse(
        'Checking.\n<TOOLCALL>[{"name": "read_file", "arguments": {"path": "a"}}, {"name": "bash", "arguments": {"command": "ls"}}]</TOOLCALL>\nDone.'
    )
    assert calls == (ParsedCall("read_file", {"path": "a"}), ParsedCall("bash", {"command": "ls"}))
    assert rest is not None and rest.split() == ["Checking.", "Done."]


@pytest.mark.parametrize(
    "text",
    [
        '<TOOLCALL>[{"name": "book", "arguments": {}}]</TOOLCALL>',
        '<TOOLCALL>[{"name": "bash", "arguments": {"command": "ls',
    ],
)
def test_unknown_tool_and_truncated_stay_text(text: str) -> None:
    assert _parse(text) == ((), text)
