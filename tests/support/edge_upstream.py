"""A small upstream for passthrough edges: records every path it is asked for.

Besides FakeOllama's model list and embeddings shape, it has Ollama's admin
paths (`/api/delete`, `/api/pull`: a test passes only if they are never
reached), a slow streamed body, and an endpoint that shows which
Accept-Encoding arrived and answers with a `Connection:`-named header.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator

import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route


class EdgeUpstream:
    def __init__(self, models: tuple[str, ...] = ("qwen3:8b",), piece_delay: float = 0.2,
                 pieces: int = 5) -> None:
        self.models = models
        self.piece_delay = piece_delay
        self.pieces = pieces
        self.paths: list[str] = []
        self.encodings: list[str | None] = []
        self.lock = threading.Lock()
        methods = ["GET", "POST", "DELETE"]
        self.app = Starlette(routes=[
            Route("/v1/models", self._list, methods=["GET"]),
            Route("/v1/embeddings", self._embeddings, methods=["POST"]),
            Route("/v1/slow", self._slow, methods=["GET", "POST"]),
            Route("/v1/echo", self._echo, methods=["GET"]),
            Route("/api/delete", self._admin, methods=methods),
            Route("/api/pull", self._admin, methods=methods),
        ])

    def _seen(self, request: Request) -> None:
        with self.lock:
            self.paths.append(request.url.path)
            self.encodings.append(request.headers.get("accept-encoding"))

    async def _list(self, request: Request) -> Response:
        self._seen(request)
        data = [{"id": m, "object": "model", "created": 1755000000, "owned_by": "library"}
                for m in self.models]
        return Response(orjson.dumps({"object": "list", "data": data}),
                        media_type="application/json")

    async def _embeddings(self, request: Request) -> Response:
        self._seen(request)
        body = orjson.loads(await request.body())
        return Response(orjson.dumps({"object": "list", "model": body.get("model"), "data": [
            {"object": "embedding", "index": 0, "embedding": [0.5]}]}),
            media_type="application/json")

    async def _slow(self, request: Request) -> Response:
        self._seen(request)

        async def pieces() -> AsyncIterator[bytes]:
            for i in range(self.pieces):
                await asyncio.sleep(self.piece_delay)
                yield f"piece {i}\n".encode()

        return StreamingResponse(pieces(), media_type="text/plain")

    async def _echo(self, request: Request) -> Response:
        self._seen(request)
        return Response(orjson.dumps({"accept-encoding": request.headers.get("accept-encoding")}),
                        media_type="application/json",
                        headers={"connection": "keep-alive, x-hop", "x-hop": "secret-hop",
                                 "x-end": "kept"})

    async def _admin(self, request: Request) -> Response:
        self._seen(request)
        return Response(b'{"status":"deleted"}', media_type="application/json")
