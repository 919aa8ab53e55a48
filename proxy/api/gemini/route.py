"""POST /v1beta/models/{model}:generateContent, :streamGenerateContent, :countTokens;
GET /v1beta/models and /v1beta/models/{model}; the same under /v1/.

The Gemini API sits at the edges of the chat flow, never beside it: the body is
translated to a chat request (request.py), the chat flow answers it exactly as it
answers /v1/chat/completions (profile, tool policy, retries, checks, recovery,
headers, metrics, the log line with endpoint `gemini`, limits), and the chunks it
hands its client become `GenerateContentResponse`s (answer.py): SSE `data:` lines
with `?alt=sse`, else one JSON array written as it grows. `chat_chunks`
(api/chat_output.py) is the one seam to the flow; every error is answered in
Google's envelope (errors.py).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import orjson
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import Send

from proxy.api.body import check_tool_refs, load_body, read_body
from proxy.api.chat_output import ChatOutput, chat_chunks
from proxy.api.failures import answer_or_error
from proxy.api.gemini.answer import AnswerBuilder, sse_frame
from proxy.api.gemini.errors import render
from proxy.api.gemini.path import METHODS, split_method
from proxy.api.gemini.request import Translated, to_chat
from proxy.api.stream_tail import stream_body
from proxy.asgi.direct_send import SseWriter
from proxy.asgi.responses import SseResponse
from proxy.backends.context import estimate_tokens
from proxy.backends.listing import require_listed
from proxy.errors import ApiError, check_model_name
from proxy.flow.chat import aliased
from proxy.flow.exchange import Exchange, call_headers
from proxy.flow.translate import ChunkOut
from proxy.observability.telemetry import RequestRecord
from proxy.services import Services
from proxy.types import JSON


async def model_method(request: Request) -> Response:
    """POST …/models/{model}:{method}."""
    svc: Services = request.app.state.services
    target = split_method(request.path_params["rest"])
    method = target[1] if target else ""
    endpoint = "gemini.countTokens" if method == "countTokens" else "gemini"
    ex = Exchange(svc, request, RequestRecord(request.state.request_id, endpoint))
    return await answer_or_error(ex, _handle(ex, target), "gemini request", render)


async def _handle(ex: Exchange, target: tuple[str, str] | None) -> Response:
    if target is None or target[1] not in METHODS:
        raise ApiError(404, f"{ex.request.url.path!r} names no model method this server "
                       f"has ({', '.join(METHODS)})")
    model, method = target
    check_model_name(model)
    raw = await read_body(ex.request, ex.svc.settings.max_body_bytes)
    stream = method == "streamGenerateContent"
    translated = to_chat(_decode(raw), model, stream=stream)
    if raw.find(b"$") >= 0 or raw.find(b"\\u0024") >= 0:
        check_tool_refs(translated.chat)  # the chat door's checks: $ref cycles, expansion
    ex.record.tools_stripped += translated.stripped
    if method == "countTokens":
        return await _count(ex, translated)
    builder = AnswerBuilder(model, thoughts=translated.thoughts,
                            prompt_tokens=_estimate(ex, ex.svc.served(model), len(raw)))
    output = await chat_chunks(ex, translated.chat)
    if stream:
        sse = ex.request.query_params.get("alt") == "sse"
        # The flow's own close runs at the response's end too (it runs once): if the
        # client leaves before the body starts, only that frees the upstream and slot.
        return _GeminiStream(ex, builder, output, sse=sse)
    async for batch in output.batches():
        builder.feed_all(batch)
    builder.finish()
    return JSONResponse(builder.whole(), headers={**output.headers, **call_headers(ex)})


def _decode(raw: bytes) -> object:
    return load_body(raw, "Invalid JSON payload received")


def _estimate(ex: Exchange, model: str, chars: int) -> int:
    """Prompt tokens by toolshim's own estimate (what `num_ctx: auto` sizes windows by,
    the model's learned characters per token included), until the backend's count."""
    profile = ex.svc.store.profile(model)
    return estimate_tokens(chars, 1, profile.chars_per_token) - 1


async def _count(ex: Exchange, translated: Translated) -> Response:
    """`{"totalTokens": N}` by toolshim's own estimate of the translated request,
    without running the model: the model that would serve it (an alias's target)."""
    chat = aliased(ex, translated.chat)
    ex.record.model = chat["model"]
    # A model no upstream serves is not found here either, as generating content says.
    await require_listed(ex.svc.router, chat["model"])
    count = _estimate(ex, chat["model"], len(orjson.dumps(chat)))
    ex.finish(200)
    return JSONResponse({"totalTokens": count},
                        headers={"x-toolshim-overhead-ms": f"{ex.overhead_ms():.2f}"})


class _GeminiStream(SseResponse):
    """`streamGenerateContent`: once it flows, the chat chunks of each upstream read
    become one response chunk written from the read callback (asgi/direct_send.py), the
    rest by the task; both through the one builder, so the chunks are the same."""

    def __init__(self, ex: Exchange, builder: AnswerBuilder, output: ChatOutput, *,
                 sse: bool) -> None:
        super().__init__(None, dict(output.headers), on_close=output.close)
        if not sse:
            self.headers["content-type"] = "application/json"
        self.ex, self.builder, self.output = ex, builder, output
        self.frame = _Framing(sse)

    def _body(self, send: Send) -> AsyncIterator[bytes]:
        return _chunks(self.ex, self.builder, self.output, self.frame,
                       SseWriter.over(send, self._encode))

    def _encode(self, batch: list[ChunkOut]) -> bytes:
        return self.frame(self.builder.feed_batch(batch))


class _Framing:
    """Responses as SSE `data:` lines, or as the elements of one JSON array (the API's
    answer without `alt=sse`): `[` before the first, `,` between, `]` at the end."""

    def __init__(self, sse: bool) -> None:
        self.sse = sse
        self.opened = False

    def __call__(self, responses: list[JSON]) -> bytes:
        if self.sse:
            return b"".join([sse_frame(r) for r in responses])
        parts: list[bytes] = []
        for response in responses:
            parts += (b",\r\n" if self.opened else b"[", orjson.dumps(response))
            self.opened = True
        return b"".join(parts)

    def close(self) -> bytes:
        return b"" if self.sse else b"]" if self.opened else b"[]"


def _chunks(ex: Exchange, builder: AnswerBuilder, output: ChatOutput, frame: _Framing,
            direct: SseWriter | None = None) -> AsyncIterator[bytes]:
    batches = output.raw_batches(direct)
    return stream_body(ex, batches, _Pieces(builder, frame), "gemini", batches.aclose)


class _Pieces:
    """A Gemini stream's pieces: an empty batch is the flow waiting (nothing empty is
    sent); a failure once the stream started is an error chunk, never a finishReason."""

    def __init__(self, builder: AnswerBuilder, frame: _Framing) -> None:
        self.builder, self.frame = builder, frame

    def piece(self, batch: list[ChunkOut]) -> bytes:
        return self.frame(self.builder.feed_batch(batch)) if batch else b""

    def end(self) -> bytes:
        return self.frame([self.builder.finish()]) + self.frame.close()

    def failed(self, error: ApiError) -> bytes:
        return self.frame([self.builder.fail(error.status, error.message)]) + self.frame.close()
