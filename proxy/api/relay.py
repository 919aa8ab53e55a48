"""Writing a `ChatRun` to an OpenAI chat.completions client: SSE or one JSON body.

Streaming: every batch of chunks the run yields is framed as `data: <json>`
and written at once; nothing waits for the whole answer. Chunks the run
hands over as raw upstream bytes (its fast path) are copied, never decoded.
A failure ends the stream with one OpenAI error event and `[DONE]`.
Non-streaming: the chunks are merged into one chat.completion.

The run is closed in the body's `finally` and again as the response's
background task (if the client leaves before the body starts, only the
second runs), so a client that leaves closes the backend request at once.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import orjson
from starlette.background import BackgroundTask
from starlette.responses import Response, StreamingResponse

from proxy.errors import ApiError, error_body
from proxy.flow.exchange import call_headers
from proxy.flow.run import ChatRun
from proxy.sse import DONE_FRAME, KEEPALIVE, KEEPALIVE_FRAME, encode_data
from proxy.transforms.response.completion import chunks_to_completion
from proxy.types import Chunk


def sse_response(run: ChatRun) -> Response:
    headers = run.headers()
    headers["cache-control"] = "no-cache"
    headers["x-accel-buffering"] = "no"
    return StreamingResponse(_sse_body(run), media_type="text/event-stream", headers=headers,
                             background=BackgroundTask(run.aclose))


async def _sse_body(run: ChatRun) -> AsyncIterator[bytes]:
    try:
        async for batch in run.batches():
            yield b"".join([_frame(item) for item in batch])
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


def _frame(item: bytes | Chunk) -> bytes:
    if item is KEEPALIVE:
        return KEEPALIVE_FRAME
    return encode_data(item if isinstance(item, bytes) else orjson.dumps(item))


async def json_response(run: ChatRun) -> Response:
    """Non-streaming: every chunk of the run merged into one chat.completion."""
    try:
        chunks = [chunk async for chunk in run.chunks()]
    finally:
        await run.aclose()  # shielded inside: also when the client left
    if not chunks:
        raise ApiError(502, "upstream sent an answer that is not a chat completion",
                       code="upstream_invalid")
    headers = run.headers()
    headers.update(call_headers(run.ex))
    body = chunks_to_completion(chunks, _template(chunks[0]))
    return Response(orjson.dumps(body), media_type="application/json", headers=headers)


def _template(first: Chunk) -> Chunk:
    """The completion's top-level keys, in the upstream's order, from its first chunk."""
    return {k: v for k, v in first.items() if k != "usage"} | {"choices": []}


def _error_frame(message: str, status: int, code: str | None) -> bytes:
    return encode_data(orjson.dumps(error_body(message, status, code=code)))

