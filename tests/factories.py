"""Builders for what the response side of the tests is made of: chat chunks as a backend
streams them, their SSE frames, and the response stages with ids a test can predict.

Request bodies are not built here: the end-to-end tests send them through the real SDKs,
and the few raw ones differ in what they test. The tool a test offers is in support/tools.py.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

import orjson
from hypothesis import strategies as st
from support.fake_ollama import go_json

from proxy.transforms.response import ResponsePipeline, build_pipeline
from proxy.transforms.response.checks import SchemaCache
from proxy.types import Chunk, Plan, Profile

# What Ollama's /v1 stream repeats on every chunk (ollama/openai/openai.go).
OLLAMA_HEAD: dict[str, Any] = {
    "id": "chatcmpl-527", "object": "chat.completion.chunk", "created": 1755000000,
    "model": "qwen3:8b", "system_fingerprint": "fp_ollama"}


def chunk(delta: dict[str, Any] | None = None, finish: str | None = None, *,
          head: Mapping[str, Any] = OLLAMA_HEAD, **choice: Any) -> Chunk:
    """One streamed chunk whose choice 0 carries `delta`; `choice` adds fields beside it
    (logprobs, a backend's extras)."""
    return {**head, "choices": [{"index": 0, "delta": delta or {}, **choice,
                                 "finish_reason": finish}]}


def text_chunk(content: str | None = None, finish: str | None = None, **delta: Any) -> Chunk:
    """`chunk` for the stages' tests, which mostly stream text: content first."""
    if content is not None:
        delta["content"] = content
    return chunk(delta, finish)


def sse(obj: Any) -> bytes:
    """One SSE event as an OpenAI-compatible backend frames it; bytes pass as they are."""
    return b"data: " + (obj if isinstance(obj, bytes) else orjson.dumps(obj)) + b"\n\n"


def ollama_event(delta: dict[str, Any], finish: str | None = None, usage: bool = False
                 ) -> bytes:
    """One event as Ollama's /v1 writes it, Go's HTML-safe escaping included; `usage`:
    the usage-only chunk that follows the finish when the client asked for it."""
    event = chunk(delta, finish)
    if usage:
        event = {**event, "choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 2}}
    return b"data: " + go_json(event) + b"\n\n"


def ollama_events(*more: bytes) -> st.SearchStrategy[bytes]:
    """Single Ollama /v1 events for the dialect translators' properties: text of any kind,
    the role, the finish, the usage chunk, reasoning beside content, a content that looks
    like the end of a chunk's JSON, and `more` a translator also has to take."""
    return st.one_of(
        st.text(max_size=12).map(lambda t: ollama_event({"content": t})),
        st.sampled_from([
            ollama_event({"role": "assistant", "content": "hi"}),
            ollama_event({}, finish="stop"),
            ollama_event({}, usage=True),
            ollama_event({"content": "x", "reasoning": "y"}),
            ollama_event({"content": '"},"finish_reason":null}]}'}),
            *more]))


def response_pipeline(profile: Profile, tools: Sequence[Any] = (), plan: Plan | None = None
                      ) -> ResponsePipeline:
    """The response stages as the flow builds them, minting call ids from a counter
    (call_gen000...0, ...1, ...) so an expected answer can name them."""
    ids = (f"call_gen{i:020d}" for i in itertools.count())
    return build_pipeline(client_tools=list(tools), profile=profile, plan=plan or Plan(),
                          parallel_tool_calls=None, schema_cache=SchemaCache(),
                          id_factory=lambda: next(ids))
