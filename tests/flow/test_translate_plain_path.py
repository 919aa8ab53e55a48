"""With tools offered, plain content chunks skip the stages' rebuilding, not their view.

`FastSseTranslator(decode=True)` decodes every chunk, but a chunk whose only delta
is content that no stage would change (no marker, fence, line-start brace or
reasoning tag in it, nothing held) goes out as the upstream's bytes, the
stages having noted it. The client must receive exactly what the full path
(the reference `SseTranslator`, all `--no-fast-paths` runs) writes, whatever the text and however it is cut: the recovered
calls, the prose, the reasoning and the finish.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest
from factories import OLLAMA_HEAD, chunk, response_pipeline, sse
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.api.chat.answer import frame
from proxy.backends.sse_frames import UsageCounter
from proxy.flow.fast_answer import FastCompletionTranslator
from proxy.flow.fast_stream import FastSseTranslator
from proxy.flow.translate import ChunkOut, CompletionTranslator, SseTranslator
from proxy.transforms.response.completion import chunks_to_completion
from proxy.types import Plan, Profile, ReasoningPolicy

DATA = Path(__file__).parent.parent / "formats" / "data"
TOOLS = json.loads((DATA / "tools.json").read_text())
SAMPLES = [json.loads(line) for name in ("textcalls-sample.jsonl", "textcalls-extra.jsonl")
           for line in (DATA / name).read_text().splitlines() if line.strip()]


def _tools() -> list[dict[str, Any]]:
    items = TOOLS if isinstance(TOOLS, list) else list(TOOLS.values())
    return [t if "function" in t else {"type": "function", "function": t} for t in items]


def _translator(plain: bool, reasoning: ReasoningPolicy, tool_format: str | None,
                plan: Plan, usage: bool = False) -> SseTranslator:
    profile = Profile(model="qwen3:8b", reasoning=reasoning, tool_format=tool_format)
    pipeline = response_pipeline(profile, _tools(), plan)
    counter = UsageCounter({"messages": [{"role": "user", "content": "hi"}]}) if usage else None
    if plain:  # the fast paths, as a stream with tools takes them
        return FastSseTranslator(pipeline, decode=True, usage=counter)
    return SseTranslator(pipeline, usage=counter)  # the reference (--no-fast-paths)


def _whole(pipeline: Any, plain: bool) -> CompletionTranslator:
    return FastCompletionTranslator(pipeline) if plain else CompletionTranslator(pipeline)


def _stream(pieces: list[str], finish: str) -> bytes:
    deltas = [{"role": "assistant", "content": p} if i == 0 else {"content": p}
              for i, p in enumerate(pieces)]
    chunks = [*(chunk(d) for d in deltas), chunk({}, finish)]
    return b"".join(sse(c) for c in chunks) + b"data: [DONE]\n\n"


def _client_bytes(translator: SseTranslator, body: bytes, cuts: list[int]) -> bytes:
    points = sorted({min(c, len(body)) for c in cuts})
    out: list[ChunkOut] = []
    for a, b in zip([0, *points], [*points, len(body)]):
        if b > a:
            out += translator.feed(body[a:b])
    out += translator.end()
    assert translator.failure is None
    return b"".join(frame(c) for c in out)


def _split(text: str, cuts: list[int]) -> list[str]:
    points = sorted({c % (len(text) + 1) for c in cuts})
    return [text[a:b] for a, b in zip([0, *points], [*points, len(text)]) if b > a] or [""]


# Prose with everything that can start (or look like the start of) a call.
TRIGGERS = ["<tool_call>", "</tool_call>", "<think>", "</think>", "[TOOL_CALLS]", "```json\n",
            "```\n", "{", "}", "[", "]", "\n", "  ", '"name": ', '"arguments": ',
            '{"name": "get_weather", "arguments": {"city": "Oslo"}}', "get_weather(",
            "<|python_start|>", "<function=", "<", "`", "~~~", "all\n", "functools"]
PROSE = st.lists(st.one_of(st.sampled_from(TRIGGERS), st.text(max_size=8)), max_size=14) \
    .map("".join)
TEXT = st.one_of(PROSE, st.sampled_from([s["content"] for s in SAMPLES]),
                 st.tuples(PROSE, st.sampled_from([s["content"] for s in SAMPLES]), PROSE)
                 .map("".join))


@settings(max_examples=400, deadline=None)
@given(text=TEXT, pieces=st.lists(st.integers(min_value=0, max_value=10_000), max_size=24),
       cuts=st.lists(st.integers(min_value=0, max_value=5_000), max_size=8),
       reasoning=st.sampled_from(["pass", "move", "strip"]),
       tool_format=st.sampled_from([None, "hermes", "mistral", "pythonic", "json_block"]),
       plan=st.sampled_from([Plan(), Plan(tools="emulate")]),
       finish=st.sampled_from(["stop", "length", "tool_calls"]))
def test_plain_path_writes_what_the_full_path_writes(
        text: str, pieces: list[int], cuts: list[int], reasoning: ReasoningPolicy,
        tool_format: str | None, plan: Plan, finish: str) -> None:
    body = _stream(_split(text, pieces), finish)
    plain = _client_bytes(_translator(True, reasoning, tool_format, plan), body, cuts)
    full = _client_bytes(_translator(False, reasoning, tool_format, plan), body, cuts)
    assert plain == full


@settings(max_examples=300, deadline=None)
@given(text=TEXT, pieces=st.lists(st.integers(min_value=0, max_value=10_000), max_size=24),
       events=st.lists(st.integers(min_value=0, max_value=40), max_size=8),
       plain=st.booleans(), usage=st.booleans(),
       reasoning=st.sampled_from(["pass", "move", "strip"]),
       tool_format=st.sampled_from([None, "hermes", "pythonic"]),
       finish=st.sampled_from(["stop", "tool_calls"]))
def test_reads_of_whole_events_write_what_the_sse_decoder_path_writes(
        text: str, pieces: list[int], events: list[int], plain: bool, usage: bool,
        reasoning: ReasoningPolicy, tool_format: str | None, finish: str) -> None:
    """Reads of whole events (what a slow stream reads: one event each) and the same
    stream fed one byte at a time give the same client bytes, the usage chunk made
    from the counted events included."""
    body = _stream(_split(text, pieces), finish)
    ends = [i + 2 for i in range(len(body)) if body[i:i + 2] == b"\n\n"]
    at_events = [ends[e % len(ends)] for e in events]
    whole = _client_bytes(_translator(plain, reasoning, tool_format, Plan(), usage), body,
                          at_events)
    by_byte = _client_bytes(_translator(plain, reasoning, tool_format, Plan(), usage), body,
                            list(range(1, len(body))))
    assert whole == by_byte


@pytest.mark.parametrize("sample", SAMPLES, ids=[s["id"] for s in SAMPLES])
def test_every_sample_streamed_in_small_pieces_is_the_same_on_both_paths(
        sample: dict[str, Any]) -> None:
    body = _stream(["Sure. ", *_split(sample["content"], list(range(0, 4000, 3)))], "stop")
    for fmt in (None, sample["format"]):
        plain = _client_bytes(_translator(True, "move", fmt, Plan()), body, [])
        full = _client_bytes(_translator(False, "move", fmt, Plan()), body, [])
        assert plain == full


def test_plain_prose_goes_out_as_the_upstreams_bytes() -> None:
    # json.dumps spelling (spaces after separators) shows which chunks were relayed.
    words = ["Here", " is", " the", " forecast", ": sunny", ", then", " rain", ".\n", "Done", "."]
    chunks = [chunk({"content": w}) for w in words]
    body = b"".join(sse(json.dumps(c).encode()) for c in chunks)
    body += sse(chunk({}, "stop")) + b"data: [DONE]\n\n"
    translator = _translator(True, "move", None, Plan())
    out = translator.feed(body) + translator.end()
    relayed = [c for c in out if isinstance(c, bytes)]
    # No word can start a call (no role on these deltas): each is relayed as sent, and
    # so is the end, with nothing held and no call to count (`passes_plain_end`).
    assert relayed == out
    assert [orjson.loads(c)["choices"][0]["delta"]["content"] for c in relayed[:-1]] == words
    assert all(b'"choices": [' in c for c in relayed[:-1])
    assert orjson.loads(relayed[-1])["choices"][0] == {"index": 0, "delta": {},
                                                       "finish_reason": "stop"}


def test_a_call_after_relayed_prose_is_still_recovered() -> None:
    pieces = ["I will", " check", ".\n", "<tool_call>", '\n{"name": "get_weather", ',
              '"arguments": {"city": "Oslo"}}\n', "</tool_call>"]
    translator = _translator(True, "move", "hermes", Plan())
    out = translator.feed(_stream(pieces, "stop")) + translator.end()
    decoded = [orjson.loads(c) if isinstance(c, bytes) else c for c in out]
    calls = [tc for c in decoded for ch in c["choices"]
             for tc in (ch.get("delta") or {}).get("tool_calls") or []]
    text = "".join((ch.get("delta") or {}).get("content") or ""
                   for c in decoded for ch in c["choices"])
    assert [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in calls] \
        == [("get_weather", {"city": "Oslo"})]
    assert text.strip() == "I will check."
    assert decoded[-1]["choices"][0]["finish_reason"] == "tool_calls"
    assert any(isinstance(c, bytes) for c in out)  # " check" went out as sent


def _whole_answer(plain: bool, reasoning: ReasoningPolicy, tool_format: str | None, plan: Plan,
                  text: str, finish: str | None, shape: dict[str, Any] | None = None
                  ) -> tuple[Any, Any, list[Any]]:
    """What a non-streaming client gets (the upstream's answer as it came when the
    translator hands it on `verbatim`, else the completion merged from its chunks),
    decoded, with the call counts and observations the request is accounted with."""
    shape = shape or {}
    profile = Profile(model="qwen3:8b", reasoning=reasoning, tool_format=tool_format)
    pipeline = response_pipeline(profile, _tools(), plan)
    translator = _whole(pipeline, plain)
    top = {k: v for k, v in {**OLLAMA_HEAD, "object": "chat.completion"}.items()
           if k not in shape.get("left_out", ())}
    choice = {"index": 0, "message": {"role": "assistant", "content": text, **shape.get(
        "message", {})}, **shape.get("choice", {}), "finish_reason": finish}
    completion: dict[str, Any] = {**top, "choices": [choice]}
    if shape.get("usage", True):
        completion["usage"] = {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8}
    out = translator.feed(orjson.dumps(completion)) + translator.end()
    assert translator.failure is None
    chunks = [orjson.loads(c) if isinstance(c, bytes) else c for c in out]
    template = {k: v for k, v in chunks[0].items() if k != "usage"} | {"choices": []}
    merged = chunks_to_completion(chunks, template)
    got = orjson.loads(translator.verbatim) if translator.verbatim is not None else merged
    return got, pipeline.call_counts(), pipeline.observations


SHAPES = st.fixed_dictionaries({}, optional={
    "left_out": st.lists(st.sampled_from(["object", "system_fingerprint", "created"])),
    "choice": st.dictionaries(st.sampled_from(["logprobs", "stop_reason"]),
                              st.none() | st.integers(0, 3), max_size=2),
    "message": st.sampled_from([{}, {"tool_calls": []}, {"tool_calls": None},
                                {"refusal": None}, {"reasoning_content": "hm"}]),
    "usage": st.booleans(),
})


@settings(max_examples=400, deadline=None)
@given(text=TEXT, reasoning=st.sampled_from(["pass", "move", "strip"]),
       tool_format=st.sampled_from([None, "hermes", "mistral", "pythonic", "json_block"]),
       plan=st.sampled_from([Plan(), Plan(tools="emulate")]),
       finish=st.sampled_from(["stop", "length", "tool_calls", "content_filter", None]),
       shape=SHAPES)
def test_a_whole_answer_is_the_same_on_the_plain_and_the_full_path(
        text: str, reasoning: ReasoningPolicy, tool_format: str | None, plan: Plan,
        finish: str | None, shape: dict[str, Any]) -> None:
    # The plain path passes both the content chunk and the chunk that ends the answer
    # (`passes_plain_end`) when no stage would change them, and then hands the answer
    # on as it came (`verbatim`): the completion, counts and observations must be the
    # full path's, whatever the answer holds.
    assert _whole_answer(True, reasoning, tool_format, plan, text, finish, shape) \
        == _whole_answer(False, reasoning, tool_format, plan, text, finish, shape)


# An orphan close tag (thinking forced open) ends the reasoning: the answer starts again
# right after it, where a call may stand at the start of a line. The first case is the
# one Hypothesis found; the others are its siblings (a tag alone, after prose, split
# across deltas, an open tag, a call in another format after it).
ORPHAN_CLOSE = [
    '</think>[get_weather(city="Madrid", unit="celsius")]',
    'x</think>[get_weather(city="Madrid")]',
    'Let me see.</think>\n[get_weather(city="Madrid")]',
    '</think>{"name": "get_weather", "arguments": {"city": "Oslo"}}',
    '</think><tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}</tool_call>',
    '<think>[get_weather(city="Oslo")]</think>[get_weather(city="Madrid")]',
    '</think>',
    'prose </think> more prose',
]


@pytest.mark.parametrize("text", ORPHAN_CLOSE)
@pytest.mark.parametrize("reasoning", ["pass", "move", "strip"])
def test_a_call_after_an_orphan_close_tag_is_the_same_on_both_paths(
        text: str, reasoning: ReasoningPolicy) -> None:
    for fmt in (None, "pythonic", "hermes"):
        for finish in ("stop", "tool_calls", None):
            assert _whole_answer(True, reasoning, fmt, Plan(), text, finish) \
                == _whole_answer(False, reasoning, fmt, Plan(), text, finish)
        for cuts in ([], [1, 2, 3, 5, 8], list(range(1, len(text), 3)), [len("</thi")]):
            body = _stream(_split(text, cuts), "stop")
            assert _client_bytes(_translator(True, reasoning, fmt, Plan()), body, []) \
                == _client_bytes(_translator(False, reasoning, fmt, Plan()), body, [])


def test_the_found_case_recovers_the_call_after_the_tag() -> None:
    got, counts, _ = _whole_answer(True, "pass", None, Plan(), ORPHAN_CLOSE[0], "stop")
    message = got["choices"][0]["message"]
    assert message["content"] == "</think>"
    assert [c["function"]["name"] for c in message["tool_calls"]] == ["get_weather"]
    assert counts.kept == 1


@pytest.mark.parametrize("sample", SAMPLES, ids=[s["id"] for s in SAMPLES])
def test_every_sample_as_a_whole_answer_is_the_same_on_both_paths(
        sample: dict[str, Any]) -> None:
    for fmt in (None, sample["format"]):
        assert _whole_answer(True, "move", fmt, Plan(), sample["content"], "stop") \
            == _whole_answer(False, "move", fmt, Plan(), sample["content"], "stop")


def _recording(feed: Any, fed: list[Any]) -> Any:
    def record(chunk: Any) -> Any:
        fed.append(chunk)
        return feed(chunk)
    return record


def test_a_plain_whole_answer_s_end_goes_through_no_stage() -> None:
    # The finish chunk of a plain answer is relayed as completion_to_chunks made it: the
    # stages vouched for it rather than rebuilding it, and are done (nothing to flush).
    # A "tool_calls" with no call in it is not plain: assembly makes it "stop".
    for finish, same in (("stop", True), ("length", True), ("tool_calls", False)):
        pipeline = response_pipeline(Profile(model="qwen3:8b"), _tools())
        fed: list[Any] = []
        pipeline.feed = _recording(pipeline.feed, fed)  # type: ignore[method-assign]
        translator = FastCompletionTranslator(pipeline)
        completion = {**OLLAMA_HEAD, "object": "chat.completion", "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "Sunny."},
             "finish_reason": finish}]}
        translator.feed(orjson.dumps(completion))
        out = translator.end()
        assert [c["choices"][0]["finish_reason"] for c in out if isinstance(c, dict)] \
            == [None, finish if same else "stop"]
        assert len(fed) == (0 if same else 1)
        assert pipeline.call_counts().kept == 0 and pipeline.flush() == []


def test_a_plain_whole_answer_skips_the_stages_rebuilding() -> None:
    # The stages rebuild a message as a role chunk and a content chunk; the plain path
    # keeps the message's one chunk as completion_to_chunks made it.
    text = "Sunny in Oslo, 21 degrees."
    for plain, deltas in ((True, [{"role": "assistant", "content": text}]),
                          (False, [{"role": "assistant"}, {"content": text}])):
        pipeline = response_pipeline(Profile(model="qwen3:8b"), _tools())
        translator = _whole(pipeline, plain)
        body = orjson.dumps({**OLLAMA_HEAD, "object": "chat.completion", "choices": [
            {"index": 0, "message": {"role": "assistant", "content": text},
             "finish_reason": "stop"}]})
        out = translator.feed(body) + translator.end()
        chunks = [orjson.loads(c) if isinstance(c, bytes) else c for c in out]
        got = [ch["delta"] for c in chunks for ch in c["choices"] if ch["delta"]]
        assert got == deltas


@pytest.mark.parametrize("plain", [True, False])
def test_a_stream_closed_after_its_finish_without_done_is_whole(plain: bool) -> None:
    # The finish counts whether the stages vouched for it (relayed as sent) or fed it.
    # Every backend sends `[DONE]`; this is a connection that ends between the two.
    body = _stream(["Sunny", " today."], "stop").removesuffix(b"data: [DONE]\n\n")
    translator = _translator(plain, "move", None, Plan())
    out = translator.feed(body) + translator.end()
    assert translator.failure is None
    finishes = [orjson.loads(c) if isinstance(c, bytes) else c for c in out][-1]
    assert finishes["choices"][0]["finish_reason"] == "stop"


def test_a_plain_whole_answer_is_handed_on_as_it_came_and_a_changed_one_is_not() -> None:
    # Verbatim only when the merged chunks would be this same completion: its stages
    # changed nothing, and it is written the way the merge writes it.
    body = {**OLLAMA_HEAD, "object": "chat.completion", "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "Sunny."},
         "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8}}
    message = body["choices"][0]["message"]
    call = {"id": "call_1", "type": "function",
            "function": {"name": "nowhere", "arguments": "{}"}}
    for changed, as_it_came in (
            ({}, True),
            ({"content": '{"name": "get_weather", "arguments": {}}'}, False),  # recovered
            ({"content": "<think>hm</think>Sunny."}, False),  # reasoning moved
            ({"tool_calls": [call]}, False),  # an unknown tool, dropped
            ({"role": None}, False),  # the merge would add the role
    ):
        completion = {**body, "choices": [{**body["choices"][0],
                                           "message": {**message, **changed}}]}
        translator = FastCompletionTranslator(response_pipeline(Profile(model="qwen3:8b"),
                                                                _tools()))
        raw = orjson.dumps(completion)
        translator.feed(raw)
        translator.end()
        assert (translator.verbatim == raw) is as_it_came, changed
        assert as_it_came or translator.verbatim is None
