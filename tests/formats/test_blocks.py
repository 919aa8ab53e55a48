from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from proxy.formats.base import ParsedCall
from proxy.formats.blocks import Block, find_blocks, protected_spans, section_block, splice
from proxy.formats.json_scan import call_from_object, json_at, past_close

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
