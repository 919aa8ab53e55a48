from __future__ import annotations

from sample_corpus import (
    SCHEMAS,
)

from proxy.formats.base import ParsedCall
from proxy.formats.lfm2 import FORMAT


def test_pythonic_list_then_text() -> None:
    text = "<|tool_call_start|>[read_file(path='a.md')]<|tool_call_end|>Reading it now."
    result = FORMAT.parse(text, SCHEMAS)
    assert result.calls == (ParsedCall("read_file", {"path": "a.md"}),)
    assert result.text == "Reading it now."


def test_json_variant_and_missing_end() -> None:
    text = '<|tool_call_start|>[{"name": "bash", "arguments": {"command": "ls"}}]'
    assert FORMAT.parse(text, SCHEMAS).calls == (ParsedCall("bash", {"command": "ls"}),)


def test_unknown_and_truncated_stay_text() -> None:
    for text in (
        "<|tool_call_start|>[book_flight(to='JFK')]<|tool_call_end|>",
        "<|tool_call_start|>[read_file(path='a",
    ):
        result = FORMAT.parse(text, SCHEMAS)
        assert (result.calls, result.text) == ((), text)
