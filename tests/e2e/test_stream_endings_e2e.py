"""Honest endings through the openai SDK: a broken upstream answer never looks finished.

Everything the upstream sent before the break reaches the client, then one
error; never a `finish_reason` the upstream did not send, never garbage as data.
"""

from __future__ import annotations

from typing import Any

import openai
import pytest
from factories import chunk, sse
from support.fake_ollama import FakeOllama, Reply, tool_call
from support.tools import WEATHER

MSG = [{"role": "user", "content": "What is the weather in Paris?"}]


def event(delta: dict[str, Any], finish: str | None = None) -> bytes:
    return sse(chunk(delta, finish))


def read_until_error(stream: openai.Stream[Any]) -> tuple[str, list[str], openai.APIError]:
    """The text and finish reasons the SDK yielded before it raised."""
    text: list[str] = []
    finishes: list[str] = []
    with pytest.raises(openai.APIError) as info:
        for chunk in stream:
            for choice in chunk.choices:
                text.append(choice.delta.content or "")
                if choice.finish_reason:
                    finishes.append(choice.finish_reason)
    return "".join(text), finishes, info.value


@pytest.mark.parametrize("tools", [None, [WEATHER]], ids=["no-tools", "tools"])
def test_a_reset_delivers_everything_received_then_the_error_only(
        fake: FakeOllama, client: openai.OpenAI, tools: Any) -> None:
    fake.reply("qwen3:8b", Reply(content=["It is ", "sunny ", "in Paris."], reset_after=2))
    extra = {"tools": tools} if tools else {}
    for _ in range(5):  # the loss was intermittent: 3 runs in 5
        stream = client.chat.completions.create(model="qwen3:8b", messages=MSG, stream=True,
                                                **extra)
        text, finishes, error = read_until_error(stream)
        assert (text, finishes) == ("It is sunny ", [])
        assert "closed the connection" in error.message


def test_an_invalid_chunk_is_an_error_not_a_finish(fake: FakeOllama,
                                                    client: openai.OpenAI) -> None:
    fake.reply("qwen3:8b", Reply(raw_events=[
        event({"role": "assistant", "content": "Checking."}),
        event({"content": "", "tool_calls": 5}),
        event({}, "stop"), b"data: [DONE]\n\n"]))
    stream = client.chat.completions.create(model="qwen3:8b", messages=MSG, stream=True)
    text, finishes, error = read_until_error(stream)
    assert (text, finishes) == ("Checking.", [])
    assert "invalid chunk" in error.message


def test_a_cut_call_with_tools_offered_gives_no_made_up_finish(
        fake: FakeOllama, client: openai.OpenAI) -> None:
    call = tool_call("get_weather", '{"city": "Par')
    fake.reply("qwen3:8b", Reply(raw_events=[
        event({"role": "assistant", "content": "Let me check."}),
        event({"content": "", "tool_calls": [call]})]))  # closed: no finish, no [DONE]
    stream = client.chat.completions.create(model="qwen3:8b", messages=MSG, stream=True,
                                            tools=[WEATHER])
    text, finishes, error = read_until_error(stream)
    assert (text, finishes) == ("Let me check.", [])
    assert "before it finished" in error.message


@pytest.mark.parametrize("garbage", [b'{"id": "c", "choices": [', b"{not json}", b"oops"])
def test_fast_path_garbage_is_an_error_event_not_data(
        fake: FakeOllama, client: openai.OpenAI, garbage: bytes) -> None:
    fake.reply("qwen3:8b", Reply(raw_events=[
        event({"role": "assistant", "content": "ok"}), sse(garbage),
        event({"content": "never"}), event({}, "stop"), b"data: [DONE]\n\n"]))
    stream = client.chat.completions.create(model="qwen3:8b", messages=MSG, stream=True)
    text, finishes, error = read_until_error(stream)
    assert (text, finishes) == ("ok", [])
    assert error.message == "upstream sent data that is not a JSON chunk"


@pytest.mark.parametrize("body", [b'{"choices":[{"message":5}]}', b'{"choices":[7]}',
                                  b'{"choices":[{"message":{"tool_calls":5}}]}'])
def test_a_non_stream_body_that_is_not_a_completion_is_a_502(
        fake: FakeOllama, client: openai.OpenAI, body: bytes) -> None:
    fake.reply("qwen3:8b", Reply(body=body))
    with pytest.raises(openai.APIStatusError) as info:
        client.chat.completions.create(model="qwen3:8b", messages=MSG, tools=[WEATHER])
    assert info.value.status_code == 502
    assert info.value.body == {"message": "upstream sent an answer that is not a chat completion",
                               "type": "api_error", "param": None, "code": "upstream_invalid"}
