"""InternLM2 tool calls (`<|action_start|><|plugin|>{json}<|action_end|>`), formats.md §3.14.

Owns: the plugin action block holding one `{"name", "parameters"}` object
(`arguments` accepted too). Unlike vLLM's parser (whose unknown-tool check
has no effect), a block naming a tool that was not offered stays text.
Must not: coerce types or execute a cut-off object.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from proxy.formats.base import ParsedCall, ParseResult
from proxy.formats.blocks import (
    Block,
    calls_from_array,
    dumps,
    find_blocks,
    marker_pattern,
    splice,
    tool_list,
    wrapped_json_block,
)
from proxy.types import JSON, ToolDef

_OPEN = re.compile(r"<\|action_start\|>\s*<\|plugin\|>")
_CLOSE = "<|action_end|>"

_INSTRUCTIONS = """\
You have access to the following plugins:
{tools}

To use a plugin, write <|action_start|><|plugin|> followed by a JSON object with "name" and \
"parameters", then <|action_end|>, for example:
<|action_start|><|plugin|>
{{"name": "FUNCTION_NAME", "parameters": {{"argument": "value"}}}}<|action_end|>"""


def _one_object(value: Any) -> list[tuple[ParsedCall, str]] | None:
    return calls_from_array(value) if isinstance(value, dict) else None


def _parse_at(text: str, at: int, tools: Mapping[str, JSON]) -> Block | None:
    opener = _OPEN.match(text, at)
    if opener is None:
        return None
    return wrapped_json_block(text, at, (opener.group(), _CLOSE), tools, _one_object)


class InternLM2:
    name = "internlm2"
    markers: tuple[str, ...] = ("<|action_start|>",)

    def render_tools(self, tools: Sequence[ToolDef]) -> str:
        return _INSTRUCTIONS.format(tools=tool_list(tools))

    def render_calls(self, calls: Sequence[ParsedCall]) -> str:
        return "".join(
            f"<|action_start|><|plugin|>\n{dumps({'name': c.name, 'parameters': c.arguments})}{_CLOSE}"
            for c in calls
        )

    def render_result(self, name: str, content: str) -> str:
        return content

    def parse(self, text: str, tools: Mapping[str, JSON]) -> ParseResult:
        blocks = find_blocks(
            text, marker_pattern(self.markers), lambda t, at: _parse_at(t, at, tools)
        )
        return splice(text, blocks)


FORMAT = InternLM2()
