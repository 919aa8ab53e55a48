from __future__ import annotations

from sample_corpus import (
    SCHEMAS,
)

from proxy.formats.base import ParsedCall
from proxy.formats.glm45 import FORMAT


def test_two_calls_typed_values_and_prose() -> None:
    text = (
        "Let me check.\n<tool_call>search_docs\n<arg_key>query</arg_key>\n<arg_value>sso</arg_value>\n"
        "<arg_key>max_results</arg_key>\n<arg_value>4</arg_value>\n</tool_call>\n"
        "<tool_call>create_issue<arg_key>title</arg_key><arg_value>7</arg_value>"
        '<arg_key>labels</arg_key><arg_value>["a"]</arg_value></tool_call>\nThanks.'
    )
    result = FORMAT.parse(text, SCHEMAS)
    assert result.calls == (
        ParsedCall("search_docs", {"query": "sso", "max_results": 4}),
        ParsedCall("create_issue", {"title": "7", "labels": ["a"]}),
    )
    assert result.text is not None and result.text.split() == ["Let", "me", "check.", "Thanks."]


def test_unknown_tool_stays_verbatim() -> None:
    text = "<tool_call>book_flight\n<arg_key>to</arg_key>\n<arg_value>JFK</arg_value>\n</tool_call>"
    result = FORMAT.parse(text, SCHEMAS)
    assert result.calls == ()
    assert result.text == text


def test_truncated_stays_text() -> None:
    for text in (
        "<tool_call>bash\n<arg_key>command</arg_key>\n<arg_value>rm -rf bu",
        "<tool_call>write_file\n<arg_key>path</arg_key>\n<arg_value>a</arg_value>\n",
    ):
        result = FORMAT.parse(text, SCHEMAS)
        assert (result.calls, result.text) == ((), text)


def test_missing_close_with_required_arguments_is_recovered() -> None:
    text = "<tool_call>read_file\n<arg_key>path</arg_key>\n<arg_value>a.txt</arg_value>\n"
    assert FORMAT.parse(text, SCHEMAS).calls == (ParsedCall("read_file", {"path": "a.txt"}),)


def test_hermes_and_qwen_shapes_are_not_glm() -> None:
    for text in (
        '<tool_call>\n{"name": "read_file", "arguments": {"path": "a"}}\n</tool_call>',
        "<tool_call>\n<function=read_file>\n<parameter=path>\na\n</parameter>\n</function>\n</tool_call>",
    ):
        assert FORMAT.parse(text, SCHEMAS).calls == ()
