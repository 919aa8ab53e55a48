"""JSON tool calls as small models write them when told to (`json_block`).

Owns: the `json_block` format used for emulation (its instructions and
rendering); finding the blocks is json_scan's. Must not: accept data whose
`name` is not an offered tool (it stays in the text).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from proxy.formats.base import ParsedCall, ParseResult
from proxy.formats.blocks import dumps, splice, tool_list
from proxy.formats.json_scan import json_blocks
from proxy.types import JSON, ToolDef

_INSTRUCTIONS = """\
# Tools

You may call the following tools. Each line is one tool as JSON:
{tools}

To call a tool, reply with a ```json fenced block holding one object
{{"name": <tool name>, "arguments": <object of arguments>}}
or an array of such objects to call several tools. Put the call block last
in your reply and write nothing after it. Use only the tools listed above.
If no tool is needed, answer normally without any JSON block."""


def render_json_calls(calls: Sequence[ParsedCall]) -> str:
    items = [{"name": call.name, "arguments": call.arguments} for call in calls]
    return dumps(items[0] if len(items) == 1 else items)


class JsonBlockFormat:
    name = "json_block"
    markers: tuple[str, ...] = ("```", "~~~", "{", "[")

    def render_tools(self, tools: Sequence[ToolDef]) -> str:
        return _INSTRUCTIONS.format(tools=tool_list(tools))

    def render_calls(self, calls: Sequence[ParsedCall]) -> str:
        return "```json\n" + render_json_calls(calls) + "\n```"

    def render_result(self, name: str, content: str) -> str:
        return f"Result of {name}:\n```\n{content}\n```"

    def parse(self, text: str, tools: Mapping[str, JSON]) -> ParseResult:
        return splice(text, json_blocks(text, tools))


FORMAT = JsonBlockFormat()
