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

from collections.abc import AsyncIterator, Awaitable, Callable

import anyio
import orjson
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from proxy.api.disconnect import unless_client_leaves
from proxy.errors import ApiError, error_body
from proxy.flow.exchange import call_headers
from proxy.flow.run import ChatRun
from proxy.flow.translate import ChunkOut, as_chunks
from proxy.sse import DONE_FRAME, KEEPALIVE, KEEPALIVE_FRAME, SseFrames, encode_data
from proxy.transforms.response.completion import chunks_to_completion
from proxy.types import Chunk


def sse_response(run: ChatRun) -> Response:
    return SseResponse(_sse_body(run), run.headers(), on_close=run.aclose)


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

    def __init__(self, body: AsyncIterator[bytes], headers: dict[str, str],
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
        async for piece in self.body_iterator:
            await send({"type": "http.response.body", "body": piece, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})


async def _sse_body(run: ChatRun) -> AsyncIterator[bytes]:
    try:
        async for batch in run.batches():
            # One item per batch is what a slow stream's reads make: no list, no join.
            yield frame(batch[0]) if len(batch) == 1 else b"".join([frame(i) for i in batch])
        yield DONE_FRAME
    except ApiError as exc:
        yield _error_frame(exc.message, exc.status, exc.code) + DONE_FRAME
    except (GeneratorExit, anyio.get_cancelled_exc_class()):
        raise
    except Exception:
        # A bug of ours mid-stream: log it once, end the stream cleanly.
        run.ex.svc.telemetry.log.exception("stream failed inside toolshim", extra={
            "record": {"request_id": run.ex.record.request_id}})
        yield _error_frame("internal error in toolshim", 500, "internal_error") + DONE_FRAME
    finally:
        await run.aclose()  # shielded inside: also when the client left


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

