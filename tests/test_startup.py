"""The start line: listen address, upstreams, the capabilities file, auth; then each kind."""

from __future__ import annotations

import asyncio
import gc
import logging
from collections.abc import Callable
from pathlib import Path

import pytest
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route
from support.servers import serve

from proxy.app import create_app
from proxy.settings import Settings

KEY = "tsk-start-0123456789"


def _ollama_version() -> Starlette:
    async def version(request: object) -> JSONResponse:
        return JSONResponse({"version": "0.12.3"})
    return Starlette(routes=[Route("/api/version", version)])


def _vllm() -> Starlette:
    async def models(request: object) -> JSONResponse:
        return JSONResponse({"object": "list", "data": [
            {"id": "Qwen/Qwen3-8B", "object": "model", "owned_by": "vllm"}]})

    async def version(request: object) -> JSONResponse:
        return JSONResponse({"version": "0.10.1"})
    return Starlette(routes=[Route("/v1/models", models), Route("/version", version)])


async def test_one_line_at_start_then_each_upstreams_kind(
        caplog: pytest.LogCaptureFixture, caps_path: Path) -> None:
    caplog.set_level(logging.INFO)
    caps_path.write_text('version: 1\nmodels:\n  "qwen3*":\n    tools: native\n'
                         '  "llama3*":\n    tools: "off"\n')
    with serve(_ollama_version(), lifespan="off") as ollama, \
            serve(_vllm(), lifespan="off") as vllm:
        settings = Settings(upstreams=(ollama, vllm), capabilities=str(caps_path),
                            api_keys=(KEY,), port=9123)
        app = create_app(settings)
        async with app.router.lifespan_context(app):
            for _ in range(100):
                if sum("upstream http" in r.getMessage() for r in caplog.records) == 2:
                    break
                await asyncio.sleep(0.05)
    messages = [r.getMessage() for r in caplog.records]
    (start,) = [m for m in messages if m.startswith("toolshim listening")]
    assert "http://127.0.0.1:9123" in start
    assert ollama in start and vllm in start
    assert f"{caps_path} (2 entries)" in start
    assert "auth: on (1 keys)" in start and KEY not in "\n".join(messages)
    assert f"upstream {ollama} is ollama 0.12.3" in messages
    assert f"upstream {vllm} is vllm 0.10.1" in messages


async def test_start_does_not_wait_for_an_upstream_that_never_answers(
        caplog: pytest.LogCaptureFixture, make_settings: Callable[..., Settings]) -> None:
    caplog.set_level(logging.INFO)
    app = create_app(make_settings(upstreams=("http://127.0.0.1:9",)))
    async with app.router.lifespan_context(app):
        assert any(r.getMessage().startswith("toolshim listening") and "auth: off"
                   in r.getMessage() for r in caplog.records)


async def test_a_serving_app_freezes_its_startup_heap_and_a_test_app_does_not(
        make_settings: Callable[..., Settings]) -> None:
    gc.unfreeze()
    thresholds = gc.get_threshold()
    try:
        app = create_app(make_settings(probe=False))
        async with app.router.lifespan_context(app):
            assert gc.get_freeze_count() == 0
        served = create_app(make_settings(probe=False), serving=True)
        async with served.router.lifespan_context(served):
            assert gc.get_freeze_count() > 10_000  # the modules, the app, its services
            assert gc.get_threshold()[0] == 7000  # the young generation, collected less often
    finally:
        gc.unfreeze()
        gc.set_threshold(*thresholds)  # this test process goes on with its own
