"""RedisState and SharedLimiter in process: several apps, one real redis-server.

Each app is the real app (lifespan included) driven through ASGI with the SDK;
the backend is the fake Ollama on loopback. Process-level scenarios (several
replicas, workers, killing Redis) live in tests/e2e/test_redis_e2e.py.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import openai
import orjson
import pytest
import redis
from starlette.applications import Starlette
from support.capfile import learned
from support.fake_ollama import FakeOllama
from support.polling import until_async
from support.redis_server import RedisServer, running_redis
from support.tools import WEATHER

from proxy.app import create_app
from proxy.services import Services
from proxy.settings import Settings, redact_url
from proxy.state.codec import SCHEMA_VERSION

pytestmark = pytest.mark.redis

TOOLS: list[Any] = [WEATHER]
MSG: list[Any] = [{"role": "user", "content": "hi"}]


class App:
    def __init__(self, app: Starlette, sdk: openai.AsyncOpenAI, http: httpx.AsyncClient) -> None:
        self.app, self.sdk, self.http = app, sdk, http

    @property
    def svc(self) -> Services:
        services: Services = self.app.state.services
        return services

    async def ask(self, model: str, tools: bool = True) -> str | None:
        extra: dict[str, Any] = {"tools": TOOLS} if tools else {}
        reply = await self.sdk.chat.completions.create(model=model, messages=MSG, **extra)
        return reply.choices[0].message.content


@asynccontextmanager
async def running(settings: Settings) -> AsyncIterator[App]:
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://toolshim") as http:
            sdk = openai.AsyncOpenAI(base_url="http://toolshim/v1", api_key="unused",
                                     http_client=http, max_retries=0)
            yield App(app, sdk, http)


@pytest.fixture
def fleet_settings(fake_url: str, redis_server: RedisServer,
                   tmp_path: Path) -> Callable[..., Settings]:
    made = iter(range(100))

    def build(**overrides: Any) -> Settings:
        caps = tmp_path / f"replica{next(made)}.yaml"
        caps.write_text("version: 1\n")
        values: dict[str, Any] = {"upstreams": (fake_url,), "capabilities": str(caps),
                                  "reload_interval": 0.0, "probe": False,
                                  "redis_url": redis_server.url}
        values.update(overrides)
        return Settings.model_validate(values)
    return build


async def test_a_refusal_learned_by_one_app_reaches_the_other(
        fleet_settings: Callable[..., Settings], fake: FakeOllama, rdb: redis.Redis) -> None:
    a_settings, b_settings = fleet_settings(), fleet_settings()
    async with running(a_settings) as a, running(b_settings) as b:
        assert a.svc.state.status() == b.svc.state.status() == "ok"
        assert await a.ask("gemma3:4b") == "Hello from gemma3:4b"
        assert [("tools" in r) for r in fake.chat_requests()] == [True, False]  # A paid once
        await until_async(lambda: b.svc.store.profile("gemma3:4b").tool_support == "refused",
                          within=1.0, what="B to apply A's fact")
        assert await b.ask("gemma3:4b") == "Hello from gemma3:4b"
        assert len(fake.chat_requests()) == 3
        assert "tools" not in fake.chat_requests()[-1]  # B went straight to the right rung
        await until_async(lambda: "gemma3:4b" in learned(b_settings.capabilities),
                          what="B's file to gain the fact")
    entry = learned(b_settings.capabilities)["gemma3:4b"]
    assert entry["tool_support"] == "refused" and entry["source"] == "runtime_error"
    stored = orjson.loads(rdb.hget("toolshim:facts:gemma3:4b", "tool_support") or b"")
    assert stored["v"] == SCHEMA_VERSION and stored["fields"] == {"tool_support": "refused"}
    assert stored["replica"] and stored["upstream"] == redact_url(a_settings.upstreams[0])


async def test_a_starting_app_loads_every_fact_first(
        fleet_settings: Callable[..., Settings], fake: FakeOllama) -> None:
    async with running(fleet_settings()) as a:
        await a.ask("gemma3:4b")
        await until_async(lambda: a.svc.state.status() == "ok" and not a.svc.background,
                          within=2.0, what="A to share its fact")
    later = fleet_settings()
    async with running(later) as c:
        assert c.svc.store.profile("gemma3:4b").tool_support == "refused"  # before any request
        await c.ask("gemma3:4b")
        assert "tools" not in fake.chat_requests()[-1]
        await until_async(lambda: "gemma3:4b" in learned(later.capabilities),
                          what="the later app's file to gain the fact")


def _garbage(model: str, **change: Any) -> bytes:
    value = {"v": SCHEMA_VERSION, "model": model, "fields": {"tools": "off"},
             "source": "runtime_error", "at": "2026-11-24T10:00:00Z", "evidence": None,
             "upstream": None, "replica": "elsewhere:1:aa"}
    return orjson.dumps({**value, **change})


async def test_garbage_in_redis_is_ignored_with_a_log_line(
        fleet_settings: Callable[..., Settings], fake: FakeOllama, rdb: redis.Redis,
        caplog: pytest.LogCaptureFixture) -> None:
    rdb.hset("toolshim:facts:qwen3:8b", mapping={
        "tools": b"{not json", "x": _garbage("qwen3:8b", at="yesterday"),
        "y": _garbage("qwen3:8b", v=99)})
    settings = fleet_settings()
    async with running(settings) as a:
        assert a.svc.state.status() == "ok"
        rdb.publish("toolshim:facts", b"\xff\xfe garbage")
        rdb.publish("toolshim:facts", _garbage("gemma3:4b", fields={"tools": "upside-down"}))
        rdb.publish("toolshim:facts", _garbage("phi3:mini"))  # a good one after the bad ones
        # A fact from a replica on an older toolshim (`tools: off`) is read as the fact.
        await until_async(lambda: a.svc.store.profile("phi3:mini").tool_support == "refused",
                          within=2.0, what="the listener to apply a fact after the garbage")
        assert a.svc.store.profile("qwen3:8b").tool_support is None
        assert await a.ask("qwen3:8b") == "Hello from qwen3:8b"
        assert "tools" in fake.chat_requests()[-1]
        scrape = (await a.http.get("/metrics")).text
        assert "toolshim_redis_malformed_values_total 5.0" in scrape
        assert "toolshim_redis_degraded 0.0" in scrape
        await until_async(lambda: "phi3:mini" in learned(settings.capabilities),
                          what="the file to gain the fact")
    assert set(learned(settings.capabilities)) == {"phi3:mini"}
    lines = [r.getMessage() for r in caplog.records if "malformed value" in r.getMessage()]
    assert len(lines) == 5 and any("schema version 99" in line for line in lines)


async def test_a_model_is_probed_once_per_fleet(
        fleet_settings: Callable[..., Settings], fake: FakeOllama) -> None:
    async with AsyncExitStack() as stack:
        apps = [await stack.enter_async_context(running(fleet_settings(probe=True)))
                for _ in range(3)]
        answers = await asyncio.gather(*(app.ask("gemma3:4b") for app in apps))
        assert answers == ["Hello from gemma3:4b"] * 3
        shows = [p for p in fake.paths if p == "/api/show"]
        assert len(shows) == 1
        assert all("tools" not in r for r in fake.chat_requests())  # no refusal anywhere
        assert all(app.svc.store.profile("gemma3:4b").tool_support == "none" for app in apps)


async def test_redis_away_at_start_and_back_later(
        fleet_settings: Callable[..., Settings], fake: FakeOllama,
        redis_server: RedisServer, caplog: pytest.LogCaptureFixture) -> None:
    settings = fleet_settings(shared_limits=True, max_concurrency=4)
    redis_server.kill()
    async with running(settings) as a:
        assert a.svc.state.status() == "degraded"
        for _ in range(3):
            assert await a.ask("gemma3:4b") == "Hello from gemma3:4b"
        ready = (await a.http.get("/readyz")).json()
        assert ready["status"] == "ready" and ready["redis"] == "degraded"
        assert "toolshim_redis_degraded 1.0" in (await a.http.get("/metrics")).text
        warnings = [r for r in caplog.records if "redis unavailable" in r.getMessage()]
        assert len(warnings) == 1  # once, not per request
        redis_server.start()
        await until_async(lambda: a.svc.state.status() == "ok", what="a resync with Redis")
        rdb = redis.Redis.from_url(redis_server.url)
        try:
            assert rdb.hget("toolshim:facts:gemma3:4b", "tool_support")  # learned meanwhile, published
        finally:
            rdb.close()
        assert (await a.http.get("/readyz")).json()["redis"] == "ok"


async def test_a_hung_redis_costs_a_request_at_most_a_short_timeout(
        fleet_settings: Callable[..., Settings], fake: FakeOllama,
        redis_server: RedisServer) -> None:
    async with running(fleet_settings(shared_limits=True)) as a:
        await a.ask("qwen3:8b")
        redis_server.pause()
        try:
            started = time.monotonic()
            answers = await asyncio.gather(*(a.ask("gemma3:4b") for _ in range(4)))
            assert answers == ["Hello from gemma3:4b"] * 4
            assert time.monotonic() - started < 5  # 0.5 s Redis timeouts, never the request's
            assert a.svc.state.status() == "degraded"
            assert (await a.http.get("/readyz")).json()["redis"] == "degraded"
        finally:
            redis_server.resume()
        await until_async(lambda: a.svc.state.status() == "ok",
                          what="a resync with Redis after the pause")
        assert await a.ask("gemma3:4b") == "Hello from gemma3:4b"


async def test_permits_of_a_dead_replica_expire(
        fleet_settings: Callable[..., Settings], fake_url: str, rdb: redis.Redis) -> None:
    settings = fleet_settings(shared_limits=True, max_concurrency=1, queue_timeout=5)
    key = f"toolshim:permits:{fake_url}"
    async with running(settings) as a:
        seconds, micros = rdb.time()
        rdb.zadd(key, {"dead-replica": seconds * 1000 + micros // 1000 + 400})
        started = time.monotonic()
        assert await a.ask("qwen3:8b", tools=False) == "Hello from qwen3:8b"
        assert time.monotonic() - started >= 0.2  # it waited for the dead permit to expire
        assert rdb.zcard(key) == 0  # and gave its own back


async def test_a_full_fleet_queue_times_out_with_429(
        fleet_settings: Callable[..., Settings], fake_url: str, rdb: redis.Redis) -> None:
    settings = fleet_settings(shared_limits=True, max_concurrency=1, queue_timeout=0.3)
    seconds, _ = rdb.time()
    rdb.zadd(f"toolshim:permits:{fake_url}", {"busy-replica": (seconds + 60) * 1000})
    async with running(settings) as a:
        with pytest.raises(openai.RateLimitError) as caught:
            await a.ask("qwen3:8b", tools=False)
        assert caught.value.response.headers["retry-after"] == "1"
        assert caught.value.code == "upstream_busy"


async def test_redis_auth_goes_through_the_url_and_stays_out_of_logs(
        make_settings: Callable[..., Settings], tmp_path: Path,
        caplog: pytest.LogCaptureFixture) -> None:
    with running_redis(tmp_path, ("--requirepass", "s3cret-pw")) as server:
        good = server.url.replace("redis://", "redis://:s3cret-pw@")
        async with running(make_settings(redis_url=good)) as a:
            assert a.svc.state.status() == "ok"
        bad = server.url.replace("redis://", "redis://:wrong-pw@")
        async with running(make_settings(redis_url=bad)) as b:
            assert b.svc.state.status() == "degraded"
            assert await b.ask("qwen3:8b") == "Hello from qwen3:8b"
    logged = " ".join(r.getMessage() for r in caplog.records)
    assert "redis unavailable" in logged
    assert "s3cret-pw" not in logged and "wrong-pw" not in logged
