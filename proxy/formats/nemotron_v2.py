"""NVIDIA Nemotron Nano v2 tool calls (`<TOOLCALL>[…]</TOOLCALL>`).

Owns: Nemotron's tags; the parsing, rendering and prompt are wrapped_json's.
Must not: parse anything itself (a fix belongs in wrapped_json, for every wrapper).
"""

from __future__ import annotations

from proxy.formats.wrapped_json import WrappedJson

FORMAT = WrappedJson("nemotron_v2", ("<TOOLCALL>", "</TOOLCALL>"))
