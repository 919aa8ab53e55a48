"""Passthrough under a real uvicorn: it stays under /v1/ and behaves like chat."""

from __future__ import annotations

import logging
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.edge_upstream import EdgeUpstream
from support.log_lines import request_lines
from support.polling import until
from support.servers import serve

from proxy.app import create_app
from proxy.settings import Settings


def raw_request(url: str, request_line: str, headers: str = "", body: bytes = b"") -> bytes:
    """Send a request line exactly as written (no client normalises it); the whole answer."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(f"{request_line}\r\nHost: {host}\r\n{headers}Connection: close\r\n"
                     f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return answer


def status_of(answer: bytes) -> int:
    return int(answer.split(b" ", 2)[1])


@pytest.fixture
def edge() -> EdgeUpstream:
    return EdgeUpstream()


@pytest.fixture
def edge_url(edge: EdgeUpstream) -> Iterator[str]:
    with serve(edge.app, lifespan="off") as url:
        yield url


def _proxy(caps_path: Path, *upstreams: str, **extra: Any) -> Settings:
    return Settings.model_validate({"upstreams": upstreams, "capabilities": str(caps_path),
                                    "reload_interval": 0.0, **extra})


@pytest.fixture
def proxied(edge_url: str, caps_path: Path) -> Iterator[str]:
    with serve(create_app(_proxy(caps_path, edge_url))) as url:
        yield url


ESCAPES = [
    "/v1/../api/delete", "/v1/%2e%2e/api/delete", "/v1/%2E%2E/api/pull",
    "/v1/..%2fapi/delete", "/v1/%2e%2e%2fapi%2fdelete", "/v1/..%5capi/delete",
    "/v1/x/../../api/pull", "/v1/%252e%252e/api/delete", "//v1/../api/delete",
    "/v1/./../api/pull",
]


@pytest.mark.parametrize("method", ["DELETE", "POST", "GET"])
@pytest.mark.parametrize("path", ESCAPES)
def test_passthrough_never_leaves_v1(proxied: str, edge: EdgeUpstream, path: str,
                                     method: str) -> None:
    answer = raw_request(proxied, f"{method} {path} HTTP/1.1", body=b'{"model":"qwen3:8b"}')
    assert status_of(answer) == 404, answer[:200]
    assert not any(p.startswith("/api/") for p in edge.paths), edge.paths


def test_backslashes_are_refused_too(proxied: str, edge: EdgeUpstream) -> None:
    answer = raw_request(proxied, "DELETE /v1\\..\\api\\delete HTTP/1.1")
    assert status_of(answer) in (400, 404)
    assert edge.paths == []


def test_a_normalised_path_still_under_v1_is_forwarded(proxied: str, edge: EdgeUpstream) -> None:
    answer = raw_request(proxied, "POST /v1/x/..//embeddings HTTP/1.1",
                         "Content-Type: application/json\r\n", b'{"model":"qwen3:8b"}')
    assert status_of(answer) == 200
    assert edge.paths == ["/v1/embeddings"]


def test_an_unlisted_models_embeddings_go_where_its_chat_goes(caps_path: Path) -> None:
    first, second = EdgeUpstream(models=("a:1",)), EdgeUpstream(models=("b:1",))
    with serve(first.app, lifespan="off") as one, serve(second.app, lifespan="off") as two, \
            serve(create_app(_proxy(caps_path, one, two))) as proxy:
        response = httpx.post(proxy + "/v1/embeddings", json={"model": "b:1", "input": "x"})
    assert response.status_code == 200
    assert "/v1/embeddings" in second.paths and "/v1/embeddings" not in first.paths


def test_passthrough_holds_a_limiter_slot_until_the_body_has_streamed(
        edge_url: str, caps_path: Path) -> None:
    app = create_app(_proxy(caps_path, edge_url, max_concurrency=1, max_queue=0))
    with serve(app) as proxy, httpx.Client(base_url=proxy, timeout=10) as http:
        with http.stream("GET", "/v1/slow") as slow:
            assert slow.status_code == 200
            busy = http.post("/v1/embeddings", json={"model": "qwen3:8b", "input": "x"})
            assert busy.status_code == 429
            assert busy.json()["error"]["code"] == "upstream_busy"
            assert b"".join(slow.iter_bytes()).count(b"piece") == 5
        after = http.post("/v1/embeddings", json={"model": "qwen3:8b", "input": "x"})
        assert after.status_code == 200


def test_a_client_leaving_mid_body_frees_the_slot(edge_url: str, caps_path: Path) -> None:
    app = create_app(_proxy(caps_path, edge_url, max_concurrency=1, max_queue=0))
    with serve(app) as proxy, httpx.Client(base_url=proxy, timeout=10) as http:
        with http.stream("GET", "/v1/slow") as slow:
            next(slow.iter_raw())
        limiter = app.state.services.limiter
        until(lambda: not limiter.active(edge_url), what="the slow stream's slot freed")
        assert limiter.active(edge_url) == 0
        assert http.post("/v1/embeddings", json={"model": "qwen3:8b"}).status_code == 200


def test_the_request_line_is_logged_after_the_body_streamed(
        proxied: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="toolshim")
    with httpx.Client(base_url=proxied, timeout=10) as http:
        assert http.get("/v1/slow").text.count("piece") == 5
        until(lambda: request_lines(caplog), what="the request line")
    (line,) = request_lines(caplog)
    assert line["status"] == 200 and line["endpoint"] == "slow"
    assert line["duration_ms"] >= 5 * 200 * 0.9  # five pieces 0.2 s apart



def test_connection_named_headers_are_stripped_and_encoding_is_the_clients(
        proxied: str, edge: EdgeUpstream) -> None:
    answer = raw_request(proxied, "GET /v1/echo HTTP/1.1")
    head = answer.partition(b"\r\n\r\n")[0]
    lines = [h.lower() for h in head.split(b"\r\n")[1:]]
    assert status_of(answer) == 200
    assert not any(h.startswith(b"x-hop") for h in lines)
    assert b"x-end: kept" in lines
    assert sum(h.startswith(b"date:") for h in lines) == 1
    # A client that asked for no encoding gets none, and the upstream was asked for none.
    assert not any(h.startswith(b"content-encoding") for h in lines)
    assert edge.encodings[-1] == "identity"
    raw_request(proxied, "GET /v1/echo HTTP/1.1", "Accept-Encoding: br\r\n")
    assert edge.encodings[-1] == "br"


def test_same_failure_same_error_type_on_every_endpoint(caps_path: Path,
                                                        edge_url: str) -> None:
    dead = f"http://127.0.0.1:{_closed_port()}"
    with serve(create_app(_proxy(caps_path, dead))) as proxy, \
            httpx.Client(base_url=proxy, timeout=10) as http:
        answers = [http.post("/v1/chat/completions", json={
                       "model": "qwen3:8b", "messages": [{"role": "user", "content": "hi"}]}),
                   http.get("/v1/models"),
                   http.post("/v1/embeddings", json={"model": "qwen3:8b"})]
    assert [a.status_code for a in answers] == [502, 502, 502]
    assert {a.json()["error"]["type"] for a in answers} == {"api_error"}
    assert {a.json()["error"]["code"] for a in answers} == {"upstream_unavailable"}


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
