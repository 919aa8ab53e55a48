"""Limiter: the bound, the FIFO hand-over, the queue bound and the wait timeout."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.errors import ApiError
from proxy.state.limits import Limiter

KEY = "http://up"


async def test_slots_are_taken_up_to_the_bound() -> None:
    limiter = Limiter(2, 10, 5.0)
    await limiter.acquire(KEY)
    await limiter.acquire(KEY)
    assert limiter.active(KEY) == 2
    waiter = asyncio.create_task(limiter.acquire(KEY))
    await asyncio.sleep(0.01)
    assert not waiter.done() and limiter.waiting(KEY) == 1
    await limiter.release(KEY)
    await asyncio.wait_for(waiter, 1)
    assert limiter.active(KEY) == 2 and limiter.waiting(KEY) == 0
    assert limiter.snapshot() == {KEY: (2, 0)}


async def test_freed_slots_go_to_the_oldest_waiter_first() -> None:
    limiter = Limiter(1, 10, 5.0)
    await limiter.acquire(KEY)
    order: list[int] = []

    async def wait(i: int) -> None:
        await limiter.acquire(KEY)
        order.append(i)

    tasks = [asyncio.create_task(wait(i)) for i in range(3)]
    await asyncio.sleep(0.01)
    for _ in range(3):
        await limiter.release(KEY)
        await asyncio.sleep(0.01)
    await asyncio.gather(*tasks)
    assert order == [0, 1, 2]


async def test_a_newcomer_does_not_overtake_the_queue() -> None:
    limiter = Limiter(1, 10, 5.0)
    await limiter.acquire(KEY)
    first = asyncio.create_task(limiter.acquire(KEY))
    await asyncio.sleep(0.01)
    await limiter.release(KEY)  # handed to `first`, not up for grabs
    late = asyncio.create_task(limiter.acquire(KEY))
    await asyncio.sleep(0.01)
    assert first.done() and not late.done()
    late.cancel()


async def test_past_the_queue_bound_is_429_with_retry_after() -> None:
    limiter = Limiter(1, 1, 5.0)
    await limiter.acquire(KEY)
    queued = asyncio.create_task(limiter.acquire(KEY))
    await asyncio.sleep(0.01)
    with pytest.raises(ApiError) as info:
        await limiter.acquire(KEY)
    assert info.value.status == 429
    assert info.value.headers["retry-after"] == "1"
    assert info.value.body()["error"]["type"] == "rate_limit_error"
    queued.cancel()


async def test_waiting_too_long_is_429_and_leaves_the_queue() -> None:
    limiter = Limiter(1, 5, 0.05)
    await limiter.acquire(KEY)
    with pytest.raises(ApiError) as info:
        await limiter.acquire(KEY)
    assert info.value.status == 429
    assert limiter.waiting(KEY) == 0 and limiter.active(KEY) == 1


async def test_a_cancelled_waiter_gives_up_its_place_without_losing_a_slot() -> None:
    limiter = Limiter(1, 5, 5.0)
    await limiter.acquire(KEY)
    gone = asyncio.create_task(limiter.acquire(KEY))
    stays = asyncio.create_task(limiter.acquire(KEY))
    await asyncio.sleep(0.01)
    gone.cancel()
    await asyncio.sleep(0.01)
    await limiter.release(KEY)
    await asyncio.wait_for(stays, 1)
    assert limiter.active(KEY) == 1 and limiter.waiting(KEY) == 0


async def test_upstreams_are_bounded_separately() -> None:
    limiter = Limiter(1, 0, 5.0)
    await limiter.acquire("a")
    await limiter.acquire("b")
    with pytest.raises(ApiError):
        await limiter.acquire("a")


@settings(max_examples=40, deadline=None)
@given(bound=st.integers(1, 4), holds=st.lists(st.integers(0, 3), min_size=1, max_size=12))
def test_accounting_never_exceeds_the_bound(bound: int, holds: list[int]) -> None:
    """Any mix of short and long holders: never more than `bound` at once; all get in."""

    async def run() -> None:
        limiter = Limiter(bound, 100, 5.0)
        peak = 0

        async def worker(ticks: int) -> None:
            nonlocal peak
            await limiter.acquire(KEY)
            peak = max(peak, limiter.active(KEY))
            for _ in range(ticks):
                await asyncio.sleep(0)
            await limiter.release(KEY)

        await asyncio.wait_for(asyncio.gather(*(worker(t) for t in holds)), 5)
        assert peak <= bound
        assert limiter.snapshot() == {KEY: (0, 0)}

    asyncio.run(run())
