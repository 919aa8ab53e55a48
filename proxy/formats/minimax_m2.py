"""MiniMax-M2 tool calls (`<minimax:tool_call>` + `<invoke name=…>`).

Owns: parsing and rendering MiniMax's invoke/parameter markup; values are raw
text typed by the offered schema (xml_values). Must not: use an XML parser
(values are unescaped) or execute an invoke cut off before it is complete.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from proxy.formats.base import ParsedCall
from proxy.formats.block_format import BlockFormat
from proxy.formats.blocks import Block, find_from, section_block
from proxy.formats.glm45 import required_present
from proxy.formats.json_scan import past_close, skip_space, valid_name
from proxy.formats.qwen3_coder_xml import strip_newlines
from proxy.formats.xml_values import convert, property_schema, render_value
from proxy.types import JSON

_OPEN, _CLOSE = "<minimax:tool_call>", "</minimax:tool_call>"
_INVOKE = re.compile(r"\s*<invoke\s+name\s*=\s*[\"']?([^\"'>\s]+)[\"']?\s*>")
_PARAMETER = re.compile(r"\s*<parameter\s+name\s*=\s*[\"']?([^\"'>\s]+)[\"']?\s*>")
_PARAM_CLOSE, _INVOKE_CLOSE = "</parameter>", "</invoke>"

_INSTRUCTIONS = """\
# Tools
You may call one or more tools to assist with the user query.
Here are the tools available in JSONSchema format:

<tools>
{tools}
</tools>

When making tool calls, use XML format to invoke tools and pass parameters:

<minimax:tool_call>
<invoke name="tool-name-1">
<parameter name="param-key-1">param-value-1</parameter>
<parameter name="param-key-2">param-value-2</parameter>
...
</invoke>
</minimax:tool_call>"""


def _value_close(text: str, start: int) -> int | None:
    pos = start
    while (at := find_from(text, _PARAM_CLOSE, pos)) >= 0:  # remembered across starts
        after = skip_space(text, at + len(_PARAM_CLOSE))
        if (
            after == len(text)
            or text.startswith((_INVOKE_CLOSE, _CLOSE), after)
            or _PARAMETER.match(text, after)
        ):
            return at
        pos = at + 1
    return None


def _invoke(text: str, pos: int, tools: Mapping[str, JSON]) -> tuple[ParsedCall, int] | None:
    head = _INVOKE.match(text, pos)
    if head is None or not valid_name(head.group(1)):
        return None
    name = head.group(1)
    schema = tools.get(name, {})
    arguments: dict[str, Any] = {}
    pos = head.end()
    while (param := _PARAMETER.match(text, pos)) is not None:
        close = _value_close(text, param.end())
        if close is None:
            return None
        key = param.group(1)
        raw = strip_newlines(text[param.end() : close])
        arguments[key] = convert(raw, property_schema(schema, key))
        pos = close + len(_PARAM_CLOSE)
    end = skip_space(text, pos)
    if text.startswith(_INVOKE_CLOSE, end):
        return ParsedCall(name, arguments), end + len(_INVOKE_CLOSE)
    if (
        text.startswith(_CLOSE, end)
        or _INVOKE.match(text, end)
        or (end == len(text) and required_present(schema, arguments))
    ):
        return ParsedCall(name, arguments), end
    return None


def _parse_at(text: str, at: int, tools: Mapping[str, JSON]) -> Block | None:
    pos = at + len(_OPEN)
    parts: list[tuple[ParsedCall, str]] = []
    while (found := _invoke(text, pos, tools)) is not None:
        parts.append((found[0], text[pos : found[1]].strip()))
        pos = found[1]
    if not parts or _INVOKE.match(text, pos):
        # No invoke, or one that is cut off: the section stays text.
        return None
    return section_block(text, at, past_close(text, pos, _CLOSE), parts, tools)


class MinimaxM2(BlockFormat):
    name = "minimax_m2"
    markers: tuple[str, ...] = (_OPEN,)
    instructions = _INSTRUCTIONS
    result_template = "<response>{content}</response>"

    def render_calls(self, calls: Sequence[ParsedCall]) -> str:
        return f"{_OPEN}\n" + "".join(_render_call(call) for call in calls) + _CLOSE

    parse_at = staticmethod(_parse_at)


def _render_call(call: ParsedCall) -> str:
    params = "".join(
        f'<parameter name="{key}">{render_value(value)}</parameter>\n'
        for key, value in call.arguments.items()
    )
    return f'<invoke name="{call.name}">\n{params}</invoke>\n'


FORMAT = MinimaxM2()
