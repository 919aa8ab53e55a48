"""/readyz answers anyone whether it is ready; details only to a key holder."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import httpx
from support.servers import serve

from proxy.app import create_app
from proxy.settings import Settings

KEY = "tsk-ready-0123456789"


def test_readyz_hides_paths_and_errors_without_a_key(
        make_settings: Callable[..., Settings], caps_path: Path, fake_url: str) -> None:
    caps_path.write_text('version: 1\nmodels:\n  "qwen3*":\n    tools: sometimes\n')
    with serve(create_app(make_settings(api_keys=(KEY,)))) as url:
        anonymous = httpx.get(url + "/readyz")
        wrong = httpx.get(url + "/readyz", headers={"authorization": "Bearer nope-nope-nope"})
        keyed = httpx.get(url + "/readyz", headers={"authorization": f"Bearer {KEY}"})
    assert anonymous.status_code == keyed.status_code == 200
    assert anonymous.json() == wrong.json() == {"status": "ready", "capabilities": "error"}
    assert str(caps_path.name) not in anonymous.text and fake_url not in anonymous.text
    assert "capabilities.yaml:4" in keyed.json()["capabilities"]
    assert keyed.json()["upstreams_answering"] == [fake_url]


def test_readyz_without_keys_configured_shows_everything(proxy_url: str, fake_url: str) -> None:
    ready = httpx.get(proxy_url + "/readyz").json()
    assert ready == {"status": "ready", "capabilities": "ok", "upstreams_answering": [fake_url]}
