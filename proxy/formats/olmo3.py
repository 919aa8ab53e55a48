"""OLMo 3 tool calls (`<function_calls>` + one Python call per line + `</function_calls>`).

Owns: OLMo 3's wrapper and rendering; the calls inside are read by
pythonic's literal-only reader (keyword arguments, Python or JSON literals:
`None`/`null`, `True`/`true`). Must not: evaluate anything, accept
positional arguments, or execute a block whose calls are cut off (the
close tag may be missing when every call is complete).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from proxy.formats.base import ParsedCall
from proxy.formats.block_format import BlockFormat
from proxy.formats.blocks import Block, section_block
from proxy.formats.pythonic import call_lines, render_call
from proxy.types import JSON

_OPEN, _CLOSE = "<function_calls>", "</function_calls>"

_INSTRUCTIONS = """\
You are a helpful function-calling AI assistant. You are provided with function signatures \
within <functions></functions> XML tags:
<functions>
{tools}
</functions>

To call functions, write them as Python calls with keyword arguments, one per line, \
inside <function_calls></function_calls> tags, for example:
<function_calls>
get_weather(city="Paris", days=3)
</function_calls>"""


def _parse_at(text: str, at: int, tools: Mapping[str, JSON]) -> Block | None:
    start = at + len(_OPEN)
    # Without a close, the calls run to the next opener at most: each opener parses
    # its own stretch once, never the rest of the reply again.
    following = text.find(_OPEN, start)
    close = text.find(_CLOSE, start, following if following >= 0 else len(text))
    end = close if close >= 0 else following if following >= 0 else len(text)
    parts = call_lines(text[start:end])
    if parts is None:
        return None
    return section_block(text, at, end + len(_CLOSE) if close >= 0 else end, parts, tools)


class Olmo3(BlockFormat):
    name = "olmo3"
    markers: tuple[str, ...] = (_OPEN,)
    instructions = _INSTRUCTIONS

    def render_calls(self, calls: Sequence[ParsedCall]) -> str:
        return f"{_OPEN}\n" + "\n".join(render_call(call) for call in calls) + f"\n{_CLOSE}"

    parse_at = staticmethod(_parse_at)


FORMAT = Olmo3()
