from __future__ import annotations

import pytest
from sample_corpus import (
    SCHEMAS,
)

from proxy.formats.base import ParsedCall
from proxy.formats.pythonic import FORMAT


def test_preamble_line_then_list_and_prose_after() -> None:
    text = "Checking both.\n[get_weather(city='Rome'), get_weather(city=\"Milan\", unit='celsius')]\nBack soon."
    result = FORMAT.parse(text, SCHEMAS)
    assert result.calls == (
        ParsedCall("get_weather", {"city": "Rome"}),
        ParsedCall("get_weather", {"city": "Milan", "unit": "celsius"}),
    )
    assert result.text == "Checking both.\nBack soon."


def test_python_tag_bare_call_and_json_words() -> None:
    text = '<|python_tag|>list_directory(path="a, b)", recursive=true)<|eom_id|>'
    result = FORMAT.parse(text, SCHEMAS)
    assert result.calls == (ParsedCall("list_directory", {"path": "a, b)", "recursive": True}),)
    assert result.text is None


@pytest.mark.parametrize(
    "text",
    [
        '[get_weather("Paris")]',  # positional
        "[get_weather(city=__import__('os').getcwd())]",  # code, never evaluated
        "[get_weather(**opts)]",
        "[get_weather(city=c) for c in cities]",
        "[get_weather(city='Rome')] is how you would call it.",
        "See [1] and [get_weather(city='Rome')",
        "[get_weather(city='Ro",
        "[]",
    ],
)
def test_not_calls(text: str) -> None:
    result = FORMAT.parse(text, SCHEMAS)
    assert result.calls == ()
    assert result.text == text


def test_unknown_tool_kept_and_mixed_list_keeps_unknown_element() -> None:
    only = "[book_flight(to='JFK')]"
    assert FORMAT.parse(only, SCHEMAS).text == only
    mixed = FORMAT.parse("[book_flight(to='JFK'), read_file(path='a')]", SCHEMAS)
    assert mixed.calls == (ParsedCall("read_file", {"path": "a"}),)
    assert mixed.text == "[book_flight(to='JFK')]"  # the offered element taken out


def test_llama_builtin_call_only_if_offered() -> None:
    text = '<|python_tag|>brave_search.call(query="weather")'
    assert FORMAT.parse(text, SCHEMAS).calls == ()
    offered = {"brave_search": {"type": "object"}}
    assert FORMAT.parse(text, offered).calls == (ParsedCall("brave_search", {"query": "weather"}),)


def test_integers_beyond_64_bits_decode_like_json() -> None:
    result = FORMAT.parse(f"[bash(command='ls', timeout={10**30})]", SCHEMAS)
    assert result.calls == (ParsedCall("bash", {"command": "ls", "timeout": 1e30}),)
    huge = f"[bash(command='ls', timeout={'1' * 5000})]"
    assert FORMAT.parse(huge, SCHEMAS).calls == ()


def test_unknown_elements_keep_their_exact_source_across_lines() -> None:
    text = '[book(a="é"),\n  read_file(path="ü"), book(b=[1,\n2])]'
    result = FORMAT.parse(text, SCHEMAS)
    assert result.calls == (ParsedCall("read_file", {"path": "ü"}),)
    assert result.text == '[book(a="é"), book(b=[1,\n2])]'
