"""Whatever TCP pieces the upstream's SSE bytes arrive in, the client sees the same stream."""

from __future__ import annotations

from typing import Any

import httpx
import openai
import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.fake_ollama import FakeOllama, Reply, T

MSG: list[Any] = [{"role": "user", "content": "hi"}]
BASE = {"id": "chatcmpl-527", "object": "chat.completion.chunk", "created": T,
        "model": "qwen3:8b", "system_fingerprint": "fp_ollama"}


def _frames(pieces: list[str], newline: bytes) -> bytes:
    events = [{**BASE, "choices": [{"index": 0, "delta": {"content": p},
                                    "finish_reason": None}]} for p in pieces]
    events.append({**BASE, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    body = b"".join(b"data: " + orjson.dumps(e) + newline * 2 for e in events)
    return body + b"data: [DONE]" + newline * 2


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pieces=st.lists(st.text(min_size=1, max_size=12), min_size=1, max_size=8),
       cuts=st.lists(st.integers(min_value=1, max_value=5000), max_size=12),
       newline=st.sampled_from([b"\n", b"\r\n"]), tools=st.booleans())
def test_any_split_reaches_the_client_whole(fake: FakeOllama, client: openai.OpenAI,
                                            pieces: list[str], cuts: list[int],
                                            newline: bytes, tools: bool) -> None:
    body = _frames(pieces, newline)
    points = sorted({c % len(body) for c in cuts} - {0})
    writes = [body[a:b] for a, b in zip([0, *points], [*points, len(body)])]
    fake.replies.clear()
    fake.reply("qwen3:8b", Reply(raw_events=writes, delay=0.001))
    extra: dict[str, Any] = {"tools": [{"type": "function", "function": {
        "name": "noop", "parameters": {"type": "object"}}}]} if tools else {}
    chunks = list(client.chat.completions.create(model="qwen3:8b", messages=MSG, stream=True,
                                                 **extra))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "".join(pieces)
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"


NO_ANGLE = st.characters(blacklist_categories=("Cs",), blacklist_characters="<")


@settings(max_examples=20, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pieces=st.lists(st.text(alphabet=NO_ANGLE, min_size=1, max_size=12), min_size=1,
                       max_size=8),
       cuts=st.lists(st.integers(min_value=1, max_value=5000), max_size=12),
       delay=st.sampled_from([0.0, 0.002]))
def test_a_plain_stream_reaches_the_client_byte_for_byte_however_it_arrives(
        fake: FakeOllama, proxy_url: str, pieces: list[str], cuts: list[int],
        delay: float) -> None:
    # Reads that come while the relay waits are written from the upstream's read
    # callback, the others by the relay's task (api/chat/answer.py): a plain stream (no
    # tools, no reasoning marker) must be the upstream's own bytes either way.
    body = _frames(pieces, b"\n")
    points = sorted({c % len(body) for c in cuts} - {0})
    fake.replies.clear()
    fake.reply("qwen3:8b", Reply(raw_events=[body[a:b] for a, b in zip(
        [0, *points], [*points, len(body)])], delay=delay))
    answer = httpx.post(f"{proxy_url}/v1/chat/completions", timeout=10, json={
        "model": "qwen3:8b", "messages": MSG, "stream": True})
    assert answer.status_code == 200
    assert answer.content == body
