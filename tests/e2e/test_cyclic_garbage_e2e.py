"""An answered request leaves nothing for the cyclic garbage collector.

A request's objects (the Exchange, Starlette's Request, uvicorn's cycle, the
upstream call) must be freed by reference counting once it is answered. One
reference cycle among them kept every request's ~35 objects alive until a
collection: a gen-0 collection every ~70 small requests, each then freeing the
backlog on some request's path (3.5 ms at its 90th percentile under W1 at one
client), and ~10% more CPU per small request (bench/README.md, "Cyclic garbage").
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import openai
import pytest
from support.fake_ollama import FakeOllama, Reply

MSG: list[Any] = [{"role": "user", "content": "hi"}]
TOOLS: list[Any] = [{"type": "function", "function": {"name": "noop",
                                                      "parameters": {"type": "object"}}}]


@contextmanager
def kept_cyclic_garbage() -> Iterator[list[object]]:
    """What the collector finds unreachable by the end of the block (kept, not freed)."""
    gc.collect()
    flags = gc.get_debug()
    found: list[object] = []
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        yield found
        gc.collect()
        found.extend(gc.garbage)
    finally:
        gc.set_debug(flags)
        gc.garbage.clear()


def _ours(garbage: list[object]) -> list[str]:
    return sorted({type(o).__qualname__ for o in garbage
                   if type(o).__module__.startswith(("proxy.", "starlette.", "uvicorn."))})


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("tools", [False, True], ids=["no-tools", "tools"])
def test_answered_requests_leave_no_cyclic_garbage(
        fake: FakeOllama, client: openai.OpenAI, stream: bool, tools: bool) -> None:
    fake.reply("qwen3:8b", Reply(content=["hello", " there"]))
    extra: dict[str, Any] = {"tools": TOOLS} if tools else {}

    def ask() -> None:
        answer = client.chat.completions.create(model="qwen3:8b", messages=MSG, stream=stream,
                                                **extra)
        text = "".join(c.choices[0].delta.content or "" for c in answer if c.choices) \
            if stream else answer.choices[0].message.content
        assert text == "hello there"

    ask()  # once-per-process work first (the model listing is fetched and cached)
    with kept_cyclic_garbage() as garbage:
        for _ in range(6):  # one after another: all but the last long finished at the end
            ask()
    assert not _ours(garbage), ", ".join(_ours(garbage))


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_answered_responses_requests_leave_no_cyclic_garbage(
        fake: FakeOllama, client: openai.OpenAI, stream: bool) -> None:
    fake.reply("qwen3:8b", Reply(content=["hello", " there"]))

    def ask() -> None:
        answer = client.responses.create(model="qwen3:8b", input="hi", stream=stream)
        if stream:
            kinds = [event.type for event in answer]
            assert kinds[-1] == "response.completed"
        else:
            assert answer.output_text == "hello there"

    ask()
    with kept_cyclic_garbage() as garbage:
        for _ in range(6):
            ask()
    assert not _ours(garbage), ", ".join(_ours(garbage))


@pytest.mark.parametrize("failure", ["unknown model", "upstream 500"])
def test_refused_requests_leave_no_cyclic_garbage(
        fake: FakeOllama, client: openai.OpenAI, failure: str) -> None:
    # An error answer walks the failure path: exceptions hold their frames, the
    # classic source of cycles.
    model = "nosuch:1b" if failure == "unknown model" else "qwen3:8b"
    # Ollama's /v1 error envelope, with Go's trailing newline.
    fake.reply("qwen3:8b", Reply(status=500, body=b'{"error":{"message":"model crashed",'
                                 b'"type":"api_error","param":null,"code":null}}\n'))

    def ask() -> None:
        with pytest.raises(openai.APIStatusError):
            client.with_options(max_retries=0).chat.completions.create(model=model,
                                                                       messages=MSG)

    ask()
    with kept_cyclic_garbage() as garbage:
        for _ in range(6):
            ask()
    assert not _ours(garbage), ", ".join(_ours(garbage))
