from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from sample_corpus import SCHEMAS

from proxy.formats import FORMATS, recover, release
from proxy.formats.base import ParsedCall
from proxy.formats.detect import _OPEN_ENDED, GENERIC_MARKERS, controls_of, opens_nothing
from proxy.formats.stream import Item, StreamRecovery

W = '{"name": "get_weather", "arguments": {"city": "Oslo"}}'
OSLO = ParsedCall("get_weather", {"city": "Oslo"})
LONGEST = max(len(m) for f in FORMATS.values() for m in f.markers if m not in GENERIC_MARKERS)


def _feed_all(parser: StreamRecovery, pieces: list[str]) -> list[Item]:
    out: list[Item] = []
    for piece in pieces:
        out += parser.feed(piece)
    return out + parser.flush()


def _text(items: list[Item]) -> str:
    return "".join(i for i in items if isinstance(i, str))


PROSE = st.text(alphabet="abcdefg XYZ.,!?'\"-:;()0123456789\n", max_size=200)


@settings(max_examples=200, deadline=None)
@example(text=" ", sizes=[])  # blanks held at the answer's start (a Functionary name?)
@example(text="get", sizes=[])  # an offered name's beginning, then the end
@given(PROSE, st.lists(st.integers(1, 20), max_size=30))
def test_prose_without_markers_is_never_held_beyond_a_marker_prefix(
    text: str, sizes: list[int]
) -> None:
    parser = StreamRecovery(SCHEMAS, keep_reasoning=True)
    sent, pos = "", 0
    for size in sizes or [len(text)]:
        piece = text[pos : pos + size]
        pos += len(piece)
        sent += _text(parser.feed(piece))
        assert text[:pos].startswith(sent)
        assert pos - len(sent) <= LONGEST
    sent += _text(parser.feed(text[pos:])) + _text(parser.flush())
    assert sent == text


def test_text_before_a_call_goes_out_before_the_call_completes() -> None:
    parser = StreamRecovery(SCHEMAS, keep_reasoning=True)
    assert parser.feed("Let me check the weather.\n<tool_") == ["Let me check the weather.\n"]
    assert parser.feed('call>\n{"name": "get_weather", ') == []
    # Held to the end: a later orphan `</think>` would make the call reasoning.
    assert parser.feed('"arguments": {"city": "Oslo"}}\n</tool_call>\nDone!\n') == []
    assert parser.flush() == [OSLO, "Done!\n"]
    assert parser.format == "hermes"


def test_a_call_after_a_think_tag_goes_out_once_settled() -> None:
    """A think tag settles where reasoning ends: a call after it need not wait."""
    for reasoning in ("<think>Rain?</think>\n", "Rain?\n</think>\n"):
        parser = StreamRecovery(SCHEMAS, keep_reasoning=True)
        out = parser.feed(reasoning + "<tool_call>\n" + W + "\n</tool_call>\nDone!\n")
        assert _text(out) == reasoning + "Done!\n" and out[-2:] == [OSLO, "Done!\n"]


FORCED_OPEN = (
    "The user asks about barometers. I could run\n<tool_call>\n"
    '{"name": "get_weather", "arguments": {"city": "Rome"}}\n</tool_call>\n'
    "but that is not needed.\n</think>\n\nA barometer measures air pressure."
)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, len(FORCED_OPEN)), max_size=6))
def test_a_call_in_reasoning_forced_open_is_not_a_call(cuts: list[int]) -> None:
    """Only `</think>` appears (the prompt ended with `<think>`): all before it is
    reasoning, kept verbatim with keep_reasoning and never searched for calls."""
    whole, _ = recover(FORCED_OPEN, SCHEMAS, keep_reasoning=True)
    assert whole.calls == () and whole.text == FORCED_OPEN
    bounds = sorted({0, len(FORCED_OPEN), *cuts})
    pieces = [FORCED_OPEN[a:b] for a, b in itertools.pairwise(bounds)]
    streamed = _feed_all(StreamRecovery(SCHEMAS, keep_reasoning=True), pieces)
    assert all(isinstance(i, str) for i in streamed) and _text(streamed) == FORCED_OPEN
    dropped = _feed_all(StreamRecovery(SCHEMAS), pieces)
    assert dropped == [] or _text(dropped).strip() == "A barometer measures air pressure."


def test_answer_fence_after_prose_streams_without_holding() -> None:
    parser = StreamRecovery(SCHEMAS, keep_reasoning=True)
    out = parser.feed("Here is the format:\n\n```xml\n<tool_call>\n" + W + "\n")
    assert _text(out) == "Here is the format:\n\n```xml\n<tool_call>\n" + W + "\n"
    rest = parser.feed("</tool_call>\n```\nThat is all.") + parser.flush()
    assert all(isinstance(i, str) for i in rest)


def test_unterminated_block_with_complete_json_is_a_call_at_the_end() -> None:
    items = _feed_all(StreamRecovery(SCHEMAS, keep_reasoning=True), ["<tool_call>\n", W])
    assert items == [OSLO]


def test_truncated_block_is_released_as_text_at_the_end() -> None:
    raw = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Os'
    assert _text(_feed_all(StreamRecovery(SCHEMAS, keep_reasoning=True), [raw[:7], raw[7:]])) == raw


def test_json_data_on_its_own_line_is_released_once_closed() -> None:
    parser = StreamRecovery(SCHEMAS, keep_reasoning=True)
    out = parser.feed('Config:\n{"debug": true,\n "level": 3}\nNext line\n')
    assert _text(out) == 'Config:\n{"debug": true,\n "level": 3}\nNext line\n'


def test_brace_mid_sentence_is_not_held() -> None:
    parser = StreamRecovery(SCHEMAS, keep_reasoning=True)
    assert _text(parser.feed('Use {"name": "get_weather"')) == 'Use {"name": "get_weather"'


def test_reasoning_is_dropped_or_kept_but_never_parsed() -> None:
    text = "<think>maybe <tool_call>" + W + "</tool_call></think>Answer."
    dropped = _feed_all(StreamRecovery(SCHEMAS), [text[:9], text[9:30], text[30:]])
    assert dropped == ["Answer."]
    kept = _feed_all(
        StreamRecovery(SCHEMAS, keep_reasoning=True), [text[:9], text[9:30], text[30:]]
    )
    assert _text(kept) == text and all(isinstance(i, str) for i in kept)


def test_no_tools_offered_means_no_calls() -> None:
    items = _feed_all(StreamRecovery({}, keep_reasoning=True), ["<tool_call>" + W + "</tool_call>"])
    assert items == ["<tool_call>" + W + "</tool_call>"]


NASTY = [
    "Intro\n<tool_call>\n" + W + "\n</tool_call>\n<tool_call>\n" + W + "\n</tool_call>\nbye",
    "The <tool_call> tag is special.\n\n" + W + "\n",
    "```python\nx = [1]\n```\n" + W,
    "a\n```json\n" + W + '\n```\nb\n```json\n{"x": 1}\n```\n',
    '[TOOL_CALLS]get_weather[ARGS]{"city": "Oslo"}\nok\n[TOOL_CALLS]get_weather[ARGS]{"city": "Ro',
    "<|python_tag|>" + W.replace("arguments", "parameters") + "<|eom_id|>",
    "x `" + W + "` y\n" + W,
    "all\nsome text",
    "Wrap it in <tool_call> tags.\nLike so:\n<tool_call>\n" + W + "\n</tool_call>\nbye",
    ("Use <function=name> or [TOOL_CALLS] here.\nok\n<function=get_weather>{\"city\": \"Oslo\"}"
     "</function>\n"),
]


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(NASTY), st.lists(st.integers(0, 300), max_size=8))
def test_split_invariance_on_nasty_texts(text: str, cuts: list[int]) -> None:
    bounds = sorted({0, len(text), *(c for c in cuts if c <= len(text))})
    pieces = [text[a:b] for a, b in itertools.pairwise(bounds)]
    items = _feed_all(StreamRecovery(SCHEMAS, keep_reasoning=True), pieces)
    whole, _ = recover(text, SCHEMAS, keep_reasoning=True)
    assert [i for i in items if isinstance(i, ParsedCall)] == list(whole.calls)
    assert " ".join(_text(items).split()) == " ".join((whole.text or "").split())


_RUN_TEXT = st.lists(st.one_of(
    st.sampled_from(["functools", "functool", "get_weather(", "<tool", "_call>", "```", "{",
                     "\n", "  ", "[TOOL_CALLS]", "<|python", "<", ">", "Sure", " it is."]),
    st.text(max_size=6)), max_size=5).map("".join)


@settings(max_examples=300, deadline=None)
@example(lead=["Sure"], texts=["It is", " sunny", " today."], preferred=None)  # all of them
@example(lead=["Sure"], texts=["a functool", "s x"], preferred=None)
@example(lead=["Sure"], texts=["see <", "b> here"], preferred="hermes")
@example(lead=["Sure"], texts=["It is", " {", " x"], preferred=None)  # up to the brace
@given(lead=st.lists(_RUN_TEXT, max_size=3), texts=st.lists(_RUN_TEXT, min_size=1, max_size=6),
       preferred=st.sampled_from([None, "hermes", "mistral", "pythonic"]))
def test_a_run_judged_at_once_is_what_one_by_one_says(
        lead: list[str], texts: list[str], preferred: str | None) -> None:
    # plain_run_ok may count fewer when unsure, but every text it counts must be a
    # one-by-one yes, and taking their joined text must leave the parser as taking
    # each in turn does.
    def parser() -> StreamRecovery:
        made = StreamRecovery(SCHEMAS, preferred, keep_reasoning=True)  # as the pipeline has it
        for text in lead:  # some prose first, as it was taken on the plain path
            if made.plain_ok(text):
                made.take_plain(text)
            else:
                made.feed(text)
        return made

    at_once, one_by_one = parser(), parser()
    count = at_once.plain_run_ok(texts, "".join(texts))
    if texts == ["It is", " sunny", " today."]:  # the explicit yes must stay a whole yes
        assert count == 3
    if texts == ["It is", " {", " x"]:  # a brace may start a block: the count stops there
        assert count == 1
    assert 0 <= count <= len(texts)
    for text in texts[:count]:
        assert one_by_one.plain_ok(text)
        one_by_one.take_plain(text)
    at_once.take_plain("".join(texts[:count]))
    assert vars(at_once) == vars(one_by_one)


def test_the_start_of_an_answer_is_never_counted_in_a_run() -> None:
    # Recovery reads the answer's start on its own: a run there counts nothing.
    assert StreamRecovery(SCHEMAS, None, keep_reasoning=True).plain_run_ok(["Sure", " x"],
                                                                          "Sure x") == 0


@settings(max_examples=300, deadline=None)
@example(lead=[], text="all")  # the beginning of Functionary's leading "all\n"
@example(lead=[], text="all\nget_weather")
@example(lead=[], text="Sure, all of it.")
@given(lead=st.lists(_RUN_TEXT, max_size=2),
       text=st.one_of(_RUN_TEXT, st.sampled_from(["all", "al", "all\n", "all\nx", "alloy"])))
def test_a_text_called_plain_is_what_feed_sends_whole_holding_nothing(
        lead: list[str], text: str) -> None:
    # At the answer's start too, where a leading control word may begin a call.
    asked, fed = (StreamRecovery(SCHEMAS, keep_reasoning=True) for _ in range(2))
    for piece in lead:
        assert asked.feed(piece) == fed.feed(piece)
    if asked.plain_ok(text):
        assert "".join(_text(fed.feed(text))) == text
        assert fed.flush() == []


def _long_write_file(lines: int) -> str:
    body = 'line of code with "quotes" and {braces} [x]\n' * lines
    return ("<tool_call>\n<function=write_file>\n<parameter=path>\nbig.txt\n</parameter>\n"
            "<parameter=content>\n" + body + "</parameter>\n</function>\n</tool_call>")


def _json_data(lines: int) -> str:
    return "Data:\n" + "\n".join(f'{{"id": {i}, "name": "n{i}"}}' for i in range(lines))


def _scanned(text: str, monkeypatch: pytest.MonkeyPatch) -> int:
    """Characters of held text that streaming `text` in 7-character deltas (as a
    backend sends tokens) copies or scans again: every join of the held block, every
    `last_start` scan of it and every try to parse it whole. A count, not a time."""
    seen = [0]

    def counted(name: str) -> None:
        original = getattr(StreamRecovery, name)

        def spy(self: StreamRecovery, *args: Any) -> Any:
            seen[0] += len(self._buf) + (len(args[0]) if args and isinstance(args[0], str)
                                         else 0)
            return original(self, *args)
        monkeypatch.setattr(StreamRecovery, name, spy)

    for name in ("_join", "_recover"):
        counted(name)  # _join: where held text is copied as deltas join it
    last_start = release.last_start

    def scan_spy(buf: str, markers: tuple[str, ...]) -> int:
        seen[0] += len(buf)
        return last_start(buf, markers)
    monkeypatch.setattr(release, "last_start", scan_spy)
    parser = StreamRecovery(SCHEMAS, keep_reasoning=True)
    for at in range(0, len(text), 7):
        parser.feed(text[at : at + 7])
    parser.flush()
    monkeypatch.undo()
    return seen[0]


def test_streaming_work_grows_linearly_with_the_length_of_a_held_block(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """4x the text is about 4x the work, not 16x: the held block is neither copied
    per delta nor rescanned per line on each try (a 132 KB call took 14 s of CPU to
    stream when it was). Counted, so load on the machine cannot change it."""
    for make in (_long_write_file, _json_data):
        small, large = make(400), make(1600)
        ratio = _scanned(large, monkeypatch) / _scanned(small, monkeypatch)
        assert ratio < 6, (make.__name__, ratio)


# A control token is markup wherever it stands (GigaChat's `<|message_sep|>`): dropped
# from prose that mentions it (test_control_tokens_never_reach_content).
_CONTROLS = set(controls_of(tuple(FORMATS.values())))
_MENTIONABLE = sorted({m for f in FORMATS.values() for m in f.markers
                       if m not in GENERIC_MARKERS and m not in _OPEN_ENDED} - _CONTROLS)


@pytest.mark.parametrize("marker", _MENTIONABLE)
def test_a_marker_prose_only_mentions_does_not_hold_the_rest_of_the_answer(marker: str) -> None:
    text = (f"You can wrap calls in {marker} tags, like this.\nThat is how it works.\n"
            "More prose here.\nAnd the last line.\n")
    parser = StreamRecovery(SCHEMAS, keep_reasoning=True)
    sent = "".join(_text(parser.feed(text[i:i + 7])) for i in range(0, len(text), 7))
    # Out as the lines settle, not at the end of the answer; and unchanged.
    assert sent.startswith(f"You can wrap calls in {marker} tags, like this.\nThat is how")
    assert sent + _text(parser.flush()) == text


@pytest.mark.parametrize("name", sorted(FORMATS))
@pytest.mark.parametrize("calls", [
    [OSLO],
    [ParsedCall("tags", {}), ParsedCall("get_weather", {"city": "Oslo"})],
    [ParsedCall("a-b.c", {"x": [1, "two"], "y": None})],
])
def test_no_format_writes_a_call_its_marker_would_count_as_a_mention(
        name: str, calls: list[ParsedCall]) -> None:
    # The early release is safe only if every real call, in every format, reads as one
    # that may still open at each of its markers.
    # Open-ended and generic markers are never read as mentions: only the rest are
    # checked, and every format but those that write bare calls writes one of them.
    fmt = FORMATS[name]
    text = fmt.render_calls(calls)
    tools = [c.name for c in calls]
    decided = [m for m in fmt.markers if m not in _OPEN_ENDED and m not in GENERIC_MARKERS]
    checked = 0
    for marker in decided:
        at = text.find(marker)
        while at >= 0:
            assert not opens_nothing(marker, text[at + len(marker):], tools), (marker, text)
            checked += 1
            at = text.find(marker, at + 1)
    assert checked or name in _WRITES_BARE_CALLS, (name, decided, text)


_WRITES_BARE_CALLS = {"gpt_oss", "json_block", "llama3_json", "pythonic", "xlam"}
"""Formats whose calls carry no marker that could be read as a mention (their markers
are open-ended or generic, or, for xLAM, accepted on input but never written)."""


@pytest.mark.parametrize("tag", ["</think>", "[/THINK]", "<channel|>", "<|END_THINKING|>",
                                 "<|close|>think<|sep|>", "[THINK]"])
def test_any_familys_reasoning_marker_is_not_plain_while_undecided(tag: str) -> None:
    # A lone close settles the reasoning (all before it goes): never a plain text.
    parser = StreamRecovery({"get_weather": {"type": "object"}}, keep_reasoning=True)
    assert parser.plain_ok("no tags here")
    assert not parser.plain_ok(f"thought{tag}answer")
