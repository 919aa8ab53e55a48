"""DeepSeek V3 / R1 tool calls (`<｜tool▁calls▁begin｜>` family).

Owns: the DeepSeek token markup, read tolerantly for both V3 (type word,
name line, ```json fence) and V3.1 (name before `<｜tool▁sep｜>`, bare JSON),
plus R1-distill misspellings of the tokens; rendering in the V3 shape.
deepseek_v31 subclasses `DeepseekV3`. Must not: execute arguments that are
cut off, or coerce argument types.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from proxy.formats.base import ParsedCall
from proxy.formats.block_format import BlockFormat
from proxy.formats.blocks import Block, dumps, section_block
from proxy.formats.json_scan import decode_arguments, skip_space, valid_name
from proxy.formats.jsonish import loads_lenient, scan_json_value
from proxy.types import JSON


def _token(*words: str) -> str:
    # R1 distills misspell the tokens: '_', '\_' or ' ' for '▁', ASCII '|' for '｜'.
    return r"<[｜|]" + r"(?:▁|\\?_| )".join(words) + r"[｜|]>"


CALLS_BEGIN = re.compile(_token("tool", "calls", "begin") + "|" + _token("tool", "calls"))
CALL_BEGIN = re.compile(_token("tool", "call", "begin"))
_SEP = re.compile(_token("tool", "sep"))
_CALL_END = re.compile(_token("tool", "call", "end"))
_CALLS_END = re.compile(_token("tool", "calls", "end"))
_EOS = re.compile(_token("end", "of", "sentence"))
_STARTS = re.compile(CALLS_BEGIN.pattern + "|" + CALL_BEGIN.pattern)
_NAME_LINE = re.compile(r"[ \t]*([^\s<`{]+)")
MARKERS = (
    "<｜tool▁calls▁begin｜>",
    "<｜tool_calls_begin｜>",
    "<｜tool calls begin｜>",
    "<｜tool\\_calls\\_begin｜>",
    "<｜tool▁calls｜>",
    "<｜tool▁call▁begin｜>",
)

_INSTRUCTIONS = """\
## Tools

You have the following functions available:

{tools}

To call functions, reply with:
<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>FUNCTION_NAME
```json
{{"argument": "value"}}
```<｜tool▁call▁end｜><｜tool▁calls▁end｜>
Put several calls one after another inside <｜tool▁calls▁begin｜> and <｜tool▁calls▁end｜>."""


def _name_and_args_start(text: str, after_begin: int) -> tuple[str, int] | None:
    sep = _SEP.search(text, after_begin)
    if sep is None:
        return None
    head = text[after_begin : sep.start()].strip()
    pos = skip_space(text, sep.end())
    if head and head != "function":
        return head, pos  # V3.1: NAME<｜tool▁sep｜>ARGS
    line = _NAME_LINE.match(text, sep.end())  # V3: function<｜tool▁sep｜>NAME\n```json
    return (line.group(1), skip_space(text, line.end())) if line else None


def _call(text: str, pos: int) -> tuple[ParsedCall, int] | None:
    begin = CALL_BEGIN.match(text, pos)
    found = _name_and_args_start(text, begin.end()) if begin else None
    if found is None or not valid_name(found[0]):
        return None
    name, pos = found
    fenced = text.startswith("```", pos)
    if fenced:
        newline = text.find("\n", pos)
        pos = skip_space(text, newline) if newline >= 0 else len(text)
    end = scan_json_value(text, pos) if text.startswith("{", pos) else None
    decoded = loads_lenient(text[pos:end]) if end is not None else None
    arguments = decode_arguments(decoded[0]) if decoded is not None else None
    if end is None or arguments is None:
        return None
    end = skip_space(text, end)
    if fenced and text.startswith("```", end):
        end = skip_space(text, end + 3)
    close = _CALL_END.match(text, end)
    return ParsedCall(name, arguments), close.end() if close else end


def _parse_at(text: str, at: int, tools: Mapping[str, JSON]) -> Block | None:
    opener = CALLS_BEGIN.match(text, at)
    pos = opener.end() if opener else at
    parts: list[tuple[ParsedCall, str]] = []
    while (found := _call(text, skip_space(text, pos))) is not None:
        parts.append((found[0], text[skip_space(text, pos) : found[1]].strip()))
        pos = found[1]
    if not parts or CALL_BEGIN.match(text, skip_space(text, pos)):
        return None  # nothing, or a further call that is cut off
    for token in (_CALLS_END, _EOS):
        closing = token.match(text, skip_space(text, pos))
        if closing is not None:
            pos = closing.end()
    return section_block(text, at, pos, parts, tools)


def render_result(content: str) -> str:
    return f"<｜tool▁output▁begin｜>{content}<｜tool▁output▁end｜>"


class DeepseekV3(BlockFormat):
    """Also the base of deepseek_v31, which renders the V3.1 shape."""

    name = "deepseek_v3"
    markers: tuple[str, ...] = MARKERS
    instructions = _INSTRUCTIONS
    drop = ("<｜end▁of▁sentence｜>",)

    def render_calls(self, calls: Sequence[ParsedCall]) -> str:
        body = "\n".join(
            f"<｜tool▁call▁begin｜>function<｜tool▁sep｜>{call.name}\n```json\n"
            f"{dumps(call.arguments)}\n```<｜tool▁call▁end｜>"
            for call in calls
        )
        return f"<｜tool▁calls▁begin｜>{body}<｜tool▁calls▁end｜>"

    def render_result(self, name: str, content: str) -> str:
        return render_result(content)

    parse_at = staticmethod(_parse_at)

    def starts(self) -> re.Pattern[str]:
        return _STARTS


FORMAT = DeepseekV3()

