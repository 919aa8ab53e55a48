"""A lean HTTP/1.1 client transport for httpx: a keep-alive pool over httptools' parser.

Why not httpx's own pool or httpx-aiohttp: httpx's pool degrades under
concurrency (encode/httpx#3215), and the aiohttp transport's stack (httpx ->
httpx-aiohttp -> aiohttp) costs more than the whole pipeline (bench/README.md).
A backend speaks plain HTTP/1.1 to us over a few long-lived connections; this
does exactly that and nothing more: one write per request (wire_request.py),
answers parsed by httptools (llhttp, the C parser uvicorn already uses for our
own server side, so no new dependency) on one connection each
(wire_connection.py), bodies handed on as they arrive.

Owns the pool (idle connections per scheme, host and port, the slots that bound
them), the exchange (take a slot, reuse or connect, write, wait for the head)
and the answer's body stream. Must not: parse bytes, build a request's bytes,
or decide anything about what an answer says.

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
import ssl
import time
from collections.abc import AsyncIterator, Callable, Mapping

import httpx

from proxy.backends.wire_connection import Connection
from proxy.backends.wire_request import as_bytes, encode_request

Key = tuple[str, str, int]


class _Body(httpx.AsyncByteStream):
    """The answer's body as it arrives; gives the connection back (or closes it) at the end."""

    def __init__(self, pool: WireTransport, key: Key, conn: Connection,
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
        """`Connection.wait_pushed` with this answer's read timeout; nothing once the
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
        self.idle: dict[Key, collections.deque[Connection]] = {}
        self.slots = asyncio.Semaphore(max(1, max_connections))
        self._ssl = tls
        """whom an https upstream's certificate must chain to (backends/egress.py)."""
        self._closed = False

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        payload = encode_request(request.method, request.url, request.headers.raw,
                          await request.aread())
        return await self._exchange(request.method, request.url, payload,
                                    request.extensions.get("timeout") or {}, request)

    async def send(self, method: str, url: httpx.URL, headers: Mapping[str, str],
                   body: bytes | None, timeouts: Mapping[str, float | None]) -> httpx.Response:
        """The hot path's call: plain headers in, no `httpx.Request` built.

        The response has no `.request`. `headers` must hold no hop-by-hop ones
        (host and content-length are written here).
        """
        payload = encode_request(method, url, as_bytes(headers), body)
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
                        request: httpx.Request | None) -> Connection:
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
                conn.close()
                # Closed while idle in the pool (nothing came back, no timeout): one more
                # go, on a new connection. Anything else is the caller's.
                if not (reused and not conn.received and isinstance(exc, httpx.TransportError)
                        and not isinstance(exc, httpx.ReadTimeout)):
                    raise

    def _pooled(self, key: Key) -> Connection | None:
        idle = self.idle.get(key)
        if not idle:
            return None
        cutoff = time.monotonic() - self.keepalive_expiry
        while idle:
            conn = idle.pop()  # most recent first: the likeliest to be alive
            if not conn.closed and conn.idle_since >= cutoff:
                return conn
            conn.close()
        return None

    async def _connect(self, key: Key, timeout: float | None,
                       request: httpx.Request | None) -> Connection:
        scheme, host, port = key
        loop = asyncio.get_running_loop()
        tls = self._tls() if scheme == "https" else None
        try:
            async with asyncio.timeout(timeout):
                _, conn = await loop.create_connection(
                    lambda: Connection(loop), host, port, ssl=tls,
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

    def release(self, key: Key, conn: Connection) -> None:
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
        conn.close()

    async def aclose(self) -> None:
        self._closed = True
        for idle in self.idle.values():
            while idle:
                idle.pop().close()
