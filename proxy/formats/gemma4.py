"""Gemma 4 tool calls (`<|tool_call>call:NAME{key:<|"|>text<|"|>}<tool_call|>`).

Owns: Gemma 4's tags around gemma_args' call syntax, the `<|"|>` string
delimiter, dropping the stray close tags Gemma 4 repeats after a call
(ollama PR #15370) and the `<|tool_response>` it may write next, and Gemma 4's
prompt and result shapes. Reasoning (`<|channel>...<channel|>`) is
formats.detect's. Must not: unescape a delimited string or execute a call
cut off before its closing brace.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from proxy.formats.base import ParsedCall
from proxy.formats.block_format import BlockFormat
from proxy.formats.blocks import Block
from proxy.formats.gemma_args import call_block, render_call, render_value
from proxy.types import JSON

_TAGS = ("<|tool_call>", "<tool_call|>")
_DELIM = '<|"|>'
_RESPONSE = "<|tool_response>"

_INSTRUCTIONS = """\
You can call the following tools (JSON Schema declarations):
{tools}

To call a tool, write <|tool_call>call:TOOL_NAME{{key:VALUE,...}}<tool_call|>. Write every \
string value between <|"|> delimiters, numbers and booleans bare, for example:
<|tool_call>call:get_weather{{location:<|"|>Paris<|"|>,days:3}}<tool_call|>"""


class Gemma4(BlockFormat):
    name = "gemma4"
    markers: tuple[str, ...] = (_TAGS[0],)
    instructions = _INSTRUCTIONS

    def parse_at(self, text: str, at: int, tools: Mapping[str, JSON]) -> Block | None:
        return call_block(text, at, _TAGS, _DELIM, tools, noise=(_TAGS[1], _RESPONSE))

    def render_calls(self, calls: Sequence[ParsedCall]) -> str:
        return "".join(f"{_TAGS[0]}{render_call(call, _DELIM)}{_TAGS[1]}" for call in calls)

    def render_result(self, name: str, content: str) -> str:
        body = render_value({"value": content}, _DELIM)
        return f"{_RESPONSE}response:{name}{body}<tool_response|>"


FORMAT = Gemma4()
