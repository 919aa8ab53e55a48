"""DeepSeek V3.2 tool calls in DSML markup (`<｜DSML｜function_calls>`).

Owns: the XML-like DSML shape, for V3.2 and for V4 (deepseek_v4, which only
renames the wrapper element): `<｜DSML｜invoke name="NAME">` children with
`<｜DSML｜parameter name="KEY" string="true|false">` values, where `true`
marks a raw string and `false` a JSON value (kept as written when it does not
decode). Must not: use an XML parser (values are raw) or execute an invoke
that is cut off.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from proxy.formats.base import ParsedCall, ParseResult
from proxy.formats.blocks import Block, dumps, find_blocks, section_block, splice, tool_list
from proxy.formats.json_scan import valid_name
from proxy.formats.jsonish import loads_lenient
from proxy.types import JSON, ToolDef

_BAR = "[｜|]"
_INVOKE = re.compile(rf"\s*<{_BAR}DSML{_BAR}invoke\s+name\s*=\s*\"([^\"]+)\"\s*>")
_INVOKE_CLOSE = re.compile(rf"\s*</{_BAR}DSML{_BAR}invoke>")
_PARAM = re.compile(
    rf"\s*<{_BAR}DSML{_BAR}parameter\s+name\s*=\s*\"([^\"]+)\""
    r"(?:\s+string\s*=\s*\"(true|false)\")?\s*>"
)
_PARAM_CLOSE = re.compile(f"</{_BAR}DSML{_BAR}parameter>")

_INSTRUCTIONS = """\
## Tools

You have access to the following tools:
{tools}

To call tools, write:
<｜DSML｜function_calls>
<｜DSML｜invoke name="FUNCTION_NAME">
<｜DSML｜parameter name="ARGUMENT" string="true">a string value</｜DSML｜parameter>
<｜DSML｜parameter name="OTHER" string="false">a JSON value such as 3, true or ["a"]</｜DSML｜parameter>
</｜DSML｜invoke>
</｜DSML｜function_calls>"""


def _value_close(text: str, start: int, wrapper_close: re.Pattern[str]) -> re.Match[str] | None:
    """The parameter close tag that the markup puts there, not one inside the value."""
    for close in _PARAM_CLOSE.finditer(text, start):
        after = close.end()
        if after == len(text.rstrip()) or any(
            tag.match(text, after) for tag in (_PARAM, _INVOKE_CLOSE, wrapper_close)
        ):
            return close
    return None


def _value(raw: str, string: str | None) -> Any:
    if string != "false":
        return raw
    decoded = loads_lenient(raw.strip())
    return raw if decoded is None else decoded[0]


def _invoke(text: str, pos: int, wrapper_close: re.Pattern[str]) -> tuple[ParsedCall, int] | None:
    head = _INVOKE.match(text, pos)
    if head is None or not valid_name(head.group(1)):
        return None
    arguments: dict[str, Any] = {}
    pos = head.end()
    while (param := _PARAM.match(text, pos)) is not None:
        close = _value_close(text, param.end(), wrapper_close)
        if close is None:
            return None
        arguments[param.group(1)] = _value(text[param.end() : close.start()], param.group(2))
        pos = close.end()
    end = _INVOKE_CLOSE.match(text, pos)
    return (ParsedCall(head.group(1), arguments), end.end()) if end else None


def _parse_at(
    text: str, at: int, tools: Mapping[str, JSON], wrapper: tuple[re.Pattern[str], re.Pattern[str]]
) -> Block | None:
    opener = wrapper[0].match(text, at)
    pos = opener.end() if opener else at
    parts: list[tuple[ParsedCall, str]] = []
    while (found := _invoke(text, pos, wrapper[1])) is not None:
        parts.append((found[0], text[pos : found[1]].strip()))
        pos = found[1]
    if not parts or _INVOKE.match(text, pos):
        return None  # nothing, or an invoke that is cut off
    closing = wrapper[1].match(text, pos)
    return section_block(text, at, closing.end() if closing else pos, parts, tools)


def _wrapper(word: str) -> tuple[re.Pattern[str], re.Pattern[str]]:
    """The opening and closing patterns of the element that holds the invokes."""
    return re.compile(f"<{_BAR}DSML{_BAR}{word}>"), re.compile(rf"\s*</{_BAR}DSML{_BAR}{word}>")


def _render_call(call: ParsedCall) -> str:
    params = "".join(
        f'<｜DSML｜parameter name="{key}" string="true">{value}</｜DSML｜parameter>\n'
        if isinstance(value, str)
        else f'<｜DSML｜parameter name="{key}" string="false">{dumps(value)}</｜DSML｜parameter>\n'
        for key, value in call.arguments.items()
    )
    return f'<｜DSML｜invoke name="{call.name}">\n{params}</｜DSML｜invoke>\n'


class Dsml:
    """DSML calls inside one wrapper element: `function_calls` (V3.2), `tool_calls` (V4)."""

    def __init__(self, name: str, word: str) -> None:
        self.name = name
        self.word = word
        self.markers: tuple[str, ...] = (f"<｜DSML｜{word}>", f"<|DSML|{word}>")
        self._wrapper = _wrapper(word)

    def render_tools(self, tools: Sequence[ToolDef]) -> str:
        return _INSTRUCTIONS.replace("function_calls", self.word).format(tools=tool_list(tools))

    def render_calls(self, calls: Sequence[ParsedCall]) -> str:
        body = "".join(_render_call(call) for call in calls)
        return f"<｜DSML｜{self.word}>\n{body}</｜DSML｜{self.word}>"

    def render_result(self, name: str, content: str) -> str:
        return f"<｜tool▁output▁begin｜>{content}<｜tool▁output▁end｜>"

    def parse(self, text: str, tools: Mapping[str, JSON]) -> ParseResult:
        blocks = find_blocks(
            text, self._wrapper[0], lambda t, at: _parse_at(t, at, tools, self._wrapper)
        )
        return splice(text, blocks, drop=("<｜end▁of▁sentence｜>",))


FORMAT = Dsml("deepseek_v32", "function_calls")
