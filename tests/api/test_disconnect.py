"""unless_client_leaves: the work's result, or None when the client hangs up first."""

from __future__ import annotations

import asyncio

import anyio
import pytest
from starlette.types import Message, Receive

from proxy.api.disconnect import unless_client_leaves
from proxy.errors import ApiError


def receiver(leave: asyncio.Event) -> Receive:
    async def receive() -> Message:
        await leave.wait()
        return {"type": "http.disconnect"}
    return receive


async def test_the_work_s_result_when_the_client_stays() -> None:
    async def work() -> str:
        await asyncio.sleep(0)
        return "answer"
    assert await unless_client_leaves(receiver(asyncio.Event()), work()) == "answer"


async def test_a_client_that_leaves_cancels_the_work_but_not_its_shielded_cleanup() -> None:
    leave, steps = asyncio.Event(), []

    async def work() -> str:
        try:
            leave.set()
            await asyncio.sleep(10)
            return "too late"
        finally:
            with anyio.CancelScope(shield=True):
                await asyncio.sleep(0.01)  # closing the upstream call
                steps.append("closed")

    assert await unless_client_leaves(receiver(leave), work()) is None
    assert steps == ["closed"]


async def test_the_work_s_error_propagates_as_it_is() -> None:
    async def work() -> str:
        raise ApiError(404, "model not found")
    with pytest.raises(ApiError, match="model not found"):
        await unless_client_leaves(receiver(asyncio.Event()), work())
