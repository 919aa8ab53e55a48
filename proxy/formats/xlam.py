"""xLAM tool calls: the reply is a JSON array of `{name, arguments}`.

Owns: finding that array (or a single call object) where vLLM's xlam parser
looks: on its own line (the whole reply, or a line after prose), after
`</think>`, inside a ```json or bare fence, after `[TOOL_CALLS]`, inside
`<tool_call>` tags. Must not: take JSON in the middle of a sentence, JSON data
that is not a call to an offered tool, or a cut-off array for a call.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from proxy.formats.base import ParsedCall
from proxy.formats.block_format import BlockFormat
from proxy.formats.blocks import Block, dumps, section_block
from proxy.formats.json_scan import call_parts, json_at, skip_space, wrapped_json_block
from proxy.types import JSON

_FENCE = re.compile(r"[ \t]*(`{3,}|~{3,})[ \t]*(?:json)?[ \t]*\n", re.IGNORECASE)
# Only JSON that opens like a call object is scanned to its end: a line-start
# bracket in data or prose (nested lines of a long pretty-printed document)
# would otherwise be scanned again and again.
_CALL_OPENING = r"(?=\[?\s*\{\s*[\"']?(?:name|arguments|parameters|type|function)[\"']?\s*:)"
# Indented lines are left alone (nested lines of data, maybe of an array cut
# off before it closes), except at the very start of the reply.
_STARTS = re.compile(
    r"(?m)^[ \t]*(?:`{3,}|~{3,})|\A\s*" + _CALL_OPENING + r"[\[{]|^" + _CALL_OPENING + r"[\[{]"
    r"|\[TOOL_CALLS\]|<tool_call>|(?<=</think>)\s*" + _CALL_OPENING + r"[\[{]"
)
_LINE_REST = re.compile(r"[ \t]*(?:\n|\Z)")
_WRAPPERS = (("[TOOL_CALLS]", ""), ("<tool_call>", "</tool_call>"))

_INSTRUCTIONS = """\
You have access to the following tools:
{tools}

When you call tools, reply with only a JSON array of calls, each an object with "name" and \
"arguments", for example: [{{"name": "FUNCTION_NAME", "arguments": {{"argument": "value"}}}}]"""


def _fenced(text: str, at: int, tools: Mapping[str, JSON]) -> Block | None:
    fence = _FENCE.match(text, at)
    found = json_at(text, fence.end()) if fence else None
    parts = call_parts(found[0], source=text[fence.end() : found[1]]) if fence and found else None
    if fence is None or found is None or parts is None:
        return None
    end = skip_space(text, found[1])
    if text.startswith(fence.group(1), end):
        end += len(fence.group(1))
    elif end < len(text):
        return None  # more than the call inside the fence: an example, not a call
    return section_block(text, at, end, parts, tools)


def _whole_fence(text: str, at: int) -> Block | None:
    """A fence that is not a call: kept whole, so lines inside are not tried."""
    fence = _FENCE.match(text, at)
    close = text.find("\n" + fence.group(1), fence.end() - 1) if fence else -1
    if fence is None or close < 0:
        return None
    end = close + 1 + len(fence.group(1))
    return Block(at, end, (), text[at:end])


def _bare(text: str, at: int, tools: Mapping[str, JSON]) -> Block | None:
    found = json_at(text, at)
    parts = call_parts(found[0], source=text[at : found[1]]) if found else None
    rest = _LINE_REST.match(text, found[1]) if found else None
    if found is None or parts is None or rest is None:
        return None  # JSON inside a line of prose is never a call
    return section_block(text, at, found[1], parts, tools)


def _parse_at(text: str, at: int, tools: Mapping[str, JSON]) -> Block | None:
    pos = skip_space(text, at)
    for wrapper in _WRAPPERS:
        if text.startswith(wrapper[0], pos):
            return wrapped_json_block(text, pos, wrapper, tools)
    if text.startswith(("```", "~~~"), pos):
        return _fenced(text, pos, tools) or _whole_fence(text, pos)
    return _bare(text, pos, tools)


class Xlam(BlockFormat):
    name = "xlam"
    markers: tuple[str, ...] = ("[", "{", "```", "~~~", "[TOOL_CALLS]", "<tool_call>")
    instructions = _INSTRUCTIONS

    def render_calls(self, calls: Sequence[ParsedCall]) -> str:
        return dumps([{"name": c.name, "arguments": c.arguments} for c in calls])

    parse_at = staticmethod(_parse_at)

    def starts(self) -> re.Pattern[str]:
        return _STARTS


FORMAT = Xlam()
