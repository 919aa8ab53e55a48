from __future__ import annotations

import itertools
from typing import Any

import orjson
from hypothesis import given
from hypothesis import strategies as st

from proxy.backends.sse_frames import UsageFiller, completion_to_sse, estimate_tokens
from proxy.sse import SseDecoder

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


def _fill(data: bytes, cuts: list[int], prompt_chars: int = 40) -> bytes:
    filler = UsageFiller(prompt_chars)
    bounds = sorted({0, len(data), *(c % (len(data) + 1) for c in cuts)})
    out = b"".join(filler.feed(data[a:b]) for a, b in itertools.pairwise(bounds))
    return out + filler.end()


@given(st.lists(st.integers(min_value=0, max_value=10_000), max_size=8))
def test_usage_added_once_before_done_however_the_bytes_are_cut(cuts: list[int]) -> None:
    chunks = _events(_fill(_stream(with_usage=False), cuts))
    usage = [c["usage"] for c in chunks if "usage" in c]
    assert usage == [{"prompt_tokens": estimate_tokens(40), "completion_tokens": 3,
                      "total_tokens": estimate_tokens(40) + 3}]
    assert chunks[-1]["choices"] == []


def test_a_stream_with_usage_is_left_as_it_was() -> None:
    chunks = _events(_fill(_stream(with_usage=True), []))
    assert [c["usage"] for c in chunks if "usage" in c] == [
        {"prompt_tokens": 1, "completion_tokens": 3, "total_tokens": 4}]


def test_a_stream_cut_before_done_gets_usage_but_no_made_up_done() -> None:
    data = _stream(with_usage=False)
    cut = data[: data.index(b": ping")]
    out = _fill(cut, [])
    assert b"[DONE]" not in out and b'"usage"' in out
