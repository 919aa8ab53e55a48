"""An upstream that repeats the credentials it got: no client or console ever sees them.

The fake upstream checks a key and answers a wrong one with a 401 quoting the
Authorization and X-Api-Key headers it received (`FakeOllama.api_key`). What
toolshim sent there is a configured upstream key, the proxy's own key (an
X-Api-Key passes through), or the client's key: each must come back masked as
`[redacted]`, in answers, error events, /admin/requests, /admin/bench and logs.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import orjson
import pytest
from support.fake_ollama import FakeOllama, Reply
from support.inprocess import InProcessApps

from proxy.observability.redact import MASK
from proxy.settings import Settings

UPKEY = "sk-UPSTREAM-SECRET-999"
OWN_KEY = "sk-proxy-own-key-4242"
CLIENT_BEARER = "sk-client-bearer-5151"
CLIENT_X = "sk-client-xapikey-6161"
CHAT = {"model": "qwen3:8b", "messages": [{"role": "user", "content": "hi"}]}


@pytest.fixture
async def start(make_settings: Callable[..., Settings], fake: FakeOllama, fake_url: str,
                monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Callable[..., Any]]:
    """Start the app in process; `upstream_key=True` configures UPKEY for the fake."""
    fake.api_key = "the-key-the-upstream-wants"
    monkeypatch.setenv("TEST_ECHO_UPSTREAM_KEY", UPKEY)
    apps = InProcessApps(make_settings, timeout=20)

    async def make(*, upstream_key: bool = True, **overrides: Any) -> httpx.AsyncClient:
        if upstream_key:
            overrides["upstream_key_envs"] = ((fake_url, "TEST_ECHO_UPSTREAM_KEY"),)
        return await apps.open(**overrides)

    yield make
    await apps.close()


def _masked(text: str, *secrets: str) -> None:
    for secret in secrets:
        assert secret not in text
    assert MASK in text


@pytest.mark.parametrize("stream", [False, True])
async def test_chat_error_masks_the_upstream_key(start: Callable[..., Any], fake: FakeOllama,
                                                 stream: bool) -> None:
    http = await start()
    answer = await http.post("/v1/chat/completions", json={**CHAT, "stream": stream})
    assert answer.status_code == 401
    assert fake.headers[-1]["authorization"] == f"Bearer {UPKEY}"  # it was sent, and echoed
    message = answer.json()["error"]["message"]
    assert message == f"bad key: Bearer {MASK} / "


async def test_responses_error_masks_the_upstream_key(start: Callable[..., Any]) -> None:
    http = await start()
    answer = await http.post("/v1/responses", json={"model": "qwen3:8b", "input": "hi"})
    assert answer.status_code == 401
    _masked(answer.text, UPKEY)


async def test_passthrough_error_masks_the_upstream_key(start: Callable[..., Any]) -> None:
    http = await start()
    answer = await http.post("/v1/embeddings", json={"model": "qwen3:8b", "input": "hi"},
                             headers={"accept-encoding": "gzip"})
    assert answer.status_code == 401
    assert answer.json()["error"]["message"] == f"bad key: Bearer {MASK} / "


@pytest.mark.parametrize("endpoint", ["/v1/chat/completions", "/v1/responses"])
async def test_a_mid_stream_error_event_is_masked(start: Callable[..., Any], fake: FakeOllama,
                                                  endpoint: str) -> None:
    fake.api_key = None
    fake.reply("qwen3:8b", Reply(raw_events=[
        # vLLM's mid-stream error form: the error event, then [DONE].
        b'data: {"error":{"message":"upstream auth Bearer ' + UPKEY.encode()
        + b' expired","type":"BadRequestError","param":null,"code":400}}\n\n',
        b"data: [DONE]\n\n"]))
    http = await start()
    body = CHAT if endpoint.endswith("completions") else {"model": "qwen3:8b", "input": "hi"}
    answer = await http.post(endpoint, json={**body, "stream": True})
    assert answer.status_code == 200
    _masked(answer.text, UPKEY)


async def test_console_requests_and_bench_mask_the_upstream_key(
        start: Callable[..., Any]) -> None:
    http = await start()
    await http.post("/v1/chat/completions", json=CHAT)
    recent = await http.get("/admin/requests")
    errors = [r["error"] for r in recent.json()["requests"] if r["error"]]
    assert errors == [f"bad key: Bearer {MASK} / "]
    bench = await http.post("/admin/bench", json={"model": "qwen3:8b", "prompt": "hi"})
    assert bench.status_code == 200
    _masked(bench.text, UPKEY)
    shown = bench.json()
    assert MASK in shown["upstream_answers"][0]["body"]
    assert shown["client_got"]["body"]["error"]["message"] == f"bad key: Bearer {MASK} / "


async def test_the_clients_own_keys_are_masked(start: Callable[..., Any], fake: FakeOllama,
                                               caplog: pytest.LogCaptureFixture) -> None:
    """No proxy keys: the client's Authorization and X-Api-Key both reach the upstream."""
    http = await start(upstream_key=False)
    with caplog.at_level(logging.INFO, logger="toolshim"):
        answer = await http.post("/v1/chat/completions", json=CHAT, headers={
            "authorization": f"Bearer {CLIENT_BEARER}", "x-api-key": CLIENT_X})
    assert answer.status_code == 401
    assert fake.headers[-1]["x-api-key"] == CLIENT_X
    assert answer.json()["error"]["message"] == f"bad key: Bearer {MASK} / {MASK}"
    recent = await http.get("/admin/requests")  # another caller, with other (no) keys
    _masked(recent.text, CLIENT_BEARER, CLIENT_X)
    logged = [orjson.dumps(getattr(r, "record", {}), default=str).decode()
              for r in caplog.records]
    assert any(MASK in line for line in logged)
    assert not any(CLIENT_BEARER in line or CLIENT_X in line for line in logged)


async def test_the_proxys_own_key_sent_as_x_api_key_is_masked(start: Callable[..., Any],
                                                              fake: FakeOllama) -> None:
    http = await start(upstream_key=False, api_keys=(OWN_KEY,))
    answer = await http.post("/v1/chat/completions", json=CHAT, headers={
        "authorization": f"Bearer {OWN_KEY}", "x-api-key": OWN_KEY})
    assert answer.status_code == 401
    # toolshim's key is not passed on, in either header (the Messages door takes it as
    # x-api-key): the upstream has nothing of it to repeat
    assert "authorization" not in fake.headers[-1] and "x-api-key" not in fake.headers[-1]
    assert answer.json()["error"]["message"] == "bad key:  / "


async def test_basic_credentials_from_the_upstream_url_are_masked(
        start: Callable[..., Any], fake: FakeOllama, fake_url: str) -> None:
    with_password = fake_url.replace("http://", "http://admin:s3cretpw@")
    http = await start(upstream_key=False, upstreams=(with_password,))
    answer = await http.post("/v1/chat/completions", json=CHAT)
    assert answer.status_code == 401
    sent = fake.headers[-1]["authorization"]
    assert sent.startswith("Basic ")
    assert answer.json()["error"]["message"] == f"bad key: Basic {MASK} / "
    _masked((await http.get("/admin/requests")).text, sent.removeprefix("Basic "))
