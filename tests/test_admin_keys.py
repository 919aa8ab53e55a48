"""--admin-key: /admin/* and the console's API are not every client's (docs/security.md).

Driven in process through the real app and the edge, against the fake Ollama."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from support.capfile import ONE_LEARNED
from support.fake_ollama import FakeOllama
from support.inprocess import InProcessApps

from proxy.settings import Settings, secrets

CLIENT = "sk-client-0001"
ADMIN = "sk-admin-0002"
OTHER_ADMIN = "sk-admin-0003"
ADMIN_PATHS = [("GET", "/admin/models"), ("GET", "/admin/requests"),
               ("GET", "/admin/capabilities"), ("GET", "/admin/bench"),
               ("POST", "/admin/learned/gemma3:4b/forget"), ("POST", "/admin/validate")]


def _bearer(key: str) -> dict[str, str]:
    return {"authorization": f"Bearer {key}"}


@pytest.fixture
async def apps(make_settings: Callable[..., Settings], caps_path: Path
               ) -> AsyncIterator[Callable[..., Any]]:
    caps_path.write_text(ONE_LEARNED)
    made = InProcessApps(make_settings)
    yield made.open
    await made.close()


@pytest.mark.parametrize(("method", "path"), ADMIN_PATHS)
async def test_a_client_key_is_403_on_admin_and_no_key_401(
        apps: Callable[..., Any], caps_path: Path, method: str, path: str) -> None:
    http = await apps(api_keys=(CLIENT,), admin_keys=(ADMIN, OTHER_ADMIN))
    client = await http.request(method, path, headers=_bearer(CLIENT), json={})
    assert client.status_code == 403
    assert client.json()["error"]["code"] == "admin_key_required"
    assert client.json()["error"]["type"] == "permission_error"
    assert CLIENT not in client.text
    for headers in ({}, _bearer("sk-wrong"), {"authorization": f"Basic {ADMIN}"}):
        missing = await http.request(method, path, headers=headers, json={})
        assert missing.status_code == 401, headers
        assert missing.json()["error"]["code"] == "invalid_api_key"
    assert '"gemma3:4b"' in caps_path.read_text()  # nothing was forgotten


async def test_admin_keys_open_admin_and_every_client_path(apps: Callable[..., Any],
                                                           caps_path: Path) -> None:
    http = await apps(api_keys=(CLIENT,), admin_keys=(ADMIN, OTHER_ADMIN))
    for key in (ADMIN, OTHER_ADMIN):
        assert (await http.get("/admin/models", headers=_bearer(key))).status_code == 200
        assert (await http.get("/v1/models", headers=_bearer(key))).status_code == 200
    assert (await http.get("/v1/models", headers=_bearer(CLIENT))).status_code == 200
    # The console's bench runs its chat with the admin's key, through the client door.
    bench = await http.post("/admin/bench", headers=_bearer(ADMIN),
                            json={"model": "qwen3:8b", "prompt": "hi"})
    assert bench.status_code == 200 and bench.json()["client_got"]["status"] == 200
    forget = await http.post("/admin/learned/gemma3:4b/forget", headers=_bearer(ADMIN))
    assert forget.status_code == 200 and '"gemma3:4b"' not in caps_path.read_text()
    # The page itself holds no data: public, as before.
    assert (await http.get("/ui")).status_code == 200


async def test_admin_keys_alone_leave_the_client_door_as_it_was(
        apps: Callable[..., Any]) -> None:
    http = await apps(admin_keys=(ADMIN,))
    assert (await http.get("/v1/models")).status_code == 200
    assert (await http.get("/admin/models")).status_code == 401
    assert (await http.get("/admin/models", headers=_bearer("made-up"))).status_code == 401
    assert (await http.get("/admin/models", headers=_bearer(ADMIN))).status_code == 200


async def test_without_admin_keys_admin_is_as_today(apps: Callable[..., Any]) -> None:
    open_ = await apps()
    assert (await open_.get("/admin/models")).status_code == 200
    keyed = await apps(api_keys=(CLIENT,))
    assert (await keyed.get("/admin/models")).status_code == 401
    assert (await keyed.get("/admin/models", headers=_bearer(CLIENT))).status_code == 200


async def test_protected_metrics_and_readyz_details_take_an_admin_key(
        apps: Callable[..., Any], fake: FakeOllama) -> None:
    http = await apps(admin_keys=(ADMIN,), protect_metrics=True)
    assert (await http.get("/metrics")).status_code == 401
    assert (await http.get("/metrics", headers=_bearer(ADMIN))).status_code == 200
    keyed = await apps(api_keys=(CLIENT,), admin_keys=(ADMIN,))
    detail = (await keyed.get("/readyz", headers=_bearer(ADMIN))).json()
    assert "upstreams_answering" in detail
    assert "upstreams_answering" not in (await keyed.get("/readyz")).json()


def test_admin_keys_are_masked_like_every_secret(make_settings: Callable[..., Settings]
                                                 ) -> None:
    settings = make_settings(admin_keys=(ADMIN,))
    assert ADMIN in secrets(settings) and ADMIN not in repr(settings)
