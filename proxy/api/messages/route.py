"""POST /v1/messages (also `?beta=true`), POST /v1/messages/count_tokens.

The Anthropic Messages API sits at the edges of the chat flow, never beside it:
the body is translated to a chat request (request.py), the chat flow answers it
exactly as it answers /v1/chat/completions (profile, tool policy, retries,
checks, recovery, headers, metrics, the log line with endpoint `messages`,
limits), and the chunks it hands its client become Messages events or one
message (events.py). `chat_chunks` (api/chat_output.py) is the one seam to the
flow; every error is answered in Anthropic's envelope (errors.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import Send

from proxy.api.body import check_tool_refs, load_body, read_body
from proxy.api.chat_output import ChatOutput, chat_chunks, output_of
from proxy.api.failures import answer_or_error, client_left
from proxy.api.messages.errors import error_type, render
from proxy.api.messages.events import PING_FRAME, MessageBuilder, frames
from proxy.api.messages.request import Translated, to_chat, validate
from proxy.api.messages.waiting import WaitingStream, answered_in_time, drop
from proxy.api.stream_tail import stream_body
from proxy.asgi.direct_send import SseWriter
from proxy.asgi.disconnect import unless_client_leaves
from proxy.asgi.responses import SseResponse
from proxy.backends.context import prompt_tokens
from proxy.backends.listing import require_listed
from proxy.errors import ApiError
from proxy.flow.chat import aliased, run_chat
from proxy.flow.exchange import Exchange, call_headers
from proxy.flow.translate import ChunkOut
from proxy.observability.telemetry import RequestRecord
from proxy.services import Services
from proxy.sse import KEEPALIVE
from proxy.types import ChatRequest


async def create_message(request: Request) -> Response:
    svc: Services = request.app.state.services
    ex = Exchange(svc, request, RequestRecord(request.state.request_id, "messages"))
    return await answer_or_error(ex, _handle(ex), "messages request", render)


async def _handle(ex: Exchange) -> Response:
    raw = await read_body(ex.request, ex.svc.settings.max_body_bytes)
    translated = to_chat(_decode(raw))
    _check_tools(raw, translated)
    ex.record.tools_stripped += translated.stripped
    chat = translated.chat
    builder = MessageBuilder(chat["model"], thinking=translated.thinking,
                             input_tokens=_estimate(ex, chat["model"], len(raw)),
                             stop_sequences=translated.stop_sequences)
    if chat.get("stream"):
        return await _stream(ex, builder, chat)
    output = await chat_chunks(ex, chat)
    output.headers["request-id"] = ex.record.request_id
    async for batch in output.batches():
        builder.feed_all(batch)
    builder.finish()
    return JSONResponse(builder.whole(), headers={**output.headers, **call_headers(ex)})


async def _stream(ex: Exchange, builder: MessageBuilder, chat: ChatRequest) -> Response:
    """The stream, once the flow answered; or, if the backend stays silent (a model
    loading), a stream that pings until it answers (waiting.py)."""
    flow = asyncio.ensure_future(run_chat(ex, chat))
    try:
        in_time = await unless_client_leaves(ex.request.receive, answered_in_time(flow))
    except BaseException:
        await drop(flow)
        raise
    if in_time is None:
        await drop(flow)
        raise client_left()
    if not in_time:
        return WaitingStream(ex, builder, flow, _events)
    output = output_of(flow.result())  # the flow's own error: its status and envelope
    output.headers["request-id"] = ex.record.request_id
    # The flow's own close runs at the response's end too (it runs once): if the
    # client leaves before the body starts, only that frees the upstream and slot.
    return _MessagesStream(ex, builder, output)


def _decode(raw: bytes, *, counting: bool = False) -> dict[str, Any]:
    body = load_body(raw)
    if counting and isinstance(body, dict):
        body.setdefault("max_tokens", 1)  # count_tokens takes no max_tokens
    return validate(body)


def _check_tools(raw: bytes, translated: Translated) -> None:
    """The chat door's checks of tool schemas ($ref cycles, expansion), on what a `$`
    could make dangerous."""
    if raw.find(b"$") >= 0 or raw.find(b"\\u0024") >= 0:
        check_tool_refs(translated.chat)


def _estimate(ex: Exchange, model: str, chars: int) -> int:
    """Input tokens by toolshim's own estimate (what `num_ctx: auto` sizes windows by,
    the model's learned characters per token included): `message_start` must say
    something before the backend reports its count at the end."""
    profile = ex.svc.store.profile(ex.svc.served(model))
    return prompt_tokens(chars, profile.chars_per_token)


class _MessagesStream(SseResponse):
    """A Messages event stream: once it flows, the chat chunks of each upstream read
    become events and are written from the read callback (asgi/direct_send.py), the rest
    by the task; both through the one builder, so the events are the same."""

    def __init__(self, ex: Exchange, builder: MessageBuilder, output: ChatOutput) -> None:
        super().__init__(None, dict(output.headers), on_close=output.close)
        self.ex, self.builder, self.output = ex, builder, output

    def _body(self, send: Send) -> AsyncIterator[bytes]:
        return _events(self.ex, self.builder, self.output, SseWriter.over(send, self._encode))

    def _encode(self, batch: list[ChunkOut]) -> bytes:
        events = self.builder.feed_batch(batch)
        return self.builder.opening() + frames(events) if events else b""


def _events(ex: Exchange, builder: MessageBuilder, output: ChatOutput,
            direct: SseWriter | None = None) -> AsyncIterator[bytes]:
    batches = output.raw_batches(direct)
    return stream_body(ex, batches, _Framing(builder), "messages", batches.aclose)


class _Framing:
    """A Messages stream's pieces; `message_start` leaves with the first of them
    (`opening`), whoever writes it. A failure once the stream started is the API's
    `error` event, never message_stop."""

    def __init__(self, builder: MessageBuilder) -> None:
        self.builder = builder

    def piece(self, batch: list[ChunkOut]) -> bytes:
        builder = self.builder
        events = builder.feed_batch(batch)
        if events:
            return builder.opening() + frames(events)
        if all(item is KEEPALIVE for item in batch):
            # the flow is waiting on the backend: the API's own keep-alive
            return builder.opening() + PING_FRAME
        return b""

    def end(self) -> bytes:
        return self.builder.opening() + frames(self.builder.finish())

    def failed(self, error: ApiError) -> bytes:
        return self.builder.opening() + frames(self.builder.fail(error_type(error.status),
                                                                 error.message))


# --- count_tokens --------------------------------------------------------------


async def count_tokens(request: Request) -> Response:
    svc: Services = request.app.state.services
    ex = Exchange(svc, request, RequestRecord(request.state.request_id,
                                              "messages.count_tokens"))
    return await answer_or_error(ex, _count(ex), "count_tokens request", render)


async def _count(ex: Exchange) -> Response:
    """`{"input_tokens": N}` by toolshim's own estimate of the translated request,
    without running the model."""
    raw = await read_body(ex.request, ex.svc.settings.max_body_bytes)
    translated = to_chat(_decode(raw, counting=True))
    chat = aliased(ex, translated.chat)
    chat.pop("max_tokens", None)
    ex.record.model = chat["model"]
    # A model no upstream serves is not found here either, as creating a message says.
    await require_listed(ex.svc.router, chat["model"])
    profile = ex.svc.store.profile(chat["model"])
    count = prompt_tokens(len(orjson.dumps(chat)), profile.chars_per_token)
    ex.finish(200)
    return JSONResponse({"input_tokens": count},
                        headers={"request-id": ex.record.request_id,
                                 "x-toolshim-overhead-ms": f"{ex.overhead_ms():.2f}"})
