"""Kimi K2 tool calls (`<|tool_calls_section_begin|>` … `functions.NAME:IDX`).

Owns: Kimi's section/call token markup, tolerant of the singular section
spelling, ids without the `functions.` prefix, missing end tokens at the end
of output, and K2 Thinking's unclosed `<think>` before the section (a policy
choice: that reasoning is dropped from the text, kimi-k2-005). Must not:
execute cut-off arguments or guess a tool for a bare numeric id unless
exactly one offered schema fits the arguments (vLLM's rule).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from proxy.formats.base import ParsedCall, ParseResult
from proxy.formats.block_format import BlockFormat
from proxy.formats.blocks import Block, dumps, find_from, section_block, splice
from proxy.formats.json_scan import decode_arguments, skip_space, valid_name
from proxy.formats.jsonish import loads_lenient, scan_json_value
from proxy.types import JSON

_SECTION = ("<|tool_calls_section_begin|>", "<|tool_call_section_begin|>")
_SECTION_END = re.compile(r"\s*<\|tool_calls?_section_end\|>")
_CALL_BEGIN, _ARGS, _CALL_END = (
    "<|tool_call_begin|>",
    "<|tool_call_argument_begin|>",
    "<|tool_call_end|>",
)
_ID = re.compile(r"\s*(?:functions\.)?([^\s:<>]+?)(?::\d+)?\s*$")

_INSTRUCTIONS = """\
# Tools
{tools}

To call tools, write:
<|tool_calls_section_begin|><|tool_call_begin|>functions.NAME:0<|tool_call_argument_begin|>{{"argument": "value"}}<|tool_call_end|><|tool_calls_section_end|>
with one <|tool_call_begin|>…<|tool_call_end|> per call and the index counting calls across the conversation."""


def _fits(arguments: Mapping[str, Any], schema: JSON) -> bool:
    properties = schema.get("properties")
    required = schema.get("required")
    if isinstance(properties, dict) and any(key not in properties for key in arguments):
        return False
    return not isinstance(required, list) or all(key in arguments for key in required)


def _name(call_id: str, arguments: Mapping[str, Any], tools: Mapping[str, JSON]) -> str | None:
    match = _ID.match(call_id)
    if match is None:
        return None
    name = match.group(1)
    if name.isdigit():
        # A bare counter as id: vLLM infers the tool when exactly one schema fits.
        fitting = [tool for tool, schema in tools.items() if _fits(arguments, schema)]
        return fitting[0] if len(fitting) == 1 else None
    return name if valid_name(name) else None


def _call(text: str, pos: int, tools: Mapping[str, JSON]) -> tuple[ParsedCall, int] | None:
    if not text.startswith(_CALL_BEGIN, pos):
        return None
    args_at = find_from(text, _ARGS, pos)  # remembered: a run of begins asks from each
    if args_at < 0:
        return None
    start = skip_space(text, args_at + len(_ARGS))
    end = scan_json_value(text, start) if text.startswith("{", start) else None
    decoded = loads_lenient(text[start:end]) if end is not None else None
    arguments = decode_arguments(decoded[0]) if decoded is not None else None
    if end is None or arguments is None:
        return None
    name = _name(text[pos + len(_CALL_BEGIN) : args_at], arguments, tools)
    if name is None:
        return None
    end = skip_space(text, end)
    if text.startswith(_CALL_END, end):
        end += len(_CALL_END)
    return ParsedCall(name, arguments), end


def _parse_at(text: str, at: int, tools: Mapping[str, JSON]) -> Block | None:
    opener = next((s for s in _SECTION if text.startswith(s, at)), "")
    pos = at + len(opener)
    parts: list[tuple[ParsedCall, str]] = []
    while (found := _call(text, skip_space(text, pos), tools)) is not None:
        parts.append((found[0], text[skip_space(text, pos) : found[1]]))
        pos = found[1]
    if not parts or text.startswith(_CALL_BEGIN, skip_space(text, pos)):
        return None  # nothing, or a further call that is cut off
    closing = _SECTION_END.match(text, pos)
    return section_block(text, at, closing.end() if closing else pos, parts, tools)


def _unclosed_think(text: str, blocks: list[Block]) -> list[Block]:
    """K2 Thinking may go from `<think>` straight to the tool section (vLLM PR #32216)."""
    if not blocks or not blocks[0].calls:
        return blocks
    before = text[: blocks[0].start]
    think = before.rfind("<think>")
    if think < 0 or "</think>" in before[think:]:
        return blocks
    return [Block(think, blocks[0].start, ()), *blocks]


class KimiK2(BlockFormat):
    name = "kimi_k2"
    markers: tuple[str, ...] = (*_SECTION, _CALL_BEGIN)
    instructions = _INSTRUCTIONS
    result_template = "## Return of functions.{name}\n{content}"

    def render_calls(self, calls: Sequence[ParsedCall]) -> str:
        body = "".join(
            f"{_CALL_BEGIN}functions.{call.name}:{index}{_ARGS}{dumps(call.arguments)}{_CALL_END}"
            for index, call in enumerate(calls)
        )
        return f"{_SECTION[0]}{body}<|tool_calls_section_end|>"

    parse_at = staticmethod(_parse_at)

    def parse(self, text: str, tools: Mapping[str, JSON]) -> ParseResult:
        return splice(text, _unclosed_think(text, self.find(text, tools)))


FORMAT = KimiK2()
