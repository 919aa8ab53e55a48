"""POST /v1/responses and GET / DELETE /v1/responses/{id}.

The Responses API sits at the edges of the chat flow, never beside it: the
body is translated to a chat request (request.py), the chat flow
answers it exactly as it answers /v1/chat/completions (profile, tool policy,
retries, checks, recovery, headers, metrics, the log line, limits), and the
chunks it hands its client are translated to Responses events
(events.py). `chat_chunks` (api/chat_output.py) is the one place that
talks to the flow.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import Send

from proxy.api.body import read_body
from proxy.api.chat_output import ChatOutput, chat_chunks
from proxy.api.failures import answer_or_error
from proxy.api.responses.events import Event, ResponseBuilder
from proxy.api.responses.request import Translated, to_chat, validate
from proxy.api.responses.store import ResponsesStore
from proxy.api.stream_tail import stream_body
from proxy.asgi.direct_send import SseWriter
from proxy.asgi.responses import SseResponse
from proxy.errors import ApiError
from proxy.flow.exchange import Exchange, call_headers
from proxy.flow.translate import ChunkOut, as_chunks
from proxy.observability.telemetry import RequestRecord
from proxy.services import Services
from proxy.sse import KEEPALIVE_FRAME
from proxy.types import JSON, Chunk

_DEFAULTS: JSON = {"instructions": None, "tool_choice": "auto", "parallel_tool_calls": True,
                   "temperature": None, "top_p": None, "max_output_tokens": None,
                   "metadata": {}, "user": None, "store": True, "previous_response_id": None,
                   "text": {"format": {"type": "text"}}, "reasoning": None,
                   "truncation": "disabled"}


# --- routes ----------------------------------------------------------------


async def create_response(request: Request) -> Response:
    svc: Services = request.app.state.services
    ex = Exchange(svc, request, RequestRecord(request.state.request_id, "responses"))
    return await answer_or_error(ex, _handle(ex, request.app.state.responses),
                                 "responses request")


async def _handle(ex: Exchange, store: ResponsesStore) -> Response:
    body = _decode(await read_body(ex.request, ex.svc.settings.max_body_bytes))
    history: list[Any] = []
    if body.get("previous_response_id"):
        stored = store.get(body["previous_response_id"], _owner(ex))
        if stored is None:
            raise ApiError(404, f"previous response {body['previous_response_id']!r} was not "
                           "found (unknown, expired or not stored)",
                           param="previous_response_id", code="previous_response_not_found")
        history = stored.conversation
    translated = to_chat(body, history)
    ex.record.tools_stripped += translated.stripped
    output = await chat_chunks(ex, translated.chat)
    builder = ResponseBuilder(_echo(body, translated), kinds=translated.kinds)
    keep = store if body.get("store") is not False else None
    if body.get("stream"):
        # The flow's own close runs at the response's end too (it runs once): if the
        # client leaves before the body starts, only that frees the upstream and slot.
        return _ResponsesStream(ex, builder, output, translated, keep)
    async for batch in output.batches():
        builder.feed_all(batch)
    builder.finish()
    _keep(ex, keep, builder, translated)
    return JSONResponse(builder.response, headers={**output.headers, **call_headers(ex)})


def _decode(raw: bytes) -> JSON:
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise ApiError(400, f"request body is not valid JSON: {exc}", code="invalid_json") from None
    return validate(body)


def _echo(body: JSON, translated: Translated) -> JSON:
    """The request fields a response repeats, with the API's defaults for those not given."""
    echo = {key: default if body.get(key) is None else body[key]
            for key, default in _DEFAULTS.items()}
    echo["model"] = body["model"]
    echo["tools"] = translated.tools
    return echo


class _ResponsesStream(SseResponse):
    """A Responses event stream: once it flows, the chat chunks of each upstream read
    become events and are written from the read callback (asgi/direct_send.py), the rest
    by the task; both through the one builder, so the events are the same."""

    def __init__(self, ex: Exchange, builder: ResponseBuilder, output: ChatOutput,
                 translated: Translated, keep: ResponsesStore | None) -> None:
        super().__init__(None, dict(output.headers), on_close=output.close)
        self.ex, self.builder, self.output = ex, builder, output
        self.translated, self.keep = translated, keep

    def _body(self, send: Send) -> AsyncIterator[bytes]:
        return _events(self.ex, self.builder, self.output, self.translated, self.keep,
                       SseWriter.over(send, self._encode))

    def _encode(self, batch: list[ChunkOut]) -> bytes:
        return _frames(self.builder.feed_all(as_chunks(batch)))


async def _events(ex: Exchange, builder: ResponseBuilder, output: ChatOutput,
                  translated: Translated, keep: ResponsesStore | None,
                  direct: SseWriter | None = None) -> AsyncIterator[bytes]:
    yield _frames(builder.start())
    batches = output.batches(direct)
    async for piece in stream_body(ex, batches, _Framing(builder), "responses", batches.aclose):
        yield piece
    _keep(ex, keep, builder, translated)


class _Framing:
    """A Responses stream's pieces: each batch's events; a comment while the flow
    waits (server tools) keeps the client; `response.failed` on a failure."""

    def __init__(self, builder: ResponseBuilder) -> None:
        self.builder = builder

    def piece(self, batch: list[Chunk]) -> bytes:
        if not batch:
            return KEEPALIVE_FRAME
        return _frames(self.builder.feed_all(batch))

    def end(self) -> bytes:
        return _frames(self.builder.finish())

    def failed(self, error: ApiError) -> bytes:
        return _frames(self.builder.fail(error.message))


def _frames(events: list[Event]) -> bytes:
    parts: list[bytes] = []
    for event in events:
        parts += (b"event: ", event["type"].encode(), b"\ndata: ", orjson.dumps(event), b"\n\n")
    return b"".join(parts)


def _keep(ex: Exchange, store: ResponsesStore | None, builder: ResponseBuilder,
          translated: Translated) -> None:
    if store is None:
        return
    answer = builder.assistant_message()
    conversation = translated.conversation + ([answer] if answer else [])
    if not store.put(builder.response, conversation, _owner(ex)) and store.size > 0:
        ex.svc.telemetry.log.info(
            "response %s not stored: larger than --responses-store-mb (%d bytes allowed)",
            builder.response.get("id"), store.max_bytes)


def _owner(ex: Exchange) -> str:
    """The stored responses this request may use: with API keys configured, its key's;
    else everyone's."""
    return ex.owner() if ex.svc.settings.api_keys else ""


# Lookups in the store call no upstream, but are /v1 requests all the same: one log
# line and a count each, found or not (the error tail settles a 404's record).


async def get_response(request: Request) -> Response:
    ex = Exchange(request.app.state.services, request,
                  RequestRecord(request.state.request_id, "responses.retrieve"))
    return await answer_or_error(ex, _get(ex), "responses retrieve")


async def _get(ex: Exchange) -> Response:
    response_id = ex.request.path_params["response_id"]
    stored = _store(ex.request).get(response_id, _owner(ex))
    if stored is None:
        raise _not_found(response_id)
    model = stored.response.get("model")
    ex.record.model = model if isinstance(model, str) else None
    ex.finish(200)
    return JSONResponse(stored.response)


async def delete_response(request: Request) -> Response:
    ex = Exchange(request.app.state.services, request,
                  RequestRecord(request.state.request_id, "responses.delete"))
    return await answer_or_error(ex, _delete(ex), "responses delete")


async def _delete(ex: Exchange) -> Response:
    response_id = ex.request.path_params["response_id"]
    if not _store(ex.request).delete(response_id, _owner(ex)):
        raise _not_found(response_id)
    ex.finish(200)
    return JSONResponse({"id": response_id, "object": "response", "deleted": True})


def _store(request: Request) -> ResponsesStore:
    store: ResponsesStore = request.app.state.responses
    return store


def _not_found(response_id: str) -> ApiError:
    return ApiError(404, f"no stored response with id {response_id!r}", param="response_id",
                    code="response_not_found")
