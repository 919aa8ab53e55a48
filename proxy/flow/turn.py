"""What a turn is to the run that reads it: the `Turn` protocol, and `OpenTurn`.

Owns the seam between `run.ChatRun` and the turns it drives: one upstream
call's answer (`run.UpstreamTurn`), the first turn with its refused calls
corrected (`correct.CorrectingTurn`), and the server-tool loop's turns read
as one (`server_loop.LoopTurn`). `DirectWriter` is where a turn may write a
stream's batches from the upstream's read callback.

Must not: hold behaviour; the turns and the run own theirs.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Protocol

from proxy.flow.translate import ChunkOut
from proxy.transforms.response import ResponsePipeline
from proxy.types import ChatRequest


class DirectWriter(Protocol):
    """Where a stream's batches can be written without a task (the client route's).

    `write` runs in the upstream's read callback: True once the batch is written,
    False if it is left pending (the client's socket is full); `flush` then
    finishes it, in the task. `first_at` is when the first batch was written."""

    first_at: float | None

    def write(self, batch: list[ChunkOut]) -> bool: ...

    async def flush(self) -> None: ...


class Turn(Protocol):
    """An answer as batches of chunks, read once by `ChatRun`, closed by `aclose()`."""

    @property
    def pipeline(self) -> ResponsePipeline:
        """the response stages of the answer the client gets (its calls, observations)."""
        ...

    @property
    def own_s(self) -> float:
        """the proxy's own time on the turn so far (translating), not the upstream's."""
        ...

    def batches(self, direct: DirectWriter | None = None) -> AsyncIterator[list[ChunkOut]]:
        """Chunks as they come; raises the ending's ApiError after everything before it.
        `direct`: a turn may write batches there instead of yielding them."""
        ...

    def verbatim(self) -> bytes | None:
        """After `batches()`: the upstream's whole answer as it came, if the chunks are
        exactly it, else None."""
        ...

    def close_now(self) -> bool:
        """`aclose()` done here when it needs no wait; False: await `aclose()`."""
        ...

    async def aclose(self) -> None:
        """Close whatever upstream calls the turn holds; safe twice."""
        ...


OpenTurn = Callable[[ChatRequest], Awaitable[Turn]]
"""Opens one further upstream turn for a request (chat.open_turn, bound to its exchange,
profile and upstream)."""
