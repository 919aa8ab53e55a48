"""ByteDance Seed-OSS tool calls (`<seed:tool_call><function=NAME>...</seed:tool_call>`).

Owns: Seed-OSS's wrapper, prompt and rendering; what stands inside the wrapper
is Qwen3-Coder's `<function=NAME>` / `<parameter=KEY>` markup, read by
qwen3_coder_xml (values typed by the offered schema). Reasoning
(`<seed:think>...</seed:think>`) is formats.detect's. Must not: execute a
function block that is cut off.
"""

from __future__ import annotations

from collections.abc import Sequence

from proxy.formats.base import ParsedCall
from proxy.formats.qwen3_coder_xml import Qwen3CoderXml
from proxy.formats.xml_values import render_value

_OPEN, _CLOSE = "<seed:tool_call>", "</seed:tool_call>"

_INSTRUCTIONS = """\
You have access to the following functions:

{tools}

To call a function, reply in this format, one <seed:tool_call> block per call:

<seed:tool_call>
<function=example_function_name>
<parameter=example_parameter_1>value_1</parameter>
<parameter=example_parameter_2>This is the value for the second parameter
that can span
multiple lines</parameter>
</function>
</seed:tool_call>

Required parameters MUST be specified. You may explain your reasoning BEFORE the call, \
but NOT after."""


class SeedOss(Qwen3CoderXml):
    name = "seed_oss"
    markers: tuple[str, ...] = (_OPEN,)
    instructions = _INSTRUCTIONS
    result_template = "{content}"

    def render_calls(self, calls: Sequence[ParsedCall]) -> str:
        return "\n".join(_render_call(call) for call in calls)


def _render_call(call: ParsedCall) -> str:
    params = "".join(
        f"<parameter={key}>\n{render_value(value)}\n</parameter>\n"
        for key, value in call.arguments.items()
    )
    return f"{_OPEN}\n<function={call.name}>\n{params}</function>\n{_CLOSE}"


FORMAT = SeedOss()
