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
from collections.abc import Callable
from typing import Any

import openai
import pytest
from support.fake_ollama import FakeOllama, Reply

MSG: list[Any] = [{"role": "user", "content": "hi"}]
TOOLS: list[Any] = [{"type": "function", "function": {"name": "noop",
                                                      "parameters": {"type": "object"}}}]


def assert_leaves_no_cycles(ask: Callable[[], None]) -> None:
    """`ask` once (once-per-process work: the model listing is fetched and cached), then
    six times one after another with what the collector finds unreachable kept: none of
    it may be toolshim's, Starlette's or uvicorn's."""
    ask()
    gc.collect()
    flags = gc.get_debug()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        for _ in range(6):  # all but the last long finished by the collection
            ask()
        gc.collect()
        ours = sorted({type(o).__qualname__ for o in gc.garbage
                       if type(o).__module__.startswith(("proxy.", "starlette.", "uvicorn."))})
    finally:
        gc.set_debug(flags)
        gc.garbage.clear()
    assert not ours, ", ".join(ours)


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

    assert_leaves_no_cycles(ask)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_answered_responses_requests_leave_no_cyclic_garbage(
        fake: FakeOllama, client: openai.OpenAI, stream: bool) -> None:
    fake.reply("qwen3:8b", Reply(content=["hello", " there"]))

    def ask() -> None:
        answer = client.responses.create(model="qwen3:8b", input="hi", stream=stream)
        if stream:
            assert [event.type for event in answer][-1] == "response.completed"
        else:
            assert answer.output_text == "hello there"

    assert_leaves_no_cycles(ask)


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

    assert_leaves_no_cycles(ask)


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_a_stream_broken_midway_leaves_no_cyclic_garbage(
        fake: FakeOllama, client: openai.OpenAI, api: str) -> None:
    # The failure is stored (the translator's, the connection's) and raised later:
    # both must not end up held by the traceback that raising them makes.
    fake.reply("qwen3:8b", Reply(content=["one", "two", "three"], reset_after=2))

    def ask() -> None:
        if api == "responses":
            events = list(client.responses.create(model="qwen3:8b", input="hi", stream=True))
            assert events[-1].type == "response.failed"
            return
        stream = client.chat.completions.create(model="qwen3:8b", messages=MSG, stream=True)
        with pytest.raises(openai.APIError):
            for _ in stream:
                pass

    assert_leaves_no_cycles(ask)
