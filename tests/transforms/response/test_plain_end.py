"""`passes_plain_end`: the chunk that ends an answer, vouched for instead of fed.

Whatever the stages were fed before (calls written as text, held partial markers,
open reasoning, native calls), a pipeline that says yes must be left exactly as
`feed(end)` and `flush()` leave it, with the end unchanged and nothing flushed;
one that says no must be untouched, so the full path can still take the end.
"""

from __future__ import annotations

from typing import Any

from factories import chunk, response_pipeline
from hypothesis import given, settings
from hypothesis import strategies as st
from support.tools import WEATHER

from proxy.transforms.response import ResponsePipeline
from proxy.types import Plan, Profile, ReasoningPolicy

TOOLS = [WEATHER]
PIECES = ["Sunny", " in Oslo", "\n", "<tool_call>", '{"name": "get_weather", ',
          '"arguments": {"city": "Oslo"}}', "</tool_call>", "<think>", "hm", "</think>",
          "<", "```json\n", "```", "{", "[TOOL_CALLS]", "get_weather(city='Oslo')"]
NATIVE = {"tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": {
    "name": "get_weather", "arguments": '{"city": "Oslo"}'}}]}


def _pipeline(reasoning: ReasoningPolicy, plan: Plan) -> ResponsePipeline:
    return response_pipeline(Profile(model="qwen3:8b", reasoning=reasoning), TOOLS, plan)


def _state(pipeline: ResponsePipeline) -> tuple[Any, ...]:
    return pipeline.call_counts(), pipeline.observations


@settings(max_examples=300, deadline=None)
@given(fed=st.lists(st.one_of(st.sampled_from(PIECES), st.just(None)), max_size=8),
       plain=st.lists(st.sampled_from(["Sunny", " today", "."]), max_size=3),
       reasoning=st.sampled_from(["pass", "move", "strip"]),
       plan=st.sampled_from([Plan(), Plan(tools="emulate")]),
       finish=st.sampled_from(["stop", "length", "tool_calls", "content_filter"]),
       extra=st.sampled_from([{}, {"logprobs": None}]))
def test_yes_leaves_what_feed_and_flush_leave_and_no_touches_nothing(
        fed: list[str | None], plain: list[str], reasoning: ReasoningPolicy, plan: Plan,
        finish: str, extra: dict[str, Any]) -> None:
    vouched, full = _pipeline(reasoning, plan), _pipeline(reasoning, plan)
    for piece in fed:  # None: a native call
        part = chunk(NATIVE if piece is None else {"content": piece})
        assert vouched.feed(part) == full.feed(part)
    for text in plain:
        part = chunk({"content": text})
        if vouched.passes_plain(part, text):
            assert full.feed(part) == [part]
        else:
            assert vouched.feed(part) == full.feed(part)
    end = chunk({}, finish, **extra)
    fed_out = full.feed(end) + full.flush()
    if vouched.passes_plain_end(finish):
        assert fed_out == [end]
        assert vouched.flush() == []
    else:
        assert vouched.feed(end) + vouched.flush() == fed_out
    assert _state(vouched) == _state(full)


def test_a_plain_answer_s_end_is_vouched_for_and_a_call_s_is_not() -> None:
    pipeline = _pipeline("move", Plan())
    assert pipeline.passes_plain(chunk({"content": "Sunny."}), "Sunny.")
    assert pipeline.passes_plain_end("stop")
    assert pipeline.flush() == []

    with_call = _pipeline("move", Plan())
    with_call.feed(chunk(NATIVE))
    assert not with_call.passes_plain_end("tool_calls")
    assert not with_call.passes_plain_end("stop")  # "stop" would become "tool_calls"

    held = _pipeline("move", Plan())
    held.feed(chunk({"content": "Sunny <"}))  # a partial marker or tag, held
    assert not held.passes_plain_end("stop")
