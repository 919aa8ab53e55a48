"""Pooled HTTP clients to the backends, sending, and transport-error mapping.

One `httpx.AsyncClient` per upstream for the app's life, over our own lean
HTTP/1.1 transport (backends/wire.py: keep-alive pool, httptools parser), or
over httpx's own transport where a proxy or https applies (backends/egress.py
decides which at start-up). The chat and pass-through hot path hands its
request straight to the transport (`send`): `AsyncClient.send` adds auth,
redirect and cookie handling a backend call never needs (and a cookie jar
shared by every client of the proxy is not something to keep). This module
makes no decisions: which upstream, whether to retry, what to change are the
callers'.
"""

from __future__ import annotations

import asyncio
import base64
import ssl
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx
import orjson

from proxy.backends.egress import Egress
from proxy.backends.wire import WireTransport
from proxy.errors import MAX_MODEL_NAME, ApiError
from proxy.settings import api_url, redact_url

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
    wire: WireTransport | None = field(default=None, repr=False)
    """the client's transport when it is ours, for `send` to hand requests to directly."""
    transport: httpx.AsyncBaseTransport | None = field(default=None, repr=False)
    """the client's transport when it is httpx's (a proxy or https applies), likewise."""
    basic_auth: str | None = field(default=None, init=False, repr=False)
    timeouts: dict[str, float | None] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        self.timeouts = self.client.timeout.as_dict()
        parsed = httpx.URL(self.root)
        if parsed.username or parsed.password:  # http://user:pass@host: as httpx would
            pair = f"{parsed.username}:{parsed.password}".encode()
            self.basic_auth = "Basic " + base64.b64encode(pair).decode("ascii")

    def url(self, path: str) -> httpx.URL:
        """Absolute URL for a path; the fixed API paths are parsed once."""
        found = self.urls.get(path)
        if found is None:
            found = httpx.URL(api_url(self.root, path))
            if "?" not in path and len(self.urls) < 64:
                self.urls[path] = found
        return found


def make_upstream(root: str, api_key: str | None, connect_timeout: float,
                  read_timeout: float, max_connections: int, *,
                  egress: Egress | None = None, tls: ssl.SSLContext | None = None) -> Upstream:
    """An upstream with its client over the transport `egress` names (our own by
    default); `send` hands requests to it. `tls`: whom certificates must chain to."""
    timeout = httpx.Timeout(connect=connect_timeout, read=read_timeout, write=read_timeout,
                            pool=connect_timeout)
    if egress is not None and egress.transport == "httpx":
        # trust_env=False: the proxy is the one egress chose, not a second reading of the
        # environment (which would also let SSL_CERT_FILE override --ca-bundle).
        proxy = None
        if egress.proxy:  # an https:// proxy is trusted like the upstreams (httpcore refuses
            # a context for an http:// one)
            https_proxy = egress.proxy.startswith("https://")
            proxy = httpx.Proxy(egress.proxy, ssl_context=tls if https_proxy else None)
        transport = httpx.AsyncHTTPTransport(
            verify=tls if tls is not None else True, proxy=proxy, trust_env=False,
            limits=httpx.Limits(max_connections=max_connections, max_keepalive_connections=256,
                                keepalive_expiry=30.0))
        client = httpx.AsyncClient(base_url=root, transport=transport, timeout=timeout,
                                   trust_env=False)
        return Upstream(root, client, api_key=api_key, transport=transport)
    wire = WireTransport(max_connections=max_connections, max_idle=256, keepalive_expiry=30.0,
                         tls=tls)
    client = httpx.AsyncClient(base_url=root, transport=wire, timeout=timeout, trust_env=False)
    return Upstream(root, client, api_key=api_key, wire=wire)


def forward_headers(incoming: Mapping[str, str], upstream: Upstream,
                    keep_client_auth: bool) -> dict[str, str]:
    """Headers to send upstream: end-to-end ones only; auth replaced or dropped.

    The client's Authorization is meant for toolshim when toolshim checks keys,
    so it is forwarded only when toolshim has no keys and the upstream has no
    key of its own.
    """
    # One pass over the headers (a Starlette mapping decodes them all on every items()).
    out: dict[str, str] = {}
    named: set[str] = set()
    client_auth = None
    keep_api_key = keep_client_auth and not upstream.api_key
    for key, value in incoming.items():
        lowered = key.lower()
        if lowered == "authorization":
            if client_auth is None:  # the first of a repeated one, as the edge reads it
                client_auth = value
        elif lowered == "x-goog-api-key":
            continue  # the Gemini door's key for toolshim: no chat backend reads it
        elif lowered == "x-api-key" and not keep_api_key:
            continue  # the Anthropic door's key for toolshim (or the upstream's own is sent)
        elif lowered not in HOP_BY_HOP:
            out[key] = value
        elif lowered == "connection":
            # Headers the client's Connection header names are hop-by-hop too (RFC 9110 7.6.1).
            named.update(h.strip().lower() for h in value.split(","))
    if named:
        out = {k: v for k, v in out.items() if k.lower() not in named}
    if upstream.api_key:
        out["authorization"] = f"Bearer {upstream.api_key}"
    elif keep_client_auth and client_auth is not None:
        out["authorization"] = client_auth
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
    # Built by hand with a pre-parsed URL: client.build_request would re-parse it and
    # merge base URL and headers again on every request.
    if upstream.basic_auth is not None and not any(k.lower() == "authorization"
                                                   for k in headers):
        headers = {**headers, "authorization": upstream.basic_auth}
    try:
        if upstream.wire is not None:
            response = await upstream.wire.send(method, upstream.url(path), headers, content,
                                                upstream.timeouts)
        else:
            request = httpx.Request(method, upstream.url(path), content=content,
                                    headers=headers, extensions={"timeout": upstream.timeouts})
            if upstream.transport is not None:
                response = await upstream.transport.handle_async_request(request)
            else:  # a client built elsewhere (tests hand in their own)
                response = await upstream.client.send(request, stream=True)
    except httpx.TransportError as exc:
        raise transport_error(exc, upstream.root) from None
    upstream.last_answer = time.monotonic()
    return response


async def iter_bytes(response: httpx.Response, root: str) -> AsyncIterator[bytes]:
    """The body as it arrives; a broken transport raises ApiError after what arrived."""
    try:
        async for piece in body_stream(response):
            yield piece
    except httpx.TransportError as exc:
        raise transport_error(exc, root) from None


async def read_whole(response: httpx.Response, root: str) -> bytes:
    """The whole body (an error answer, a non-streamed one); a broken transport is ApiError."""
    try:
        return await response.aread()
    except httpx.TransportError as exc:
        raise transport_error(exc, root) from None


def body_stream(response: httpx.Response) -> httpx.AsyncByteStream:
    """The response's raw body stream, iterated directly: `aiter_raw` enters a context
    manager and a chunker for every piece (a layer per chunk on a 64-chunk stream).
    Nothing here decodes a body: the chat paths ask for `identity`, and passthrough
    relays the bytes as they came, with their content-encoding header."""
    stream = response.stream
    assert isinstance(stream, httpx.AsyncByteStream), "upstream bodies are async streams"
    return stream


def transport_error(exc: httpx.TransportError, root: str) -> ApiError:
    """Map a transport failure to 502/504 with a message that names no secrets.

    Only a real timeout is a 504; a refused or reset connection is 'unavailable'.
    A certificate the upstream's TLS showed and we do not trust says so: it is the
    one failure a person fixes with a setting, not by starting a backend."""
    if isinstance(exc, httpx.TimeoutException):
        return ApiError(504, f"upstream {redact_url(root)} timed out", type_="timeout_error",
                        code="upstream_timeout")
    untrusted = _certificate_failure(exc)
    if untrusted is not None:
        return ApiError(502, f"upstream {redact_url(root)}: certificate verify failed "
                             f"({untrusted}): its TLS certificate is not trusted; give its CA "
                             f"with --ca-bundle (TOOLSHIM_CA_BUNDLE) or SSL_CERT_FILE",
                        type_="api_error", code="upstream_certificate_untrusted")
    if isinstance(exc, httpx.ProxyError):
        return ApiError(502, f"upstream {redact_url(root)}: the HTTP proxy refused the "
                             f"request ({str(exc)[:200]})",
                        type_="api_error", code="upstream_unavailable")
    return ApiError(502, f"upstream {redact_url(root)} is unreachable or closed the connection",
                    type_="api_error", code="upstream_unavailable")


def _certificate_failure(exc: BaseException) -> str | None:
    """OpenSSL's reason when a certificate check is somewhere in the causes (httpx and
    httpcore each wrap it once; wire.py once), else None."""
    seen = 0
    cause: BaseException | None = exc
    while cause is not None and seen < 8:
        if isinstance(cause, ssl.SSLCertVerificationError):
            return str(cause.verify_message or cause.reason or "unknown reason")
        cause, seen = cause.__cause__ or cause.__context__, seen + 1
    return None


_LISTING_TIMEOUT = 5.0
_MAX_LISTED = 10_000
"""models kept from one upstream's listing: every listed name is kept for the process's
life (routing), so a backend cannot grow that table past this per listing."""


async def fetch_listing(upstream: Upstream) -> list[dict[str, Any]] | None:
    """An upstream's /v1/models `data`; Ollama says `"data": null` when it has none.

    Sent as the chat path sends (`send`): a name the listing lacks makes toolshim list
    again, so this runs often, and httpx's own `client.get` leaves each response in a
    reference cycle (its bound stream holds the response) for the collector."""
    headers = {"accept": "application/json", "accept-encoding": "identity"}
    if upstream.api_key:
        headers["authorization"] = f"Bearer {upstream.api_key}"
    try:
        async with asyncio.timeout(_LISTING_TIMEOUT):
            response = await send(upstream, "GET", "/v1/models", content=None, headers=headers)
            try:
                body = await read_whole(response, upstream.root)
            finally:
                await response.aclose()
    except (ApiError, TimeoutError, httpx.HTTPError):  # this upstream has no listing now
        return None
    if response.status_code != 200:
        return None
    try:
        data = orjson.loads(body).get("data")
    except (orjson.JSONDecodeError, AttributeError):
        return None
    if not isinstance(data, list):
        return []
    entries = (_plain_id(e) for e in data[:_MAX_LISTED] if isinstance(e, dict))
    return [e for e in entries if _askable(e.get("id"))]


def _plain_id(entry: dict[str, Any]) -> dict[str, Any]:
    """Google's OpenAI-compatible endpoint lists `models/gemini-2.5-flash`; its chat
    endpoint and every client name the model `gemini-2.5-flash`."""
    model_id = entry.get("id")
    if isinstance(model_id, str) and model_id.startswith("models/"):
        return {**entry, "id": model_id.removeprefix("models/")}
    return entry


def _askable(name: object) -> bool:
    """A name a client may ask for (errors.MAX_MODEL_NAME; `m` finds Ollama's `m:latest`):
    any other is not worth a table entry."""
    return isinstance(name, str) and 0 < len(name.removesuffix(":latest")) <= MAX_MODEL_NAME
