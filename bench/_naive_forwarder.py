"""Baseline for the benchmark: the naive starlette + httpx forwarder the issue quotes.

Forwards POST /v1/chat/completions byte for byte (streamed) and answers /healthz;
nothing else. It exists only as a reference row ("naive httpx forwarder", ~340 req/s
at c=32 in the issue), so it stays deliberately plain: default httpx pool, no tuning.
Run: ``python bench/_naive_forwarder.py --port P --upstream http://127.0.0.1:U``.
"""

from __future__ import annotations

import argparse

import httpx
import uvicorn
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
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--upstream", required=True)
    args = parser.parse_args()
    uvicorn.run(create_app(args.upstream), host=args.host, port=args.port,
                log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
