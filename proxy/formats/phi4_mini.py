"""Phi-4-mini tool calls (`functools[…]`, no closing marker).

Owns: the `functools` marker followed by a JSON array of `{name, arguments}`
(Firefunction v2's ` functools[` is the same shape), decoded bracket-aware so
arrays inside arguments do not end the list. Must not: stop at the first `]`
(vLLM's bug, phi4mini-002) or execute a cut-off array.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from proxy.formats.base import ParsedCall
from proxy.formats.block_format import BlockFormat
from proxy.formats.blocks import Block, dumps
from proxy.formats.json_scan import call_parts, wrapped_json_block
from proxy.types import JSON

_MARKER = "functools"

_INSTRUCTIONS = """\
You are a helpful assistant with some tools.<|tool|>[{tools}]<|/tool|>

To call tools, reply with functools followed by a JSON list of calls, each with "name" and \
"arguments", for example: functools[{{"name": "FUNCTION_NAME", "arguments": {{"argument": "value"}}}}]"""


def _array(value: Any) -> list[tuple[ParsedCall, str]] | None:
    return call_parts(value) if isinstance(value, list) else None


def _parse_at(text: str, at: int, tools: Mapping[str, JSON]) -> Block | None:
    if not text.startswith("[", at + len(_MARKER)):
        return None
    return wrapped_json_block(text, at, (_MARKER, ""), tools, _array)


class Phi4Mini(BlockFormat):
    name = "phi4_mini"
    markers: tuple[str, ...] = (_MARKER + "[",)
    instructions = _INSTRUCTIONS
    tool_separator = ", "

    def render_calls(self, calls: Sequence[ParsedCall]) -> str:
        return _MARKER + dumps([{"name": c.name, "arguments": c.arguments} for c in calls])

    parse_at = staticmethod(_parse_at)


FORMAT = Phi4Mini()
