"""A stage needs only `feed`/`flush`: the fast paths' hooks (`PlainHooks`) are optional.

A stage without them, or one that keeps their defaults, vouches for nothing: the
fast paths feed it every chunk, so the client gets what the reference decoder
writes, the stage's changes included, whether the stream would have been relayed
unread (no tools) or judged in runs.
"""

from __future__ import annotations

import itertools
from typing import Any

import orjson
import pytest

from proxy.api.chat.answer import frame
from proxy.flow.fast_answer import FastCompletionTranslator
from proxy.flow.fast_stream import FastSseTranslator
from proxy.flow.translate import ChunkOut, CompletionTranslator, SseTranslator, Translator
from proxy.transforms.response import ResponsePipeline, build_pipeline
from proxy.transforms.response.checks import SchemaCache
from proxy.transforms.response.hooks import PlainHooks
from proxy.types import Chunk, Observation, Plan, Profile

BASE = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m"}


class Shouting:
    """A stage with only what `types.Stage` asks: upper-cases content."""

    @property
    def observations(self) -> list[Observation]:
        return []

    def feed(self, chunk: Chunk) -> list[Chunk]:
        choices = [{**c, "delta": {**c["delta"], "content": c["delta"]["content"].upper()}}
                   if isinstance((c.get("delta") or {}).get("content"), str) else c
                   for c in chunk.get("choices") or []]
        return [{**chunk, "choices": choices}]

    def flush(self) -> list[Chunk]:
        return []


class ShoutingWithDefaults(PlainHooks, Shouting):
    """The same stage, inheriting the hooks' defaults without overriding one."""


def _pipeline(stage: Any) -> ResponsePipeline:
    ids = (f"call_{i}" for i in itertools.count())
    built = build_pipeline(client_tools=[], profile=Profile(model="m", reasoning="pass"),
                           plan=Plan(), parallel_tool_calls=None, schema_cache=SchemaCache(),
                           id_factory=lambda: next(ids))
    return ResponsePipeline([stage, *built.stages[:-1]], built.assembly)


def _stream(pieces: list[str]) -> bytes:
    chunks = [{**BASE, "choices": [{"index": 0, "delta": {"content": p}, "finish_reason": None}]}
              for p in pieces]
    chunks.append({**BASE, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    return b"".join(b"data: " + orjson.dumps(c) + b"\n\n" for c in chunks) + b"data: [DONE]\n\n"


def _written(translator: Translator, body: bytes) -> bytes:
    out: list[ChunkOut] = translator.feed(body) + translator.end()
    assert translator.failure is None
    return b"".join(frame(c) for c in out)


@pytest.mark.parametrize("stage", [Shouting, ShoutingWithDefaults])
@pytest.mark.parametrize("decode", [False, True])
def test_a_stage_without_hooks_is_fed_every_chunk_on_the_fast_paths(
        stage: type, decode: bool) -> None:
    body = _stream(["Sunny", " in Oslo."])
    fast = _written(FastSseTranslator(_pipeline(stage()), decode=decode), body)
    assert fast == _written(SseTranslator(_pipeline(stage())), body)
    events = [orjson.loads(e[6:]) for e in fast.split(b"\n\n") if e.startswith(b"data: {")]
    assert "".join(c["delta"].get("content") or "" for e in events
                   for c in e["choices"]) == "SUNNY IN OSLO."


@pytest.mark.parametrize("stage", [Shouting, ShoutingWithDefaults])
def test_a_whole_answer_through_a_stage_without_hooks_is_not_handed_on_as_it_came(
        stage: type) -> None:
    answer = orjson.dumps({**BASE, "object": "chat.completion", "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "Sunny."},
         "finish_reason": "stop"}]})
    fast, reference = (cls(_pipeline(stage())) for cls in (FastCompletionTranslator,
                                                            CompletionTranslator))
    assert _written(fast, answer) == _written(reference, answer)
    assert fast.verbatim is None and b"SUNNY." in _written(
        FastCompletionTranslator(_pipeline(stage())), answer)
