"""The edge: the one ASGI layer in front of every HTTP request.

In one pass over the request, in this order (each answer, a 401 and a
drain's 503 included, carries the request id):

- request id: a sane incoming X-Request-ID is honoured, else one is made;
  echoed on the response with `x-toolshim-overhead-ms` (routes that call an
  upstream set that themselves: they know the upstream's share);
- drain: each request runs under the shutdown drain's cancel scope; a cut
  response ends cleanly (an SSE error event and `[DONE]`, or a 503);
- API keys: when configured, /v1/*, /admin/* (and /metrics if asked) need one;
  the Anthropic door (/v1/messages*) takes it as `x-api-key` too, and refuses
  in Anthropic's envelope;
- body deadline: the whole body must arrive within `client_timeout`
  (api/client_timeouts.py has the header deadline);
- hot routes: POST /v1/chat/completions, /v1/responses and /v1/messages go straight to
  their endpoints; everything else through Starlette's router.

Why one layer and a direct dispatch: four stacked middlewares plus Starlette's
error, exception and routing layers were ~19% of a non-streaming chat
request's CPU in the W1 profile (a send wrapper, a header scan and a task-local
context each). The hot endpoints answer every error themselves
(api/failures.py), so Starlette's handlers add nothing there; a bug that still
escapes is logged once and answered 500 here.

Pure ASGI (not BaseHTTPMiddleware): streamed bodies pass straight through.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import os
import re
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence

import anyio
import orjson
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from proxy.api.client_timeouts import BODY_IN, TIMED_OUT
from proxy.api.messages.errors import AUTH_MESSAGE, envelope
from proxy.errors import error_body, internal_error
from proxy.observability.telemetry import RequestRecord, Telemetry
from proxy.scopes import cancel_scope

log = logging.getLogger("toolshim")

_SAFE_ID = re.compile(r"^[A-Za-z0-9._:\-]{1,128}$")
OVERHEAD_HEADER = b"x-toolshim-overhead-ms"
_REQUEST_ID = b"x-request-id"
_API_KEY = b"x-api-key"
_ANTHROPIC_DOOR = "/v1/messages"

Endpoint = Callable[[Request], Awaitable[Response]]


class Drain:
    """Graceful shutdown: open requests may finish for `grace` seconds, then are cut.

    The server calls `begin()` when it stops accepting (SIGTERM); requests
    still running `grace` seconds later are cancelled, and the edge ends their
    responses cleanly instead of leaving the client to a dropped connection.
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

    def watch(self) -> anyio.CancelScope:
        """A cancel scope for one request, cancelled at the cut; `forget` it after."""
        scope = cancel_scope()
        if self.cut:
            scope.cancel()
        self._scopes.add(scope)
        return scope

    def forget(self, scope: anyio.CancelScope) -> None:
        self._scopes.discard(scope)


class Edge:
    """Request id, drain, API keys, body deadline and hot-route dispatch; see the module."""

    def __init__(self, app: ASGIApp, *, drain: Drain, keys: Sequence[str] = (),
                 protect_metrics: bool = False, telemetry: Telemetry | None = None,
                 body_timeout: float = 60.0,
                 hot: Mapping[str, Endpoint] | None = None) -> None:
        self.app = app
        self.drain = drain
        self.keys = [k.encode() for k in keys]
        self.protected = ("/v1/", "/v1", "/admin") + (("/metrics",) if protect_metrics else ())
        self.telemetry = telemetry
        self.body_timeout = body_timeout
        self.hot = dict(hot or {})
        """POST path -> endpoint, served without Starlette's router."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        incoming = authorization = api_key = None
        for key, value in scope["headers"]:  # ASGI header names are lower-case
            # The first of a repeated header counts, as forward_headers has it.
            if key == _REQUEST_ID and incoming is None:
                incoming = value.decode("latin-1")
            elif key == b"authorization" and authorization is None:
                authorization = value.decode("latin-1")
            elif key == _API_KEY and api_key is None:
                api_key = value
        request_id = incoming if incoming and _SAFE_ID.match(incoming) else os.urandom(16).hex()
        state = scope.setdefault("state", {})
        state["request_id"] = request_id
        progress = _Progress()
        id_header = (_REQUEST_ID, request_id.encode())

        async def edge_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [id_header]
                timed = False
                for name, value in message.get("headers", ()):
                    lowered = name.lower()
                    if lowered == _REQUEST_ID:
                        continue
                    if lowered == OVERHEAD_HEADER:
                        timed = True
                    elif lowered == b"content-type":
                        progress.sse = value.find(b"text/event-stream") >= 0
                    headers.append((name, value))
                if not timed:
                    spent = (time.perf_counter() - started) * 1000
                    headers.append((OVERHEAD_HEADER, b"%.2f" % spent))
                message["headers"] = headers
                progress.started = True
            elif message["type"] == "http.response.body":
                body = message.get("body", b"")
                if body:
                    progress.last = body  # a reference: the cut asks it (`at_boundary`)
                progress.complete = not message.get("more_body", False)
            await send(message)

        if self.drain.cut:  # past the grace: nothing new starts
            await _end_cut(edge_send, progress)
            return
        if self.keys and scope["path"].startswith(self.protected) \
                and not self._allowed(scope["path"], authorization, api_key):
            await self._refuse(scope, request_id, edge_send)
            return
        guard = self.drain.watch()
        try:
            with guard:
                # A body already in the server's buffer has no deadline to keep.
                await self._dispatch(scope, receive if state.get(BODY_IN) else
                                     self._timed(scope, receive), edge_send, progress)
        finally:
            self.drain.forget(guard)
        if guard.cancelled_caught and not progress.complete:
            await _end_cut(edge_send, progress)

    async def _dispatch(self, scope: Scope, receive: Receive, send: Send,
                        progress: _Progress) -> None:
        endpoint = self.hot.get(scope["path"]) if scope["method"] == "POST" else None
        if endpoint is None or scope.get("root_path"):
            await self.app(scope, receive, send)
            return
        try:
            response = await endpoint(Request(scope, receive, send))
            await response(scope, receive, send)
        except Exception:
            # The hot endpoints answer their own errors; this is a bug that got past them.
            log.exception("unexpected error on %s %s", scope["method"], scope["path"],
                          extra={"record": {"request_id": scope["state"]["request_id"]}})
            if progress.started:
                raise  # mid-body: the server closes the connection
            await internal_error()(scope, receive, send)

    def _timed(self, scope: Scope, receive: Receive) -> Receive:
        """`receive` with the body deadline: past it, a disconnect, and the request marked.

        asyncio's own timeout, not an anyio scope: it is armed for every request
        (its body usually already waits in uvicorn's buffer) and costs half as much.
        It cancels only this await and undoes its own cancel (`uncancel`), so the
        drain's anyio scope around the request still works as before.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.body_timeout
        body_done = False

        async def timed_receive() -> Message:
            nonlocal body_done
            if body_done:
                return await receive()
            try:
                async with asyncio.timeout_at(deadline):
                    message = await receive()
            except TimeoutError:
                scope.setdefault("state", {})[TIMED_OUT] = True
                body_done = True
                return {"type": "http.disconnect"}
            if message["type"] != "http.request" or not message.get("more_body"):
                body_done = True
            return message

        return timed_receive

    def _allowed(self, path: str, authorization: str | None, api_key: bytes | None) -> bool:
        if bearer_allowed(authorization or "", self.keys):
            return True
        # Claude Code sends ANTHROPIC_API_KEY as x-api-key (ANTHROPIC_AUTH_TOKEN as Bearer).
        return api_key is not None and path.startswith(_ANTHROPIC_DOOR) \
            and key_allowed(api_key.strip(), self.keys)

    async def _refuse(self, scope: Scope, request_id: str, send: Send) -> None:
        # The message never repeats what was sent: a mistyped key stays out of
        # client logs and screenshots.
        if scope["path"].startswith(_ANTHROPIC_DOOR):
            body = orjson.dumps(envelope(401, AUTH_MESSAGE, request_id))
        else:
            body = orjson.dumps(error_body("Invalid or missing API key. Send it as "
                                           "'Authorization: Bearer <key>'.", 401,
                                           code="invalid_api_key"))
        await send({"type": "http.response.start", "status": 401,
                    "headers": [(b"content-type", b"application/json"),
                                (b"www-authenticate", b"Bearer")]})
        await send({"type": "http.response.body", "body": body})
        if self.telemetry is not None:
            # Refused requests are logged and counted too (never with the key sent).
            path = scope["path"].removeprefix("/v1/").lstrip("/") or scope["path"]
            endpoint = "chat.completions" if path == "chat/completions" else path
            self.telemetry.request_done(RequestRecord(
                request_id, endpoint, status=401, error="invalid or missing API key"))


def bearer_allowed(header: str, keys: Sequence[bytes]) -> bool:
    """`Authorization: Bearer <one of keys>`, compared in constant time per key."""
    scheme, _, token = header.partition(" ")
    return key_allowed(token.strip().encode(), keys) and scheme.lower() == "bearer"


def key_allowed(given: bytes, keys: Sequence[bytes]) -> bool:
    """`given` is one of `keys`: compared against every key, without stopping early
    (constant time per key)."""
    ok = False
    for key in keys:
        ok |= hmac.compare_digest(given, key)
    return ok


class _Progress:
    """How far the response got: what a cut may still add to it."""

    __slots__ = ("complete", "last", "sse", "started")

    def __init__(self) -> None:
        self.started = False
        self.complete = False
        self.sse = False
        self.last = b""
        """the last body bytes sent: a stream's last piece, only looked at by a cut."""

    @property
    def at_boundary(self) -> bool:
        """Whether the body sent so far ends between SSE events."""
        return not self.last or self.last.endswith((b"\n\n", b"\r\n\r\n"))


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
