"""The driver's pieces that need no server: one upstream call, closed once."""

from __future__ import annotations

import httpx

from proxy.backends.upstream import Upstream
from proxy.flow.run import UpstreamCall
from proxy.state.limits import Limiter


async def test_an_upstream_call_holds_one_slot_and_closes_once() -> None:
    limiter = Limiter(max_active=1, max_waiting=0, wait_timeout=1.0)
    async with httpx.AsyncClient() as client:
        upstream = Upstream("http://127.0.0.1:9", client)
        call = await UpstreamCall.open(limiter, upstream)
        call.response = httpx.Response(200, stream=httpx.ByteStream(b"data: [DONE]\n\n"))
        assert limiter.active(upstream.root) == 1
        await call.aclose()
        await call.aclose()  # the route's finally and its background task both call it
        assert limiter.active(upstream.root) == 0 and call.response.is_closed
        again = await UpstreamCall.open(limiter, upstream)  # the slot is free again
        await again.aclose()
        assert limiter.active(upstream.root) == 0


async def test_a_call_that_was_never_sent_still_frees_its_slot() -> None:
    limiter = Limiter(max_active=1, max_waiting=0, wait_timeout=1.0)
    async with httpx.AsyncClient() as client:
        upstream = Upstream("http://127.0.0.1:9", client)
        call = await UpstreamCall.open(limiter, upstream)
        await call.aclose()
        assert limiter.active(upstream.root) == 0
