"""GET /v1/models (merged and annotated) and every other /v1/* path, unchanged.

Passed-through requests keep method, query, body, status and streaming; only
hop-by-hop headers and the client's key (when it is toolshim's) are dropped.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import orjson
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from proxy.chat_request import read_body
from proxy.console.gate import validation_of
from proxy.errors import ApiError
from proxy.exchange import Exchange
from proxy.services import Services
from proxy.telemetry import RequestRecord
from proxy.upstream import (
    Upstream,
    fetch_listing,
    forward_headers,
    iter_bytes,
    response_headers,
    send,
)


async def list_models(request: Request) -> Response:
    svc: Services = request.app.state.services
    ex = Exchange(svc, request, RequestRecord(request.state.request_id, "models"))
    roots = svc.settings.all_upstreams()
    t0 = time.perf_counter()
    results = await asyncio.gather(*(fetch_listing(svc.upstreams[r]) for r in roots))
    ex.upstream_s += time.perf_counter() - t0
    if all(r is None for r in results):
        ex.finish(502, "no upstream answered /v1/models")
        return ApiError(502, "no upstream answered /v1/models",
                        code="upstream_unavailable").response()
    merged: dict[str, dict[str, Any]] = {}
    for root, listing in zip(roots, results):
        for entry in listing or []:
            model_id = entry.get("id")
            if isinstance(model_id, str) and model_id not in merged:
                merged[model_id] = _annotate(svc, entry, root)
                svc.listing[model_id] = root
    ex.finish(200)
    return Response(orjson.dumps({"object": "list", "data": list(merged.values())}),
                    media_type="application/json",
                    headers={"x-toolshim-overhead-ms": f"{ex.overhead_ms():.2f}"})


def _annotate(svc: Services, entry: dict[str, Any], root: str) -> dict[str, Any]:
    profile = svc.store.profile(entry["id"])
    return {**entry, "toolshim": {
        "tools": profile.tools,
        "source": profile.sources.get("tools", "built-in default"),
        "tool_format": profile.tool_format,
        "upstream": root,
        "validation": validation_of(svc.store, entry["id"]),
    }}


async def forward(request: Request) -> Response:
    """Any other /v1/* path: same method, query, body, status; streamed back."""
    svc: Services = request.app.state.services
    ex = Exchange(svc, request, RequestRecord(request.state.request_id,
                                              request.url.path.removeprefix("/v1/")))
    try:
        body = await read_body(request, svc.settings.max_body_bytes)
        upstream = svc.pick_upstream(_model_of(body) or "")
        ex.record.upstream = upstream.root
        path = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        headers = forward_headers(request.headers, upstream,
                                  keep_client_auth=not svc.settings.api_keys)
        t0 = time.perf_counter()
        try:
            response = await send(upstream, request.method, path, content=body or None,
                                  headers=headers)
        finally:
            ex.upstream_s += time.perf_counter() - t0
    except ApiError as exc:
        ex.finish(exc.status, exc.message)
        error = exc.response()
        error.headers["x-toolshim-overhead-ms"] = f"{ex.overhead_ms():.2f}"
        return error
    out_headers = response_headers(response.headers)
    out_headers["x-toolshim-overhead-ms"] = f"{ex.overhead_ms():.2f}"
    ex.finish(response.status_code)
    return StreamingResponse(_relay_bytes(response, upstream), status_code=response.status_code,
                             headers=out_headers, background=BackgroundTask(response.aclose))


async def _relay_bytes(response: Any, upstream: Upstream) -> Any:
    try:
        async for piece in iter_bytes(response, upstream.root):
            yield piece
    except ApiError:
        return  # the status line is gone already; ending the body is all that's left
    finally:
        await response.aclose()


def _model_of(body: bytes) -> str | None:
    if not body or body[:1] != b"{":
        return None
    try:
        model = orjson.loads(body).get("model")
    except (orjson.JSONDecodeError, AttributeError):
        return None
    return model if isinstance(model, str) else None
