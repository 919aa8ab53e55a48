"""AI21 Jamba tool calls (`<tool_calls>[…]</tool_calls>`).

Owns: Jamba's tags; the parsing, rendering and prompt are wrapped_json's.
Must not: parse anything itself (a fix belongs in wrapped_json, for every wrapper).
"""

from __future__ import annotations

from proxy.formats.wrapped_json import WrappedJson

FORMAT = WrappedJson("jamba", ("<tool_calls>", "</tool_calls>"))
