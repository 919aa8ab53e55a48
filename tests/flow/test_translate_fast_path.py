"""The fast path and the full path give the client the same stream.

`FastSseTranslator(decode=False)` relays plain chunks as the upstream's bytes;
the reference `SseTranslator` (all `--no-fast-paths` runs) parses every chunk,
runs it through the stages and re-encodes it.
Where both apply (no tools offered, reasoning passed through), the bytes the
client receives must not depend on which one ran, however the upstream's bytes
were cut into reads. With `reasoning: move` (the default) the fast path relays
an answer that does not open with a reasoning marker as it came, while the
stages hold back a trailing `<` that might begin `<think>`: the two agree
byte for byte whenever the text has no `<` in it.
"""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest
from factories import OLLAMA_HEAD, chunk, response_pipeline, sse
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.api.chat.answer import frame
from proxy.flow.fast_stream import FastSseTranslator
from proxy.flow.translate import ChunkOut, SseTranslator
from proxy.types import Profile, ReasoningPolicy


def _translator(decode: bool, reasoning: ReasoningPolicy) -> SseTranslator:
    """`decode=False`: the relay fast path (a stream without tools, fast paths on);
    True: the reference decoder, what the same stream gets with them off."""
    pipeline = response_pipeline(Profile(model="qwen3:8b", reasoning=reasoning))
    return SseTranslator(pipeline) if decode else FastSseTranslator(pipeline, decode=False)


def _chunks(pieces: list[str], finish: str, usage: bool) -> list[dict[str, Any]]:
    """An Ollama-shaped /v1 stream: role on the first delta, a finish chunk, maybe usage."""
    deltas: list[dict[str, Any]] = [{"role": "assistant", "content": p} if i == 0
                                    else {"content": p} for i, p in enumerate(pieces)]
    out = [chunk(d) for d in deltas]
    out.append(chunk({}, finish))
    if usage:
        out.append({**OLLAMA_HEAD, "choices": [], "usage": {
            "prompt_tokens": 12, "completion_tokens": len(pieces), "total_tokens": 12}})
    return out


def _client_bytes(decode: bool, reads: list[bytes],
                  reasoning: ReasoningPolicy = "pass") -> bytes:
    """What relay.py's SSE body writes for the translator's output (framing included)."""
    translator = _translator(decode, reasoning)
    out: list[ChunkOut] = []
    for data in reads:
        out += translator.feed(data)
    out += translator.end()
    assert translator.failure is None
    return b"".join(frame(c) for c in out)


def _cut(body: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({min(c, len(body)) for c in cuts})
    return [body[a:b] for a, b in zip([0, *points], [*points, len(body)]) if b > a]


PIECES = st.lists(st.text(max_size=12), min_size=1, max_size=8)
CUTS = st.lists(st.integers(min_value=0, max_value=2000), max_size=12)
# Every family's reasoning marker starts with "<" or "[" (`[THINK]`): text without
# either holds no tag.
NO_ANGLE = st.characters(blacklist_categories=("Cs",), blacklist_characters="<[")


@settings(max_examples=150, deadline=None)
@given(pieces=PIECES, finish=st.sampled_from(["stop", "length"]), usage=st.booleans(),
       cuts=CUTS)
def test_fast_and_full_path_write_identical_bytes(
        pieces: list[str], finish: str, usage: bool, cuts: list[int]) -> None:
    # The upstream writes compact JSON (as Ollama, vLLM and llama.cpp do).
    body = b"".join(sse(c) for c in _chunks(pieces, finish, usage)) + b"data: [DONE]\n\n"
    reads = _cut(body, cuts)
    fast, full = _client_bytes(False, reads), _client_bytes(True, reads)
    assert fast == full
    assert fast == _client_bytes(False, [body])  # and independent of the cuts


@settings(max_examples=100, deadline=None)
@given(pieces=st.lists(st.text(alphabet=NO_ANGLE, max_size=12), min_size=1, max_size=8),
       finish=st.sampled_from(["stop", "length"]), usage=st.booleans(), cuts=CUTS)
def test_with_reasoning_move_both_paths_agree_on_text_without_tags(
        pieces: list[str], finish: str, usage: bool, cuts: list[int]) -> None:
    body = b"".join(sse(c) for c in _chunks(pieces, finish, usage)) + b"data: [DONE]\n\n"
    reads = _cut(body, cuts)
    fast = _client_bytes(False, reads, "move")
    assert fast == _client_bytes(True, reads, "move")
    assert fast == _client_bytes(False, reads, "pass")  # the sniffing changes nothing here


@pytest.mark.parametrize("bracket", ["<", "["])
def test_with_reasoning_move_a_trailing_angle_bracket_is_held_not_lost(bracket: str) -> None:
    # The case that told the two apart: the stages hold "<" (it may open
    # <think>) or "[" ([THINK]) and hand it out with the finish; the fast path
    # relays it at once.
    body = b"".join(sse(c) for c in _chunks(["0" + bracket], "stop", False)) + b"data: [DONE]\n\n"
    for decode in (False, True):
        frames = _client_bytes(decode, [body], "move").split(b"\n\n")[:-1]
        chunks = [orjson.loads(f.removeprefix(b"data: ")) for f in frames]
        text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks)
        assert text == "0" + bracket
        assert chunks[-1]["choices"][0]["finish_reason"] == "stop"


@settings(max_examples=60, deadline=None)
@given(pieces=PIECES, cuts=CUTS)
def test_any_upstream_encoding_gives_the_same_chunks_on_both_paths(
        pieces: list[str], cuts: list[int]) -> None:
    # Spaces after separators and \\u escapes: the fast path keeps the upstream's
    # spelling, the full path re-encodes; the client decodes the same chunks.
    body = b"".join(b"data: " + json.dumps(c).encode() + b"\n\n"
                    for c in _chunks(pieces, "stop", False)) + b"data: [DONE]\n\n"
    reads = _cut(body, cuts)
    frames = [_client_bytes(d, reads).split(b"\n\n")[:-1] for d in (False, True)]
    fast, full = ([orjson.loads(f.removeprefix(b"data: ")) for f in fs] for fs in frames)
    assert fast == full == _chunks(pieces, "stop", False)


def test_a_chunk_split_over_two_data_lines_is_re_encoded_not_relayed() -> None:
    # SSE joins the lines of one event with "\n"; relayed as it came, that newline
    # would end the client's `data:` line inside the JSON.
    hi = chunk({"content": "hi"})
    text = orjson.dumps(hi).decode()
    cut = text.index('"choices"')
    body = f"data: {text[:cut]}\ndata: {text[cut:]}\n\n".encode()
    body += sse(chunk({}, "stop")) + b"data: [DONE]\n\n"
    for reasoning in ("pass", "move"):
        written = _client_bytes(False, [body], reasoning)
        frames = written.split(b"\n\n")[:-1]
        assert all(b"\n" not in f for f in frames)
        assert orjson.loads(frames[0].removeprefix(b"data: ")) == hi


def _events(chunks: list[dict[str, Any]], done: bool = True) -> list[bytes]:
    """One read per event, as a slow stream's reads come."""
    return [b"data: " + orjson.dumps(c) + b"\n\n" for c in chunks] \
        + ([b"data: [DONE]\n\n"] if done else [])


def _outcome(decode: bool, reads: list[bytes]) -> tuple[bytes, str | None]:
    translator = _translator(decode, "pass")
    out: list[ChunkOut] = []
    for data in reads:
        out += translator.feed(data)
    out += translator.end()
    failure = translator.failure.message if translator.failure is not None else None
    return b"".join(frame(c) for c in out), failure


def test_a_read_of_one_event_with_a_call_or_an_error_goes_through_the_stages() -> None:
    # No tools offered: a call the model made up is the stages' to judge, and an
    # error event ends the stream, whether the events come one per read or together.
    call = {"index": 0, "id": "call_1", "type": "function",
            "function": {"name": "get_weather", "arguments": "{}"}}
    chunks = _chunks(["Hi"], "tool_calls", False)
    chunks.insert(1, chunk({"tool_calls": [call]}))
    error = {"error": {"message": "model crashed", "type": "server_error"}}
    for stream in (chunks, [chunks[0], error]):
        reads = _events(stream)
        fast = _outcome(False, reads)
        assert fast == _outcome(True, reads) == _outcome(False, [b"".join(reads)])
        frames = [orjson.loads(f.removeprefix(b"data: ")) for f in fast[0].split(b"\n\n")[:-1]]
        # Dropped (no such tool was offered): no chunk carries a call.
        assert not any(c.get("delta", {}).get("tool_calls")
                       for f in frames for c in f.get("choices", []))
        assert fast[1] == (None if stream is chunks else "model crashed")


def test_a_stream_of_one_event_reads_that_closes_without_done_ends_by_its_finish() -> None:
    # Closed after the finish: a whole answer. Closed before it: an incomplete one.
    whole = _chunks(["Hi", " there"], "stop", False)
    for stream, failure in ((whole, None),
                            (whole[:-1], "upstream closed the stream before it finished")):
        reads = _events(stream, done=False)
        assert _outcome(False, reads) == _outcome(True, reads)
        assert _outcome(False, reads)[1] == failure
