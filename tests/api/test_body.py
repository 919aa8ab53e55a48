"""read_body: the whole body in pieces, refused past the limit, 499/408 when it never ends."""

from __future__ import annotations

from typing import Any

import pytest
from starlette.requests import Request

from proxy.api.body import read_body
from proxy.asgi.client_timeouts import TIMED_OUT
from proxy.errors import ApiError


def _request(messages: list[dict[str, Any]], headers: list[tuple[bytes, bytes]] | None = None,
             state: dict[str, Any] | None = None) -> Request:
    pending = list(messages)

    async def receive() -> dict[str, Any]:
        assert pending, "read past the end of the body"
        return pending.pop(0)

    scope = {"type": "http", "method": "POST", "path": "/v1/chat/completions",
             "headers": headers or [], "state": state or {}}
    return Request(scope, receive)


def _piece(body: bytes, more: bool) -> dict[str, Any]:
    return {"type": "http.request", "body": body, "more_body": more}


async def test_a_body_in_pieces_is_joined() -> None:
    request = _request([_piece(b'{"a":', True), _piece(b"", True), _piece(b" 1}", False)])
    assert await read_body(request, 100) == b'{"a": 1}'


async def test_a_body_in_one_message_is_read_once() -> None:
    assert await read_body(_request([_piece(b"{}", False)]), 100) == b"{}"


async def test_a_declared_length_over_the_limit_is_refused_before_reading() -> None:
    request = _request([], headers=[(b"content-length", b"101")])
    with pytest.raises(ApiError) as info:
        await read_body(request, 100)
    assert (info.value.status, info.value.code) == (413, "request_too_large")


async def test_a_chunked_body_is_refused_as_soon_as_it_passes_the_limit() -> None:
    # No Content-Length: refused at the piece that crosses the limit, the rest unread.
    request = _request([_piece(b"x" * 60, True), _piece(b"x" * 60, True)])
    with pytest.raises(ApiError) as info:
        await read_body(request, 100)
    assert (info.value.status, info.value.code) == (413, "request_too_large")


async def test_a_client_that_leaves_mid_body_is_499() -> None:
    request = _request([_piece(b"{", True), {"type": "http.disconnect"}])
    with pytest.raises(ApiError) as info:
        await read_body(request, 100)
    assert (info.value.status, info.value.code) == (499, "client_closed")


async def test_a_body_past_its_deadline_is_408_and_closes_the_connection() -> None:
    # The edge marks the request and reports a disconnect when the deadline passes.
    request = _request([_piece(b"{", True), {"type": "http.disconnect"}],
                       state={TIMED_OUT: True})
    with pytest.raises(ApiError) as info:
        await read_body(request, 100)
    assert (info.value.status, info.value.code) == (408, "client_timeout")
    assert info.value.headers == {"connection": "close"}
