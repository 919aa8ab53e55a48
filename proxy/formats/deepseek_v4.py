"""DeepSeek V4 tool calls: V3.2's DSML inside `<｜DSML｜tool_calls>`.

Owns: naming the V4 wrapper element; the invoke/parameter grammar (with
`string="true|false"`) is V3.2's, in deepseek_v32 (vLLM's deepseekv4 parser
likewise only renames the start and end tokens of its V3.2 parser). Must not:
parse anything itself.
"""

from __future__ import annotations

from proxy.formats.deepseek_v32 import Dsml

FORMAT = Dsml("deepseek_v4", "tool_calls")
