"""Llama 3.x JSON tool calls (`{"name", "parameters"}`).

Owns: the reply-is-an-object shape with or without `<|python_tag|>`,
`;`-separated calls, the `<|eom_id|>` / `<|eot_id|>` end tokens (not prose),
the built-in `NAME.call(k=v)` form for offered built-ins, and rendering.
Must not: look for objects in the middle of a sentence, give up on every
call because one JSON value in prose is not a call (vLLM does), or treat
raw code after the tag as a call unless `code_interpreter` was offered.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping, Sequence
from typing import Any

from proxy.formats.base import ParsedCall, ParseResult
from proxy.formats.blocks import Block, dumps, find_blocks, section_block, splice, tool_list
from proxy.formats.json_scan import (
    BARE_START_PATTERN,
    chain_at,
    generic_at,
    line_end_after,
    skip_space,
)
from proxy.types import JSON, ToolDef

PYTHON_TAG = "<|python_tag|>"
_END_TOKENS = ("<|eom_id|>", "<|eot_id|>")
_OPEN = re.compile(re.escape(PYTHON_TAG) + "|" + BARE_START_PATTERN, re.MULTILINE)
_BUILTIN = re.compile(r"([A-Za-z_]\w*)\.call\(")

_INSTRUCTIONS = """\
Given the following functions, please respond with a JSON for a function call with its proper arguments that best answers the given prompt.

Respond in the format {{"name": function name, "parameters": dictionary of argument name and its value}}. Do not use variables.

{tools}"""


def _builtin(text: str, start: int) -> tuple[ParsedCall, int] | None:
    """`brave_search.call(query="…")`: keyword arguments as Python literals."""
    match = _BUILTIN.match(text, start)
    if match is None:
        return None
    end = text.find("\n", start)
    source = text[start : end if end >= 0 else len(text)]
    for token in _END_TOKENS:
        source = source.split(token)[0]
    try:
        node = ast.parse(source.strip(), mode="eval").body
    except (SyntaxError, ValueError):
        return None
    if not isinstance(node, ast.Call) or node.args:
        return None
    arguments: dict[str, Any] = {}
    try:
        for keyword in node.keywords:
            if keyword.arg is None:
                return None
            arguments[keyword.arg] = ast.literal_eval(keyword.value)
    except (ValueError, SyntaxError, TypeError):
        return None
    return ParsedCall(match.group(1), arguments), start + len(source)


def _tag_block(text: str, at: int, tools: Mapping[str, JSON]) -> Block | None:
    start = skip_space(text, at + len(PYTHON_TAG))
    if text[start : start + 1] in ("{", "["):
        found = chain_at(text, start, strict_keys=False)
        if found is None:
            return None
        calls, end = found
    else:
        builtin = _builtin(text, start)
        if builtin is not None:
            calls, end = [(builtin[0], text[start : builtin[1]])], builtin[1]
        elif "code_interpreter" in tools:
            end = min(
                [len(text)] + [i for i in (text.find(t, start) for t in _END_TOKENS) if i >= 0]
            )
            code = text[start:end].strip()
            calls = [(ParsedCall("code_interpreter", {"code": code}), code)]
        else:
            return None
    return section_block(text, at, line_end_after(text, end) or end, calls, tools)


def llama_blocks(text: str, tools: Mapping[str, JSON]) -> list[Block]:
    def parse_at(source: str, at: int) -> Block | None:
        if source.startswith(PYTHON_TAG, at):
            return _tag_block(source, at, tools)
        return generic_at(source, at, tools)

    return find_blocks(text, _OPEN, parse_at)


class Llama3JsonFormat:
    name = "llama3_json"
    markers: tuple[str, ...] = (PYTHON_TAG, "{", "[")

    def render_tools(self, tools: Sequence[ToolDef]) -> str:
        return _INSTRUCTIONS.format(tools=tool_list(tools))

    def render_calls(self, calls: Sequence[ParsedCall]) -> str:
        return "; ".join(dumps({"name": c.name, "parameters": c.arguments}) for c in calls)

    def render_result(self, name: str, content: str) -> str:
        return content

    def parse(self, text: str, tools: Mapping[str, JSON]) -> ParseResult:
        blocks = llama_blocks(text, tools)
        drop = _END_TOKENS if any(block.calls for block in blocks) else ()
        return splice(text, blocks, drop)


FORMAT = Llama3JsonFormat()
