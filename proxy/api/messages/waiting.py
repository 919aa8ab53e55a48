"""A Messages stream whose backend is silent before its answer: `ping` until it answers.

Ollama loads a model before it sends its answer's headers, which can take
minutes on a cold GPU box; the Messages API's clients expect `ping` events while
nothing else comes. The route runs the chat flow in a task of its own; if it
has not answered within `PING_AFTER` seconds, the stream starts at once
(`message_start`, then a `ping` every `PING_EVERY` seconds) and continues as any
Messages stream once the flow answers. An answer in time keeps its HTTP status
(a 404 or a 429 stays an HTTP error); an error after the stream started is the
API's `error` event. The `x-toolshim-*` headers of a stream that started early
are not known when its headers leave: the log line and metrics still have them.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

from starlette.types import Send

from proxy.api.chat_output import ChatOutput, output_of
from proxy.api.messages.errors import error_type
from proxy.api.messages.events import PING_FRAME, MessageBuilder, frames
from proxy.asgi.direct_send import SseWriter
from proxy.asgi.responses import SseResponse
from proxy.asgi.scopes import cancel_scope
from proxy.errors import ApiError
from proxy.flow.exchange import Exchange
from proxy.flow.run import ChatRun
from proxy.flow.translate import ChunkOut

PING_AFTER = 3.0
"""seconds the flow may take to answer before the stream starts with pings."""
PING_EVERY = 5.0

EventsFn = Callable[[Exchange, MessageBuilder, ChatOutput, SseWriter | None],
                    AsyncIterator[bytes]]


async def answered_in_time(flow: asyncio.Task[ChatRun]) -> bool:
    """Whether the flow answered (or failed) within PING_AFTER seconds.

    One future, a timer and a done callback: what asyncio.wait does, without its
    sets and generator (it runs for every stream)."""
    loop = asyncio.get_running_loop()
    waiter: asyncio.Future[bool] = loop.create_future()

    def settle(answered: bool) -> None:
        if not waiter.done():
            waiter.set_result(answered)

    timer = loop.call_later(PING_AFTER, settle, False)
    flow.add_done_callback(lambda _: settle(True))
    try:
        return await waiter
    finally:
        timer.cancel()


async def drop(flow: asyncio.Task[ChatRun]) -> None:
    """Cancel the flow, or close the run it made: it holds an upstream and a slot."""
    with cancel_scope(shield=True):
        if not flow.done():
            flow.cancel()
        try:
            run = await flow
        except BaseException:  # noqa: BLE001 - cancelled or failed: nothing left to close
            return
        await run.aclose()


class WaitingStream(SseResponse):
    """The stream of a flow that has not answered yet (see the module)."""

    def __init__(self, ex: Exchange, builder: MessageBuilder, flow: asyncio.Task[ChatRun],
                 events: EventsFn) -> None:
        super().__init__(None, {"request-id": ex.record.request_id}, on_close=self._close)
        self.ex, self.builder, self.flow, self.events = ex, builder, flow, events
        self.output: ChatOutput | None = None

    def _body(self, send: Send) -> AsyncIterator[bytes]:
        return self._pings_then_answer(send)

    async def _pings_then_answer(self, send: Send) -> AsyncIterator[bytes]:
        ex, builder = self.ex, self.builder
        yield builder.opening() + PING_FRAME
        while not (await asyncio.wait({self.flow}, timeout=PING_EVERY))[0]:
            yield PING_FRAME
        try:
            self.output = output_of(self.flow.result())
        except ApiError as exc:
            error = exc.settled().masked(ex.redactor().mask)
            ex.finish(error.status, error.message)
            yield frames(builder.fail(error_type(error.status), error.message))
            return
        except Exception:
            ex.svc.telemetry.log.exception("messages request failed inside toolshim", extra={
                "record": {"request_id": ex.record.request_id}})
            ex.finish(500, "internal error in toolshim")
            yield frames(builder.fail("api_error", "internal error in toolshim"))
            return
        async for piece in self.events(ex, builder, self.output,
                                       SseWriter.over(send, self._encode)):
            yield piece

    def _encode(self, batch: list[ChunkOut]) -> bytes:
        events = self.builder.feed_batch(batch)
        return frames(events) if events else b""

    async def _close(self) -> None:
        if self.output is not None:
            await self.output.close()
            return
        await drop(self.flow)
        self.ex.finish(*self.ex.cancelled())  # the client left (or the drain cut) first
