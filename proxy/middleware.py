"""ASGI middleware: request ids, overhead header, API-key auth and shutdown drain.

Composed in app.py. Pure ASGI (not BaseHTTPMiddleware) so streamed bodies pass
straight through without an extra task per request.
"""

from __future__ import annotations

import asyncio
import hmac
import re
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import anyio
import orjson
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from proxy.errors import error_body
from proxy.observability.telemetry import RequestRecord, Telemetry

_SAFE_ID = re.compile(r"^[A-Za-z0-9._:\-]{1,128}$")
OVERHEAD_HEADER = b"x-toolshim-overhead-ms"


class RequestIdMiddleware:
    """Honour a sane incoming X-Request-ID, else make one; echo it on the response.

    Every response also carries `x-toolshim-overhead-ms`: routes that call an
    upstream set it themselves (they know the upstream's share); for the rest
    (health, metrics, auth and routing errors) all of the time is the proxy's.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        incoming = _header(scope, b"x-request-id")
        request_id = incoming if incoming and _SAFE_ID.match(incoming) else uuid.uuid4().hex
        scope.setdefault("state", {})["request_id"] = request_id

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [(k, v) for k, v in message.get("headers", [])
                           if k.lower() != b"x-request-id"]
                headers.append((b"x-request-id", request_id.encode()))
                if not any(k.lower() == OVERHEAD_HEADER for k, _ in headers):
                    spent = (time.perf_counter() - started) * 1000
                    headers.append((OVERHEAD_HEADER, f"{spent:.2f}".encode()))
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, send_with_id)


class ApiKeyMiddleware:
    """When keys are configured, /v1/* and /admin/* (and /metrics if asked) need one."""

    def __init__(self, app: ASGIApp, keys: Sequence[str], protect_metrics: bool,
                 telemetry: Telemetry | None = None) -> None:
        self.app = app
        self.telemetry = telemetry
        self.keys = [k.encode() for k in keys]
        self.prefixes = ("/v1/", "/v1", "/admin") + (("/metrics",) if protect_metrics else ())

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not self.keys or not scope["path"].startswith(self.prefixes):
            await self.app(scope, receive, send)
            return
        if self._allowed(_header(scope, b"authorization") or ""):
            await self.app(scope, receive, send)
            return
        # The message never repeats what was sent: a mistyped key stays out of
        # client logs and screenshots.
        body = orjson.dumps(error_body("Invalid or missing API key. Send it as "
                                       "'Authorization: Bearer <key>'.", 401,
                                       code="invalid_api_key"))
        await send({"type": "http.response.start", "status": 401,
                    "headers": [(b"content-type", b"application/json"),
                                (b"www-authenticate", b"Bearer")]})
        await send({"type": "http.response.body", "body": body})
        if self.telemetry is not None:
            # Refused requests are logged and counted too (never with the key sent).
            request_id = str(scope.get("state", {}).get("request_id", ""))
            path = scope["path"].removeprefix("/v1/").lstrip("/") or scope["path"]
            endpoint = "chat.completions" if path == "chat/completions" else path
            self.telemetry.request_done(RequestRecord(
                request_id, endpoint, status=401, error="invalid or missing API key"))

    def _allowed(self, header: str) -> bool:
        return bearer_allowed(header, self.keys)


def bearer_allowed(header: str, keys: Sequence[bytes]) -> bool:
    """`Authorization: Bearer <one of keys>`, compared in constant time per key."""
    scheme, _, token = header.partition(" ")
    given = token.strip().encode()
    # Compare against every key, without stopping early: constant time per key.
    ok = False
    for key in keys:
        ok |= hmac.compare_digest(given, key)
    return ok and scheme.lower() == "bearer"


class Drain:
    """Graceful shutdown: open requests may finish for `grace` seconds, then are cut.

    The server calls `begin()` when it stops accepting (SIGTERM); requests
    still running `grace` seconds later are cancelled, and DrainMiddleware
    ends their responses cleanly instead of leaving the client to a dropped
    connection.
    """

    def __init__(self, grace: float) -> None:
        self.grace = grace
        self.draining = False
        self.cut = False
        self._scopes: set[anyio.CancelScope] = set()
        self._timer: asyncio.TimerHandle | None = None

    @property
    def open(self) -> int:
        return len(self._scopes)

    def begin(self) -> None:
        """Start draining; must be called on the event loop."""
        if self.draining:
            return
        self.draining = True
        self._timer = asyncio.get_running_loop().call_later(self.grace, self.cut_now)

    def cut_now(self) -> None:
        self.cut = True
        for scope in list(self._scopes):
            scope.cancel()

    @contextmanager
    def guard(self) -> Iterator[anyio.CancelScope]:
        scope = anyio.CancelScope()
        if self.cut:
            scope.cancel()
        self._scopes.add(scope)
        try:
            with scope:
                yield scope
        finally:
            self._scopes.discard(scope)


class DrainMiddleware:
    """Runs each request under the drain's guard and ends a cut response cleanly.

    A cut SSE stream gets an OpenAI error event and `[DONE]` (the SDKs raise a
    clear APIError instead of hanging or reporting a broken connection); a
    request cut before its answer started gets a 503 envelope.
    """

    def __init__(self, app: ASGIApp, drain: Drain) -> None:
        self.app = app
        self.drain = drain

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        progress = _Progress()
        if self.drain.cut:  # past the grace: nothing new starts
            await _end_cut(send, progress)
            return

        async def tracking_send(message: Message) -> None:
            progress.see(message)
            await send(message)

        with self.drain.guard() as guard:
            await self.app(scope, receive, tracking_send)
        if guard.cancelled_caught and not progress.complete:
            await _end_cut(send, progress)


class _Progress:
    def __init__(self) -> None:
        self.started = False
        self.complete = False
        self.sse = False
        self.at_boundary = True

    def see(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.started = True
            kind = dict(message.get("headers", [])).get(b"content-type", b"")
            self.sse = b"text/event-stream" in kind
        elif message["type"] == "http.response.body":
            body = message.get("body", b"")
            if body:
                self.at_boundary = body.endswith((b"\n\n", b"\r\n\r\n"))
            self.complete = not message.get("more_body", False)


_SHUTDOWN = "toolshim is shutting down; the request was cut at the end of the grace period"


async def _end_cut(send: Send, progress: _Progress) -> None:
    error = orjson.dumps(error_body(_SHUTDOWN, 503, code="shutting_down"))
    if not progress.started:
        await send({"type": "http.response.start", "status": 503,
                    "headers": [(b"content-type", b"application/json"),
                                (b"retry-after", b"1"), (b"connection", b"close")]})
        await send({"type": "http.response.body", "body": error})
        return
    tail = b""
    if progress.sse and progress.at_boundary:
        # Mid-event bytes would turn our frame into garbage: only add it between events.
        tail = b"data: " + error + b"\n\ndata: [DONE]\n\n"
    await send({"type": "http.response.body", "body": tail, "more_body": False})


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key.lower() == name:
            return str(value.decode("latin-1"))
    return None
