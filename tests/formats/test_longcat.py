"""LongCat (`<longcat_tool_call>{"name", "arguments"}</longcat_tool_call>`)."""

from __future__ import annotations

from sample_corpus import SCHEMAS

from proxy.formats import recover
from proxy.formats.base import ParsedCall
from proxy.formats.longcat import FORMAT


def test_not_taken_by_hermes() -> None:
    # vllm vllm/tool_parsers/longcat_tool_parser.py: Hermes' shape, its own tags.
    text = '<longcat_tool_call>{"name": "read_file", "arguments": {"path": "a"}}</longcat_tool_call>'
    result, name = recover(text, SCHEMAS)
    assert (result.calls, result.text, name) == ((ParsedCall("read_file", {"path": "a"}),), None,
                                                  "longcat")


def test_parameters_alias_and_string_arguments() -> None:
    text = ('<longcat_tool_call>{"name": "bash", "parameters": {"command": "ls"}}</longcat_tool_call>'
            '<longcat_tool_call>{"name": "read_file", "arguments": "{\\"path\\": \\"b\\"}"}'
            "</longcat_tool_call>")
    assert FORMAT.parse(text, SCHEMAS).calls == (ParsedCall("bash", {"command": "ls"}),
                                                 ParsedCall("read_file", {"path": "b"}))


def test_result_wrapper() -> None:
    assert FORMAT.render_result("bash", "ok") == "<longcat_tool_response>\nok\n</longcat_tool_response>"
