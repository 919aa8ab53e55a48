"""The response classes the dialects answer with: an SSE stream and a whole JSON answer.

Owns how an answer's head and body are handed to the server (`send`) and what runs
when sending ends. Both are built by Starlette's own constructors and override
`__call__`: they drive `send` themselves.
Must not: know a dialect's format (the bodies come framed) or read the request.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

from starlette.responses import Response, StreamingResponse
from starlette.types import Receive, Scope, Send

from proxy.asgi.disconnect import unless_client_leaves


class SseResponse(StreamingResponse):
    """A text/event-stream answer written as its body yields, watched for a client that leaves.

    Starlette's StreamingResponse runs each stream in an anyio task group with a
    second task listening for the disconnect (uvicorn speaks ASGI 2.3, whose
    `send` does not fail once the client is gone); this does the same with one
    plain task and a cancel scope (asgi/disconnect.py), cheaper per stream.
    `on_close` runs once the body ends, the client left, or the body never started
    (it must be idempotent and shield itself).
    """

    def __init__(self, body: AsyncIterator[bytes] | None, headers: dict[str, str],
                 on_close: Callable[[], Awaitable[None]]) -> None:
        """`body`, or None when a subclass makes it as sending starts (`_body(send)`)."""
        headers["cache-control"] = "no-cache"
        headers["x-accel-buffering"] = "no"
        super().__init__(_NoBody(), headers=headers, media_type="text/event-stream")
        self.pieces = body
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
        assert self.pieces is not None
        return self.pieces


class _NoBody:
    """Starlette's body iterator, never read: `__call__` sends what `_body` yields."""

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self

    async def __anext__(self) -> bytes:
        raise StopAsyncIteration


class ReportedAfter(Response):
    """A JSON answer that reports its request once sent, or once sending stopped."""

    def __init__(self, body: bytes, headers: dict[str, str], report: Callable[[], None]) -> None:
        super().__init__(body, headers=headers, media_type="application/json")
        self.report = report

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await send({"type": "http.response.start", "status": 200,
                        "headers": self.raw_headers})
            await send({"type": "http.response.body", "body": self.body})
        finally:
            self.report()
