"""Meituan LongCat tool calls (`<longcat_tool_call>{"name", "arguments"}</longcat_tool_call>`).

Owns: LongCat's tags (one block per call, as vLLM's longcat parser reads
them: Hermes' shape under other tag names), its prompt and its
`<longcat_tool_response>` result wrapper. Must not: coerce types or execute
a call whose JSON is cut off; the close tag may be missing after complete JSON.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from proxy.formats.base import ParsedCall
from proxy.formats.block_format import BlockFormat
from proxy.formats.blocks import Block, dumps
from proxy.formats.json_scan import wrapped_json_block
from proxy.types import JSON

_TAGS = ("<longcat_tool_call>", "</longcat_tool_call>")

_INSTRUCTIONS = """\
## Tools
You have access to the following tools:

{tools}

For each function call, return a JSON object with the function name and arguments within \
<longcat_tool_call></longcat_tool_call> tags:
<longcat_tool_call>
{{"name": <function-name>, "arguments": <args-json-object>}}
</longcat_tool_call>"""


class Longcat(BlockFormat):
    name = "longcat"
    markers: tuple[str, ...] = (_TAGS[0],)
    instructions = _INSTRUCTIONS
    result_template = "<longcat_tool_response>\n{content}\n</longcat_tool_response>"

    def parse_at(self, text: str, at: int, tools: Mapping[str, JSON]) -> Block | None:
        return wrapped_json_block(text, at, _TAGS, tools)

    def render_calls(self, calls: Sequence[ParsedCall]) -> str:
        return "\n".join(
            f"{_TAGS[0]}\n" + dumps({"name": c.name, "arguments": c.arguments}) + f"\n{_TAGS[1]}"
            for c in calls
        )


FORMAT = Longcat()
