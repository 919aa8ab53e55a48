"""create_app(): routes, lifespan, middleware and error handlers, in one place."""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp

from proxy.api.admin import admin_capabilities
from proxy.api.chat.route import chat_completions
from proxy.api.gemini.models import any_models, one_model
from proxy.api.gemini.route import model_method
from proxy.api.messages.route import count_tokens, create_message
from proxy.api.passthrough import forward
from proxy.api.responses.route import create_response, delete_response, get_response
from proxy.api.responses.store import ResponsesStore
from proxy.backends.egress import egress_plan
from proxy.backends.upstream import Upstream, fetch_listing, make_upstream
from proxy.capabilities.store import CapabilityStore
from proxy.console.routes import console_routes
from proxy.errors import ApiError, internal_error
from proxy.middleware.drain import Drain
from proxy.middleware.edge import Edge
from proxy.middleware.keys import bearer_allowed
from proxy.observability.logs import quiet_intended_cuts
from proxy.observability.metrics import CONTENT_TYPE
from proxy.observability.recent import ConsoleState
from proxy.observability.redact import Redactor
from proxy.observability.telemetry import Telemetry
from proxy.server_tools.host import ToolHost
from proxy.services import Services
from proxy.settings import Settings, redact_url, secrets
from proxy.startup import announce_upstreams, freeze_startup_heap, startup_line
from proxy.state import build_state
from proxy.state.limits import Limiter

log = logging.getLogger("toolshim")

_READY_WINDOW = 30.0


def build_services(settings: Settings, telemetry: Telemetry | None = None) -> Services:
    upstreams = {}
    ways_out = egress_plan(settings, os.environ, log)
    for root in settings.all_upstreams():
        env_name = settings.key_env_for(root)
        key = os.environ.get(env_name) if env_name else None
        egress, tls = ways_out[root]
        upstreams[root] = make_upstream(root, key, settings.connect_timeout,
                                        settings.read_timeout, settings.max_concurrency,
                                        egress=egress, tls=tls)
    telemetry = telemetry or Telemetry(log)
    store = CapabilityStore(settings.capabilities, check_interval=settings.reload_interval,
                            max_learned=settings.max_learned,
                            max_bytes=settings.max_capabilities_bytes,
                            on_written=telemetry.facts_written, create_missing=True)
    state, limiter = build_state(
        settings, store,
        Limiter(settings.max_concurrency, settings.max_queue, settings.queue_timeout), log)
    return Services(
        settings=settings,
        upstreams=upstreams,
        store=store,
        limiter=limiter,
        telemetry=telemetry,
        state=state,
        console=ConsoleState(settings.recent_requests, keep_prompts=settings.log_prompts),
        redactor=Redactor(secrets(settings)),
    )


def from_env() -> Starlette:
    """App factory for uvicorn workers: `uvicorn --factory proxy.app:from_env --workers N`.

    Uses the settings the parent resolved if present, else TOOLSHIM_* variables.
    """
    from proxy.observability.logs import setup_logging
    from proxy.settings_sources import settings_from_env

    settings = settings_from_env()
    setup_logging(settings.log_level, settings.log_format, secrets(settings))
    return create_app(settings, serving=True)


def create_app(settings: Settings, telemetry: Telemetry | None = None, *,
               serving: bool = False) -> Starlette:
    """The app; `app.state.drain` is what a server calls `begin()` on when it stops.

    `serving`: the app is this process's one server (the CLI, a worker), so what
    its start loaded can be frozen out of the collector's way (freeze_startup_heap).
    """
    drain = Drain(settings.shutdown_grace)
    telemetry = telemetry or Telemetry(log)
    quiet_intended_cuts()  # a cut pass-through body is logged once (api/passthrough.py)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        svc = build_services(settings, telemetry)
        app.state.services = svc
        svc.store.start()  # reloads and learned-fact writes from here on: off the loop
        await svc.state.start()  # loads what the fleet learned before the first request
        svc.state.register_metrics(svc.telemetry.metrics.registry)
        svc.telemetry.bind(svc.store, svc.limiter)
        startup_line(settings, svc.store.capabilities(), log)
        svc.server_tools = ToolHost()  # MCP servers start here, follow reloads per request
        svc.server_tools.sync(svc.store.capabilities().server_tools)
        svc.spawn(announce_upstreams(svc.ollama, list(svc.upstreams.values()), settings, log))
        if serving:
            freeze_startup_heap()
        try:
            yield
        finally:
            if svc.background:
                await asyncio.wait(set(svc.background), timeout=5)
            await svc.state.close()
            if svc.server_tools is not None:
                await svc.server_tools.aclose()
            for upstream in svc.upstreams.values():
                await upstream.client.aclose()
            await asyncio.to_thread(svc.store.close)  # what is still pending reaches the file

    routes = [
        Route("/v1/chat/completions", chat_completions, methods=["POST"]),
        # GET /v1/models answers OpenAI clients and, by their marks, Gemini API clients.
        Route("/v1/models", any_models, methods=["GET"]),
        Route("/v1/models/{rest:path}", model_method, methods=["POST"]),
        Route("/v1/models/{rest:path}", one_model, methods=["GET"]),
        Route("/v1beta/models", any_models, methods=["GET"]),
        Route("/v1beta/models/{rest:path}", model_method, methods=["POST"]),
        Route("/v1beta/models/{rest:path}", one_model, methods=["GET"]),
        Route("/v1/responses", create_response, methods=["POST"]),
        Route("/v1/messages", create_message, methods=["POST"]),
        Route("/v1/messages/count_tokens", count_tokens, methods=["POST"]),
        Route("/v1/responses/{response_id}", get_response, methods=["GET"]),
        Route("/v1/responses/{response_id}", delete_response, methods=["DELETE"]),
        Route("/v1/{path:path}", forward,
              methods=["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]),
        Route("/", root, methods=["GET"]),  # HEAD too: Claude Code's connectivity probe
        Route("/healthz", healthz, methods=["GET"]),
        Route("/readyz", readyz, methods=["GET"]),
        Route("/metrics", metrics, methods=["GET"]),
        Route("/admin/capabilities", admin_capabilities, methods=["GET"]),
        *console_routes(),
    ]
    # One edge layer (request id, drain, keys, body deadline): see proxy/middleware/edge.py.
    # It sits outside Starlette's own layers; the hot POST routes are dispatched
    # there directly, past the router.
    edge = partial(Edge, drain=drain, keys=settings.api_keys,
                   protect_metrics=settings.protect_metrics, telemetry=telemetry,
                   body_timeout=settings.client_timeout,
                   admin_keys=settings.admin_keys, allowed_hosts=settings.allowed_hosts,
                   hot={"/v1/chat/completions": chat_completions,
                        "/v1/responses": create_response,
                        "/v1/messages": create_message},
                   hot_prefixes={"/v1beta/models/": model_method, "/v1/models/": model_method})
    app = _EdgedStarlette(edge, routes=routes, lifespan=lifespan,
                          exception_handlers={HTTPException: _http_error, ApiError: _api_error,
                                              Exception: _unexpected})
    app.state.drain = drain
    app.state.responses = ResponsesStore(settings.responses_store_size, settings.responses_ttl,
                                         int(settings.responses_store_mb * 1024 * 1024))
    return app


class _EdgedStarlette(Starlette):
    """Starlette with the edge outermost: a streamed chunk passes one send wrapper (the
    edge's), not Starlette's error layer's too; the hot endpoints answer their own errors."""

    def __init__(self, edge: Callable[[ASGIApp], ASGIApp], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.edge = edge

    def build_middleware_stack(self) -> ASGIApp:
        return self.edge(super().build_middleware_stack())


async def root(request: Request) -> Response:
    """What a client probing the base URL finds (Claude Code sends `HEAD /` at start)."""
    return JSONResponse({"name": "toolshim", "status": "ok"})


async def healthz(request: Request) -> Response:
    return JSONResponse({"status": "ok"})


async def readyz(request: Request) -> Response:
    """Ready: capabilities loaded and some upstream answered in the last 30 s.

    Not ready while draining, so a load balancer stops sending new work.
    """
    svc: Services = request.app.state.services
    if request.app.state.drain.draining:
        return Response(orjson.dumps({"status": "shutting down"}), status_code=503,
                        media_type="application/json")
    now = time.monotonic()
    fresh = [u.root for u in svc.upstreams.values() if now - u.last_answer < _READY_WINDOW]
    if not fresh:
        answers = await asyncio.gather(*(_ping(u) for u in svc.upstreams.values()))
        fresh = [root for root in answers if root]
    body: dict[str, Any] = {"capabilities": svc.store.last_error() or "ok",
                            "upstreams_answering": [redact_url(root) for root in fresh]}
    if svc.server_tools is not None and svc.server_tools.state():
        body["mcp_servers"] = svc.server_tools.state()  # a failed one does not stop traffic
    if svc.state.status() != "off":  # degraded Redis is not a reason to stop traffic
        body["redis"] = svc.state.status()
    status = 200 if fresh else 503
    body["status"] = "ready" if fresh else "no upstream answered"
    keys = [k.encode() for k in (*svc.settings.api_keys, *svc.settings.admin_keys)]
    if keys and not bearer_allowed(request.headers.get("authorization", ""), keys):
        # Anyone may ask whether it is ready; paths, URLs and parse errors need a key.
        body = {"status": body["status"],
                "capabilities": "ok" if body["capabilities"] == "ok" else "error"}
    return Response(orjson.dumps(body), status_code=status, media_type="application/json")


async def metrics(request: Request) -> Response:
    svc: Services = request.app.state.services
    return Response(svc.telemetry.render_metrics(), media_type=CONTENT_TYPE)


async def _ping(upstream: Upstream) -> str | None:
    if await fetch_listing(upstream) is not None:
        upstream.last_answer = time.monotonic()
        return upstream.root
    return None


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    message = {404: f"no route for {request.url.path}",
               405: f"method {request.method} is not allowed on {request.url.path}"}
    return ApiError(exc.status_code, message.get(exc.status_code, str(exc.detail))).response()


async def _api_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ApiError)
    svc: Services | None = getattr(request.app.state, "services", None)
    if svc is None:
        return exc.response()
    # Routes outside the chat flow's error tail (the console's) mask as it does.
    return exc.masked(svc.redactor.for_request(request.headers).mask).response()


async def _unexpected(request: Request, exc: Exception) -> Response:
    log.exception("unexpected error on %s %s", request.method, request.url.path,
                  extra={"record": {"request_id": getattr(request.state, "request_id", None)}})
    return internal_error()
