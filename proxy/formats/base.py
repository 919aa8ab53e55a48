"""The contract every text tool-call format implements, plus tiny shared helpers.

Owns: the ParsedCall / ParseResult values, the TextFormat protocol, and helpers
that every format needs the same way (joining leftover text, tool schemas,
normalising a decoded call object). Must not: know any particular format, do
I/O, or raise from parsing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from proxy.types import JSON, ToolDef


@dataclass(frozen=True)
class ParsedCall:
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class ParseResult:
    calls: tuple[ParsedCall, ...]
    text: str | None
    """Content left after removing recovered calls; None if only whitespace."""


class TextFormat(Protocol):
    name: str
    markers: tuple[str, ...]
    """Literal strings that can begin a call block in this format."""

    def render_tools(self, tools: Sequence[ToolDef]) -> str:
        """System-prompt text: how to call, with the tool list."""
        ...

    def render_calls(self, calls: Sequence[ParsedCall]) -> str:
        """An assistant turn's calls, as the model would write them."""
        ...

    def render_result(self, name: str, content: str) -> str:
        """A tool result, for the history (emulate mode)."""
        ...

    def parse(self, text: str, tools: Mapping[str, JSON]) -> ParseResult:
        """Recover calls to offered tools (name -> parameters schema).

        A block naming a tool not in `tools` stays in the text verbatim.
        Truncated calls stay as text. Never raises.
        """
        ...


def remaining_text(pieces: Iterable[str]) -> str | None:
    """Join leftover text pieces; None when nothing but whitespace remains."""
    text = "".join(pieces)
    return text if text.strip() else None


def no_calls(text: str) -> ParseResult:
    """The result for text in which nothing was recovered."""
    return ParseResult(calls=(), text=remaining_text([text]))


def tool_schemas(tools: Sequence[ToolDef]) -> dict[str, JSON]:
    """Offered tool name -> its `parameters` schema (empty object schema if absent)."""
    out: dict[str, JSON] = {}
    for tool in tools:
        function = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(function, dict):
            continue
        name = function.get("name")
        if isinstance(name, str) and name:
            params = function.get("parameters")
            out[name] = dict(params) if isinstance(params, dict) else {"type": "object"}
    return out
