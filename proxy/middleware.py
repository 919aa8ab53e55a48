"""ASGI middleware: request ids and API-key auth, composed in app.py.

Pure ASGI (not BaseHTTPMiddleware) so streamed bodies pass straight through
without an extra task per request.
"""

from __future__ import annotations

import hmac
import re
import uuid
from collections.abc import Sequence

import orjson
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from proxy.errors import error_body

_SAFE_ID = re.compile(r"^[A-Za-z0-9._:\-]{1,128}$")


class RequestIdMiddleware:
    """Honour a sane incoming X-Request-ID, else make one; echo it on the response."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        incoming = _header(scope, b"x-request-id")
        request_id = incoming if incoming and _SAFE_ID.match(incoming) else uuid.uuid4().hex
        scope.setdefault("state", {})["request_id"] = request_id

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [(k, v) for k, v in message.get("headers", [])
                           if k.lower() != b"x-request-id"]
                headers.append((b"x-request-id", request_id.encode()))
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, send_with_id)


class ApiKeyMiddleware:
    """When keys are configured, /v1/* and /admin/* (and /metrics if asked) need one."""

    def __init__(self, app: ASGIApp, keys: Sequence[str], protect_metrics: bool) -> None:
        self.app = app
        self.keys = [k.encode() for k in keys]
        self.prefixes = ("/v1/", "/v1", "/admin") + (("/metrics",) if protect_metrics else ())

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not self.keys or not scope["path"].startswith(self.prefixes):
            await self.app(scope, receive, send)
            return
        if self._allowed(_header(scope, b"authorization") or ""):
            await self.app(scope, receive, send)
            return
        body = orjson.dumps(error_body("Invalid or missing API key. Send it as "
                                       "'Authorization: Bearer <key>'.", 401,
                                       code="invalid_api_key"))
        await send({"type": "http.response.start", "status": 401,
                    "headers": [(b"content-type", b"application/json"),
                                (b"www-authenticate", b"Bearer")]})
        await send({"type": "http.response.body", "body": body})

    def _allowed(self, header: str) -> bool:
        scheme, _, token = header.partition(" ")
        given = token.strip().encode()
        # Compare against every key, without stopping early: constant time per key.
        ok = False
        for key in self.keys:
            ok |= hmac.compare_digest(given, key)
        return ok and scheme.lower() == "bearer"


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key.lower() == name:
            return str(value.decode("latin-1"))
    return None
