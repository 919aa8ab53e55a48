from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from factories import OLLAMA_HEAD, chunk
from hypothesis import given
from hypothesis import strategies as st
from support.tools import WEATHER_PARAMETERS

from proxy.transforms.response.assembly import CallAssembly
from proxy.transforms.response.checks import SchemaCache
from proxy.types import Chunk, InvalidPolicy, Observation

T = 1755000000
OFFERED: dict[str, Any] = {"get_weather": WEATHER_PARAMETERS,
                           "get_time": {"type": "object", "properties": {}}}


def _ids() -> Iterator[str]:
    return (f"call_gen{i:020d}" for i in itertools.count())


def assembly(
    policy: InvalidPolicy = "drop",
    parallel: bool | None = None,
    rename: dict[str, str] | None = None,
) -> CallAssembly:
    ids = _ids()
    return CallAssembly(OFFERED, policy, rename or {}, parallel, SchemaCache(), lambda: next(ids))


def ollama(delta: dict[str, Any], finish: str | None = None, model: str = "qwen3:8b") -> Chunk:
    """Ollama /v1 chunk (R3)."""
    return chunk(delta, finish, head={**OLLAMA_HEAD, "model": model})


def vllm(delta: dict[str, Any], finish: str | None = None) -> Chunk:
    """vLLM chunk (R5), with its vendor extras."""
    choice: dict[str, Any] = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
    if finish is not None:
        choice["stop_reason"] = None
    return {
        "id": "chatcmpl-abc",
        "object": "chat.completion.chunk",
        "created": T,
        "model": "Qwen/Qwen3-8B",
        "choices": [choice],
    }


def ollama_call(
    name: str, arguments: str, call_id: str | None = "call_k3x9a0qz", index: int | None = 0
) -> dict[str, Any]:
    call: dict[str, Any] = {}
    if call_id is not None:
        call["id"] = call_id
    if index is not None:
        call["index"] = index
    call["type"] = "function"
    call["function"] = {"name": name, "arguments": arguments}
    return call


def run(stage: CallAssembly, chunks: list[Chunk], flush: bool = True) -> list[Chunk]:
    out = [c for chunk in chunks for c in stage.feed(chunk)]
    return out + (stage.flush() if flush else [])


def calls_of(chunks: list[Chunk]) -> list[dict[str, Any]]:
    """Tool calls accumulated by index, the way the OpenAI SDK does it."""
    acc: dict[int, dict[str, Any]] = {}
    for part in chunks:
        for choice in part["choices"]:
            for call in (choice.get("delta") or {}).get("tool_calls") or []:
                slot = acc.setdefault(call["index"], {"id": None, "name": None, "arguments": ""})
                slot["id"] = slot["id"] or call.get("id")
                fn = call.get("function") or {}
                slot["name"] = slot["name"] or fn.get("name")
                slot["arguments"] += fn.get("arguments") or ""
    assert sorted(acc) == list(range(len(acc)))
    return [acc[i] for i in range(len(acc))]


def finish_of(chunks: list[Chunk]) -> tuple[str | None, Chunk]:
    found = [
        (c["choices"][0]["finish_reason"], c)
        for c in chunks
        if c["choices"] and c["choices"][0].get("finish_reason")
    ]
    assert len(found) == 1
    return found[0]


def test_ollama_current_single_call_passes_unchanged() -> None:
    chunks = [
        ollama(
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [ollama_call("get_weather", '{"city":"Tokyo"}')],
            }
        ),
        ollama({}, "tool_calls"),
        {
            **ollama({}),
            "choices": [],
            "usage": {"prompt_tokens": 120, "completion_tokens": 18, "total_tokens": 138},
        },
    ]
    stage = assembly()
    out = run(stage, chunks)
    assert out[0] == ollama({"role": "assistant", "content": ""})
    assert out[1] == ollama({"tool_calls": [ollama_call("get_weather", '{"city":"Tokyo"}')]})
    assert out[2:] == chunks[1:]
    assert stage.observations == []
    assert stage.counts().as_wire() == {"kept": 1, "dropped": 0, "repaired": 0, "kept_invalid": 0}


def test_ollama_several_calls_all_index_zero_in_one_chunk() -> None:
    chunk = ollama(
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                ollama_call("get_weather", '{"city":"Tokyo"}', "call_a"),
                ollama_call("get_weather", '{"city":"Paris"}', "call_a"),  # repeated id
                ollama_call("get_time", "{}", None),
            ],
        }
    )
    out = run(assembly(), [chunk, ollama({}, "tool_calls")])
    assert calls_of(out) == [
        {"id": "call_a", "name": "get_weather", "arguments": '{"city":"Tokyo"}'},
        {
            "id": "call_gen00000000000000000000",
            "name": "get_weather",
            "arguments": '{"city":"Paris"}',
        },
        {"id": "call_gen00000000000000000001", "name": "get_time", "arguments": "{}"},
    ]
    assert finish_of(out)[0] == "tool_calls"


def test_ollama_legacy_without_index_new_id_per_chunk_and_stop() -> None:
    legacy = {"role": "assistant", "content": ""}
    chunks = [
        ollama(
            {**legacy, "tool_calls": [ollama_call("get_weather", '{"city":"A"}', "call_1", None)]}
        ),
        ollama(
            {**legacy, "tool_calls": [ollama_call("get_weather", '{"city":"B"}', "call_2", None)]}
        ),
        ollama(legacy, "stop"),  # < v0.5.12 said stop after tool calls
    ]
    out = run(assembly(), chunks)
    assert [c["id"] for c in calls_of(out)] == ["call_1", "call_2"]
    assert finish_of(out)[1] == ollama(legacy, "tool_calls")


def test_vllm_incremental_fragments_and_extras() -> None:
    chunks = [
        vllm({"role": "assistant", "content": ""}),
        vllm(
            {
                "tool_calls": [
                    {
                        "id": "chatcmpl-tool-9f2c4e1a7b3d",
                        "type": "function",
                        "index": 0,
                        "function": {"name": "get_weather"},
                    }
                ]
            }
        ),
        vllm({"tool_calls": [{"index": 0, "function": {"arguments": '{"city": "'}}]}),
        vllm({"tool_calls": [{"index": 0, "function": {"arguments": 'Tokyo"}'}}]}),
        vllm({}, "tool_calls"),
    ]
    out = run(assembly(), chunks)
    assert out[0] == chunks[0]
    assert calls_of(out) == [
        {
            "id": "chatcmpl-tool-9f2c4e1a7b3d",
            "name": "get_weather",
            "arguments": '{"city": "Tokyo"}',
        }
    ]
    assert out[-1] == chunks[-1]  # stop_reason and logprobs survive
    assert len(out) == 3


def test_openai_parallel_calls_complete_when_the_next_starts() -> None:
    stage = assembly()
    first = [
        vllm({"role": "assistant", "content": None}),
        vllm(
            {
                "tool_calls": [
                    {
                        "index": 0,
                        "id": "call_A",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": ""},
                    }
                ]
            }
        ),
        vllm({"tool_calls": [{"index": 0, "function": {"arguments": '{"city":"X"}'}}]}),
    ]
    assert len(run(stage, first, flush=False)) == 1  # only the role chunk: the call is held
    started = stage.feed(
        vllm(
            {
                "tool_calls": [
                    {
                        "index": 1,
                        "id": "call_B",
                        "type": "function",
                        "function": {"name": "get_time", "arguments": ""},
                    }
                ]
            }
        )
    )
    assert calls_of(started) == [
        {"id": "call_A", "name": "get_weather", "arguments": '{"city":"X"}'}
    ]
    rest = run(
        stage,
        [
            vllm({"tool_calls": [{"index": 1, "function": {"arguments": "{}"}}]}),
            vllm({}, "tool_calls"),
        ],
    )
    assert rest[0]["choices"][0]["delta"]["tool_calls"][0]["index"] == 1
    assert calls_of(started + rest)[1] == {"id": "call_B", "name": "get_time", "arguments": "{}"}


def test_llamacpp_start_delta_carries_arguments() -> None:
    call_id = "aB3dE5fG7hI9jK1lM3nO5pQ7rS9tU1vW"
    chunks = [
        vllm(
            {
                "tool_calls": [
                    {
                        "index": 0,
                        "id": call_id,
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"ci'},
                    }
                ]
            }
        ),
        vllm({"tool_calls": [{"index": 0, "function": {"arguments": 'ty":"Oslo"}'}}]}),
        vllm({}, "tool_calls"),
    ]
    out = run(assembly(), chunks)
    assert calls_of(out) == [{"id": call_id, "name": "get_weather", "arguments": '{"city":"Oslo"}'}]


def test_content_with_tool_part_leaves_first() -> None:
    chunk = vllm(
        {
            "content": "Let me check.",
            "tool_calls": [
                {
                    "index": 0,
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": ""},
                }
            ],
        }
    )
    out = assembly().feed(chunk)
    assert out == [vllm({"content": "Let me check."})]


def test_invalid_calls_dropped_and_finish_becomes_stop() -> None:
    stage = assembly()
    out = run(
        stage,
        [
            ollama(
                {
                    "tool_calls": [
                        ollama_call("rm_rf", "{}"),
                        ollama_call("get_weather", '{"town":"x"}'),
                    ]
                }
            ),
            ollama({}, "tool_calls"),
        ],
    )
    assert calls_of(out) == []
    reason, finish = finish_of(out)
    assert reason == "stop"
    assert finish["x_toolshim"]["dropped"] == 2
    assert stage.observations == [
        Observation("qwen3:8b", "call_dropped", {"name": "rm_rf", "reason": "unknown_tool"}),
        Observation(
            "qwen3:8b",
            "call_dropped",
            {"name": "get_weather", "reason": "schema: 'city' is a required property"},
        ),
    ]


@pytest.mark.parametrize("garbage", [
    {"index": "a", "function": None},
    {"index": 0, "function": "get_weather"},
    {"index": 0, "function": {"name": 7, "arguments": "{}"}},
    {"index": 0, "id": ["x"], "function": {"arguments": "{}"}},
    "get_weather",
    None,
])
def test_a_malformed_delta_is_counted_as_dropped_not_skipped(garbage: Any) -> None:
    stage = assembly()
    out = run(stage, [
        ollama({"tool_calls": [garbage, ollama_call("get_weather", '{"city":"Oslo"}')]}),
        ollama({}, "tool_calls"),
    ])
    assert [c["name"] for c in calls_of(out)] == ["get_weather"]  # the good call survives
    reason, finish = finish_of(out)
    assert reason == "tool_calls"
    assert finish["x_toolshim"]["dropped"] == 1
    assert finish["x_toolshim"]["dropped_calls"] == [{"name": "", "reason": "malformed"}]


def test_empty_diffs_are_not_malformed() -> None:
    # llama.cpp streams deltas with nothing in them; Ollama's legacy calls have no index.
    stage = assembly()
    out = run(stage, [
        ollama({"tool_calls": [{"index": 0, "function": {"arguments": ""}}, {}]}),
        ollama({"tool_calls": [ollama_call("get_weather", '{"city":"Oslo"}', index=None)]}),
        ollama({"tool_calls": [{"index": 0, "id": None, "function": {"name": None}}]}),
        ollama({}, "tool_calls"),
    ])
    assert [c["name"] for c in calls_of(out)] == ["get_weather"]
    _, finish = finish_of(out)
    assert "x_toolshim" not in finish


def test_repair_policy_records_fixes() -> None:
    stage = assembly("repair")
    out = run(
        stage,
        [
            ollama({"tool_calls": [ollama_call("Get_Weather", "{'city': 'Rome',}")]}),
            ollama({}, "tool_calls"),
        ],
    )
    assert calls_of(out) == [
        {"id": "call_k3x9a0qz", "name": "get_weather", "arguments": '{"city":"Rome"}'}
    ]
    assert finish_of(out)[1]["x_toolshim"]["repaired"] == 1
    assert stage.observations == [
        Observation(
            "qwen3:8b",
            "call_repaired",
            {"name": "get_weather", "fixes": ["name_case", "single_quotes", "trailing_comma"]},
        )
    ]


def test_keep_policy_passes_invalid_without_annotation() -> None:
    stage = assembly("keep")
    out = run(stage, [ollama({"tool_calls": [ollama_call("rm_rf", "{bad")]}), ollama({}, "stop")])
    assert calls_of(out) == [{"id": "call_k3x9a0qz", "name": "rm_rf", "arguments": "{bad"}]
    assert "x_toolshim" not in finish_of(out)[1]
    assert stage.counts().as_wire()["kept_invalid"] == 1


def test_rename_is_reversed() -> None:
    stage = assembly(rename={"weather_v2": "get_weather"})
    out = run(
        stage,
        [ollama({"tool_calls": [ollama_call("weather_v2", '{"city":"A"}')]}), ollama({}, "stop")],
    )
    assert calls_of(out)[0]["name"] == "get_weather"


def test_parallel_false_keeps_only_the_first_surviving_call() -> None:
    stage = assembly(parallel=False)
    out = run(
        stage,
        [
            ollama(
                {
                    "tool_calls": [
                        ollama_call("nope", "{}", "c0"),
                        ollama_call("get_weather", '{"city":"A"}', "c1"),
                        ollama_call("get_time", "{}", "c2"),
                    ]
                }
            ),
            ollama({}, "tool_calls"),
        ],
    )
    assert [c["id"] for c in calls_of(out)] == ["c1"]
    assert [d["reason"] for d in stage.counts().as_wire()["dropped_calls"]] == [
        "unknown_tool",
        "parallel_tool_calls=false",
    ]


def test_length_drops_the_cut_off_call() -> None:
    out = run(
        assembly(),
        [
            vllm(
                {
                    "tool_calls": [
                        {
                            "index": 0,
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "get_weather", "arguments": '{"city":"Li'},
                        }
                    ]
                }
            ),
            vllm({}, "length"),
        ],
    )
    assert calls_of(out) == []
    reason, finish = finish_of(out)
    assert reason == "length"
    assert finish["x_toolshim"]["dropped_calls"] == [{"name": "get_weather", "reason": "truncated"}]


@pytest.mark.parametrize("arguments", ['{"city":"Li', "", '{"city": ['])
def test_stream_without_finish_flushes_and_synthesizes(arguments: str) -> None:
    stage = assembly()
    ok = vllm(
        {
            "tool_calls": [
                {
                    "index": 0,
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city":"A"}'},
                }
            ]
        }
    )
    cut = vllm(
        {
            "tool_calls": [
                {
                    "index": 1,
                    "id": "c2",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": arguments},
                }
            ]
        }
    )
    out = run(stage, [ok, cut])
    assert [c["id"] for c in calls_of(out)] == ["c1"]
    reason, finish = finish_of(out)
    assert reason == "tool_calls"
    assert {k: finish[k] for k in ("id", "model", "created")} == {
        "id": "chatcmpl-abc",
        "model": "Qwen/Qwen3-8B",
        "created": T,
    }
    assert stage.counts().as_wire()["dropped_calls"] == [{"name": "get_weather", "reason": "truncated"}]
    assert stage.flush() == []


def test_content_only_stream_is_untouched() -> None:
    chunks = [vllm({"role": "assistant", "content": ""}), vllm({"content": "Hi"}), vllm({}, "stop")]
    assert run(assembly(), chunks) == chunks


def test_empty_stream_flushes_nothing() -> None:
    assert assembly().flush() == []


def test_other_choices_pass_through() -> None:
    chunk = vllm({"tool_calls": [ollama_call("get_weather", '{"city":"A"}')]})
    other = {"index": 1, "delta": {"content": "x"}, "finish_reason": None}
    chunk["choices"].append(other)
    out = run(assembly(), [chunk])
    assert any(other in c["choices"] for c in out)
    assert (
        calls_of([{**c, "choices": c["choices"][:1]} for c in out if c["choices"]])[0]["name"]
        == "get_weather"
    )


def test_finish_in_the_same_chunk_as_the_last_fragment() -> None:
    out = run(
        assembly(),
        [
            vllm(
                {
                    "tool_calls": [
                        {
                            "index": 0,
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "get_time"},
                        }
                    ]
                }
            ),
            vllm({"tool_calls": [{"index": 0, "function": {"arguments": "{}"}}]}, "tool_calls"),
        ],
    )
    assert calls_of(out) == [{"id": "c1", "name": "get_time", "arguments": "{}"}]
    assert out[-1]["choices"][0] == {
        "index": 0,
        "delta": {},
        "logprobs": None,
        "finish_reason": "tool_calls",
        "stop_reason": None,
    }


def test_inputs_are_not_mutated() -> None:
    chunks = [
        ollama(
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [ollama_call("Get_Weather", "{'city': 'A'}"), ollama_call("x", "{}")],
            }
        ),
        ollama({}, "tool_calls"),
    ]
    before = orjson.dumps(chunks)
    run(assembly("repair"), chunks)
    assert orjson.dumps(chunks) == before


def test_empty_fragment_after_a_whole_call_is_ignored() -> None:
    stage = assembly()
    out = run(
        stage,
        [
            vllm({"tool_calls": [ollama_call("get_time", "{}", "c1")]}),
            vllm({"tool_calls": [{"index": 0, "function": {"arguments": ""}}]}),
            vllm({}, "tool_calls"),
        ],
    )
    assert calls_of(out) == [{"id": "c1", "name": "get_time", "arguments": "{}"}]
    assert stage.counts().as_wire()["dropped"] == 0


def test_a_new_id_without_a_name_does_not_split_a_call() -> None:
    out = run(
        assembly(),
        [
            vllm({"tool_calls": [{"index": 0, "id": "c1", "function": {"name": "get_weather"}}]}),
            vllm({"tool_calls": [{"index": 0, "id": "c2", "function": {"arguments": '{"city":'}}]}),
            vllm({"tool_calls": [{"index": 0, "id": "c3", "function": {"arguments": '"A"}'}}]}),
            vllm({}, "tool_calls"),
        ],
    )
    assert calls_of(out) == [{"id": "c1", "name": "get_weather", "arguments": '{"city":"A"}'}]


def test_native_object_arguments_become_text() -> None:
    call = {"id": "c1", "index": 0, "function": {"name": "get_weather", "arguments": {"city": "A"}}}
    out = run(assembly(), [ollama({"tool_calls": [call]}), ollama({}, "stop")])
    assert calls_of(out) == [{"id": "c1", "name": "get_weather", "arguments": '{"city":"A"}'}]


# --- llama-cpp-python: every argument fragment repeats the call's id and name ----------


def llamacpp_python(delta: dict[str, Any], finish: str | None = None) -> Chunk:
    """llama-cpp-python 0.3.x chunk with a named tool_choice: nulls spelled out."""
    full = {"role": None, "content": None, "function_call": None, "tool_calls": None, **delta}
    return {"id": "chatcmpl-a45c", "object": "chat.completion.chunk", "created": T,
            "model": "smollm2-135m-instruct",
            "choices": [{"index": 0, "finish_reason": finish, "logprobs": None, "delta": full}]}


LLAMA_ID = "call__0_get_weather_cmpl-a45c"


def _repeating(fragments: list[str], call_id: str = LLAMA_ID) -> list[Chunk]:
    return [llamacpp_python({"function_call": {"name": "get_weather", "arguments": f},
                             "tool_calls": [{"index": 0, "id": call_id, "type": "function",
                                             "function": {"name": "get_weather",
                                                          "arguments": f}}]})
            for f in fragments]


def test_fragments_repeating_id_and_name_continue_the_call() -> None:
    fragments = ["{", ' "', "city", '":', ' "', "Paris", '"', " }"]
    chunks = [llamacpp_python({"role": "assistant"}), *_repeating(fragments),
              llamacpp_python({}, "tool_calls")]
    stage = assembly()
    out = run(stage, chunks)
    assert calls_of(out) == [{"id": LLAMA_ID, "name": "get_weather",
                              "arguments": '{ "city": "Paris" }'}]
    assert finish_of(out)[0] == "tool_calls"
    assert stage.counts().dropped == 0


def test_same_id_after_a_whole_call_is_a_new_call() -> None:
    # Ollama may send two whole calls with one id: the second is not a continuation.
    chunks = [ollama({"tool_calls": [ollama_call("get_weather", '{"city":"A"}')]}),
              ollama({"tool_calls": [ollama_call("get_weather", '{"city":"B"}')]}),
              ollama({}, "tool_calls")]
    out = run(assembly(), chunks)
    assert [c["arguments"] for c in calls_of(out)] == ['{"city":"A"}', '{"city":"B"}']


def _openai_style(fragments: list[str]) -> list[Chunk]:
    head = {"index": 0, "id": LLAMA_ID, "type": "function",
            "function": {"name": "get_weather", "arguments": ""}}
    return [vllm({"tool_calls": [head]}),
            *[vllm({"tool_calls": [{"index": 0, "function": {"arguments": f}}]})
              for f in fragments]]


def _vllm_style(fragments: list[str]) -> list[Chunk]:
    head = {"index": 0, "id": LLAMA_ID, "type": "function", "function": {"name": "get_weather"}}
    return [vllm({"tool_calls": [head]}),
            *[vllm({"tool_calls": [{"index": 0, "function": {"arguments": f}}]})
              for f in fragments]]


@given(st.lists(st.integers(min_value=1, max_value=40), max_size=6),
       st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12))
def test_three_streaming_styles_assemble_to_the_same_call(cuts: list[int], city: str) -> None:
    arguments = orjson.dumps({"city": city}).decode()
    bounds = sorted({0, len(arguments), *(c for c in cuts if c < len(arguments))})
    fragments = [arguments[a:b] for a, b in itertools.pairwise(bounds)]
    expected = [{"id": LLAMA_ID, "name": "get_weather", "arguments": arguments}]
    for style in (_repeating, _openai_style, _vllm_style):
        out = run(assembly(), [*style(fragments), vllm({}, "tool_calls")])
        assert calls_of(out) == expected, style.__name__


def test_correct_policy_repairs_first_and_reports_what_it_refused() -> None:
    stage = assembly("correct")
    out = run(
        stage,
        [
            ollama({"tool_calls": [ollama_call("Get_Weather", '{"city": "Rome"}'),
                                   ollama_call("rm_rf", '{"path": "/"}'),
                                   ollama_call("get_weather", '{"town": "x"}')]}),
            ollama({}, "tool_calls"),
        ],
    )
    assert [c["name"] for c in calls_of(out)] == ["get_weather"]
    assert stage.counts().rejected == (
        ("rm_rf", '{"path": "/"}', "unknown_tool"),
        ("get_weather", '{"town": "x"}', "schema: 'city' is a required property"),
    )


def test_correct_policy_reports_a_cut_off_call_and_never_completes_it() -> None:
    stage = assembly("correct")
    out = run(stage, [ollama({"tool_calls": [ollama_call("get_weather", '{"city": "Ro')]}),
                      ollama({}, "length")])
    assert calls_of(out) == []
    assert stage.counts().rejected == (("get_weather", '{"city": "Ro', "truncated"),)


def test_other_policies_report_no_rejected_calls() -> None:
    stage = assembly("drop")
    run(stage, [ollama({"tool_calls": [ollama_call("rm_rf", "{}")]}), ollama({}, "stop")])
    assert stage.counts().dropped == 1 and stage.counts().rejected == ()
