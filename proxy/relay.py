"""Relaying the upstream's answer to the client, through the response stages.

Streaming: each upstream piece is decoded into SSE events, fed through the
pipeline and what comes out is written at once; nothing waits for the whole
answer. A stream with no stage work (no tools offered, reasoning passed
through) is relayed event by event without JSON decoding until a chunk
mentions `tool_calls`. Non-streaming: the same pipeline, fed the whole
completion as chunks, then flushed. The upstream response is closed in a
`finally` (and again as a background task), so a client that leaves closes
the backend request at once.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import anyio
import httpx
import orjson
from starlette.background import BackgroundTask
from starlette.responses import Response, StreamingResponse

from proxy.api.hostile import depth_exceeds
from proxy.errors import ApiError, error_body
from proxy.exchange import Exchange, response_headers
from proxy.sse import DONE_FRAME, SseDecoder, SseEvent, encode_data
from proxy.transforms.response import ResponsePipeline
from proxy.transforms.response.completion import completion_through, run_completion
from proxy.types import Chunk
from proxy.upstream import Upstream, iter_bytes

_MAX_UPSTREAM_JSON = 64 * 1024 * 1024


async def complete(ex: Exchange, response: httpx.Response, pipeline: ResponsePipeline,
                   upstream: Upstream) -> Response:
    """Non-streaming: read the whole completion, run the stages, answer JSON."""
    t0 = time.perf_counter()
    try:
        raw = await _read_all(response, upstream)
        ex.tap.answered(response.status_code, raw)
    finally:
        await response.aclose()
        ex.upstream_s += time.perf_counter() - t0
    result = run_completion(_decode_completion(raw), pipeline)
    _count_calls(ex, pipeline)
    headers = response_headers(ex)
    headers.update(_call_headers(ex))
    ex.finish(200)
    return Response(orjson.dumps(result), media_type="application/json", headers=headers)


async def _read_all(response: httpx.Response, upstream: Upstream) -> bytes:
    parts: list[bytes] = []
    size = 0
    async for piece in iter_bytes(response, upstream.root):
        size += len(piece)
        if size > _MAX_UPSTREAM_JSON:
            raise ApiError(502, "upstream answer is too large", code="upstream_invalid")
        parts.append(piece)
    return b"".join(parts)


def _decode_completion(raw: bytes) -> Chunk:
    try:
        completion = orjson.loads(raw)
    except orjson.JSONDecodeError:
        completion = None
    if not isinstance(completion, dict) or not isinstance(completion.get("choices"), list) \
            or depth_exceeds(completion, 200):  # orjson.dumps stops at 254 levels
        raise ApiError(502, "upstream sent an answer that is not a chat completion",
                       code="upstream_invalid")
    return completion


def stream(ex: Exchange, response: httpx.Response, pipeline: ResponsePipeline,
           upstream: Upstream, *, trivial: bool) -> Response:
    headers = response_headers(ex)
    headers["cache-control"] = "no-cache"
    headers["x-accel-buffering"] = "no"
    relay = _Relay(ex, response, pipeline, upstream, trivial)
    # close() runs from the generator's finally and again as the background
    # task: if the client leaves before the body starts, only the second runs.
    return StreamingResponse(relay.run(), media_type="text/event-stream", headers=headers,
                             background=BackgroundTask(relay.close))


class _Relay:
    def __init__(self, ex: Exchange, response: httpx.Response, pipeline: ResponsePipeline,
                 upstream: Upstream, trivial: bool) -> None:
        self.ex = ex
        self.response = response
        self.pipeline = pipeline
        self.upstream = upstream
        self.decode = not trivial
        self.done = False
        self.saw_finish = False
        self.error: str | None = None
        self.decoder = SseDecoder()
        self.own_s = ex.overhead_ms() / 1000
        """time the proxy itself spent on this request: before sending, then per piece."""
        self.status = 200
        self.closed = False
        ex.svc.telemetry.stream_opened()

    async def run(self) -> AsyncIterator[bytes]:
        try:
            if "event-stream" not in self.response.headers.get("content-type", ""):
                # A backend that ignored stream=true answers JSON: stream it anyway.
                yield await self._from_json()
                return
            async for piece in iter_bytes(self.response, self.upstream.root):
                self.ex.tap.piece(piece)
                t0 = time.perf_counter()
                out = self._take(piece)
                self.own_s += time.perf_counter() - t0
                if out:
                    if self.ex.record.ttft_ms is None:
                        self.ex.record.ttft_ms = round((time.perf_counter() - self.ex.started)
                                                       * 1000, 3)
                    yield out
                if self.done:
                    break
            yield self._end()
        except ApiError as exc:
            self.status, self.error = exc.status, exc.message
            yield self._flush(failed=True) + _error_frame(exc.message, exc.status, exc.code) \
                + DONE_FRAME
        except (GeneratorExit, anyio.get_cancelled_exc_class()):
            self.status, self.error = 499, "client closed the stream"
            raise
        except Exception:
            # A bug of ours mid-stream: log it once, end the stream cleanly.
            self.ex.svc.telemetry.log.exception("stream failed inside toolshim", extra={
                "record": {"request_id": self.ex.record.request_id}})
            self.status, self.error = 500, "internal error in toolshim"
            yield _error_frame(self.error, 500, "internal_error") + DONE_FRAME
        finally:
            with anyio.CancelScope(shield=True):
                await self.close()

    async def close(self) -> None:
        """Close upstream, free the slot, account the request: once, whoever calls first."""
        if self.closed:
            return
        self.closed = True
        svc = self.ex.svc
        try:
            await self.response.aclose()
        finally:
            await svc.limiter.release(self.upstream.root)
            self.ex.upstream_s = time.perf_counter() - self.ex.started - self.own_s
            _count_calls(self.ex, self.pipeline)
            svc.telemetry.stream_closed()
            self.ex.finish(self.status, self.error)

    async def _from_json(self) -> bytes:
        raw = await _read_all(self.response, self.upstream)
        self.ex.tap.answered(self.response.status_code, raw)
        frames = completion_through(_decode_completion(raw), self.pipeline)
        return b"".join(encode_data(orjson.dumps(c)) for c in frames) + DONE_FRAME

    def _take(self, piece: bytes) -> bytes:
        return b"".join(self._handle(e) for e in self.decoder.feed(piece) if not self.done)

    def _handle(self, event: SseEvent) -> bytes:
        if event.is_done:
            self.done = True
            return b""
        data = event.data
        if b'"finish_reason":"' in data or b'"finish_reason": "' in data:
            self.saw_finish = True
        if not self.decode and data[:1] == b"{" and b'"tool_calls"' not in data \
                and b'"error"' not in data:
            return encode_data(data)
        self.decode = True
        return b"".join(self._through_stages(data))

    def _through_stages(self, data: bytes) -> list[bytes]:
        try:
            chunk = orjson.loads(data)
        except orjson.JSONDecodeError:
            chunk = None
        if not isinstance(chunk, dict):
            raise ApiError(502, "upstream sent data that is not a JSON chunk",
                           code="upstream_invalid")
        if "error" in chunk:
            # A backend's own mid-stream error (vLLM, Ollama): pass it on, then stop.
            self.done = True
            err = chunk["error"]
            message = err.get("message") if isinstance(err, dict) else str(err)
            self.error = str(message)
            return [self._flush(failed=True), _error_frame(str(message), 500, None)]
        return [encode_data(orjson.dumps(c)) for c in self.pipeline.feed(chunk)]

    def _flush(self, failed: bool = False) -> bytes:
        """Emit what the stages still hold; after a failure, no made-up finish chunk."""
        if not self.decode:
            return b""
        chunks = self.pipeline.flush()
        if failed:
            chunks = [c for c in chunks if not _finishes(c)]
        return b"".join(encode_data(orjson.dumps(c)) for c in chunks)

    def _end(self) -> bytes:
        tail = b"".join(self._handle(event) for event in self.decoder.flush()) + self._flush()
        if self.done or self.saw_finish:
            return tail + DONE_FRAME
        self.error = "upstream closed the stream before it finished"
        return tail + _error_frame(self.error, 502, "upstream_incomplete") + DONE_FRAME


def _finishes(chunk: Chunk) -> bool:
    return any(choice.get("finish_reason") for choice in chunk.get("choices") or ())


def _error_frame(message: str, status: int, code: str | None) -> bytes:
    return encode_data(orjson.dumps(error_body(message, status, code=code)))


def _count_calls(ex: Exchange, pipeline: ResponsePipeline) -> None:
    summary = pipeline.summary()
    ex.record.calls_dropped = int(summary.get("dropped", 0))
    ex.record.calls_repaired = int(summary.get("repaired", 0))
    ex.record.calls_kept = int(summary.get("kept", 0))
    ex.record.calls_recovered = sum(int(o.detail.get("count", 0)) for o in pipeline.observations
                                    if o.kind == "text_calls_recovered")
    ex.observations.extend(pipeline.observations)


def _call_headers(ex: Exchange) -> dict[str, str]:
    rec = ex.record
    pairs = {"x-toolshim-calls-dropped": rec.calls_dropped,
             "x-toolshim-calls-repaired": rec.calls_repaired,
             "x-toolshim-calls-recovered": rec.calls_recovered}
    return {k: str(v) for k, v in pairs.items() if v}
