"""Finding call blocks in a reply and splicing recovered ones out of it.

Owns what the per-format parsers share: where a call may not start (code
fences of an answer, inline code spans, closed reasoning blocks), the scan
that offers each candidate start to a format's block parser, putting the text
back together (unknown-tool calls kept as text, control tokens dropped), and
the tool list every `render_tools` prints. Must not: know any particular
format, scan or repair JSON (that is json_scan and jsonish), or raise.
"""

from __future__ import annotations

import bisect
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


# What every protected span starts with: a backtick or tilde (an inline code span,
# or a fence run at most 3 blanks into its line), or any family's reasoning open tag.
_SPAN_START = re.compile("[`~]|" + "|".join(re.escape(o) for o in REASONING))
_FENCE_RUN = re.compile(r"[ \t]{0,3}(`{3,}|~{3,})")
_INK = re.compile(r"\S")


class _Spans:
    """The protected spans of a whole text, and what decides whether the spans of
    text[pos:] are simply those of them starting at pos or later: no span runs
    across pos, no fence is open there, and pos starts nothing a search from 0
    would see differently (a fence run or inline code right at pos, a lookbehind
    seeing a backtick before it, a fence with only blanks before it)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.all = protected_spans(text)
        self.inline = [(m.start(), m.end()) for m in _INLINE_CODE.finditer(text)]
        self.think = [(m.start(), m.end()) for m in _THINK.finditer(text)]
        self.fence_lines: list[int] = []
        self.labelled: list[bool] = []  # the line's info word is not JSON's: maybe an example
        self.open_before: list[bool] = []  # a fence is open before each line (and at the end)
        opened: str | None = None
        for match in _FENCE_LINE.finditer(text):
            self.fence_lines.append(match.start())
            word = (match.group(2).split() or [""])[0].lower()
            self.labelled.append(bool(word) and word not in _JSON_INFO)
            self.open_before.append(opened is not None)
            run = match.group(1)
            if opened is None:
                opened = run
            elif run[0] == opened[0] and len(run) >= len(opened):
                opened = None
        self.open_before.append(opened is not None)

    def rest_is_clean(self, pos: int) -> bool:
        text = self.text
        if pos and text[pos - 1] != "\n" and (
            text.startswith("`", pos - 1) and text.startswith("`", pos)
            or _FENCE_RUN.match(text, pos) is not None
        ):
            return False
        if _straddles(self.inline, pos) or _straddles(self.think, pos):
            return False
        line = bisect.bisect_left(self.fence_lines, pos)
        if self.open_before[line]:
            return False
        # Only an example fence's spans depend on whether ink comes before it.
        return line == len(self.fence_lines) or not self.labelled[line] or _INK.search(
            text, pos, self.fence_lines[line]) is not None


def _straddles(spans: Sequence[tuple[int, int]], pos: int) -> bool:
    """Whether one of these non-overlapping spans (in order) starts before pos and ends after it."""
    index = bisect.bisect_left(spans, (pos,)) - 1
    return index >= 0 and spans[index][1] > pos


class _Protected:
    """The protected spans of text[base:] (as `protected_spans` finds them there),
    computed only when a candidate start could lie in one: some span start
    (`_SPAN_START`) comes after base and at most 3 characters past the candidate.
    Replies without backticks, tildes or reasoning tags (runs of calls) never pay for it,
    and when the rest is clean (`_Spans.rest_is_clean`) in the text whose spans were
    last computed, those serve.
    Candidates are asked in increasing order, so spans that end before one are
    passed for good."""

    def __init__(self, text: str, base: int, triggers: Sequence[int],
                 last: list[tuple[_Spans, int]]) -> None:
        self._text, self._base, self._last = text, base, last
        first = bisect.bisect_left(triggers, base)
        self._trigger = triggers[first] if first < len(triggers) else None
        self._spans: list[tuple[int, int]] | None = None
        self._offset = 0
        self._next = 0

    def end_holding(self, pos: int) -> int | None:
        """End of the protected span holding pos, if any (the first, in span order)."""
        if self._spans is None:
            if self._trigger is None or self._trigger > pos + 3:
                return None
            self._spans, self._offset = self._compute()
        spans, at = self._spans, pos - self._offset
        while self._next < len(spans) and spans[self._next][1] <= at:
            self._next += 1
        if self._next < len(spans) and spans[self._next][0] <= at:
            return spans[self._next][1] + self._offset
        return None

    def _compute(self) -> tuple[list[tuple[int, int]], int]:
        """The spans and the offset to add to them: those of the last text computed
        (text[offset:]) when the rest from base is clean in it, else text[base:]'s."""
        base, last = self._base, self._last
        if last:
            spans, offset = last[0]
            if spans.rest_is_clean(base - offset):
                return spans.all, offset
        last[:] = [(_Spans(self._text[base:] if base else self._text), base)]
        return last[0][0].all, base


class _FindMemo:
    """Where each searched-for string or pattern was found in one text, and from where."""

    __slots__ = ("found", "matched", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        self.found: dict[str, tuple[int, int]] = {}
        self.matched: dict[re.Pattern[str], tuple[int, re.Match[str] | None]] = {}


_last_find: _FindMemo | None = None


def find_from(text: str, needle: str, pos: int) -> int:
    """`text.find(needle, pos)`, remembered for the text being parsed.

    A block parser looks for its close tag from every candidate start; when the
    close is missing (runs of cut-off calls) each look would read the rest of the
    reply. The first occurrence at or after `since` is also the first at or after
    any pos between since and it (and none after since means none after pos), so
    one search answers every later start up to the occurrence. Only the last text
    is kept: recovery parses one reply at a time.
    """
    memo = _find_memo(text)
    known = memo.found.get(needle)
    if known is not None and known[0] <= pos and (known[1] < 0 or pos <= known[1]):
        return known[1]
    at = text.find(needle, pos)
    memo.found[needle] = (pos, at)
    return at


def search_from(text: str, pattern: re.Pattern[str], pos: int) -> re.Match[str] | None:
    """`pattern.search(text, pos)`, remembered like `find_from`. Only for patterns
    whose match at a position does not depend on where the search began (no
    lookbehind past pos matters: re never lets `^` or `\\A` match at pos itself)."""
    memo = _find_memo(text)
    known = memo.matched.get(pattern)
    if known is not None and known[0] <= pos:
        found = known[1]
        if found is None or pos <= found.start():
            return found
    found = pattern.search(text, pos)
    memo.matched[pattern] = (pos, found)
    return found


def forget_finds() -> None:
    """Drop the memo (and the reply it holds): recovery calls this when done with a reply."""
    global _last_find
    _last_find = None


def _find_memo(text: str) -> _FindMemo:
    global _last_find
    memo = _last_find
    if memo is None or memo.text is not text:
        memo = _last_find = _FindMemo(text)
    return memo


def marker_pattern(markers: Iterable[str]) -> re.Pattern[str]:
    """A pattern matching any of the literal markers, longest first."""
    ordered = sorted(set(markers), key=len, reverse=True)
    return re.compile("|".join(re.escape(m) for m in ordered))


def find_blocks(
    text: str, starts: re.Pattern[str], parse_at: Callable[[str, int], Block | None]
) -> list[Block]:
    """Offer every unprotected start to parse_at; blocks never overlap."""
    triggers = [match.start() for match in _SPAN_START.finditer(text)]
    last: list[tuple[_Spans, int]] = []  # the spans last computed, and of text[where:]
    protected = _Protected(text, 0, triggers, last)
    blocks: list[Block] = []
    pos = 0
    # pos past the end is clamped by re, where an empty start pattern would match forever.
    while pos <= len(text) and (match := starts.search(text, pos)) is not None:
        at = match.start()
        skip = protected.end_holding(at)
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
        protected = _Protected(text, pos, triggers, last)
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
