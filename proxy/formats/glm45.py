"""GLM-4.5 / 4.6 tool calls (`<tool_call>NAME` + `<arg_key>`/`<arg_value>` pairs).

Owns: parsing and rendering GLM's pair markup; values are raw text typed by
the offered schema (xml_values). Must not: take `<tool_call>{` (Hermes) or
`<tool_call><function=` (Qwen3-Coder) for a GLM call, or execute a call cut
off before its arguments are complete.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from proxy.formats.base import ParsedCall
from proxy.formats.block_format import BlockFormat
from proxy.formats.blocks import Block
from proxy.formats.json_scan import skip_space, valid_name
from proxy.formats.qwen3_coder_xml import strip_newlines
from proxy.formats.xml_values import convert, property_schema, render_value
from proxy.types import JSON

_OPEN, _CLOSE = "<tool_call>", "</tool_call>"
_NAME = re.compile(r"\s*([^\s<>{}\[\]\"']+)[ \t]*(?=\n|<arg_key>|</tool_call>|$)")
_KEY = re.compile(r"\s*<arg_key>([^<\n]*)</arg_key>\s*<arg_value>")
_VALUE_CLOSE = "</arg_value>"

_INSTRUCTIONS = """\
# Tools

You may call one or more functions to assist with the user query.

You are provided with function signatures within <tools></tools> XML tags:
<tools>
{tools}
</tools>

For each function call, output the function name and arguments within the following XML format:
<tool_call>{{function-name}}
<arg_key>{{arg-key-1}}</arg_key>
<arg_value>{{arg-value-1}}</arg_value>
<arg_key>{{arg-key-2}}</arg_key>
<arg_value>{{arg-value-2}}</arg_value>
...
</tool_call>"""


def required_present(schema: JSON, arguments: Mapping[str, Any]) -> bool:
    """Evidence that pair-style arguments are complete without a close tag."""
    required = schema.get("required")
    return isinstance(required, list) and all(key in arguments for key in required)


def _value_close(text: str, start: int) -> int | None:
    """The `</arg_value>` that the markup puts there, not one inside the value."""
    pos = start
    while (at := text.find(_VALUE_CLOSE, pos)) >= 0:
        after = skip_space(text, at + len(_VALUE_CLOSE))
        if after == len(text) or text.startswith(("<arg_key>", _CLOSE, _OPEN), after):
            return at
        pos = at + 1
    return None


def _pairs(text: str, pos: int, schema: JSON) -> tuple[dict[str, Any], int]:
    """The key/value pairs from pos, and where they stop."""
    arguments: dict[str, Any] = {}
    while (key := _KEY.match(text, pos)) is not None:
        close = _value_close(text, key.end())
        if close is None:
            break
        name = key.group(1).strip()
        raw = strip_newlines(text[key.end() : close])
        arguments[name] = convert(raw, property_schema(schema, name))
        pos = close + len(_VALUE_CLOSE)
    return arguments, pos


def _parse_at(text: str, at: int, tools: Mapping[str, JSON]) -> Block | None:
    head = _NAME.match(text, at + len(_OPEN))
    if head is None or not valid_name(head.group(1)):
        return None
    name = head.group(1)
    arguments, pos = _pairs(text, head.end(), tools.get(name, {}))
    end = skip_space(text, pos)
    if text.startswith(_CLOSE, end):
        end += len(_CLOSE)
    elif not (
        text.startswith(_OPEN, end)
        or (end == len(text) and required_present(tools.get(name, {}), arguments))
    ):
        return None
    if name not in tools:
        return Block(at, end, (), text[at:end])
    return Block(at, end, (ParsedCall(name, arguments),))


class Glm45(BlockFormat):
    name = "glm45"
    markers: tuple[str, ...] = (_OPEN,)
    instructions = _INSTRUCTIONS
    result_template = "<tool_response>\n{content}\n</tool_response>"

    def render_calls(self, calls: Sequence[ParsedCall]) -> str:
        return "\n".join(_render_call(call) for call in calls)

    parse_at = staticmethod(_parse_at)


def _render_call(call: ParsedCall) -> str:
    pairs = "".join(
        f"<arg_key>{key}</arg_key>\n<arg_value>{render_value(value)}</arg_value>\n"
        for key, value in call.arguments.items()
    )
    return f"{_OPEN}{call.name}\n{pairs}{_CLOSE}"


FORMAT = Glm45()
