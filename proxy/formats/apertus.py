"""Apertus tool calls (`<|tools_prefix|>[{"NAME": {args}}]<|tools_suffix|>`).

Owns: the short form where each list item's single key is the tool name
(the `{name, arguments}` form is accepted too); the suffix may be missing at
the end of output. Must not: coerce types or execute a cut-off list.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from proxy.formats.base import ParsedCall
from proxy.formats.block_format import BlockFormat
from proxy.formats.blocks import Block, dumps
from proxy.formats.json_scan import (
    call_from_object,
    decode_arguments,
    valid_name,
    wrapped_json_block,
)
from proxy.types import JSON

_WRAPPER = ("<|tools_prefix|>", "<|tools_suffix|>")

_INSTRUCTIONS = """\
Available tools:
{tools}

To call tools, write <|tools_prefix|>, a JSON list with one object per call whose only key is \
the tool name and whose value is the arguments object, then <|tools_suffix|>, for example:
<|tools_prefix|>[{{"FUNCTION_NAME": {{"argument": "value"}}}}]<|tools_suffix|>"""


def _item(item: Any) -> ParsedCall | None:
    if isinstance(item, dict) and len(item) == 1:
        name, value = next(iter(item.items()))
        arguments = decode_arguments(value)
        if valid_name(name) and arguments is not None:
            return ParsedCall(name, arguments)
    return call_from_object(item)


def _parts(value: Any) -> list[tuple[ParsedCall, str]] | None:
    items = value if isinstance(value, list) else [value]
    parts = [(_item(item), dumps(item)) for item in items]
    calls = [(call, raw) for call, raw in parts if call is not None]
    return calls if calls and len(calls) == len(parts) else None


class Apertus(BlockFormat):
    name = "apertus"
    markers: tuple[str, ...] = (_WRAPPER[0],)
    instructions = _INSTRUCTIONS

    def render_calls(self, calls: Sequence[ParsedCall]) -> str:
        return _WRAPPER[0] + dumps([{c.name: c.arguments} for c in calls]) + _WRAPPER[1]

    def parse_at(self, text: str, at: int, tools: Mapping[str, JSON]) -> Block | None:
        return wrapped_json_block(text, at, _WRAPPER, tools, _parts)


FORMAT = Apertus()
