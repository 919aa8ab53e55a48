"""OLMo 3 (`<function_calls>` + one Python call per line)."""

from __future__ import annotations

from sample_corpus import SCHEMAS

from proxy.formats.base import ParsedCall
from proxy.formats.olmo3 import FORMAT


def test_a_call_spanning_lines_and_no_arguments() -> None:
    # ollama model/parsers/olmo3_test.go tool call with no arguments, tool call with nested dict
    text = ('<function_calls>\ncalculate()\ncreate_issue(\n    title="x",\n'
            '    assignee={"name": "John", "email": None},\n)\n</function_calls>')
    assert FORMAT.parse(text, SCHEMAS).calls == (
        ParsedCall("calculate", {}),
        ParsedCall("create_issue", {"title": "x", "assignee": {"name": "John", "email": None}}))


def test_code_is_never_a_call() -> None:
    for body in ("import os", "bash(command=os.system('rm'))", "bash('ls')", "x = bash(command='ls')",
                 "[bash(command=c) for c in cmds]"):
        text = f"<function_calls>{body}</function_calls>"
        assert FORMAT.parse(text, SCHEMAS).calls == (), body


def test_an_unclosed_block_stops_at_the_next_opener() -> None:
    text = '<function_calls>bash(command="ls"\n<function_calls>read_file(path="a")</function_calls>'
    result = FORMAT.parse(text, SCHEMAS)
    assert result.calls == (ParsedCall("read_file", {"path": "a"}),)
    assert result.text == '<function_calls>bash(command="ls"\n'
