"""Clients that never finish sending are cut off: header and body read deadlines.

uvicorn times out idle keep-alive connections only; a client that sends half
a request line, or headers and then a trickle of body, holds its connection
(and, for a body, a request) for as long as it likes. Two deadlines fix that:

- `HeaderTimeoutProtocol`: the HTTP protocol uvicorn would pick (httptools,
  else h11) plus a timer from the first byte of a request (or the connection's
  start) to its complete headers; past it, a 408 and the connection closes.
  Bytes that are not HTTP get a 400 in the OpenAI error shape (uvicorn's own is
  plain text).
- the body deadline (the edge, proxy/middleware/edge.py): the whole body must
  arrive within it; past it the app's `receive()` reports a disconnect and
  marks the request, and `read_body` answers 408 (see chat_request.read_body).
  A request whose body came with its headers is marked `BODY_IN`: nothing is
  left to wait for, and the edge arms no deadline.
"""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
from uvicorn.protocols.http.auto import AutoHTTPProtocol

from proxy.errors import error_body

TIMED_OUT = "client_timed_out"
"""scope["state"] key set when the body deadline passed."""
BODY_IN = "client_body_in"
"""scope["state"] key set when the whole request came before the app started: its
body deadline has nothing to wait for (the edge skips it)."""

_TIMEOUT_BODY = orjson.dumps(error_body("request headers not received in time", 408,
                                         code="client_timeout"))
_TIMEOUT_ANSWER = (b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\n"
                   b"connection: close\r\ncontent-length: %d\r\n\r\n%s"
                   % (len(_TIMEOUT_BODY), _TIMEOUT_BODY))


_BAD_REQUEST_BODY = orjson.dumps(error_body(
    "invalid HTTP request (malformed request line, headers or chunked body)", 400,
    code="invalid_http"))
_BAD_REQUEST_ANSWER = (b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\n"
                       b"connection: close\r\ncontent-length: %d\r\n\r\n%s"
                       % (len(_BAD_REQUEST_BODY), _BAD_REQUEST_BODY))


def _header_timeout() -> float:
    """For worker processes, which get the protocol class by name: the resolved settings."""
    from proxy.settings_sources import settings_from_env

    return settings_from_env().client_timeout


class HeaderTimeoutProtocol(AutoHTTPProtocol):  # type: ignore[misc,valid-type]
    """uvicorn's HTTP protocol with a deadline for each request's headers."""

    header_timeout: float | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if type(self).header_timeout is None:
            type(self).header_timeout = _header_timeout()
        self._header_timer: asyncio.TimerHandle | None = None
        self._armed_for: Any = None

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)
        self._arm(self.cycle)

    def data_received(self, data: bytes) -> None:
        before = self.cycle
        starts = before is None or before.response_complete  # this data begins a request
        super().data_received(data)
        cycle = self.cycle
        if cycle is not before and cycle is not None and not getattr(cycle, "more_body", True):
            # A request begun in this read with its headers and body, as a small request's
            # usually are: all of it is in the server's buffer before the app runs.
            state = cycle.scope.get("state")
            if state is not None:
                state[BODY_IN] = True
        if self._header_timer is not None:
            if self.cycle is not self._armed_for:
                self._disarm()  # a new request's headers are complete
        elif starts and self.cycle is before and not self.transport.is_closing():
            # Its headers are not all here: the deadline runs from this first piece. (A
            # request whose headers came whole, as most do, never needed a timer.)
            self._arm(before)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self, cycle: Any) -> None:
        self._armed_for = cycle
        self._header_timer = self.loop.call_later(self.header_timeout or 60.0, self._too_slow)

    def _disarm(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def send_400_response(self, msg: str) -> None:
        # uvicorn's own answer to bytes that are not HTTP is a text/plain 400; an
        # OpenAI client parses error bodies as JSON, so it gets the usual error shape.
        self.transport.write(_BAD_REQUEST_ANSWER)
        self.transport.close()

    def _too_slow(self) -> None:
        self._header_timer = None
        if self.cycle is self._armed_for and not self.transport.is_closing():
            self.transport.write(_TIMEOUT_ANSWER)
            self.transport.close()


def header_timeout_protocol(timeout: float) -> type[asyncio.Protocol]:
    """The protocol class for one server with this header deadline."""
    return type("HeaderTimeoutProtocol", (HeaderTimeoutProtocol,), {"header_timeout": timeout})
