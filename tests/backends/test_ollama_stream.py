"""NDJSON from /api/chat -> OpenAI SSE chunks (docs/backends.md 1c, R4): shapes and splits."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from proxy.backends.ollama_stream import NativeStream, native_completion
from proxy.errors import ApiError

T = "2025-07-07T20:22:19.184789Z"
R4 = (b'{"model":"qwen3:8b","created_at":"' + T.encode() + b'","message":{"role":"assistant",'
      b'"content":"","tool_calls":[{"id":"call_k3x9a0qz","function":{"index":0,'
      b'"name":"get_weather","arguments":{"city":"Tokyo"}}}]},"done":false}\n'
      b'{"model":"qwen3:8b","created_at":"' + T.encode() + b'","message":{"role":"assistant",'
      b'"content":""},"done":true,"done_reason":"stop","total_duration":182242375,'
      b'"load_duration":41295167,"prompt_eval_count":169,"prompt_eval_duration":24573166,'
      b'"eval_count":15,"eval_duration":115959084}\n')


def _ids() -> Any:
    count = iter(range(1000))
    return lambda: f"call_gen{next(count)}"


def _stream(include_usage: bool = False) -> NativeStream:
    return NativeStream("qwen3:8b", 1755000000, "chatcmpl-1", include_usage=include_usage,
                        id_factory=_ids())


def _events(raw: bytes) -> list[Any]:
    assert raw.endswith(b"\n\n")
    out = []
    for frame in raw[:-2].split(b"\n\n"):
        assert frame.startswith(b"data: ")
        data = frame[6:]
        out.append("[DONE]" if data == b"[DONE]" else orjson.loads(data))
    return out


def _line(message: dict[str, Any], done: bool = False, **extra: Any) -> bytes:
    return orjson.dumps({"model": "qwen3:8b", "created_at": T, "message": message,
                         "done": done, **extra}) + b"\n"


def test_r4_tool_call_becomes_one_delta_and_a_tool_calls_finish() -> None:
    stream = _stream(include_usage=True)
    events = _events(stream.feed(R4) + stream.end())
    assert events[0]["choices"][0]["delta"] == {"role": "assistant", "tool_calls": [
        {"index": 0, "id": "call_k3x9a0qz", "type": "function",
         "function": {"name": "get_weather", "arguments": '{"city":"Tokyo"}'}}]}
    assert events[1]["choices"] == [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]
    assert events[2]["choices"] == [] and events[2]["usage"] == {
        "prompt_tokens": 169, "completion_tokens": 15, "total_tokens": 184}
    assert events[3] == "[DONE]"
    assert all(e["object"] == "chat.completion.chunk" for e in events[:3])
    assert stream.prompt_eval_count == 169


def test_llama_server_variant_calls_on_the_done_line_get_indexes_in_order() -> None:
    calls = [{"id": "a" * 32, "function": {"index": 0, "name": "f", "arguments": {}}},
             {"function": {"index": 0, "name": "g", "arguments": {"x": 1}}}]
    stream = _stream()
    events = _events(stream.feed(_line({"role": "assistant", "content": "", "tool_calls": calls},
                                       done=True, done_reason="stop")))
    deltas = events[0]["choices"][0]["delta"]["tool_calls"]
    assert [(d["index"], d["id"], d["function"]["arguments"]) for d in deltas] == [
        (0, "a" * 32, "{}"), (1, "call_gen0", '{"x":1}')]
    assert events[1]["choices"][0]["finish_reason"] == "tool_calls"
    assert events[-1] == "[DONE]"


def test_thinking_content_and_length() -> None:
    stream = _stream()
    raw = stream.feed(_line({"role": "assistant", "content": "", "thinking": "hmm"})
                      + _line({"role": "assistant", "content": "Hi"})
                      + _line({"role": "assistant", "content": " there"})
                      + _line({"role": "assistant", "content": ""}, done=True,
                              done_reason="length"))
    events = _events(raw)
    deltas = [e["choices"][0]["delta"] for e in events[:-1]]
    assert deltas == [{"role": "assistant", "reasoning_content": "hmm"}, {"content": "Hi"},
                      {"content": " there"}, {}]
    assert events[-2]["choices"][0]["finish_reason"] == "length"


def test_error_line_ends_with_an_error_event_and_no_done() -> None:
    stream = _stream()
    events = _events(stream.feed(_line({"role": "assistant", "content": "a"})
                                 + b'{"error":"out of memory"}\n'
                                 + _line({"role": "assistant", "content": "b"})))
    assert events[-1] == {"error": {"message": "out of memory", "type": "server_error",
                                    "param": None, "code": None}}
    assert len(events) == 2 and stream.done


def test_garbage_line_is_a_502() -> None:
    stream = _stream()
    assert stream.feed(b"<html>\n") == b""
    assert stream.failure is not None and stream.failure.status == 502
    assert stream.feed(_line({"role": "assistant", "content": "late"})) == b""  # it is over


def test_a_read_of_many_lines_with_a_bad_one_is_a_502_and_blank_lines_are_skipped() -> None:
    # Many lines at once are decoded as one array; a bad line (even one that would
    # join with its neighbour, or hold two values) is still found and refused, and the
    # line before it still comes out.
    ok = _line({"role": "assistant", "content": "a"})
    for bad in (b"<html>", b'{"message": {"content": "cut', b"1,2", b'{"a": 1}, {"b": 2}', b"7"):
        stream = _stream()
        out = stream.feed(ok + bad + b"\n" + ok)
        assert stream.failure is not None and stream.failure.status == 502, bad
        assert [e["choices"][0]["delta"].get("content") for e in _events(out)] == ["a"], bad
    blank = _stream().feed(ok + b"\n  \n" + ok)
    assert blank == _stream().feed(ok + ok) and blank.count(b"data: ") == 2


def test_an_unterminated_bad_last_line_fails_at_the_end() -> None:
    stream = _stream()
    out = stream.feed(_line({"role": "assistant", "content": "a"}) + b"<html>")
    assert out.count(b"data: ") == 1 and stream.failure is None
    assert stream.end() == b"" and stream.failure is not None


def test_unterminated_stream_has_no_finish() -> None:
    stream = _stream()
    out = stream.feed(_line({"role": "assistant", "content": "cut"}))
    assert b"finish_reason\":\"" not in out + stream.end() and not stream.done


def test_whole_answer_maps_like_the_stream() -> None:
    obj = orjson.loads(R4.split(b"\n")[0])
    obj.update(done=True, done_reason="stop", prompt_eval_count=10, eval_count=2)
    obj["message"]["thinking"] = "t"
    done = native_completion(obj, model="qwen3:8b", created=1, completion_id="chatcmpl-1",
                             id_factory=_ids())
    assert done["choices"][0]["finish_reason"] == "tool_calls"
    assert done["choices"][0]["message"]["content"] == ""
    assert done["choices"][0]["message"]["reasoning_content"] == "t"
    assert done["usage"] == {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12}
    with pytest.raises(ApiError):
        native_completion({"error": "x"}, model="m", created=1, completion_id="c",
                          id_factory=_ids())


text = st.text(st.characters(exclude_categories=["Cs"]), max_size=12)
lines_strategy = st.lists(st.one_of(
    st.builds(lambda t: {"role": "assistant", "content": t}, text),
    st.builds(lambda t: {"role": "assistant", "content": "", "thinking": t}, text),
    st.builds(lambda n, a: {"role": "assistant", "content": "", "tool_calls": [
        {"function": {"index": 0, "name": n, "arguments": {"a": a}}}]},
        st.sampled_from(["f", "g"]), st.integers(-1000, 1000))),
    max_size=8)


@given(lines_strategy, st.sampled_from(["stop", "length"]), st.data())
def test_any_split_of_the_ndjson_gives_the_same_sse(messages: list[dict[str, Any]],
                                                    reason: str, data: st.DataObject) -> None:
    body = b"".join(_line(m) for m in messages) + _line(
        {"role": "assistant", "content": ""}, done=True, done_reason=reason,
        prompt_eval_count=3, eval_count=len(messages))
    whole = _stream(True)
    expected = whole.feed(body) + whole.end()
    cuts = sorted(data.draw(st.lists(st.integers(0, len(body)), max_size=6)))
    split = _stream(True)
    got = b""
    for start, end in zip([0, *cuts], [*cuts, len(body)]):
        got += split.feed(body[start:end])
    assert got + split.end() == expected
    events = _events(expected)
    assert events[-1] == "[DONE]"
    chunks = [e for e in events[:-1] if e["choices"]]
    text_out = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks)
    assert text_out == "".join(m["content"] for m in messages)
    calls = [c for ch in chunks for c in ch["choices"][0]["delta"].get("tool_calls", [])]
    assert [c["index"] for c in calls] == list(range(len(calls)))
    finish = chunks[-1]["choices"][0]["finish_reason"]
    assert finish == ("length" if reason == "length" else "tool_calls" if calls else "stop")
    assert sum("role" in c["choices"][0]["delta"] for c in chunks) == 1
