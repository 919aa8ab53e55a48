"""MiniMax-M3 tool calls: `<tool_call>` + `<invoke name=…>` + one element per argument.

Owns: M3's markup (vLLM `minimax_m3_tool_parser.py` and
`test_minimax_m3_tool_parser.py`): every tag is led by MiniMax's namespace
marker `]<]minimax[>[` (accepted missing too, as when the backend drops it),
several `<invoke>`s in one `<tool_call>`, and each argument as an element named
after it, `<KEY>VALUE</KEY>`, whose children make nested objects (a repeated
child name makes a list; under an array schema the children are its items).
Leaf values are raw text typed by the schema at their place (xml_values); a key
the schema does not know stays a string. Must not: execute an invoke that is
cut off (those before it are calls, it stays text), or use an XML parser.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from typing import Any

from proxy.formats.base import ParsedCall
from proxy.formats.block_format import BlockFormat
from proxy.formats.blocks import Block, dumps, section_block
from proxy.formats.json_scan import valid_name
from proxy.formats.xml_values import convert, property_schema, schema_types
from proxy.types import JSON

NS = "]<]minimax[>["
_NS = re.escape(NS)
_OPEN, _CLOSE = re.compile(rf"(?:{_NS})?<tool_call>"), re.compile(rf"\s*(?:{_NS})?</tool_call>")
_INVOKE = re.compile(rf"\s*(?:{_NS})?<invoke\s+name\s*=\s*[\"']([^\"'>]+)[\"']\s*>")
_INVOKE_CLOSE = re.compile(rf"\s*(?:{_NS})?</invoke>")
_TAG = re.compile(rf"\s*(?:{_NS})?<([A-Za-z_][\w.\-]*)>")
Node = str | list[tuple[str, "Node"]]
"""An element's content: its raw text, or its child elements in order."""

_INSTRUCTIONS = """\
# Tools
{tools}

To call tools, write one invoke per call, with one element per argument named after it \
(nested elements for objects, repeated <item> elements for lists):
]<]minimax[>[<tool_call>
]<]minimax[>[<invoke name="FUNCTION_NAME">]<]minimax[>[<ARGUMENT>value]<]minimax[>[</ARGUMENT>\
]<]minimax[>[</invoke>
]<]minimax[>[</tool_call>"""


def _element(text: str, pos: int, depth: int) -> tuple[str, Node, int] | None:
    """The element at pos: (name, content, end); None if it is cut off or too deep."""
    head = _TAG.match(text, pos)
    if head is None or depth > 32:
        return None
    name = head.group(1)
    children: list[tuple[str, Node]] = []
    pos = head.end()
    while (child := _element(text, pos, depth + 1)) is not None:
        children.append(child[:2])
        pos = child[2]
    if children:
        end = _close(name).match(text, pos)
        return (name, children, end.end()) if end is not None else None
    # A value ends at its close tag; an invoke or tool_call tag first means it is cut
    # off (one search, so a run of cut-off invokes costs no rescans).
    found = _leaf_end(name).search(text, head.end())
    if found is None or found.group(1) is None:
        return None
    return name, text[head.end() : found.start()], found.end()


@functools.lru_cache(maxsize=256)
def _close(name: str) -> re.Pattern[str]:
    return re.compile(rf"\s*(?:{_NS})?</{re.escape(name)}>")


@functools.lru_cache(maxsize=256)
def _leaf_end(name: str) -> re.Pattern[str]:
    return re.compile(rf"(?:{_NS})?(</{re.escape(name)}>)|(?:{_NS})?</?(?:invoke|tool_call)\b")


def _value(node: Node, schema: Any) -> Any:
    if isinstance(node, str):
        return convert(node, schema)
    types = schema_types(schema)
    if "array" in types and "object" not in types:
        items = schema.get("items") if isinstance(schema, Mapping) else None
        return [_value(child, items) for _, child in node]
    return _object(node, schema)


def _object(children: list[tuple[str, Node]], schema: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    repeated: set[str] = set()
    extra = schema.get("additionalProperties") if isinstance(schema, Mapping) else None
    for key, child in children:
        sub = property_schema(schema, key) if isinstance(schema, dict) else None
        value = _value(child, sub if sub is not None else extra)
        if key not in out:
            out[key] = value
        elif key in repeated:
            out[key].append(value)
        else:  # a repeated name makes a list (vLLM's duplicate_demo case)
            out[key] = [out[key], value]
            repeated.add(key)
    return out


def _invoke(text: str, pos: int, tools: Mapping[str, JSON]) -> tuple[ParsedCall, int] | None:
    head = _INVOKE.match(text, pos)
    if head is None or not valid_name(name := head.group(1).strip()):
        return None
    children: list[tuple[str, Node]] = []
    pos = head.end()
    while (child := _element(text, pos, 0)) is not None:
        children.append(child[:2])
        pos = child[2]
    end = _INVOKE_CLOSE.match(text, pos)
    if end is None:
        return None
    return ParsedCall(name, _object(children, tools.get(name, {}))), end.end()


def _parse_at(text: str, at: int, tools: Mapping[str, JSON]) -> Block | None:
    opener = _OPEN.match(text, at)
    if opener is None:
        return None
    pos = opener.end()
    parts: list[tuple[ParsedCall, str]] = []
    while (found := _invoke(text, pos, tools)) is not None:
        parts.append((found[0], text[pos : found[1]].strip()))
        pos = found[1]
    if not parts:
        return None
    # An invoke cut off after complete ones stays text, the complete ones are calls.
    closing = _CLOSE.match(text, pos)
    return section_block(text, at, closing.end() if closing else pos, parts, tools)


def _render(key: str, value: Any) -> str:
    if isinstance(value, dict) and value:
        inner = "".join(_render(k, v) for k, v in value.items())
    elif isinstance(value, list) and value:
        inner = "".join(_render("item", item) for item in value)
    else:
        inner = value if isinstance(value, str) else dumps(value)
    return f"{NS}<{key}>{inner}{NS}</{key}>"


class MinimaxM3(BlockFormat):
    name = "minimax_m3"
    markers: tuple[str, ...] = (NS + "<tool_call>", "<tool_call>")
    instructions = _INSTRUCTIONS
    result_template = "<response>{content}</response>"

    def starts(self) -> re.Pattern[str]:
        return _OPEN

    def render_calls(self, calls: Sequence[ParsedCall]) -> str:
        invokes = "\n".join(
            f'{NS}<invoke name="{call.name}">'
            + "".join(_render(k, v) for k, v in call.arguments.items())
            + f"{NS}</invoke>"
            for call in calls
        )
        return f"{NS}<tool_call>\n{invokes}\n{NS}</tool_call>"

    parse_at = staticmethod(_parse_at)


FORMAT = MinimaxM3()
