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

from collections.abc import AsyncIterator

import orjson
from starlette.responses import Response
from starlette.types import Send

from proxy.api.stream_tail import stream_body
from proxy.asgi.direct_send import SseWriter
from proxy.asgi.responses import ReportedAfter, SseResponse
from proxy.errors import ApiError, error_body
from proxy.flow.exchange import call_headers
from proxy.flow.run import ChatRun
from proxy.flow.translate import ChunkOut, as_chunks
from proxy.sse import DONE_FRAME, KEEPALIVE, KEEPALIVE_FRAME, SseFrames, encode_data
from proxy.transforms.response.completion import chunks_to_completion
from proxy.types import Chunk


def sse_response(run: ChatRun) -> Response:
    return ChatStream(run)


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


def _sse_body(run: ChatRun, direct: SseWriter | None = None) -> AsyncIterator[bytes]:
    return stream_body(run.ex, run.batches(direct), _CHAT, "chat", run.aclose,
                       shields_itself=True)


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


def _template(first: Chunk) -> Chunk:
    """The completion's top-level keys, in the upstream's order, from its first chunk."""
    return {k: v for k, v in first.items() if k != "usage"} | {"choices": []}


def _error_frame(message: str, status: int, code: str | None) -> bytes:
    return encode_data(orjson.dumps(error_body(message, status, code=code)))

