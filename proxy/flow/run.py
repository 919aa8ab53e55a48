"""The I/O driver: one upstream call read through a translator, and the run around it.

Owns: `UpstreamCall` (the open response and the limiter slot it holds,
released once by `aclose()`), `UpstreamTurn` (one upstream turn's answer as
batches of chunks, from `proxy.flow.translate`: a `turn.Turn`), and `ChatRun`
(what the client-facing route holds: headers known before the first byte, the
chunks, and the accounting at `aclose()`: call counts, observations, telemetry,
the request's status). Everything that decides what the chunks say lives in the
translator and the response stages; this module only loops, feeds, yields and
closes.

Must not: know the client's wire format (SSE or JSON: the routes encode), or
decide retries (chat.send_with_retry drives the pure policy in retry.py).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

import httpx

from proxy.asgi.scopes import cancel_scope
from proxy.backends import wire
from proxy.backends.sse_frames import UsageCounter
from proxy.backends.upstream import Upstream, body_stream, transport_error
from proxy.errors import ApiError
from proxy.flow.exchange import Exchange, toolshim_headers
from proxy.flow.fast_answer import FastCompletionTranslator
from proxy.flow.fast_stream import FastSseTranslator
from proxy.flow.translate import (
    ChunkOut,
    CompletionTranslator,
    SseTranslator,
    Translator,
)
from proxy.flow.turn import DirectWriter, Turn
from proxy.observability.tap import Tap
from proxy.state.limits import Limiter
from proxy.transforms.response import ResponsePipeline
from proxy.transforms.response.assembly import CallCounts
from proxy.types import JSON


class UpstreamCall:
    """One upstream call: its response and its limiter slot. `aclose()` is safe twice."""

    def __init__(self, limiter: Limiter, upstream: Upstream) -> None:
        self.limiter = limiter
        self.upstream = upstream
        self.response: httpx.Response | None = None
        self.closed = False

    @classmethod
    async def open(cls, limiter: Limiter, upstream: Upstream) -> UpstreamCall:
        """Wait for a slot on the upstream; the caller must `aclose()` the call."""
        await limiter.acquire(upstream.root)
        return cls(limiter, upstream)

    async def aclose(self) -> None:
        if self.closed:
            return
        self.closed = True
        try:
            if self.response is not None:
                await self.response.aclose()
        finally:
            await self.limiter.release(self.upstream.root)

    def close_now(self) -> bool:
        """`aclose()` done here when it needs no wait: the answer is our transport's
        and the slot this process's. False: await `aclose()` (it finishes the rest)."""
        if self.closed:
            return True
        if self.response is not None and not wire.close_now(self.response):
            return False
        if not self.limiter.release_now(self.upstream.root):
            return False  # aclose() gives the fleet's slot back (the answer is closed)
        self.closed = True
        return True


class UpstreamTurn:
    """One upstream turn: the call's answer, translated, as batches of chunks.

    `fast=False` (`--no-fast-paths`) reads it with the reference translators
    alone; `decode=False` lets an SSE answer take the relay fast path.
    `usage` (the client asked for `stream_options.include_usage`) makes the
    translator add the usage chunk a backend left out.
    `own_s` is the proxy's own time on the turn (translating), so the rest of
    the wall time can be counted as the upstream's.
    """

    def __init__(self, call: UpstreamCall, pipeline: ResponsePipeline, *, decode: bool,
                 fast: bool = True, tap: Tap | None = None, usage: JSON | None = None) -> None:
        self.call = call
        self.pipeline = pipeline
        self.decode = decode
        self.fast = fast
        self.tap = tap
        """the console's view of the raw answer (a bench capture), when asked for."""
        self.usage = usage
        """the request whose usage the client asked for on a stream, else None."""
        self.own_s = 0.0
        self._verbatim: bytes | None = None

    def verbatim(self) -> bytes | None:
        """The upstream's whole answer as it came, when the turn's chunks are exactly it
        (a whole JSON answer no stage changed), else None: a writer of whole answers
        may send these bytes instead of merging the chunks back into them."""
        return self._verbatim

    def _translator(self, response: httpx.Response) -> Translator:
        if "event-stream" in response.headers.get("content-type", ""):
            usage = UsageCounter(self.usage) if self.usage is not None else None
            if self.fast:
                return FastSseTranslator(self.pipeline, decode=self.decode, usage=usage)
            return SseTranslator(self.pipeline, usage=usage)
        # A non-stream answer, or a backend that ignored stream=true: the same chunks.
        return FastCompletionTranslator(self.pipeline) if self.fast \
            else CompletionTranslator(self.pipeline)

    async def batches(self, direct: DirectWriter | None = None,
                      ) -> AsyncIterator[list[ChunkOut]]:
        """Chunks as they arrive (one batch per upstream piece); raises the ending's ApiError.

        Everything received before a failure is yielded before it is raised.
        `direct`: while the turn waits for the upstream, pieces that arrive are
        translated and written to it from the upstream's read callback (`_Pushed`)
        instead of yielded: no task wakes per piece. What it cannot write at once, and
        the ending, come back here.
        """
        response = self.call.response
        assert response is not None, "a turn reads a call that was sent"
        translator = self._translator(response)
        stream = body_stream(response)
        wait_pushed = getattr(stream, "wait_pushed", None)  # the wire's bodies (wire.py)
        pushed = _Pushed(self, translator, direct, wait_pushed) \
            if direct is not None and wait_pushed is not None else None
        pieces = aiter(stream)
        try:
            while True:
                if pushed is not None:
                    await pushed.wait()
                    if translator.finished:
                        break
                piece = await anext(pieces, b"")
                if not piece:
                    break
                out = self.take(translator, piece)
                if out:
                    yield out
                if translator.finished:
                    break
        except httpx.TransportError as exc:  # the transport broke (reset, timeout)
            tail = translator.fail(transport_error(exc, self.call.upstream.root))
        except ApiError as exc:  # a translated (native) body broke
            tail = translator.fail(exc)
        else:
            t0 = time.perf_counter()
            tail = [] if translator.finished else translator.end()
            self.own_s += time.perf_counter() - t0
            self._verbatim = translator.verbatim
        if tail:
            yield tail
        if translator.failure is not None:
            raise translator.failure

    def take(self, translator: Translator, piece: bytes) -> list[ChunkOut]:
        """One upstream piece through the translator (timed as the proxy's own)."""
        if self.tap is not None:
            self.tap.piece(piece)
        t0 = time.perf_counter()
        out = translator.feed(piece)
        self.own_s += time.perf_counter() - t0
        return out

    async def aclose(self) -> None:
        await self.call.aclose()

    def close_now(self) -> bool:
        """`aclose()` here, if it needs no wait (`UpstreamCall.close_now`); else False."""
        return self.call.close_now()


class _Pushed:
    """A turn's answer translated and written from the upstream's read callback.

    Called with each read's body while the turn waits (`wait_pushed`); returns
    False, handing the answer back to the turn, once the translator is done, a
    write is left pending, or something raised: the turn raises it (`wait`),
    where the same piece read by the task would have raised."""

    __slots__ = ("direct", "error", "translator", "turn", "wait_pushed")

    def __init__(self, turn: UpstreamTurn, translator: Translator, direct: DirectWriter,
                 wait_pushed: Callable[[Callable[[bytes], bool]], Awaitable[None]]) -> None:
        self.turn = turn
        self.translator = translator
        self.direct = direct
        self.wait_pushed = wait_pushed
        self.error: Exception | None = None

    def __call__(self, piece: bytes) -> bool:
        try:
            out = self.turn.take(self.translator, piece)
            if out and not self.direct.write(out):
                return False
        except Exception as exc:  # noqa: BLE001 - not lost: raised in the task by wait()
            self.error = exc
            return False
        return not self.translator.finished

    async def wait(self) -> None:
        """Until the answer comes back to the turn: a piece left for it to read, the
        end, a failure; then what the callback caught is raised, a pending write
        finished."""
        await self.wait_pushed(self)
        error, self.error = self.error, None
        if error is not None:
            raise error
        await self.direct.flush()


@dataclass
class RunSummary:
    """How a run ended, known after `ChatRun.aclose()`."""

    status: int
    error: str | None
    calls: CallCounts = field(default_factory=CallCounts)


class ChatRun:
    """A chat request's answer, independent of the client's wire format.

    `headers()` before the first byte; then `batches()` (dicts, raw JSON bytes or
    `SseFrames`, for encoders that can copy bytes; `as_chunks` makes dicts); a failure is
    raised as ApiError after every chunk received before it. `aclose()` closes
    the upstream call and accounts the request, once, whoever calls first.
    """

    def __init__(self, ex: Exchange, turn: Turn) -> None:
        self.ex = ex
        self.turn = turn
        self.summary: RunSummary | None = None
        self._status: int | None = None
        self._error: str | None = None
        self._own_before = ex.overhead_ms() / 1000
        if ex.record.stream:
            ex.svc.telemetry.stream_opened()

    def headers(self) -> dict[str, str]:
        """The x-request-id / x-toolshim-* headers known before the first byte."""
        return toolshim_headers(self.ex)

    def verbatim(self) -> bytes | None:
        """After `batches()`: the upstream's whole answer as it came, if the chunks
        are exactly it (`Turn.verbatim`), else None."""
        return self.turn.verbatim()

    async def batches(self, direct: DirectWriter | None = None,
                      ) -> AsyncIterator[list[ChunkOut]]:
        """The turn's batches (`direct`: see `UpstreamTurn.batches`; a turn that holds or
        rewrites its answer yields everything)."""
        try:
            async for batch in self.turn.batches(direct):
                if self.ex.record.ttft_ms is None and self.ex.record.stream:
                    self._first_token(time.perf_counter())
                yield batch
            self._status = 200
        except ApiError as exc:
            self._status, self._error = exc.status, exc.message
            raise
        except Exception:
            self._status, self._error = 500, "internal error in toolshim"
            raise
        finally:
            if direct is not None and direct.first_at is not None:
                self._first_token(direct.first_at)

    def _first_token(self, at: float) -> None:
        ttft = round((at - self.ex.started) * 1000, 3)
        if self.ex.record.ttft_ms is None or ttft < self.ex.record.ttft_ms:
            self.ex.record.ttft_ms = ttft

    async def aclose(self, *, report: bool = True) -> None:
        """Close the upstream call and settle the request's record, once.

        `report=False` leaves the record's report (log line, metrics, console,
        learning) to `ex.report()`, for a caller that sends the answer first."""
        if self.summary is not None:
            return
        ex = self.ex
        status, error = (self._status, self._error) if self._status is not None \
            else ex.cancelled()
        self.summary = RunSummary(status, error, self.turn.pipeline.call_counts())
        try:
            if not self.turn.close_now():  # usually closes at once: no scope, no awaits
                with cancel_scope(shield=True):
                    await self.turn.aclose()
        finally:
            ex.upstream_s = time.perf_counter() - ex.started - self._own_before - self.turn.own_s
            _account(ex, self.summary, self.turn.pipeline)
            if ex.record.stream:
                ex.svc.telemetry.stream_closed()
            ex.finish(status, error, report=report)


def _account(ex: Exchange, summary: RunSummary, pipeline: ResponsePipeline) -> None:
    ex.record.calls_kept = summary.calls.kept
    ex.record.calls_dropped = summary.calls.dropped
    ex.record.calls_repaired = summary.calls.repaired
    ex.record.calls_recovered = sum(int(o.detail.get("count", 0)) for o in pipeline.observations
                                    if o.kind == "text_calls_recovered")
    ex.observations.extend(pipeline.observations)
