from __future__ import annotations

import itertools
import json
from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.transforms.response.assembly import CallAssembly
from proxy.transforms.response.checks import SchemaCache
from proxy.transforms.response.completion import chunks_to_completion, completion_to_chunks
from proxy.types import JSON, Chunk, Stage

T = 1755000000
OFFERED: dict[str, Any] = {
    "get_weather": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
    "get_time": {"type": "object", "properties": {}},
}
TOP = {"id": "chatcmpl-abc", "created": T, "model": "Qwen/Qwen3-8B", "system_fingerprint": "fp_x"}


def assembly(parallel: bool | None = None) -> CallAssembly:
    ids = (f"call_gen{i}" for i in itertools.count())
    return CallAssembly(OFFERED, "drop", {}, parallel, SchemaCache(), lambda: next(ids))


def completion(message: dict[str, Any], finish: str = "tool_calls", **extra: Any) -> dict[str, Any]:
    return {
        **TOP,
        "object": "chat.completion",
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish}],
        **extra,
    }


def wire(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def sdk_accumulate(chunks: list[Chunk]) -> tuple[list[tuple[str, str, str]], str | None, Any]:
    """(calls, finish_reason, content) as openai-python's stream helper builds them."""
    calls: dict[int, dict[str, Any]] = {}
    finish, content = None, None
    for chunk in chunks:
        for choice in chunk["choices"]:
            delta = choice.get("delta") or {}
            if delta.get("content") is not None:
                content = (content or "") + delta["content"]
            for call in delta.get("tool_calls") or []:
                slot = calls.setdefault(
                    call["index"], {"id": call.get("id"), "name": None, "args": ""}
                )
                assert ("id" in call) == (slot["name"] is None)  # id and name once per call
                slot["name"] = slot["name"] or call["function"].get("name")
                slot["args"] += call["function"].get("arguments") or ""
            finish = choice.get("finish_reason") or finish
    assert sorted(calls) == list(range(len(calls)))
    return (
        [(calls[i]["id"], calls[i]["name"], calls[i]["args"]) for i in range(len(calls))],
        finish,
        content,
    )


def test_completion_to_chunks_shapes() -> None:
    source = completion(
        {
            "role": "assistant",
            "content": "",
            "reasoning": "hm",
            "tool_calls": [wire("c1", "get_time", "{}")],
        },
        usage={"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
    )
    chunks = completion_to_chunks(source)
    top = {**TOP, "object": "chat.completion.chunk"}
    assert chunks == [
        {
            **top,
            "choices": [
                {
                    "index": 0,
                    "finish_reason": None,
                    "delta": {
                        "role": "assistant",
                        "content": "",
                        "reasoning": "hm",
                        "tool_calls": [{**wire("c1", "get_time", "{}"), "index": 0}],
                    },
                }
            ],
        },
        {
            **top,
            "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls", "logprobs": None}],
        },
        {**top, "choices": [], "usage": source["usage"]},
    ]


def test_round_trip_keeps_everything() -> None:
    source = completion(
        {"role": "assistant", "content": "", "tool_calls": [wire("c1", "get_time", "{}")]},
        usage={"prompt_tokens": 3},
        vendor_extra={"a": 1},
    )
    assert chunks_to_completion(completion_to_chunks(source), source) == source


def run_completion(completion: JSON, stage: Stage) -> JSON:
    """A non-stream completion through a streaming stage, as the flow runs one: its
    chunks fed and flushed, then merged back."""
    out: list[Chunk] = []
    for chunk in completion_to_chunks(completion):
        out.extend(stage.feed(chunk))
    out.extend(stage.flush())
    return chunks_to_completion(out, completion)


def test_content_null_and_empty_are_kept_apart() -> None:
    for content in (None, "", "hello"):
        source = completion({"role": "assistant", "content": content}, "stop")
        assert chunks_to_completion(completion_to_chunks(source), source) == source


def test_non_stream_through_assembly() -> None:
    source = completion(
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [wire("c1", "nope", "{}"), wire("c2", "get_weather", '{"city":"A"}')],
        }
    )
    result = run_completion(source, assembly())
    assert result["choices"][0]["message"]["tool_calls"] == [
        wire("c2", "get_weather", '{"city":"A"}')
    ]
    assert result["choices"][0]["finish_reason"] == "tool_calls"
    assert result["x_toolshim"]["dropped_calls"] == [{"name": "nope", "reason": "unknown_tool"}]
    assert result["id"] == "chatcmpl-abc"


def test_non_stream_all_dropped_becomes_stop_with_content() -> None:
    source = completion(
        {"role": "assistant", "content": "", "tool_calls": [wire("c1", "nope", "{}")]}
    )
    result = run_completion(source, assembly())
    assert result["choices"][0]["message"] == {"role": "assistant", "content": ""}
    assert result["choices"][0]["finish_reason"] == "stop"


# --- properties --------------------------------------------------------------

_CITY = st.text(alphabet=st.characters(codec="utf-8") | st.sampled_from('"\\{}[],:'), max_size=8)
_VALID = st.one_of(
    st.builds(
        lambda c, extra: ("get_weather", {"city": c, **extra}),
        _CITY,
        st.dictionaries(st.sampled_from(["units", "x"]), st.integers(0, 9), max_size=2),
    ),
    st.just(("get_time", {})),
)


@st.composite
def _arguments_text(draw: st.DrawFn, args: dict[str, Any]) -> str:
    if draw(st.booleans()):
        return orjson.dumps(args).decode()
    return json.dumps(args, ensure_ascii=draw(st.booleans()))


@st.composite
def _stream(draw: st.DrawFn, calls: list[tuple[str, str, str]], finish: str) -> list[Chunk]:
    """Chunks for calls in one of the backend styles, arbitrarily split and grouped."""
    style = draw(st.sampled_from(["incremental", "llamacpp", "ollama", "ollama_legacy"]))
    deltas: list[dict[str, Any]] = []
    for i, (call_id, name, text) in enumerate(calls):
        if style.startswith("ollama"):
            call = {
                "id": call_id,
                "type": "function",
                "function": {"name": name, "arguments": text},
            }
            deltas.append(call if style == "ollama_legacy" else {**call, "index": 0})
            continue
        cuts = sorted(draw(st.sets(st.integers(0, len(text)), max_size=4)) | {0, len(text)})
        parts = [text[a:b] for a, b in itertools.pairwise(cuts)] or [""]
        start: dict[str, Any] = {
            "index": i,
            "id": call_id,
            "type": "function",
            "function": {"name": name},
        }
        if style == "llamacpp":
            start["function"]["arguments"] = parts.pop(0)
        deltas.append(start)
        deltas.extend({"index": i, "function": {"arguments": part}} for part in parts)
    chunks: list[Chunk] = [
        {
            **TOP,
            "object": "chat.completion.chunk",
            "choices": [
                {"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}
            ],
        }
    ]
    while deltas:
        size = draw(st.integers(1, 3))
        group, deltas = deltas[:size], deltas[size:]
        chunks.append(
            {
                **TOP,
                "object": "chat.completion.chunk",
                "choices": [{"index": 0, "delta": {"tool_calls": group}, "finish_reason": None}],
            }
        )
    chunks.append(
        {
            **TOP,
            "object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": {}, "finish_reason": finish}],
        }
    )
    return chunks


def _stream_result(chunks: list[Chunk], parallel: bool | None = None) -> tuple[Any, ...]:
    stage = assembly(parallel)
    return sdk_accumulate([c for chunk in chunks for c in stage.feed(chunk)] + stage.flush())


@settings(max_examples=60, deadline=None)
@given(st.lists(_VALID, max_size=4), st.sampled_from(["stop", "tool_calls"]), st.data())
def test_streamed_equals_non_streamed(
    valid: list[tuple[str, dict[str, Any]]], finish: str, data: st.DataObject
) -> None:
    calls = [
        (f"call_{i}", name, data.draw(_arguments_text(args)))
        for i, (name, args) in enumerate(valid)
    ]
    streamed = _stream_result(data.draw(_stream(calls, finish)))
    message: dict[str, Any] = {"role": "assistant", "content": ""}
    if calls:
        message["tool_calls"] = [wire(*call) for call in calls]
    result = run_completion(completion(message, finish), assembly())["choices"][0]
    whole = [
        (c["id"], c["function"]["name"], c["function"]["arguments"])
        for c in result["message"].get("tool_calls", [])
    ]
    assert streamed == (whole, result["finish_reason"], result["message"]["content"])
    assert whole == calls


_INVALID = st.one_of(
    st.builds(lambda n: ("rm_" + n, "{}"), st.text(max_size=4)),
    st.builds(
        lambda c: ("get_weather", orjson.dumps({"city": c}).decode()[:-1]), _CITY
    ),  # broken JSON
    st.builds(lambda c: ("get_weather", orjson.dumps({"town": c}).decode()), _CITY),
    st.builds(lambda n: ("get_weather", orjson.dumps({"city": n}).decode()), st.integers(-(2**53), 2**53)),
    st.just(("get_time", "[]")),
)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.booleans(), _VALID, _INVALID), max_size=5),
    st.sampled_from(["stop", "tool_calls"]),
    st.data(),
)
def test_drop_keeps_exactly_the_valid_calls(
    mix: list[tuple[bool, Any, Any]], finish: str, data: st.DataObject
) -> None:
    calls, expected = [], []
    for i, (is_valid, (name, args), (bad_name, bad_args)) in enumerate(mix):
        call = (
            (f"call_{i % 3}", name, orjson.dumps(args).decode())
            if is_valid
            else (f"call_{i % 3}", bad_name, bad_args)
        )
        calls.append(call)
        if is_valid:
            expected.append(call[1:])
    got, reason, _ = _stream_result(data.draw(_stream(calls, finish)))
    assert [c[1:] for c in got] == expected
    assert len({c[0] for c in got}) == len(got)
    assert reason == ("tool_calls" if expected else "stop")


@settings(max_examples=30, deadline=None)
@given(st.lists(_VALID, max_size=4), st.data())
def test_parallel_false_emits_at_most_one(
    valid: list[tuple[str, dict[str, Any]]], data: st.DataObject
) -> None:
    calls = [
        (f"call_{i}", name, orjson.dumps(args).decode()) for i, (name, args) in enumerate(valid)
    ]
    got, reason, _ = _stream_result(data.draw(_stream(calls, "tool_calls")), parallel=False)
    assert got == calls[:1]
    assert reason == ("tool_calls" if calls else "stop")
