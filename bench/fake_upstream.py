"""A fast fake Ollama (>= v0.32.6) HTTP server for the benchmark, on loopback.

Owns the HTTP/1.1 side: parsing requests, routing, pacing slow streams. The bytes come
precomputed from `fake_answers`, chosen by the request's model name, so direct and
proxied runs cost the upstream the same. It never reads messages or tools and must stay
cheap: it shares a core with the load generator.
Run: ``python bench/fake_upstream.py --port 0`` prints ``LISTENING <port>``.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from email.utils import formatdate
from typing import cast

import orjson
from fake_answers import (
    NDJSON,
    completion_body,
    content_parts,
    http_chunk,
    listing,
    native_body,
    native_lines,
    running,
    show,
    stream_events,
    version,
)

SLOW_INTERVAL = 0.010
_CRLF2 = b"\r\n\r\n"


@dataclass(frozen=True)
class Request:
    method: bytes
    path: bytes
    body: bytes
    close: bool


def _chunked_body(buf: bytearray, start: int) -> tuple[bytes, int] | None:
    """Decode a chunked request body at `start`; None until it is complete."""
    out, pos = bytearray(), start
    while True:
        eol = buf.find(b"\r\n", pos)
        if eol < 0:
            return None
        size = int(bytes(buf[pos:eol]).split(b";")[0], 16)
        if size == 0:
            end = buf.find(_CRLF2, eol)
            return (bytes(out), end + 4) if end >= 0 else None
        if len(buf) < eol + 2 + size + 2:
            return None
        out += buf[eol + 2:eol + 2 + size]
        pos = eol + 2 + size + 2


def parse_request(buf: bytearray) -> tuple[Request, int] | None:
    """One HTTP/1.1 request from the front of `buf` and its length; None if incomplete."""
    head_end = buf.find(_CRLF2)
    if head_end < 0:
        return None
    lines = bytes(buf[:head_end]).split(b"\r\n")
    method, path, _version = lines[0].split(b" ", 2)
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        headers[name.strip().lower()] = value.strip().lower()
    start = head_end + 4
    if headers.get(b"transfer-encoding") == b"chunked":
        decoded = _chunked_body(buf, start)
        if decoded is None:
            return None
        body, end = decoded
    else:
        end = start + int(headers.get(b"content-length", b"0"))
        if len(buf) < end:
            return None
        body = bytes(buf[start:end])
    return Request(method, path, body, headers.get(b"connection") == b"close"), end


def _head(status: str, ctype: bytes, date: bytes, length: int | None) -> bytes:
    framing = b"Transfer-Encoding: chunked" if length is None else b"Content-Length: %d" % length
    return (b"HTTP/1.1 " + status.encode() + b"\r\nContent-Type: " + ctype
            + b"\r\nDate: " + date + b"\r\n" + framing + b"\r\n\r\n")


@dataclass
class Answers:
    """Precomputed bytes per (model, stream, include_usage) plus the slow-stream ticker."""

    cache: dict[tuple[str, bool, bool], list[bytes]] = field(default_factory=dict)
    native: dict[tuple[str, bool], list[bytes]] = field(default_factory=dict)
    slow: set[SlowStream] = field(default_factory=set)
    date: bytes = b""
    date_at: float = 0.0
    ticking: bool = False

    def http_date(self) -> bytes:
        now = time.time()
        if now - self.date_at >= 1.0:
            self.date, self.date_at = formatdate(now, usegmt=True).encode(), now
        return self.date

    def chat(self, model: str, stream: bool, usage: bool) -> list[bytes] | None:
        key = (model, stream, usage)
        if key not in self.cache:
            parts = content_parts(model)
            if parts is None:
                return None
            if stream:
                self.cache[key] = [http_chunk(e) for e in stream_events(model, parts, usage)]
            else:
                self.cache[key] = [completion_body(model, parts)]
        return self.cache[key]

    def native_chat(self, model: str, stream: bool) -> list[bytes] | None:
        key = (model, stream)
        if key not in self.native:
            parts = content_parts(model)
            if parts is None:
                return None
            self.native[key] = [http_chunk(line) for line in native_lines(model, parts)] \
                if stream else [native_body(model, parts)]
        return self.native[key]

    def start_ticker(self) -> None:
        if not self.ticking:
            self.ticking = True
            loop = asyncio.get_running_loop()
            loop.call_at(loop.time() + SLOW_INTERVAL, self._tick, loop.time() + SLOW_INTERVAL)

    def _tick(self, due: float) -> None:
        # One timer for all slow streams: each advances one chunk per tick, the way a
        # batched decoder emits one token per running sequence per step.
        for stream in list(self.slow):
            if stream.advance():
                self.slow.discard(stream)
        if not self.slow:
            self.ticking = False
            return
        loop = asyncio.get_running_loop()
        nxt = max(due + SLOW_INTERVAL, loop.time())
        loop.call_at(nxt, self._tick, nxt)


@dataclass(eq=False)
class SlowStream:
    conn: Connection
    chunks: list[bytes]
    pos: int = 1

    def advance(self) -> bool:
        """Write the next chunk; True when the stream is over."""
        if self.conn.transport is None or self.conn.transport.is_closing():
            return True
        self.conn.transport.write(self.chunks[self.pos])
        self.pos += 1
        if self.pos < len(self.chunks):
            return False
        self.conn.write(b"0\r\n\r\n")
        self.conn.finish()
        return True


class Connection(asyncio.Protocol):
    """One keep-alive HTTP/1.1 connection; requests are served one at a time."""

    def __init__(self, answers: Answers) -> None:
        self.answers = answers
        self.transport: asyncio.Transport | None = None
        self.buf = bytearray()
        self.busy = False
        self.close_after = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's TCP transports implement asyncio.Transport without subclassing it.
        self.transport = cast(asyncio.Transport, transport)

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None

    def data_received(self, data: bytes) -> None:
        self.buf += data
        self._serve()

    def write(self, data: bytes) -> None:
        if self.transport is not None:
            self.transport.write(data)

    def finish(self) -> None:
        self.busy = False
        if self.close_after and self.transport is not None:
            self.transport.close()
        else:
            self._serve()

    def _serve(self) -> None:
        while not self.busy and self.transport is not None:
            try:
                parsed = parse_request(self.buf)
            except ValueError:
                self.write(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
                self.transport.close()
                return
            if parsed is None:
                return
            req, used = parsed
            del self.buf[:used]
            self.busy, self.close_after = True, req.close
            self._route(req)

    def _reply(self, status: str, ctype: bytes, body: bytes) -> None:
        self.write(_head(status, ctype, self.answers.http_date(), len(body)) + body)
        self.finish()

    def _route(self, req: Request) -> None:
        route = (req.method, req.path.split(b"?")[0])
        if route == (b"POST", b"/v1/chat/completions"):
            self._chat(req.body)
        elif route == (b"GET", b"/v1/models"):
            self._reply("200 OK", b"application/json", listing("v1"))
        elif route == (b"GET", b"/api/tags"):
            self._reply("200 OK", b"application/json; charset=utf-8", listing("tags"))
        elif route == (b"POST", b"/api/show"):
            self._reply(*show(req.body))
        elif route == (b"POST", b"/api/chat"):
            self._native_chat(req.body)
        elif route == (b"GET", b"/api/version"):
            self._reply("200 OK", b"application/json; charset=utf-8", version())
        elif route == (b"GET", b"/api/ps"):
            self._reply("200 OK", b"application/json; charset=utf-8", running())
        elif route in ((b"GET", b"/"), (b"HEAD", b"/")):
            self._reply("200 OK", b"text/plain; charset=utf-8", b"Ollama is running")
        else:
            self._reply("404 Not Found", b"text/plain; charset=utf-8", b"404 page not found")

    def _chat(self, body: bytes) -> None:
        req = orjson.loads(body)
        model, stream = str(req.get("model", "")), bool(req.get("stream", False))
        opts = req.get("stream_options") or {}
        chunks = self.answers.chat(model, stream, stream and bool(opts.get("include_usage")))
        if chunks is None:
            err = {"message": f"model '{model}' not found", "type": "not_found_error",
                   "param": None, "code": None}
            self._reply("404 Not Found", b"application/json",
                        orjson.dumps({"error": err}) + b"\n")
        elif not stream:
            self._reply("200 OK", b"application/json", chunks[0])
        elif model.startswith(("bench-slow-", "bench-native-slow-")):
            head = _head("200 OK", b"text/event-stream", self.answers.http_date(), None)
            self.write(head + chunks[0])
            self.answers.slow.add(SlowStream(self, chunks))
            self.answers.start_ticker()
        else:
            head = _head("200 OK", b"text/event-stream", self.answers.http_date(), None)
            self.write(head + b"".join(chunks) + b"0\r\n\r\n")
            self.finish()


    def _native_chat(self, body: bytes) -> None:
        req = orjson.loads(body)
        model, stream = str(req.get("model", "")), bool(req.get("stream", True))
        chunks = self.answers.native_chat(model, stream)
        if chunks is None:
            self._reply("404 Not Found", b"application/json; charset=utf-8",
                        orjson.dumps({"error": f"model '{model}' not found"}))
        elif not stream:
            self._reply("200 OK", b"application/json; charset=utf-8", chunks[0])
        elif model.startswith("bench-native-slow-"):
            self.write(_head("200 OK", NDJSON, self.answers.http_date(), None) + chunks[0])
            self.answers.slow.add(SlowStream(self, chunks))
            self.answers.start_ticker()
        else:
            head = _head("200 OK", NDJSON, self.answers.http_date(), None)
            self.write(head + b"".join(chunks) + b"0\r\n\r\n")
            self.finish()


async def start_server(host: str = "127.0.0.1", port: int = 0) -> asyncio.Server:
    """Listen on host:port (0 = any free port) and return the running server."""
    answers = Answers()
    loop = asyncio.get_running_loop()
    return await loop.create_server(lambda: Connection(answers), host, port, backlog=1024)


async def _serve_forever(host: str, port: int) -> None:
    server = await start_server(host, port)
    print(f"LISTENING {server.sockets[0].getsockname()[1]}", flush=True)
    async with server:
        await server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    try:
        with asyncio.Runner(loop_factory=_loop_factory()) as runner:
            runner.run(_serve_forever(args.host, args.port))
    except KeyboardInterrupt:
        pass


def _loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    # uvloop when present: the proxy runs under uvicorn[standard], which uses it too.
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


if __name__ == "__main__":
    main()
