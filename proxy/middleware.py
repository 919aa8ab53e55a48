"""The edge: the one ASGI layer in front of every HTTP request.

In one pass over the request, in this order (each answer, a 401 and a
drain's 503 included, carries the request id):

- request id: a sane incoming X-Request-ID is honoured, else one is made;
  echoed on the response with `x-toolshim-overhead-ms` (routes that call an
  upstream set that themselves: they know the upstream's share);
- drain: each request runs under the shutdown drain's cancel scope; a cut
  response ends cleanly (an SSE error event and `[DONE]`, or a 503);
- browsers: on a loopback address only loopback Host names (and --allowed-hosts) are
  answered (421); a request that acts (any method but GET/HEAD/OPTIONS) from another
  origin is refused (403) (origins.py, docs/security.md);
- API keys: when configured, /v1/*, /admin/* (and /metrics if asked) need one; with
  admin keys, /admin/* needs one of those (a client key gets 403); the Anthropic door
  (/v1/messages*) takes the key as `x-api-key` too, the Gemini door as `x-goog-api-key`
  or `?key=`, and each refuses in its own envelope;
- body deadline: the whole body must arrive within `client_timeout`
  (asgi/client_timeouts.py has the header deadline);
- hot routes: POST /v1/chat/completions, /v1/responses, /v1/messages (and the Gemini
  door by prefix) go straight to
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
from urllib.parse import parse_qs

import anyio
import orjson
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from proxy.api.gemini.errors import AUTH_MESSAGE as GEMINI_AUTH_MESSAGE
from proxy.api.messages.errors import AUTH_MESSAGE as ANTHROPIC_AUTH_MESSAGE
from proxy.api.messages.errors import envelope as anthropic_envelope
from proxy.asgi.client_timeouts import BODY_IN, TIMED_OUT
from proxy.asgi.scopes import cancel_scope
from proxy.errors import error_body, internal_error
from proxy.observability.telemetry import RequestRecord, Telemetry
from proxy.origins import SAFE_METHODS, host_allowed, on_loopback, refusal_body, same_origin

log = logging.getLogger("toolshim")

_SAFE_ID = re.compile(r"^[A-Za-z0-9._:\-]{1,128}$")
OVERHEAD_HEADER = b"x-toolshim-overhead-ms"
_REQUEST_ID = b"x-request-id"
_GEMINI_DOORS = ("/v1beta", "/v1/models")
_ANTHROPIC_DOOR = "/v1/messages"
"""where the Gemini API's own key forms are accepted (under /v1/ only the model paths)."""
_READ = frozenset({_REQUEST_ID, b"authorization", b"host", b"origin", b"sec-fetch-site"})
"""the request headers the edge reads."""
_HOSTS_REMEMBERED = 64
"""allowed Host values kept so the next request with one costs a set lookup."""
_KEY_HINT = "Send it as 'Authorization: Bearer <key>'."
_LOGGED = {"invalid_api_key": "invalid or missing API key",
           "admin_key_required": "a client key on an admin path",
           "cross_origin": "a request from another origin",
           "host_not_allowed": "a Host not allowed on loopback"}

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
                 hot: Mapping[str, Endpoint] | None = None,
                 hot_prefixes: Mapping[str, Endpoint] | None = None,
                 admin_keys: Sequence[str] = (), allowed_hosts: Sequence[str] = ()) -> None:
        self.app = app
        self.drain = drain
        self.admin_keys = [k.encode() for k in admin_keys]
        self.client_keys = [k.encode() for k in keys]
        # An admin key is also a client key (the console's bench runs chats with it).
        self.keys = self.client_keys + self.admin_keys if keys else []
        self.metrics_keys = self.client_keys + self.admin_keys if protect_metrics else []
        self.protected = ("/v1/", "/v1", "/admin")
        self.keyed = bool(self.keys or self.admin_keys or self.metrics_keys)
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
        if host is not None and host not in self.hosts_ok and not self.any_host \
                and on_loopback(scope.get("server")) and not self._host_ok(host):
            await self._refuse(scope, request_id, edge_send, 421, "host_not_allowed",
                               f"this toolshim does not answer to the Host "
                               f"{host.decode('latin-1')[:100]!r}; list it in "
                               "--allowed-hosts (TOOLSHIM_ALLOWED_HOSTS)")
            return
        if (origin is not None or fetch_site is not None) \
                and _cross_origin(scope, origin, fetch_site, host):
            await self._refuse(scope, request_id, edge_send, 403, "cross_origin",
                               "a request from another origin (a web page) may not act "
                               "through toolshim")
            return
        if self.keyed and not await self._keys_ok(scope, authorization or "", request_id,
                                                  edge_send):
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

    async def _keys_ok(self, scope: Scope, authorization: str, request_id: str,
                       send: Send) -> bool:
        """Whether the key sent opens this path; when not, the 401 or 403 is sent here."""
        path = scope["path"]
        if self.admin_keys and path.startswith("/admin"):
            if bearer_allowed(authorization, self.admin_keys):
                scope["state"]["admin"] = True  # an admin key was checked, not only some key
                return True
            if self.client_keys and bearer_allowed(authorization, self.client_keys):
                await self._refuse(scope, request_id, send, 403, "admin_key_required",
                                   "this key may not use /admin; it needs an admin key "
                                   "(--admin-key)")
                return False
        elif path.startswith(self.protected):
            if not self.keys or bearer_allowed(authorization, self.keys) \
                    or google_key_allowed(scope, self.keys) \
                    or anthropic_key_allowed(scope, self.keys):
                return True
        elif not (path.startswith("/metrics") and self.metrics_keys) \
                or bearer_allowed(authorization, self.metrics_keys):
            return True
        # The message never repeats what was sent: a mistyped key stays out of
        # client logs and screenshots.
        await self._refuse(scope, request_id, send, 401, "invalid_api_key",
                           GEMINI_AUTH_MESSAGE if _from_gemini_client(scope) else
                           ANTHROPIC_AUTH_MESSAGE if path.startswith(_ANTHROPIC_DOOR) else
                           f"Invalid or missing API key. {_KEY_HINT}",
                           [(b"www-authenticate", b"Bearer")])
        return False

    async def _refuse(self, scope: Scope, request_id: str, send: Send, status: int,
                      code: str, message: str,
                      headers: Sequence[tuple[bytes, bytes]] = ()) -> None:
        # A Gemini API client on a path both APIs share gets Google's envelope too.
        if scope["path"].startswith(_ANTHROPIC_DOOR):
            body = orjson.dumps(anthropic_envelope(status, message, request_id))
        else:
            body = refusal_body("/v1beta" if _from_gemini_client(scope) else scope["path"],
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


def is_gemini_path(path: str) -> bool:
    return path.startswith(_GEMINI_DOORS)


def _from_gemini_client(scope: Scope) -> bool:
    """Refused in Google's envelope: the Gemini door, or a Gemini API client (the SDKs
    and Gemini CLI send x-goog-api-key or x-goog-api-client) on a path both APIs share."""
    return scope["path"].startswith("/v1beta") or is_gemini_path(scope["path"]) and any(
        k.startswith(b"x-goog-") for k, _ in scope["headers"])


def google_key_allowed(scope: Scope, keys: Sequence[bytes]) -> bool:
    """On the Gemini door, the key as `x-goog-api-key` (Gemini CLI, the SDKs) or as
    `?key=` (the API's query parameter), compared as `bearer_allowed` compares."""
    if not is_gemini_path(scope["path"]):
        return False
    given = next((v for k, v in scope["headers"] if k == b"x-goog-api-key"), None)
    if given is None:
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        values = query.get("key")
        given = values[0].encode("latin-1") if values else None
    return _one_of(given, keys)


def anthropic_key_allowed(scope: Scope, keys: Sequence[bytes]) -> bool:
    """On the Anthropic door, the key as `x-api-key` (Claude Code sends ANTHROPIC_API_KEY
    so, ANTHROPIC_AUTH_TOKEN as Bearer), compared as `bearer_allowed` compares."""
    if not scope["path"].startswith(_ANTHROPIC_DOOR):
        return False
    return _one_of(next((v for k, v in scope["headers"] if k == b"x-api-key"), None), keys)


def _one_of(given: bytes | None, keys: Sequence[bytes]) -> bool:
    """`given` (stripped) is one of `keys`: compared against every key, without stopping
    early, so the time taken says nothing about how much of a key matched."""
    if given is None:
        return False
    ok = False
    for key in keys:
        ok |= hmac.compare_digest(given.strip(), key)
    return ok


def _cross_origin(scope: Scope, origin: bytes | None, fetch_site: bytes | None,
                  host: bytes | None) -> bool:
    """A request that acts, sent by a page of another origin (a browser says so)."""
    if scope["method"] in SAFE_METHODS:
        return False
    if fetch_site == b"cross-site":
        return True
    return origin is not None and not same_origin(origin, scope["scheme"], host)


def bearer_allowed(header: str, keys: Sequence[bytes]) -> bool:
    """`Authorization: Bearer <one of keys>`, compared in constant time per key."""
    scheme, _, token = header.partition(" ")
    given = token.strip().encode()
    # Compare against every key, without stopping early: constant time per key.
    ok = False
    for key in keys:
        ok |= hmac.compare_digest(given, key)
    return ok and scheme.lower() == "bearer"


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
