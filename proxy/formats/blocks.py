"""Finding call blocks in a reply and splicing recovered ones out of it.

Owns what the per-format parsers share: where a call may not start (code
fences of an answer, inline code spans, closed reasoning blocks), the scan
that offers each candidate start to a format's block parser, putting the text
back together (unknown-tool calls kept as text, control tokens dropped), and
the tool list every `render_tools` prints. Must not: know any particular
format, scan or repair JSON (that is json_scan and jsonish), or raise.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from proxy.formats.base import ParsedCall, ParseResult, remaining_text
from proxy.formats.detect import REASONING
from proxy.types import JSON, ToolDef

_FENCE_LINE = re.compile(r"^[ \t]{0,3}(`{3,}|~{3,})[ \t]*([^\n]*)$", re.MULTILINE)
_INLINE_CODE = re.compile(r"(?<!`)(`{1,2})(?!`)([^\n]+?)(?<!`)\1(?!`)")
# Any family's closed reasoning block (formats.detect.REASONING): markup inside is a thought.
_THINK = re.compile("|".join(re.escape(o) + ".*?" + re.escape(c) for o, c in REASONING.items()),
                    re.DOTALL)
_JSON_INFO = ("json", "json5", "jsonc")


@dataclass(frozen=True)
class Block:
    """A recognised call block: text[start:end] is replaced by `keep`.

    No calls means the block named no offered tool: keep is its raw text.
    """

    start: int
    end: int
    calls: tuple[ParsedCall, ...]
    keep: str = ""


def protected_spans(text: str) -> list[tuple[int, int]]:
    """Regions where markup is an example, not a call (code fences, inline code)."""
    spans = _fence_spans(text)
    spans += [(m.start(), m.end()) for m in _INLINE_CODE.finditer(text)]
    # Reasoning forced open by the prompt (only its close appears) is removed
    # by formats.detect before any format parses; here a lone close tag may
    # well be data inside a call's arguments.
    spans += [(m.start(), m.end()) for m in _THINK.finditer(text)]
    return sorted(spans)


def _fence_spans(text: str) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    opened: tuple[int, str, str] | None = None
    for match in _FENCE_LINE.finditer(text):
        run, info = match.group(1), match.group(2).strip()
        if opened is None:
            opened = (match.start(), run, info)
        elif run[0] == opened[1][0] and len(run) >= len(opened[1]):
            # Lenient close: DeepSeek writes the close fence and a token on one line.
            if _is_example(text, opened[0], match.end(), opened[2]):
                spans.append((opened[0], match.end()))
            opened = None
    if opened is not None and _is_example(text, opened[0], len(text), opened[2]):
        spans.append((opened[0], len(text)))
    return spans


def _is_example(text: str, start: int, end: int, info: str) -> bool:
    """A fence with a non-JSON info string, unless it wraps the whole reply."""
    word = info.split()[0].lower() if info.split() else ""
    if not word or word in _JSON_INFO:
        return False
    return bool(text[:start].strip() or text[end:].strip())


def _inside(spans: Sequence[tuple[int, int]], pos: int) -> int | None:
    """End of the protected span holding pos, if any."""
    for start, end in spans:
        if start <= pos < end:
            return end
    return None


def marker_pattern(markers: Iterable[str]) -> re.Pattern[str]:
    """A pattern matching any of the literal markers, longest first."""
    ordered = sorted(set(markers), key=len, reverse=True)
    return re.compile("|".join(re.escape(m) for m in ordered))


def find_blocks(
    text: str, starts: re.Pattern[str], parse_at: Callable[[str, int], Block | None]
) -> list[Block]:
    """Offer every unprotected start to parse_at; blocks never overlap."""
    protected = protected_spans(text)
    blocks: list[Block] = []
    pos = 0
    # pos past the end is clamped by re, where an empty start pattern would match forever.
    while pos <= len(text) and (match := starts.search(text, pos)) is not None:
        at = match.start()
        skip = _inside(protected, at)
        if skip is not None:
            pos = max(skip, at + 1)
            continue
        block = parse_at(text, at)
        if block is None:
            pos = at + 1
            continue
        blocks.append(block)
        pos = max(block.end, at + 1)
        # Backticks or fences inside a recovered call's arguments must not
        # protect what follows it: look again at the rest only.
        protected = [(s + pos, e + pos) for s, e in protected_spans(text[pos:])]
    return blocks


def splice(text: str, blocks: Sequence[Block], drop: Sequence[str] = ()) -> ParseResult:
    """Remove recovered blocks; unknown-tool blocks stay; control tokens go."""
    pieces: list[str] = []
    calls: list[ParsedCall] = []
    pos = 0
    for block in blocks:
        pieces.append(_drop_tokens(text[pos : block.start], drop))
        pieces.append(block.keep)
        calls.extend(block.calls)
        pos = block.end
    pieces.append(_drop_tokens(text[pos:], drop))
    return ParseResult(calls=tuple(calls), text=remaining_text(pieces))


def _drop_tokens(piece: str, drop: Sequence[str]) -> str:
    for token in drop:
        piece = piece.replace(token, " ")
    return piece


def section_block(
    text: str,
    start: int,
    end: int,
    parts: Sequence[tuple[ParsedCall, str]],
    tools: Mapping[str, JSON],
) -> Block:
    """A block holding several calls: offered ones recovered, the rest kept.

    parts pairs each call with its raw text, in order. If no call names an
    offered tool, the whole block stays verbatim. Otherwise only the offered
    calls' text is taken out: the others stay as written, with what the block
    has before its first call and after its last (a marker, a bracket) and the
    separator written before each (`, `, a newline, a repeated marker). Raw
    text that is not a slice of the block (re-serialised) is only joined.
    """
    known = tuple(call for call, _ in parts if call.name in tools)
    if not known:
        return Block(start, end, (), text[start:end])
    spans: list[tuple[int, int]] = []
    pos = start
    for _, raw in parts:
        at = text.find(raw, pos, end) if raw else -1
        if at < 0:
            keep = "\n".join(raw for call, raw in parts if call.name not in tools)
            return Block(start, end, known, keep)
        spans.append((at, at + len(raw)))
        pos = at + len(raw)
    pieces = [text[start : spans[0][0]]]
    kept_any = False
    for index, ((call, _), (item_start, item_end)) in enumerate(zip(parts, spans, strict=True)):
        if call.name in tools:
            continue
        if kept_any:
            pieces.append(text[spans[index - 1][1] : item_start])
        pieces.append(text[item_start:item_end])
        kept_any = True
    pieces.append(text[spans[-1][1] : end])
    return Block(start, end, known, "".join(pieces) if kept_any else "")


def tool_list(tools: Sequence[ToolDef]) -> str:
    """The offered tools as the JSON lines most templates print."""
    lines = []
    for tool in tools:
        function = tool.get("function", tool)
        lines.append(dumps(function))
    return "\n".join(lines)


def dumps(value: Any) -> str:
    """JSON the way the model templates write it: non-ASCII kept."""
    try:
        return orjson.dumps(value).decode()
    except TypeError:
        # orjson refuses integers beyond 64 bits; a Python literal may hold one.
        return json.dumps(value, ensure_ascii=False)
