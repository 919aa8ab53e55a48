"""A web page in the user's browser attacks a toolshim on loopback (docs/security.md).

A page on another site can send a form or a `text/plain` fetch without a preflight,
and toolshim reads the body as JSON; a page whose DNS name is rebound to 127.0.0.1
becomes same-origin and can read what toolshim answers. The app runs in process with
`scope["server"]` on 127.0.0.1 (the ASGI client's base URL) and under a real uvicorn.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from support.capfile import ONE_LEARNED
from support.fake_ollama import FakeOllama
from support.inprocess import InProcessApps
from support.log_lines import request_lines
from support.servers import serve

from proxy.app import create_app
from proxy.settings import Settings

CHAT = b'{"model": "qwen3:8b", "messages": [{"role": "user", "content": "hi"}]}'
ACTING = [
    ("/v1/chat/completions", CHAT),
    ("/v1/responses", b'{"model": "qwen3:8b", "input": "hi"}'),
    ("/v1/embeddings", b'{"model": "qwen3:8b", "input": "hi"}'),
    ("/admin/learned/gemma3:4b/forget", b""),
    ("/admin/validate", b'{"model": "qwen3:8b"}'),
    ("/admin/bench", b'{"model": "qwen3:8b", "prompt": "hi"}'),
    # doors other dialects open: the rule is by method, not by path
    ("/v1/messages", b'{"model": "qwen3:8b", "max_tokens": 9, "messages": []}'),
    ("/v1beta/models/qwen3:8b:generateContent", b'{"contents": []}'),
]
ORIGIN = "http://127.0.0.1:8080"


@pytest.fixture
async def apps(make_settings: Callable[..., Settings], caps_path: Path
               ) -> AsyncIterator[Callable[..., Any]]:
    """In-process apps whose client talks to http://127.0.0.1:8080: a loopback listener."""
    caps_path.write_text(ONE_LEARNED)
    made = InProcessApps(make_settings)

    async def open_app(**overrides: Any) -> httpx.AsyncClient:
        http = await made.open(**overrides)
        http.base_url = httpx.URL(ORIGIN)
        return http

    yield open_app
    await made.close()


def _check_openai_403(answer: httpx.Response) -> None:
    assert answer.status_code == 403, answer.text
    assert answer.json()["error"]["code"] == "cross_origin"
    assert answer.json()["error"]["type"] == "permission_error"


@pytest.mark.parametrize(("path", "body"), ACTING, ids=[p for p, _ in ACTING])
@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded",
                                          "application/json"])
async def test_a_page_of_another_site_cannot_act(
        apps: Callable[..., Any], fake: FakeOllama, caps_path: Path, path: str, body: bytes,
        content_type: str) -> None:
    http = await apps()
    before = len(fake.requests)
    answer = await http.post(path, content=body, headers={
        "origin": "https://evil.example", "content-type": content_type,
        "sec-fetch-site": "cross-site"})
    assert answer.status_code == 403, answer.text
    if path.startswith("/v1/messages"):  # Anthropic's envelope, with the request's id
        assert answer.json() == {"type": "error", "error": {
            "type": "permission_error", "message": answer.json()["error"]["message"]},
            "request_id": answer.headers["x-request-id"]}
    elif path.startswith("/v1beta"):  # Google's
        assert answer.json()["error"]["status"] == "PERMISSION_DENIED"
        assert answer.json()["error"]["code"] == 403
    else:
        _check_openai_403(answer)
    assert len(fake.requests) == before  # nothing reached a model
    assert '"gemma3:4b"' in caps_path.read_text()  # nothing forgotten


@pytest.mark.parametrize("headers", [
    {"origin": "null"},  # a sandboxed frame, a file:// page
    {"origin": "http://127.0.0.1:9999"},  # another port is another origin
    {"origin": "http://localhost:8080"},  # another name for the same socket, still another
    {"origin": "https://evil.example"},  # no Sec-Fetch-Site (older browsers)
    {"sec-fetch-site": "cross-site"},  # no Origin, but the browser says where it came from
    {"origin": "http://127.0.0.1:8080", "sec-fetch-site": "cross-site"},
])
@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH"])
async def test_each_sign_of_another_origin_refuses(apps: Callable[..., Any],
                                                   headers: dict[str, str],
                                                   method: str) -> None:
    http = await apps()
    answer = await http.request(method, "/v1/responses/resp_x", headers=headers,
                                content=CHAT)
    _check_openai_403(answer)


async def test_the_proxys_own_origin_and_a_shell_still_act(apps: Callable[..., Any],
                                                          fake: FakeOllama) -> None:
    http = await apps()
    own = {"origin": ORIGIN, "sec-fetch-site": "same-origin",
           "content-type": "application/json"}
    assert (await http.post("/v1/chat/completions", content=CHAT, headers=own)).status_code \
        == 200
    # TLS ends in front of toolshim: the page is https, the request reaches us as http.
    tls = {"origin": "https://127.0.0.1:8080", "content-type": "application/json"}
    assert (await http.post("/v1/chat/completions", content=CHAT, headers=tls)).status_code \
        == 200
    # `curl -d` sends no Origin and a form content type: it keeps working.
    curl = {"content-type": "application/x-www-form-urlencoded"}
    assert (await http.post("/v1/chat/completions", content=CHAT, headers=curl)).status_code \
        == 200
    # A typed URL or a bookmark: Sec-Fetch-Site none.
    typed = {"sec-fetch-site": "none", "content-type": "application/json"}
    assert (await http.post("/v1/chat/completions", content=CHAT, headers=typed)).status_code \
        == 200


async def test_reads_are_left_to_the_browsers_same_origin_policy(
        apps: Callable[..., Any]) -> None:
    """GETs do not act; a page of another origin gets no CORS grant to read the answer."""
    http = await apps()
    answer = await http.get("/v1/models", headers={"origin": "https://evil.example",
                                                   "sec-fetch-site": "cross-site"})
    assert answer.status_code == 200
    assert "access-control-allow-origin" not in answer.headers
    preflight = await http.options("/v1/chat/completions", headers={
        "origin": "https://evil.example", "access-control-request-method": "POST"})
    assert "access-control-allow-origin" not in preflight.headers


async def test_a_refusal_is_logged_once(apps: Callable[..., Any],
                                        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="toolshim")
    http = await apps()
    await http.post("/admin/validate", content=b"{}", headers={"origin": "null"})
    lines = [r for r in request_lines(caplog) if r.get("status") == 403]
    assert len(lines) == 1 and lines[0]["error"] == "a request from another origin"


@pytest.mark.parametrize("host", ["localhost", "localhost:8080", "LOCALHOST:1", "127.0.0.1",
                                  "127.0.0.1:65535", "[::1]", "[::1]:8080"])
async def test_loopback_names_are_answered(apps: Callable[..., Any], host: str) -> None:
    http = await apps()
    assert (await http.get("/admin/capabilities", headers={"host": host})).status_code == 200


@pytest.mark.parametrize("host", ["rebind.evil.example", "rebind.evil.example:8080",
                                  "127.0.0.1.evil.example", "localhost.evil", "[::2]:8080",
                                  "0.0.0.0:8080"])
async def test_a_rebound_name_is_421_on_every_path(apps: Callable[..., Any],
                                                   host: str) -> None:
    http = await apps()
    for method, path in [("GET", "/admin/capabilities"), ("GET", "/admin/requests"),
                         ("GET", "/v1/models"), ("GET", "/ui"), ("POST", "/v1/chat/completions")]:
        answer = await http.request(method, path, headers={"host": host}, content=b"")
        assert answer.status_code == 421, (method, path)
        assert answer.json()["error"]["code"] == "host_not_allowed"
        assert "--allowed-hosts" in answer.json()["error"]["message"]


async def test_allowed_hosts_adds_names(apps: Callable[..., Any]) -> None:
    http = await apps(allowed_hosts=("proxy.lan", "[fd00::1]"))
    for host in ("proxy.lan", "PROXY.lan:9000", "[fd00::1]:8080", "localhost:8080"):
        assert (await http.get("/v1/models", headers={"host": host})).status_code == 200
    assert (await http.get("/v1/models", headers={"host": "evil.lan"})).status_code == 421
    anything = await apps(allowed_hosts=("*",))
    assert (await anything.get("/v1/models", headers={"host": "evil.lan"})).status_code == 200


async def test_a_listener_off_loopback_answers_any_host(
        make_settings: Callable[..., Settings]) -> None:
    """In a container toolshim listens on 0.0.0.0 and is reached by its service name."""
    made = InProcessApps(make_settings)
    http = await made.open()  # scope["server"] is ("toolshim", 80): not a loopback address
    try:
        answer = await http.get("/v1/models", headers={"host": "toolshim-svc:8080"})
        assert answer.status_code == 200
    finally:
        await made.close()


def test_under_uvicorn_rebinding_is_refused_and_sdks_work(
        make_settings: Callable[..., Settings], new_sdk: Callable[..., openai.OpenAI]) -> None:
    with serve(create_app(make_settings())) as url:
        port = url.rsplit(":", 1)[1]
        with httpx.Client(base_url=url, timeout=10) as http:
            rebound = http.get("/admin/capabilities",
                               headers={"host": f"rebind.evil.example:{port}"})
            assert rebound.status_code == 421
            assert http.get("/admin/capabilities",
                            headers={"host": f"localhost:{port}"}).status_code == 200
            form = http.post("/v1/chat/completions", content=CHAT, headers={
                "origin": "https://evil.example",
                "content-type": "application/x-www-form-urlencoded"})
            assert form.status_code == 403
        # SDK clients send no Origin: nothing changes for them.
        answer = new_sdk(url).chat.completions.create(
            model="qwen3:8b", messages=[{"role": "user", "content": "hi"}])
        assert answer.choices[0].message.content
