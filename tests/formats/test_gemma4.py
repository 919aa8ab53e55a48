"""Gemma 4 (`<|tool_call>call:NAME{...}<tool_call|>`): what the corpus cases do not show."""

from __future__ import annotations

from sample_corpus import SCHEMAS

from proxy.formats.base import ParsedCall
from proxy.formats.gemma4 import FORMAT

Q = '<|"|>'


def test_nested_objects_arrays_null_and_json_strings() -> None:
    # ollama model/parsers/gemma4_test.go TestGemma4Parser/tool_call_with_null_arg,
    # tool_call_with_array_of_objects_and_mixed_quotes, tool_call_with_mixed_raw_and_gemma_quoted_values
    text = (f'<|tool_call>call:create_issue{{title:"raw \\"quoted\\"",body:null,'
            f'labels:[{{title:{Q}step "one"{Q},done:false}}],estimate_hours:-1.5e2}}<tool_call|>')
    result = FORMAT.parse(text, SCHEMAS)
    assert result.calls == (ParsedCall("create_issue", {
        "title": 'raw "quoted"', "body": None,
        "labels": [{"title": 'step "one"', "done": False}], "estimate_hours": -150.0}),)
    assert result.text is None


def test_multiline_items_with_spacing() -> None:
    # ollama gemma4_test.go tool_call_edit_with_array_of_objects_issue_comment_spacing
    text = (f"<|tool_call>call:write_file{{path:{Q}a.md{Q},\n   content:{Q}# Title\\n\\n"
            f"### 1. Model{Q},\n}}<tool_call|>")
    (call,) = FORMAT.parse(text, SCHEMAS).calls
    assert call.arguments == {"path": "a.md", "content": "# Title\\n\\n### 1. Model"}


def test_hostile_nesting_and_unbalanced_input_stay_text() -> None:
    for text in ("<|tool_call>call:bash{command:" + "[" * 5000 + "]" * 5000 + "}",
                 "<|tool_call>call:bash{a:1" * 2000,
                 f"<|tool_call>call:bash{{command:{Q}rm -rf /",
                 "<|tool_call>call:bash{command:1,,}<tool_call|>"):
        result = FORMAT.parse(text, SCHEMAS)
        assert result.calls == ()
        assert result.text == text


def test_prompt_and_result_in_gemmas_own_markup() -> None:
    prompt = FORMAT.render_tools([{"type": "function", "function": {"name": "get_weather"}}])
    assert "get_weather" in prompt and "<|tool_call>call:" in prompt and Q in prompt
    result = FORMAT.render_result("get_weather", "12 C")
    assert result == f"<|tool_response>response:get_weather{{value:{Q}12 C{Q}}}<tool_response|>"


def test_a_string_holding_the_delimiter_is_written_as_json() -> None:
    call = ParsedCall("bash", {"command": f"echo {Q}"})
    assert FORMAT.parse(FORMAT.render_calls([call]), SCHEMAS).calls == (call,)
