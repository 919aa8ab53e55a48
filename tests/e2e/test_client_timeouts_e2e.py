"""Slow or departing clients under a real uvicorn: 408 past the deadlines, 499 for a leaver."""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Callable, Iterator

import httpx
import pytest
from support.polling import until
from support.servers import serve

from proxy.app import create_app
from proxy.asgi.client_timeouts import header_timeout_protocol
from proxy.settings import Settings

DEADLINE = 0.5


@pytest.fixture
def slow_ok(make_settings: Callable[..., Settings]) -> Iterator[str]:
    settings = make_settings(client_timeout=DEADLINE)
    with serve(create_app(settings), http=header_timeout_protocol(DEADLINE)) as url:
        yield url


def _connect(url: str) -> socket.socket:
    host, port = url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=10)
    return sock


def _read_all(sock: socket.socket) -> tuple[bytes, float]:
    started = time.monotonic()
    answer = b""
    while chunk := sock.recv(65536):
        answer += chunk
    return answer, time.monotonic() - started


def test_headers_that_never_finish_get_a_408_and_the_connection_closes(slow_ok: str) -> None:
    with _connect(slow_ok) as sock:
        sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nContent-Ty")
        answer, waited = _read_all(sock)
    assert answer.startswith(b"HTTP/1.1 408"), answer
    assert b'"code":"client_timeout"' in answer
    assert waited < DEADLINE + 3


def test_a_kept_alive_connection_that_starts_a_second_request_and_stalls_is_cut(
        slow_ok: str) -> None:
    with _connect(slow_ok) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
        first = b""
        while not first.endswith(b'{"status":"ok"}'):
            first += sock.recv(65536)
        assert first.startswith(b"HTTP/1.1 200")
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHo")
        answer, waited = _read_all(sock)
    assert answer.startswith(b"HTTP/1.1 408")
    assert waited < DEADLINE + 3


def test_a_body_that_never_finishes_gets_a_408(slow_ok: str) -> None:
    with _connect(slow_ok) as sock:
        sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\n"
                     b"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"mod")
        answer, waited = _read_all(sock)
    assert answer.startswith(b"HTTP/1.1 408"), answer
    assert b'"code":"client_timeout"' in answer
    assert waited < DEADLINE + 3


def test_prompt_clients_are_unaffected(slow_ok: str) -> None:
    with httpx.Client(base_url=slow_ok, timeout=10) as http:
        for _ in range(3):  # one kept-alive connection, requests a little apart
            reply = http.post("/v1/chat/completions", json={
                "model": "qwen3:8b", "messages": [{"role": "user", "content": "hi"}]})
            assert reply.status_code == 200
            time.sleep(DEADLINE / 2)


@pytest.mark.parametrize("path", [b"/v1/chat/completions", b"/v1/responses"])
def test_a_client_leaving_mid_body_is_a_499_at_info(
        proxy_url: str, caplog: pytest.LogCaptureFixture, path: bytes) -> None:
    # Both routes share one error tail (api/failures.answer_or_error).
    caplog.set_level(logging.INFO)
    with _connect(proxy_url) as sock:
        sock.sendall(b"POST " + path + b" HTTP/1.1\r\nHost: localhost\r\n"
                     b"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"mod")
        time.sleep(0.2)
    until(lambda: _lines(caplog), what="the request line")
    (line,) = _lines(caplog)
    assert line.levelno == logging.INFO
    assert line.record["status"] == 499  # type: ignore[attr-defined]
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


def _lines(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.getMessage() == "request"]


@pytest.mark.parametrize("request_bytes", [
    # a chunked body whose chunk size is not hex
    (b"POST /v1/chat/completions HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\n"
     b"transfer-encoding: chunked\r\n\r\nzz\r\nabc\r\n"),
    # content-length and transfer-encoding at once (a request smuggling shape)
    (b"POST /v1/chat/completions HTTP/1.1\r\nhost: localhost\r\ncontent-length: 3\r\n"
     b"transfer-encoding: chunked\r\n\r\n0\r\n\r\n"),
    b"NOT HTTP AT ALL\r\n\r\n",
])
def test_bytes_that_are_not_http_get_a_400_in_the_openai_error_shape(
        slow_ok: str, request_bytes: bytes) -> None:
    with _connect(slow_ok) as sock:
        sock.sendall(request_bytes)
        answer, _ = _read_all(sock)
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400 ")
    assert b"content-type: application/json" in head.lower()
    error = httpx.Response(400, content=body).json()["error"]
    assert error["code"] == "invalid_http" and error["type"] == "invalid_request_error"
