"""A client that stops reading a stream for a while still gets all of it, in order.

Pieces are written to the client from the upstream's read callback while its socket
takes them (asgi/direct_send.py `SseWriter`); once the socket is full, uvicorn's send waits,
and the rest must wait with it instead of being lost, reordered or buffered without
end. A small receive window and a pause make the socket fill long before the answer
ends.
"""

from __future__ import annotations

import http.client
import logging
import socket
import time
from typing import Any

import httpx
import orjson
import pytest
from support.fake_ollama import FakeOllama, Reply
from support.leaving import wait_for_cancel
from support.polling import until

MSG: list[Any] = [{"role": "user", "content": "hi"}]


class _SmallWindow(http.client.HTTPConnection):
    """A connection whose socket accepts little before the sender must wait."""

    def connect(self) -> None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8192)
        sock.settimeout(30)
        sock.connect((self.host, self.port))
        self.sock = sock


def _contents(body: bytes) -> tuple[str, bool]:
    """The streamed content joined, and whether the stream ended with [DONE]."""
    text: list[str] = []
    events = [e for e in body.split(b"\n\n") if e]
    for event in events[:-1]:
        assert event.startswith(b"data: "), event[:80]
        chunk = orjson.loads(event[6:])
        text += [c["delta"].get("content") or "" for c in chunk["choices"]]
    return "".join(text), events[-1] == b"data: [DONE]"


def _stream_read_late(proxy_url: str, tools: bool) -> bytes:
    host, port = proxy_url.removeprefix("http://").split(":")
    conn = _SmallWindow(host, int(port), timeout=30)
    request: dict[str, Any] = {"model": "qwen3:8b", "stream": True, "messages": MSG}
    if tools:
        request["tools"] = [{"type": "function", "function": {
            "name": "noop", "parameters": {"type": "object"}}}]
    conn.request("POST", "/v1/chat/completions", body=orjson.dumps(request),
                 headers={"content-type": "application/json"})
    response = conn.getresponse()
    assert response.status == 200
    time.sleep(1.0)  # the answer keeps coming; our socket is full long before it ends
    body = response.read()
    conn.close()
    return body


def test_a_client_that_stops_reading_gets_the_whole_stream_in_order(
        fake: FakeOllama, proxy_url: str) -> None:
    pieces = [f"<{i:04d}>" + "x" * 20_000 for i in range(300)]  # ~6 MB
    for tools in (False, True):
        fake.replies.clear()
        fake.reply("qwen3:8b", Reply(content=pieces, delay=0.0005))
        text, done = _contents(_stream_read_late(proxy_url, tools))
        assert text == "".join(pieces), f"tools={tools}"
        assert done


def test_a_client_that_stops_reading_and_leaves_frees_the_upstream(
        fake: FakeOllama, proxy_url: str, caplog: pytest.LogCaptureFixture) -> None:
    # The relay is waiting on the full socket (a pending write) when the client goes:
    # the upstream request must be closed and the request logged once, as a 499.
    caplog.set_level(logging.INFO, logger="toolshim")
    fake.reply("qwen3:8b", Reply(content=["x" * 20_000 for _ in range(2_000)], delay=0.001))
    host, port = proxy_url.removeprefix("http://").split(":")
    conn = _SmallWindow(host, int(port), timeout=30)
    conn.request("POST", "/v1/chat/completions", headers={"content-type": "application/json"},
                 body=orjson.dumps({"model": "qwen3:8b", "stream": True, "messages": MSG}))
    assert conn.getresponse().status == 200
    time.sleep(0.5)  # the socket fills; the answer is far from its end (40 MB)
    conn.close()
    wait_for_cancel(fake, within=5)
    assert fake.abandoned == 1
    until(lambda: [r for r in caplog.records if r.getMessage() == "request"],
          what="the request line")
    (line,) = [r for r in caplog.records if r.getMessage() == "request"]
    assert line.record["status"] == 499  # type: ignore[attr-defined]
    assert httpx.get(f"{proxy_url}/healthz").status_code == 200  # and it serves on
