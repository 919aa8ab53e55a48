"""The sans-IO translator on its own: upstream bytes in, chunks and one ending out."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from factories import chunk, response_pipeline, sse
from hypothesis import example, given, settings
from hypothesis import strategies as st
from support.tools import WEATHER

from proxy.api.relay import frame as relay_frame
from proxy.errors import ApiError
from proxy.flow.translate import (
    ChunkOut,
    CompletionTranslator,
    SseFrames,
    SseTranslator,
    Translator,
    as_chunks,
    completion_problem,
)
from proxy.sse import DONE, SseEvent
from proxy.transforms.response import ResponsePipeline
from proxy.types import Chunk, Profile, ReasoningPolicy


def pipeline(tools: bool = False, reasoning: ReasoningPolicy = "move") -> ResponsePipeline:
    return response_pipeline(Profile(model="qwen3:8b", reasoning=reasoning),
                             [WEATHER] if tools else [])


def answer(*pieces: str, call: bool = False, finish: bool = True, done: bool = True) -> bytes:
    """An Ollama /v1 stream (role on the first delta, finish chunk, [DONE])."""
    out = [sse(chunk({"role": "assistant", "content": pieces[0]}))]
    out += [sse(chunk({"content": p})) for p in pieces[1:]]
    if call:
        out.append(sse(chunk({"content": "", "tool_calls": [{
            "id": "call_k3x9a0qz", "index": 0, "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}}]})))
    if finish:
        out.append(sse(chunk({}, "tool_calls" if call else "stop")))
    if done:
        out.append(b"data: [DONE]\n\n")
    return b"".join(out)


def decoded(items: list[ChunkOut]) -> list[Chunk]:
    return as_chunks(items)


def run(translator: Translator, pieces: list[bytes]) -> tuple[list[Chunk], ApiError | None]:
    """Drive it like proxy.flow.run.Turn: feed until finished, then end."""
    out: list[ChunkOut] = []
    for piece in pieces:
        out += translator.feed(piece)
        if translator.finished:
            break
    else:
        out += translator.end()
    return decoded(out), translator.failure


def text(chunks: list[Chunk]) -> str:
    return "".join(c["choices"][0]["delta"].get("content") or ""
                   for c in chunks if c.get("choices"))


def finishes(chunks: list[Chunk]) -> list[str]:
    return [ch["finish_reason"] for c in chunks for ch in c.get("choices") or []
            if ch.get("finish_reason")]


@pytest.mark.parametrize("decode", [False, True])
def test_a_whole_stream_passes(decode: bool) -> None:
    chunks, failure = run(SseTranslator(pipeline(), decode=decode), [answer("Hel", "lo")])
    assert failure is None
    assert text(chunks) == "Hello" and finishes(chunks) == ["stop"]


def test_fast_path_hands_out_the_upstream_bytes_unchanged() -> None:
    event = orjson.dumps(chunk({"role": "assistant", "content": "hi"}))
    translator = SseTranslator(pipeline(), decode=False)
    assert translator.feed(sse(event)[:-1]) == []  # not yet a whole event
    assert translator.feed(b"\n") == [event]


def test_a_whole_read_of_plain_events_is_handed_out_as_it_came() -> None:
    body = answer("Hel", "lo")
    events = body.removesuffix(b"data: [DONE]\n\n")
    # reasoning: move sniffs the first content ("Hel": plain), then the rest goes whole.
    for reasoning, whole in (("pass", events), ("move", events[events.index(b"\n\n") + 2:])):
        translator = SseTranslator(pipeline(reasoning=reasoning), decode=False)
        out = translator.feed(body)
        assert type(out[-1]) is SseFrames and out[-1] == whole
        assert b"".join(relay_frame(c) for c in out) == events
        assert translator.finished and translator.failure is None
        assert [c["choices"][0]["delta"].get("content") for c in as_chunks(out)] == [
            "Hel", "lo", None]


def test_a_whole_read_that_opens_with_reasoning_goes_through_the_stages() -> None:
    translator = SseTranslator(pipeline(), decode=False)
    out = translator.feed(answer("<think>plan</think>", "Hi"))
    assert not any(type(c) is SseFrames for c in out) and translator.decode
    deltas = [c["choices"][0]["delta"] for c in as_chunks(out) if c["choices"]]
    assert "".join(d.get("reasoning_content") or "" for d in deltas) == "plan"
    assert "".join(d.get("content") or "" for d in deltas).strip() == "Hi"


@pytest.mark.parametrize("odd", [
    b"data: {\"a\":1}\r\n\r\n",                   # CRLF framing
    b"data: {\"a\":\ndata: 1}\n\n",                # one event over two data lines
    b"event: message\ndata: {\"a\":1}\n\n",        # a field before data
    b": keep-alive\n\n",                         # a comment
    b"data:{\"a\":1}\n\n",                        # no space after the colon
    b"data: {\"a\":1}\n\n\n\n",                    # an empty event after it
    b"data: [1]\n\n",                             # not an object
    b"data: {\"a\":1}\r\rdata: {\"b\":2}\n\n",        # lone CRs end lines too
])
@pytest.mark.parametrize("where", ["first", "between"])
def test_a_read_with_anything_unusual_goes_event_by_event(odd: bytes, where: str) -> None:
    # Each case breaks exactly one of the read's checks (the newline count alone does
    # not catch the lone CRs, nor an odd first event with the right number of lines).
    plain = sse(chunk({"content": "hi"}))
    read = odd + plain if where == "first" else plain + odd + plain
    translator = SseTranslator(pipeline(reasoning="pass"), decode=False)
    out = translator.feed(read)
    assert not any(type(c) is SseFrames for c in out)


def test_as_chunks_does_not_let_broken_events_join_into_a_valid_one() -> None:
    # `{"a":[{"b":1}` and `{"c":2}]}` are each broken, and one valid object together.
    read = SseFrames(b'data: {"a":[{"b":1}\n\ndata: {"c":2}]}\n\n')
    with pytest.raises(orjson.JSONDecodeError):
        as_chunks([read])


def test_done_is_known_however_it_is_padded() -> None:
    assert SseEvent(b"  " * 20 + DONE + b" ").is_done and not SseEvent(b'{"a":"[DONE]"}').is_done


@pytest.mark.parametrize("field", [b'"tool_calls"', b'"error"'])
def test_a_read_with_a_call_or_an_error_goes_event_by_event(field: bytes) -> None:
    plain = sse(chunk({"role": "assistant", "content": "hi"}))
    odd = b"data: " + orjson.dumps(chunk({"content": "x"}))[:-1] + b"," + field + b":[]}\n\n"
    out = SseTranslator(pipeline(), decode=False).feed(plain + odd)
    assert not any(type(c) is SseFrames for c in out)


def test_a_tool_call_switches_the_fast_path_to_the_stages() -> None:
    translator = SseTranslator(pipeline(tools=True), decode=False)
    chunks, failure = run(translator, [answer("Let me look.", call=True)])
    assert failure is None and translator.decode
    calls = [c for c in chunks if c["choices"] and c["choices"][0]["delta"].get("tool_calls")]
    assert [c["choices"][0]["delta"]["tool_calls"][0]["function"]["name"] for c in calls] == [
        "get_weather"]
    assert finishes(chunks) == ["tool_calls"]


@pytest.mark.parametrize("decode", [False, True])
@pytest.mark.parametrize("garbage", [b"<html>oops</html>", b'{"choices": [', b"oops}"])
def test_data_that_is_not_json_ends_with_a_failure_after_what_came_before(
        decode: bool, garbage: bytes) -> None:
    stream = answer("one", finish=False, done=False) + sse(garbage) + answer("never")
    chunks, failure = run(SseTranslator(pipeline(), decode=decode), [stream])
    assert failure is not None and failure.status == 502 and failure.code == "upstream_invalid"
    assert text(chunks) == "one" and finishes(chunks) == []


@pytest.mark.parametrize("bad", [
    chunk({"tool_calls": 5}),
    chunk({"tool_calls": [5]}),
    chunk("text"),  # type: ignore[arg-type]
    {**chunk(), "choices": [7]},
    {**chunk(), "choices": {"index": 0}},
    [1, 2],
])
@pytest.mark.parametrize("tools", [False, True])
def test_an_invalid_chunk_shape_fails_without_a_made_up_finish(bad: Any, tools: bool) -> None:
    stream = answer("one", finish=False, done=False) + sse(bad) + answer("never")
    chunks, failure = run(SseTranslator(pipeline(tools), decode=True), [stream])
    assert failure is not None and failure.code == "upstream_invalid"
    assert text(chunks) == "one" and finishes(chunks) == []


@pytest.mark.parametrize("tools", [False, True])
def test_a_stream_cut_without_finish_fails_after_its_content(tools: bool) -> None:
    stream = answer("one", "two", finish=False, done=False)
    chunks, failure = run(SseTranslator(pipeline(tools), decode=tools), [stream])
    assert failure is not None and failure.code == "upstream_incomplete"
    assert text(chunks) == "onetwo" and finishes(chunks) == []


@pytest.mark.parametrize("tools", [False, True])
def test_an_upstream_reset_fails_after_everything_received(tools: bool) -> None:
    translator = SseTranslator(pipeline(tools), decode=tools)
    received = translator.feed(answer("one", "two", finish=False, done=False))
    reset = ApiError(502, "upstream closed the connection", code="upstream_unavailable")
    tail = translator.fail(reset)
    chunks = decoded(received + tail)
    assert translator.failure is reset and translator.finished
    assert text(chunks) == "onetwo" and finishes(chunks) == []
    assert translator.fail(reset) == [] and translator.end() == []


def test_a_reset_in_the_middle_of_a_call_drops_the_cut_call_and_invents_no_finish() -> None:
    translator = SseTranslator(pipeline(tools=True), decode=True)
    half = sse(chunk({"role": "assistant", "content": "Looking.", "tool_calls": [{
        "id": "call_1", "index": 0, "type": "function",
        "function": {"name": "get_weather", "arguments": '{"city":'}}]}))
    received = translator.feed(half)
    chunks = decoded(received + translator.fail(ApiError(502, "reset")))
    assert text(chunks) == "Looking." and finishes(chunks) == []
    assert not any(c["choices"][0]["delta"].get("tool_calls") for c in chunks if c["choices"])


def test_an_oversized_event_fails() -> None:
    translator = SseTranslator(pipeline(), decode=False, max_event_bytes=1000)
    out = translator.feed(answer("one", finish=False, done=False) + b"data: " + b"x" * 600)
    out += translator.feed(b"x" * 600)
    assert translator.failure is not None and translator.failure.code == "upstream_invalid"
    assert text(decoded(out)) == "one"


@pytest.mark.parametrize("decode", [False, True])
def test_a_backend_error_event_is_the_ending(decode: bool) -> None:
    stream = answer("one", finish=False, done=False) + sse(
        {"error": {"message": "model ran out of memory", "type": "api_error"}})
    chunks, failure = run(SseTranslator(pipeline(), decode=decode), [stream])
    assert failure is not None and failure.message == "model ran out of memory"
    assert failure.status == 500
    assert text(chunks) == "one" and finishes(chunks) == []


def test_done_without_finish_is_a_normal_end() -> None:
    chunks, failure = run(SseTranslator(pipeline(), decode=True),
                          [answer("one", finish=False, done=True)])
    assert failure is None and text(chunks) == "one"


def test_nothing_after_done_is_read() -> None:
    translator = SseTranslator(pipeline(), decode=False)
    translator.feed(answer("one"))
    assert translator.finished and translator.feed(sse(chunk({"content": "late"}))) == []


SPLIT_CASES = [
    answer("Hel", "lo ", "world"),
    answer("Let me look.", call=True),
    answer("one", "two", finish=False, done=False),
    answer("one", finish=False, done=False) + b"data: <html>\n\n" + answer("two"),
    answer("a\r\nb").replace(b"\n\n", b"\r\n\r\n"),
]


@settings(max_examples=60, deadline=None)
@given(case=st.sampled_from(range(len(SPLIT_CASES))), tools=st.booleans(), decode=st.booleans(),
       cuts=st.lists(st.integers(min_value=0, max_value=4000), max_size=12))
def test_any_chunking_of_the_upstream_bytes_gives_the_same_output(
        case: int, tools: bool, decode: bool, cuts: list[int]) -> None:
    body = SPLIT_CASES[case]
    whole = run(SseTranslator(pipeline(tools), decode=decode), [body])
    bounds = sorted({c % (len(body) + 1) for c in cuts})
    pieces = [body[a:b] for a, b in zip([0, *bounds], [*bounds, len(body)])]
    split = run(SseTranslator(pipeline(tools), decode=decode), [p for p in pieces if p])
    assert split[0] == whole[0]
    assert (split[1] is None) == (whole[1] is None)
    if whole[1] is not None and split[1] is not None:
        assert (split[1].status, split[1].code) == (whole[1].status, whole[1].code)


COMPLETION = {"id": "chatcmpl-88", "object": "chat.completion", "created": 1755000000,
              "model": "qwen3:8b", "choices": [{"index": 0, "message": {
                  "role": "assistant", "content": "Hello"}, "finish_reason": "stop"}],
              "usage": {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17}}


def test_a_whole_completion_becomes_its_chunks() -> None:
    raw = orjson.dumps(COMPLETION)
    chunks, failure = run(CompletionTranslator(pipeline()), [raw[:10], raw[10:]])
    assert failure is None
    assert text(chunks) == "Hello" and finishes(chunks) == ["stop"]
    assert chunks[-1]["usage"]["total_tokens"] == 17


@pytest.mark.parametrize("body", [
    b"<html>502 Bad Gateway</html>", b"[]", b'{"choices": 5}', b'{"choices":[{"message":5}]}',
    b'{"choices":[5]}', b'{"choices":[{"message":{"tool_calls":5}}]}',
])
def test_a_body_that_is_not_a_completion_fails(body: bytes) -> None:
    chunks, failure = run(CompletionTranslator(pipeline()), [body])
    assert chunks == [] and failure is not None
    assert (failure.status, failure.code) == (502, "upstream_invalid")


def test_a_too_large_completion_fails() -> None:
    chunks, failure = run(CompletionTranslator(pipeline(), max_bytes=100), [b" " * 60] * 2)
    assert chunks == [] and failure is not None and failure.code == "upstream_invalid"


def test_completion_problem_accepts_a_message_without_content() -> None:
    assert completion_problem({"choices": [{"index": 0, "finish_reason": "stop"}]}) is None


def _sniffing(policy: str = "move") -> SseTranslator:
    stages = response_pipeline(Profile(model="m", reasoning=policy))  # type: ignore[arg-type]
    return SseTranslator(stages, decode=False)


def _split(out: list[ChunkOut]) -> tuple[str, str, int]:
    """(content, reasoning_content, how many chunks came as the upstream's bytes)."""
    chunks = as_chunks(out)
    deltas = [c["choices"][0].get("delta") or {} for c in chunks if c.get("choices")]
    return ("".join(d.get("content") or "" for d in deltas),
            "".join(d.get("reasoning_content") or "" for d in deltas),
            sum(len(as_chunks([c])) for c in out if isinstance(c, bytes)))


def test_plain_stream_under_move_stays_on_the_fast_path() -> None:
    tr = _sniffing()
    out = tr.feed(answer("Hello", " <think>not reasoning</think>", " world"))
    content, reasoning, raw = _split(out)
    assert content == "Hello <think>not reasoning</think> world" and reasoning == ""
    assert raw == len(as_chunks(out)) == 4, "every chunk relayed as the upstream's bytes"
    assert tr.finished and tr.failure is None and tr.end() == []


@pytest.mark.parametrize("pieces", [("<think>a plan</think>", "Answer"),
                                    ("\n  ", "<th", "ink>a plan</thi", "nk>Answer"),
                                    ("", "<think>a plan", "</think>Answer")])
def test_stream_opening_with_reasoning_goes_through_the_stages(pieces: tuple[str, ...]) -> None:
    tr = _sniffing()
    out = [c for piece in answer(*pieces).split(b"\n\n") if piece
           for c in tr.feed(piece + b"\n\n")]
    content, reasoning, raw = _split(out)
    assert (content.strip(), reasoning) == ("Answer", "a plan") and raw == 0


def test_strip_is_sniffed_too() -> None:
    content, reasoning, _ = _split(_sniffing("strip").feed(answer("<think>x</think>", "Yes")))
    assert (content, reasoning) == ("Yes", "")


def test_a_stream_ending_while_sniffing_loses_nothing() -> None:
    tr = _sniffing()
    out = tr.feed(answer("", finish=False, done=False))
    assert out == []
    tail = tr.end()
    assert tr.failure is not None and tr.failure.code == "upstream_incomplete"
    assert [c["choices"][0]["delta"] for c in tail] == [{"role": "assistant", "content": ""}]


def test_reasoning_the_backend_split_itself_is_not_held() -> None:
    tr = _sniffing()
    first = tr.feed(sse(chunk({"role": "assistant", "content": ""})))
    assert first == []
    out = tr.feed(sse(chunk({"content": "", "reasoning": "thinking..."})))
    assert len(out) == 2 and all(isinstance(c, bytes) for c in out)


def test_sniffing_gives_up_holding_after_a_few_empty_events() -> None:
    tr = _sniffing()
    fed = [tr.feed(sse(chunk({"content": ""}))) for _ in range(12)]
    # Eight are held; the ninth releases all nine to the stages, then one each.
    assert [len(out) for out in fed] == [0] * 8 + [9, 1, 1, 1]


@given(st.lists(st.text(max_size=10), min_size=1, max_size=8))
@example(["tool_calls"]).via("the CI run of 2f34f9c")
@example(["a", "error"])
def test_as_chunks_reads_a_whole_read_back_into_its_chunks(texts: list[str]) -> None:
    chunks = [chunk({"content": t}) for t in texts]
    body = b"".join(sse(c) for c in chunks)
    out = SseTranslator(pipeline(reasoning="pass"), decode=False).feed(body)
    # The fast path's byte test is deliberately coarse: a text that merely reads
    # "tool_calls" or "error" sends the read through the stages, which must give
    # back the same chunks.
    if b'"tool_calls"' not in body and b'"error"' not in body:
        assert [type(c) for c in out] == [SseFrames]
    else:
        assert SseFrames not in [type(c) for c in out]
    assert as_chunks(out) == chunks
