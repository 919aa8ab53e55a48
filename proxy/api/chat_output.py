"""The one seam a client dialect talks to the chat flow through.

A dialect (Responses, Messages, ...) translates its body to a chat request,
hands it to `chat_chunks`, and translates the chunks it gets back; every policy
of chat (profile, tool policy, retries, checks, recovery, headers, metrics, the
log line, limits) applies because it is the same flow.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass

from proxy.api.failures import client_left
from proxy.asgi.direct_send import SseWriter
from proxy.asgi.disconnect import unless_client_leaves
from proxy.flow.chat import run_chat
from proxy.flow.exchange import Exchange
from proxy.flow.run import ChatRun
from proxy.flow.translate import ChunkOut, as_chunks
from proxy.types import ChatRequest, Chunk


@dataclass
class ChatOutput:
    """What the chat flow hands its client: its headers, then its chunks as they come.

    `batches()` yields the chunks of one piece of the answer together (one list per
    upstream read), so the client gets one write per piece, as a chat stream does;
    with a `direct` writer, pieces that arrive while the flow waits go to it instead,
    from the upstream's read callback (`ChatRun.batches`).
    """

    headers: dict[str, str]
    run: ChatRun
    close: Callable[[], Awaitable[None]]
    """frees what the flow holds (upstream response, limiter slot) even if `batches`
    is never started, e.g. when the client leaves before the body begins."""

    def batches(self, direct: SseWriter | None = None) -> AsyncGenerator[list[Chunk], None]:
        return _run_batches(self.run, direct)

    def raw_batches(self, direct: SseWriter | None = None,
                    ) -> AsyncGenerator[list[ChunkOut], None]:
        """`batches` as the flow hands them: a fast-path read stays the upstream's bytes,
        for a reader that can take its texts without decoding every chunk."""
        return _raw_batches(self.run, direct)


async def chat_chunks(ex: Exchange, chat: ChatRequest) -> ChatOutput:
    """Run `chat` through the chat flow for `ex` and hand back its chunks.

    Errors before the answer starts raise ApiError (the chat envelope and
    status); a failure mid-stream raises ApiError from the batch iterator,
    after every chunk received before it.
    """
    run = await unless_client_leaves(ex.request.receive, run_chat(ex, chat))
    if run is None:
        raise client_left()
    return output_of(run)


def output_of(run: ChatRun) -> ChatOutput:
    """A run's output, once the flow answered (`chat_chunks`, or a door that ran
    `run_chat` in a task of its own to keep its client company meanwhile)."""
    headers = {k: v for k, v in run.headers().items() if k.startswith("x-toolshim-")}
    return ChatOutput(headers, run, run.aclose)


async def _raw_batches(run: ChatRun, direct: SseWriter | None
                       ) -> AsyncGenerator[list[ChunkOut], None]:
    try:
        async for batch in run.batches(direct):
            yield batch
    finally:
        await run.aclose()  # shielded inside; accounts the request once


async def _run_batches(run: ChatRun, direct: SseWriter | None,
                       ) -> AsyncGenerator[list[Chunk], None]:
    try:
        async for batch in run.batches(direct):
            # The fast path hands chunks over as the upstream's JSON bytes.
            yield as_chunks(batch)  # a keep-alive becomes an empty batch
    finally:
        await run.aclose()  # shielded inside; accounts the request once
