from __future__ import annotations

from sample_corpus import (
    SCHEMAS,
)

from proxy.formats.deepseek_v31 import FORMAT


def test_v31_chain_with_prose_and_unknown_tool() -> None:
    text = (
        "Two lookups.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>"
        '{"city": "Oslo"}<｜tool▁call▁end｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>'
        '{"city": "Bergen"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>'
    )
    result = FORMAT.parse(text, SCHEMAS)
    assert [c.arguments["city"] for c in result.calls] == ["Oslo", "Bergen"]
    assert result.text == "Two lookups."
    unknown = (
        '<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>book<｜tool▁sep｜>{"a": 1}<｜tool▁call▁end｜>'
    )
    assert FORMAT.parse(unknown, SCHEMAS).text == unknown


def test_truncated_second_call_keeps_everything_as_text() -> None:
    text = (
        '<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>read_file<｜tool▁sep｜>{"path": "a"}<｜tool▁call▁end｜>'
        '<｜tool▁call▁begin｜>read_file<｜tool▁sep｜>{"path": "b'
    )
    result = FORMAT.parse(text, SCHEMAS)
    assert (result.calls, result.text) == ((), text)
