"""Sending a chat request so that backend quirks never reach the relay.

The I/O half of quirks.py, at the upstream edge: the response handed on is
always what a well-behaved OpenAI backend would have sent. A request the
profile says must not stream with tools is sent whole and its answer turned
into the event stream (sse_frames.py); a streamed request with tools that gets
an empty 200 stream is resent whole at once (a stream lacking the usage chunk
the client asked for gets one from the translator: sse_frames.UsageCounter).
On a 5xx, `retry_after` says whether a rewrite (quirks.quirk_for_error) is
worth one more attempt. What worked is reported as
observations by `confirmed`, so learning.py records it under `learned:`.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping

import httpx
import orjson

from proxy.backends.quirks import EMPTY_STREAM, Quirk, is_empty_stream, quirk_for_error
from proxy.backends.sse_frames import completion_to_sse, wants_usage
from proxy.backends.upstream import Upstream, body_stream, read_whole, send, transport_error
from proxy.errors import ApiError
from proxy.transforms.request.backend_quirks import without_stream
from proxy.types import ChatRequest, Observation, Profile

MAX_QUIRK_RETRIES = 3
"""one per kind of quirk: stream, required tool_choice, null content."""

_PATH = "/v1/chat/completions"
_DEAD_CONNECTION_S = 1.0
"""a failure faster than this on the resend is the dead pooled connection."""


Post = Callable[[ChatRequest, Profile], Awaitable[httpx.Response]]
"""Sends one body upstream under the sender's profile as it stands: plain /v1 by
default, or another backend API's edge (Ollama's /api/chat, flow/send.py)
that answers in the same OpenAI shapes. The profile is passed, not looked up on
the sender, so a caller's function need not refer to the sender that holds it (a
cycle that left each request's objects to the cyclic collector)."""


class AdaptingSender:
    """One client request's sends; `profile` grows the workarounds found so far."""

    def __init__(self, profile: Profile, client_request: ChatRequest,
                 post: Post | None = None) -> None:
        self.profile = profile
        self._post = post
        self.found: list[Quirk] = []
        self._stream = bool(client_request.get("stream"))
        self._usage = wants_usage(client_request)

    async def send(self, upstream: Upstream, body: ChatRequest,
                   headers: Mapping[str, str]) -> httpx.Response:
        """POST body; the answer is a stream when the client asked for one."""

        def post(sent: ChatRequest) -> Awaitable[httpx.Response]:
            return self._post(sent, self.profile) if self._post is not None \
                else _post(upstream, sent, headers)

        response = await post(body)
        if self._stream and not body.get("stream"):
            return await _as_stream(response, self._usage, upstream.root)
        if not body.get("stream") or response.status_code >= 400 or not body.get("tools") \
                or "event-stream" not in response.headers.get("content-type", ""):
            return response  # nothing to watch: the bytes go to the relay untouched
        # A streamed request with tools: the first bytes say whether the stream is empty.
        pieces = aiter(body_stream(response))
        first = await _first_bytes(pieces, upstream.root)
        if is_empty_stream(first):
            await response.aclose()
            self._learn(EMPTY_STREAM)
            retry = await _post_again(post, without_stream(body))
            return await _as_stream(retry, self._usage, upstream.root)
        return httpx.Response(response.status_code, headers=response.headers,
                              stream=_Resumed(first or b"", pieces, response))

    def retry_after(self, status: int, raw: bytes, sent: ChatRequest) -> bool:
        """Whether a rewrite may cure this error answer; the profile then has it on."""
        quirk = quirk_for_error(status, raw, sent, self.profile)
        if quirk is None:
            return False
        self._learn(quirk)
        return True

    def confirmed(self) -> list[Observation]:
        """The workarounds this request needed, now that one got an answer."""
        return [q.observation(self.profile.model) for q in self.found]

    def _learn(self, quirk: Quirk) -> None:
        self.profile = quirk.apply(self.profile)
        self.found.append(quirk)


async def _post(upstream: Upstream, body: ChatRequest,
                headers: Mapping[str, str]) -> httpx.Response:
    return await send(upstream, "POST", _PATH, content=orjson.dumps(body), headers=headers)


async def _post_again(post: Callable[[ChatRequest], Awaitable[httpx.Response]],
                      body: ChatRequest) -> httpx.Response:
    """POST right after a broken stream: its pooled connection may be dead.

    llama-cpp-python keeps the connection of an empty stream alive on paper but
    closes it, so the next request on it fails at once (reset or disconnected,
    which the transport may even call a timeout); a slow failure is not that.
    """
    started = time.monotonic()
    try:
        return await post(body)
    except ApiError:
        if time.monotonic() - started > _DEAD_CONNECTION_S:
            raise
        return await post(body)


async def _first_bytes(pieces: AsyncIterator[bytes], root: str) -> bytes | None:
    """Bytes up to the first non-blank piece; None when the stream ended first."""
    seen = b""
    try:
        async for piece in pieces:
            seen += piece
            if seen.strip():
                return seen
    except httpx.TransportError as exc:
        # llama-cpp-python ends its empty stream without the final chunk of the
        # chunked encoding, which the transport reports as a broken connection.
        if seen.strip():
            raise transport_error(exc, root) from None
    return None


async def _as_stream(response: httpx.Response, include_usage: bool,
                     root: str) -> httpx.Response:
    """A whole completion as the event stream of the same answer (errors as they are)."""
    if response.status_code >= 400:
        return response
    try:
        raw = await read_whole(response, root)
    finally:
        await response.aclose()
    try:
        completion = orjson.loads(raw)
    except orjson.JSONDecodeError:
        completion = None
    if not isinstance(completion, dict) or not isinstance(completion.get("choices"), list):
        # Not a completion: the relay's own check answers upstream_invalid.
        return _unread(response, raw, "application/json")
    return _unread(response, completion_to_sse(completion, include_usage), "text/event-stream")


def _unread(original: httpx.Response, body: bytes, content_type: str) -> httpx.Response:
    """A response whose body is still to be streamed, as the relay expects one."""
    return httpx.Response(original.status_code, headers={"content-type": content_type},
                          stream=httpx.ByteStream(body))


class _Resumed(httpx.AsyncByteStream):
    """The first bytes (already read), then the rest of the backend's body, as it comes.

    Its own iterator, handing out the transport's `__anext__` awaitables as they are:
    no generator frame resumed per piece of a long stream. Transport errors pass
    through as they are, for the reader to map; closing it closes the backend's response.
    """

    def __init__(self, first: bytes, rest: AsyncIterator[bytes],
                 original: httpx.Response) -> None:
        self._first = first
        self._rest = rest
        self._original = original

    def __aiter__(self) -> _Resumed:
        return self

    def __anext__(self) -> Awaitable[bytes]:
        if self._first:
            first, self._first = self._first, b""
            return _ready(first)
        return self._rest.__anext__()

    async def wait_pushed(self, push: Callable[[bytes], bool]) -> None:
        """The backend body's `wait_pushed` (wire.py) once the first bytes are read."""
        wait = getattr(self._original.stream, "wait_pushed", None)
        if not self._first and wait is not None:
            await wait(push)

    async def aclose(self) -> None:
        await self._original.aclose()


async def _ready(value: bytes) -> bytes:
    return value
