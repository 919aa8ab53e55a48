"""Step-3 (`<｜tool_calls_begin｜>` sections of `<steptml:invoke>` calls)."""

from __future__ import annotations

from sample_corpus import SCHEMAS

from proxy.formats.base import ParsedCall
from proxy.formats.step3 import FORMAT

B, E = "<｜tool_calls_begin｜>", "<｜tool_calls_end｜>"
CB, CE = "<｜tool_call_begin｜>", "<｜tool_call_end｜>"


def _invoke(name: str, params: dict[str, str]) -> str:
    body = "".join(f'<steptml:parameter name="{k}">{v}</steptml:parameter>' for k, v in params.items())
    return f'{CB}<steptml:invoke name="{name}">{body}</steptml:invoke>{CE}'


def test_typed_values_and_raw_strings() -> None:
    # vllm tests/tool_parsers/test_step3_tool_parser.py various_data_types_output, escaped_strings_output
    text = B + _invoke("create_issue", {
        "title": 'He said "hello"', "body": "C:\\Users\\file.txt\nline2",
        "labels": '["a", "b", "c"]', "assignee": '{"name": "value"}', "estimate_hours": "3.14",
    }) + E
    assert FORMAT.parse(text, SCHEMAS).calls == (ParsedCall("create_issue", {
        "title": 'He said "hello"', "body": "C:\\Users\\file.txt\nline2", "labels": ["a", "b", "c"],
        "assignee": {"name": "value"}, "estimate_hours": 3.14}),)


def test_mixed_section_keeps_the_unknown_call_in_place() -> None:
    unknown = _invoke("refresh", {})
    text = B + unknown + _invoke("read_file", {"path": "a"}) + E
    result = FORMAT.parse(text, SCHEMAS)
    assert result.calls == (ParsedCall("read_file", {"path": "a"}),)
    assert result.text == B + unknown + E


def test_not_deepseeks_tokens() -> None:
    # DeepSeek writes `▁` where Step-3 writes `_`: its section is not Step-3's.
    text = '<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>read_file\n```json\n{"path": "a"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>'
    assert FORMAT.parse(text, SCHEMAS).calls == ()
