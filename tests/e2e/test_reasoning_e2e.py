"""`reasoning: move` is the default: <think> text reaches clients as reasoning_content."""

from __future__ import annotations

import time
from typing import Any

import openai
import pytest
from support.fake_ollama import FakeOllama, Reply
from support.polling import until

MSG: list[Any] = [{"role": "user", "content": "hi"}]


def _ask(client: openai.OpenAI, stream: bool) -> tuple[str, str]:
    if not stream:
        message = client.chat.completions.create(model="qwen3:8b", messages=MSG).choices[0].message
        return message.content or "", (message.model_extra or {}).get("reasoning_content") or ""
    content = reasoning = ""
    for chunk in client.chat.completions.create(model="qwen3:8b", messages=MSG, stream=True):
        for choice in chunk.choices:
            content += choice.delta.content or ""
            reasoning += (choice.delta.model_extra or {}).get("reasoning_content") or ""
    return content, reasoning


@pytest.mark.parametrize("stream", [False, True])
def test_reasoning_moves_by_default(fake: FakeOllama, client: openai.OpenAI,
                                    stream: bool) -> None:
    fake.reply("qwen3:8b", Reply(content=["<think>", "the user greets", "</think>", "Hello!"]))
    assert _ask(client, stream) == ("Hello!", "the user greets")


def test_a_stream_that_opens_plainly_is_relayed_as_is(fake: FakeOllama,
                                                      client: openai.OpenAI) -> None:
    # Decided on the first content: later tags are the answer's own text.
    fake.reply("qwen3:8b", Reply(content=["Use ", "<think>", " tags"]))
    assert _ask(client, True) == ("Use <think> tags", "")


def test_reply_starting_inside_reasoning_is_moved_and_learned(
        fake: FakeOllama, client: openai.OpenAI, caps_path: Any) -> None:
    fake.reply("qwen3:8b", Reply(content=["The user greets.</think>Hello!"]))
    assert _ask(client, False) == ("Hello!", "The user greets.")
    until(lambda: "starts_in_reasoning: true" in caps_path.read_text(),
          what="learned: starts_in_reasoning written")
    time.sleep(0.1)  # the store reloads the file
    fake.replies.clear()
    fake.reply("qwen3:8b", Reply(content=["The user", " greets again.", "</think>", "Hi!"]))
    assert _ask(client, True) == ("Hi!", "The user greets again.")
