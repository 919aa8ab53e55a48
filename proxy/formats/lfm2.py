"""LFM2 tool calls: a call list between `<|tool_call_start|>` and `<|tool_call_end|>`.

Owns: the LFM2 sentinels around a pythonic list (the default) or a JSON
array of `{name, arguments}` (the variant llama.cpp handles); text may follow
the calls. Must not: accept a list cut off before it closes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from proxy.formats.base import ParsedCall
from proxy.formats.block_format import BlockFormat
from proxy.formats.blocks import Block, section_block
from proxy.formats.json_scan import call_parts, past_close, skip_space
from proxy.formats.jsonish import loads_lenient, scan_json_value
from proxy.formats.pythonic import call_list, render_call
from proxy.types import JSON

_OPEN, _CLOSE = "<|tool_call_start|>", "<|tool_call_end|>"

_INSTRUCTIONS = """\
List of tools: <|tool_list_start|>[{tools}]<|tool_list_end|>

To call tools, write the calls as a Python list between <|tool_call_start|> and <|tool_call_end|>, \
for example <|tool_call_start|>[func_name(param_name="value")]<|tool_call_end|>."""


def _parse_at(text: str, at: int, tools: Mapping[str, JSON]) -> Block | None:
    pos = at + len(_OPEN)
    pos = skip_space(text, pos)
    end = scan_json_value(text, pos) if text.startswith("[", pos) else None
    if end is None:
        return None
    source = text[pos:end]
    parts = call_list(source)
    if parts is None:
        decoded = loads_lenient(source)
        parts = call_parts(decoded[0], source=source) if decoded is not None else None
    if parts is None:
        return None
    return section_block(text, at, past_close(text, end, _CLOSE), parts, tools)


class Lfm2(BlockFormat):
    name = "lfm2"
    markers: tuple[str, ...] = (_OPEN,)
    instructions = _INSTRUCTIONS
    tool_separator = ", "

    def render_calls(self, calls: Sequence[ParsedCall]) -> str:
        return _OPEN + "[" + ", ".join(render_call(call) for call in calls) + "]" + _CLOSE

    parse_at = staticmethod(_parse_at)


FORMAT = Lfm2()
