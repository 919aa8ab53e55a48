"""A slow stream is relayed from the upstream's read callback, not event by event by a task.

Nothing a client sees tells the two ways apart: the same bytes arrive either way
(test_stream_split_e2e.py). What differs is the proxy's CPU per event, and with it
how long a new stream waits behind a busy core (bench/README.md, W3). This guards
the path from disengaging silently: each piece that arrives while the relay waits
must go through `_Pushed`, in the read callback.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
from support.fake_ollama import FakeOllama, Reply
from support.fake_ollama_native import FakeOllamaNative, NativeReply
from support.servers import serve

from proxy.app import create_app
from proxy.flow import run
from proxy.settings import Settings

MSG: list[Any] = [{"role": "user", "content": "hi"}]
TOOLS: list[Any] = [{"type": "function", "function": {"name": "noop",
                                                      "parameters": {"type": "object"}}}]
PIECES = [f"word{i} " for i in range(20)]


@pytest.fixture
def pushed(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """Every piece handed to the read callback's relay, in order."""
    seen: list[bytes] = []
    relay = run._Pushed.__call__

    def counting(self: run._Pushed, piece: bytes) -> bool:
        seen.append(piece)
        return relay(self, piece)

    monkeypatch.setattr(run._Pushed, "__call__", counting)
    return seen


@pytest.mark.parametrize("tools", [False, True])
def test_a_slow_chat_stream_is_relayed_from_the_read_callback(
        fake: FakeOllama, client: openai.OpenAI, pushed: list[bytes], tools: bool) -> None:
    fake.reply("qwen3:8b", Reply(content=PIECES, delay=0.02))
    extra: dict[str, Any] = {"tools": TOOLS} if tools else {}
    chunks = list(client.chat.completions.create(model="qwen3:8b", messages=MSG, stream=True,
                                                 **extra))
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) \
        == "".join(PIECES)
    # The first piece comes with the headers (the task's); a loaded machine may hand
    # a few more to the task; most of the twenty must take the callback's way.
    assert sum(b"word" in piece for piece in pushed) >= 15


def test_a_slow_responses_stream_is_relayed_from_the_read_callback(
        fake: FakeOllama, client: openai.OpenAI, pushed: list[bytes]) -> None:
    fake.reply("qwen3:8b", Reply(content=PIECES, delay=0.02))
    events = list(client.responses.create(model="qwen3:8b", input="hi", stream=True))
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert text == "".join(PIECES)
    assert sum(b"word" in piece for piece in pushed) >= 15


@pytest.fixture
def native() -> FakeOllamaNative:
    fake = FakeOllamaNative()
    fake.add_model("qwen3:8b")
    return fake


@pytest.fixture
def native_client(native: FakeOllamaNative, caps_path: Path,
                  new_sdk: Callable[..., openai.OpenAI]) -> Iterator[openai.OpenAI]:
    """An SDK client of toolshim sending qwen3 to Ollama's native /api/chat (num_ctx set)."""
    caps_path.write_text('version: 1\nmodels:\n  "qwen3*":\n    num_ctx: 8192\n')
    with serve(native.app, lifespan="off") as native_url:
        settings = Settings.model_validate({"upstreams": (native_url,),
                                            "capabilities": str(caps_path),
                                            "reload_interval": 0.0})
        with serve(create_app(settings)) as url:
            yield new_sdk(url)


@pytest.mark.parametrize("tools", [False, True])
def test_a_slow_native_stream_is_relayed_from_the_read_callback(
        native: FakeOllamaNative, native_client: openai.OpenAI, pushed: list[bytes],
        tools: bool) -> None:
    # Ollama's NDJSON lines are translated in the read callback too (backends/ollama.py).
    native.reply("qwen3:8b", NativeReply(content=PIECES, delay=0.02))
    extra: dict[str, Any] = {"tools": TOOLS} if tools else {}
    chunks = list(native_client.chat.completions.create(
        model="qwen3:8b", messages=MSG, stream=True, stream_options={"include_usage": True},
        **extra))
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) \
        == "".join(PIECES)
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == len(PIECES)
    assert native.native_requests()[-1]["options"]["num_ctx"] == 8192
    assert sum(b"word" in piece for piece in pushed) >= 15


def test_a_garbage_line_in_a_relayed_native_stream_ends_it_after_every_line_before_it(
        native: FakeOllamaNative, native_client: openai.OpenAI, pushed: list[bytes]) -> None:
    # Met in the read callback or by the task (a read may bring a line and the garbage
    # together): the same answer. tests/backends/test_ollama.py pins the callback's way.
    native.reply("qwen3:8b", NativeReply(content=PIECES, delay=0.02, garbage_after=12))
    seen = ""
    with pytest.raises(openai.APIError) as failed:
        for chunk in native_client.chat.completions.create(model="qwen3:8b", messages=MSG,
                                                           stream=True):
            seen += chunk.choices[0].delta.content or "" if chunk.choices else ""
    assert seen == "".join(PIECES[:12])
    assert "not JSON" in failed.value.message
    assert sum(b"word" in piece for piece in pushed) >= 8  # the callback's way
