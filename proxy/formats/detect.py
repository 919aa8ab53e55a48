"""Recovering calls from a whole reply when the format is not known for sure.

Owns: removing reasoning before calls are searched (a call inside
reasoning is thinking, not a call), the whole-reply fence wrapper rule (hermes-024), and trying a
list of formats in order with their markers as a cheap pre-filter. Must not:
know any particular format's syntax, or look inside a closed `<think>` block.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

# blocks imports this module (REASONING): the module, not its names, so either may load first.
from proxy.formats import blocks
from proxy.formats.base import ParseResult, TextFormat, no_calls, remaining_text
from proxy.formats.jsonish import forget_scans
from proxy.types import JSON

THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"
# Every family's reasoning markers, open -> close: each is `<think>`'s equal (a
# block is reasoning, a lone close means all before it was, nothing inside is a
# call). Seed-OSS, Gemma 4 (a channel: `<|channel>thought\n...<channel|>`),
# MiniMax-M3, Solar Open 2, Kimi K3 (XTML sections), Mistral v13, Command R7B.
REASONING: dict[str, str] = {
    THINK_OPEN: THINK_CLOSE,
    "<seed:think>": "</seed:think>",
    "<|channel>": "<channel|>",
    "<mm:think>": "</mm:think>",
    "<|think:start|>": "<|think:end|>",
    "<|open|>think<|sep|>": "<|close|>think<|sep|>",
    "[THINK]": "[/THINK]",
    "<|START_THINKING|>": "<|END_THINKING|>",
}
THINK_OPENS = tuple(REASONING)
THINK_CLOSES = tuple(dict.fromkeys(REASONING.values()))
REASONING_TAGS = THINK_OPENS + THINK_CLOSES
# Kimi K2 Thinking may skip `</think>` and go straight to its tool section
# (kimi-k2-005, vLLM PR #32216): the section marker ends the reasoning, but
# only when no `</think>` follows it (before one, it is a thought or a mention).
THINK_BREAKERS = ("<|tool_calls_section_begin|>", "<|tool_call_section_begin|>")
_WHOLE_FENCE = re.compile(r"\A\s*(`{3,}|~{3,})[^\n`]*\n(.*)\n[ \t]*\1[ \t]*\s*\Z", re.DOTALL)


@functools.lru_cache(maxsize=64)
def tags_pattern(tags: tuple[str, ...]) -> re.Pattern[str]:
    """One search for any of tags (longest first): per-chunk work stays one pass."""
    return re.compile("|".join(re.escape(t) for t in sorted(tags, key=len, reverse=True)))


_ANY_TAG = tags_pattern(REASONING_TAGS)
_ANY_OPEN = tags_pattern(THINK_OPENS)


def first_tag(text: str, start: int = 0) -> tuple[int, str] | None:
    """Where the first reasoning marker (open or close, any family) at or after start is."""
    found = _ANY_TAG.search(text, start)
    return (found.start(), found.group()) if found else None


def orphan_close(text: str) -> int | None:
    """Past a close marker that no open marker precedes (thinking forced open by the
    prompt: all before it is reasoning); None when the first marker opens, or none."""
    found = first_tag(text)
    return found[0] + len(found[1]) if found and found[1] not in REASONING else None


def opener_at(text: str, pos: int = 0) -> str | None:
    """The reasoning open marker text[pos:] starts with, if any."""
    return next((o for o in THINK_OPENS if text.startswith(o, pos)), None)


@dataclass(slots=True)
class TagWatch:
    """Watches a stream of deltas for any of `tags` (each begins with `<` or `[`),
    which may be split across deltas: `seen(delta)` says whether one completes in it.
    Keeps the end of the text so far only while it holds a tag's first character, so
    most deltas cost a test or two. Compared by value (a parser's state is)."""

    tags: tuple[str, ...]
    tail: str = ""
    keep: int = field(init=False)
    firsts: tuple[str, ...] = field(init=False)
    pattern: re.Pattern[str] = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        # Made per request (a stream's recovery, a reasoning section): what the tags
        # imply is worked out once per set of tags.
        self.keep, self.firsts, self.pattern = _watched(self.tags)

    def seen(self, delta: str) -> bool:
        if not self.tail and not any(first in delta for first in self.firsts):
            return False
        text = self.tail + delta
        tail = text[-self.keep :]
        self.tail = tail if any(first in tail for first in self.firsts) else ""
        return self.pattern.search(text) is not None

    def would_see(self, delta: str) -> bool:
        """What `seen(delta)` would answer, without keeping anything. Pure."""
        if not self.tail and not any(first in delta for first in self.firsts):
            return False
        return self.pattern.search(self.tail + delta) is not None


@functools.lru_cache(maxsize=64)
def _watched(tags: tuple[str, ...]) -> tuple[int, tuple[str, ...], re.Pattern[str]]:
    """A TagWatch's derived fields: how much text to keep, the tags' first characters,
    the pattern that finds any of them."""
    return max(len(tag) for tag in tags) - 1, tuple(sorted({tag[0] for tag in tags})), \
        tags_pattern(tags)


def think_end(text: str, start: int, closes: tuple[str, ...] = THINK_CLOSES
              ) -> tuple[int, int] | None:
    """(where reasoning content ends, where the text resumes) after an open tag at start:
    the first of its close tags, else a Kimi section marker (a block left unclosed,
    kimi-k2-005)."""
    close = tags_pattern(closes).search(text, start)
    if close is not None:
        return close.start(), close.end()
    breaker = first_breaker(text, start)
    return None if breaker is None else (breaker, breaker)


def first_breaker(text: str, start: int = 0) -> int | None:
    """Where the first Kimi tool-section marker at or after start begins, if any."""
    found = [at for marker in THINK_BREAKERS if (at := text.find(marker, start)) >= 0]
    return min(found) if found else None


def split_reasoning(text: str) -> list[tuple[str, bool]]:
    """The reply as (piece, is_reasoning) pieces; a reasoning block runs to its close
    marker, else a Kimi section marker, else the end of the text. Before an orphan close
    (thinking forced open by the prompt: only the close appears), all is reasoning."""
    pieces: list[tuple[str, bool]] = []
    pos = orphan_close(text) or 0
    if pos:
        pieces.append((text[:pos], True))
    while (opened := _ANY_OPEN.search(text, pos)) is not None:
        pieces.append((text[pos : opened.start()], False))
        end = think_end(text, opened.end(), (REASONING[opened.group()],))
        stop = end[1] if end is not None else len(text)
        pieces.append((text[opened.start() : stop], True))
        pos = stop
    pieces.append((text[pos:], False))
    return [(piece, reasoning) for piece, reasoning in pieces if piece]


class MarkerSet:
    """Markers compiled once: where the first one starts, and how much of the
    tail could still become one. Per-chunk work on the streaming path, so one
    regex search and a few set lookups instead of a loop over every marker."""

    def __init__(self, markers: tuple[str, ...]) -> None:
        ordered = sorted(markers, key=len, reverse=True)
        self._find = re.compile("|".join(re.escape(m) for m in ordered)) if ordered else None
        self._prefixes = frozenset(m[:size] for m in markers for size in range(1, len(m)))
        self._tails = frozenset(p[-1] for p in self._prefixes)
        self._longest = max((len(m) for m in markers), default=1) - 1

    def first(self, text: str) -> tuple[int, str] | None:
        found = self._find.search(text) if self._find is not None else None
        return (found.start(), found.group()) if found else None

    def partial_suffix(self, text: str) -> int:
        """Length of the longest suffix of text that is a proper prefix of a marker."""
        if not text or text[-1] not in self._tails:
            return 0
        for size in range(min(self._longest, len(text)), 0, -1):
            if text[-size:] in self._prefixes:
                return size
        return 0


@functools.lru_cache(maxsize=64)
def marker_set(markers: tuple[str, ...]) -> MarkerSet:
    """Memo over an immutable key: every stream with the same formats shares one."""
    return MarkerSet(markers)


def partial_suffix(text: str, markers: tuple[str, ...]) -> int:
    """Length of the longest suffix of text that is a proper prefix of a marker."""
    best = 0
    for marker in markers:
        for size in range(min(len(marker) - 1, len(text)), best, -1):
            if text.endswith(marker[:size]):
                best = size
                break
    return best


def strip_reasoning(text: str) -> str:
    """The reply without its reasoning: think blocks, or all before an orphan close."""
    return "".join(piece for piece, reasoning in split_reasoning(text) if not reasoning)


def whole_fence_body(text: str) -> str | None:
    """The body when the whole reply is one fence (llama.cpp accepts this "good bad" output)."""
    match = _WHOLE_FENCE.match(text)
    if match is None or match.group(1)[0] * 3 in match.group(2):
        return None
    return match.group(2)


# Markers every JSON-ish format shares: they say nothing about which format it is.
GENERIC_MARKERS = frozenset({"{", "[", "```", "~~~"})

# Markers whose block may hold prose or code that a later tag makes into something
# (Command R7B's reasoning, a Python call, a gpt-oss channel, Functionary's `>>>`
# line): what follows them never settles whether they open a call.
_OPEN_ENDED = frozenset({"<|START_THINKING|>", "<|python_tag|>", "<|python_start|>",
                         "<|start|>", "<|channel|>", ">>>"})
# What a call's text begins with after any other marker (and blanks), in every format:
# a JSON value, a tag (MiniMax-M3's led by its `]<]minimax[>[`), a quoted name or a
# fence; or a word, handled apart: an offered tool's name (GLM-4.5, Mistral v11,
# `<function=name>`) or `function` (DeepSeek V3's `function<sep>`, Kimi's
# `functions.name:0`, GigaChat's `function call` header) or `call:` (Gemma 4,
# FunctionGemma).
_CALL_OPENERS = frozenset("{[<\"'`~(]")


def opens_nothing(marker: str, after: str, tools: Iterable[str]) -> bool:
    """Whether `marker` followed by `after` can open no call in any format: prose that
    only mentions a marker ("wrap the JSON in <tool_call> tags"). False while `after`
    is blank or could still grow into an opener, and for open-ended markers."""
    if marker in _OPEN_ENDED or marker in GENERIC_MARKERS:
        return False
    rest = after.lstrip()
    if not rest or rest[0] in _CALL_OPENERS:
        return False
    # `word.startswith(rest)`: the text ends inside what may become the word.
    return not any(rest.startswith(word) or word.startswith(rest)
                   for word in (*tools, "function", "call:"))
_GENERIC_START = re.compile(r"(?m)^[ \t]*([{\[]|```|~~~)")


def applicable(formats: Sequence[TextFormat], text: str) -> list[TextFormat]:
    """Formats to try, in order: first those whose own markers occur in text,
    then those whose generic markers do (a bare object must not be taken out
    of a `<tool_call>` block by a format that only knows bare objects)."""
    specific = [
        fmt
        for fmt in formats
        if any(marker in text for marker in fmt.markers if marker not in GENERIC_MARKERS)
    ]
    # Bare JSON / lists / fences only count at a line start: mid-sentence JSON is prose.
    starts = {match.group(1)[:3] for match in _GENERIC_START.finditer(text)}
    generic = [
        fmt
        for fmt in formats
        if fmt not in specific and any(marker in starts for marker in fmt.markers)
    ]
    return specific + generic


@functools.lru_cache(maxsize=64)
def controls_of(formats: tuple[TextFormat, ...]) -> tuple[str, ...]:
    """The control tokens of these formats (`controls`, optional on a format): section
    markers and headers that are markup wherever they stand outside a call block.
    Memo over an immutable key: recovery asks on every try."""
    found = {token for fmt in formats for token in getattr(fmt, "controls", ())}
    return tuple(sorted(found, key=len, reverse=True))


def drop_controls(text: str, controls: Sequence[str]) -> str:
    """text without the control tokens."""
    for token in controls:
        if token in text:
            text = text.replace(token, "")
    return text


def recover_with(
    text: str, tools: Mapping[str, JSON], formats: Sequence[TextFormat], whole_fence: bool = True
) -> tuple[ParseResult, str | None]:
    """The first format (in order) that recovers a call; else the text unchanged.
    Control tokens go either way: they never reach content."""
    try:
        result, name = _first_recovery(text, tools, formats, whole_fence)
    finally:
        # The scanners' memos hold this reply: let it go with the recovery.
        forget_scans()
        blocks.forget_finds()
    controls = controls_of(tuple(formats))
    if not controls or result.text is None:
        return result, name
    return ParseResult(result.calls, remaining_text([drop_controls(result.text, controls)])), name


def _first_recovery(
    text: str, tools: Mapping[str, JSON], formats: Sequence[TextFormat], whole_fence: bool
) -> tuple[ParseResult, str | None]:
    body = whole_fence_body(text) if whole_fence else None
    if not tools:
        return no_calls(text), None
    for fmt in applicable(formats, text):
        if body is not None:
            inner = _safe_parse(fmt, body, tools)
            if inner.calls and inner.text is None:
                return inner, fmt.name
        result = _safe_parse(fmt, text, tools)
        if result.calls:
            return result, fmt.name
    return no_calls(text), None


def _safe_parse(fmt: TextFormat, text: str, tools: Mapping[str, JSON]) -> ParseResult:
    # A format bug must cost a recovery, never the reply: the text goes on as is.
    try:
        return fmt.parse(text, tools)
    except Exception:  # noqa: BLE001
        return no_calls(text)
