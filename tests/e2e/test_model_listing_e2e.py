"""A model pulled after toolshim started is served at once; unknown names cannot flood
the backend with look-ups (proxy/services.py refresh_listing)."""

from __future__ import annotations

import asyncio
import time

import httpx
import openai
import pytest
from support.fake_ollama import FakeOllama

from proxy.backends.routing import LISTING_FLOOR

MSG = [{"role": "user", "content": "hi"}]


def _listings(fake: FakeOllama) -> int:
    return fake.paths.count("/v1/models")


async def test_a_model_pulled_after_start_is_served_at_once(
        aclient: openai.AsyncOpenAI, fake: FakeOllama) -> None:
    first = await aclient.chat.completions.create(model="qwen3:8b", messages=MSG)
    assert first.choices[0].message.content == "Hello from qwen3:8b"
    fake.add_model("llama3.2:3b")  # `ollama pull llama3.2:3b`, right after a listing
    answer = await aclient.chat.completions.create(model="llama3.2:3b", messages=MSG)
    assert answer.choices[0].message.content == "Hello from llama3.2:3b"
    with pytest.raises(openai.NotFoundError) as info:
        await aclient.chat.completions.create(model="never-pulled:1b", messages=MSG)
    assert info.value.code == "model_not_found"


async def test_a_flood_of_unknown_names_makes_few_look_ups(
        aclient: openai.AsyncOpenAI, fake: FakeOllama) -> None:
    await aclient.chat.completions.create(model="qwen3:8b", messages=MSG)
    before, started = _listings(fake), time.monotonic()

    async def unknown(i: int) -> int:
        try:
            await aclient.chat.completions.create(model=f"nope-{i}:1b", messages=MSG)
        except openai.NotFoundError as exc:
            assert exc.code == "model_not_found"
            return 404
        return 200

    statuses = await asyncio.gather(*(unknown(i) for i in range(200)))
    assert set(statuses) == {404}
    elapsed = time.monotonic() - started
    made = _listings(fake) - before
    # One look-up in flight and one waiting at a time, each at least a floor apart.
    assert 1 <= made <= 2 + elapsed / LISTING_FLOOR, (made, elapsed)
    assert made <= 10


async def test_a_client_that_leaves_does_not_cancel_the_shared_look_up(
        asgi: httpx.AsyncClient, fake: FakeOllama) -> None:
    body = {"model": "qwen3:8b", "messages": MSG}
    assert (await asgi.post("/v1/chat/completions", json=body)).status_code == 200
    fake.add_model("phi4:14b")
    leaving = asyncio.create_task(asgi.post("/v1/chat/completions",
                                            json={**body, "model": "phi4:14b"}))
    await asyncio.sleep(0.01)
    leaving.cancel()
    staying = await asgi.post("/v1/chat/completions", json={**body, "model": "phi4:14b"})
    assert staying.status_code == 200
    with pytest.raises(asyncio.CancelledError):
        await leaving
