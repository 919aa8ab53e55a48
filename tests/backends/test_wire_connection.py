"""One upstream connection of the wire transport (backends/wire_connection.py), fed by hand.

A stand-in transport takes the place of the socket, so any segmentation of an
answer's bytes can be fed to the protocol exactly as the loop would.
"""

from __future__ import annotations

import asyncio
import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.backends.wire_connection import Connection


class _Sink:
    """A transport stand-in for feeding `Connection` by hand."""

    def __init__(self) -> None:
        self.paused = False
        self.closed = False

    def pause_reading(self) -> None:
        self.paused = True

    def resume_reading(self) -> None:
        self.paused = False

    def close(self) -> None:
        self.closed = True

    def write(self, data: bytes) -> None:
        pass


def _answer_bytes(pieces: list[bytes], chunked: bool) -> bytes:
    body = b"".join(pieces)
    if not chunked:
        return b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body)
    framed = b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces if p)
    return b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n" + framed + b"0\r\n\r\n"


@settings(max_examples=150, deadline=None)
@given(pieces=st.lists(st.binary(max_size=40), max_size=8), chunked=st.booleans(),
       cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=12))
def test_any_segmentation_of_an_answer_gives_the_same_status_and_body(
        pieces: list[bytes], chunked: bool, cuts: list[int]) -> None:
    async def run() -> tuple[int, bytes, bool]:
        conn = Connection(asyncio.get_running_loop())
        conn.connection_made(_Sink())  # type: ignore[arg-type]
        conn.start(head=False)
        wire = _answer_bytes(pieces, chunked)
        marks = sorted({c % (len(wire) + 1) for c in cuts} | {0, len(wire)})
        for start, end in itertools.pairwise(marks):
            conn.data_received(wire[start:end])
        await conn.wait_headers(1.0)
        got = []
        while piece := await conn.read(1.0):
            got.append(piece)
        return conn.status, b"".join(got), conn.keep_alive

    status, body, keep_alive = asyncio.run(run())
    assert (status, body, keep_alive) == (200, b"".join(pieces), True)


async def test_reading_pauses_past_the_high_water_mark_and_resumes_when_read() -> None:
    sink = _Sink()
    conn = Connection(asyncio.get_running_loop())
    conn.connection_made(sink)  # type: ignore[arg-type]
    conn.start(head=False)
    body = b"x" * (300 * 1024)
    conn.data_received(b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n" % (len(body) + 1))
    conn.data_received(body)
    assert sink.paused
    assert await conn.read(1.0) == body
    assert not sink.paused
