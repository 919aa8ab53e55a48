"""Mistral tool calls after `[TOOL_CALLS]`.

Owns: the three tokenizer generations (pre-v11 JSON array, v11
`NAME[CALL_ID]ID[ARGS]{json}`, v13 `NAME[ARGS]{json}`), the marker-less
array left when special tokens are skipped (mistral-009, via the shared bare
rule), and rendering. Must not: put a textual `[CALL_ID]…` into the name,
stop at the first `]` or `}` inside a string, or execute cut-off arguments.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from proxy.formats.base import ParsedCall, ParseResult
from proxy.formats.blocks import Block, dumps, find_blocks, section_block, splice, tool_list
from proxy.formats.json_scan import (
    BARE_START_PATTERN,
    chain_at,
    generic_at,
    skip_space,
    valid_name,
    value_at,
)
from proxy.types import JSON, ToolDef

MARKER = "[TOOL_CALLS]"
_OPEN = re.compile(re.escape(MARKER) + "|" + BARE_START_PATTERN, re.MULTILINE)
# v11/v13 group: NAME, optional [CALL_ID]ID, then [ARGS] (or the object right away).
_GROUP = re.compile(r"\s*([A-Za-z_][\w.\-]*)\s*(?:\[CALL_ID\]\s*(\w+)\s*)?(?:\[ARGS\])?\s*(?=\{)")
_TRAILERS = ("</s>",)

_INSTRUCTIONS = """\
[AVAILABLE_TOOLS]{tools}[/AVAILABLE_TOOLS]
To call tools, reply with [TOOL_CALLS] followed by a JSON array of objects
{{"name": <tool name>, "arguments": <object>}} and nothing else."""


def _groups(text: str, pos: int) -> tuple[list[tuple[ParsedCall, str]], int] | None:
    """Consecutive NAME[ARGS]{json} groups (each with its text), optionally behind a marker."""
    calls: list[tuple[ParsedCall, str]] = []
    end = pos
    while True:
        at = skip_space(text, end)
        if calls and text.startswith(MARKER, at):
            at += len(MARKER)
        group = _GROUP.match(text, at)
        if group is None or not valid_name(group.group(1)):
            break
        found = value_at(text, group.end())
        if found is None or not isinstance(found[0], dict):
            # A cut-off group makes the whole run text (fail closed).
            return None
        calls.append((ParsedCall(group.group(1), dict(found[0])),
                      text[group.start():found[1]].strip()))
        end = found[1]
    return (calls, end) if calls else None


def _marker_block(text: str, at: int, tools: Mapping[str, JSON]) -> Block | None:
    start = skip_space(text, at + len(MARKER))
    if text[start : start + 1] in ("[", "{"):
        found = chain_at(text, start, strict_keys=False)
    else:
        found = _groups(text, start)
    if found is None:
        return None
    calls, end = found
    for trailer in _TRAILERS:
        if text.startswith(trailer, skip_space(text, end)):
            end = skip_space(text, end) + len(trailer)
    return section_block(text, at, end, calls, tools)


def mistral_blocks(text: str, tools: Mapping[str, JSON]) -> list[Block]:
    def parse_at(source: str, at: int) -> Block | None:
        if source.startswith(MARKER, at):
            return _marker_block(source, at, tools)
        return generic_at(source, at, tools)

    return find_blocks(text, _OPEN, parse_at)


class MistralFormat:
    name = "mistral"
    markers: tuple[str, ...] = (MARKER, "[", "{")

    def render_tools(self, tools: Sequence[ToolDef]) -> str:
        return _INSTRUCTIONS.format(tools="[" + tool_list(tools).replace("\n", ", ") + "]")

    def render_calls(self, calls: Sequence[ParsedCall]) -> str:
        return MARKER + dumps([{"name": c.name, "arguments": c.arguments} for c in calls])

    def render_result(self, name: str, content: str) -> str:
        return f"[TOOL_RESULTS]{dumps({'name': name, 'content': content})}[/TOOL_RESULTS]"

    def parse(self, text: str, tools: Mapping[str, JSON]) -> ParseResult:
        return splice(text, mistral_blocks(text, tools))


FORMAT = MistralFormat()
