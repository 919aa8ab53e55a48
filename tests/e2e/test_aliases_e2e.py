"""Aliases on every front door: chat and Responses (Messages: test_messages_e2e.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import openai
from support.fake_ollama import FakeOllama
from support.servers import serve

from proxy.app import create_app


def test_chat_and_responses_serve_an_alias(fake: FakeOllama, make_settings: Callable[..., Any],
                                           new_sdk: Callable[..., openai.OpenAI]) -> None:
    with serve(create_app(make_settings(aliases=(("gpt-*", "qwen3:8b"),)))) as url:
        client = new_sdk(url)
        chat = client.chat.completions.with_raw_response.create(
            model="GPT-5-codex", messages=[{"role": "user", "content": "hi"}])
        responses = client.responses.with_raw_response.create(model="gpt-5", input="hi")
        unknown = client.chat.completions.with_raw_response.create(
            model="qwen3:8b", messages=[{"role": "user", "content": "hi"}])
    assert chat.headers["x-toolshim-model"] == "qwen3:8b"
    assert chat.parse().choices[0].message.content == "Hello from qwen3:8b"
    assert responses.headers["x-toolshim-model"] == "qwen3:8b"
    assert responses.parse().output_text == "Hello from qwen3:8b"
    assert unknown.headers["x-toolshim-model"] == "qwen3:8b"
    assert [r["model"] for r in fake.chat_requests()] == ["qwen3:8b"] * 3
