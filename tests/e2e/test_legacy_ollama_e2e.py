"""Ollama v0.5.12-v0.32.5 wire shapes (docs/backends.md R1/R3 legacy) work the same."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import openai
import pytest
from support.fake_ollama import FakeOllama, Reply, tool_call
from support.servers import serve
from support.tools import WEATHER

from proxy.app import create_app
from proxy.settings import Settings

TOOLS: list[Any] = [WEATHER]
MSG: list[Any] = [{"role": "user", "content": "weather?"}]


@pytest.fixture
def legacy_url(make_settings: Callable[..., Settings]) -> Iterator[tuple[FakeOllama, str]]:
    legacy = FakeOllama(legacy=True)
    legacy.add_model("qwen3:8b")
    legacy.add_model("gemma3:4b", tools=False)
    with serve(legacy.app, lifespan="off") as upstream, \
            serve(create_app(make_settings(upstreams=(upstream,), probe=False))) as url:
        yield legacy, url


def test_legacy_stream_with_repeated_index_zero(
        legacy_url: tuple[FakeOllama, str], new_sdk: Callable[..., openai.OpenAI]) -> None:
    fake, url = legacy_url
    fake.reply("qwen3:8b", Reply(tool_calls=[
        tool_call("get_weather", {"city": "Tokyo"}, "call_aaaaaaaa", 0),
        tool_call("get_weather", {"city": "Paris"}, "call_bbbbbbbb", 0)]))
    calls: dict[int, str] = {}
    finishes = []
    for chunk in new_sdk(url).chat.completions.create(model="qwen3:8b", messages=MSG,
                                                      tools=TOOLS, stream=True):
        for tc in chunk.choices[0].delta.tool_calls or [] if chunk.choices else []:
            calls[tc.index] = calls.get(tc.index, "") + (tc.function.arguments or "")
        if chunk.choices and chunk.choices[0].finish_reason:
            finishes.append(chunk.choices[0].finish_reason)
    assert calls == {0: '{"city":"Tokyo"}', 1: '{"city":"Paris"}'}
    assert finishes == ["tool_calls"]


def test_legacy_refusal_type_is_recognised(
        legacy_url: tuple[FakeOllama, str], new_sdk: Callable[..., openai.OpenAI]) -> None:
    fake, url = legacy_url
    raw = new_sdk(url).chat.completions.with_raw_response.create(
        model="gemma3:4b", messages=MSG, tools=TOOLS)
    assert raw.headers["x-toolshim-rung"] == "emulate"
    assert raw.parse().choices[0].message.content == "Hello from gemma3:4b"
    assert [("tools" in r) for r in fake.chat_requests()] == [True, False]
