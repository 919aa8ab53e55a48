from __future__ import annotations

import itertools
import json
from typing import Any

import orjson
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from proxy.backends.sse_frames import (
    _KEPT_BYTES,
    UsageCounter,
    completion_to_sse,
    estimate_tokens,
    prompt_chars,
)
from proxy.flow.fast_stream import FastSseTranslator
from proxy.flow.translate import SseTranslator, as_chunks
from proxy.sse import SseDecoder
from proxy.transforms.response import build_pipeline
from proxy.transforms.response.checks import SchemaCache
from proxy.types import Plan, Profile, ReasoningPolicy

# llama-cpp-python's answer to tools + tool_choice "auto", not streamed (as recorded).
CALLED: dict[str, Any] = {
    "id": "chatcmpl-f886", "object": "chat.completion", "created": 1795509799,
    "model": "smollm2-135m-instruct",
    "choices": [{"index": 0, "message": {
        "content": None, "role": "assistant",
        "tool_calls": [{"id": "call__0_get_weather_cmpl-ea2d", "type": "function",
                        "function": {"name": "get_weather", "arguments": '{ "city": "Paris" }'}}],
        "function_call": {"name": "get_weather:", "arguments": '{ "city": "Paris" }'}},
        "logprobs": None, "finish_reason": "tool_calls"}],
    "usage": {"prompt_tokens": 23, "completion_tokens": 8, "total_tokens": 31}}


def _events(data: bytes) -> list[Any]:
    events = SseDecoder().feed(data)
    assert events[-1].is_done
    return [orjson.loads(e.data) for e in events[:-1]]


def test_completion_becomes_content_then_calls_then_finish() -> None:
    chunks = _events(completion_to_sse(CALLED, include_usage=False))
    deltas = [c["choices"][0]["delta"] if c["choices"] else None for c in chunks]
    assert deltas == [
        {"role": "assistant", "content": ""},
        {"tool_calls": [{**CALLED["choices"][0]["message"]["tool_calls"][0], "index": 0}]},
        {}]
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"
    assert all(c["object"] == "chat.completion.chunk" and c["id"] == "chatcmpl-f886"
               for c in chunks)
    assert b"get_weather:" not in completion_to_sse(CALLED, include_usage=False)


def test_usage_only_when_asked() -> None:
    chunks = _events(completion_to_sse(CALLED, include_usage=True))
    assert chunks[-1] == {**{k: v for k, v in CALLED.items() if k not in ("choices", "usage")},
                          "object": "chat.completion.chunk", "choices": [],
                          "usage": CALLED["usage"]}


def _stream(with_usage: bool) -> bytes:
    base = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m"}
    frames = [{**base, "choices": [{"index": 0, "delta": {"role": "assistant"},
                                    "finish_reason": None}]}]
    frames += [{**base, "choices": [{"index": 0, "delta": {"content": w},
                                     "finish_reason": None}]} for w in ("a", " b", " c")]
    frames.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    if with_usage:
        frames.append({**base, "choices": [], "usage": {"prompt_tokens": 1,
                                                        "completion_tokens": 3,
                                                        "total_tokens": 4}})
    body = b"".join(b"data: " + orjson.dumps(f) + b"\n\n" for f in frames)
    return body + b": ping - 2026-11-24\n\ndata: [DONE]\n\n"


REQUEST: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": "hi"}],
                           "stream": True, "stream_options": {"include_usage": True}}
PROMPT = estimate_tokens(prompt_chars(REQUEST))


def _fill(data: bytes, cuts: list[int], decode: bool | None = False,
          reasoning: ReasoningPolicy = "pass") -> list[Any]:
    """What the client gets: the stream through the translator that counts usage
    (on the fast path, sniffing with `move`, or decoding every event; `decode=None`:
    the reference decoder alone, as with `--no-fast-paths`)."""
    pipeline = build_pipeline(client_tools=[], profile=Profile(model="m", reasoning=reasoning),
                              plan=Plan(), parallel_tool_calls=None,
                              schema_cache=SchemaCache(), id_factory=lambda: "call_1")
    translator = SseTranslator(pipeline, usage=UsageCounter(REQUEST)) if decode is None \
        else FastSseTranslator(pipeline, decode=decode, usage=UsageCounter(REQUEST))
    bounds = sorted({0, len(data), *(c % (len(data) + 1) for c in cuts)})
    out = [c for a, b in itertools.pairwise(bounds) for c in translator.feed(data[a:b])]
    out += translator.end()
    assert translator.failure is None
    return as_chunks(out)


@given(st.lists(st.integers(min_value=0, max_value=10_000), max_size=8),
       st.sampled_from([False, True, None]))
def test_usage_added_once_at_the_end_however_the_bytes_are_cut(cuts: list[int],
                                                               decode: bool | None) -> None:
    chunks = _fill(_stream(with_usage=False), cuts, decode)
    usage = [c["usage"] for c in chunks if "usage" in c]
    assert usage == [{"prompt_tokens": PROMPT, "completion_tokens": 3,
                      "total_tokens": PROMPT + 3}]
    assert chunks[-1]["choices"] == []
    assert chunks[-2]["choices"][0]["finish_reason"] == "stop"


def test_a_stream_with_usage_is_left_as_it_was() -> None:
    chunks = _fill(_stream(with_usage=True), [])
    assert [c["usage"] for c in chunks if "usage" in c] == [
        {"prompt_tokens": 1, "completion_tokens": 3, "total_tokens": 4}]


def test_a_stream_that_finished_but_lost_done_still_gets_usage() -> None:
    data = _stream(with_usage=False)
    chunks = _fill(data[: data.index(b": ping")], [])
    assert chunks[-1]["usage"]["completion_tokens"] == 3


def test_no_usage_is_made_without_a_counter() -> None:
    pipeline = build_pipeline(client_tools=[], profile=Profile(model="m"), plan=Plan(),
                              parallel_tool_calls=None, schema_cache=SchemaCache(),
                              id_factory=lambda: "call_1")
    translator = FastSseTranslator(pipeline, decode=False)
    out = translator.feed(_stream(with_usage=False)) + translator.end()
    assert not any("usage" in c for c in as_chunks(out))


_DELTAS = st.sampled_from([
    {"content": "a"}, {"content": ""}, {"content": None}, {"role": "assistant"},
    {"role": "assistant", "content": ""}, {"content": "", "reasoning_content": "hm"},
    {"reasoning": "x"}, {"content": "say \"content\":\"\" here"}, {"content": "\\"},
    {"tool_calls": [{"index": 0, "function": {"name": "f", "arguments": ""}}]},
    {"tool_calls": [{"index": 0, "function": {"arguments": "{\"a\": 1}"}}]}, {}])


@given(st.lists(_DELTAS, max_size=12), st.booleans(),
       st.lists(st.integers(min_value=0, max_value=3_000), max_size=6),
       st.sampled_from([False, True, None]), st.sampled_from(["pass", "move"]), st.booleans())
def test_completion_tokens_are_the_chunks_that_generated(
        deltas: list[dict[str, Any]], spaced: bool, cuts: list[int], decode: bool | None,
        reasoning: ReasoningPolicy, null_usage: bool) -> None:
    # Compact (Ollama, llama.cpp) or spaced JSON, and `"usage": null` on every chunk
    # as the OpenAI spec has it for include_usage: the count must not depend on
    # which events the filler decoded and which it judged by their bytes.
    base = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m"}
    extra = {"usage": None} if null_usage else {}
    frames = [{**base, "choices": [{"index": 0, "delta": d, "finish_reason": None}], **extra}
              for d in deltas]
    dump = (lambda f: json.dumps(f).encode()) if spaced else orjson.dumps
    body = b"".join(b"data: " + dump(f) + b"\n\n" for f in frames) + b"data: [DONE]\n\n"
    chunks = _fill(body, cuts, decode, reasoning)
    usage = [c for c in chunks if c.get("usage")]
    generated = sum(any(isinstance(d.get(k), str) and d[k]
                        for k in ("content", "reasoning_content", "reasoning"))
                    or any(c["function"].get("arguments") for c in d.get("tool_calls") or [])
                    for d in deltas)
    if not frames:
        assert usage == []
        return
    assert [u["usage"]["completion_tokens"] for u in usage] == [generated]
    assert {k: v for k, v in usage[0].items() if k not in ("choices", "usage")} == base


_EVENT_KINDS = st.sampled_from(["one", "two choices", "usage null", "usage", "no choices"])


@given(st.lists(st.tuples(_DELTAS.filter(lambda d: "tool_calls" not in d), _EVENT_KINDS),
                min_size=1, max_size=10), st.booleans())
def test_a_whole_read_counts_as_its_events_one_by_one(
        events_spec: list[tuple[dict[str, Any], str]], spaced: bool) -> None:
    # observe_frames judges a read by a few scans where it can; what it keeps (count,
    # last chunk, usage seen) must be what observing each event on its own keeps,
    # whatever the events: n > 1 choices, `"usage": null`, a real usage chunk anywhere,
    # an event without choices.
    base = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m"}
    dump = (lambda f: json.dumps(f).encode()) if spaced else orjson.dumps
    events = []
    for delta, kind in events_spec:
        choice = {"index": 0, "delta": delta, "finish_reason": None}
        frame: dict[str, Any] = {**base, "choices": [choice]}
        if kind == "two choices":
            frame["choices"] = [choice, {**choice, "index": 1}]
        elif kind == "usage null":
            frame["usage"] = None
        elif kind == "usage":
            frame = {**base, "choices": [], "usage": {
                "prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}}
        elif kind == "no choices":
            frame = {**base, "system_fingerprint": "fp"}
        events.append(dump(frame))
    one_by_one, whole, kept = UsageCounter(REQUEST), UsageCounter(REQUEST), UsageCounter(REQUEST)
    for event in events:
        one_by_one.observe(event)
    read = b"".join(b"data: " + e + b"\n\n" for e in events)
    whole.observe_frames(read, len(events))
    whole.settle()
    assert vars(whole) == vars(one_by_one)
    # Kept unlooked-at until the end (`missing` settles only if it must): the same answer.
    kept.observe_frames(read, len(events))
    assert kept.missing() == whole.missing() == one_by_one.missing()


@given(st.lists(st.tuples(_DELTAS.filter(lambda d: "tool_calls" not in d), _EVENT_KINDS),
                min_size=1, max_size=12),
       st.lists(st.integers(0, 12), max_size=4), st.lists(st.booleans(), max_size=12))
@example([({"content": "a"}, "one")] * 3, [2], [False, True])  # a kept read, then one alone
def test_reads_kept_for_later_give_what_observing_each_event_at_once_gives(
        events_spec: list[tuple[dict[str, Any], str]], cuts: list[int],
        singles: list[bool]) -> None:
    # observe_frames keeps whole reads and looks at them only when it must; events
    # that come alone (`observe`) in between must still be taken in their order.
    events = []
    for n, (delta, kind) in enumerate(events_spec):
        # Each event its own `created`: the made-up usage chunk must copy the last one's.
        base = {"id": "c", "object": "chat.completion.chunk", "created": n, "model": "m"}
        frame: dict[str, Any] = {**base, "choices": [{"index": 0, "delta": delta,
                                                      "finish_reason": None}]}
        if kind == "usage":
            frame = {**base, "choices": [], "usage": {
                "prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}}
        elif kind == "no choices":
            frame = {**base, "system_fingerprint": "fp"}
        elif kind == "usage null":
            frame["usage"] = None
        events.append(orjson.dumps(frame))
    bounds = sorted({0, len(events), *(c for c in cuts if c <= len(events))})
    one_by_one, later = UsageCounter(REQUEST), UsageCounter(REQUEST)
    for event in events:
        one_by_one.observe(event)
    for n, (a, b) in enumerate(itertools.pairwise(bounds)):
        if n < len(singles) and singles[n]:
            for event in events[a:b]:
                later.observe(event)
        else:
            later.observe_frames(b"".join(b"data: " + e + b"\n\n" for e in events[a:b]), b - a)
    assert later.missing() == one_by_one.missing()


def test_a_stream_that_ends_with_its_usage_chunk_is_never_counted(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # The usual stream with include_usage: the backend's own usage chunk comes last, so
    # the reads kept for counting are never looked at.
    base = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m"}
    text = [orjson.dumps({**base, "choices": [{"index": 0, "delta": {"content": f"w{i}"},
                                               "finish_reason": None}]}) for i in range(8)]
    usage = orjson.dumps({**base, "choices": [], "usage": {
        "prompt_tokens": 3, "completion_tokens": 8, "total_tokens": 11}})
    counter = UsageCounter(REQUEST)
    looked: list[int] = []
    monkeypatch.setattr(counter, "_observe_frames", lambda body, events: looked.append(events))
    counter.observe_frames(b"".join(b"data: " + e + b"\n\n" for e in text[:5]), 5)
    counter.observe_frames(b"".join(b"data: " + e + b"\n\n" for e in [*text[5:], usage]), 4)
    assert counter.missing() is None
    assert looked == []


def _content_event(n: int) -> bytes:
    return orjson.dumps({"id": "c", "object": "chat.completion.chunk", "created": n,
                         "model": "m", "choices": [{"index": 0, "delta": {"content": "w"},
                                                    "finish_reason": None}]})


def test_a_decoded_event_after_kept_reads_is_taken_after_them() -> None:
    # The translator hands a tool-call chunk it decoded anyway to observe_chunk: the
    # reads kept before it come first, so the made-up usage chunk copies the last one.
    counter = UsageCounter(REQUEST)
    counter.observe_frames(b"".join(b"data: " + _content_event(n) + b"\n\n" for n in (1, 2)), 2)
    last = _content_event(3)
    counter.observe_chunk(orjson.loads(last), last)
    made = counter.missing()
    assert made is not None
    assert made["created"] == 3 and made["usage"]["completion_tokens"] == 3


def test_kept_reads_are_bounded_and_counted_as_they_go() -> None:
    # A long answer is not kept whole: past the bound, what is kept is counted.
    counter = UsageCounter(REQUEST)
    read = b"".join(b"data: " + _content_event(n) + b"\n\n" for n in range(64))
    reads = 2 * _KEPT_BYTES // len(read) + 2
    for _ in range(reads):
        counter.observe_frames(read, 64)
        assert counter._read_bytes <= _KEPT_BYTES + len(read)
    assert counter._read_bytes < 2 * _KEPT_BYTES
    made = counter.missing()
    assert made is not None and made["usage"]["completion_tokens"] == 64 * reads
