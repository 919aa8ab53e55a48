"""Pooled HTTP clients to the backends, sending, and transport-error mapping.

One `httpx.AsyncClient` per upstream for the app's life. Its transport is
httpx-aiohttp: httpx's own connection pool degrades badly under concurrency
(encode/httpx#3215; a plain starlette+httpx forwarder manages ~340 req/s at
concurrency 32 on this class of machine), aiohttp's pool does not, and the
OpenAI SDK ships the same transport. This module makes no decisions: which
upstream, whether to retry, what to change are the callers'.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import httpx
import orjson
from httpx_aiohttp import AiohttpTransport

from proxy.errors import ApiError
from proxy.settings import redact_url

# RFC 9110 §7.6.1 hop-by-hop headers, plus what httpx recomputes itself.
HOP_BY_HOP = frozenset({
    "connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "proxy-connection",
    "te", "trailer", "trailers", "transfer-encoding", "upgrade", "host", "content-length",
})


@dataclass
class Upstream:
    root: str
    client: httpx.AsyncClient
    api_key: str | None = field(default=None, repr=False)
    last_answer: float = 0.0
    """monotonic time of the last HTTP answer of any status: the backend is up."""

    urls: dict[str, httpx.URL] = field(default_factory=dict, repr=False)

    def url(self, path: str) -> httpx.URL:
        """Absolute URL for a path; the fixed API paths are parsed once."""
        found = self.urls.get(path)
        if found is None:
            found = httpx.URL(self.root + path)
            if "?" not in path and len(self.urls) < 64:
                self.urls[path] = found
        return found


def make_client(root: str, connect_timeout: float, read_timeout: float,
                max_connections: int) -> httpx.AsyncClient:
    timeout = httpx.Timeout(connect=connect_timeout, read=read_timeout, write=read_timeout,
                            pool=connect_timeout)
    limits = httpx.Limits(max_connections=max_connections, max_keepalive_connections=256,
                          keepalive_expiry=30.0)
    transport = AiohttpTransport(limits=limits, trust_env=False)
    return httpx.AsyncClient(base_url=root, transport=transport, timeout=timeout,
                             trust_env=False)


def forward_headers(incoming: Mapping[str, str], upstream: Upstream,
                    keep_client_auth: bool) -> dict[str, str]:
    """Headers to send upstream: end-to-end ones only; auth replaced or dropped.

    The client's Authorization is meant for toolshim when toolshim checks keys,
    so it is forwarded only when toolshim has no keys and the upstream has no
    key of its own.
    """
    # Headers the client's Connection header names are hop-by-hop too (RFC 9110 7.6.1).
    named = {h.strip().lower() for k, v in incoming.items() if k.lower() == "connection"
             for h in v.split(",")}
    out = {k: v for k, v in incoming.items()
           if k.lower() not in HOP_BY_HOP and k.lower() not in named
           and k.lower() != "authorization"}
    if upstream.api_key:
        out["authorization"] = f"Bearer {upstream.api_key}"
    elif keep_client_auth and "authorization" in {k.lower() for k in incoming}:
        out["authorization"] = next(v for k, v in incoming.items() if k.lower() == "authorization")
    return out


def passthrough_response_headers(headers: httpx.Headers) -> dict[str, str]:
    """An upstream's headers fit to relay: no hop-by-hop ones (those its Connection
    header names too) and no `date` (the server adds its own: one date header)."""
    named = {h.strip().lower() for v in headers.get_list("connection") for h in v.split(",")}
    return {k: v for k, v in headers.items()
            if k.lower() not in HOP_BY_HOP and k.lower() not in named and k.lower() != "date"}


async def send(upstream: Upstream, method: str, path: str, *, content: bytes | None,
               headers: Mapping[str, str]) -> httpx.Response:
    """Open a request and return the response with its body not yet read.

    The caller owns the response and must `aclose()` it. Transport failures
    become ApiError 502 (unreachable, reset) or 504 (timeout).
    """
    # Built by hand with a pre-parsed URL: client.build_request re-parses and
    # merges base URL and headers, ~150 us a request on this machine's class.
    request = httpx.Request(method, upstream.url(path), content=content, headers=headers,
                            extensions={"timeout": upstream.client.timeout.as_dict()})
    try:
        response = await upstream.client.send(request, stream=True)
    except httpx.TransportError as exc:
        raise transport_error(exc, upstream.root) from None
    upstream.last_answer = time.monotonic()
    return response


async def iter_bytes(response: httpx.Response, root: str) -> AsyncIterator[bytes]:
    """The body as it arrives; a broken transport raises ApiError after what arrived."""
    try:
        async for piece in response.aiter_raw():
            yield piece
    except httpx.TransportError as exc:
        received = _buffered_before_failure(response)
        if received:
            yield received
        raise transport_error(exc, root) from None


def _buffered_before_failure(response: httpx.Response) -> bytes:
    """Bytes aiohttp had received but not handed out when the connection broke.

    aiohttp's StreamReader raises a stored connection error before returning
    its buffer, so the last events before a reset were lost (issue: content
    received before a reset must reach the client before the error).
    """
    stream = getattr(response.stream, "_stream", response.stream)  # httpx's BoundAsyncStream
    aiohttp_response = getattr(stream, "_aiohttp_response", None)
    buffer = getattr(getattr(aiohttp_response, "content", None), "_buffer", None)
    if not buffer:
        return b""
    received = b"".join(bytes(part) for part in buffer)
    buffer.clear()
    return received


def transport_error(exc: httpx.TransportError, root: str) -> ApiError:
    """Map a transport failure to 502/504 with a message that names no secrets."""
    timed_out = _timed_out(exc)
    if timed_out:
        return ApiError(504, f"upstream {redact_url(root)} timed out", type_="timeout_error",
                        code="upstream_timeout")
    return ApiError(502, f"upstream {redact_url(root)} is unreachable or closed the connection",
                    type_="api_error", code="upstream_unavailable")


def _timed_out(exc: httpx.TransportError) -> bool:
    """Only a real timeout is one: httpx-aiohttp reports a reset or a refusal as
    ConnectTimeout, so the aiohttp cause decides when there is one."""
    cause = exc.__cause__
    if isinstance(cause, (aiohttp.ServerTimeoutError, TimeoutError)):
        return True
    if isinstance(cause, (aiohttp.ClientError, OSError)):
        return False  # reset, refused, closed mid-body, DNS: the upstream is unavailable
    return isinstance(exc, httpx.TimeoutException)


_LISTING_TIMEOUT = 5.0


async def fetch_listing(upstream: Upstream) -> list[dict[str, Any]] | None:
    """An upstream's /v1/models `data`; Ollama says `"data": null` when it has none."""
    try:
        response = await upstream.client.get("/v1/models", timeout=_LISTING_TIMEOUT)
    except httpx.HTTPError:  # any transport failure: this upstream just has no listing now
        return None
    if response.status_code != 200:
        return None
    try:
        data = orjson.loads(response.content).get("data")
    except (orjson.JSONDecodeError, AttributeError):
        return None
    return [e for e in data or [] if isinstance(e, dict)]
