"""unless_client_leaves: the work's result, or None when the client hangs up first."""

from __future__ import annotations

import asyncio
import gc
import weakref

import anyio
import pytest
from starlette.types import Message, Receive

from proxy.asgi.disconnect import WATCH_AFTER, unless_client_leaves
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


async def test_a_client_that_leaves_at_once_is_noticed_once_the_watch_starts() -> None:
    # The watcher starts WATCH_AFTER into the work; a disconnect already waiting
    # in the server's queue then ends the work right away.
    loop = asyncio.get_running_loop()
    ended_at: list[float] = []

    async def work() -> str:
        try:
            await asyncio.sleep(10)
            return "too late"
        finally:
            ended_at.append(loop.time())

    started = loop.time()
    assert await unless_client_leaves(receiver(_set_event()), work()) is None
    assert WATCH_AFTER <= ended_at[0] - started < WATCH_AFTER + 1.0


async def test_work_done_before_the_watch_starts_leaves_no_task_behind() -> None:
    listened: list[str] = []

    async def receive() -> Message:
        listened.append("receive")
        return {"type": "http.disconnect"}

    async def work() -> str:
        return "answer"

    before = len(asyncio.all_tasks())
    assert await unless_client_leaves(receive, work()) == "answer"
    await asyncio.sleep(WATCH_AFTER * 2)
    assert listened == [] and len(asyncio.all_tasks()) == before


def _set_event() -> asyncio.Event:
    event = asyncio.Event()
    event.set()
    return event


async def test_a_finished_watch_keeps_nothing_of_the_request_alive() -> None:
    # The receive callable holds the server's request state: no reference cycle through
    # the watcher may keep it after the work (freed only by a full collection, that was
    # +10 MB at 200 open streams).
    class Connection:  # stands for uvicorn's per-request cycle
        async def receive(self) -> Message:
            await asyncio.sleep(10)
            return {"type": "http.disconnect"}

    async def work() -> str:
        await asyncio.sleep(WATCH_AFTER * 2)  # long enough for the watcher to start
        return "answer"

    connection = Connection()
    alive = weakref.ref(connection)
    gc.disable()
    try:
        assert await unless_client_leaves(connection.receive, work()) == "answer"
        del connection
        for _ in range(3):  # the cancelled watcher task ends
            await asyncio.sleep(0)
        assert alive() is None
    finally:
        gc.enable()


async def test_a_stream_s_watch_from_the_start_notices_a_client_gone_at_once() -> None:
    loop = asyncio.get_running_loop()

    async def work() -> str:
        await asyncio.sleep(10)
        return "too late"

    started = loop.time()
    assert await unless_client_leaves(receiver(_set_event()), work(), watch_after=0) is None
    assert loop.time() - started < WATCH_AFTER
