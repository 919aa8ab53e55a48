"""Pythonic tool calls (`[get_weather(city="Paris")]`).

Owns: recognising a Python list of keyword-argument calls (bare on its own
line, in Llama 4's `<|python_start|>` wrapper, or one call after Llama 3's
`<|python_tag|>`) and rendering one. Parsing uses Python's own parser on the
list only and accepts nothing but literals. Must not: evaluate anything,
accept positional arguments, comprehensions or code, or take brackets inside
a line of prose for a call.
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from proxy.formats.base import ParsedCall, ParseResult
from proxy.formats.blocks import Block, find_blocks, section_block, splice, tool_list
from proxy.formats.json_scan import json_int, skip_space, valid_name
from proxy.formats.jsonish import scan_json_value
from proxy.types import JSON, ToolDef

_START, _END, _TAG = "<|python_start|>", "<|python_end|>", "<|python_tag|>"
# A bare list is only scanned when it opens like a call: `[name(`.
_STARTS = re.compile(
    r"(?m)^[ \t]*\[(?=\s*[A-Za-z_][\w.]*\s*\()|<\|python_start\|>|<\|python_tag\|>"
)
_LINE_END = re.compile(
    r"[ \t]*(?:<\|python_end\|>)?[ \t]*(?:<\|eom_id\|>|<\|eot_id\|>)?[ \t]*(?:\n|$)"
)
_SENTINEL_END = re.compile(
    r"\s*<\|python_end\|>(?:[ \t]*(?:<\|eom_id\|>|<\|eot_id\|>))?(?:[ \t]*(?:\n|$))?"
)
_CONTROL = (_START, _END, _TAG, "<|eom_id|>", "<|eot_id|>")
_WORDS = {"true": True, "false": False, "null": None, "True": True, "False": False, "None": None}

_INSTRUCTIONS = """\
You are an expert in composing functions. You are given a question and a set of possible functions.
Based on the question, you will need to make one or more function/tool calls to achieve the purpose.
If you decide to invoke any of the function(s), you MUST put it in the format of
[func_name1(params_name1=params_value1, params_name2=params_value2...), func_name2(params)]
You SHOULD NOT include any other text in the response.

Here is a list of functions in JSON format that you can invoke.

{tools}"""


class _NotLiteral(Exception):
    """A node that is not a plain literal: the text is code, not a call."""


def _literal(node: ast.expr) -> Any:
    if isinstance(node, ast.Constant) and isinstance(node.value, (str, int, float, type(None))):
        if isinstance(node.value, float) and not math.isfinite(node.value):
            raise _NotLiteral
        if isinstance(node.value, int) and not isinstance(node.value, bool):
            return json_int(node.value)
        return node.value
    if isinstance(node, ast.Name) and node.id in _WORDS:
        # JSON words inside a Python call: a harmless repair.
        return _WORDS[node.id]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        value = _literal(node.operand)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_literal(item) for item in node.elts]
    if isinstance(node, ast.Dict):
        keys = [_literal(key) if key is not None else None for key in node.keys]
        if all(isinstance(key, str) for key in keys):
            return {key: _literal(value) for key, value in zip(keys, node.values)}
    raise _NotLiteral


def _call(node: ast.expr) -> ParsedCall:
    if not isinstance(node, ast.Call) or node.args:
        raise _NotLiteral
    func = node.func
    if isinstance(func, ast.Attribute) and func.attr == "call" and isinstance(func.value, ast.Name):
        name = func.value.id  # Llama 3's built-ins: brave_search.call(query=...)
    elif isinstance(func, ast.Name):
        name = func.id
    else:
        raise _NotLiteral
    if not valid_name(name):
        raise _NotLiteral
    arguments: dict[str, Any] = {}
    for keyword in node.keywords:
        if keyword.arg is None:
            raise _NotLiteral
        arguments[keyword.arg] = _literal(keyword.value)
    return ParsedCall(name, arguments)


def _segment_of(source: str, node: ast.expr) -> str:
    """node's source text; ast.get_source_segment is quadratic on one long line."""
    end_line, end_col = node.end_lineno, node.end_col_offset
    if "\r" in source or end_line is None or end_col is None:
        return ast.get_source_segment(source, node) or ""
    data = source.encode()  # ast offsets count UTF-8 bytes
    starts = [0] + [m.end() for m in re.finditer(b"\n", data)]
    begin = starts[node.lineno - 1] + node.col_offset
    return data[begin : starts[end_line - 1] + end_col].decode()


def call_list(source: str, bare: bool = False) -> list[tuple[ParsedCall, str]] | None:
    """Calls (with their source text) of a Python list of calls; None if it is anything else."""
    try:
        tree = ast.parse(source.strip(), mode="eval")
        body = tree.body
        items = [body] if bare else body.elts if isinstance(body, ast.List) else None
        if not items:
            return None
        return [(_call(item), _segment_of(source.strip(), item)) for item in items]
    except (_NotLiteral, SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def call_lines(source: str) -> list[tuple[ParsedCall, str]] | None:
    """Calls (with their source text) of Python statements that are each one call
    (OLMo 3 writes one per line); None if any statement is anything else."""
    try:
        body = ast.parse(source.strip(), mode="exec").body
        if not body or not all(isinstance(s, ast.Expr) for s in body):
            return None
        nodes = [s.value for s in body if isinstance(s, ast.Expr)]
        return [(_call(node), _segment_of(source.strip(), node)) for node in nodes]
    except (_NotLiteral, SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _segment(text: str, pos: int, tagged: bool) -> tuple[int, bool] | None:
    """End of the list (or of a bare call after the tag) starting at pos."""
    if pos < len(text) and text[pos] == "[":
        end = scan_json_value(text, pos)
        return None if end is None else (end, False)
    if not tagged:
        return None
    line_end = re.compile(r"<\|eom_id\|>|<\|eot_id\|>|\n|$").search(text, pos)
    return (line_end.start(), True) if line_end is not None else None


def _parse_at(text: str, at: int, tools: Mapping[str, JSON]) -> Block | None:
    pos = at
    while pos < len(text) and text[pos] in " \t":
        pos += 1
    tagged = text.startswith(_TAG, pos)
    wrapped = text.startswith(_START, pos)
    for token in (_START, _TAG):
        if text.startswith(token, pos):
            pos += len(token)
    pos = skip_space(text, pos)
    found = _segment(text, pos, tagged)
    if found is None:
        return None
    end, bare = found
    # Llama 4's sentinels make the list unambiguous even in the middle of
    # prose: the block ends at `<|python_end|>`, whatever follows it.
    tail = (wrapped and _SENTINEL_END.match(text, end)) or _LINE_END.match(text, end)
    parts = call_list(text[pos:end], bare)
    if tail is None or parts is None:
        return None
    return section_block(text, at, tail.end(), parts, tools)


def render_value(value: Any) -> str:
    """A JSON value as a Python literal."""
    if isinstance(value, bool) or value is None:
        return repr(value)
    if isinstance(value, dict):
        return (
            "{" + ", ".join(f"{render_value(k)}: {render_value(v)}" for k, v in value.items()) + "}"
        )
    if isinstance(value, list):
        return "[" + ", ".join(render_value(item) for item in value) + "]"
    return repr(value)


def render_call(call: ParsedCall) -> str:
    args = ", ".join(f"{key}={render_value(value)}" for key, value in call.arguments.items())
    return f"{call.name}({args})"


class Pythonic:
    name = "pythonic"
    markers: tuple[str, ...] = ("[", _START, _TAG)

    def render_tools(self, tools: Sequence[ToolDef]) -> str:
        return _INSTRUCTIONS.format(tools=tool_list(tools))

    def render_calls(self, calls: Sequence[ParsedCall]) -> str:
        return "[" + ", ".join(render_call(call) for call in calls) + "]"

    def render_result(self, name: str, content: str) -> str:
        return content

    def parse(self, text: str, tools: Mapping[str, JSON]) -> ParseResult:
        blocks = find_blocks(text, _STARTS, lambda t, at: _parse_at(t, at, tools))
        return splice(text, blocks, drop=_CONTROL if blocks else ())


FORMAT = Pythonic()
