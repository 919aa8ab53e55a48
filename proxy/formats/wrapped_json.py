"""A JSON list of `{name, arguments}` between an open and a close tag.

Owns: the shape Jamba (`<tool_calls>`) and Nemotron Nano v2 (`<TOOLCALL>`)
share, differing only in their tags: parsing (the close tag may be missing at
the end of output), rendering and the prompt. Must not: coerce types or
execute a cut-off array.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from proxy.formats.base import ParsedCall
from proxy.formats.block_format import BlockFormat
from proxy.formats.blocks import Block, dumps
from proxy.formats.json_scan import wrapped_json_block
from proxy.types import JSON

_INSTRUCTIONS = """\
You have access to the following tools:
{tools}

To call tools, reply with OPEN, a JSON list of objects with "name" and "arguments", \
then CLOSE, for example:
OPEN[{{"name": "FUNCTION_NAME", "arguments": {{"argument": "value"}}}}]CLOSE"""


class WrappedJson(BlockFormat):
    """The format called name, whose calls sit between wrapper[0] and wrapper[1]."""

    def __init__(self, name: str, wrapper: tuple[str, str]) -> None:
        self.name = name
        self.wrapper = wrapper
        self.markers = (wrapper[0],)
        self.instructions = _INSTRUCTIONS.replace("OPEN", wrapper[0]).replace("CLOSE", wrapper[1])

    def parse_at(self, text: str, at: int, tools: Mapping[str, JSON]) -> Block | None:
        return wrapped_json_block(text, at, self.wrapper, tools)

    def render_calls(self, calls: Sequence[ParsedCall]) -> str:
        items = dumps([{"name": c.name, "arguments": c.arguments} for c in calls])
        return f"{self.wrapper[0]}{items}{self.wrapper[1]}"
