from __future__ import annotations

import itertools
import json
from typing import Any

from factories import text_chunk as _chunk
from hypothesis import given, settings
from hypothesis import strategies as st
from support.tools import WEATHER_PARAMETERS

from proxy.transforms.response.textcalls import TextCallRecovery
from proxy.types import Chunk, Observation

OFFERED = {"get_weather": WEATHER_PARAMETERS}
CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>'


def _stage(preferred: str | None = None) -> TextCallRecovery:
    ids = (f"call_{i}" for i in itertools.count())
    return TextCallRecovery(OFFERED, preferred, "qwen", lambda: next(ids))


def _run(
    pieces: list[str], finish: str | None = "stop"
) -> tuple[str, list[dict[str, Any]], list[Chunk], TextCallRecovery]:
    stage = _stage()
    out: list[Chunk] = [c for piece in pieces for c in stage.feed(_chunk(piece))]
    if finish is not None:
        out += stage.feed(_chunk(finish=finish))
    out += stage.flush()
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in out)
    calls = [tc for c in out for tc in c["choices"][0]["delta"].get("tool_calls") or []]
    return text, calls, out, stage


def test_call_becomes_a_whole_tool_call_delta() -> None:
    text, calls, out, stage = _run(["Checking.\n", CALL])
    assert text == "Checking.\n"
    assert calls == [
        {
            "index": 100,
            "id": "call_0",
            "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city":"Oslo"}'},
        }
    ]
    assert out[-1]["choices"][0]["finish_reason"] == "stop"
    assert stage.observations == [
        Observation("qwen", "text_calls_recovered", {"format": "hermes", "count": 1})
    ]


def test_prose_goes_out_before_the_stream_ends() -> None:
    stage = _stage()
    out = stage.feed(_chunk("Hello there, "))
    assert out[0]["choices"][0]["delta"]["content"] == "Hello there, "
    assert stage.feed(_chunk("see <tool")) == [
        {
            **_chunk("see "),
            "choices": [{"index": 0, "delta": {"content": "see "}, "finish_reason": None}],
        }
    ]


def test_unknown_tool_stays_text_and_no_observation() -> None:
    raw = '<tool_call>\n{"name": "book_flight", "arguments": {}}\n</tool_call>'
    text, calls, _, stage = _run([raw[:10], raw[10:]])
    assert calls == [] and text == raw and stage.observations == []


def test_truncated_call_is_released_as_text() -> None:
    raw = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Os'
    text, calls, _, _ = _run([raw], finish="length")
    assert calls == [] and text == raw


def test_reasoning_left_in_content_is_never_searched() -> None:
    raw = "<think>maybe " + CALL + "</think>No call needed."
    text, calls, _, _ = _run([raw])
    assert calls == [] and text == raw


def test_role_chunk_and_other_fields_pass_through() -> None:
    stage = _stage()
    first = _chunk("", role="assistant")
    assert stage.feed(first) == [first]
    native = _chunk(
        tool_calls=[{"index": 0, "id": "n", "function": {"name": "x", "arguments": "{}"}}]
    )
    assert stage.feed(native) == [native]


def test_without_finish_chunk_flush_emits_held_calls() -> None:
    text, calls, _, _ = _run([CALL], finish=None)
    assert text == "" and [c["function"]["name"] for c in calls] == ["get_weather"]


def test_two_calls_get_distinct_ids_and_indexes() -> None:
    _, calls, _, stage = _run([CALL + "\n" + CALL.replace("Oslo", "Rome")])
    assert [(c["index"], c["id"]) for c in calls] == [(100, "call_0"), (101, "call_1")]
    assert [json.loads(c["function"]["arguments"]) for c in calls] == [
        {"city": "Oslo"},
        {"city": "Rome"},
    ]
    assert stage.observations[0].detail["count"] == 2


def test_finish_chunk_content_is_processed_before_finish() -> None:
    stage = _stage()
    out = stage.feed(_chunk(CALL[:20]))
    out += stage.feed(_chunk(CALL[20:], finish="stop"))
    kinds = [
        ("tool_calls" in c["choices"][0]["delta"], c["choices"][0]["finish_reason"]) for c in out
    ]
    assert kinds == [(True, None), (False, "stop")]


SAMPLES = [
    "Checking.\n" + CALL + "\nDone.",
    "Plain prose with a { brace and [brackets] and <b>tags</b>.",
    'Intro\n\n```json\n{"name": "get_weather", "arguments": {"city": "Rome"}}\n```',
    CALL + CALL,
]


@settings(max_examples=120, deadline=None)
@given(st.sampled_from(SAMPLES), st.lists(st.integers(0, 200), max_size=6))
def test_split_invariance(text: str, cuts: list[int]) -> None:
    bounds = sorted({0, len(text), *(c for c in cuts if c <= len(text))})
    pieces = [text[a:b] for a, b in itertools.pairwise(bounds)]
    whole = _run([text])
    split = _run(pieces)
    assert split[0] == whole[0]
    assert split[1] == whole[1]
