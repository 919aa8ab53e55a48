"""The sans-IO translator on its own: upstream bytes in, chunks and one ending out."""

from __future__ import annotations

import itertools
from typing import Any

import orjson
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from proxy.api.chat.answer import frame as relay_frame
from proxy.errors import ApiError
from proxy.flow.fast_answer import FastCompletionTranslator
from proxy.flow.fast_stream import FastSseTranslator
from proxy.flow.translate import (
    ChunkOut,
    CompletionTranslator,
    SseTranslator,
    Translator,
    as_chunks,
    completion_problem,
)
from proxy.sse import DONE, SseEvent, SseFrames
from proxy.transforms.response import ResponsePipeline, build_pipeline
from proxy.transforms.response.checks import SchemaCache
from proxy.types import Chunk, Plan, Profile, ReasoningPolicy

WEATHER_TOOL = {"type": "function", "function": {
    "name": "get_weather", "parameters": {"type": "object", "properties": {
        "city": {"type": "string"}}, "required": ["city"]}}}
BASE = {"id": "chatcmpl-527", "object": "chat.completion.chunk", "created": 1755000000,
        "model": "qwen3:8b", "system_fingerprint": "fp_ollama"}


def pipeline(tools: bool = False, reasoning: ReasoningPolicy = "move") -> ResponsePipeline:
    ids = (f"call_gen{i:020d}" for i in itertools.count())
    return build_pipeline(client_tools=[WEATHER_TOOL] if tools else [],
                          profile=Profile(model="qwen3:8b", reasoning=reasoning), plan=Plan(),
                          parallel_tool_calls=None, schema_cache=SchemaCache(),
                          id_factory=lambda: next(ids))


PATHS = ["relay", "runs", "reference"]
"""How an SSE answer is read: the relay fast path (no tools: `decode=False`), the
decoding fast path (content judged in runs), the reference decoder alone
(`--no-fast-paths`). What they hand out must mean the same."""


def sse(stages: ResponsePipeline, path: str, **kw: Any) -> SseTranslator:
    if path == "reference":
        return SseTranslator(stages, **kw)
    return FastSseTranslator(stages, decode=path == "runs", **kw)


def whole(stages: ResponsePipeline, fast: bool, **kw: Any) -> CompletionTranslator:
    return (FastCompletionTranslator if fast else CompletionTranslator)(stages, **kw)


def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {**BASE, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def frame(obj: Any) -> bytes:
    return b"data: " + (obj if isinstance(obj, bytes) else orjson.dumps(obj)) + b"\n\n"


def answer(*pieces: str, call: bool = False, finish: bool = True, done: bool = True) -> bytes:
    """An Ollama /v1 stream (role on the first delta, finish chunk, [DONE])."""
    out = [frame(chunk({"role": "assistant", "content": pieces[0]}))]
    out += [frame(chunk({"content": p})) for p in pieces[1:]]
    if call:
        out.append(frame(chunk({"content": "", "tool_calls": [{
            "id": "call_k3x9a0qz", "index": 0, "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}}]})))
    if finish:
        out.append(frame(chunk({}, "tool_calls" if call else "stop")))
    if done:
        out.append(b"data: [DONE]\n\n")
    return b"".join(out)


def decoded(items: list[ChunkOut]) -> list[Chunk]:
    return as_chunks(items)


def run(translator: Translator, pieces: list[bytes]) -> tuple[list[Chunk], ApiError | None]:
    """Drive it like proxy.flow.run.UpstreamTurn: feed until finished, then end."""
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


@pytest.mark.parametrize("path", PATHS)
def test_a_whole_stream_passes(path: str) -> None:
    chunks, failure = run(sse(pipeline(), path), [answer("Hel", "lo")])
    assert failure is None
    assert text(chunks) == "Hello" and finishes(chunks) == ["stop"]


def test_fast_path_hands_out_the_upstream_bytes_unchanged() -> None:
    event = orjson.dumps(chunk({"role": "assistant", "content": "hi"}))
    translator = FastSseTranslator(pipeline(), decode=False)
    assert translator.feed(frame(event)[:-1]) == []  # not yet a whole event
    assert translator.feed(b"\n") == [event]


def test_a_whole_read_of_plain_events_is_handed_out_as_it_came() -> None:
    body = answer("Hel", "lo")
    events = body.removesuffix(b"data: [DONE]\n\n")
    # reasoning: move sniffs the first content ("Hel": plain), then the rest goes whole.
    for reasoning, whole in (("pass", events), ("move", events[events.index(b"\n\n") + 2:])):
        translator = FastSseTranslator(pipeline(reasoning=reasoning), decode=False)
        out = translator.feed(body)
        assert type(out[-1]) is SseFrames and out[-1] == whole
        assert b"".join(relay_frame(c) for c in out) == events
        assert translator.finished and translator.failure is None
        assert [c["choices"][0]["delta"].get("content") for c in as_chunks(out)] == [
            "Hel", "lo", None]


def test_a_whole_read_that_opens_with_reasoning_goes_through_the_stages() -> None:
    translator = FastSseTranslator(pipeline(), decode=False)
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
    plain = frame(chunk({"content": "hi"}))
    read = odd + plain if where == "first" else plain + odd + plain
    translator = FastSseTranslator(pipeline(reasoning="pass"), decode=False)
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
    plain = frame(chunk({"role": "assistant", "content": "hi"}))
    odd = b"data: " + orjson.dumps(chunk({"content": "x"}))[:-1] + b"," + field + b":[]}\n\n"
    out = FastSseTranslator(pipeline(), decode=False).feed(plain + odd)
    assert not any(type(c) is SseFrames for c in out)


def test_a_tool_call_switches_the_fast_path_to_the_stages() -> None:
    translator = FastSseTranslator(pipeline(tools=True), decode=False)
    chunks, failure = run(translator, [answer("Let me look.", call=True)])
    assert failure is None and translator.decode
    calls = [c for c in chunks if c["choices"] and c["choices"][0]["delta"].get("tool_calls")]
    assert [c["choices"][0]["delta"]["tool_calls"][0]["function"]["name"] for c in calls] == [
        "get_weather"]
    assert finishes(chunks) == ["tool_calls"]


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("garbage", [b"<html>oops</html>", b'{"choices": [', b"oops}"])
def test_data_that_is_not_json_ends_with_a_failure_after_what_came_before(
        path: str, garbage: bytes) -> None:
    stream = answer("one", finish=False, done=False) + frame(garbage) + answer("never")
    chunks, failure = run(sse(pipeline(), path), [stream])
    assert failure is not None and failure.status == 502 and failure.code == "upstream_invalid"
    assert text(chunks) == "one" and finishes(chunks) == []


@pytest.mark.parametrize("bad", [
    {**BASE, "choices": [{"index": 0, "delta": {"tool_calls": 5}, "finish_reason": None}]},
    {**BASE, "choices": [{"index": 0, "delta": {"tool_calls": [5]}, "finish_reason": None}]},
    {**BASE, "choices": [{"index": 0, "delta": "text", "finish_reason": None}]},
    {**BASE, "choices": [7]},
    {**BASE, "choices": {"index": 0}},
    [1, 2],
])
@pytest.mark.parametrize("tools", [False, True])
@pytest.mark.parametrize("path", ["runs", "reference"])  # the relay path reads no chunk
def test_an_invalid_chunk_shape_fails_without_a_made_up_finish(bad: Any, tools: bool,
                                                                path: str) -> None:
    stream = answer("one", finish=False, done=False) + frame(bad) + answer("never")
    chunks, failure = run(sse(pipeline(tools), path), [stream])
    assert failure is not None and failure.code == "upstream_invalid"
    assert text(chunks) == "one" and finishes(chunks) == []


@pytest.mark.parametrize("tools", [False, True])
@pytest.mark.parametrize("path", PATHS)
def test_a_stream_cut_without_finish_fails_after_its_content(tools: bool, path: str) -> None:
    stream = answer("one", "two", finish=False, done=False)
    chunks, failure = run(sse(pipeline(tools), path), [stream])
    assert failure is not None and failure.code == "upstream_incomplete"
    assert text(chunks) == "onetwo" and finishes(chunks) == []


@pytest.mark.parametrize("tools", [False, True])
@pytest.mark.parametrize("path", PATHS)
def test_an_upstream_reset_fails_after_everything_received(tools: bool, path: str) -> None:
    translator = sse(pipeline(tools), path)
    received = translator.feed(answer("one", "two", finish=False, done=False))
    reset = ApiError(502, "upstream closed the connection", code="upstream_unavailable")
    tail = translator.fail(reset)
    chunks = decoded(received + tail)
    assert translator.failure is reset and translator.finished
    assert text(chunks) == "onetwo" and finishes(chunks) == []
    assert translator.fail(reset) == [] and translator.end() == []


@pytest.mark.parametrize("path", PATHS)
def test_a_reset_in_the_middle_of_a_call_drops_the_cut_call_and_invents_no_finish(
        path: str) -> None:
    translator = sse(pipeline(tools=True), path)
    half = frame(chunk({"role": "assistant", "content": "Looking.", "tool_calls": [{
        "id": "call_1", "index": 0, "type": "function",
        "function": {"name": "get_weather", "arguments": '{"city":'}}]}))
    received = translator.feed(half)
    chunks = decoded(received + translator.fail(ApiError(502, "reset")))
    assert text(chunks) == "Looking." and finishes(chunks) == []
    assert not any(c["choices"][0]["delta"].get("tool_calls") for c in chunks if c["choices"])


@pytest.mark.parametrize("path", PATHS)
def test_an_oversized_event_fails(path: str) -> None:
    translator = sse(pipeline(), path, max_event_bytes=1000)
    out = translator.feed(answer("one", finish=False, done=False) + b"data: " + b"x" * 600)
    out += translator.feed(b"x" * 600)
    assert translator.failure is not None and translator.failure.code == "upstream_invalid"
    assert text(decoded(out)) == "one"


@pytest.mark.parametrize("path", PATHS)
def test_a_backend_error_event_is_the_ending(path: str) -> None:
    stream = answer("one", finish=False, done=False) + frame(
        {"error": {"message": "model ran out of memory", "type": "api_error"}})
    chunks, failure = run(sse(pipeline(), path), [stream])
    assert failure is not None and failure.message == "model ran out of memory"
    assert failure.status == 500
    assert text(chunks) == "one" and finishes(chunks) == []


@pytest.mark.parametrize("path", PATHS)
def test_done_without_finish_is_a_normal_end(path: str) -> None:
    chunks, failure = run(sse(pipeline(), path),
                          [answer("one", finish=False, done=True)])
    assert failure is None and text(chunks) == "one"


@pytest.mark.parametrize("path", PATHS)
def test_nothing_after_done_is_read(path: str) -> None:
    translator = sse(pipeline(), path)
    translator.feed(answer("one"))
    assert translator.finished and translator.feed(frame(chunk({"content": "late"}))) == []


SPLIT_CASES = [
    answer("Hel", "lo ", "world"),
    answer("Let me look.", call=True),
    answer("one", "two", finish=False, done=False),
    answer("one", finish=False, done=False) + b"data: <html>\n\n" + answer("two"),
    answer("a\r\nb").replace(b"\n\n", b"\r\n\r\n"),
]


@settings(max_examples=60, deadline=None)
@given(case=st.sampled_from(range(len(SPLIT_CASES))), tools=st.booleans(),
       path=st.sampled_from(PATHS), cuts=st.lists(st.integers(min_value=0, max_value=4000),
                                                  max_size=12))
def test_any_chunking_of_the_upstream_bytes_gives_the_same_output(
        case: int, tools: bool, path: str, cuts: list[int]) -> None:
    body = SPLIT_CASES[case]
    at_once = run(sse(pipeline(tools), path), [body])
    bounds = sorted({c % (len(body) + 1) for c in cuts})
    pieces = [body[a:b] for a, b in zip([0, *bounds], [*bounds, len(body)])]
    split = run(sse(pipeline(tools), path), [p for p in pieces if p])
    assert split[0] == at_once[0]
    assert (split[1] is None) == (at_once[1] is None)
    if at_once[1] is not None and split[1] is not None:
        assert (split[1].status, split[1].code) == (at_once[1].status, at_once[1].code)


COMPLETION = {"id": "chatcmpl-88", "object": "chat.completion", "created": 1755000000,
              "model": "qwen3:8b", "choices": [{"index": 0, "message": {
                  "role": "assistant", "content": "Hello"}, "finish_reason": "stop"}],
              "usage": {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17}}


@pytest.mark.parametrize("fast", [True, False])
def test_a_whole_completion_becomes_its_chunks(fast: bool) -> None:
    raw = orjson.dumps(COMPLETION)
    chunks, failure = run(whole(pipeline(), fast), [raw[:10], raw[10:]])
    assert failure is None
    assert text(chunks) == "Hello" and finishes(chunks) == ["stop"]
    assert chunks[-1]["usage"]["total_tokens"] == 17


@pytest.mark.parametrize("body", [
    b"<html>502 Bad Gateway</html>", b"[]", b'{"choices": 5}', b'{"choices":[{"message":5}]}',
    b'{"choices":[5]}', b'{"choices":[{"message":{"tool_calls":5}}]}',
])
@pytest.mark.parametrize("fast", [True, False])
def test_a_body_that_is_not_a_completion_fails(body: bytes, fast: bool) -> None:
    chunks, failure = run(whole(pipeline(), fast), [body])
    assert chunks == [] and failure is not None
    assert (failure.status, failure.code) == (502, "upstream_invalid")


@pytest.mark.parametrize("fast", [True, False])
def test_a_too_large_completion_fails(fast: bool) -> None:
    chunks, failure = run(whole(pipeline(), fast, max_bytes=100), [b" " * 60] * 2)
    assert chunks == [] and failure is not None and failure.code == "upstream_invalid"


def test_completion_problem_accepts_a_message_without_content() -> None:
    assert completion_problem({"choices": [{"index": 0, "finish_reason": "stop"}]}) is None


def _sniffing(policy: str = "move") -> FastSseTranslator:
    ids = (f"call_gen{i:020d}" for i in itertools.count())
    stages = build_pipeline(client_tools=[], profile=Profile(model="m", reasoning=policy),  # type: ignore[arg-type]
                            plan=Plan(), parallel_tool_calls=None, schema_cache=SchemaCache(),
                            id_factory=lambda: next(ids))
    return FastSseTranslator(stages, decode=False)


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
    content, reasoning, _ = _split(out)
    assert (content.strip(), reasoning) == ("Answer", "a plan")
    # Only what follows the reasoning may go out as the upstream's bytes (stages vouched).
    assert not any(b"plan" in c for c in out if isinstance(c, bytes))


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
    first = tr.feed(frame(chunk({"role": "assistant", "content": ""})))
    assert first == []
    out = tr.feed(frame(chunk({"content": "", "reasoning": "thinking..."})))
    assert len(out) == 2 and all(isinstance(c, bytes) for c in out)


def test_sniffing_gives_up_holding_after_a_few_empty_events() -> None:
    tr = _sniffing()
    fed = [tr.feed(frame(chunk({"content": ""}))) for _ in range(12)]
    # Eight are held; the ninth releases all nine to the stages, then one each.
    assert [len(out) for out in fed] == [0] * 8 + [9, 1, 1, 1]


@given(st.lists(st.text(max_size=10), min_size=1, max_size=8))
@example(["tool_calls"]).via("the CI run of 2f34f9c")
@example(["a", "error"])
def test_as_chunks_reads_a_whole_read_back_into_its_chunks(texts: list[str]) -> None:
    chunks = [chunk({"content": t}) for t in texts]
    body = b"".join(frame(c) for c in chunks)
    out = FastSseTranslator(pipeline(reasoning="pass"), decode=False).feed(body)
    # The fast path's byte test is deliberately coarse: a text that merely reads
    # "tool_calls" or "error" sends the read through the stages, which must give
    # back the same chunks.
    if b'"tool_calls"' not in body and b'"error"' not in body:
        assert [type(c) for c in out] == [SseFrames]
    else:
        assert SseFrames not in [type(c) for c in out]
    assert as_chunks(out) == chunks
