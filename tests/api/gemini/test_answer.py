"""AnswerBuilder: chat chunks -> GenerateContentResponse chunks, checked through the
google-genai SDK's own response type, and property-tested: any batching of a chat
answer streams to the same answer as the whole; every stream ends with the one chunk
that carries finishReason; no chunk is empty of both parts and finish; a failure
after the start ends with an error chunk, never a finish."""

from __future__ import annotations

from itertools import pairwise
from typing import Any

import orjson
from factories import chunk as _chunk
from factories import ollama_event, ollama_events
from google.genai import types
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.api.gemini.answer import AnswerBuilder
from proxy.types import Chunk

USAGE = {"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 9,
                                  "completion_tokens_details": {"reasoning_tokens": 4}}}


def _builder(thoughts: bool = True) -> AnswerBuilder:
    return AnswerBuilder("qwen3:8b", thoughts=thoughts, prompt_tokens=3, response_id="r1")


def test_whole_answer_through_the_sdk_type() -> None:
    builder = _builder()
    call = {"index": 0, "id": "call_1", "type": "function",
            "function": {"name": "read_file", "arguments": '{"path": "a"}'}}
    builder.feed_all([_chunk({"reasoning_content": "hmm"}), _chunk({"content": "Let "}),
                      _chunk({"content": "me."}), _chunk({"tool_calls": [call]}),
                      _chunk(finish="tool_calls"), USAGE])
    builder.finish()
    whole = builder.whole()
    answer = types.GenerateContentResponse.model_validate(whole)
    assert answer.text == "Let me."
    assert [(c.id, c.name, c.args) for c in answer.function_calls or []] == [
        ("call_1", "read_file", {"path": "a"})]
    candidate = whole["candidates"][0]
    assert candidate["finishReason"] == "STOP"  # also after calls, as Gemini answers
    assert candidate["content"]["parts"][0] == {"text": "hmm", "thought": True}
    assert whole["usageMetadata"] == {"promptTokenCount": 7, "candidatesTokenCount": 5,
                                      "thoughtsTokenCount": 4, "totalTokenCount": 16}
    assert (whole["modelVersion"], whole["responseId"]) == ("qwen3:8b", "r1")


def test_reasoning_hidden_unless_asked_and_length_is_max_tokens() -> None:
    builder = _builder(thoughts=False)
    assert builder.feed_all([_chunk({"reasoning_content": "hmm"})]) == []
    builder.feed_all([_chunk({"content": "cut"}), _chunk(finish="length")])
    last = builder.finish()
    assert last["candidates"][0]["finishReason"] == "MAX_TOKENS"
    assert builder.whole()["candidates"][0]["content"]["parts"] == [{"text": "cut"}]


def test_a_call_split_over_batches_leaves_once_whole() -> None:
    builder = _builder()
    first = {"index": 0, "id": "c", "type": "function",
             "function": {"name": "f", "arguments": '{"a":'}}
    assert builder.feed_all([_chunk({"tool_calls": [first]})]) == []
    out = builder.feed_all([_chunk({"tool_calls": [{"index": 0,
                                                     "function": {"arguments": "1}"}}]})])
    assert out[0]["candidates"][0]["content"]["parts"] == [
        {"functionCall": {"id": "c", "name": "f", "args": {"a": 1}}}]


# --- properties ---------------------------------------------------------------

_PIECE = st.one_of(
    st.tuples(st.just("text"), st.text(min_size=1, max_size=6)),
    st.tuples(st.just("reasoning"), st.text(min_size=1, max_size=6)),
    st.tuples(st.just("call"), st.dictionaries(st.sampled_from("xyz"), st.integers(-99, 99),
                                               max_size=2)))


def _answer_chunks(pieces: list[tuple[str, Any]], finish: str) -> list[Chunk]:
    chunks: list[Chunk] = []
    index = 0
    for kind, value in pieces:
        if kind == "call":
            text = orjson.dumps(value).decode()
            cut = len(text) // 2  # a call in two deltas, as OpenAI streams arguments
            chunks.append(_chunk({"tool_calls": [{"index": index, "id": f"c{index}",
                                                  "type": "function", "function": {
                                                      "name": "f", "arguments": text[:cut]}}]}))
            chunks.append(_chunk({"tool_calls": [{"index": index,
                                                  "function": {"arguments": text[cut:]}}]}))
            index += 1
        elif kind == "text":
            chunks.append(_chunk({"content": value}))
        else:
            chunks.append(_chunk({"reasoning_content": value}))
    return [*chunks, _chunk(finish=finish), USAGE]


def _batches(chunks: list[Chunk], cuts: list[int]) -> list[list[Chunk]]:
    edges = sorted({0, len(chunks), *(c % (len(chunks) + 1) for c in cuts)})
    return [chunks[a:b] for a, b in pairwise(edges)]


def _parts_of(responses: list[dict[str, Any]], kind: str) -> Any:
    parts = [p for r in responses for p in r["candidates"][0]["content"]["parts"]]
    if kind == "call":
        return [p["functionCall"] for p in parts if "functionCall" in p]
    thought = kind == "reasoning"
    return "".join(p["text"] for p in parts
                   if "text" in p and bool(p.get("thought")) == thought)


@settings(max_examples=200, deadline=None)
@given(st.lists(_PIECE, max_size=8), st.lists(st.integers(0, 40), max_size=6),
       st.sampled_from(["stop", "tool_calls", "length"]))
def test_any_batching_streams_the_whole_answer(pieces: list[tuple[str, Any]],
                                               cuts: list[int], finish: str) -> None:
    chunks = _answer_chunks(pieces, finish)
    whole_builder = _builder()
    whole_builder.feed_all(chunks)
    whole_builder.finish()
    whole = whole_builder.whole()
    builder = _builder()
    stream: list[dict[str, Any]] = []
    for batch in _batches(chunks, cuts):
        stream.extend(builder.feed_all(batch))
    stream.append(builder.finish())
    finishes = [r["candidates"][0].get("finishReason") for r in stream]
    assert finishes[-1] is not None and not any(finishes[:-1])
    for response in stream:
        candidate = response["candidates"][0]
        assert candidate["content"]["parts"] or candidate.get("finishReason")
        types.GenerateContentResponse.model_validate(response)
    for kind in ("text", "reasoning", "call"):
        assert _parts_of(stream, kind) == _parts_of([whole], kind)
    assert _parts_of(stream, "text") == "".join(v for k, v in pieces if k == "text")
    assert [c["args"] for c in _parts_of(stream, "call")] == \
        [v for k, v in pieces if k == "call"]


@settings(max_examples=100, deadline=None)
@given(st.lists(_PIECE, min_size=1, max_size=6), st.integers(0, 20))
def test_a_failure_after_the_start_is_an_error_chunk_never_a_finish(
        pieces: list[tuple[str, Any]], at: int) -> None:
    chunks = _answer_chunks(pieces, "stop")[:-2]
    builder = _builder()
    stream = [r for chunk in chunks[:at] for r in builder.feed_all([chunk])]
    end = builder.fail(502, "upstream went away")
    assert end == {"error": {"code": 502, "message": "upstream went away",
                             "status": "UNAVAILABLE"}}
    assert not any(r["candidates"][0].get("finishReason") for r in stream)


_CALL = {"index": 0, "id": "call_9", "type": "function",
         "function": {"name": "read_file", "arguments": '{"path": "a<b"}'}}
_EVENTS = ollama_events(
    ollama_event({"tool_calls": [_CALL]}),
    ollama_event({"content": "z"}).replace(b"1755000000", b"1755000001"))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(_EVENTS, min_size=1, max_size=8), min_size=1, max_size=3),
       st.booleans())
def test_reads_taken_for_their_texts_stream_what_decoding_them_gives(
        reads: list[list[bytes]], keepalive: bool) -> None:
    """The stream's fast path (the upstream's bytes, plain events never decoded) makes
    the very chunks, closing chunk and whole answer that decoding every event makes."""
    from proxy.flow.translate import KEEPALIVE, ChunkOut, as_chunks
    from proxy.sse import SseFrames

    fast, slow = _builder(), _builder()
    fed_fast: list[Any] = []
    fed_slow: list[Any] = []
    for events in reads:
        batch: list[ChunkOut] = [SseFrames(b"".join(events))]
        if keepalive:
            batch.append(KEEPALIVE)
        fed_fast += fast.feed_batch(batch)
        fed_slow += slow.feed_all(as_chunks(batch))
    fed_fast.append(fast.finish())
    fed_slow.append(slow.finish())
    assert fed_fast == fed_slow
    assert fast.whole() == slow.whole()
    assert all(r["candidates"][0]["content"]["parts"] or "finishReason" in r["candidates"][0]
               for r in fed_fast)  # no chunk empty of both parts and finish
    for response in fed_fast:
        types.GenerateContentResponse.model_validate(response)
