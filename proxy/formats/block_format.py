"""The skeleton most text formats share: calls are blocks found at markers.

Owns: the TextFormat methods that are the same for every block-based format
(prompt from a `{tools}` template, results passed through as they are, parse
= find blocks at the markers and splice them out). A format supplies its
name, markers, prompt template, `parse_at` and `render_calls`, and overrides
what it does differently. Must not: know any particular format's markup.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence

from proxy.formats.base import ParsedCall, ParseResult, remaining_text
from proxy.formats.blocks import Block, find_blocks, marker_pattern, splice, tool_list
from proxy.formats.detect import drop_controls
from proxy.types import JSON, ToolDef


class BlockFormat(ABC):
    """A format whose calls are blocks starting at one of its markers."""

    name: str
    markers: tuple[str, ...]
    instructions: str
    """The system-prompt template; `{tools}` becomes the tool list."""
    tool_separator = "\n"
    """Between two tools in the prompt (templates that print one JSON list use ", ")."""
    drop: tuple[str, ...] = ()
    """Control tokens removed from the text around the calls."""
    controls: tuple[str, ...] = ()
    """Section markers and headers that are markup wherever they stand, kept blocks
    included: no result holds them (recovery drops them from any format's result too,
    formats.detect.recover_with)."""
    result_template = "{content}"
    """A tool result in the history; `{name}` is the tool, `{content}` its output."""

    @abstractmethod
    def parse_at(self, text: str, at: int, tools: Mapping[str, JSON]) -> Block | None:
        """The call block starting at `at`, or None when there is none."""

    @abstractmethod
    def render_calls(self, calls: Sequence[ParsedCall]) -> str:
        """An assistant turn's calls, as the model would write them."""

    def starts(self) -> re.Pattern[str]:
        """Where a block may start: any marker unless the format knows better."""
        return marker_pattern(self.markers)

    def render_tools(self, tools: Sequence[ToolDef]) -> str:
        return self.instructions.format(tools=tool_list(tools).replace("\n", self.tool_separator))

    def render_result(self, name: str, content: str) -> str:
        return self.result_template.format(name=name, content=content)

    def find(self, text: str, tools: Mapping[str, JSON]) -> list[Block]:
        """Every call block in text, in order."""
        return find_blocks(text, self.starts(), lambda t, at: self.parse_at(t, at, tools))

    def parse(self, text: str, tools: Mapping[str, JSON]) -> ParseResult:
        result = splice(text, self.find(text, tools), drop=self.drop)
        if not self.controls or result.text is None:
            return result
        return ParseResult(result.calls,
                           remaining_text([drop_controls(result.text, self.controls)]))
