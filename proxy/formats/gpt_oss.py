"""gpt-oss (harmony) tool calls written as text.

Owns: a `commentary` message addressed ` to=functions.NAME` (before or after
the channel token, optional `<|constrain|>json`) whose `<|message|>` body is
the JSON arguments, ended by `<|call|>`; the `analysis` channel is reasoning
and is removed; the `final` channel and recipient-less commentary keep their
text without the channel header. Must not: coerce types or execute cut-off
arguments.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from proxy.formats.base import ParsedCall, ParseResult
from proxy.formats.block_format import BlockFormat
from proxy.formats.blocks import Block, dumps, section_block, splice
from proxy.formats.json_scan import decode_arguments, json_at, past_close, valid_name
from proxy.types import JSON

_START = r"(?:<\|start\|>\s*assistant\s*)?"
_CALL = re.compile(
    _START + r"(?:to=functions\.(?P<a>[^\s<]+)\s*)?<\|channel\|>\s*commentary"
    r"(?:\s+to=functions\.(?P<b>[^\s<]+))?\s*(?:<\|constrain\|>\s*)?(?:json)?\s*<\|message\|>"
)
_OTHER = re.compile(
    _START + r"<\|channel\|>\s*(?P<channel>analysis|final|commentary)\s*<\|message\|>"
)
_MESSAGE_END = re.compile(r"<\|end\|>|<\|start\|>|<\|channel\|>")
_STARTS = re.compile(r"<\|start\|>|<\|channel\|>")
_CONTROL = ("<|end|>", "<|return|>", "<|call|>")

_INSTRUCTIONS = """\
# Tools

## functions

{tools}

To call a function, write a commentary message addressed to it:
<|start|>assistant<|channel|>commentary to=functions.FUNCTION_NAME <|constrain|>json<|message|>{{"argument": "value"}}<|call|>"""


def _call_block(text: str, at: int, tools: Mapping[str, JSON]) -> Block | None:
    header = _CALL.match(text, at)
    name = (header.group("a") or header.group("b")) if header else None
    if header is None or name is None or not valid_name(name):
        return None
    found = json_at(text, header.end())
    arguments = decode_arguments(found[0]) if found is not None else None
    if found is None or arguments is None:
        return None
    end = past_close(text, found[1], "<|call|>")
    return section_block(text, at, end, [(ParsedCall(name, arguments), text[at:end])], tools)


def _other_block(text: str, at: int) -> Block | None:
    header = _OTHER.match(text, at)
    if header is None:
        return None
    if header.group("channel") != "analysis":
        return Block(at, header.end(), ())  # the header is not content; the message is
    stop = _MESSAGE_END.search(text, header.end())
    if stop is None:
        return Block(at, len(text), ())
    # Reasoning runs to its <|end|>, or up to the next message when that is missing.
    return Block(at, stop.end() if stop.group() == "<|end|>" else stop.start(), ())


def _parse_at(text: str, at: int, tools: Mapping[str, JSON]) -> Block | None:
    return _call_block(text, at, tools) or _other_block(text, at)


class GptOss(BlockFormat):
    name = "gpt_oss"
    markers: tuple[str, ...] = ("<|start|>", "<|channel|>")
    instructions = _INSTRUCTIONS
    result_template = (
        "<|start|>functions.{name} to=assistant<|channel|>commentary<|message|>{content}<|end|>"
    )

    def render_calls(self, calls: Sequence[ParsedCall]) -> str:
        return "".join(
            f"<|start|>assistant<|channel|>commentary to=functions.{c.name} <|constrain|>json"
            f"<|message|>{dumps(c.arguments)}<|call|>"
            for c in calls
        )

    parse_at = staticmethod(_parse_at)

    def starts(self) -> re.Pattern[str]:
        return _STARTS

    def parse(self, text: str, tools: Mapping[str, JSON]) -> ParseResult:
        blocks = self.find(text, tools)
        if not any(block.calls for block in blocks):
            return splice(text, [])
        return splice(text, blocks, drop=_CONTROL)


FORMAT = GptOss()
