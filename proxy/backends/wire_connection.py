"""One upstream HTTP/1.1 connection for the wire transport (backends/wire.py).

Owns the asyncio protocol and httptools' callbacks for one TCP connection and
the answer in flight on it: parsing status, headers and body as reads arrive,
pausing the socket past a high-water mark, the one read-timeout timer per
connection, and the reader's waits (`wait_headers`, `read`, `wait_pushed`,
which hands each read's body to a callback in the read callback itself).
Failures are httpx's transport errors. Must not: pool, retry or write
requests (that is wire.py's), or look at what a body says.
"""

from __future__ import annotations

import asyncio
import collections
import copy
import math
from collections.abc import Callable
from typing import cast

import httptools
import httpx

_HIGH_WATER = 256 * 1024
"""Buffered body bytes at which the socket stops being read (a slow client)."""
_TIMER_SLACK = 0.001
"""a loop may run a timer this much before its time: that is on time."""

class _NoCallbacks:
    """A parser protocol with no callbacks: httptools calls only those that exist."""


_LOST_PARSER = httptools.HttpResponseParser(_NoCallbacks())
"""what a lost connection keeps instead of its own parser: it is never fed."""


class Connection(asyncio.Protocol):
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
            self.close()
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
        self.close()
        self._wake()

    def close(self) -> None:
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
    # timer made and cancelled for each would be paid on every piece. The timer, when
    # it fires, ends the wait past its deadline or sets itself again.

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
