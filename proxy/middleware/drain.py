"""Graceful shutdown: open requests finish within a grace period, then are cut cleanly.

Owns the drain's per-request cancel scopes, how far each response got (`Progress`,
kept by the edge's `send`) and the clean end of a cut response: a 503 before it
started, else an SSE error event and `[DONE]` between events.
Must not: decide when to drain (the server calls `begin()` on SIGTERM) or touch a
request that finished.
"""

from __future__ import annotations

import asyncio

import anyio
import orjson
from starlette.types import Send

from proxy.asgi.scopes import cancel_scope
from proxy.errors import error_body


class Drain:
    """Graceful shutdown: open requests may finish for `grace` seconds, then are cut.

    The server calls `begin()` when it stops accepting (SIGTERM); requests
    still running `grace` seconds later are cancelled, and the edge ends their
    responses cleanly instead of leaving the client to a dropped connection.
    """

    def __init__(self, grace: float) -> None:
        self.grace = grace
        self.draining = False
        self.cut = False
        self._scopes: set[anyio.CancelScope] = set()
        self._timer: asyncio.TimerHandle | None = None

    @property
    def open(self) -> int:
        return len(self._scopes)

    def begin(self) -> None:
        """Start draining; must be called on the event loop."""
        if self.draining:
            return
        self.draining = True
        self._timer = asyncio.get_running_loop().call_later(self.grace, self.cut_now)

    def cut_now(self) -> None:
        self.cut = True
        for scope in list(self._scopes):
            scope.cancel()

    def watch(self) -> anyio.CancelScope:
        """A cancel scope for one request, cancelled at the cut; `forget` it after."""
        scope = cancel_scope()
        if self.cut:
            scope.cancel()
        self._scopes.add(scope)
        return scope

    def forget(self, scope: anyio.CancelScope) -> None:
        self._scopes.discard(scope)


class Progress:
    """How far the response got: what a cut may still add to it."""

    __slots__ = ("complete", "last", "sse", "started")

    def __init__(self) -> None:
        self.started = False
        self.complete = False
        self.sse = False
        self.last = b""
        """the last body bytes sent: a stream's last piece, only looked at by a cut."""

    @property
    def at_boundary(self) -> bool:
        """Whether the body sent so far ends between SSE events."""
        return not self.last or self.last.endswith((b"\n\n", b"\r\n\r\n"))


_SHUTDOWN = "toolshim is shutting down; the request was cut at the end of the grace period"


async def end_cut(send: Send, progress: Progress) -> None:
    error = orjson.dumps(error_body(_SHUTDOWN, 503, code="shutting_down"))
    if not progress.started:
        await send({"type": "http.response.start", "status": 503,
                    "headers": [(b"content-type", b"application/json"),
                                (b"retry-after", b"1"), (b"connection", b"close")]})
        await send({"type": "http.response.body", "body": error})
        return
    tail = b""
    if progress.sse and progress.at_boundary:
        # Mid-event bytes would turn our frame into garbage: only add it between events.
        tail = b"data: " + error + b"\n\ndata: [DONE]\n\n"
    await send({"type": "http.response.body", "body": tail, "more_body": False})
