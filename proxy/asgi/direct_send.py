"""`send` driven by hand: a stream's pieces written from a read callback, outside any task.

Owns starting a server's `send` coroutine outside a task (`coroutine.send(None)`) and
handing what is left of it to a task when it has to wait (the client's socket is
full). Relies on uvicorn's `send` being a coroutine function that finishes without
yielding while its transport is not paused (tests/asgi/test_compat.py).
Must not: frame or encode anything itself (the caller's `encode` does), or write a
second piece while one is pending.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable, Coroutine, Generator
from typing import Any, cast

from starlette.types import Send


class SseWriter:
    """A stream's batches written from the upstream's read callback (`DirectWriter`).

    A batch is encoded as the task encodes it (`encode`: SSE frames of chat chunks,
    or of the Responses events they make; b"" writes nothing), and `send` (the
    edge's, then the server's) is run to its end right there: it does not wait
    unless the client's socket is full (uvicorn then waits for it to drain). A send
    that waits is left pending; `flush()`, in the task, finishes it, and until then
    nothing else is written (the turn reads on from the task).
    """

    __slots__ = ("encode", "first_at", "pending", "send")

    @classmethod
    def over(cls, send: Send, encode: Callable[[list[Any]], bytes]) -> SseWriter | None:
        """A writer over `send`, or None: a send that is not a coroutine function
        cannot be driven from a callback."""
        return cls(send, encode) if inspect.iscoroutinefunction(send) else None

    def __init__(self, send: Send, encode: Callable[[list[Any]], bytes]) -> None:
        self.send = send
        self.encode = encode
        self.first_at: float | None = None
        self.pending: tuple[Coroutine[Any, Any, None], Any] | None = None

    def write(self, batch: list[Any]) -> bool:
        if self.first_at is None:
            self.first_at = time.perf_counter()
        body = self.encode(batch)
        if not body:
            return True
        sending = cast(Coroutine[Any, Any, None], self.send(
            {"type": "http.response.body", "body": body, "more_body": True}))
        try:
            waiting = sending.send(None)
        except StopIteration:
            return True
        self.pending = (sending, waiting)
        return False

    async def flush(self) -> None:
        if self.pending is not None:
            sending, waiting = self.pending
            self.pending = None
            await _RestOfSend(sending, waiting)


class _RestOfSend:
    """The rest of a coroutine that was started by hand and stopped on `waiting` (what
    it yielded for the loop), awaited by the current task: what `await` would have
    done had the task run it from the start (values and exceptions passed through)."""

    __slots__ = ("coroutine", "waiting")

    def __init__(self, coroutine: Coroutine[Any, Any, None], waiting: Any) -> None:
        self.coroutine = coroutine
        self.waiting = waiting

    def __await__(self) -> Generator[Any, Any, None]:
        yielded = self.waiting
        while True:
            try:
                sent = yield yielded
            except BaseException as exc:  # noqa: BLE001 - handed to the coroutine, as await does
                try:
                    yielded = self.coroutine.throw(exc)
                except StopIteration:
                    return
            else:
                try:
                    yielded = self.coroutine.send(sent)
                except StopIteration:
                    return
