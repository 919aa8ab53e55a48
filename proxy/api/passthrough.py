"""GET /v1/models (merged and annotated) and every other /v1/* path, unchanged.

Passed-through requests keep method, query, body, status and streaming; only
hop-by-hop headers and the client's key (when it is toolshim's) are dropped.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import anyio
import orjson
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.types import Receive, Scope, Send

from proxy.api.body import read_body
from proxy.api.failures import answer_or_error, error_reply
from proxy.api.paths import passthrough_path
from proxy.asgi.scopes import cancel_scope
from proxy.backends.upstream import (
    fetch_listing,
    forward_headers,
    iter_bytes,
    passthrough_response_headers,
    read_whole,
    send,
)
from proxy.errors import ApiError, check_model_name
from proxy.flow.exchange import Exchange
from proxy.flow.retry import tool_mode
from proxy.flow.run import UpstreamCall
from proxy.observability.logs import IntendedCut, intend_cut
from proxy.observability.telemetry import RequestRecord
from proxy.services import Services
from proxy.settings import redact_url


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
                svc.router.listing[model_id] = root
    for pattern, model in svc.aliases().patterns:
        # Agents look their vendor's names up here (Claude Code's gateway discovery).
        merged.setdefault(pattern, {"id": pattern, "object": "model", "created": 0,
                                    "owned_by": "toolshim", "toolshim": {"alias_for": model}})
    ex.finish(200)
    return Response(orjson.dumps({"object": "list", "data": list(merged.values())}),
                    media_type="application/json",
                    headers={"x-toolshim-overhead-ms": f"{ex.overhead_ms():.2f}"})


def _annotate(svc: Services, entry: dict[str, Any], root: str) -> dict[str, Any]:
    profile = svc.store.profile(entry["id"])
    return {**entry, "toolshim": {
        "tools": tool_mode(profile),  # what a request with tools gets now
        "source": profile.sources.get("tool_support" if profile.tool_support else "tools",
                                      "built-in default"),
        "tool_format": profile.tool_format,
        "upstream": redact_url(root),  # the connection keeps the credentials, never a view
        "validation": svc.store.validation(entry["id"]),
    }}


async def forward(request: Request) -> Response:
    """Any other /v1/* path: same method, query, body, status; streamed back.

    Routed, limited, accounted and failed exactly like chat: the same upstream
    choice (an unlisted model's embeddings go where its chat goes), a limiter
    slot held until the body has streamed (or the client left), the request
    line logged once the body is done, and the shared error tail.
    """
    svc: Services = request.app.state.services
    ex = Exchange(svc, request, RequestRecord(request.state.request_id,
                                              request.url.path.removeprefix("/v1/")))
    path = passthrough_path(request.scope.get("raw_path") or request.url.path.encode())
    if path is None:
        return error_reply(ex, ApiError(404, "no route for this path: only /v1/ paths "
                                        "are passed through", code="not_found"))
    return await answer_or_error(ex, _open(ex, path), "passthrough request")


async def _open(ex: Exchange, path: str) -> Response:
    svc, request = ex.svc, ex.request
    body = await read_body(request, svc.settings.max_body_bytes)
    model = _model_of(body)
    check_model_name(model)
    upstream = await svc.router.route(model or "")
    ex.record.model, ex.record.upstream = model, upstream.root
    if request.url.query:
        path += "?" + request.url.query
    headers = forward_headers(request.headers, upstream,
                              keep_client_auth=not svc.settings.api_keys)
    # Without this the transport would ask for gzip the client never asked for.
    headers.setdefault("accept-encoding", request.headers.get("accept-encoding", "identity"))
    call = _Call(ex, await UpstreamCall.open(svc.limiter, upstream))
    t0 = time.perf_counter()
    try:
        response = call.upstream_call.response = await send(
            upstream, request.method, path, content=body or None, headers=headers)
    except BaseException:
        await call.close()
        raise
    finally:
        ex.upstream_s += time.perf_counter() - t0
    out_headers = passthrough_response_headers(response.headers)
    out_headers["x-toolshim-overhead-ms"] = f"{ex.overhead_ms():.2f}"
    call.status = response.status_code
    if response.status_code >= 400:
        return await _error_answer(call, out_headers)
    return _Relayed(call, status_code=response.status_code, headers=out_headers,
                    background=BackgroundTask(call.close))


class _Relayed(StreamingResponse):
    """The upstream's body as it came; one the upstream broke off is left unfinished.

    The status line is gone by then, so the only honest signal left is an
    incomplete body: without the final (empty, `more_body=False`) message the
    server closes the connection with no terminating chunk, and the client sees
    a cut response instead of a short but complete one. Our request line says
    why; the server's own "returned without completing response" line is
    dropped for it (`intend_cut`), so the cut is logged once.
    """

    def __init__(self, call: _Call, **kwargs: Any) -> None:
        super().__init__(call.relay(), **kwargs)
        self.call = call
        self.intended = IntendedCut()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # Here, in the request's task: Starlette may stream from a task of its own.
        self.intended = intend_cut()
        await super().__call__(scope, receive, send)

    async def stream_response(self, send: Send) -> None:
        await send({"type": "http.response.start", "status": self.status_code,
                    "headers": self.raw_headers})
        async for chunk in self.body_iterator:
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        if self.call.cut:
            self.intended.cut = True
        else:
            await send({"type": "http.response.body", "body": b"", "more_body": False})


async def _error_answer(call: _Call, headers: dict[str, str]) -> Response:
    """An upstream's error answer, read whole (decoded) and masked: its text may repeat
    the credentials the upstream got. Answers that succeed stay streamed as they came."""
    response = call.upstream_call.response
    assert response is not None
    try:
        raw = await read_whole(response, call.upstream_call.upstream.root)
    except ApiError as exc:  # the body broke off: the 502 is what the client gets
        call.status, call.error = exc.status, exc.message
        raise
    finally:
        await call.close()
    for name in [k for k in headers if k.lower() == "content-encoding"]:
        del headers[name]  # read_whole decoded the body
    return Response(call.ex.redactor().mask_bytes(raw), status_code=response.status_code,
                    headers=headers)


class _Call:
    """One passed-through upstream call (its slot and response, as chat's: UpstreamCall)
    and its accounting, once."""

    def __init__(self, ex: Exchange, upstream_call: UpstreamCall) -> None:
        self.ex = ex
        self.upstream_call = upstream_call
        self.status = 502
        self.error: str | None = None
        self.cut = False
        """the upstream broke the body off: the client's response is left unfinished."""

    async def relay(self) -> AsyncIterator[bytes]:
        response = self.upstream_call.response
        assert response is not None
        try:
            async for piece in iter_bytes(response, self.upstream_call.upstream.root):
                yield piece
        except ApiError as exc:
            # The status line is gone already: logged as chat logs a stream cut mid-way
            # (the failure's status and message), and the body is left unfinished.
            self.status, self.error, self.cut = exc.status, exc.settled().message, True
        except (GeneratorExit, anyio.get_cancelled_exc_class()):
            self.status, self.error = self.ex.cancelled()
            raise
        finally:
            with cancel_scope(shield=True):
                await self.close()

    async def close(self) -> None:
        """Close upstream, free the slot, log the request: once, whoever calls first."""
        if self.upstream_call.closed:
            return
        try:
            await self.upstream_call.aclose()
        finally:
            if self.upstream_call.response is not None:
                self.ex.finish(self.status, self.error)


def _model_of(body: bytes) -> str | None:
    if not body or body[:1] != b"{":
        return None
    try:
        model = orjson.loads(body).get("model")
    except (orjson.JSONDecodeError, AttributeError):
        return None
    return model if isinstance(model, str) else None
