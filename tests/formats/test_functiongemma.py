"""FunctionGemma (`<start_function_call>call:NAME{k:<escape>v<escape>}<end_function_call>`)."""

from __future__ import annotations

from sample_corpus import SCHEMAS

from proxy.formats.base import ParsedCall
from proxy.formats.functiongemma import FORMAT


def test_no_arguments_floats_and_unicode() -> None:
    # ollama model/parsers/functiongemma_test.go tool_call_with_no_arguments, float_argument,
    # unicode_content_and_arguments
    text = ("こんにちは <start_function_call>call:calculate{}<end_function_call>"
            "<start_function_call>call:create_issue{title:<escape>日本語<escape>,"
            "estimate_hours:3.14}<end_function_call>")
    result = FORMAT.parse(text, SCHEMAS)
    assert result.calls == (ParsedCall("calculate", {}),
                            ParsedCall("create_issue", {"title": "日本語", "estimate_hours": 3.14}))
    assert result.text == "こんにちは "


def test_a_partial_tag_in_prose_is_prose() -> None:
    # ollama functiongemma_test.go partial_start_tag_in_content
    assert FORMAT.parse("Hello <start world", SCHEMAS).calls == ()


def test_prompt_declares_each_tool_and_result_is_a_response_block() -> None:
    tools = [{"type": "function", "function": {"name": n}} for n in ("a_tool", "b_tool")]
    prompt = FORMAT.render_tools(tools)
    assert prompt.count("<start_function_declaration>") == 2
    assert FORMAT.render_result("a_tool", "ok") == (
        "<start_function_response>response:a_tool{value:<escape>ok<escape>}<end_function_response>")
