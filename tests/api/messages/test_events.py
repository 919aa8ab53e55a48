"""MessageBuilder: chat chunks -> Messages events, checked against the anthropic SDK's own
stream accumulator, and property-tested: any split of the answer into chunks and reads
makes the same message, and every delta belongs to a started, unstopped block."""

from __future__ import annotations

import itertools
from typing import Any

import orjson
from anthropic._models import construct_type
from anthropic.lib.streaming._messages import accumulate_event
from anthropic.types import RawMessageStreamEvent
from factories import chunk as _chunk
from factories import ollama_event, ollama_events
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.api.messages.events import MessageBuilder, frames, tool_use_id
from proxy.types import Chunk


def _call(index: int, call_id: str | None, name: str | None, arguments: str) -> Chunk:
    function: dict[str, Any] = {"arguments": arguments}
    if name:
        function["name"] = name
    call: dict[str, Any] = {"index": index, "function": function}
    if call_id:
        call["id"], call["type"] = call_id, "function"
    return _chunk({"tool_calls": [call]})


def _run(batches: list[list[Chunk]], thinking: bool = False,
         stops: tuple[str, ...] = ()) -> tuple[MessageBuilder, list[dict[str, Any]]]:
    builder = MessageBuilder("m", thinking=thinking, input_tokens=7, stop_sequences=stops)
    events = builder.start()
    for batch in batches:
        events += builder.feed_all(batch)
    events += builder.finish()
    return builder, events


def _accumulate(events: list[dict[str, Any]]) -> Any:
    """What the SDK's `messages.stream(...)` builds from these events (it raises on a
    delta for a block it never saw)."""
    snapshot = None
    bufs: dict[int, bytes] = {}
    for event in events:
        if event["type"] in ("message_delta", "message_stop") and snapshot is None:
            raise AssertionError("no message_start")
        snapshot = accumulate_event(event=construct_type(type_=RawMessageStreamEvent,
                                                         value=event),
                                    current_snapshot=snapshot, json_bufs=bufs)
    return snapshot


def _assert_framed(events: list[dict[str, Any]]) -> None:
    assert events[0]["type"] == "message_start"
    assert [e["type"] for e in events[-2:]] == ["message_delta", "message_stop"]
    open_index: int | None = None
    seen = 0
    for event in events[1:-2]:
        if event["type"] == "content_block_start":
            assert open_index is None and event["index"] == seen
            open_index, seen = event["index"], seen + 1
        elif event["type"] == "content_block_delta":
            assert event["index"] == open_index
        else:
            assert event["type"] == "content_block_stop" and event["index"] == open_index
            open_index = None
    assert open_index is None


def test_text_then_call_as_the_sdk_builds_it() -> None:
    builder, events = _run([
        [_chunk({"content": "Let me "}), _chunk({"content": "see."})],
        [_call(0, "call_1", "read", '{"path": '), _call(0, None, None, '"a.txt"}')],
        [_chunk(finish="tool_calls")],
        [{"object": "chat.completion.chunk", "choices": [],
          "usage": {"prompt_tokens": 30, "completion_tokens": 9}}]])
    _assert_framed(events)
    message = _accumulate(events)
    assert [b.type for b in message.content] == ["text", "tool_use"]
    assert message.content[0].text == "Let me see."
    assert (message.content[1].id, message.content[1].input) == ("toolu_call_1",
                                                                 {"path": "a.txt"})
    assert message.stop_reason == "tool_use"
    assert (message.usage.input_tokens, message.usage.output_tokens) == (30, 9)
    assert builder.message["content"][1]["input"] == {"path": "a.txt"}
    # one text delta per read: the two text chunks of the first read arrived together
    assert sum(e["type"] == "content_block_delta" and e["delta"]["type"] == "text_delta"
               for e in events) == 1


def test_thinking_shown_only_when_asked_and_signed() -> None:
    batches = [[_chunk({"reasoning_content": "hmm"})], [_chunk({"content": "42"})],
               [_chunk(finish="stop")]]
    _, hidden = _run(batches)
    assert [b.type for b in _accumulate(hidden).content] == ["text"]
    _, shown = _run(batches, thinking=True)
    _assert_framed(shown)
    message = _accumulate(shown)
    assert [b.type for b in message.content] == ["thinking", "text"]
    assert message.content[0].thinking == "hmm" and message.content[0].signature
    kinds = [e.get("delta", {}).get("type") or e["type"] for e in shown]
    assert kinds.index("signature_delta") + 1 == kinds.index("content_block_stop")


def test_stop_reasons() -> None:
    assert _run([[_chunk({"content": "x"}, finish="length")]])[0].message["stop_reason"] == \
        "max_tokens"
    assert _run([[_chunk({"content": "x"}, finish="stop")]])[0].message["stop_reason"] == \
        "end_turn"
    # every call dropped by the checks: the finish says tool_calls, nothing is a call
    assert _run([[_chunk({"content": "x"}, finish="tool_calls")]])[0].message[
        "stop_reason"] == "end_turn"
    stopped = _run([[_chunk({"content": "x"}, finish="stop", stop_reason="END")]],
                   stops=("END",))[0].message
    assert (stopped["stop_reason"], stopped["stop_sequence"]) == ("stop_sequence", "END")


def test_failure_is_an_error_event_without_message_stop() -> None:
    builder = MessageBuilder("m", thinking=False, input_tokens=1)
    events = builder.start() + builder.feed(_chunk({"content": "x"}))
    events += builder.fail("api_error", "upstream went away")
    assert events[-1] == {"type": "error",
                          "error": {"type": "api_error", "message": "upstream went away"}}
    assert frames(events[-1:]).startswith(b"event: error\ndata: ")


def test_frames_name_each_event_by_its_type() -> None:
    _, events = _run([[_chunk({"content": "hi"}, finish="stop")]])
    body = frames(events)
    assert b"[DONE]" not in body
    for frame in body.split(b"\n\n")[:-1]:
        name, data = frame.split(b"\n")
        assert name.removeprefix(b"event: ") == orjson.loads(data.removeprefix(b"data: "))[
            "type"].encode()


def test_tool_use_ids() -> None:
    assert tool_use_id("call_x", lambda p: "new") == "toolu_call_x"
    assert tool_use_id("toolu_abc", lambda p: "new") == "toolu_abc"
    assert tool_use_id(None, lambda p: p + "_new") == "toolu_new"


def _pieces(text: str, cuts: list[int]) -> list[str]:
    bounds = sorted({c % (len(text) + 1) for c in cuts} | {0, len(text)})
    return [text[a:b] for a, b in itertools.pairwise(bounds) if b > a]


@settings(max_examples=60, deadline=None)
@given(reasoning=st.text(min_size=0, max_size=30), text=st.text(min_size=0, max_size=60),
       args=st.dictionaries(st.text(max_size=5), st.integers(-1000, 1000), max_size=3),
       cuts=st.lists(st.integers(min_value=0, max_value=100), max_size=8),
       reads=st.lists(st.integers(min_value=1, max_value=4), max_size=20))
def test_any_split_makes_the_same_message(reasoning: str, text: str, args: dict[str, int],
                                          cuts: list[int], reads: list[int]) -> None:
    encoded = orjson.dumps(args).decode()
    chunks = [_chunk({"reasoning_content": p}) for p in _pieces(reasoning, cuts)]
    chunks += [_chunk({"content": p}) for p in _pieces(text, cuts)]
    pieces = _pieces(encoded, cuts)
    chunks += [_call(0, "call_a", "f", pieces[0])] + [_call(0, None, None, p)
                                                     for p in pieces[1:]]
    chunks.append(_chunk(finish="tool_calls"))
    batches, at = [], 0
    for size in reads or [len(chunks)]:
        batches.append(chunks[at:at + size])
        at += size
    if at < len(chunks):
        batches.append(chunks[at:])
    _, events = _run(batches, thinking=True)
    _assert_framed(events)
    message = _accumulate(events)
    expected = ([("thinking", reasoning)] if reasoning else []) + \
        ([("text", text)] if text else []) + [("tool_use", args)]
    got = [(b.type, getattr(b, "thinking", None) or getattr(b, "text", None)
            if b.type != "tool_use" else b.input) for b in message.content]
    assert got == expected


_EVENTS = ollama_events()


@settings(max_examples=150, deadline=None)
@given(st.lists(_EVENTS, min_size=1, max_size=12))
def test_a_read_taken_for_its_texts_is_what_decoding_it_gives(events: list[bytes]) -> None:
    from proxy.flow.translate import as_chunks
    from proxy.sse import SseFrames

    read = SseFrames(b"".join(events))
    fast = MessageBuilder("m", thinking=True, input_tokens=1, id_factory=lambda p: p)
    slow = MessageBuilder("m", thinking=True, input_tokens=1, id_factory=lambda p: p)
    fed = fast.start() + fast.feed_batch([read]) + fast.finish()
    slow.feed_all(as_chunks([read]))
    slow.finish()
    _assert_framed(fed)
    assert fast.message == slow.message
    built = _accumulate(fed)  # the SDK's accumulator takes the stream
    assert [(b.type, getattr(b, "text", None)) for b in built.content] == \
        [(b["type"], b.get("text")) for b in slow.message["content"]]


def test_plain_reads_are_taken_without_decoding() -> None:
    from proxy.api.plain_events import plain_head
    from proxy.sse import SseFrames

    read = SseFrames(ollama_event({"content": "a<b>\u2028"}) + ollama_event({"content": ""}))
    assert plain_head(read) == (len(read), ["a<b>\u2028", ""])
    assert plain_head(SseFrames(ollama_event({}, finish="stop"))) == (0, [])
    closing = ollama_event({}, finish="stop") + ollama_event({}, usage=True)
    assert plain_head(SseFrames(read + closing)) == (len(read), ["a<b>\u2028", ""])
    assert plain_head(SseFrames(ollama_event({"role": "assistant", "content": "x"}) + read)
                      ) == (0, [])
    # a second later Ollama's `created` changes: that read goes the slow way
    later = ollama_event({"content": "z"}).replace(b"1755000000", b"1755000001")
    assert plain_head(SseFrames(read + later)) == (0, [])
    # a read opening with another event (a finish) is not taken: that event would be lost
    one = ollama_event({"content": "x"})  # one literal: no second event to compare with
    assert plain_head(SseFrames(ollama_event({}, finish="stop") + one)) == (0, [])


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(_EVENTS, st.sampled_from(["frames", "bytes", "dict"]),
                          st.booleans()), min_size=1, max_size=12))
def test_a_batch_makes_the_same_events_however_the_flow_hands_its_chunks_over(
        spec: list[tuple[bytes, str, bool]]) -> None:
    # The fast paths hand whole reads (SseFrames), single events' bytes or dicts, in any
    # mix; `--no-fast-paths` hands dicts only. The events must be the same.
    from proxy.flow.translate import ChunkOut, as_chunks
    from proxy.sse import SseFrames

    batch: list[ChunkOut] = []
    for event, form, joins in spec:
        if form == "frames":
            if joins and batch and isinstance(batch[-1], SseFrames):
                batch[-1] = SseFrames(batch[-1] + event)
            else:
                batch.append(SseFrames(event))
        else:
            data = event[6:-2]
            batch.append(data if form == "bytes" else orjson.loads(data))
    handed = MessageBuilder("m", thinking=True, input_tokens=1, id_factory=lambda p: p)
    decoded = MessageBuilder("m", thinking=True, input_tokens=1, id_factory=lambda p: p)
    assert handed.feed_batch(batch) == decoded.feed_all(as_chunks(batch))
    assert handed.finish() == decoded.finish()
