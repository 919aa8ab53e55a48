from __future__ import annotations

from typing import Any

import pytest
from sample_corpus import SCHEMAS

from proxy.formats.base import ParsedCall
from proxy.formats.llama3_json import FORMAT

OSLO = ParsedCall("get_weather", {"city": "Oslo"})
ROME = ParsedCall("get_weather", {"city": "Rome"})
W = '{"name": "get_weather", "parameters": {"city": "Oslo"}}'
SEARCH = {"type": "object", "properties": {"query": {"type": "string"}}}


def _parse(text: str, tools: dict[str, Any] | None = None) -> tuple[list[ParsedCall], str | None]:
    result = FORMAT.parse(text, SCHEMAS if tools is None else tools)
    return list(result.calls), result.text


@pytest.mark.parametrize(
    ("text", "calls", "rest"),
    [
        (W, [OSLO], None),
        ("<|python_tag|>" + W + "<|eom_id|>", [OSLO], None),
        ("<|python_tag|>" + W + "; " + W.replace("Oslo", "Rome"), [OSLO, ROME], None),
        (W + "<|eot_id|>", [OSLO], None),
        (
            '{"name": "list_directory", "parameters": {"path": ".", "recursive": True}}',
            [ParsedCall("list_directory", {"path": ".", "recursive": True})],
            None,
        ),
        (
            '{"name": "search_docs", "parameters": {"query": "x", "max_results": "10"}}',
            [ParsedCall("search_docs", {"query": "x", "max_results": "10"})],
            None,
        ),
        ("Sure.\n" + W + "\nDone.", [OSLO], "Sure.\n\nDone."),
    ],
)
def test_shapes(text: str, calls: list[ParsedCall], rest: str | None) -> None:
    got, left = _parse(text)
    assert got == calls
    assert (left.split() if left else None) == (rest.split() if rest else None)


def test_builtin_only_when_offered() -> None:
    text = '<|python_tag|>brave_search.call(query="weather in Oslo")<|eom_id|>'
    assert _parse(text) == ([], text)
    calls, left = _parse(text, {"brave_search": SEARCH})
    assert calls == [ParsedCall("brave_search", {"query": "weather in Oslo"})] and left is None


def test_code_interpreter_raw_code() -> None:
    calls, left = _parse("<|python_tag|>print(1 + 1)<|eom_id|>", {"code_interpreter": SEARCH})
    assert calls == [ParsedCall("code_interpreter", {"code": "print(1 + 1)"})] and left is None


@pytest.mark.parametrize(
    "text",
    [
        "The reply looks like " + W + " in practice.",
        '{"name": "get_weather", "parameters": {"city": "Os',
        W + " is what I would send.",
    ],
)
def test_not_calls(text: str) -> None:
    assert _parse(text) == ([], text)
