"""Recovering text tool calls from a reply that arrives in pieces.

Owns: deciding, delta by delta, which text is certainly prose (sent on at
once) and which might still be a call (held): a possible partial marker at
the end, a block from a marker or a line-start `{` / `[` / fence until it is
resolved. Resolution re-runs the whole-text recovery on the
held block, so streamed and whole results agree for any split. Must not:
parse inside reasoning or an answer's fence, or hold prose that cannot start a call.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping

from proxy.formats import FORMATS, format_order
from proxy.formats.base import ParsedCall, ParseResult, TextFormat
from proxy.formats.detect import (
    GENERIC_MARKERS,
    REASONING,
    REASONING_TAGS,
    THINK_BREAKERS,
    THINK_CLOSES,
    MarkerSet,
    TagWatch,
    controls_of,
    drop_controls,
    first_breaker,
    first_tag,
    marker_set,
    opener_at,
    opens_nothing,
    orphan_close,
    recover_with,
    think_end,
)
from proxy.formats.jsonish import scan_json_value
from proxy.types import JSON

Item = str | ParsedCall
_LINE_START = re.compile(r"(?m)^[ \t]*([{\[]|`{3,}|~{3,})")
_PARTIAL_FENCE = re.compile(r"(?:\A|\n)[ \t]*(`{1,2}|~{1,2})\Z")
_FENCE_LINE = re.compile(r"(?m)^[ \t]{0,3}(`{3,}|~{3,})")
_FENCE_INFO = re.compile(r"[ \t]*(`{3,}|~{3,})[ \t]*([^\n]*)\n")
_JSON_INFO = ("", "json", "json5", "jsonc")
_CONTEXT = 1000
# Functionary v3.2 starts the answer after the prompt's `>>>`: with its control
# word `all` and a newline (text follows; the word goes with the calls), or with
# an offered tool's name, a newline and the JSON arguments (a call).
_ALL = "all"
_FIRST_LINE = re.compile(r"[ \t]*([^\s>]*)([ \t]*)")


class StreamRecovery:
    """feed(delta) / flush() -> prose strings and complete calls, in order."""

    def __init__(
        self, tools: Mapping[str, JSON], preferred: str | None = None, keep_reasoning: bool = False
    ) -> None:
        self._tools = dict(tools)
        self._leads = (_ALL, *self._tools)
        (self._order, self._markers, self._controls, self._dropped, self._marker_set,
         self._quiet) = _searched_for(preferred)
        self._keep = keep_reasoning
        self._buf = ""
        # Deltas that cannot change anything yet (feed), joined into _buf when they can.
        self._pending: list[str] = []
        self._pending_size = 0
        self._tags = TagWatch(REASONING_TAGS)  # while undecided
        self._line = ""  # prose sent since the last newline: context for the parsers
        self._holding = False
        self._retry_at = 0
        self._in_think = False
        self._closes = THINK_CLOSES  # what ends the reasoning block we are in
        # Inside `<think>`, held from a Kimi section marker on: the text up to a
        # close tag is reasoning; at the end of the answer, it is a tool section
        # (kimi-k2-005). The last characters seen, for a close split across deltas.
        self._section: TagWatch | None = None
        self._fence: str | None = None  # the opening run of an answer's fence we are inside
        self._at_start = True
        # An orphan `</think>` (thinking forced open by the prompt) makes everything
        # before it reasoning, where no call is searched: until a think tag or the
        # end says, hold everything (without keep_reasoning: the reasoning must go)
        # or only a block holding a call (with it: prose goes on verbatim either way).
        self._undecided = True
        self.format: str | None = None
        self.calls = 0

    def feed(self, delta: str) -> list[Item]:
        tagged = self._undecided and self._tags.seen(delta)
        if not tagged and self._waits(delta):
            # Appending each small delta to a long held block would copy it every
            # time: quadratic in the block's length. Join once something can change.
            self._pending.append(delta)
            self._pending_size += len(delta)
            return []
        self._join(delta)
        out = self._settle_reasoning() if tagged and self._keep else []
        return out + self._pump(resolve="\n" in delta or tagged)

    def _waits(self, delta: str) -> bool:
        """Whether _pump would do nothing with delta: undecided without
        keep_reasoning, or holding a block and no try is due (_resolve)."""
        if self._undecided and not self._keep:
            return True
        if self._section is not None:
            return not self._section.seen(delta)
        size = len(self._buf) + self._pending_size + len(delta)
        return self._holding and not ("\n" in delta and size >= self._retry_at)

    def _settle_reasoning(self) -> list[Item]:
        """With keep_reasoning, at the first think tag: an orphan `</think>` makes all
        before it reasoning, kept verbatim and not searched (a held block included);
        prose before it that has gone on was right as it was."""
        self._undecided = False
        end = orphan_close(self._buf)
        if end is None:
            return []
        self._holding, self._retry_at, self._fence = False, 0, None
        self._line, self._at_start = "", False  # the answer starts after it (recover)
        return self._reasoning(end)

    def _join(self, delta: str = "") -> None:
        if self._pending:
            self._buf = "".join([self._buf, *self._pending, delta])
            self._pending, self._pending_size = [], 0
        else:
            self._buf += delta

    def plain_ok(self, text: str) -> bool:
        """Whether `feed(text)` would send text on whole as prose and hold nothing.

        The same search `feed` runs (`_next_start`), without its effects: nothing
        held or pending, and no block, marker, fence or partial of one in text.
        """
        if not self.holds_nothing():
            return False
        if self._undecided and self._tags.would_see(text):
            # A think tag settles the reasoning (`_settle_reasoning`): after an orphan
            # close tag the answer starts again, where a line-start call may stand.
            return False
        if self._quiet.search(text) is None and not (
                self._at_start and not self._line and self._lead(text) is not None):
            # No character a marker, a line-start block or a fence needs (nor, at the
            # answer's start, a leading control word): only a marker's beginning at
            # the very end is left to rule out.
            return self._marker_set.partial_suffix(text) == 0
        self._buf = text
        try:
            start, _ = self._next_start()
        finally:
            self._buf = ""
        return start == len(text)

    def plain_run_ok(self, texts: list[str], joined: str) -> int:
        """How many of `texts`, from the first, `plain_ok` says yes to in turn (each
        taken before the next), found at once.

        Only the quiet case, past the start of the answer: then a text is plain iff
        it has no needed character and does not end in a marker's beginning, and
        taking one changes neither; so the count runs up to the text holding the
        first needed character of `joined`, or the first that ends in a marker's
        beginning. Otherwise (something held, the answer's start): 0, ask alone."""
        if not self.holds_nothing() or self._at_start:
            return 0
        if self._undecided and self._tags.would_see(joined):
            return 0  # a think tag settles the reasoning: ask each text alone
        found = self._quiet.search(joined)
        partial = self._marker_set.partial_suffix
        if found is None and all(partial(text) == 0 for text in texts):
            return len(texts)  # the usual answer: all of them, found in two passes
        stop = len(joined) if found is None else found.start()
        end = 0
        for count, text in enumerate(texts):
            end += len(text)
            if end > stop or partial(text):
                return count
        return len(texts)

    def take_plain(self, text: str) -> None:
        """`feed(text)` after `plain_ok(text)`: the prose is noted, nothing is built."""
        if self._undecided and self._tags.seen(text):
            self._undecided = False  # nothing held: a close tag has nothing to settle
        self._text(text)

    def holds_nothing(self) -> bool:
        """Nothing held or pending, not inside reasoning or a fence: `flush()` would
        return nothing and change nothing. Pure."""
        return not (self._buf or self._holding or self._in_think or self._fence is not None
                    or (self._undecided and not self._keep))

    def flush(self) -> list[Item]:
        out: list[Item] = []
        self._join()
        if self._undecided:
            self._undecided = False
            # With keep_reasoning, a block held for want of a decision settles as usual.
            self._retry_at = 0
            out += self._pump(resolve=self._keep)
        if self._in_think:
            breaker = first_breaker(self._buf)
            out += self._reasoning(len(self._buf) if breaker is None else breaker)
            # A section marker and no close tag after it: reasoning left unclosed.
            self._in_think, self._section = False, None
        if self._fence is not None:
            out += self._text(self._buf)
        elif self._buf:
            result, name = self._recover(self._buf)
            if not result.calls:
                # Nothing recovered: the text goes on as it came, even all blanks (a
                # ParseResult says None for those; the answer's start may hold them).
                result = ParseResult((), drop_controls(self._line + self._buf, self._dropped))
            out += self._result(result, name)
        self._buf = ""
        return out

    def _pump(self, resolve: bool) -> list[Item]:
        out: list[Item] = []
        if self._undecided and not self._keep and not self._decide():
            return out
        while self._buf:
            before = (self._buf, self._holding, self._in_think, self._fence)
            if self._in_think:
                out += self._think_step()
            elif self._fence is not None:
                out += self._fence_step()
            elif self._holding:
                resolved = self._resolve() if resolve else None
                if resolved is None:
                    break
                out += resolved
            else:
                out += self._free_step()
                resolve = True
            if (self._buf, self._holding, self._in_think, self._fence) == before:
                break
        return out

    def _decide(self) -> bool:
        if first_tag(self._buf) is None:
            return False
        self._buf = self._buf[orphan_close(self._buf) or 0 :]
        self._undecided = False
        return True

    def _think_step(self) -> list[Item]:
        end = think_end(self._buf, 0, self._closes)
        if end is None:
            tail = marker_set((*self._closes, *THINK_BREAKERS)).partial_suffix(self._buf)
            return self._reasoning(len(self._buf) - tail)
        if end[0] == end[1]:
            # A section marker: hold from it until a close tag or the end decides.
            self._section = TagWatch(self._closes)
            self._section.seen(self._buf)  # no close in it (think_end): its tail only
            return self._reasoning(end[0])
        self._in_think, self._section = False, None
        return self._reasoning(end[1])

    def _fence_step(self) -> list[Item]:
        assert self._fence is not None
        for match in _FENCE_LINE.finditer(self._buf):
            run = match.group(1)
            if match.start() == 0 and self._line.strip():
                continue
            if run[0] == self._fence[0] and len(run) >= len(self._fence):
                newline = self._buf.find("\n", match.end())
                if newline < 0:
                    return self._text(self._buf[: match.start()], cut=match.start())
                self._fence = None
                return self._text(self._buf[: newline + 1], cut=newline + 1)
        partial = _partial_fence(self._buf)
        keep = partial.start() + (partial.group().startswith("\n")) if partial else len(self._buf)
        return self._text(self._buf[:keep], cut=keep)

    def _free_step(self) -> list[Item]:
        start, kind = self._next_start()
        out = self._text(self._buf[:start], cut=start)
        if kind == "think":
            opener = opener_at(self._buf) or ""
            self._in_think, self._closes = True, (REASONING[opener],)
            out += self._reasoning(len(opener))
        elif kind == "control":
            # Markup, never content: dropped where it stands (recover_with does the same).
            hit = self._marker_set.first(self._buf)
            self._buf = self._buf[len(hit[1]) :] if hit is not None else self._buf
        elif kind == "fence":
            info = _FENCE_INFO.match(self._buf)
            if info is None:
                return out
            word = (info.group(2).split() or [""])[0].lower()
            if word not in _JSON_INFO and not self._at_start:
                # An answer's code fence after prose: an example, never parsed.
                self._fence = info.group(1)
                out += self._text(self._buf[: info.end()], cut=info.end())
            else:
                self._holding = True
        elif kind in ("marker", "bare"):
            self._holding = True
        return out

    def _next_start(self) -> tuple[int, str]:
        """Where something that might be a call (or reasoning) begins, and what."""
        buf = self._buf
        found: list[tuple[int, str]] = []
        if self._at_start and not self._line:
            lead = self._lead(buf)
            if lead is not None:
                found.append((0, lead))
        hit = self._marker_set.first(buf)
        if hit is not None:
            kind = "think" if hit[1] in REASONING else "marker"
            found.append((hit[0], "control" if hit[1] in self._controls else kind))
        source = self._line + buf
        # The prose already sent on this line (up to _CONTEXT chars, no newline) can
        # start nothing unless it is all blanks: scan from buf on (per-chunk work).
        skip = len(self._line) if self._line.strip(" \t") else 0
        for match in _LINE_START.finditer(source, skip):
            at = match.start(1) - len(self._line)
            if at >= 0:
                found.append((at, "bare" if match.group(1) in "{[" else "fence"))
                break
        partial = _partial_fence(source)
        if partial is not None and partial.start(1) >= len(self._line):
            found.append((partial.start(1) - len(self._line), "partial"))
        found.append((len(buf) - self._marker_set.partial_suffix(buf), "partial"))
        first = min(found)
        if hit is not None and hit[0] == first[0] and hit[1] in REASONING:
            return hit[0], "think"  # `[THINK]` also starts a line with `[`: reasoning wins
        return first

    def _lead(self, buf: str) -> str | None:
        """At the answer's start, whether buf begins Functionary v3.2's first line:
        "marker" for `all` + newline or an offered name + newline + `{`, "partial"
        while the first line (or the blanks after the name's line) could still
        become one, None once it cannot. Prose is held at most its first line,
        and only while that line is, or begins, an offered name."""
        head = _FIRST_LINE.match(buf)
        assert head is not None  # every group may be empty
        word, after = head.group(1), head.end()
        if after == len(buf):
            if head.group(2):
                return "partial" if word in self._leads else None
            return "partial" if any(lead.startswith(word) for lead in self._leads) else None
        if buf[after] != "\n" or word not in self._leads:
            return None
        if word == _ALL:
            return "marker"
        rest = buf[after + 1 :]
        body = rest.lstrip()
        if not body:
            return "partial"
        return "marker" if body[0] == "{" else None

    def _resolve(self) -> list[Item] | None:
        """Release the held block once prose after it settles what it is."""
        if len(self._buf) < self._retry_at:
            return None
        # Each failed try re-parses the whole block: space the tries out so a
        # long call costs a bounded multiple of its length (the tries add up to
        # about 9n), not O(n^2). flush() settles the rest.
        self._retry_at = len(self._buf) + len(self._buf) // 8
        whole, _ = self._recover(self._buf)
        if whole.calls and self._undecided:
            return None  # a later orphan `</think>` would make them reasoning
        lines = _settled_line_starts(self._buf, self._last_start())
        if not lines or not self._agrees(lines[-1], whole):
            return None
        lo, hi = 0, len(lines) - 1
        while lo < hi:
            mid = (lo + hi) // 2
            if self._agrees(lines[mid], whole):
                hi = mid
            else:
                lo = mid + 1
        q = lines[lo]
        result, name = self._recover(self._buf[:q])
        self._buf = self._buf[q:]
        self._holding = False
        self._retry_at = 0
        return self._result(result, name)

    def _agrees(self, q: int, whole: ParseResult) -> bool:
        """buf[:q] parses the same alone as within buf, and nothing in it is still open."""
        head, _ = self._recover(self._buf[:q])
        tail = self._buf[q:]
        if head.calls != whole.calls or _squash((head.text or "") + tail) != _squash(
            whole.text or ""
        ):
            return False
        if head.calls:
            return not self._has_start(self._fresh(head.text or ""))
        end = self._closed_end()
        return end is not None and end <= q and not self._has_start(self._buf[end:q])

    def _closed_end(self) -> int | None:
        """Where a block that is not a call ends: its JSON value or its fence closes,
        or, for a marker that prose only mentions (`opens_nothing`), the marker."""
        buf = self._buf
        start = len(buf) - len(buf.lstrip())
        if buf[start : start + 1] in ("{", "["):
            return scan_json_value(buf, start)
        info = _FENCE_INFO.match(buf)
        if info is None:
            hit = self._marker_set.first(buf)
            if hit is not None and hit[0] == 0 \
                    and opens_nothing(hit[1], buf[len(hit[1]):], self._tools):
                return len(hit[1])
            return None
        for match in _FENCE_LINE.finditer(buf, info.end()):
            run = match.group(1)
            if run[0] == info.group(1)[0] and len(run) >= len(info.group(1)):
                return match.end()
        return None

    def _has_start(self, text: str) -> bool:
        return self._marker_set.first(text) is not None or bool(_LINE_START.search(text))

    def _fresh(self, text: str) -> str:
        """text without the prose already sent on this line (the parsers' context)."""
        common = 0
        while common < min(len(text), len(self._line)) and text[common] == self._line[common]:
            common += 1
        return text[common:]

    def _last_start(self) -> int:
        """The last place after the block start where another block could begin."""
        buf, last = self._buf, 0
        for marker in self._markers:
            last = max(last, buf.rfind(marker))
        for match in _LINE_START.finditer(buf, 1):
            last = max(last, match.start(1))
        return last

    def _recover(self, block: str) -> tuple[ParseResult, str | None]:
        return recover_with(self._line + block, self._tools, self._order, self._at_start)

    def _result(self, result: ParseResult, name: str | None) -> list[Item]:
        out: list[Item] = self._text(self._fresh(result.text or ""))
        self._line = ""
        if result.calls:
            self.format = self.format or name
            self.calls += len(result.calls)
            self._at_start = False
            out += list(result.calls)
        return out

    def _text(self, text: str, cut: int = 0) -> list[Item]:
        self._buf = self._buf[cut:]
        if not text:
            return []
        if text.strip():
            self._at_start = False
        newline = text.rfind("\n")
        self._line = (self._line + text if newline < 0 else text[newline + 1 :])[-_CONTEXT:]
        return [text]

    def _reasoning(self, size: int) -> list[Item]:
        """Reasoning goes on verbatim (keep_reasoning) or is dropped; it is never parsed."""
        text, self._buf = self._buf[:size], self._buf[size:]
        return [text] if self._keep and text else []


@functools.lru_cache(maxsize=64)
def _searched_for(preferred: str | None) -> tuple[
        tuple[TextFormat, ...], tuple[str, ...], frozenset[str], tuple[str, ...], MarkerSet,
        re.Pattern[str]]:
    """What a stream searches for, by its preferred format: made once, not per stream
    (the registry is fixed at import; hashing it and the markers again per request
    cost more than the search of a short answer)."""
    order, markers, controls = _formats_and_markers(preferred, tuple(FORMATS.values()))
    return order, markers, controls, controls_of(order), marker_set(markers), \
        _needed_chars(markers)


@functools.lru_cache(maxsize=64)
def _formats_and_markers(
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
def _needed_chars(markers: tuple[str, ...]) -> re.Pattern[str]:
    """A character class that text must hit for `_next_start` to find a block in it:
    per marker one character it cannot do without (`<` when it has one, as most do,
    else its first that is not a letter, digit or blank: `[` of `functools[`), and
    what line-start blocks and fences begin with.
    Text that misses it can only end in a marker's beginning (`partial_suffix`)."""
    needed = {"<" if "<" in m else next((c for c in m if not c.isalnum() and not c.isspace()),
                                         m[0]) for m in markers}
    return re.compile("[" + re.escape("".join(sorted(needed | set("{[`~")))) + "]")


def _partial_fence(text: str) -> re.Match[str] | None:
    """_PARTIAL_FENCE at the end of text: only its last line can match, so search that."""
    return _PARTIAL_FENCE.search(text, max(text.rfind("\n"), 0))


def _settled_line_starts(text: str, after: int) -> list[int]:
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


def _squash(text: str) -> str:
    return " ".join(text.split())
