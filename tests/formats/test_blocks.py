from __future__ import annotations

import itertools
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sample_corpus import SCHEMAS, squash

from proxy.formats import recover
from proxy.formats.base import ParsedCall
from proxy.formats.blocks import Block, find_blocks, protected_spans, section_block, splice
from proxy.formats.json_scan import call_from_object, json_at, past_close
from proxy.formats.stream import StreamRecovery

_CALL = "<c>"


def _covered(text: str) -> list[str]:
    return [text[start:end] for start, end in protected_spans(text)]


@pytest.mark.parametrize(
    ("text", "protected"),
    [
        ("Example:\n```xml\n<c>\n```\nBye.", True),
        ("Example:\n```python\n<c>\n", True),  # still open: protected to the end
        ("```xml\n<c>\n```", False),  # the whole reply is the fence
        ("Here:\n```json\n<c>\n```", False),
        ("Here:\n```\n<c>\n```", False),
        ("Use `<c>` for that.", True),
        ("<think>maybe <c></think>answer", True),
        ("lone close tag <c></think>answer", False),  # detect strips forced-open reasoning
        ("plain <c> text", False),
    ],
)
def test_protected_spans(text: str, protected: bool) -> None:
    assert any(_CALL in piece for piece in _covered(text)) is protected


def test_find_blocks_skips_protected_and_splice_keeps_unknown() -> None:
    text = "a `<c>` b <c> c <c> d<|eot|>"
    seen: list[int] = []

    def parse_at(t: str, at: int) -> Block | None:
        seen.append(at)
        known = len(seen) == 1
        calls = (ParsedCall("x", {}),) if known else ()
        return Block(at, at + 3, calls, "" if known else "<c>")

    blocks = find_blocks(text, re.compile("<c>"), parse_at)
    assert seen == [10, 16]
    result = splice(text, blocks, drop=("<|eot|>",))
    assert result.calls == (ParsedCall("x", {}),)
    assert result.text == "a `<c>` b  c <c> d "


def test_splice_gives_none_for_whitespace() -> None:
    assert splice("  \n", []).text is None


def test_section_block_mixed_and_all_unknown() -> None:
    parts = [(ParsedCall("a", {}), "RAW-A"), (ParsedCall("b", {}), "RAW-B")]
    mixed = section_block("0123456789", 2, 8, parts, {"b": {}})
    assert (mixed.calls, mixed.keep) == ((ParsedCall("b", {}),), "RAW-A")
    none = section_block("0123456789", 2, 8, parts, {})
    assert (none.calls, none.keep) == ((), "234567")


_WEATHER = '{"name": "get_weather", "arguments": {"city": "A"}}'
_BOOK_PY = "{'name': 'book', 'arguments': {'to': 'JFK', 'ok': True}}"
# A block with an offered and an unknown call: only the offered call's text is
# taken out. The unknown call stays byte for byte as written, inside what the
# block has around its calls (marker, brackets, close tag) and after the
# separator written before it, so it reads as the model wrote it (spec: an
# unknown call stays verbatim at its place; only the offered one is removed).
MIXED = [
    ('[TOOL_CALLS][{"name": "book", "arguments": {}}, ' + _WEATHER + "]",
     '[TOOL_CALLS][{"name": "book", "arguments": {}}]'),
    ("[TOOL_CALLS][" + _WEATHER + ', {"name": "book", "arguments": {}}]',
     '[TOOL_CALLS][{"name": "book", "arguments": {}}]'),
    ('[TOOL_CALLS]book_flight[ARGS]{"to": "JFK"}[TOOL_CALLS]get_weather[ARGS]{"city": "A"}',
     '[TOOL_CALLS]book_flight[ARGS]{"to": "JFK"}'),
    ('[TOOL_CALLS]get_weather[ARGS]{"city": "A"}[TOOL_CALLS]book_flight[ARGS]{"to": "JFK"}',
     '[TOOL_CALLS]book_flight[ARGS]{"to": "JFK"}'),
    ("Sure.\n<tool_call>\n" + _BOOK_PY + "\n{'name': 'get_weather', 'arguments': {'city': 'A'}}"
     "\n</tool_call>\nDone.",
     "Sure.\n<tool_call>\n" + _BOOK_PY + "\n</tool_call>\nDone."),
    ('{"tool_calls": [{"name": "book", "arguments": {"to": "JFK"}}, ' + _WEATHER + "]}",
     '{"tool_calls": [{"name": "book", "arguments": {"to": "JFK"}}]}'),
    ('functools[{"name": "book", "arguments": {}}, ' + _WEATHER + "]",
     'functools[{"name": "book", "arguments": {}}]'),
]


@pytest.mark.parametrize(("text", "rest"), MIXED)
def test_a_mixed_block_keeps_the_unknown_call_as_written(text: str, rest: str) -> None:
    result, _ = recover(text, {"get_weather": SCHEMAS["get_weather"]})
    assert result.calls == (ParsedCall("get_weather", {"city": "A"}),)
    assert result.text == rest


@settings(max_examples=100, deadline=None)
@given(case=st.sampled_from(MIXED), cuts=st.lists(st.integers(0, 150), max_size=5))
def test_a_mixed_block_streams_as_the_whole_text_gives(
    case: tuple[str, str], cuts: list[int]
) -> None:
    text, rest = case
    parser = StreamRecovery({"get_weather": SCHEMAS["get_weather"]}, keep_reasoning=True)
    bounds = sorted({0, len(text), *(c for c in cuts if c <= len(text))})
    items = [item for a, b in itertools.pairwise(bounds) for item in parser.feed(text[a:b])]
    items += parser.flush()
    assert [i for i in items if isinstance(i, ParsedCall)] == [
        ParsedCall("get_weather", {"city": "A"})]
    assert squash("".join(i for i in items if isinstance(i, str))) == squash(rest)


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        ({"name": "f", "arguments": {"a": 1}}, ParsedCall("f", {"a": 1})),
        ({"name": "f", "parameters": {"a": 1}}, ParsedCall("f", {"a": 1})),
        ({"name": "f", "arguments": '{"a": "1"}'}, ParsedCall("f", {"a": "1"})),
        ({"name": "f", "arguments": ""}, ParsedCall("f", {})),
        ({"type": "function", "function": {"name": "f", "arguments": "{}"}}, ParsedCall("f", {})),
        ({"name": "f", "arguments": "not json"}, None),
        ({"name": "two words", "arguments": {}}, None),
        ({"key": "value"}, None),
        (["f"], None),
    ],
)
def test_call_from_object(obj: Any, expected: ParsedCall | None) -> None:
    assert call_from_object(obj) == expected


def test_json_at_repairs_but_never_completes() -> None:
    assert json_at("x = {'a': True,}", 4) == ({"a": True}, 16)
    assert json_at('{"a": "b"', 0) is None
    assert json_at("plain", 0) is None


@given(st.text(max_size=60))
def test_never_raises(text: str) -> None:
    protected_spans(text)
    splice(text, [])


def test_backticks_inside_a_recovered_block_do_not_protect_the_next() -> None:
    text = '<c>{"a": "`"}<c>{"a": "`"}'

    def parse_at(t: str, at: int) -> Block | None:
        return Block(at, at + 13, (ParsedCall("x", {}),))

    assert len(find_blocks(text, re.compile("<c>"), parse_at)) == 2


def test_empty_start_pattern_on_empty_text_terminates() -> None:
    assert find_blocks("", re.compile(r"\A"), lambda t, at: None) == []


def test_think_tags_inside_arguments_do_not_hide_later_calls() -> None:
    text = '<c>{"a": "</think>"}<c>{"a": "<think>"}<c>{}'

    def parse_at(t: str, at: int) -> Block | None:
        end = t.find("}", at) + 1
        return Block(at, end, (ParsedCall("x", {}),))

    assert len(find_blocks(text, re.compile("<c>"), parse_at)) == 3


@pytest.mark.parametrize(
    ("text", "pos", "closer", "expected"),
    [
        ("{}</x> more", 2, "</x>", 6),
        ("{} \n </x>", 2, "</x>", 9),
        ("{} text </x>", 2, "</x>", 2),  # something else first: the close is missing
        ("{}  ", 2, "</x>", 2),  # whitespace is not taken without a close
        ("{}  ", 2, "", 2),  # no closer at all
    ],
)
def test_past_close(text: str, pos: int, closer: str, expected: int) -> None:
    assert past_close(text, pos, closer) == expected
