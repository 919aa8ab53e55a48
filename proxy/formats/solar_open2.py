"""Upstage Solar Open 2 tool calls (`<|tool_call:start|>NAME` + tool_arg pairs).

Owns: one call per block, `<|tool_call:start|>NAME` newline, then per argument
`<|tool_arg:start|>KEY<|tool_arg:value|>VALUE<|tool_arg:end|>`, then
`<|tool_call:end|>` (vLLM `solar_open2_tool_parser.py`). Values are raw text
typed by the offered schema (xml_values); a key the schema does not know stays
a string. A dropped end token is bounded by the next token, as vLLM's parser
does, so it cannot swallow what follows. Must not: execute a value cut off at
the end of the text, or touch the `<|think:…|>` reasoning markers (those are
reasoning, removed before any format parses).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from proxy.formats.base import ParsedCall
from proxy.formats.block_format import BlockFormat
from proxy.formats.blocks import Block
from proxy.formats.glm45 import required_present
from proxy.formats.json_scan import skip_space, valid_name
from proxy.formats.xml_values import convert, property_schema, render_value
from proxy.types import JSON

_CALL, _CALL_END = "<|tool_call:start|>", "<|tool_call:end|>"
_ARG, _VALUE, _ARG_END = "<|tool_arg:start|>", "<|tool_arg:value|>", "<|tool_arg:end|>"
# What may stand where a value's end token was dropped (vLLM's stop sentinels): one
# search finds the first, so a hostile run of cut-off calls costs no rescans.
_VALUE_STOPS = re.compile("|".join(re.escape(t) for t in (_ARG_END, _ARG, _CALL_END, _CALL)))

_INSTRUCTIONS = """\
# Tools

You may call one or more functions to assist with the user query.
Here are the available functions:
{tools}

To call a function, write its name after <|tool_call:start|>, then one line per argument, \
then <|tool_call:end|>:
<|tool_call:start|>FUNCTION_NAME
<|tool_arg:start|>ARGUMENT<|tool_arg:value|>value<|tool_arg:end|>
<|tool_call:end|>"""


def _first_stop(text: str, start: int) -> tuple[int, str] | None:
    found = _VALUE_STOPS.search(text, start)
    return (found.start(), found.group()) if found is not None else None


def _arguments(text: str, pos: int, schema: JSON) -> tuple[dict[str, Any], int] | None:
    """The arguments from pos and where they stop; None when a value is cut off."""
    arguments: dict[str, Any] = {}
    while text.startswith(_ARG, pos := skip_space(text, pos)):
        value = text.find(_VALUE, pos)
        stop = _first_stop(text, pos + len(_ARG))
        if value < 0 or stop is None or stop[0] < value:
            return None  # a key that never gets its value
        key = text[pos + len(_ARG) : value].strip()
        end = _first_stop(text, value + len(_VALUE))
        if end is None:
            return None  # cut off inside the value
        # The first of a repeated key wins, as a stream must commit to it.
        if key not in arguments:
            arguments[key] = convert(text[value + len(_VALUE) : end[0]],
                                     property_schema(schema, key))
        pos = end[0] + len(_ARG_END) if end[1] == _ARG_END else end[0]
    return arguments, pos


def _parse_at(text: str, at: int, tools: Mapping[str, JSON]) -> Block | None:
    start = at + len(_CALL)
    newline = text.find("\n", start)
    name = text[start:newline].strip() if newline >= 0 else ""
    if not valid_name(name):
        return None
    found = _arguments(text, newline + 1, tools.get(name, {}))
    if found is None:
        return None
    arguments, pos = found
    if text.startswith(_CALL_END, pos):
        end = pos + len(_CALL_END)
    elif text.startswith(_CALL, pos) or (pos == len(text) and required_present(
            tools.get(name, {}), arguments)):
        end = pos  # the end token was dropped: the next call, or complete arguments
    else:
        return None
    call = ParsedCall(name, arguments)
    return Block(at, end, (call,)) if name in tools else Block(at, end, (), text[at:end])


class SolarOpen2(BlockFormat):
    name = "solar_open2"
    markers: tuple[str, ...] = (_CALL,)
    instructions = _INSTRUCTIONS

    def render_calls(self, calls: Sequence[ParsedCall]) -> str:
        return "\n".join(_render_call(call) for call in calls)

    parse_at = staticmethod(_parse_at)


def _render_call(call: ParsedCall) -> str:
    args = "".join(
        f"{_ARG}{key}{_VALUE}{render_value(value)}{_ARG_END}\n"
        for key, value in call.arguments.items()
    )
    return f"{_CALL}{call.name}\n{args}{_CALL_END}"


FORMAT = SolarOpen2()
