"""Recovery stays about linear on hostile model output, and the shortcuts that make
it so give the same answers as the plain scans.

Model output is attacker-controlled and recovery runs on the event loop: a run of
cut-off calls must not make each candidate start re-read the rest of the reply.
What is measured here is CPU time (`time.process_time`) of one recovery, whole and
streamed, on ~256 KB of adversarial text per format (tests/formats/adversarial.py
builds it), against bounds several times above what linear work costs on a
loaded 2-core machine and far below what quadratic work costs on that much text
(tens of seconds to minutes). `python tests/formats/adversarial.py` prints the
full table.
"""

from __future__ import annotations

import re

import pytest
from adversarial import TOOLS, frames, inputs, pipeline_run, timed
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.formats import FORMATS, blocks, jsonish, recover
from proxy.formats.blocks import Block, find_blocks, find_from, protected_spans, search_from
from proxy.formats.jsonish import scan_json_value
from proxy.formats.stream import StreamRecovery

# The kinds built from a format's own markers; the generic ones (line-start
# brackets, alternating values) are the same for every format and tried once.
_OWN_KINDS = ("cut", "cut-inline", "broken", "complete", "markers", "markers-bare",
              "nesting", "unclosed-string")
_PIECE = 32_000  # 8 kinds x 32 KB: ~256 KB of text per format
_WHOLE_BOUND = 2.0  # CPU seconds for one whole recovery of ~256 KB
_STREAM_BOUND = 4.0  # CPU seconds to stream it in 64-character deltas


def _hostile(name: str) -> str:
    return "\n".join(text for kind, text in inputs(name, _PIECE) if kind in _OWN_KINDS)


def _stream(name: str | None, text: str, delta: int = 64) -> None:
    parser = StreamRecovery(TOOLS, name)
    for at in range(0, len(text), delta):
        parser.feed(text[at : at + delta])
    parser.flush()


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_whole_and_streamed_recovery_of_256kb_hostile_text_is_bounded(name: str) -> None:
    text = _hostile(name)
    assert len(text) > 250_000
    whole = timed(lambda: recover(text, TOOLS, name))
    assert whole < _WHOLE_BOUND, f"{name}: whole recovery took {whole:.2f} s CPU"
    streamed = timed(lambda: _stream(name, text))
    assert streamed < _STREAM_BOUND, f"{name}: streamed recovery took {streamed:.2f} s CPU"


@pytest.mark.parametrize(("name", "kind"), [("deepseek_v3", "markers-bare"),
                                          ("qwen3_coder_xml", "cut")])
def test_one_kind_filling_256kb_is_bounded(name: str, kind: str) -> None:
    """Kinds whose cost grew with the square of their run: a whole 256 KB of one."""
    text = dict(inputs(name, 256_000))[kind]
    whole = timed(lambda: recover(text, TOOLS, name))
    assert whole < _WHOLE_BOUND / 4, f"{name} {kind}: whole recovery took {whole:.2f} s CPU"
    streamed = timed(lambda: _stream(name, text))
    assert streamed < _STREAM_BOUND / 4, f"{name} {kind}: streamed took {streamed:.2f} s CPU"


@pytest.mark.parametrize("kind", ["brace-lines", "alternating"])
def test_generic_hostile_text_is_bounded_with_every_format_tried(kind: str) -> None:
    text = dict(inputs("json_block", 256_000))[kind]
    whole = timed(lambda: recover(text, TOOLS))
    assert whole < 2 * _WHOLE_BOUND, f"{kind}: whole recovery took {whole:.2f} s CPU"


@pytest.mark.parametrize("name", ["hermes", "json_block"])
def test_the_response_stages_stream_hostile_text_in_bounded_time(name: str) -> None:
    """Through build_pipeline and the SSE translator, in 7-character deltas (~9,000
    chunks): most of the time is per-chunk work that any answer pays."""
    body = frames(dict(inputs(name, 64_000))["cut"])
    spent = timed(lambda: pipeline_run(name, body))
    assert spent < 3 * _STREAM_BOUND, f"{name}: the response stages took {spent:.2f} s CPU"


# The shortcuts must answer exactly what the plain scans answer.

def _plain_scan(text: str, start: int) -> int | None:
    """The value's end by a fresh left-to-right scan (what the memo must reproduce)."""
    closers = {"{": "}", "[": "]"}
    if not 0 <= start < len(text) or text[start] not in closers:
        return None
    stack: list[str] = []
    pos = start
    while pos < len(text):
        char = text[pos]
        if char in closers:
            stack.append(closers[char])
        elif char in "}]":
            if stack.pop() != char:
                return None
            if not stack:
                return pos + 1
        elif char in "\"'":
            body = re.compile(char + r"(?:[^" + char + r"\\]|\\.)*" + char, re.DOTALL).match(
                text, pos)
            if body is None:
                return None
            pos = body.end()
            continue
        pos += 1
    return None


_JSONISH = st.text(alphabet='{}[]"\'\\a ,:', max_size=40)


@settings(max_examples=300, deadline=None)
@given(_JSONISH, st.lists(st.integers(0, 40), max_size=12))
def test_scans_sharing_a_memo_end_where_fresh_scans_end(text: str, starts: list[int]) -> None:
    for start in [*starts, *range(len(text))]:
        assert scan_json_value(text, start) == _plain_scan(text, start), (text, start)


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="ab<>\n", max_size=30), st.lists(st.integers(0, 31), max_size=10))
def test_remembered_finds_and_searches_answer_like_fresh_ones(text: str, starts: list[int]
                                                               ) -> None:
    pattern = re.compile(r"<a|\n|$")
    for pos in starts:
        assert find_from(text, "<a", pos) == text.find("<a", pos)
        found, fresh = search_from(text, pattern, pos), pattern.search(text, pos)
        assert (found and found.span()) == (fresh and fresh.span())


def _find_blocks_rescanning(text: str, starts: re.Pattern[str], parse_at) -> list[Block]:  # type: ignore[no-untyped-def]
    """find_blocks as it was: protected spans of the rest recomputed after each block."""
    protected = protected_spans(text)
    blocks: list[Block] = []
    pos = 0
    while pos <= len(text) and (match := starts.search(text, pos)) is not None:
        at = match.start()
        skip = next((end for start, end in protected if start <= at < end), None)
        if skip is not None:
            pos = max(skip, at + 1)
            continue
        block = parse_at(text, at)
        if block is None:
            pos = at + 1
            continue
        blocks.append(block)
        pos = max(block.end, at + 1)
        protected = [(s + pos, e + pos) for s, e in protected_spans(text[pos:])]
    return blocks


def _toy_block(text: str, at: int) -> Block | None:
    """`<c>` up to the next `|` is a block (a backtick or fence may sit inside it)."""
    end = text.find("|", at)
    return None if end < 0 else Block(at, end + 1, ())


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(["<c>", "|", "`", "``", "```", "~~~", "```py\n", "\n",
                                 " ", "x", "<think>", "</think>", "```json\n", "[THINK]",
                                 "[/THINK]"]), max_size=30))
def test_protected_spans_looked_up_lazily_match_a_rescan_after_each_block(
        pieces: list[str]) -> None:
    text = "".join(pieces)
    starts = re.compile("<c>")
    assert find_blocks(text, starts, _toy_block) == _find_blocks_rescanning(
        text, starts, _toy_block)


def test_recovery_lets_the_reply_go_when_done() -> None:
    """The scanners' memos hold the reply they scanned: not past its recovery."""
    text = dict(inputs("hermes", 4_000))["cut"]
    recover(text, TOOLS, "hermes")
    assert jsonish._last_memo is None and blocks._last_find is None
