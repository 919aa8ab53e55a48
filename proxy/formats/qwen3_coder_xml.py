"""Qwen3-Coder XML tool calls (`<function=NAME><parameter=KEY>…`).

Owns: parsing and rendering the Qwen3-Coder / Seed-OSS markup. Values are raw
text typed by the offered schema (xml_values). Must not: use an XML parser
(values are unescaped), accept a `</parameter>` that is followed by more
value text, or execute a call whose function block is cut off.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from proxy.formats.base import ParsedCall
from proxy.formats.block_format import BlockFormat
from proxy.formats.blocks import Block, find_from, search_from, section_block
from proxy.formats.json_scan import past_close, skip_space, valid_name
from proxy.formats.xml_values import convert, known_key, property_schema, render_value
from proxy.types import JSON

_CLOSERS = {"<tool_call>": "</tool_call>", "<seed:tool_call>": "</seed:tool_call>"}
_FUNCTION = re.compile(r"<function=([^>\n]*)>")
_PARAMETER = re.compile(r"<parameter=([^>\n]*)>")
_LINE_PARAMETER = re.compile(r"\n<parameter=([^>\n]*)>")
_PARAM_CLOSE = "</parameter>"
# A close tag is structural only before more markup or the end (qwen3coder-010).
_CLOSE_CANDIDATE = re.compile(r"</parameter>(?=\s*(?:<parameter=|</function>|</tool_call>|\Z))")
_BOUNDARY = re.compile(r"<tool_call>|<function=|</function>|</tool_call>")

_INSTRUCTIONS = """\
# Tools

You have access to the following functions:

<tools>
{tools}
</tools>

If you choose to call a function ONLY reply in the following format with NO suffix:

<tool_call>
<function=example_function_name>
<parameter=example_parameter_1>
value_1
</parameter>
<parameter=example_parameter_2>
This is the value for the second parameter
that can span
multiple lines
</parameter>
</function>
</tool_call>

Reminder:
- Function calls MUST follow the specified format: an inner <function=...></function> block must be nested within <tool_call></tool_call> XML tags
- Required parameters MUST be specified
- You may provide optional reasoning for your function call in natural language BEFORE the function call, but NOT after
- If there is no function call available, answer the question like normal with your current knowledge and do not tell the user about function calls"""


def strip_newlines(raw: str) -> str:
    """Exactly one leading and one trailing newline belong to the markup."""
    raw = raw.removeprefix("\n")
    raw = raw.removesuffix("\n")
    return raw


def _structural_close(text: str, start: int) -> int | None:
    """The first `</parameter>` that the markup, not the value, puts there.

    Every `<parameter=NAME>` that follows opens its own key, whether or not the
    schema knows NAME: swallowing an unknown block into the previous value
    (`city` = "Dallas</parameter><parameter=state>TX") corrupts a value the
    model wrote correctly, while an extra key is judged by the schema check.
    """
    # Remembered searches: a run of cut-off calls asks from each of its starts.
    close = search_from(text, _CLOSE_CANDIDATE, start)
    while close is not None:
        nxt = _PARAMETER.match(text, skip_space(text, close.end()))
        if nxt is None or valid_name(nxt.group(1).strip()):
            return close.start()
        close = search_from(text, _CLOSE_CANDIDATE, close.end())
    return None


def _line_parameter(text: str, start: int, schema: JSON) -> int | None:
    """Where a line-start `<parameter=NAME>` ends a value missing its close.

    NAME must be a key of the schema here: without a close tag, a known key is
    the only evidence that the line is markup rather than value text. Not
    across another call's markup: that value is cut off, not unclosed.
    """
    for line in _LINE_PARAMETER.finditer(text, start):
        if _BOUNDARY.search(text, start, line.start()):
            return None
        if known_key(schema, line.group(1).strip()):
            return line.start() + 1
    return None


def _value_end(text: str, start: int, schema: JSON) -> tuple[int, int] | None:
    """(end of the value, where parsing continues); None when cut off."""
    close = _structural_close(text, start)
    line = _line_parameter(text, start, schema)
    if line is not None and (close is None or line <= close):
        return line, line
    if close is not None:
        return close, close + len(_PARAM_CLOSE)
    # The last parameter's close missing before a line-start </function>.
    end = find_from(text, "\n</function>", start)
    if end < 0 or _BOUNDARY.search(text, start, end):
        return None
    return end + 1, end + 1


def _function(text: str, pos: int, tools: Mapping[str, JSON]) -> tuple[ParsedCall, int] | None:
    """One `<function=…>` block at pos: the call and where it ends."""
    match = _FUNCTION.match(text, pos)
    if match is None or not valid_name(match.group(1).strip()):
        return None
    name = match.group(1).strip()
    schema = tools.get(name, {})
    arguments: dict[str, Any] = {}
    pos = match.end()
    while True:
        pos = skip_space(text, pos)
        param = _PARAMETER.match(text, pos)
        if param is not None:
            ends = _value_end(text, param.end(), schema)
            if ends is None:
                return None
            key = param.group(1).strip()
            raw = strip_newlines(text[param.end() : ends[0]])
            arguments[key] = convert(raw, property_schema(schema, key))
            pos = ends[1]
        elif text.startswith("</function>", pos):
            return ParsedCall(name, arguments), pos + len("</function>")
        elif text.startswith(("</tool_call>", "<function="), pos):
            return ParsedCall(name, arguments), pos
        else:
            return None


def _parse_at(text: str, at: int, tools: Mapping[str, JSON]) -> Block | None:
    opener = next((o for o in _CLOSERS if text.startswith(o, at)), None)
    pos = at + len(opener) if opener else at
    parts: list[tuple[ParsedCall, str]] = []
    while True:
        start = skip_space(text, pos)
        found = _function(text, start, tools) if text.startswith("<function=", start) else None
        if found is None:
            break
        parts.append((found[0], text[start : found[1]]))
        pos = found[1]
        if opener is None:
            break
    if not parts:
        return None
    # The closing tag may be missing at the end; a bare `<function=` block
    # (opener dropped after prose, ollama#16686) often keeps an orphan close.
    closer = _CLOSERS[opener] if opener else "</tool_call>"
    return section_block(text, at, past_close(text, pos, closer), parts, tools)


class Qwen3CoderXml(BlockFormat):
    name = "qwen3_coder_xml"
    markers: tuple[str, ...] = ("<tool_call>", "<seed:tool_call>", "<function=")
    instructions = _INSTRUCTIONS
    result_template = "<tool_response>\n{content}\n</tool_response>"

    def render_calls(self, calls: Sequence[ParsedCall]) -> str:
        return "\n".join(_render_call(call) for call in calls)

    parse_at = staticmethod(_parse_at)


def _render_call(call: ParsedCall) -> str:
    params = "".join(
        f"<parameter={key}>\n{render_value(value)}\n</parameter>\n"
        for key, value in call.arguments.items()
    )
    return f"<tool_call>\n<function={call.name}>\n{params}</function>\n</tool_call>"


FORMAT = Qwen3CoderXml()
