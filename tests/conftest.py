"""Shared fixtures: a fake Ollama on loopback, the real app in process and under uvicorn."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from starlette.applications import Starlette
from support.fake_ollama import FakeOllama
from support.redis_server import RedisServer, running_redis
from support.servers import serve

from proxy.app import create_app
from proxy.settings import Settings


@pytest.fixture
def fake() -> FakeOllama:
    fake = FakeOllama()
    fake.add_model("qwen3:8b")
    fake.add_model("gemma3:4b", tools=False)
    return fake


@pytest.fixture
def fake_url(fake: FakeOllama) -> Iterator[str]:
    with serve(fake.app, lifespan="off") as url:
        yield url


@pytest.fixture
def caps_path(tmp_path: Path) -> Path:
    path = tmp_path / "capabilities.yaml"
    path.write_text("version: 1\n")
    return path


@pytest.fixture
def make_settings(fake_url: str, caps_path: Path) -> Callable[..., Settings]:
    def build(**overrides: Any) -> Settings:
        values: dict[str, Any] = {"upstreams": (fake_url,), "capabilities": str(caps_path),
                                  "reload_interval": 0.0}
        values.update(overrides)
        return Settings.model_validate(values)
    return build


@pytest.fixture
def settings(make_settings: Callable[..., Settings]) -> Settings:
    return make_settings()


@pytest.fixture
def proxy_url(settings: Settings) -> Iterator[str]:
    with serve(create_app(settings)) as url:
        yield url


@pytest.fixture
def new_sdk() -> Iterator[Callable[..., openai.OpenAI]]:
    """Make SDK clients for a base URL; all are closed at teardown (no leaked sockets)."""
    made: list[openai.OpenAI] = []

    def make(url: str, api_key: str = "unused") -> openai.OpenAI:
        made.append(openai.OpenAI(base_url=url + "/v1", api_key=api_key, max_retries=0,
                                  timeout=20))
        return made[-1]

    yield make
    for one in made:
        one.close()


@pytest.fixture
def client(proxy_url: str, new_sdk: Callable[..., openai.OpenAI]) -> openai.OpenAI:
    return new_sdk(proxy_url)


@pytest.fixture
async def app(settings: Settings) -> AsyncIterator[Starlette]:
    application = create_app(settings)
    async with application.router.lifespan_context(application):
        yield application


@pytest.fixture
async def asgi(app: Starlette) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://toolshim") as http:
        yield http


@pytest.fixture
async def aclient(asgi: httpx.AsyncClient) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url="http://toolshim/v1", api_key="unused",
                              http_client=asgi, max_retries=0)


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    """A real redis-server on loopback; the test is skipped where none is installed."""
    with running_redis(tmp_path) as server:
        yield server
