"""A lean HTTP/1.1 client transport for httpx: a keep-alive pool and httptools' parser.

Why not httpx's own pool or httpx-aiohttp: httpx's pool degrades under
concurrency (encode/httpx#3215), and with the aiohttp transport the client
stack (httpx -> httpx-aiohttp -> aiohttp) was the largest single cost in the
W1 profile (~21% of the proxy's samples, more than the whole pipeline). A
backend speaks plain HTTP/1.1 to us over a few long-lived connections; this
module does exactly that and nothing more: one write per request, responses
parsed by httptools (llhttp, the C parser uvicorn already uses for our own
server side, so no new dependency), bodies handed on as they arrive.

What it gives httpx: `WireTransport.handle_async_request` returns an
`httpx.Response` whose stream yields the (de-chunked) body as it arrives,
everything buffered joined into one piece. Failures are httpx's transport
errors, so callers map them as before: `ConnectError`/`ConnectTimeout`
(refused, unreachable), `ReadTimeout` (no bytes for `read` seconds),
`ReadError`/`RemoteProtocolError` (reset or closed mid-answer, garbage),
`PoolTimeout`. Bytes that arrived before a failure are handed out before it
is raised.

Keep-alive: a connection goes back to the pool only after a complete answer
that allows it; an answer abandoned half-read closes its connection. A pooled
connection the server closed while idle fails before a single byte arrives:
such a request is sent again once, on a new connection.

Not here (no backend we speak to needs them): HTTP/2, proxies (an upstream
behind one goes through httpx's transport: backends/egress.py), Expect:
100-continue, request bodies that stream (bodies are read whole first).
"""

from __future__ import annotations

import asyncio
import collections
import copy
import math
import ssl
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping
from typing import cast

import httptools
import httpx

_HIGH_WATER = 256 * 1024
"""Buffered body bytes at which the socket stops being read (a slow client)."""
_TIMER_SLACK = 0.001
"""a loop may run a timer this much before its time: that is on time."""

Key = tuple[str, str, int]


class _NoCallbacks:
    """A parser protocol with no callbacks: httptools calls only those that exist."""


_LOST_PARSER = httptools.HttpResponseParser(_NoCallbacks())
"""what a lost connection keeps instead of its own parser: it is never fed."""


class _Connection(asyncio.Protocol):
    """One TCP connection and the answer in flight on it, fed by httptools callbacks."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.closed = False
        self.idle_since = 0.0
        self.active = False
        self.waiter: asyncio.Future[None] | None = None
        self.deadline = 0.0
        """loop time by which the wait in progress must end (a read timeout)."""
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = 0.0
        self.push: Callable[[bytes], bool] | None = None
        """while the reader waits in `wait_pushed`: takes each read's body in the read
        callback; False hands the answer back to the reader."""
        self.push_timeout: float | None = None
        self._begin(head=False)

    def _begin(self, head: bool) -> None:
        self.head = head
        self.status = 0
        self.reason = b""
        self.headers: list[tuple[bytes, bytes]] = []
        self.headers_done = False
        self.complete = False
        self.keep_alive = False
        self.framed = False
        """the answer says where its body ends (content-length or chunked)."""
        self.body: collections.deque[bytes] = collections.deque()
        self.buffered = 0
        self.paused = False
        self.received = False
        self.error: httpx.TransportError | None = None
        self.informational = False

    def start(self, head: bool) -> None:
        self._begin(head)
        self.active = True

    # --- asyncio.Protocol --------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports do not subclass asyncio.Transport; they behave as one.
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        if not self.active:  # bytes nobody asked for: the connection is not reusable
            self._close()
            return
        self.received = True
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(httpx.RemoteProtocolError(f"invalid HTTP answer from upstream: {exc}"))
        except httptools.HttpParserUpgrade:
            self._fail(httpx.RemoteProtocolError("upstream switched protocols"))
        if self.body:
            if self.push is not None:
                self._pushed()
                return
            # Once per read, not per body piece: a read of a 64-event stream holds 64
            # chunks of the chunked encoding, and the reader wakes once either way.
            if self.buffered > _HIGH_WATER and not self.paused and self.transport is not None:
                self.paused = True
                self.transport.pause_reading()
            self._wake()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        # The parser holds this connection's callbacks and the transport holds this
        # protocol: cycles that would leave every closed connection (and what its
        # answer held) to the cyclic collector. Nothing reads or writes it from here on.
        self.parser = _LOST_PARSER
        self.transport = None
        if self.active and not self.complete and self.error is None:
            if self.headers_done and not self.framed:
                self.complete = True  # a body delimited by the close (HTTP/1.0 style)
            elif exc is not None:
                self.error = httpx.ReadError(f"upstream connection broke: {exc!r}")
            else:
                self.error = httpx.RemoteProtocolError(
                    "upstream closed the connection before the answer was complete")
        self._wake()

    # --- httptools callbacks ------------------------------------------------

    def on_status(self, status: bytes) -> None:
        self.reason += status

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name, value))
        lowered = name.lower()
        if lowered == b"content-length" or (lowered == b"transfer-encoding"
                                            and value.lower().find(b"chunked") >= 0):
            self.framed = True

    def on_headers_complete(self) -> None:
        status = self.parser.get_status_code()
        if 100 <= status < 200:  # 100 Continue and friends: the real answer follows
            self.informational = True
            self.headers, self.reason, self.framed = [], b"", False
            return
        self.status = status
        self.keep_alive = self.parser.should_keep_alive()
        if status in (204, 304):
            self.framed = True  # no body by definition
        self.headers_done = True
        if self.head:  # no body follows a HEAD answer; llhttp cannot be told, so no reuse
            self.complete = True
            self.keep_alive = False
        self._wake()

    def on_body(self, body: bytes) -> None:
        if not self.head:  # data_received wakes the reader once the read is parsed
            self.body.append(body)
            self.buffered += len(body)

    def on_message_complete(self) -> None:
        if self.informational:
            self.informational = False
            return
        self.complete = True
        self._wake()

    def _pushed(self) -> None:
        """The read's body to `push`, here in the read callback; the wait goes on (its
        read timeout counted from now) unless `push` hands the answer back."""
        assert self.push is not None
        if self.push(self._take_body()):
            if self.push_timeout is not None:
                self.deadline = self.loop.time() + self.push_timeout  # the timer re-arms
            return
        self.push = None
        self._wake()

    def _take_body(self) -> bytes:
        """Everything buffered, joined; reading goes on if it had paused for it."""
        piece = self.body.popleft() if len(self.body) == 1 else b"".join(self.body)
        self.body.clear()
        self.buffered = 0
        if self.paused and self.transport is not None:
            self.paused = False
            self.transport.resume_reading()
        return piece

    # --- the reader's side --------------------------------------------------

    def _wake(self) -> None:
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _fail(self, error: httpx.TransportError) -> None:
        if self.error is None:
            self.error = error
        self._close()
        self._wake()

    def _close(self) -> None:
        self.closed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self.transport is not None:
            self.transport.close()

    async def _wait(self, timeout: float | None) -> None:
        waiter = self.waiter = self.loop.create_future()
        if timeout is not None:
            self._arm(self.loop.time() + timeout)
        else:
            self.deadline = math.inf  # a timer left from a timed wait must not end this one
        try:
            await waiter
        finally:
            self.waiter = None

    # One timer per connection, not one per wait: a stream waits once per piece, and a
    # timer made and cancelled each time was a few microseconds of every piece. The
    # timer, when it fires, ends the wait past its deadline or sets itself again.

    def _arm(self, deadline: float) -> None:
        self.deadline = deadline
        if self._timer is not None:
            if self._timer_at <= deadline:
                return  # it fires first and sets itself again for the rest
            self._timer.cancel()
        self._timer_at = deadline
        self._timer = self.loop.call_at(deadline, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        waiter = self.waiter
        if waiter is None or waiter.done() or self.deadline == math.inf:
            return  # nobody waits, or without a deadline: the next timed wait arms it
        if self.loop.time() + _TIMER_SLACK >= self.deadline:
            _expire(waiter)
        else:
            self._arm(self.deadline)

    def _failure(self) -> httpx.TransportError:
        """The connection's error as a fresh exception to raise. The stored one is never
        raised, so it never holds a traceback: that would hold the frames of the request
        that read it, which hold this connection again (a cycle that keeps the request
        for the cyclic collector)."""
        assert self.error is not None
        return copy.copy(self.error)

    async def wait_headers(self, timeout: float | None) -> None:
        while not self.headers_done:
            if self.error is not None:
                raise self._failure()
            try:
                await self._wait(timeout)
            except TimeoutError:
                raise httpx.ReadTimeout("upstream sent no answer in time") from None

    async def wait_pushed(self, push: Callable[[bytes], bool], timeout: float | None) -> None:
        """Wait for the answer to go on while `push` takes each read's body as it arrives
        (called in the read callback: no task wakes for it). Returns, for `read`, once
        `push` returns False, the answer is complete or failed, or (at once) when a
        piece is already buffered. A timeout ends the wait like `read`'s."""
        if self.body or self.complete or self.error is not None:
            return
        self.push, self.push_timeout = push, timeout
        try:
            await self._wait(timeout)
        except TimeoutError:
            raise httpx.ReadTimeout("upstream sent nothing in time") from None
        finally:
            self.push = None

    async def read(self, timeout: float | None) -> bytes:
        """What arrived since the last read, joined; b"" once the answer is complete."""
        while True:
            if self.body:
                return self._take_body()
            if self.error is not None:
                raise self._failure()
            if self.complete:
                return b""
            try:
                await self._wait(timeout)
            except TimeoutError:
                raise httpx.ReadTimeout("upstream sent nothing in time") from None


def _expire(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_exception(TimeoutError())


class _Body(httpx.AsyncByteStream):
    """The answer's body as it arrives; gives the connection back (or closes it) at the end."""

    def __init__(self, pool: WireTransport, key: Key, conn: _Connection,
                 timeout: float | None) -> None:
        self.pool = pool
        self.key = key
        self.conn = conn
        self.timeout = timeout
        self.done = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        conn = self.conn
        try:
            while piece := await conn.read(self.timeout):
                yield piece
        finally:
            self._finish()

    async def wait_pushed(self, push: Callable[[bytes], bool]) -> None:
        """`_Connection.wait_pushed` with this answer's read timeout; nothing once the
        answer has ended (its connection may be serving another request by now)."""
        if not self.done:
            await self.conn.wait_pushed(push, self.timeout)

    async def aclose(self) -> None:
        self._finish()

    def _finish(self) -> None:
        if not self.done:
            self.done = True
            self.pool.release(self.key, self.conn)


def close_now(response: httpx.Response) -> bool:
    """`response.aclose()` done here: closing this transport's answers never waits (the
    connection goes back to the pool, or is closed). False for another transport's
    answer, which must be awaited."""
    body = response.stream
    if not isinstance(body, _Body):
        return False
    response.is_closed = True
    body._finish()
    return True


class WireTransport(httpx.AsyncBaseTransport):
    """httpx transport: HTTP/1.1 keep-alive connections per (scheme, host, port)."""

    def __init__(self, *, max_connections: int, max_idle: int = 256,
                 keepalive_expiry: float = 30.0, tls: ssl.SSLContext | None = None) -> None:
        self.max_idle = max_idle
        self.keepalive_expiry = keepalive_expiry
        self.idle: dict[Key, collections.deque[_Connection]] = {}
        self.slots = asyncio.Semaphore(max(1, max_connections))
        self._ssl = tls
        """whom an https upstream's certificate must chain to (backends/egress.py)."""
        self._closed = False

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        payload = _encode(request.method, request.url, request.headers.raw,
                          await request.aread())
        return await self._exchange(request.method, request.url, payload,
                                    request.extensions.get("timeout") or {}, request)

    async def send(self, method: str, url: httpx.URL, headers: Mapping[str, str],
                   body: bytes | None, timeouts: Mapping[str, float | None]) -> httpx.Response:
        """The hot path's call: plain headers in, no `httpx.Request` built (~15-50 us).

        The response has no `.request`. `headers` must hold no hop-by-hop ones
        (host and content-length are written here).
        """
        payload = _encode(method, url, _as_bytes(headers), body)
        return await self._exchange(method, url, payload, timeouts, None)

    async def _exchange(self, method: str, url: httpx.URL, payload: bytes,
                        timeouts: Mapping[str, float | None],
                        request: httpx.Request | None) -> httpx.Response:
        https = url.scheme == "https"
        key = (url.scheme, url.host, url.port or (443 if https else 80))
        await self._take_slot(timeouts.get("pool"), request)
        try:
            conn = await self._answered(key, payload, method == "HEAD", timeouts, request)
        except BaseException:
            self.slots.release()
            raise
        return httpx.Response(conn.status, headers=conn.headers,
                              stream=_Body(self, key, conn, timeouts.get("read")),
                              extensions={"http_version": b"HTTP/1.1",
                                          "reason_phrase": conn.reason.strip()},
                              request=request)

    async def _take_slot(self, timeout: float | None, request: httpx.Request | None) -> None:
        if not self.slots.locked():
            await self.slots.acquire()  # free: returns without suspending
            return
        try:
            await asyncio.wait_for(self.slots.acquire(), timeout)
        except TimeoutError:
            raise httpx.PoolTimeout("no upstream connection free in time",
                                    request=request) from None

    async def _answered(self, key: Key, payload: bytes, head: bool,
                        timeouts: Mapping[str, float | None],
                        request: httpx.Request | None) -> _Connection:
        """A connection with the answer's headers in; the pool's stale connection is retried."""
        while True:
            conn = self._pooled(key)
            reused = conn is not None
            if conn is None:
                conn = await self._connect(key, timeouts.get("connect"), request)
            conn.start(head)
            assert conn.transport is not None
            conn.transport.write(payload)
            try:
                await conn.wait_headers(timeouts.get("read"))
                return conn
            except BaseException as exc:
                conn.active = False
                conn._close()
                # Closed while idle in the pool (nothing came back, no timeout): one more
                # go, on a new connection. Anything else is the caller's.
                if not (reused and not conn.received and isinstance(exc, httpx.TransportError)
                        and not isinstance(exc, httpx.ReadTimeout)):
                    raise

    def _pooled(self, key: Key) -> _Connection | None:
        idle = self.idle.get(key)
        if not idle:
            return None
        cutoff = time.monotonic() - self.keepalive_expiry
        while idle:
            conn = idle.pop()  # most recent first: the likeliest to be alive
            if not conn.closed and conn.idle_since >= cutoff:
                return conn
            conn._close()
        return None

    async def _connect(self, key: Key, timeout: float | None,
                       request: httpx.Request | None) -> _Connection:
        scheme, host, port = key
        loop = asyncio.get_running_loop()
        tls = self._tls() if scheme == "https" else None
        try:
            async with asyncio.timeout(timeout):
                _, conn = await loop.create_connection(
                    lambda: _Connection(loop), host, port, ssl=tls,
                    server_hostname=host if tls is not None else None)
        except TimeoutError as exc:
            raise httpx.ConnectTimeout(f"connecting to {host}:{port} timed out",
                                       request=request) from exc
        except OSError as exc:
            raise httpx.ConnectError(f"cannot connect to {host}:{port}: {exc.strerror or exc}",
                                     request=request) from exc
        return conn

    def _tls(self) -> ssl.SSLContext:
        if self._ssl is None:
            self._ssl = ssl.create_default_context()
        return self._ssl

    def release(self, key: Key, conn: _Connection) -> None:
        """Back to the pool after a complete, reusable answer; otherwise closed."""
        conn.active = False
        self.slots.release()
        if (conn.complete and conn.keep_alive and conn.error is None and not conn.closed
                and not conn.body and not self._closed):
            idle = self.idle.setdefault(key, collections.deque())
            if len(idle) < self.max_idle:
                conn.idle_since = time.monotonic()
                idle.append(conn)
                return
        conn._close()

    async def aclose(self) -> None:
        self._closed = True
        for idle in self.idle.values():
            while idle:
                idle.pop()._close()


_WRITTEN_HERE = frozenset({b"host", b"content-length", b"transfer-encoding"})


def _encode(method: str, url: httpx.URL, headers: Iterable[tuple[bytes, bytes]],
            body: bytes | None) -> bytes:
    """The request line, headers and body as one buffer (one write, one packet).

    `host` and `content-length` are written here from the URL and the body (the body
    is always whole, so a `transfer-encoding` given is dropped too)."""
    lines = [b"%s: %s\r\n" % (name, value) for name, value in headers
             if name.lower() not in _WRITTEN_HERE]
    # A line break inside a name or value would add lines: one count over them all.
    given = b"".join(lines)
    if given.count(b"\n") != len(lines) or given.count(b"\r") != len(lines):
        raise httpx.LocalProtocolError("header with a line break")
    lines = [b"%s %s HTTP/1.1\r\nhost: %s\r\n" % (method.encode("ascii"), url.raw_path,
                                                    url.netloc), given]
    if body or method in ("POST", "PUT", "PATCH"):
        lines.append(b"content-length: %d\r\n" % len(body or b""))
    lines.append(b"\r\n")
    if body:
        lines.append(body)
    return b"".join(lines)


def _as_bytes(headers: Mapping[str, str]) -> Iterator[tuple[bytes, bytes]]:
    """Plain str headers as bytes: latin-1 as HTTP has it, UTF-8 (as httpx does) for
    what latin-1 cannot say."""
    for name, value in headers.items():
        try:
            yield name.encode("latin-1"), value.encode("latin-1")
        except UnicodeEncodeError:
            yield name.encode(), value.encode()
