"""`--no-fast-paths`: the same answers, byte for byte, read the reference way.

Two real apps in process on the same fake Ollama, one with the fast paths (the
relay of plain events, content judged in runs, a whole answer handed on as it
came) and one without (`fast_paths=False`: every chunk decoded and fed through
the stages, `proxy.flow.translate` alone). Whatever the request, the client's
body must be the same bytes: that is what makes the setting a bisection tool.

What differs by nature is normalised: the ids toolshim makes for calls it
recovers from text (random), and the spelling of JSON the fast paths hand on
as the upstream wrote it where the reference re-encodes (Ollama escapes `&`
as `\\u0026` and ends a whole answer with a newline): each JSON document is
respelled by orjson, key order and framing kept. That spelling is also how
the last test sees the setting take effect.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import orjson
import pytest
from support.fake_ollama import FakeOllama, Reply, tool_call
from support.inprocess import InProcessApps

from proxy.settings import Settings

WEATHER: dict[str, Any] = {"type": "function", "function": {
    "name": "get_weather", "parameters": {"type": "object", "properties": {
        "city": {"type": "string"}}, "required": ["city"]}}}
PROSE = ["Sunny", " in Oslo", ", 21 degrees", ".\n", "Rain", " tomorrow."]


@pytest.fixture
async def pair(make_settings: Callable[..., Settings]
               ) -> AsyncIterator[tuple[httpx.AsyncClient, httpx.AsyncClient]]:
    apps = InProcessApps(make_settings)
    try:
        yield await apps.open(), await apps.open(fast_paths=False)
    finally:
        await apps.close()


async def _bodies(pair: tuple[httpx.AsyncClient, httpx.AsyncClient],
                  body: dict[str, Any]) -> tuple[bytes, bytes]:
    out = []
    for http in pair:
        response = await http.post("/v1/chat/completions", json=body)
        assert response.status_code == 200, response.text
        out.append(response.content)
    return out[0], out[1]


REQUESTS: list[tuple[str, Reply, dict[str, Any]]] = [
    ("plain", Reply(content=PROSE), {}),
    ("tools offered", Reply(content=PROSE), {"tools": [WEATHER]}),
    ("usage asked", Reply(content=PROSE), {"stream_options": {"include_usage": True}}),
    ("a call", Reply(content=["Let me look."],
                     tool_calls=[tool_call("get_weather", {"city": "Oslo"})]),
     {"tools": [WEATHER]}),
    ("a call in text", Reply(content=["<tool_call>\n", '{"name": "get_weather", ',
                                      '"arguments": {"city": "Oslo"}}\n', "</tool_call>"]),
     {"tools": [WEATHER]}),
    ("reasoning", Reply(content=["<think>", "plan", "</think>", "Sunny."]), {}),
]


@pytest.mark.parametrize("stream", [True, False])
@pytest.mark.parametrize(("name", "reply", "extra"), REQUESTS, ids=[r[0] for r in REQUESTS])
async def test_with_and_without_fast_paths_the_client_gets_the_same_bytes(
        fake: FakeOllama, pair: tuple[httpx.AsyncClient, httpx.AsyncClient], stream: bool,
        name: str, reply: Reply, extra: dict[str, Any]) -> None:
    fake.reply("qwen3:8b", reply)
    if not stream:
        extra = {k: v for k, v in extra.items() if k != "stream_options"}
    body = {"model": "qwen3:8b", "messages": [{"role": "user", "content": "Weather?"}],
            "stream": stream, **extra}
    fast, reference = await _bodies(pair, body)
    if stream:  # every event relayed or written the way the reference writes it
        assert _ids_out(fast) == _ids_out(reference)
    assert _respelled(fast, stream) == _respelled(reference, stream)
    assert (b"data: [DONE]" in fast) is stream


@pytest.mark.parametrize("stream", [True, False])
async def test_the_setting_takes_effect_where_only_the_json_spelling_differs(
        fake: FakeOllama, pair: tuple[httpx.AsyncClient, httpx.AsyncClient],
        stream: bool) -> None:
    # Go's encoder writes "&" as \u0026: relayed (or handed on whole) it stays so; the
    # reference decodes and re-encodes it. The same text either way.
    fake.reply("qwen3:8b", Reply(content=["Salt", " & pepper."]))
    body = {"model": "qwen3:8b", "messages": [{"role": "user", "content": "Spices?"}],
            "stream": stream}
    fast, reference = await _bodies(pair, body)
    assert b"\\u0026" in fast and b"\\u0026" not in reference
    assert fast != reference and _respelled(fast, stream) == _respelled(reference, stream)


DOORS: list[tuple[str, dict[str, Any]]] = [
    ("/v1/responses", {"model": "qwen3:8b", "input": "Weather?"}),
    ("/v1/messages", {"model": "qwen3:8b", "max_tokens": 100,
                      "messages": [{"role": "user", "content": "Weather?"}]}),
    ("/v1beta/models/qwen3:8b:generateContent",
     {"contents": [{"role": "user", "parts": [{"text": "Weather?"}]}]}),
]


@pytest.mark.parametrize("stream", [True, False])
@pytest.mark.parametrize(("path", "body"), DOORS, ids=["responses", "messages", "gemini"])
async def test_every_door_gets_the_same_bytes_from_the_same_reads(
        fake: FakeOllama, pair: tuple[httpx.AsyncClient, httpx.AsyncClient], stream: bool,
        path: str, body: dict[str, Any]) -> None:
    # The Messages and Gemini writers merge the text of one read's events, so what
    # they write follows where the upstream's reads end: the stream comes in one write
    # here, the same read for both apps. Ids and timestamps are made per answer.
    frames = fake._frames("qwen3:8b", Reply(content=PROSE), include_usage=False)
    fake.reply("qwen3:8b", Reply(content=PROSE, raw_events=[b"".join(frames)]))
    if path.endswith("generateContent"):
        path = path.replace("generate", "streamGenerate") + "?alt=sse" if stream else path
    else:
        body = {**body, "stream": stream}
    out = []
    for http in pair:
        response = await http.post(path, json=body)
        assert response.status_code == 200, response.text
        out.append(_ids_out(response.content))
    assert out[0] == out[1]
    assert b"Rain tomorrow." in out[0]


MADE = re.compile(rb'call_[0-9a-f]{24}|(resp|msg)_[0-9a-f]{24,32}|"responseId":"[\w-]+"'
                  rb'|"(created_at|completed_at)":\d+')


def _ids_out(body: bytes) -> bytes:
    """The body with the ids and times toolshim makes per answer (`services.new_call_id`,
    the doors' response and message ids) made equal."""
    return MADE.sub(b"made", body)


def _respelled(body: bytes, stream: bool) -> bytes:
    """The body with each JSON document written by orjson (same keys, same order)."""
    body = _ids_out(body)
    if not stream:
        return orjson.dumps(orjson.loads(body))
    return b"\n\n".join(b"data: " + orjson.dumps(orjson.loads(event[6:]))
                        if event.startswith(b"data: {") else event
                        for event in body.split(b"\n\n"))
