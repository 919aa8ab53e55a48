"""Kimi K3 tool calls in its XTML channels (`<|open|>tools<|sep|>` ... `<|close|>tools<|sep|>`).

Owns: the tools channel, its `<|open|>call tool="NAME" index="N"<|sep|>` calls
and their `<|open|>argument key="K" type="T"<|sep|>VALUE<|close|>argument<|sep|>`
arguments (vLLM `kimi_k3_tool_parser.py`, SGLang `kimik3_detector.py` and
`test_kimik3_detector.py`): a `string` value is the raw text, any other type
is JSON (kept as written when it does not decode); attribute values are
escaped (`&quot;`, `&amp;`). The response channel's and the message's markers
are control tokens: only the response's text is content. Must not: execute a
call cut off before its close, or handle the think channel (reasoning).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from proxy.formats.base import ParsedCall
from proxy.formats.block_format import BlockFormat
from proxy.formats.blocks import Block, dumps, section_block
from proxy.formats.json_scan import past_close, skip_space, valid_name
from proxy.formats.jsonish import loads_strict
from proxy.types import JSON

_TOOLS, _TOOLS_CLOSE = "<|open|>tools<|sep|>", "<|close|>tools<|sep|>"
_CALL = re.compile(r"\s*<\|open\|>call\s+([^<]*?)<\|sep\|>")
_CALL_CLOSE = "<|close|>call<|sep|>"
_ARGUMENT = re.compile(r"\s*<\|open\|>argument\s+([^<]*?)<\|sep\|>")
_ARGUMENT_CLOSE = "<|close|>argument<|sep|>"
_ATTR = re.compile(r'(\w+)="([^"]*)"')
_RESPONSE = ("<|open|>response<|sep|>", "<|close|>response<|sep|>")
_MESSAGE_CLOSE = "<|close|>message<|sep|>"

_INSTRUCTIONS = """\
# Tools
{tools}

To call tools, after your response write a tools channel with one call per tool and one \
argument element per argument; a string argument is written as it is, any other type as JSON:
<|open|>tools<|sep|><|open|>call tool="FUNCTION_NAME" index="1"<|sep|>\
<|open|>argument key="ARGUMENT" type="string"<|sep|>value<|close|>argument<|sep|>\
<|close|>call<|sep|><|close|>tools<|sep|>"""


def _attrs(raw: str) -> dict[str, str]:
    """Attribute values, unescaped in the reverse order of the template's escaping."""
    return {k: v.replace("&quot;", '"').replace("&amp;", "&") for k, v in _ATTR.findall(raw)}


def _value(raw: str, kind: str) -> Any:
    if kind == "string":
        return raw
    decoded = loads_strict(raw.strip())
    return raw if decoded is None and raw.strip() != "null" else decoded


def _call(text: str, pos: int) -> tuple[ParsedCall, int] | None:
    head = _CALL.match(text, pos)
    name = _attrs(head.group(1)).get("tool", "") if head is not None else ""
    if head is None or not valid_name(name):
        return None
    arguments: dict[str, Any] = {}
    pos = head.end()
    while (arg := _ARGUMENT.match(text, pos)) is not None:
        close = text.find(_ARGUMENT_CLOSE, arg.end())
        if close < 0:
            return None  # a value cut off
        attrs = _attrs(arg.group(1))
        arguments[attrs.get("key", "")] = _value(text[arg.end() : close],
                                                 attrs.get("type", "string"))
        pos = close + len(_ARGUMENT_CLOSE)
    end = skip_space(text, pos)
    if not text.startswith(_CALL_CLOSE, end):
        return None
    return ParsedCall(name, arguments), end + len(_CALL_CLOSE)


def _parse_at(text: str, at: int, tools: Mapping[str, JSON]) -> Block | None:
    pos = at + len(_TOOLS)
    parts: list[tuple[ParsedCall, str]] = []
    while (found := _call(text, pos)) is not None:
        parts.append((found[0], text[pos : found[1]].strip()))
        pos = found[1]
    if not parts or _CALL.match(text, pos):
        return None  # no call, or one cut off: the channel stays text
    return section_block(text, at, past_close(text, pos, _TOOLS_CLOSE), parts, tools)


def _type(value: Any) -> str:
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    return "null" if value is None else "array" if isinstance(value, list) else "object"


def _escape(value: str) -> str:
    return value.replace("&", "&amp;").replace('"', "&quot;")


def _render_call(index: int, call: ParsedCall) -> str:
    args = "".join(
        f'<|open|>argument key="{_escape(key)}" type="{_type(value)}"<|sep|>'
        f"{value if isinstance(value, str) else dumps(value)}{_ARGUMENT_CLOSE}"
        for key, value in call.arguments.items()
    )
    return f'<|open|>call tool="{_escape(call.name)}" index="{index}"<|sep|>{args}{_CALL_CLOSE}'


class KimiK3(BlockFormat):
    name = "kimi_k3"
    markers: tuple[str, ...] = (_TOOLS,)
    controls: tuple[str, ...] = (*_RESPONSE, _MESSAGE_CLOSE)

    instructions = _INSTRUCTIONS

    def render_calls(self, calls: Sequence[ParsedCall]) -> str:
        body = "".join(_render_call(i, call) for i, call in enumerate(calls, start=1))
        return f"{_TOOLS}{body}{_TOOLS_CLOSE}"

    parse_at = staticmethod(_parse_at)


FORMAT = KimiK3()
