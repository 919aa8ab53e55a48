from __future__ import annotations

from functools import partial

import pytest
from sample_corpus import parse_with

from proxy.formats.base import ParsedCall
from proxy.formats.phi4_mini import FORMAT

_parse = partial(parse_with, FORMAT)


def test_prose_before_and_single_quotes() -> None:
    text = "I'll check.\nfunctools[{'name': 'list_directory', 'arguments': {'path': '.', 'recursive': True}}]"
    assert _parse(text) == (
        (ParsedCall("list_directory", {"path": ".", "recursive": True}),),
        "I'll check.\n",
    )


@pytest.mark.parametrize(
    "text",
    [
        'functools[{"name": "book_flight", "arguments": {"to": "JFK"}}]',
        'functools[{"name": "read_file", "arguments": {"path": "a"}}',
        "Python's functools module has partial().",
    ],
)
def test_unknown_truncated_or_prose_stay_text(text: str) -> None:
    assert _parse(text) == ((), text)


def test_mixed_array_keeps_unknown_element() -> None:
    text = 'functools[{"name": "book_flight", "arguments": {}}, {"name": "read_file", "arguments": {"path": "a"}}]'
    calls, rest = _parse(text)
    assert calls == (ParsedCall("read_file", {"path": "a"}),)
    # Only the offered element is taken out: the rest reads as the model wrote it.
    assert rest == 'functools[{"name": "book_flight", "arguments": {}}]'
