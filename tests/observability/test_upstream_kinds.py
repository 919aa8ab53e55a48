"""Each upstream is asked what it is once, the answer is logged, and silence is a warning
(proxy/backends/identity.py, proxy/startup.py)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path

import openai
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from support.fake_ollama_native import FakeOllamaNative
from support.inprocess import InProcessApps
from support.servers import free_port, serve

from proxy.settings import Settings

MSG = [{"role": "user", "content": "hi"}]


def _openai_style(*, props: dict[str, object] | None, owner: str) -> Starlette:
    """A llama.cpp server (props) or llama-cpp-python (no /props; owned_by "me")."""
    async def models(request: object) -> JSONResponse:
        return JSONResponse({"object": "list", "data": [
            {"id": "local", "object": "model", "owned_by": owner}]})

    async def show_props(request: object) -> JSONResponse:
        return JSONResponse(props)
    routes = [Route("/v1/models", models)]
    if props is not None:
        routes.append(Route("/props", show_props))
    return Starlette(routes=routes)


async def _wait_for(caplog: pytest.LogCaptureFixture, predicate: Callable[[str], bool]) -> None:
    for _ in range(200):
        if any(predicate(r.getMessage()) for r in caplog.records):
            return
        await asyncio.sleep(0.02)
    raise AssertionError("no such log line")


async def test_api_version_is_asked_once_per_upstream(
        caplog: pytest.LogCaptureFixture, caps_path: Path) -> None:
    caplog.set_level(logging.INFO)
    native = FakeOllamaNative(version="0.12.3")
    native.add_model("qwen3:8b")
    caps_path.write_text('version: 1\nmodels:\n  "qwen3*":\n    num_ctx: 8192\n')
    with serve(native.app, lifespan="off") as url:
        apps = InProcessApps(lambda **o: Settings.model_validate(
            {"upstreams": (url,), "capabilities": str(caps_path), **o}))
        http = await apps.open()
        try:
            sdk = openai.AsyncOpenAI(base_url="http://toolshim/v1", api_key="unused",
                                     http_client=http, max_retries=0)
            # Sent while start-up's own question may still be in flight: shared.
            await asyncio.gather(*(sdk.chat.completions.create(model="qwen3:8b", messages=MSG)
                                   for _ in range(3)))
            await _wait_for(caplog, lambda m: m == f"upstream {url} is ollama 0.12.3")
            await sdk.chat.completions.create(model="qwen3:8b", messages=MSG)
        finally:
            await apps.close()
    assert len(native.native_requests()) == 4  # the adapter did need the kind
    assert native.paths.count("/api/version") == 1


@pytest.mark.parametrize(("props", "owner", "told"), [
    ({"build_info": "b6000-1a2b3c", "total_slots": 1}, "llamacpp", "llama.cpp b6000-1a2b3c"),
    (None, "me", "an OpenAI-compatible server (neither /version nor /props says more)"),
])
async def test_an_openai_style_upstreams_kind_is_logged(
        caplog: pytest.LogCaptureFixture, make_settings: Callable[..., Settings],
        props: dict[str, object] | None, owner: str, told: str) -> None:
    caplog.set_level(logging.INFO)
    with serve(_openai_style(props=props, owner=owner), lifespan="off") as url:
        apps = InProcessApps(make_settings)
        await apps.open(upstreams=(url,))
        try:
            await _wait_for(caplog, lambda m: m == f"upstream {url} is {told}")
        finally:
            await apps.close()
    assert not any("no upstream answered" in r.getMessage() for r in caplog.records)


async def test_no_upstream_answering_at_start_is_one_warning(
        caplog: pytest.LogCaptureFixture, make_settings: Callable[..., Settings]) -> None:
    caplog.set_level(logging.INFO)
    down = [f"http://127.0.0.1:{free_port()}", f"http://127.0.0.1:{free_port()}"]
    apps = InProcessApps(make_settings)
    await apps.open(upstreams=tuple(down), upstream_kinds=((down[1], "openai"),))
    try:
        await _wait_for(caplog, lambda m: m.startswith("no upstream answered at start"))
    finally:
        await apps.close()
    (warning,) = [r for r in caplog.records if "no upstream answered" in r.getMessage()]
    assert warning.levelno == logging.WARNING
    assert down[0] in warning.getMessage() and down[1] in warning.getMessage()


async def test_a_keyed_ollama_gateway_is_asked_with_the_upstreams_key(
        caplog: pytest.LogCaptureFixture, make_settings: Callable[..., Settings],
        monkeypatch: pytest.MonkeyPatch) -> None:
    caplog.set_level(logging.INFO)
    monkeypatch.setenv("GATEWAY_KEY", "gw-key-0123456789")

    async def version(request: Request) -> JSONResponse:
        if request.headers.get("authorization") != "Bearer gw-key-0123456789":
            return JSONResponse({"error": "unauthorized"}, status_code=401)
        return JSONResponse({"version": "0.12.3"})

    with serve(Starlette(routes=[Route("/api/version", version)]), lifespan="off") as url:
        apps = InProcessApps(make_settings)
        await apps.open(upstreams=(url,), upstream_key_envs=((url, "GATEWAY_KEY"),))
        try:
            await _wait_for(caplog, lambda m: m == f"upstream {url} is ollama 0.12.3")
        finally:
            await apps.close()
