"""Command R7B tool calls (`<|START_ACTION|>[…]<|END_ACTION|>`).

Owns: the action block's JSON list of `{tool_call_id, tool_name, parameters}`
and removing the response markers, which are not prose. The
`<|START_THINKING|>…<|END_THINKING|>` reasoning is formats.detect's, like
every family's: it is gone before any format parses. Must not: coerce types
or execute a cut-off list.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from proxy.formats.base import ParsedCall
from proxy.formats.block_format import BlockFormat
from proxy.formats.blocks import Block, dumps
from proxy.formats.json_scan import decode_arguments, valid_name, wrapped_json_block
from proxy.types import JSON

_ACTION = ("<|START_ACTION|>", "<|END_ACTION|>")
_RESPONSE = ("<|START_RESPONSE|>", "<|END_RESPONSE|>")

_INSTRUCTIONS = """\
## Available Tools
{tools}

To call tools, write <|START_ACTION|>, a JSON list of objects with "tool_call_id", "tool_name" \
and "parameters", then <|END_ACTION|>, for example:
<|START_ACTION|>[{{"tool_call_id": "0", "tool_name": "FUNCTION_NAME", "parameters": {{"argument": "value"}}}}]<|END_ACTION|>"""


def _parts(value: Any) -> list[tuple[ParsedCall, str]] | None:
    parts: list[tuple[ParsedCall, str]] = []
    for item in value if isinstance(value, list) else [value]:
        name = item.get("tool_name") if isinstance(item, dict) else None
        arguments = decode_arguments(item.get("parameters", {})) if isinstance(item, dict) else None
        if not isinstance(name, str) or not valid_name(name) or arguments is None:
            return None
        parts.append((ParsedCall(name, arguments), dumps(item)))
    return parts or None


def _parse_at(text: str, at: int, tools: Mapping[str, JSON]) -> Block | None:
    return wrapped_json_block(text, at, _ACTION, tools, _parts)


class CommandR7B(BlockFormat):
    name = "command_r7b"
    markers: tuple[str, ...] = (_ACTION[0],)
    instructions = _INSTRUCTIONS
    drop = _RESPONSE

    def render_calls(self, calls: Sequence[ParsedCall]) -> str:
        items = [
            {"tool_call_id": str(i), "tool_name": c.name, "parameters": c.arguments}
            for i, c in enumerate(calls)
        ]
        return _ACTION[0] + dumps(items) + _ACTION[1]

    parse_at = staticmethod(_parse_at)


FORMAT = CommandR7B()
