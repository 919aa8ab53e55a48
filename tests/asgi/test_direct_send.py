"""SseWriter: a stream's batches written outside any task, and sends that have to wait.

`send` here is a plain ASGI send (an async function), as uvicorn's is: it returns
without waiting while the client's socket takes the bytes, and waits for it to drain
otherwise. What waited must then finish in the task (`flush`), exactly as `await
send(...)` would have: the message sent once, in order, exceptions and cancellation
passed into the send so its own clean-up runs.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from proxy.api.chat.answer import frames
from proxy.asgi.direct_send import SseWriter
from proxy.sse import SseFrames


async def test_a_send_that_does_not_wait_is_written_at_once_framed_as_the_task_frames_it(
) -> None:
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    writer = SseWriter(send, frames)
    assert writer.first_at is None
    assert writer.write([b'{"a":1}', {"b": 2}, SseFrames(b'data: {"c":3}\n\n')])
    assert sent == [{"type": "http.response.body", "more_body": True,
                     "body": b'data: {"a":1}\n\ndata: {"b":2}\n\ndata: {"c":3}\n\n'}]
    assert writer.first_at is not None
    await writer.flush()  # nothing pending: nothing more
    assert len(sent) == 1


async def test_a_send_that_waits_is_finished_by_flush_once_and_in_order() -> None:
    sent: list[bytes] = []
    socket_free = asyncio.Event()
    waits = 0

    async def send(message: dict[str, Any]) -> None:
        nonlocal waits
        while not socket_free.is_set():  # uvicorn: `await self.flow.drain()`
            waits += 1
            await socket_free.wait()
        sent.append(message["body"])

    writer = SseWriter(send, frames)
    assert not writer.write([b'{"n":1}'])  # left pending: nothing written yet
    assert sent == []
    flushing = asyncio.create_task(writer.flush())
    for _ in range(3):
        await asyncio.sleep(0)
    assert not flushing.done() and sent == []
    socket_free.set()
    await flushing
    assert sent == [b'data: {"n":1}\n\n']
    assert waits == 1
    assert writer.write([b'{"n":2}'])  # the socket takes bytes again: at once
    assert sent[-1] == b'data: {"n":2}\n\n'


async def test_a_send_that_waits_several_times_is_followed_to_its_end() -> None:
    steps: list[str] = []

    async def send(message: dict[str, Any]) -> None:
        for step in ("drain", "sleep", "drain again"):
            steps.append(step)
            if step == "sleep":
                await asyncio.sleep(0)  # a bare yield to the loop, not a future
            else:
                await asyncio.sleep(0.001)
        steps.append("written")

    writer = SseWriter(send, frames)
    assert not writer.write([b"{}"])
    await writer.flush()
    assert steps == ["drain", "sleep", "drain again", "written"]


async def test_a_cancelled_flush_runs_the_sends_clean_up_and_stays_cancelled() -> None:
    cleaned: list[bool] = []

    async def send(message: dict[str, Any]) -> None:
        try:
            await asyncio.Event().wait()  # a client that never reads again
        finally:
            cleaned.append(True)

    writer = SseWriter(send, frames)
    assert not writer.write([b"{}"])
    flushing = asyncio.create_task(writer.flush())
    await asyncio.sleep(0)
    flushing.cancel()
    with pytest.raises(asyncio.CancelledError):
        await flushing
    assert cleaned == [True]


async def test_what_the_send_waited_on_failing_is_raised_inside_the_send() -> None:
    handled: list[str] = []

    async def send(message: dict[str, Any]) -> None:
        waiting = asyncio.get_running_loop().create_future()
        asyncio.get_running_loop().call_later(0.001, waiting.set_exception, OSError("reset"))
        try:
            await waiting
        except OSError as exc:
            handled.append(str(exc))
            raise

    writer = SseWriter(send, frames)
    assert not writer.write([b"{}"])
    with pytest.raises(OSError, match="reset"):
        await writer.flush()
    assert handled == ["reset"]


async def test_a_batch_that_encodes_to_nothing_writes_nothing() -> None:
    # A Responses writer's batch can make no event (a chunk with nothing to say).
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    writer = SseWriter(send, lambda batch: b"")
    assert writer.write([b"{}"])
    assert sent == [] and writer.pending is None
