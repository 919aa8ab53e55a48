"""IBM Granite tool calls.

Owns: Granite 3.0 (`<|tool_call|>` + JSON array), 3.1-3.3 (`<tool_call>` +
array, no close), Granite 4 (`<tool_call>{…}</tool_call>`, arguments often a
JSON string) and granite-20b-functioncalling (`<function_call>` + object).
Must not: coerce argument types or execute a cut-off array.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from proxy.formats.base import ParsedCall
from proxy.formats.block_format import BlockFormat
from proxy.formats.blocks import Block, dumps
from proxy.formats.json_scan import call_parts, wrapped_json_block
from proxy.types import JSON

_WRAPPERS = (("<|tool_call|>", ""), ("<tool_call>", "</tool_call>"), ("<function_call>", ""))

_INSTRUCTIONS = """\
You are a helpful assistant with access to the following function calls. Your task is to \
produce a list of function calls necessary to generate response to the user utterance. \
Use the following function calls as required.
<|tool|>
{tools}
<|/tool|>

To call functions, reply with <|tool_call|> followed by a JSON list of objects, each with \
"name" and "arguments", for example:
<|tool_call|>[{{"name": "FUNCTION_NAME", "arguments": {{"argument": "value"}}}}]"""


def _one_object(value: Any) -> list[tuple[ParsedCall, str]] | None:
    # granite-20b-functioncalling writes one object per <function_call>.
    return call_parts(value) if isinstance(value, dict) else None


def _parse_at(text: str, at: int, tools: Mapping[str, JSON]) -> Block | None:
    for wrapper in _WRAPPERS:
        if text.startswith(wrapper[0], at):
            to_parts = _one_object if wrapper[0] == "<function_call>" else call_parts
            return wrapped_json_block(text, at, wrapper, tools, to_parts)
    return None


class Granite(BlockFormat):
    name = "granite"
    markers: tuple[str, ...] = tuple(opener for opener, _ in _WRAPPERS)
    instructions = _INSTRUCTIONS

    def render_calls(self, calls: Sequence[ParsedCall]) -> str:
        return "<|tool_call|>" + dumps([{"name": c.name, "arguments": c.arguments} for c in calls])

    parse_at = staticmethod(_parse_at)


FORMAT = Granite()
