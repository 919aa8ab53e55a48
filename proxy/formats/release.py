"""When streaming recovery may let a held block go, and where it ends.

Owns the search `stream.StreamRecovery` runs on a held block once a line
after it has finished: the first line start such that the text before it
parses alone as it does within the whole held text, with nothing in it still
open (a JSON value or fence unclosed, another block begun). Must not: hold
state, send anything, or know any format (it asks `recover`, the caller's
whole-text recovery).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from proxy.formats.base import ParseResult
from proxy.formats.detect import MarkerSet, opens_nothing
from proxy.formats.jsonish import scan_json_value
from proxy.formats.stream_edges import FENCE_INFO, FENCE_LINE, LINE_START, unsent
from proxy.types import JSON


@dataclass(frozen=True, slots=True)
class Held:
    """A held block and what parsing it needs: `line` is the prose already sent on
    its first line (the parsers' context), `markers` every marker, longest first."""

    buf: str
    line: str
    recover: Callable[[str], ParseResult]
    marker_set: MarkerSet
    markers: tuple[str, ...]
    tools: Mapping[str, JSON]

    def release_point(self, whole: ParseResult) -> int | None:
        """The first settled line start where the block may be cut (`whole`: buf's
        own parse), or None while none agrees yet."""
        lines = settled_line_starts(self.buf, last_start(self.buf, self.markers))
        if not lines or not self.agrees(lines[-1], whole):
            return None
        lo, hi = 0, len(lines) - 1
        while lo < hi:
            mid = (lo + hi) // 2
            if self.agrees(lines[mid], whole):
                hi = mid
            else:
                lo = mid + 1
        return lines[lo]

    def agrees(self, q: int, whole: ParseResult) -> bool:
        """buf[:q] parses the same alone as within buf, and nothing in it is still open."""
        head = self.recover(self.buf[:q])
        if head.calls != whole.calls or squash((head.text or "") + self.buf[q:]) != squash(
            whole.text or ""
        ):
            return False
        if head.calls:
            return not has_start(unsent(head.text or "", self.line), self.marker_set)
        end = closed_end(self.buf, self.marker_set, self.tools)
        return end is not None and end <= q and not has_start(self.buf[end:q], self.marker_set)


def closed_end(buf: str, markers: MarkerSet, tools: Mapping[str, JSON]) -> int | None:
    """Where a held block that is not a call ends: its JSON value or its fence
    closes, or, for a marker that prose only mentions (`opens_nothing`), the marker."""
    start = len(buf) - len(buf.lstrip())
    if buf[start : start + 1] in ("{", "["):
        return scan_json_value(buf, start)
    info = FENCE_INFO.match(buf)
    if info is None:
        hit = markers.first(buf)
        if hit is not None and hit[0] == 0 and opens_nothing(hit[1], buf[len(hit[1]):], tools):
            return len(hit[1])
        return None
    for match in FENCE_LINE.finditer(buf, info.end()):
        run = match.group(1)
        if run[0] == info.group(1)[0] and len(run) >= len(info.group(1)):
            return match.end()
    return None


def has_start(text: str, markers: MarkerSet) -> bool:
    """Whether a block (a marker, a line-start value or fence) could begin in text."""
    return markers.first(text) is not None or bool(LINE_START.search(text))


def last_start(buf: str, markers: tuple[str, ...]) -> int:
    """The last place after the block start where another block could begin."""
    last = 0
    for marker in markers:
        last = max(last, buf.rfind(marker))
    for match in LINE_START.finditer(buf, 1):
        last = max(last, match.start(1))
    return last


def settled_line_starts(text: str, after: int) -> list[int]:
    """Line starts past `after` followed by a finished line with something on it
    (the block is followed by prose). One pass over text: this runs on every
    try to release a held block, which may be long."""
    last_newline = text.rfind("\n")
    # A line start q qualifies iff text[q:last_newline] is not blank.
    last_ink = len(text[:last_newline].rstrip()) if last_newline >= 0 else 0
    starts = []
    newline = text.find("\n", after)
    while 0 <= newline and newline + 1 < last_ink:
        starts.append(newline + 1)
        newline = text.find("\n", newline + 1)
    return starts


def squash(text: str) -> str:
    """text with every run of blanks one space: how two parses' prose is compared."""
    return " ".join(text.split())
