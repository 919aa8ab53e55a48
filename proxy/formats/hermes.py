"""Hermes / Qwen2.5 / Qwen3 tool calls (`<tool_call>{json}</tool_call>`).

Owns: parsing and rendering the Hermes block, its wrapper-tag spellings
(llama.cpp accepts eight), several objects in one block, a missing close tag
after complete JSON, and qwen2.5's bare-object leaks (opener dropped, orphan
`</tool_call>` kept). Must not: take the first `"name"` in the text for the
function name (hermes-004), stop at a `</tool_call>` inside a string
(hermes-006), or execute a call whose JSON is cut off.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from proxy.formats.base import ParsedCall, ParseResult
from proxy.formats.blocks import (
    Block,
    dumps,
    find_blocks,
    find_from,
    section_block,
    splice,
    tool_list,
)
from proxy.formats.json_scan import call_parts, chain_at, decode, generic_at, skip_space
from proxy.types import JSON, ToolDef

_TAGS = ("tool_call", "function_call", "tools", "tool", "json", "JSON", "xml", "response")
_OPEN = re.compile(r"(?m)<(" + "|".join(_TAGS) + r")>|^[ \t]*[{\[]|^[ \t]{0,3}(?:```|~~~)")

_INSTRUCTIONS = """\
# Tools

You may call one or more functions to assist with the user query.

You are provided with function signatures within <tools></tools> XML tags:
<tools>
{tools}
</tools>

For each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:
<tool_call>
{{"name": <function-name>, "arguments": <args-json-object>}}
</tool_call>"""


def _tag_block(text: str, at: int, tag: str, tools: Mapping[str, JSON]) -> Block | None:
    body = at + len(tag) + 2
    close = f"</{tag}>"
    start = skip_space(text, body)
    found = (
        chain_at(text, start, strict_keys=False) if text[start : start + 1] in ("{", "[") else None
    )
    if found is None:
        return _closed_fallback(text, at, body, close, tools)
    calls, end = found
    pos = skip_space(text, end)
    if text.startswith(close, pos):
        end = pos + len(close)
    return section_block(text, at, end, calls, tools)


def _closed_fallback(
    text: str, at: int, body: int, close: str, tools: Mapping[str, JSON]
) -> Block | None:
    """Body up to the close tag when the bracket scan fails (an apostrophe in a comment)."""
    end = find_from(text, close, body)
    if end < 0 or 0 <= find_from(text, text[at:body], body) < end:
        # Another open tag before the close: this one was cut off (and decoding
        # the stretch from every tag of a run would cost the run's length each).
        return None
    source = text[body:end].strip()
    if not source.startswith(("{", "[")):
        return None
    decoded = decode(source)
    calls = call_parts(decoded, strict_keys=False, source=source) if decoded is not None else None
    if calls is None:
        return None
    return section_block(text, at, end + len(close), calls, tools)


def hermes_blocks(text: str, tools: Mapping[str, JSON]) -> list[Block]:
    def parse_at(source: str, at: int) -> Block | None:
        match = _OPEN.match(source, at)
        if match is not None and match.group(1):
            return _tag_block(source, at, match.group(1), tools)
        return generic_at(source, at, tools)

    return find_blocks(text, _OPEN, parse_at)


class HermesFormat:
    name = "hermes"
    markers: tuple[str, ...] = tuple(f"<{tag}>" for tag in _TAGS) + ("{", "[", "```", "~~~")

    def render_tools(self, tools: Sequence[ToolDef]) -> str:
        return _INSTRUCTIONS.format(tools=tool_list(tools))

    def render_calls(self, calls: Sequence[ParsedCall]) -> str:
        return "\n".join(
            "<tool_call>\n" + dumps({"name": c.name, "arguments": c.arguments}) + "\n</tool_call>"
            for c in calls
        )

    def render_result(self, name: str, content: str) -> str:
        return f"<tool_response>\n{content}\n</tool_response>"

    def parse(self, text: str, tools: Mapping[str, JSON]) -> ParseResult:
        return splice(text, hermes_blocks(text, tools))


FORMAT = HermesFormat()
