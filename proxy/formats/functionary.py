"""Functionary tool calls.

Owns: v3.1 (`<function=NAME>{json}</function>`, the `<function name="NAME">`
spelling, and `<|python_tag|>` + raw code for an offered `python` tool) and
v3.2 (`>>>NAME\\n{json}` items, the reply itself starting after the prompt's
`>>>`, and the `all` text marker, which is not content). Must not: take
Qwen3-Coder's `<function=NAME><parameter=…>` for a JSON call, or a prose line
that merely starts with a word for a call.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from proxy.formats.base import ParsedCall
from proxy.formats.block_format import BlockFormat
from proxy.formats.blocks import Block, dumps, section_block
from proxy.formats.json_scan import decode_arguments, json_at, past_close, skip_space, valid_name
from proxy.types import JSON

_V31 = re.compile(r"<function(?:=|\s+name\s*=\s*[\"']?)([^\"'>\s]+)[\"']?\s*>")
_V32_HEAD = re.compile(r"(?:>>>)?[ \t]*([^\s>]+)[ \t]*\n")
_STARTS = re.compile(r"\A|>>>|<function[= ]|<\|python_tag\|>")
_TAG, _CODE_END = "<|python_tag|>", re.compile(r"<\|eom_id\|>|<\|eot_id\|>|\Z")
_ALL = "all"

_INSTRUCTIONS = """\
// Supported function definitions that should be called when necessary.
{tools}

To call a function, write <function=FUNCTION_NAME>{{"argument": "value"}}</function>, \
one per call."""


def _call_block(
    text: str, at: int, head_end: int, name: str, tools: Mapping[str, JSON]
) -> Block | None:
    found = json_at(text, head_end)
    arguments = decode_arguments(found[0]) if found is not None else None
    if found is None or arguments is None or not valid_name(name):
        return None
    end = past_close(text, found[1], "</function>")
    return section_block(text, at, end, [(ParsedCall(name, arguments), text[at:end])], tools)


def _python_block(text: str, at: int, tools: Mapping[str, JSON]) -> Block | None:
    # v3.1 writes code for its python tool raw after the tag.
    if "python" not in tools:
        return None
    start = at + len(_TAG)
    end = _CODE_END.search(text, start)
    stop = end.end() if end is not None else len(text)
    code = text[start : end.start() if end is not None else len(text)].strip()
    return Block(at, stop, (ParsedCall("python", {"code": code}),)) if code else None


def _v32_block(text: str, at: int, tools: Mapping[str, JSON]) -> Block | None:
    head = _V32_HEAD.match(text, at)
    if head is None:
        return None
    if head.group(1) == _ALL:
        return Block(at, head.end(), ())  # the text marker is not content
    if not text.startswith("{", skip_space(text, head.end())):
        return None
    return _call_block(text, at, head.end(), head.group(1), tools)


def _parse_at(text: str, at: int, tools: Mapping[str, JSON]) -> Block | None:
    if text.startswith("<function", at):
        match = _V31.match(text, at)
        return _call_block(text, at, match.end(), match.group(1), tools) if match else None
    if text.startswith(_TAG, at):
        return _python_block(text, at, tools)
    return _v32_block(text, at, tools)


class Functionary(BlockFormat):
    name = "functionary"
    # "{": a v3.2 reply may start with NAME\n{json} and no marker at all.
    markers: tuple[str, ...] = ("<function=", "<function name=", ">>>", _TAG, "{")
    instructions = _INSTRUCTIONS

    def render_calls(self, calls: Sequence[ParsedCall]) -> str:
        return "".join(f"<function={c.name}>{dumps(c.arguments)}</function>" for c in calls)

    parse_at = staticmethod(_parse_at)

    def starts(self) -> re.Pattern[str]:
        return _STARTS


FORMAT = Functionary()
