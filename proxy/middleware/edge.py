"""The edge: the one ASGI layer in front of every HTTP request.

In one pass over the request, in this order (each answer, a 401 and a
drain's 503 included, carries the request id):

- request id: a sane incoming X-Request-ID is honoured, else one is made;
  echoed on the response with `x-toolshim-overhead-ms` (routes that call an
  upstream set that themselves: they know the upstream's share);
- drain: each request runs under the shutdown drain's cancel scope; a cut
  response ends cleanly (an SSE error event and `[DONE]`, or a 503) (drain.py);
- browsers: on a loopback address only loopback Host names (and --allowed-hosts) are
  answered (421); a request that acts (any method but GET/HEAD/OPTIONS) from another
  origin is refused (403) (origins.py, docs/security.md);
- API keys: when configured, /v1/*, /admin/* (and /metrics if asked) need one; with
  admin keys, /admin/* needs one of those (a client key gets 403); the Anthropic door
  (/v1/messages*) takes the key as `x-api-key` too, the Gemini door as `x-goog-api-key`
  or `?key=`, and each refuses in its own envelope (the rules: keys.py);
- body deadline: the whole body must arrive within `client_timeout`
  (asgi/client_timeouts.py has the header deadline);
- hot routes: POST /v1/chat/completions, /v1/responses, /v1/messages (and the Gemini
  door by prefix) go straight to their endpoints; everything else through Starlette's
  router.

Why one layer and a direct dispatch: stacked middlewares plus Starlette's error,
exception and routing layers each add a send wrapper, a header scan and a task-local
context to every request (bench/README.md has what they cost). The hot endpoints
answer every error themselves (api/failures.py), so Starlette's handlers add nothing
there; a bug that still escapes is logged once and answered 500 here.

Pure ASGI (not BaseHTTPMiddleware): streamed bodies pass straight through.
Must not: read a request body (the routes do, under the deadline set here), or add
work per request that only some requests need (this runs on every one).
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence

import orjson
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from proxy.api.messages.errors import envelope as anthropic_envelope
from proxy.asgi.client_timeouts import BODY_IN, TIMED_OUT
from proxy.errors import internal_error
from proxy.middleware.drain import Drain, Progress, end_cut
from proxy.middleware.keys import ANTHROPIC_DOOR, DoorKeys, from_gemini_client
from proxy.observability.telemetry import RequestRecord, Telemetry
from proxy.origins import cross_origin, host_allowed, on_loopback, refusal_body

log = logging.getLogger("toolshim")

_SAFE_ID = re.compile(r"^[A-Za-z0-9._:\-]{1,128}$")
OVERHEAD_HEADER = b"x-toolshim-overhead-ms"
_REQUEST_ID = b"x-request-id"
_READ = frozenset({_REQUEST_ID, b"authorization", b"host", b"origin", b"sec-fetch-site"})
"""the request headers the edge reads."""
_HOSTS_REMEMBERED = 64
"""allowed Host values kept so the next request with one costs a set lookup."""
_LOGGED = {"invalid_api_key": "invalid or missing API key",
           "admin_key_required": "a client key on an admin path",
           "cross_origin": "a request from another origin",
           "host_not_allowed": "a Host not allowed on loopback"}

Endpoint = Callable[[Request], Awaitable[Response]]


class Edge:
    """Request id, drain, API keys, body deadline and hot-route dispatch; see the module."""

    def __init__(self, app: ASGIApp, *, drain: Drain, keys: Sequence[str] = (),
                 protect_metrics: bool = False, telemetry: Telemetry | None = None,
                 body_timeout: float = 60.0,
                 hot: Mapping[str, Endpoint] | None = None,
                 hot_prefixes: Mapping[str, Endpoint] | None = None,
                 admin_keys: Sequence[str] = (), allowed_hosts: Sequence[str] = ()) -> None:
        self.app = app
        self.drain = drain
        keyed = DoorKeys(keys, admin_keys, protect_metrics)
        self.keys = keyed if keyed.any else None
        """the keys to check, None when no path needs one."""
        self.telemetry = telemetry
        self.body_timeout = body_timeout
        self.hot = dict(hot or {})
        """POST path -> endpoint, served without Starlette's router."""
        self.hot_prefixes = tuple((hot_prefixes or {}).items())
        """POST path prefix -> endpoint taking the rest of the path as `rest` (the Gemini
        door's `models/{model}:{method}`), likewise."""
        self.any_host = "*" in allowed_hosts
        self.extra_hosts = frozenset(h.encode() for h in allowed_hosts)
        self.hosts_ok: set[bytes] = set()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        incoming = authorization = host = origin = fetch_site = None
        for key, value in scope["headers"]:  # ASGI header names are lower-case
            if key not in _READ:  # one set lookup for the many headers not read here
                continue
            # The first of a repeated header counts, as forward_headers has it.
            if key == _REQUEST_ID and incoming is None:
                incoming = value.decode("latin-1")
            elif key == b"authorization" and authorization is None:
                authorization = value.decode("latin-1")
            elif key == b"host" and host is None:
                host = value
            elif key == b"origin" and origin is None:
                origin = value
            elif key == b"sec-fetch-site" and fetch_site is None:
                fetch_site = value
        request_id = incoming if incoming and _SAFE_ID.match(incoming) else os.urandom(16).hex()
        state = scope.setdefault("state", {})
        state["request_id"] = request_id
        progress = Progress()
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
            await end_cut(edge_send, progress)
            return
        if host is not None and host not in self.hosts_ok and not self.any_host \
                and on_loopback(scope.get("server")) and not self._host_ok(host):
            await self._refuse(scope, request_id, edge_send, 421, "host_not_allowed",
                               f"this toolshim does not answer to the Host "
                               f"{host.decode('latin-1')[:100]!r}; list it in "
                               "--allowed-hosts (TOOLSHIM_ALLOWED_HOSTS)")
            return
        if (origin is not None or fetch_site is not None) \
                and cross_origin(scope["method"], scope["scheme"], origin, fetch_site, host):
            await self._refuse(scope, request_id, edge_send, 403, "cross_origin",
                               "a request from another origin (a web page) may not act "
                               "through toolshim")
            return
        if self.keys is not None:
            refused = self.keys.refusal(scope, authorization or "")
            if refused is not None:
                await self._refuse(scope, request_id, edge_send, *refused)
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
            await end_cut(edge_send, progress)

    async def _dispatch(self, scope: Scope, receive: Receive, send: Send,
                        progress: Progress) -> None:
        endpoint = self.hot.get(scope["path"]) if scope["method"] == "POST" else None
        if endpoint is None and scope["method"] == "POST":
            endpoint = self._by_prefix(scope)
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

    def _by_prefix(self, scope: Scope) -> Endpoint | None:
        path = scope["path"]
        for prefix, endpoint in self.hot_prefixes:
            if path.startswith(prefix):
                scope["path_params"] = {"rest": path[len(prefix):]}
                return endpoint
        return None

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

    def _host_ok(self, host: bytes) -> bool:
        if not host_allowed(host, self.extra_hosts):
            return False
        if len(self.hosts_ok) < _HOSTS_REMEMBERED:
            self.hosts_ok.add(host)
        return True

    async def _refuse(self, scope: Scope, request_id: str, send: Send, status: int,
                      code: str, message: str,
                      headers: Sequence[tuple[bytes, bytes]] = ()) -> None:
        # A Gemini API client on a path both APIs share gets Google's envelope too.
        if scope["path"].startswith(ANTHROPIC_DOOR):
            body = orjson.dumps(anthropic_envelope(status, message, request_id))
        else:
            body = refusal_body("/v1beta" if from_gemini_client(scope) else scope["path"],
                                status, message, code)
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"), *headers]})
        await send({"type": "http.response.body", "body": body})
        if self.telemetry is not None:
            # Refused requests are logged and counted too (never with the key sent).
            path = scope["path"].removeprefix("/v1/").lstrip("/") or scope["path"]
            endpoint = "chat.completions" if path == "chat/completions" else path
            self.telemetry.request_done(RequestRecord(
                request_id, endpoint, status=status, error=_LOGGED[code]))


