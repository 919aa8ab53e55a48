"""An upstream URL with user:password: used to connect, never shown or written.

`--upstream http://admin:s3cretpw@host` sends Basic credentials; every place
that shows or stores the URL (/v1/models, /readyz, /admin/models, the
`learned:` entries of capabilities.yaml, `toolshim probe`) shows it without them.
"""

from __future__ import annotations

import asyncio
import io
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from ruamel.yaml import YAML
from starlette.applications import Starlette
from support.fake_ollama import FakeOllama

from proxy.app import create_app
from proxy.commands.probe import run_probe_cli
from proxy.settings import Settings

KEY = "sk-admin-key-7373"
AUTH = {"authorization": f"Bearer {KEY}"}
TOOLS = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]


def _with_password(url: str) -> str:
    return url.replace("http://", "http://admin:s3cretpw@")


@pytest.fixture
async def http(fake_url: str, caps_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    settings = Settings.model_validate({
        "upstreams": (_with_password(fake_url),), "capabilities": str(caps_path),
        "reload_interval": 0.0, "api_keys": (KEY,)})
    app: Starlette = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://toolshim",
                                     headers=AUTH, timeout=20) as client:
            yield client


def _clean(text: str) -> None:
    assert "s3cretpw" not in text and "admin:" not in text


async def test_the_credentials_are_sent_upstream(http: httpx.AsyncClient,
                                                 fake: FakeOllama) -> None:
    await http.get("/v1/models")
    assert fake.headers[-1]["authorization"] == "Basic YWRtaW46czNjcmV0cHc="


async def test_models_and_readyz_show_the_url_without_them(http: httpx.AsyncClient,
                                                           fake_url: str) -> None:
    models = await http.get("/v1/models")
    _clean(models.text)
    assert {m["toolshim"]["upstream"] for m in models.json()["data"]} == {fake_url}
    ready = await http.get("/readyz")
    _clean(ready.text)
    assert ready.json()["upstreams_answering"] == [fake_url]


async def test_learned_entries_store_the_url_without_them(http: httpx.AsyncClient,
                                                          caps_path: Path,
                                                          fake_url: str) -> None:
    # gemma3:4b has no tools: the first sight's probe learns `tools: off` from /api/show.
    answer = await http.post("/v1/chat/completions", json={
        "model": "gemma3:4b", "messages": [{"role": "user", "content": "hi"}], "tools": TOOLS})
    assert answer.status_code == 200
    learned: Any = None
    for _ in range(200):  # written by the background keeper, off the request
        learned = (YAML().load(caps_path.read_text()) or {}).get("learned")
        if learned:
            break
        await asyncio.sleep(0.02)
    assert learned["gemma3:4b"]["upstream"] == fake_url
    _clean(caps_path.read_text())
    shown = await http.get("/admin/models")
    _clean(shown.text)
    entry = next(m for m in shown.json()["models"] if m["name"] == "gemma3:4b")
    assert entry["learned"]["upstream"] == entry["upstream"] == fake_url


async def test_an_entry_written_with_them_before_is_shown_without(
        caps_path: Path, fake_url: str) -> None:
    caps_path.write_text(
        'version: 1\nlearned:\n  "qwen3:8b":\n    tools: native\n    source: probe\n'
        f'    at: "2026-11-20T10:00:00Z"\n    upstream: {_with_password(fake_url)}\n')
    settings = Settings.model_validate({
        "upstreams": (fake_url,), "capabilities": str(caps_path), "reload_interval": 0.0})
    app: Starlette = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://toolshim") as http:
            shown = await http.get("/admin/models")
    _clean(shown.text)
    entry = next(m for m in shown.json()["models"] if m["name"] == "qwen3:8b")
    assert entry["learned"]["upstream"] == fake_url


async def test_probe_prints_the_url_without_them(fake: FakeOllama, fake_url: str,
                                                 tmp_path: Path) -> None:
    fake.api_key = "another-key-entirely"  # the listing fails: the probe says where
    out = io.StringIO()
    code = await run_probe_cli([], [_with_password(fake_url)], str(tmp_path / "c.yaml"),
                               True, out)
    assert code != 0
    _clean(out.getvalue())
    assert out.getvalue().startswith(f"{fake_url}: cannot list models")
