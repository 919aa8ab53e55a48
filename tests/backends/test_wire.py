"""The upstream HTTP/1.1 transport (backends/wire.py) against raw sockets on loopback.

Each test scripts what a backend writes, byte for byte, on a real asyncio
server, and drives the transport through httpx as the proxy does.
"""

from __future__ import annotations

import asyncio
import socket
import struct
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest

from proxy.backends.adapting import AdaptingSender
from proxy.backends.upstream import make_upstream
from proxy.backends.wire import WireTransport
from proxy.types import Profile

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter, int], Awaitable[None]]
TIMEOUT = {"connect": 2.0, "read": 2.0, "write": 2.0, "pool": 2.0}


async def read_request(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
    return head + (await reader.readexactly(length) if length else b"")


def writes(answer: bytes) -> Handler:
    """A backend answering a connection's first request with `answer`, then holding it open."""

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        await read_request(reader)
        writer.write(answer)
        await reader.read()

    return handler


@asynccontextmanager
async def backend(handler: Handler) -> AsyncIterator[tuple[str, list[int]]]:
    """A server calling `handler(reader, writer, connection_number)`; yields its URL and
    the list of connection numbers opened so far."""
    opened: list[int] = []
    tasks: list[asyncio.Task[Any]] = []

    async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        tasks.append(asyncio.current_task())  # type: ignore[arg-type]
        opened.append(len(opened))
        try:
            await handler(reader, writer, opened[-1])
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(on_connect, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}", opened
    finally:
        server.close()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


@asynccontextmanager
async def client(url: str, **kwargs: Any) -> AsyncIterator[httpx.AsyncClient]:
    transport = WireTransport(max_connections=kwargs.pop("max_connections", 8), **kwargs)
    async with httpx.AsyncClient(base_url=url, transport=transport,
                                 timeout=httpx.Timeout(**TIMEOUT)) as http:
        yield http


def ok(body: bytes, extra: bytes = b"") -> bytes:
    return (b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n%s\r\n%s"
            % (len(body), extra, body))


async def test_keep_alive_reuses_one_connection_for_sequential_requests() -> None:
    seen: list[bytes] = []

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        while True:
            seen.append(await read_request(reader))
            writer.write(ok(b'{"n":%d}' % len(seen)))

    async with backend(answer) as (url, opened), client(url) as http:
        first = await http.post("/v1/x", content=b'{"a":1}')
        second = await http.post("/v1/x", content=b'{"a":2}')
    assert (first.json(), second.json()) == ({"n": 1}, {"n": 2})
    assert opened == [0]
    assert seen[0].startswith(b"POST /v1/x HTTP/1.1\r\n")
    assert b"\r\ncontent-length: 7\r\n" in seen[0].lower() and seen[0].endswith(b'\r\n\r\n{"a":1}')


async def test_a_chunked_stream_is_handed_on_as_it_arrives() -> None:
    release = asyncio.Event()

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                     b"transfer-encoding: chunked\r\n\r\n7\r\ndata: 1\r\n")
        await writer.drain()
        await release.wait()
        writer.write(b"7\r\ndata: 2\r\n0\r\n\r\n")
        await writer.drain()
        await reader.read()  # keep the connection open

    async with backend(answer) as (url, _), client(url) as http, \
            http.stream("POST", "/s", content=b"{}") as response:
        pieces = []
        async for piece in response.aiter_raw():
            pieces.append(piece)
            release.set()  # the second piece is only sent after the first arrived
    assert pieces == [b"data: 1", b"data: 2"]


async def test_an_answer_read_to_its_end_pushes_nothing_from_its_connections_next_answer(
        ) -> None:
    # A reader may ask an ended answer to push on (a translated body yields its tail
    # after the wire's body ended); by then the connection can be another request's.
    release = asyncio.Event()

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        await read_request(reader)
        writer.write(ok(b'{"a":1}'))
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")
        await writer.drain()
        await release.wait()
        writer.write(b"7\r\n{\"b\":2}\r\n0\r\n\r\n")
        await reader.read()

    transport = WireTransport(max_connections=8)
    async with backend(answer) as (url, opened):
        target = httpx.URL(url + "/v1/x")
        first = await transport.send("POST", target, {}, b"{}", TIMEOUT)
        assert [piece async for piece in first.stream] == [b'{"a":1}']
        second = await transport.send("POST", target, {}, b"{}", TIMEOUT)
        pushed: list[bytes] = []
        waiting = asyncio.ensure_future(first.stream.wait_pushed(  # type: ignore[attr-defined]
            lambda piece: pushed.append(piece) is None))
        await asyncio.sleep(0.05)
        release.set()
        assert [piece async for piece in second.stream] == [b'{"b":2}']
        await asyncio.wait_for(waiting, 1)
        await transport.aclose()
    assert opened == [0] and pushed == []


async def test_a_body_ended_by_the_close_is_complete_and_not_reused() -> None:
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nconnection: close\r\n\r\nall of it %d" % n)

    async with backend(answer) as (url, opened), client(url) as http:
        first = await http.get("/")
        second = await http.get("/")
    assert (first.content, second.content) == (b"all of it 0", b"all of it 1")
    assert opened == [0, 1]


@pytest.mark.parametrize("reset", [True, False])
async def test_a_broken_body_hands_on_what_arrived_then_fails(reset: bool) -> None:
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"
                     b"8\r\ndata: 1\n\r\n")
        await writer.drain()
        await asyncio.sleep(0.05)
        if reset:  # SO_LINGER 0: the close is an RST, as a crashed backend's
            writer.get_extra_info("socket").setsockopt(
                socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        writer.transport.abort()

    expected = httpx.ReadError if reset else httpx.RemoteProtocolError
    async with backend(answer) as (url, _), client(url) as http, \
            http.stream("POST", "/s", content=b"{}") as response:
        got = []
        with pytest.raises(expected):
            async for piece in response.aiter_raw():
                got.append(piece)
    assert got == [b"data: 1\n"]


async def test_a_pooled_connection_seen_closed_while_idle_is_not_used() -> None:
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        await read_request(reader)
        writer.write(ok(b'"conn %d"' % n))  # keep-alive promised, then closed anyway
        await writer.drain()

    async with backend(answer) as (url, opened), client(url) as http:
        first = await http.post("/", content=b"{}")
        await asyncio.sleep(0.05)  # the server's close reaches us... or not yet
        second = await http.post("/", content=b"{}")
    assert (first.json(), second.json()) == ("conn 0", "conn 1")
    assert opened == [0, 1]


async def test_a_request_the_pooled_connection_drops_unanswered_is_sent_again() -> None:
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        await read_request(reader)
        writer.write(ok(b'"conn %d"' % n))
        await writer.drain()
        if n == 0:  # the next request finds the connection alive, then it closes unanswered
            await read_request(reader)
            return
        await reader.read()

    async with backend(answer) as (url, opened), client(url) as http:
        first = await http.post("/", content=b"{}")
        second = await http.post("/", content=b"{}")
    assert (first.json(), second.json()) == ("conn 0", "conn 1")
    assert opened == [0, 1]


async def test_a_fresh_connection_closed_unanswered_is_an_error_not_a_retry() -> None:
    async with backend(read_request_only) as (url, opened), client(url) as http:
        with pytest.raises(httpx.RemoteProtocolError):
            await http.post("/", content=b"{}")
    assert opened == [0]


async def test_an_upstream_that_never_answers_is_a_read_timeout() -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        await reader.read()

    async with backend(silent) as (url, _), client(url) as http:
        with pytest.raises(httpx.ReadTimeout):
            await http.post("/", content=b"{}", timeout=0.2)


async def test_a_stream_that_stalls_is_a_read_timeout_after_what_arrived() -> None:
    answer = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n"
    async with backend(writes(answer)) as (url, _), client(url) as http, \
            http.stream("POST", "/", content=b"{}", timeout=0.2) as response:
        got = []
        with pytest.raises(httpx.ReadTimeout):
            async for piece in response.aiter_raw():
                got.append(piece)
    assert got == [b"abc"]


async def test_a_refused_connection_is_a_connect_error() -> None:
    async with backend(read_request_only) as (url, _):
        pass  # closed: nothing listens on that port now
    async with client(url) as http:
        with pytest.raises(httpx.ConnectError):
            await http.get("/")


async def read_request_only(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                            n: int) -> None:
    await read_request(reader)


async def test_garbage_instead_of_http_is_a_protocol_error() -> None:
    answer = b"\x00\xffnot http at all\r\n\r\n"
    async with backend(writes(answer)) as (url, _), client(url) as http:
        with pytest.raises(httpx.RemoteProtocolError):
            await http.get("/")


async def test_head_has_no_body_whatever_its_content_length_says() -> None:
    answer = b"HTTP/1.1 200 OK\r\ncontent-length: 1234\r\n\r\n"
    async with backend(writes(answer)) as (url, _), client(url) as http:
        response = await http.head("/")
    assert response.status_code == 200 and response.content == b""


async def test_informational_answers_are_skipped() -> None:
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 100 Continue\r\nx-interim: 1\r\n\r\n")
        await writer.drain()
        await asyncio.sleep(0.05)  # the 1xx is read on its own before the answer comes
        writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n1\r\n{\r\n")
        await writer.drain()
        await asyncio.sleep(0.05)
        writer.write(b"1\r\n}\r\n0\r\n\r\n")
        await reader.read()

    async with backend(answer) as (url, _), client(url) as http:
        response = await http.post("/", content=b"{}")
    assert (response.status_code, response.content) == (200, b"{}")
    assert "x-interim" not in response.headers


async def test_an_answer_abandoned_half_read_closes_its_connection() -> None:
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        while True:
            await read_request(reader)
            writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n")
            await writer.drain()
            if n > 0:
                writer.write(b"0\r\n\r\n")

    async with backend(answer) as (url, opened), client(url) as http:
        async with http.stream("POST", "/", content=b"{}") as response:
            async for _ in response.aiter_raw():
                break  # the rest never read
        second = await http.post("/", content=b"{}")
    assert second.content == b"abc"
    assert opened == [0, 1]


async def test_a_header_with_a_line_break_is_never_sent() -> None:
    async with backend(read_request_only) as (url, opened), client(url) as http:
        with pytest.raises(httpx.LocalProtocolError):
            await http.get("/", headers={"x-a": "b\r\nx-injected: 1"})
    assert opened == []


async def test_a_large_body_read_slowly_arrives_whole() -> None:
    body = bytes(range(256)) * 8192  # 2 MiB: the socket is paused and resumed

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        await read_request(reader)
        writer.write(ok(body))
        await writer.drain()
        await reader.read()

    async with backend(answer) as (url, _), client(url) as http, \
            http.stream("GET", "/") as response:
        parts = []
        async for piece in response.aiter_raw():
            parts.append(piece)
            await asyncio.sleep(0.001)
    assert b"".join(parts) == body


async def test_the_pool_limit_makes_requests_wait_then_time_out() -> None:
    async def slow(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        await read_request(reader)
        await asyncio.sleep(0.5)
        writer.write(ok(b"{}"))
        await reader.read()

    async with backend(slow) as (url, _), client(url, max_connections=1) as http:
        first = asyncio.create_task(http.post("/", content=b"{}"))
        await asyncio.sleep(0.05)
        with pytest.raises(httpx.PoolTimeout):
            await http.post("/", content=b"{}", timeout=httpx.Timeout(2.0, pool=0.1))
        assert (await first).status_code == 200


async def test_the_hot_path_send_writes_plain_headers_host_and_length() -> None:
    seen: list[bytes] = []

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        seen.append(await read_request(reader))
        writer.write(ok(b"{}"))
        await reader.read()

    async with backend(answer) as (url, _):
        wire = WireTransport(max_connections=2)
        response = await wire.send("POST", httpx.URL(url + "/v1/chat/completions?a=1"),
                                   {"x-k": "v", "authorization": "Bearer s"}, b'{"m":1}',
                                   TIMEOUT)
        assert (response.status_code, await response.aread()) == (200, b"{}")
        with pytest.raises(httpx.LocalProtocolError):
            await wire.send("GET", httpx.URL(url), {"x": "a\nb"}, None, TIMEOUT)
        await wire.aclose()
    host = url.removeprefix("http://").encode()
    assert seen == [b"POST /v1/chat/completions?a=1 HTTP/1.1\r\nhost: " + host + b"\r\n"
                    b"x-k: v\r\nauthorization: Bearer s\r\ncontent-length: 7\r\n\r\n"
                    b'{"m":1}']


async def test_slots_come_back_after_failures_and_answers() -> None:
    """One connection slot: every way an exchange ends must give it back."""
    answers = iter([b"\x00garbage\r\n\r\n", None, ok(b"1"), ok(b"2"), ok(b"3")])

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        while True:
            await read_request(reader)
            reply = next(answers)
            if reply is None:  # silent: the client's read times out
                await reader.read()
                return
            writer.write(reply)

    async with backend(answer) as (url, _), client(url, max_connections=1) as http:
        with pytest.raises(httpx.RemoteProtocolError):
            await http.get("/")
        with pytest.raises(httpx.ReadTimeout):
            await http.get("/", timeout=httpx.Timeout(0.1, pool=0.2))
        bodies = [(await http.get("/", timeout=httpx.Timeout(2.0, pool=0.2))).content
                  for _ in range(3)]
    assert bodies == [b"1", b"2", b"3"]


async def test_a_timed_out_request_on_a_pooled_connection_is_not_sent_again() -> None:
    seen: list[bytes] = []

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        seen.append(await read_request(reader))
        writer.write(ok(b"{}"))
        seen.append(await read_request(reader))
        await reader.read()  # the second one is never answered

    async with backend(answer) as (url, opened), client(url) as http:
        await http.post("/", content=b"{}")
        with pytest.raises(httpx.ReadTimeout):
            await http.post("/", content=b"{}", timeout=0.2)
    assert opened == [0] and len(seen) == 2  # a generation is never started twice


@pytest.mark.parametrize("status_line", [b"HTTP/1.1 200 OK", b"HTTP/1.0 200 OK"])
async def test_an_answer_that_says_close_is_not_reused(status_line: bytes) -> None:
    # cpp-httplib (llama-server) says `Connection: close` now and then without closing
    # at once; HTTP/1.0 without keep-alive means the same.
    extra = b"connection: close\r\n" if status_line.endswith(b"1.1 200 OK") else b""

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        while True:
            await read_request(reader)
            writer.write(status_line + b"\r\n" + extra + b"content-length: 2\r\n\r\nok")

    async with backend(answer) as (url, opened), client(url) as http:
        first, second = await http.get("/"), await http.get("/")
    assert (first.content, second.content) == (b"ok", b"ok")
    assert opened == [0, 1]


async def test_a_connection_after_head_is_not_reused() -> None:
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        while True:
            head = await read_request(reader)
            if head.startswith(b"HEAD"):
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\n")
            else:
                writer.write(ok(b'"get %d"' % n))

    async with backend(answer) as (url, opened), client(url) as http:
        assert (await http.head("/")).content == b""
        assert (await http.get("/")).json() == "get 1"
    assert opened == [0, 1]


async def test_a_shorter_read_timeout_on_a_reused_connection_is_kept() -> None:
    # One timer per connection: a wait with an earlier deadline than the timer still
    # pending from a longer one must not wait for that timer.
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        await read_request(reader)
        writer.write(ok(b"{}"))
        await read_request(reader)
        await reader.read()  # never answered

    async with backend(answer) as (url, opened), client(url) as http:
        await http.post("/", content=b"{}", timeout=30.0)
        started = time.monotonic()
        with pytest.raises(httpx.ReadTimeout):
            await http.post("/", content=b"{}", timeout=0.2)
        assert time.monotonic() - started < 1.5
    assert opened == [0]


async def test_a_stream_slower_than_nothing_but_within_its_timeout_is_not_cut() -> None:
    # Pieces 0.15 s apart under a 0.4 s read timeout: each wait is timed on its own.
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")
        for _ in range(6):
            await asyncio.sleep(0.15)
            writer.write(b"1\r\nx\r\n")
        writer.write(b"0\r\n\r\n")

    async with backend(answer) as (url, _), client(url) as http, \
            http.stream("GET", "/", timeout=httpx.Timeout(2.0, read=0.4)) as response:
        body = b"".join([piece async for piece in response.aiter_raw()])
    assert body == b"x" * 6


async def test_a_tool_stream_closed_early_gives_its_connection_back() -> None:
    # A streamed request with tools is read through the adapting sender's wrapper (it
    # peeks at the first bytes); closing it must close the backend's answer, or the one
    # connection slot stays taken and the next request waits for the pool.
    event = b'data: {"choices":[{"index":0,"delta":{"content":"hi"}}]}\n\n'

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        while True:
            await read_request(reader)
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                         b"transfer-encoding: chunked\r\n\r\n" + b"%x\r\n%s\r\n" % (
                             len(event), event))
            await writer.drain()  # and never ends the stream

    body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "x"}],
            "tools": [{"type": "function", "function": {"name": "f"}}]}
    async with backend(answer) as (url, _):
        upstream = make_upstream(url, None, connect_timeout=0.5, read_timeout=2.0,
                                 max_connections=1)
        try:
            for _ in range(2):  # the second send needs the slot the first one held
                response = await AdaptingSender(Profile(model="m"), body).send(
                    upstream, body, {"content-type": "application/json"})
                assert (await response.aiter_raw().__anext__()).startswith(b"data: ")
                await response.aclose()
        finally:
            await upstream.client.aclose()


async def test_a_wait_without_a_timeout_is_not_ended_by_an_earlier_waits_timer() -> None:
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        await read_request(reader)
        writer.write(ok(b"1"))
        await read_request(reader)
        await asyncio.sleep(0.5)  # past the first request's read timeout
        writer.write(ok(b"2"))

    async with backend(answer) as (url, _), client(url) as http:
        first = await http.get("/", timeout=httpx.Timeout(2.0, read=0.3))
        second = await http.get("/", timeout=httpx.Timeout(2.0, read=None))
    assert (first.content, second.content) == (b"1", b"2")
