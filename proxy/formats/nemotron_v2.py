"""NVIDIA Nemotron Nano v2 tool calls (`<TOOLCALL>[…]</TOOLCALL>`), formats.md §3.14.

Owns: the tag-wrapped JSON array of `{name, arguments}`; the close tag may be
missing at the end of output. Must not: coerce types or execute a cut-off array.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from proxy.formats.base import ParsedCall, ParseResult
from proxy.formats.blocks import (
    dumps,
    find_blocks,
    marker_pattern,
    splice,
    tool_list,
    wrapped_json_block,
)
from proxy.types import JSON, ToolDef

_WRAPPER = ("<TOOLCALL>", "</TOOLCALL>")

_INSTRUCTIONS = """\
You have access to the following tools:
{tools}

To call tools, reply with <TOOLCALL>, a JSON list of objects with "name" and "arguments", \
then </TOOLCALL>, for example:
<TOOLCALL>[{{"name": "FUNCTION_NAME", "arguments": {{"argument": "value"}}}}]</TOOLCALL>"""


class NemotronV2:
    name = "nemotron_v2"
    markers: tuple[str, ...] = (_WRAPPER[0],)

    def render_tools(self, tools: Sequence[ToolDef]) -> str:
        return _INSTRUCTIONS.format(tools=tool_list(tools))

    def render_calls(self, calls: Sequence[ParsedCall]) -> str:
        items = dumps([{"name": c.name, "arguments": c.arguments} for c in calls])
        return f"{_WRAPPER[0]}{items}{_WRAPPER[1]}"

    def render_result(self, name: str, content: str) -> str:
        return content

    def parse(self, text: str, tools: Mapping[str, JSON]) -> ParseResult:
        blocks = find_blocks(
            text,
            marker_pattern(self.markers),
            lambda t, at: wrapped_json_block(t, at, _WRAPPER, tools),
        )
        return splice(text, blocks)


FORMAT = NemotronV2()
