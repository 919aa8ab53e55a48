"""Request ids, the overhead header, API-key auth, upstream keys, drain, admin view."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import pytest
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send
from support.capfile import replace_text
from support.fake_ollama import FakeOllama
from support.polling import until_async

from proxy.app import create_app
from proxy.middleware.drain import Drain
from proxy.middleware.edge import Edge
from proxy.observability.telemetry import Telemetry
from proxy.settings import Settings

MSG = [{"role": "user", "content": "hi"}]
KEY = "tsk-live-0123456789abcdef"


@asynccontextmanager
async def running(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    logger = logging.getLogger("toolshim.test.middleware")
    logger.propagate = False
    app = create_app(settings, Telemetry(logger))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://toolshim") as http:
            yield http


async def test_incoming_request_id_is_honoured_and_returned(
        make_settings: Callable[..., Settings]) -> None:
    async with running(make_settings(probe=False)) as http:
        given = await http.post("/v1/chat/completions", json={"model": "qwen3:8b",
                                                              "messages": MSG},
                                headers={"x-request-id": "trace-42.a"})
        made = await http.get("/healthz")
        hostile = await http.get("/healthz", headers={"x-request-id": "a b\x7f" + "x" * 200})
    assert given.headers["x-request-id"] == "trace-42.a"
    assert len(made.headers["x-request-id"]) == 32
    assert hostile.headers["x-request-id"] != "a b\x7f" + "x" * 200


@pytest.mark.parametrize("method,path", [("GET", "/healthz"), ("GET", "/metrics"),
                                         ("GET", "/nope"), ("GET", "/v1/models"),
                                         ("POST", "/v1/chat/completions"),
                                         ("POST", "/v1/embeddings")])
async def test_every_answer_carries_the_overhead_header(
        make_settings: Callable[..., Settings], method: str, path: str) -> None:
    body = {"model": "qwen3:8b", "messages": MSG, "input": "x"}
    async with running(make_settings(probe=False)) as http:
        response = await http.request(method, path, json=body if method == "POST" else None)
    assert response.status_code < 500
    assert float(response.headers["x-toolshim-overhead-ms"]) >= 0
    assert len(response.headers.get_list("x-toolshim-overhead-ms")) == 1


async def test_without_keys_everything_is_open(make_settings: Callable[..., Settings]) -> None:
    async with running(make_settings(probe=False)) as http:
        chat = await http.post("/v1/chat/completions", json={"model": "qwen3:8b",
                                                             "messages": MSG})
        admin = await http.get("/admin/capabilities")
    assert chat.status_code == 200 and admin.status_code == 200


@pytest.mark.parametrize("auth", [None, "Bearer wrong-key-000000000", f"Basic {KEY}",
                                  f"Bearer {KEY}x", "Bearer", ""])
async def test_with_keys_v1_and_admin_need_one(make_settings: Callable[..., Settings],
                                               auth: str | None) -> None:
    headers = {"authorization": auth} if auth is not None else {}
    async with running(make_settings(api_keys=(KEY, "second-key-abcdef"), probe=False)) as http:
        chat = await http.post("/v1/chat/completions", headers=headers,
                               json={"model": "qwen3:8b", "messages": MSG})
        models = await http.get("/v1/models", headers=headers)
        admin = await http.get("/admin/capabilities", headers=headers)
        open_paths = [await http.get(p) for p in ("/healthz", "/readyz", "/metrics")]
    for response in (chat, models, admin):
        assert response.status_code == 401
        error = response.json()["error"]
        assert set(error) == {"message", "type", "param", "code"}
        assert error["type"] == "authentication_error" and error["code"] == "invalid_api_key"
        for secret in (KEY, "wrong-key-000000000"):
            assert secret not in response.text
        assert response.headers["x-request-id"]
    assert [r.status_code for r in open_paths] == [200, 200, 200]


async def test_any_configured_key_is_accepted(make_settings: Callable[..., Settings]) -> None:
    async with running(make_settings(api_keys=(KEY, "second-key-abcdef"), probe=False)) as http:
        for key in (KEY, "second-key-abcdef"):
            response = await http.post("/v1/chat/completions",
                                       headers={"authorization": f"bearer {key}"},
                                       json={"model": "qwen3:8b", "messages": MSG})
            assert response.status_code == 200


async def test_metrics_can_be_protected(make_settings: Callable[..., Settings]) -> None:
    async with running(make_settings(api_keys=(KEY,), protect_metrics=True)) as http:
        anonymous = await http.get("/metrics")
        allowed = await http.get("/metrics", headers={"authorization": f"Bearer {KEY}"})
        health = await http.get("/healthz")
    assert anonymous.status_code == 401 and allowed.status_code == 200
    assert health.status_code == 200


async def test_client_key_is_not_forwarded_when_it_is_toolshims(
        fake: FakeOllama, make_settings: Callable[..., Settings]) -> None:
    async with running(make_settings(api_keys=(KEY,), probe=False)) as http:
        await http.post("/v1/chat/completions", headers={"authorization": f"Bearer {KEY}",
                                                         "connection": "keep-alive",
                                                         "x-custom": "kept"},
                        json={"model": "qwen3:8b", "messages": MSG})
    sent = fake.headers[-1]
    assert "authorization" not in sent
    assert sent.get("x-custom") == "kept"
    assert KEY not in str(sent)


async def test_upstream_key_is_injected_from_its_environment_variable(
        fake: FakeOllama, fake_url: str, make_settings: Callable[..., Settings],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEST_UPSTREAM_KEY", "upstream-secret-987654321")
    settings = make_settings(api_keys=(KEY,), probe=False,
                             upstream_key_envs=((fake_url, "TEST_UPSTREAM_KEY"),))
    async with running(settings) as http:
        await http.post("/v1/chat/completions", headers={"authorization": f"Bearer {KEY}"},
                        json={"model": "qwen3:8b", "messages": MSG})
        await http.post("/v1/embeddings", headers={"authorization": f"Bearer {KEY}"},
                        json={"model": "qwen3:8b", "input": "x"})
    for sent in fake.headers[-2:]:
        assert sent["authorization"] == "Bearer upstream-secret-987654321"


async def test_admin_capabilities_shows_sources_and_reload_error(
        fake: FakeOllama, caps_path: Path, make_settings: Callable[..., Settings]) -> None:
    caps_path.write_text(
        'version: 1\nmodels:\n  "qwen3:8b":\n    tools: native\n  "llama*":\n    max_tools: 4\n'
        'learned:\n  "custom:latest":\n    tools: "off"\n    source: runtime_error\n'
        '    at: "2026-11-22T10:00:00Z"\n')
    async with running(make_settings(probe=False)) as http:
        await http.get("/v1/models")
        good = (await http.get("/admin/capabilities")).json()
        replace_text(caps_path, "version: 1\nmodels: [broken\n")
        async def reloaded() -> bool:  # in the background, with no request at all
            return bool((await http.get("/admin/capabilities")).json()["last_reload_error"])
        await until_async(reloaded, within=10, what="the broken file's reload error")
        bad = (await http.get("/admin/capabilities")).json()
    models = good["models"]
    assert set(models) == {"qwen3:8b", "custom:latest", "gemma3:4b"}
    assert models["qwen3:8b"]["known_from"] == ["models", "listing"]
    assert models["qwen3:8b"]["profile"]["tools"] == "native"
    assert models["qwen3:8b"]["sources"]["tools"].startswith("models")
    assert models["qwen3:8b"]["sources"]["max_tools"] == "built-in default"
    # The file's older learned `tools: off` is read as the fact.
    assert models["custom:latest"]["profile"]["tool_support"] == "refused"
    assert models["custom:latest"]["sources"]["tool_support"] == "learned"
    assert models["gemma3:4b"]["known_from"] == ["listing"]
    assert good["patterns"] == ["llama*"] and good["last_reload_error"] is None
    assert bad["last_reload_error"] and "capabilities.yaml" in bad["last_reload_error"]
    assert bad["models"]["qwen3:8b"]["profile"]["tools"] == "native"  # last good version


class SlowSse:
    """An ASGI app streaming `count` SSE events `gap` seconds apart."""

    def __init__(self, count: int, gap: float) -> None:
        self.count, self.gap = count, gap

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/event-stream")]})
        for i in range(self.count):
            await send({"type": "http.response.body", "body": f"data: {i}\n\n".encode(),
                        "more_body": True})
            await asyncio.sleep(self.gap)
        await send({"type": "http.response.body", "body": b"data: [DONE]\n\n"})


async def drive(app: Edge, after: float) -> tuple[int, bytes]:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as http:
        request = asyncio.create_task(http.get("/"))
        await asyncio.sleep(after)
        app.drain.begin()
        response = await asyncio.wait_for(request, 5)
    return response.status_code, response.content


async def test_drain_lets_a_stream_finish_within_the_grace() -> None:
    app = Edge(SlowSse(5, 0.02), drain=Drain(grace=2.0))
    status, body = await drive(app, after=0.03)
    assert status == 200
    assert body == b"".join(f"data: {i}\n\n".encode() for i in range(5)) + b"data: [DONE]\n\n"


async def test_drain_cuts_a_stream_cleanly_past_the_grace() -> None:
    app = Edge(SlowSse(1000, 0.02), drain=Drain(grace=0.1))
    status, body = await drive(app, after=0.05)
    assert status == 200
    frames = body.split(b"\n\n")
    assert frames[-1] == b"" and frames[-2] == b"data: [DONE]"
    assert b'"code":"shutting_down"' in frames[-3]
    assert len(frames) < 100


async def test_a_stream_cut_inside_an_event_gets_no_frame_glued_to_it() -> None:
    # Our error event after half an event would turn both into garbage: the stream
    # just ends there. An event ended with CRLF framing counts as a boundary.
    async def halfway(scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/event-stream")]})
        for piece in pieces:
            await send({"type": "http.response.body", "body": piece, "more_body": True})
        await asyncio.sleep(60)

    for pieces, glued in (([b"data: 1\n\n", b'data: {"a":'], False),
                          ([b"data: 1\r\n\r\n"], True), ([b""], True)):
        _, body = await drive(Edge(halfway, drain=Drain(grace=0.05)), after=0.02)
        assert body.startswith(b"".join(pieces))
        assert body.endswith(b"data: [DONE]\n\n") is glued, (pieces, body)
        assert (b"shutting_down" in body) is glued


async def test_a_request_cut_before_its_answer_is_a_503_envelope() -> None:
    async def never_answers(scope: Scope, receive: Receive, send: Send) -> None:
        await asyncio.sleep(60)

    app = Edge(never_answers, drain=Drain(grace=0.05))
    status, body = await drive(app, after=0.02)
    assert status == 503 and b'"code":"shutting_down"' in body


async def test_after_the_cut_new_requests_are_refused() -> None:
    drain = Drain(grace=0.0)
    app = Edge(SlowSse(3, 0.0), drain=drain)
    drain.cut_now()
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as http:
        response = await http.get("/")
    assert response.status_code == 503 and drain.open == 0


async def test_readyz_says_not_ready_while_draining(
        make_settings: Callable[..., Settings]) -> None:
    settings = make_settings(probe=False, shutdown_grace=30.0)
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as http:
            app.state.drain.begin()
            ready = await http.get("/readyz")
            alive = await http.get("/healthz")
    assert ready.status_code == 503 and alive.status_code == 200




async def test_a_bug_escaping_a_hot_endpoint_is_one_logged_500_with_the_request_id(
        caplog: pytest.LogCaptureFixture) -> None:
    async def broken(request: Request) -> Response:
        raise RuntimeError("a bug")

    async def routed(scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    app = Edge(routed, drain=Drain(grace=1.0), hot={"/v1/chat/completions": broken})
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as http:
        hot = await http.post("/v1/chat/completions", headers={"x-request-id": "r-1"})
        other = await http.get("/v1/chat/completions")  # not POST: the router's
    assert hot.status_code == 500 and hot.headers["x-request-id"] == "r-1"
    assert hot.json()["error"]["message"] == "internal error in toolshim"
    assert other.status_code == 204 and len(other.headers["x-request-id"]) == 32
    logged = [r for r in caplog.records if r.getMessage().startswith("unexpected error")]
    assert len(logged) == 1 and logged[0].exc_info is not None
