"""The response classes the dialects answer with: an SSE stream and a whole JSON answer.

Owns how an answer's head and body are handed to the server (`send`) and what runs
when sending ends. Both override `__call__` (they drive `send` themselves); what
Starlette's `Response` gives them is listed in proxy/asgi/__init__.py.
Must not: know a dialect's format (the bodies come framed) or read the request.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from proxy.asgi.disconnect import unless_client_leaves


class SseResponse(Response):
    """A text/event-stream answer written as its body yields, watched for a client that leaves.

    Starlette's StreamingResponse runs each stream in an anyio task group with a
    second task listening for the disconnect (uvicorn speaks ASGI 2.3, whose
    `send` does not fail once the client is gone); this does the same with one
    plain task and a cancel scope (asgi/disconnect.py), a per-stream cost that
    showed in the W2/W3 profiles. `on_close` runs once the body ends, the client
    left, or the body never started (it must be idempotent and shield itself).
    """

    media_type = "text/event-stream"

    def __init__(self, body: AsyncIterator[bytes] | None, headers: dict[str, str],
                 on_close: Callable[[], Awaitable[None]]) -> None:
        headers["cache-control"] = "no-cache"
        headers["x-accel-buffering"] = "no"
        # Not Response.__init__: with no body it would promise `content-length: 0`.
        self.status_code = 200
        self.background = None
        self.init_headers(headers)
        self.body_iterator = body
        self.on_close = on_close

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            # The body lasts as long as the model writes: watched from the start.
            await unless_client_leaves(receive, self._write(send), watch_after=0)
        finally:
            await self.on_close()

    async def _write(self, send: Send) -> None:
        await send({"type": "http.response.start", "status": self.status_code,
                    "headers": self.raw_headers})
        async for piece in self._body(send):
            await send({"type": "http.response.body", "body": piece, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    def _body(self, send: Send) -> AsyncIterator[bytes]:
        assert self.body_iterator is not None
        return self.body_iterator


class ReportedAfter(Response):
    """A JSON answer that reports its request once sent, or once sending stopped.

    Its raw headers are built here in one go (Starlette's `init_headers` looks up and
    encodes each again: ~1% of a small request's instructions)."""

    def __init__(self, body: bytes, headers: dict[str, str], report: Callable[[], None]) -> None:
        self.status_code = 200
        self.background = None
        self.body = body
        self.raw_headers = [(b"content-type", b"application/json"),
                            (b"content-length", b"%d" % len(body))]
        self.raw_headers += [(k.encode("latin-1"), v.encode("latin-1"))
                             for k, v in headers.items()]
        self.report = report

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await send({"type": "http.response.start", "status": 200,
                        "headers": self.raw_headers})
            await send({"type": "http.response.body", "body": self.body})
        finally:
            self.report()
