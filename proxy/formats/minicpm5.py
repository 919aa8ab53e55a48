"""MiniCPM 5 tool calls (`<function name="NAME"><param name="KEY">VALUE</param></function>`).

Owns: MiniCPM 5's XML-like call, its spellings seen from its tokenizer (the
attribute glued to the tag, `<functionname=`, or joined by `Ġ`), CDATA values,
and a single `properties` / `arguments` parameter wrapping the real ones
(vLLM `minicpm5xml_tool_parser.py` and its tests). Values are raw text typed by
the offered schema (xml_values); a key the schema does not know stays a string.
Must not: execute a call without its `</function>` (the upstream tests leave
it as text), one with a nameless or repeated parameter, or use an XML parser.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from proxy.formats.base import ParsedCall
from proxy.formats.block_format import BlockFormat
from proxy.formats.blocks import Block
from proxy.formats.json_scan import decode, skip_space, valid_name
from proxy.formats.xml_values import convert, known_key, property_schema, render_value
from proxy.types import JSON

_SEP = "[ \t\u0120]*"  # a blank, none, or the tokenizer's `Ġ`
_FUNCTION = re.compile(rf"<function{_SEP}name\s*=\s*[\"']([^\"'>]+)[\"']\s*>")
_PARAM = re.compile(rf"\s*<param{_SEP}name\s*=\s*[\"']([^\"'>]+)[\"']\s*>")
_PARAM_CLOSE, _CLOSE = "</param>", "</function>"
_CDATA = re.compile(r"\s*<!\[CDATA\[(.*)\]\]>\s*", re.DOTALL)
_WRAPPERS = ("properties", "arguments")

_INSTRUCTIONS = """\
# Tools
{tools}

To call a function, write one element per call, with one param element per argument:
<function name="FUNCTION_NAME"><param name="ARGUMENT">value</param></function>"""


def _value_close(text: str, start: int) -> int | None:
    """The `</param>` that the markup puts there, not one inside the value. Before the
    next call's start it is that too (its own call then lacks its close): no call
    reads on into the next, and cut-off calls cost no rescans."""
    pos = start
    while (at := text.find(_PARAM_CLOSE, pos)) >= 0:
        after = skip_space(text, at + len(_PARAM_CLOSE))
        if text.startswith(_CLOSE, after) or _PARAM.match(text, after) \
                or _FUNCTION.match(text, after):
            return at
        pos = at + 1
    return None


def _raw(value: str) -> str:
    cdata = _CDATA.fullmatch(value)
    return cdata.group(1) if cdata is not None else value.strip()


def _add(arguments: dict[str, Any], key: str, raw: str, schema: JSON) -> bool:
    """Put one parameter in; False when it makes the call invalid (a repeat)."""
    if key in _WRAPPERS and not known_key(schema, key):
        unwrapped = decode(raw)
        if isinstance(unwrapped, dict):
            return all(_add(arguments, k, v if isinstance(v, str) else render_value(v), schema)
                       for k, v in unwrapped.items())
    if key in arguments:
        return False
    arguments[key] = convert(raw, property_schema(schema, key))
    return True


def _parse_at(text: str, at: int, tools: Mapping[str, JSON]) -> Block | None:
    head = _FUNCTION.match(text, at)
    if head is None or not valid_name(name := head.group(1).strip()):
        return None
    schema = tools.get(name, {})
    arguments: dict[str, Any] = {}
    pos = head.end()
    while (param := _PARAM.match(text, pos)) is not None:
        close = _value_close(text, param.end())
        raw = _raw(text[param.end() : close]) if close is not None else ""
        if close is None or not _add(arguments, param.group(1).strip(), raw, schema):
            return None
        pos = close + len(_PARAM_CLOSE)
    end = skip_space(text, pos)
    if not text.startswith(_CLOSE, end):
        return None
    end += len(_CLOSE)
    call = ParsedCall(name, arguments)
    return Block(at, end, (call,)) if name in tools else Block(at, end, (), text[at:end])


class MiniCPM5(BlockFormat):
    name = "minicpm5"
    markers: tuple[str, ...] = ("<function name=", "<functionname=", "<function\u0120name=")
    instructions = _INSTRUCTIONS

    def starts(self) -> re.Pattern[str]:
        return _FUNCTION

    def render_calls(self, calls: Sequence[ParsedCall]) -> str:
        return "\n".join(_render_call(call) for call in calls)

    parse_at = staticmethod(_parse_at)


def _render_call(call: ParsedCall) -> str:
    params = "".join(
        f'<param name="{key}">{_cdata(render_value(value))}</param>'
        for key, value in call.arguments.items()
    )
    return f'<function name="{call.name}">{params}</function>'


def _cdata(value: str) -> str:
    """Edge blanks are the markup's unless a CDATA section keeps them."""
    return f"<![CDATA[{value}]]>" if value != value.strip() else value


FORMAT = MiniCPM5()
