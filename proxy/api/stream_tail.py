"""How every dialect's stream is written to its end, once for all of them.

A stream writes each batch of chunks as its dialect frames it, then the
dialect's ending. A failure once the stream started cannot change the status
any more: an `ApiError` becomes the dialect's error event (its text masked, an
upstream may quote the credentials it got), a bug of ours is logged once and
becomes the same event as a 500. Whatever the ending, what the stream holds
is closed, shielded (also when the client left).
Must not: know any dialect's frames (the `Framing` does).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Protocol

from proxy.asgi.scopes import cancel_scope
from proxy.errors import ApiError
from proxy.flow.exchange import Exchange

INTERNAL = ApiError(500, "internal error in toolshim", code="internal_error")
"""what a client is told of a bug of ours mid-stream (the log has the rest)."""


class Framing(Protocol):
    """A dialect's bytes for the pieces of a stream."""

    def piece(self, batch: Any) -> bytes:
        """One batch as the client gets it; b"" writes nothing."""

    def end(self) -> bytes:
        """The ending of a stream that ran its course."""

    def failed(self, error: ApiError) -> bytes:
        """The ending of a stream that failed (`error` settled and masked)."""


async def stream_body(ex: Exchange, batches: AsyncIterator[Any], framing: Framing, what: str,
                      close: Callable[[], Awaitable[None]], *, shields_itself: bool = False,
                      ) -> AsyncIterator[bytes]:
    """The stream's bytes: `batches` framed, then the ending; `close` runs at the end,
    shielded (`shields_itself`: it does so on its own, as `ChatRun.aclose` does, and a
    second cancel scope per stream would be spent for nothing). `what` names the stream
    in the log."""
    piece = framing.piece
    try:
        async for batch in batches:
            body = piece(batch)
            if body:
                yield body
        yield framing.end()
    except ApiError as exc:
        yield framing.failed(exc.settled().masked(ex.redactor().mask))
    except Exception:
        ex.svc.telemetry.log.exception("%s stream failed inside toolshim", what, extra={
            "record": {"request_id": ex.record.request_id}})
        yield framing.failed(INTERNAL)
    finally:
        if shields_itself:
            await close()
        else:
            with cancel_scope(shield=True):
                await close()
