"""A fleet of toolshim processes sharing through a real redis-server.

Every replica is `python -m proxy --workers 2 --redis-url ...` with its own
capabilities file; the backend is the fake Ollama, whose recorded requests
show what each replica sent.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from support.capfile import learned_entry
from support.fake_ollama import FakeOllama, Reply
from support.inflight import InFlight
from support.polling import until
from support.redis_server import RedisServer
from support.replicas import Replica, start_replicas, stop_all
from support.servers import serve
from support.tools import WEATHER

pytestmark = pytest.mark.redis

TOOLS: list[Any] = [WEATHER]
MSG: list[Any] = [{"role": "user", "content": "hi"}]
WORKERS = ("--workers", "2")


@pytest.fixture
def inflight(fake: FakeOllama) -> InFlight:
    return InFlight(fake.app)


@pytest.fixture
def backend(inflight: InFlight) -> Iterator[str]:
    with serve(inflight, lifespan="off") as url:
        yield url


@pytest.fixture
def fleet(backend: str, redis_server: RedisServer,
          tmp_path: Path) -> Iterator[Callable[..., list[Replica]]]:
    started: list[Replica] = []

    def start(count: int, *extra: str) -> list[Replica]:
        replicas = start_replicas(count, backend, redis_server.url, tmp_path, [*WORKERS, *extra])
        started.extend(replicas)
        return replicas

    yield start
    stop_all(started)


def _ask(sdk: openai.OpenAI, model: str, tools: bool = True) -> str | None:
    extra: dict[str, Any] = {"tools": TOOLS} if tools else {}
    reply = sdk.chat.completions.create(model=model, messages=MSG, **extra)
    return reply.choices[0].message.content


@pytest.mark.parametrize("count", [2, 3])
def test_a_refusal_learned_by_one_replica_reaches_the_others(
        count: int, fleet: Callable[..., list[Replica]], fake: FakeOllama,
        new_sdk: Callable[..., openai.OpenAI]) -> None:
    first, *others = fleet(count, "--no-probe")
    assert _ask(new_sdk(first.url), "gemma3:4b") == "Hello from gemma3:4b"
    assert ["tools" in r for r in fake.chat_requests()] == [True, False]  # refused, retried
    time.sleep(1.0)  # the target: every replica applies a fact within 1 s

    before = len(fake.chat_requests())
    for replica in others:
        sdk = new_sdk(replica.url)
        for _ in range(4):  # both workers of each replica
            assert _ask(sdk, "gemma3:4b") == "Hello from gemma3:4b"
    sent = fake.chat_requests()[before:]
    assert len(sent) == 4 * len(others)  # no refused attempt anywhere
    assert not any("tools" in body for body in sent)
    for replica in others:
        assert learned_entry(replica.caps, "gemma3:4b", within=10)["tool_support"] == "refused"


def test_fleet_wide_concurrency_holds_across_processes(
        fleet: Callable[..., list[Replica]], fake: FakeOllama, inflight: InFlight,
        new_sdk: Callable[..., openai.OpenAI]) -> None:
    fake.reply("qwen3:8b", Reply(content=["slow"], delay=0.25))
    replicas = fleet(2, "--shared-limits", "--max-concurrency", "2", "--queue-timeout", "30")
    sdks = [new_sdk(r.url) for r in replicas]

    def one(n: int) -> str | None:
        return _ask(sdks[n % 2], "qwen3:8b", tools=False)

    with ThreadPoolExecutor(16) as pool:
        answers = list(pool.map(one, range(16)))
    assert answers == ["slow"] * 16
    assert inflight.total == 16
    assert inflight.most == 2  # four worker processes, yet never more than two at once


def _redis_field(replica: Replica) -> str | None:
    try:
        body = httpx.get(replica.url + "/readyz", timeout=5).json()
    except httpx.TransportError:
        return None
    assert body["status"] == "ready"
    return str(body.get("redis"))


def test_redis_killed_then_restarted(
        fleet: Callable[..., list[Replica]], fake: FakeOllama, redis_server: RedisServer,
        new_sdk: Callable[..., openai.OpenAI]) -> None:
    fake.add_model("phi3:mini", tools=False)
    first, second = fleet(2, "--no-probe", "--shared-limits")
    sdk_a, sdk_b = new_sdk(first.url), new_sdk(second.url)
    assert _ask(sdk_a, "qwen3:8b") == _ask(sdk_b, "qwen3:8b") == "Hello from qwen3:8b"

    redis_server.kill()
    with ThreadPoolExecutor(8) as pool:  # every request is still answered
        answers = list(pool.map(lambda n: _ask([sdk_a, sdk_b][n % 2], "qwen3:8b"), range(16)))
    assert answers == ["Hello from qwen3:8b"] * 16
    assert _ask(sdk_a, "phi3:mini") == "Hello from phi3:mini"  # learned while Redis is away
    for replica in (first, second):
        until(lambda r=replica: all(_redis_field(r) == "degraded" for _ in range(4)), within=10,
              what=f"{replica.url} to report Redis degraded")
    scrape = httpx.get(first.url + "/metrics", timeout=5).text
    assert "toolshim_redis_degraded 1.0" in scrape

    redis_server.start()
    learned_entry(second.caps, "phi3:mini", within=10)  # the fact reached B
    before = len(fake.chat_requests())
    assert _ask(sdk_b, "phi3:mini") == "Hello from phi3:mini"
    assert len(fake.chat_requests()) == before + 1
    assert "tools" not in fake.chat_requests()[-1]
    for replica in (first, second):
        until(lambda r=replica: all(_redis_field(r) == "ok" for _ in range(4)), within=10,
              what=f"{replica.url} to resync with Redis")
