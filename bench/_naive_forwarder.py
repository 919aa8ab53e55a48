"""Baseline for the benchmark: the naive starlette + httpx forwarder the issue quotes.

Forwards POST /v1/chat/completions byte for byte (streamed) and answers /healthz;
nothing else. It exists only as a reference row ("naive httpx forwarder", ~340 req/s
at c=32 in the issue), so it stays deliberately plain: default httpx pool, no tuning.
Run: ``python bench/_naive_forwarder.py --port P --upstream http://127.0.0.1:U``.
"""

from __future__ import annotations

import httpx
from _forwarder_cli import run_forwarder  # bench/, this script's directory
from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route


def create_app(upstream: str) -> Starlette:
    client = httpx.AsyncClient(base_url=upstream, timeout=60.0)

    async def chat(request: Request) -> Response:
        req = client.build_request("POST", "/v1/chat/completions", content=await request.body(),
                                   headers={"content-type": "application/json"})
        resp = await client.send(req, stream=True)
        return StreamingResponse(resp.aiter_raw(), status_code=resp.status_code,
                                 media_type=resp.headers.get("content-type"),
                                 background=BackgroundTask(resp.aclose))

    async def healthz(request: Request) -> Response:
        return PlainTextResponse("ok")

    return Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"]),
                             Route("/healthz", healthz)])


def main() -> None:
    run_forwarder(create_app, __doc__ or "")


if __name__ == "__main__":
    main()
