"""A model name longer than 256 characters is refused on every endpoint that takes one.

Through the real openai SDK against the app under uvicorn: chat, Responses and a
passed-through path each answer 400 invalid_request_error with `param: "model"`,
quote only the name's start, and never reach the backend or a per-model table.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import openai
import pytest
from support.fake_ollama import FakeOllama

LONG = "m" * 300 + "-TAIL-MARKER"


def _refused(exc: openai.BadRequestError) -> None:
    body: Any = exc.body
    assert exc.status_code == 400
    assert body["type"] == "invalid_request_error" and body["param"] == "model"
    assert body["code"] == "model_name_too_long"
    assert "TAIL-MARKER" not in body["message"] and len(body["message"]) < 200
    assert "312 characters" in body["message"]


def test_chat_refuses_a_long_name(client: openai.OpenAI, fake: FakeOllama) -> None:
    for stream in (False, True):
        with pytest.raises(openai.BadRequestError) as caught:
            client.chat.completions.create(model=LONG, stream=stream,
                                           messages=[{"role": "user", "content": "hi"}])
        _refused(caught.value)
    assert fake.requests == []


def test_responses_refuses_a_long_name(client: openai.OpenAI, fake: FakeOllama) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(model=LONG, input="hi")
    _refused(caught.value)
    assert fake.requests == []


def test_passthrough_refuses_a_long_name(client: openai.OpenAI, fake: FakeOllama) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        client.embeddings.create(model=LONG, input="hi")
    _refused(caught.value)
    assert fake.requests == []


def test_256_characters_still_go_through(client: openai.OpenAI, fake: FakeOllama) -> None:
    name = "q" * 256
    fake.add_model(name)
    answer = client.chat.completions.create(model=name,
                                            messages=[{"role": "user", "content": "hi"}])
    assert answer.choices[0].message.content
    assert fake.chat_requests()[-1]["model"] == name


def test_no_per_model_table_keeps_the_name(proxy_url: str,
                                           new_sdk: Callable[..., openai.OpenAI]) -> None:
    sdk = new_sdk(proxy_url)
    for n in range(3):
        with pytest.raises(openai.BadRequestError):
            sdk.chat.completions.create(model=LONG + str(n),
                                        messages=[{"role": "user", "content": "hi"}])
    models = httpx.get(proxy_url + "/admin/models").json()["models"]
    assert not any("TAIL-MARKER" in m["name"] for m in models)
    assert "TAIL-MARKER" not in httpx.get(proxy_url + "/metrics").text


def test_console_validate_refuses_a_long_name(proxy_url: str) -> None:
    answer = httpx.post(proxy_url + "/admin/validate", json={"model": LONG})
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert error["param"] == "model" and "TAIL-MARKER" not in error["message"]


def test_a_backend_listing_a_long_name_does_not_grow_the_listing(
        client: openai.OpenAI, fake: FakeOllama, proxy_url: str) -> None:
    fake.add_model("L" * 300 + "-LISTED-MARKER")
    ids = [m.id for m in client.models.list()]
    assert "qwen3:8b" in ids and not any("LISTED-MARKER" in i for i in ids)
    models = httpx.get(proxy_url + "/admin/models").json()["models"]
    assert not any("LISTED-MARKER" in m["name"] for m in models)
