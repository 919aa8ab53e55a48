"""cancel_scope() makes the scopes anyio.CancelScope() would, cancel and shield alike."""

from __future__ import annotations

import asyncio

import anyio

from proxy.asgi.scopes import cancel_scope


async def test_the_scope_is_anyios_own_and_cancels() -> None:
    scope = cancel_scope()
    assert type(scope) is type(anyio.CancelScope())
    with scope:
        scope.cancel()
        await asyncio.sleep(1)
    assert scope.cancelled_caught


async def test_a_shielded_scope_finishes_its_work_when_the_outer_one_is_cancelled() -> None:
    finished = []
    with anyio.CancelScope() as outer:
        outer.cancel()
        with cancel_scope(shield=True):
            await asyncio.sleep(0.01)
            finished.append(True)
        await asyncio.sleep(1)  # the outer cancel lands here
    assert finished == [True] and outer.cancelled_caught


async def test_a_deadline_is_kept() -> None:
    with cancel_scope(deadline=anyio.current_time() + 0.01) as scope:
        await asyncio.sleep(1)
    assert scope.cancelled_caught
