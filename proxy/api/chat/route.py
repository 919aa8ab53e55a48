"""POST /v1/chat/completions: parse, run the chat flow, answer as SSE or one JSON body.

Must not: decide anything about tools or models (the flow does, flow/chat.py).
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from proxy.api.body import read_body
from proxy.api.chat.answer import json_response, sse_response
from proxy.api.chat.request import parse_chat_request
from proxy.api.failures import answer_or_error, client_left
from proxy.asgi.disconnect import unless_client_leaves
from proxy.flow.chat import run_chat
from proxy.flow.exchange import Exchange
from proxy.observability.telemetry import RequestRecord
from proxy.services import Services
from proxy.types import ChatRequest


async def chat_completions(request: Request) -> Response:
    svc: Services = request.app.state.services
    ex = Exchange(svc, request, RequestRecord(request.state.request_id, "chat.completions"))
    return await answer_or_error(ex, _handle(ex), "chat request")


async def _handle(ex: Exchange) -> Response:
    chat = parse_chat_request(await read_body(ex.request, ex.svc.settings.max_body_bytes))
    reply = await unless_client_leaves(ex.request.receive, _answer(ex, chat))
    if reply is None:
        raise client_left()
    return reply


async def _answer(ex: Exchange, chat: ChatRequest) -> Response:
    run = await run_chat(ex, chat)
    if ex.record.stream:
        return sse_response(run)
    return await json_response(run)
