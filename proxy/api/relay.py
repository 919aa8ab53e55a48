"""Writing a `ChatRun` to an OpenAI chat.completions client: SSE or one JSON body.

Streaming: every batch of chunks the run yields is framed as `data: <json>`
and written at once; nothing waits for the whole answer. Chunks the run
hands over as raw upstream bytes (its fast path) are copied, never decoded;
a whole read of upstream events (`SseFrames`) is written as it came.
A failure ends the stream with one OpenAI error event and `[DONE]`.
Non-streaming: the chunks are merged into one chat.completion.

The run is closed in the body's `finally` and again when the response ends
(if the client leaves before the body starts, only the second runs), so a
client that leaves closes the backend request at once.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Generator
from typing import Any, cast

import orjson
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from proxy.api.disconnect import unless_client_leaves
from proxy.api.stream_tail import stream_body
from proxy.errors import ApiError, error_body
from proxy.flow.exchange import call_headers
from proxy.flow.run import ChatRun
from proxy.flow.translate import ChunkOut, as_chunks
from proxy.sse import DONE_FRAME, KEEPALIVE, KEEPALIVE_FRAME, SseFrames, encode_data
from proxy.transforms.response.completion import chunks_to_completion
from proxy.types import Chunk


def sse_response(run: ChatRun) -> Response:
    return ChatStream(run)


class SseResponse(Response):
    """A text/event-stream answer written as its body yields, watched for a client that leaves.

    Starlette's StreamingResponse runs each stream in an anyio task group with a
    second task listening for the disconnect (uvicorn speaks ASGI 2.3, whose
    `send` does not fail once the client is gone); this does the same with one
    plain task and a cancel scope (api/disconnect.py), a per-stream cost that
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


class ChatStream(SseResponse):
    """A chat completions stream: its pieces written from the upstream's read callback
    once it flows (`SseWriter`), the rest (the first events, the ending, errors) by
    the task, all framed alike (`frame`)."""

    def __init__(self, run: ChatRun) -> None:
        super().__init__(None, run.headers(), on_close=run.aclose)
        self.run = run

    def _body(self, send: Send) -> AsyncIterator[bytes]:
        return _sse_body(self.run, SseWriter.over(send, frames))


def frames(batch: list[ChunkOut]) -> bytes:
    """A batch as the SSE bytes a chat client gets."""
    return frame(batch[0]) if len(batch) == 1 else b"".join([frame(i) for i in batch])


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
    def over(cls, send: Send, encode: Callable[[list[ChunkOut]], bytes]) -> SseWriter | None:
        """A writer over `send`, or None: a send that is not a coroutine function
        cannot be driven from a callback."""
        return cls(send, encode) if inspect.iscoroutinefunction(send) else None

    def __init__(self, send: Send, encode: Callable[[list[ChunkOut]], bytes]) -> None:
        self.send = send
        self.encode = encode
        self.first_at: float | None = None
        self.pending: tuple[Coroutine[Any, Any, None], Any] | None = None

    def write(self, batch: list[ChunkOut]) -> bool:
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


def _sse_body(run: ChatRun, direct: SseWriter | None = None) -> AsyncIterator[bytes]:
    return stream_body(run.ex, run.batches(direct), _CHAT, "chat", run.aclose)


class _ChatFraming:
    """A chat stream's pieces: `data:` frames, `[DONE]`, an OpenAI error event."""

    piece = staticmethod(frames)

    def end(self) -> bytes:
        return DONE_FRAME

    def failed(self, error: ApiError) -> bytes:
        return _error_frame(error.message, error.status, error.code) + DONE_FRAME


_CHAT = _ChatFraming()


def frame(item: ChunkOut) -> bytes:
    """One batch item as the SSE bytes a client gets."""
    if isinstance(item, bytes):
        if item is KEEPALIVE:
            return KEEPALIVE_FRAME
        return item if isinstance(item, SseFrames) else encode_data(item)
    return encode_data(orjson.dumps(item))


async def json_response(run: ChatRun) -> Response:
    """Non-streaming: every chunk of the run merged into one chat.completion.

    A whole answer's request is settled before the answer is built (its record
    feeds the headers) but reported once the answer is sent: the client does not
    wait for its log line and metrics. An error raised after the settling reports
    it at once (`error_reply`).
    """
    chunks: list[Chunk] = []
    whole = False
    try:
        async for batch in run.batches():
            chunks += as_chunks(batch)
        whole = True
    finally:
        # Shielded inside: also when the client left. An answer that broke off (an
        # error, a cancel) is reported now: it may never reach `ReportedAfter`.
        await run.aclose(report=not whole)
    if not chunks:
        raise ApiError(502, "upstream sent an answer that is not a chat completion",
                       code="upstream_invalid")
    headers = run.headers()
    headers.update(call_headers(run.ex))
    # An answer no stage changed goes out as the upstream wrote it: merging its chunks
    # back and encoding them would only make the same completion again.
    body = run.verbatim()
    if body is None:
        body = orjson.dumps(chunks_to_completion(chunks, _template(chunks[0])))
    return ReportedAfter(body, headers, run.ex.report)


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


def _template(first: Chunk) -> Chunk:
    """The completion's top-level keys, in the upstream's order, from its first chunk."""
    return {k: v for k, v in first.items() if k != "usage"} | {"choices": []}


def _error_frame(message: str, status: int, code: str | None) -> bytes:
    return encode_data(orjson.dumps(error_body(message, status, code=code)))

