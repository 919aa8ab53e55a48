"""Smoke test of the benchmark's fake upstream: its wire shape is Ollama's (R3)."""

from __future__ import annotations

import asyncio
import collections
import gc
import importlib
import re
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import orjson
import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    # bench/ is a directory of scripts, not a package: import it the way run.py does.
    monkeypatch.syspath_prepend(str(BENCH))
    return importlib.import_module("fake_upstream")


@pytest.fixture
async def client(fake: ModuleType) -> AsyncIterator[httpx.AsyncClient]:
    server: asyncio.Server = await fake.start_server("127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=5) as c:
        yield c
    server.close()
    await server.wait_closed()


def _events(body: str) -> list[str]:
    assert body.endswith("\n\n")
    events = body[:-2].split("\n\n")
    assert all(e.startswith("data: ") and "\n" not in e for e in events)
    return [e[len("data: "):] for e in events]


async def _stream(client: httpx.AsyncClient, model: str, **extra: Any) -> list[Any]:
    req = {"model": model, "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    resp = await client.post("/v1/chat/completions", json={**req, **extra})
    assert resp.status_code == 200
    assert resp.headers["content-type"] == "text/event-stream"
    assert resp.headers["transfer-encoding"] == "chunked"
    events = _events(resp.text)
    assert events[-1] == "[DONE]"
    return [orjson.loads(e) for e in events[:-1]]


@pytest.mark.parametrize("model,count", [("bench-chunks-64", 64), ("bench-slow-3", 3),
                                         ("bench-small", 2)])
async def test_stream_framing_matches_ollama_r3(client: httpx.AsyncClient, model: str,
                                                count: int) -> None:
    chunks = await _stream(client, model)
    assert len(chunks) == count + 1
    deltas = [c["choices"][0]["delta"] for c in chunks]
    assert deltas[0]["role"] == "assistant"
    assert all("role" not in d for d in deltas[1:])
    assert all(isinstance(d["content"], str) and d["content"] for d in deltas[:-1])
    assert deltas[-1] == {}
    assert [c["choices"][0]["finish_reason"] for c in chunks] == [None] * count + ["stop"]
    assert len({(c["id"], c["created"]) for c in chunks}) == 1
    assert re.fullmatch(r"chatcmpl-\d{1,3}", chunks[0]["id"])
    assert all(c["system_fingerprint"] == "fp_ollama" and c["model"] == model
               and c["object"] == "chat.completion.chunk" for c in chunks)


async def test_usage_chunk_follows_finish_chunk(client: httpx.AsyncClient) -> None:
    chunks = await _stream(client, "bench-small", stream_options={"include_usage": True})
    assert chunks[-2]["choices"][0]["finish_reason"] == "stop"
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] == 2


async def test_non_stream_and_discovery(client: httpx.AsyncClient) -> None:
    resp = await client.post("/v1/chat/completions", json={"model": "bench-small"})
    choice = resp.json()["choices"][0]
    assert choice["message"] == {"role": "assistant",
                                 "content": "Hello! How can I help you today?"}
    assert choice["finish_reason"] == "stop"
    show = await client.post("/api/show", json={"model": "bench-chunks-64"})
    assert show.json()["capabilities"] == ["completion", "tools"]
    missing = await client.post("/v1/chat/completions", json={"model": "nosuch"})
    assert missing.status_code == 404
    assert missing.json()["error"]["type"] == "not_found_error"
    models = (await client.get("/v1/models")).json()
    assert "bench-slow-64" in [m["id"] for m in models["data"]]


def test_parse_request_waits_for_a_whole_chunked_body(fake: ModuleType) -> None:
    raw = (b"POST /v1/chat/completions HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
           b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\nGET / HTTP/1.1\r\n\r\n")
    first_end = raw.index(b"GET")
    for cut in range(first_end):
        assert fake.parse_request(bytearray(raw[:cut])) is None
    req, used = fake.parse_request(bytearray(raw))
    assert (req.method, req.path, req.body, used) == (b"POST", b"/v1/chat/completions",
                                                      b"hello world", first_end)


async def test_native_chat_is_ndjson_like_ollama_r4(client: httpx.AsyncClient) -> None:
    req = {"model": "bench-native-64", "messages": [{"role": "user", "content": "hi"}]}
    resp = await client.post("/api/chat", json=req)
    assert resp.status_code == 200
    assert resp.headers["content-type"] == "application/x-ndjson"
    lines = [orjson.loads(line) for line in resp.text.splitlines()]
    assert len(lines) == 65 and resp.text.endswith("\n")
    assert not any(line["done"] for line in lines[:-1])
    assert lines[-1]["done"] is True and lines[-1]["done_reason"] == "stop"
    version = await client.get("/api/version")
    assert version.json() == {"version": "0.33.0"}


async def test_a_slow_native_stream_comes_a_line_per_tick(client: httpx.AsyncClient,
                                                          fake: ModuleType) -> None:
    req = {"model": "bench-native-slow-4", "messages": [{"role": "user", "content": "hi"}]}
    arrived: list[float] = []
    async with client.stream("POST", "/api/chat", json=req) as resp:
        assert resp.headers["content-type"] == "application/x-ndjson"
        async for line in resp.aiter_lines():
            arrived.append(asyncio.get_running_loop().time())
            assert orjson.loads(line)["model"] == "bench-native-slow-4"
    assert len(arrived) == 5  # four content lines and the done line
    assert arrived[-1] - arrived[0] >= 3 * fake.SLOW_INTERVAL


def test_phases_reports_median_time_between_marks_in_the_order_reached(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(BENCH))
    phases = importlib.import_module("phases")
    monkeypatch.setattr(phases, "_SKIP", 0)
    step = {"in": 0, "upstream write": 100_000, "upstream in": 250_000, "out": 300_000,
            "done": 350_000}
    rows = [{k: v + i * 1_000_000 + (i % 3) * 1000 * (k == "out") for k, v in step.items()}
            for i in range(5)]
    monkeypatch.setattr(phases, "finished", rows)
    lines = phases.report().splitlines()
    assert lines[0].startswith("5 requests")
    assert [line.split()[0] for line in lines[1:]] == ["100.0", "150.0", "51.0", "49.0",
                                                         "650.0"]
    assert lines[2].endswith("upstream write -> upstream in")


async def test_floor_forwarder_copies_answers_byte_for_byte(
        fake: ModuleType, client: httpx.AsyncClient) -> None:
    # The floor row is only a floor if it forwards what the fake says, unchanged.
    floor = importlib.import_module("_floor_forwarder")
    app = floor.create_app(str(client.base_url))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                 base_url="http://floor", timeout=5) as through:
        try:
            await _compare(client, through)
        finally:
            await app.wire.aclose()


async def _compare(client: httpx.AsyncClient, through: httpx.AsyncClient) -> None:
    for body in ({"model": "bench-small"}, {"model": "bench-chunks-64", "stream": True}):
        want = await client.post("/v1/chat/completions", json=body)
        got = await through.post("/v1/chat/completions", json=body)
        assert (got.status_code, got.content) == (want.status_code, want.content)
        assert got.headers["content-type"] == want.headers["content-type"]
    assert (await through.get("/healthz")).text == "ok"


@pytest.mark.skipif(shutil.which("nginx") is None, reason="nginx is not installed")
async def test_nginx_target_relays_answers_byte_for_byte(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, client: httpx.AsyncClient) -> None:
    # `run.py --nginx` is a reference for what a hop costs in C: only if it relays
    # the fake's answers unchanged, streams included, with the config run.py writes.
    monkeypatch.syspath_prepend(str(BENCH))
    port = importlib.import_module("procs").free_port()
    conf = importlib.import_module("_nginx").write_nginx_conf(tmp_path, port,
                                                              str(client.base_url))
    nginx = await asyncio.create_subprocess_exec(
        shutil.which("nginx") or "nginx", "-p", str(conf), "-c", f"{conf}/nginx.conf",
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL)
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=5) as through:
            for _ in range(50):  # until nginx listens
                try:
                    await through.get("/healthz")
                    break
                except httpx.ConnectError:
                    await asyncio.sleep(0.1)
            await _compare(client, through)
    finally:
        nginx.terminate()
        await asyncio.wait_for(nginx.wait(), 5)


def test_gc_probe_times_collections_and_names_what_cycles_left(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.syspath_prepend(str(BENCH))
    probe = importlib.import_module("gc_probe")
    monkeypatch.setattr(probe, "_durations", collections.defaultdict(list))
    monkeypatch.setattr(probe, "_full", [])
    monkeypatch.setenv("GC_OUT", str(tmp_path / "gc.txt"))
    monkeypatch.setenv("GC_CENSUS", "1")

    class Knot:
        def __init__(self) -> None:
            self.me = self

    gc.collect()
    flags = gc.get_debug()
    gc.callbacks.append(probe._timed)
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        for _ in range(3):
            Knot()
        gc.collect(0)
        gc.collect(2)
        probe._report()
    finally:
        gc.callbacks.remove(probe._timed)
        gc.set_debug(flags)
        gc.garbage.clear()
    lines = (tmp_path / "gc.txt").read_text().splitlines()
    assert lines[0].startswith("gen0: 1 collections, median ")
    assert any(line.startswith("gen2: 1 collections") for line in lines)
    assert any(re.fullmatch(r"gen2 at \d+\.\d s: \d+\.\d ms", line) for line in lines)
    knots = [line.split() for line in lines if line.endswith("Knot")]
    assert knots and int(knots[0][0]) == 3
