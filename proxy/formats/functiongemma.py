"""FunctionGemma tool calls (`<start_function_call>call:NAME{k:<escape>v<escape>}<end_function_call>`).

Owns: FunctionGemma's tags around gemma_args' call syntax, its `<escape>`
string delimiter, and its prompt and result shapes (the
`<start_function_declaration>` / `<start_function_response>` tokens). Must
not: unescape a delimited string or execute a call cut off before its
closing brace.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from proxy.formats.base import ParsedCall
from proxy.formats.block_format import BlockFormat
from proxy.formats.blocks import Block
from proxy.formats.gemma_args import call_block, render_call, render_value
from proxy.types import JSON

_TAGS = ("<start_function_call>", "<end_function_call>")
_DELIM = "<escape>"

_INSTRUCTIONS = """\
You are a model that can do function calling with the following functions
<start_function_declaration>{tools}<end_function_declaration>

To call a function, write <start_function_call>call:FUNCTION_NAME{{key:VALUE,...}}<end_function_call>, \
every string value between <escape> tokens, numbers and booleans bare, for example:
<start_function_call>call:get_weather{{city:<escape>Paris<escape>}}<end_function_call>"""


class FunctionGemma(BlockFormat):
    name = "functiongemma"
    markers: tuple[str, ...] = (_TAGS[0],)
    instructions = _INSTRUCTIONS
    tool_separator = "<end_function_declaration><start_function_declaration>"

    def parse_at(self, text: str, at: int, tools: Mapping[str, JSON]) -> Block | None:
        return call_block(text, at, _TAGS, _DELIM, tools)

    def render_calls(self, calls: Sequence[ParsedCall]) -> str:
        return "".join(f"{_TAGS[0]}{render_call(call, _DELIM)}{_TAGS[1]}" for call in calls)

    def render_result(self, name: str, content: str) -> str:
        body = render_value({"value": content}, _DELIM)
        return f"<start_function_response>response:{name}{body}<end_function_response>"


FORMAT = FunctionGemma()
