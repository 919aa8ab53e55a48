"""DeepSeek V3.1 tool calls (`<｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{json}`).

Owns: rendering the V3.1 shape (no type word, no fence, calls chained with no
separator) and its prompt; parsing is deepseek_v3's tolerant reader, which
accepts both shapes. Must not: coerce argument types.
"""

from __future__ import annotations

from collections.abc import Sequence

from proxy.formats.base import ParsedCall
from proxy.formats.blocks import dumps
from proxy.formats.deepseek_v3 import DeepseekV3

_INSTRUCTIONS = """\
## Tools
You have access to the following tools:

{tools}

IMPORTANT: ALWAYS adhere to this exact format for tool use:
<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>tool_call_name<｜tool▁sep｜>tool_call_arguments<｜tool▁call▁end｜>{{additional_tool_calls}}<｜tool▁calls▁end｜>

Where:
- `tool_call_name` must be an exact match to one of the available tools
- `tool_call_arguments` must be valid JSON that strictly follows the tool's Parameters Schema
- For multiple tool calls, chain them directly without separators or spaces"""


class DeepseekV31(DeepseekV3):
    name = "deepseek_v31"
    instructions = _INSTRUCTIONS

    def render_calls(self, calls: Sequence[ParsedCall]) -> str:
        body = "".join(
            f"<｜tool▁call▁begin｜>{call.name}<｜tool▁sep｜>{dumps(call.arguments)}<｜tool▁call▁end｜>"
            for call in calls
        )
        return f"<｜tool▁calls▁begin｜>{body}<｜tool▁calls▁end｜>"


FORMAT = DeepseekV31()
