"""InternLM2 tool calls (`<|action_start|><|plugin|>{json}<|action_end|>`).

Owns: the plugin action block holding one `{"name", "parameters"}` object
(`arguments` accepted too). Unlike vLLM's parser (whose unknown-tool check
has no effect), a block naming a tool that was not offered stays text.
Must not: coerce types or execute a cut-off object.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from proxy.formats.base import ParsedCall
from proxy.formats.block_format import BlockFormat
from proxy.formats.blocks import Block, dumps
from proxy.formats.json_scan import call_parts, wrapped_json_block
from proxy.types import JSON

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
    return call_parts(value) if isinstance(value, dict) else None


def _parse_at(text: str, at: int, tools: Mapping[str, JSON]) -> Block | None:
    opener = _OPEN.match(text, at)
    if opener is None:
        return None
    return wrapped_json_block(text, at, (opener.group(), _CLOSE), tools, _one_object)


class InternLM2(BlockFormat):
    name = "internlm2"
    markers: tuple[str, ...] = ("<|action_start|>",)
    instructions = _INSTRUCTIONS

    def render_calls(self, calls: Sequence[ParsedCall]) -> str:
        return "".join(
            f"<|action_start|><|plugin|>\n{dumps({'name': c.name, 'parameters': c.arguments})}{_CLOSE}"
            for c in calls
        )

    parse_at = staticmethod(_parse_at)


FORMAT = InternLM2()
