"""ResponseBuilder: chat chunks -> Responses events, checked against the openai SDK's own
stream accumulator, and property-tested for order and text fidelity."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from openai import omit
from openai._models import construct_type
from openai.lib.streaming.responses._responses import ResponseStreamState
from openai.types.responses import ResponseStreamEvent

from proxy.api.responses.events import ResponseBuilder
from proxy.types import Chunk

ECHO: dict[str, Any] = {"model": "m", "tools": [], "tool_choice": "auto",
                        "parallel_tool_calls": True, "temperature": None, "top_p": None}


def _chunk(delta: dict[str, Any] | None = None, finish: str | None = None) -> Chunk:
    return {"object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": delta or {}, "finish_reason": finish}]}


def _run(chunks: list[Chunk]) -> tuple[ResponseBuilder, list[dict[str, Any]]]:
    builder = ResponseBuilder(ECHO)
    events = builder.start()
    for chunk in chunks:
        events += builder.feed(chunk)
    events += builder.finish()
    return builder, events


def _accumulate(events: list[dict[str, Any]]) -> Any:
    """What the SDK's `responses.stream(...)` builds from these events."""
    state: ResponseStreamState[Any] = ResponseStreamState(input_tools=omit, text_format=omit)
    for event in events:
        state.handle_event(construct_type(type_=ResponseStreamEvent, value=event))
    return state._completed_response


def _assert_well_ordered(events: list[dict[str, Any]]) -> None:
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    assert [e["type"] for e in events[:2]] == ["response.created", "response.in_progress"]
    assert events[-1]["type"] in ("response.completed", "response.incomplete")
    assert not any(e["type"] in ("response.completed", "response.incomplete")
                   for e in events[:-1])
    state: dict[int, str] = {}
    for event in events[2:-1]:
        index = event["output_index"]
        if event["type"] == "response.output_item.added":
            assert index not in state and index == len(state)
            state[index] = "open"
        elif event["type"] == "response.output_item.done":
            assert state.get(index) == "open"
            state[index] = "done"
        else:
            assert state.get(index) == "open", event
    assert all(v == "done" for v in state.values())


def test_text_answer_events() -> None:
    builder, events = _run([_chunk({"role": "assistant", "content": "Hel"}),
                            _chunk({"content": "lo"}), _chunk(finish="stop"),
                            {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 2,
                                                      "total_tokens": 5}}])
    assert [e["type"] for e in events] == [
        "response.created", "response.in_progress", "response.output_item.added",
        "response.content_part.added", "response.output_text.delta",
        "response.output_text.delta", "response.output_text.done",
        "response.content_part.done", "response.output_item.done", "response.completed"]
    done = events[-1]["response"]
    assert done["status"] == "completed"
    assert done["usage"]["total_tokens"] == 5 and done["usage"]["input_tokens"] == 3
    item = done["output"][0]
    assert item["id"].startswith("msg_") and item["status"] == "completed"
    assert item["content"] == [{"type": "output_text", "text": "Hello", "annotations": [],
                                "logprobs": []}]
    assert _accumulate(events).output_text == "Hello"
    assert builder.assistant_message() == {"role": "assistant", "content": "Hello"}


def test_calls_reasoning_and_text_in_order() -> None:
    call = {"index": 0, "id": "call_1", "type": "function",
            "function": {"name": "f", "arguments": '{"a":'}}
    builder, events = _run([
        _chunk({"reasoning_content": "think"}), _chunk({"content": "Let me."}),
        _chunk({"tool_calls": [call]}),
        _chunk({"tool_calls": [{"index": 0, "function": {"arguments": "1}"}}]}),
        _chunk(finish="tool_calls")])
    _assert_well_ordered(events)
    output = events[-1]["response"]["output"]
    assert [i["type"] for i in output] == ["reasoning", "message", "function_call"]
    assert output[0]["summary"] == [{"type": "summary_text", "text": "think"}]
    assert (output[2]["call_id"], output[2]["name"], output[2]["arguments"]) == \
        ("call_1", "f", '{"a":1}')
    final = _accumulate(events)
    assert [i.type for i in final.output] == ["reasoning", "message", "function_call"]
    assert builder.assistant_message() == {"role": "assistant", "content": "Let me.",
                                           "tool_calls": [{"id": "call_1", "type": "function",
                                                           "function": {"name": "f",
                                                                        "arguments": '{"a":1}'}}]}


def test_length_is_incomplete() -> None:
    _, events = _run([_chunk({"content": "cut"}), _chunk(finish="length")])
    final = events[-1]
    assert final["type"] == "response.incomplete"
    assert final["response"]["incomplete_details"] == {"reason": "max_output_tokens"}


def test_failure_closes_open_items_then_fails() -> None:
    builder = ResponseBuilder(ECHO)
    events = builder.start() + builder.feed(_chunk({"content": "half"}))
    events += builder.fail("upstream went away")
    assert [e["type"] for e in events[-4:]] == [
        "response.output_text.done", "response.content_part.done",
        "response.output_item.done", "response.failed"]
    assert events[-1]["response"]["error"] == {"code": "server_error",
                                               "message": "upstream went away"}


# --- properties ---------------------------------------------------------------------

_text = st.text(min_size=1, max_size=8)
_piece = st.one_of(
    st.tuples(st.just("content"), _text),
    st.tuples(st.just("reasoning_content"), _text),
    st.tuples(st.just("call"), st.lists(st.text(min_size=1, max_size=6), min_size=1,
                                        max_size=3)))


def _chunks_for(pieces: list[tuple[str, Any]]) -> list[Chunk]:
    chunks: list[Chunk] = []
    for n, (kind, value) in enumerate(pieces):
        if kind != "call":
            chunks.append(_chunk({kind: value}))
            continue
        first, *rest = value
        chunks.append(_chunk({"tool_calls": [{"index": n, "id": f"call_{n}", "type": "function",
                                              "function": {"name": f"f{n}",
                                                           "arguments": first}}]}))
        chunks += [_chunk({"tool_calls": [{"index": n, "function": {"arguments": part}}]})
                   for part in rest]
    return chunks


@settings(max_examples=150, deadline=None)
@given(st.lists(_piece, max_size=10), st.sampled_from(["stop", "length", "tool_calls"]))
def test_events_are_well_ordered_and_text_is_kept(pieces: list[tuple[str, Any]],
                                                  finish: str) -> None:
    _, events = _run([*_chunks_for(pieces), _chunk(finish=finish)])
    _assert_well_ordered(events)
    content = "".join(v for k, v in pieces if k == "content")
    deltas = "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")
    assert deltas == content
    final = events[-1]["response"]
    text = "".join(p["text"] for i in final["output"] if i["type"] == "message"
                   for p in i["content"])
    assert text == content
    calls = [i for i in final["output"] if i["type"] == "function_call"]
    assert [c["arguments"] for c in calls] == ["".join(v) for k, v in pieces if k == "call"]
    if finish != "length":
        accumulated = _accumulate(events)
        assert accumulated.output_text == content
        assert [getattr(i, "arguments", None) for i in accumulated.output
                if i.type == "function_call"] == [c["arguments"] for c in calls]


_DELTAS = st.sampled_from([
    {"content": "Hel"}, {"content": ""}, {"content": None}, {"role": "assistant", "content": "x"},
    {"reasoning_content": "hm"}, {"content": "a", "reasoning_content": "b"}, {},
    {"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                     "function": {"name": "f", "arguments": "{\"a\":"}}]},
    {"tool_calls": [{"index": 0, "function": {"arguments": "1}"}}]}])


@given(st.lists(st.tuples(_DELTAS, st.sampled_from([None, "stop"]), st.sampled_from([0, 1]),
                          st.booleans()), max_size=10))
def test_feed_all_is_feed_chunk_by_chunk(parts: list[tuple[dict[str, Any], str | None, int,
                                                           bool]]) -> None:
    chunks: list[Chunk] = []
    for delta, finish, index, usage in parts:
        chunk = _chunk(delta, finish)
        chunk["choices"][0]["index"] = index
        if usage:
            chunk["usage"] = {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3}
        chunks.append(chunk)

    def ids() -> Any:
        counter = iter(range(1000))
        return lambda prefix: f"{prefix}_{next(counter)}"

    one, batch = ResponseBuilder(ECHO, response_id="resp_1", id_factory=ids()), \
        ResponseBuilder(ECHO, response_id="resp_1", id_factory=ids())
    # What a client sees must not change: feed_all's events are feed's, chunk by chunk,
    # up to how a message's text is cut into delta events (clients concatenate them).
    # Sequence numbers differ with the count and are checked to run on without a gap.
    by_one = [e for c in chunks for e in one.feed(c)]
    batched = batch.feed_all(chunks)
    assert _text_joined(batched) == _text_joined(by_one)
    closing = batch.finish()
    numbers = [e["sequence_number"] for e in [*batched, *closing]]
    assert numbers == list(range(numbers[0], numbers[0] + len(numbers)))
    assert _text_joined(_untimed(closing)) == _text_joined(_untimed(one.finish()))


def _text_joined(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Events without sequence numbers, neighbouring text deltas of one item made one."""
    out: list[dict[str, Any]] = []
    for event in events:
        event = {k: v for k, v in event.items() if k != "sequence_number"}
        last = out[-1] if out else {}
        if event["type"] == last.get("type") == "response.output_text.delta" \
                and event["item_id"] == last["item_id"]:
            out[-1] = {**last, "delta": last["delta"] + event["delta"]}
        else:
            out.append(event)
    return out


def _untimed(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    # the closing snapshot carries the clock's second: not what is compared here
    return [{**e, "response": {k: v for k, v in e["response"].items()
                               if k not in ("created_at", "completed_at")}}
            if "response" in e else e for e in events]


def test_a_read_of_text_chunks_is_one_delta() -> None:
    builder = ResponseBuilder(ECHO, response_id="resp_1")
    events = builder.feed_all([_chunk({"content": "Hel"}), _chunk({"content": "lo"}),
                               _chunk({"content": "!"})])
    deltas = [e["delta"] for e in events if e["type"] == "response.output_text.delta"]
    assert deltas == ["Hello!"]
