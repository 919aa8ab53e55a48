"""StepFun Step-3 tool calls (`<｜tool_calls_begin｜>` + `<steptml:invoke name=…>`).

Owns: Step-3's section and call tokens (fullwidth bars, plain underscores:
not DeepSeek's `▁`), the optional `function<｜tool_sep｜>NAME` head before an
invoke, the steptml invoke/parameter markup, and its prompt. Values are raw
text typed by the offered schema (xml_values); a string value keeps its
edge whitespace (vllm tests/tool_parsers/test_step3_tool_parser.py
TestStep3ParameterWhitespace). Must not: use an XML parser or execute an
invoke cut off before it closes.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from proxy.formats.base import ParsedCall
from proxy.formats.block_format import BlockFormat
from proxy.formats.blocks import Block, section_block
from proxy.formats.json_scan import past_close, skip_space, valid_name
from proxy.formats.xml_values import convert, property_schema, render_value
from proxy.types import JSON

_SECTION = ("<｜tool_calls_begin｜>", "<｜tool_calls_end｜>")
_CALL = ("<｜tool_call_begin｜>", "<｜tool_call_end｜>")
_SEP = "<｜tool_sep｜>"
_HEAD = re.compile(r"function" + re.escape(_SEP) + r"[^\n<]*\s*")
_INVOKE = re.compile(r"<steptml:invoke\s+name=\"([^\"]*)\"\s*>")
_PARAMETER = re.compile(r"\s*<steptml:parameter\s+name=\"([^\"]*)\"\s*>")
_PARAM_CLOSE, _INVOKE_CLOSE = "</steptml:parameter>", "</steptml:invoke>"

_INSTRUCTIONS = """\
# Tools
You may call one or more tools. The tools, in JSON Schema format:

{tools}

To call tools, write them in this format:
<｜tool_calls_begin｜><｜tool_call_begin｜>function<｜tool_sep｜><steptml:invoke name="TOOL_NAME">\
<steptml:parameter name="PARAMETER_NAME">VALUE</steptml:parameter></steptml:invoke><｜tool_call_end｜>\
<｜tool_calls_end｜>
Write each further call as another <｜tool_call_begin｜>...<｜tool_call_end｜> before <｜tool_calls_end｜>."""


def _value_close(text: str, start: int) -> int | None:
    """The `</steptml:parameter>` that markup, not the value, puts there."""
    pos = start
    while (at := text.find(_PARAM_CLOSE, pos)) >= 0:
        after = skip_space(text, at + len(_PARAM_CLOSE))
        if text.startswith(_INVOKE_CLOSE, after) or _PARAMETER.match(text, after):
            return at
        pos = at + 1
    return None


def _invoke(text: str, pos: int, tools: Mapping[str, JSON]) -> tuple[ParsedCall, int] | None:
    """`<｜tool_call_begin｜>` [head] invoke [`<｜tool_call_end｜>`] at pos."""
    if not text.startswith(_CALL[0], pos):
        return None
    pos = skip_space(text, pos + len(_CALL[0]))
    head = _HEAD.match(text, pos)
    pos = head.end() if head is not None else pos
    match = _INVOKE.match(text, pos)
    if match is None or not valid_name(match.group(1)):
        return None
    name, schema = match.group(1), tools.get(match.group(1), {})
    arguments: dict[str, Any] = {}
    pos = match.end()
    while (param := _PARAMETER.match(text, pos)) is not None:
        close = _value_close(text, param.end())
        if close is None:
            return None
        arguments[param.group(1)] = convert(text[param.end() : close],
                                            property_schema(schema, param.group(1)))
        pos = close + len(_PARAM_CLOSE)
    pos = skip_space(text, pos)
    if not text.startswith(_INVOKE_CLOSE, pos):
        return None
    return ParsedCall(name, arguments), past_close(text, pos + len(_INVOKE_CLOSE), _CALL[1])


def _parse_at(text: str, at: int, tools: Mapping[str, JSON]) -> Block | None:
    pos = skip_space(text, at + len(_SECTION[0]))
    parts: list[tuple[ParsedCall, str]] = []
    while (found := _invoke(text, pos, tools)) is not None:
        parts.append((found[0], text[pos : found[1]]))
        pos = skip_space(text, found[1])
        if text.startswith(_SEP, pos):
            pos = skip_space(text, pos + len(_SEP))
    if not parts or text.startswith(_CALL[0], pos):
        return None  # no call, or one cut off: the section stays text
    return section_block(text, at, past_close(text, pos, _SECTION[1]), parts, tools)


class Step3(BlockFormat):
    name = "step3"
    markers: tuple[str, ...] = (_SECTION[0],)
    instructions = _INSTRUCTIONS

    def render_calls(self, calls: Sequence[ParsedCall]) -> str:
        return _SECTION[0] + "".join(_render_call(call) for call in calls) + _SECTION[1]

    parse_at = staticmethod(_parse_at)


def _render_call(call: ParsedCall) -> str:
    params = "".join(
        f'<steptml:parameter name="{key}">{render_value(value)}</steptml:parameter>'
        for key, value in call.arguments.items()
    )
    return (f'{_CALL[0]}function{_SEP}<steptml:invoke name="{call.name}">{params}'
            f"{_INVOKE_CLOSE}{_CALL[1]}")


FORMAT = Step3()
