"""Where a block held by streaming recovery (`stream.StreamRecovery`) may begin.

Owns the pure string tests the recovery's state machine asks on every delta:
the patterns of a line-start block and of fences, the marker tables per
preferred format, the characters a block cannot start without, and Functionary
v3.2's first line. Where a held block ends is release.py's. Must not: hold
state, parse a call (that is the formats' and detect.recover_with's), or decide
what to send.
"""

from __future__ import annotations

import functools
import re

from proxy.formats import FORMATS, format_order
from proxy.formats.base import TextFormat
from proxy.formats.detect import GENERIC_MARKERS, REASONING, MarkerSet, controls_of, marker_set

LINE_START = re.compile(r"(?m)^[ \t]*([{\[]|`{3,}|~{3,})")
PARTIAL_FENCE = re.compile(r"(?:\A|\n)[ \t]*(`{1,2}|~{1,2})\Z")
FENCE_LINE = re.compile(r"(?m)^[ \t]{0,3}(`{3,}|~{3,})")
FENCE_INFO = re.compile(r"[ \t]*(`{3,}|~{3,})[ \t]*([^\n]*)\n")
JSON_INFO = ("", "json", "json5", "jsonc")
# Functionary v3.2 starts the answer after the prompt's `>>>`: with its control
# word `all` and a newline (text follows; the word goes with the calls), or with
# an offered tool's name, a newline and the JSON arguments (a call).
ALL = "all"
_FIRST_LINE = re.compile(r"[ \t]*([^\s>]*)([ \t]*)")


@functools.lru_cache(maxsize=64)
def searched_for(preferred: str | None) -> tuple[
        tuple[TextFormat, ...], tuple[str, ...], frozenset[str], tuple[str, ...], MarkerSet,
        re.Pattern[str]]:
    """What a stream searches for, by its preferred format: made once, not per stream
    (the registry is fixed at import; hashing it and the markers again per request
    cost more than the search of a short answer)."""
    order, markers, controls = formats_and_markers(preferred, tuple(FORMATS.values()))
    return order, markers, controls, controls_of(order), marker_set(markers), \
        needed_chars(markers)


@functools.lru_cache(maxsize=64)
def formats_and_markers(
    preferred: str | None, registry: tuple[TextFormat, ...]
) -> tuple[tuple[TextFormat, ...], tuple[str, ...], frozenset[str]]:
    """The formats in search order, their markers (control tokens included) longest
    first, and the control tokens that open no block (a marker that is also a control,
    GigaChat's `<|message_sep|>`, is held as a block: recovery drops it if no call
    follows): once per preferred format (and registry), not per stream. `registry`
    keys the memo to FORMATS' contents."""
    order = tuple(format_order(preferred))
    markers = {m for fmt in order for m in fmt.markers if m not in GENERIC_MARKERS}
    controls = frozenset(controls_of(order)) - markers
    everything = markers | controls | set(REASONING)
    return order, tuple(sorted(everything, key=len, reverse=True)), controls


@functools.lru_cache(maxsize=64)
def needed_chars(markers: tuple[str, ...]) -> re.Pattern[str]:
    """A character class that text must hit for a block to start in it: per marker
    one character it cannot do without (`<` when it has one, as most do, else its
    first that is not a letter, digit or blank: `[` of `functools[`), and what
    line-start blocks and fences begin with.
    Text that misses it can only end in a marker's beginning (`partial_suffix`)."""
    needed = {"<" if "<" in m else next((c for c in m if not c.isalnum() and not c.isspace()),
                                         m[0]) for m in markers}
    return re.compile("[" + re.escape("".join(sorted(needed | set("{[`~")))) + "]")


def partial_fence(text: str) -> re.Match[str] | None:
    """PARTIAL_FENCE at the end of text: only its last line can match, so search that."""
    return PARTIAL_FENCE.search(text, max(text.rfind("\n"), 0))


def functionary_lead(buf: str, leads: tuple[str, ...]) -> str | None:
    """At the answer's start, whether buf begins Functionary v3.2's first line
    (`leads`: `all` and the offered names): "marker" for `all` + newline or an
    offered name + newline + `{`, "partial" while the first line (or the blanks
    after the name's line) could still become one, None once it cannot. Prose is
    held at most its first line, and only while that line is, or begins, an
    offered name."""
    head = _FIRST_LINE.match(buf)
    assert head is not None  # every group may be empty
    word, after = head.group(1), head.end()
    if after == len(buf):
        if head.group(2):
            return "partial" if word in leads else None
        return "partial" if any(lead.startswith(word) for lead in leads) else None
    if buf[after] != "\n" or word not in leads:
        return None
    if word == ALL:
        return "marker"
    body = buf[after + 1 :].lstrip()
    if not body:
        return "partial"
    return "marker" if body[0] == "{" else None


def unsent(text: str, line: str) -> str:
    """text without `line`, the prose already sent on this line, where it begins so
    (the parsers saw it as context)."""
    common = 0
    while common < min(len(text), len(line)) and text[common] == line[common]:
        common += 1
    return text[common:]
