"""A response head leaves with the bytes written after it, in order, never lost."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from proxy.api.coalesce import HeadWithBody

HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n"


class Recording:
    """The server transport's side: what was sent, one entry per send."""

    def __init__(self) -> None:
        self.sent: list[bytes] = []
        self.closed = False
        self.paused = False

    def write(self, data: bytes) -> None:
        assert not self.closed, "written after close"
        self.sent.append(data)

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed

    def pause_reading(self) -> None:
        self.paused = True

    def get_extra_info(self, name: str, default: object = None) -> object:
        return ("127.0.0.1", 1234) if name == "peername" else default


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


def _step(loop: asyncio.AbstractEventLoop) -> None:
    """Let the loop finish the current step (the held head's flush runs)."""
    loop.run_until_complete(asyncio.sleep(0))


def test_a_head_and_its_body_are_one_send(loop: asyncio.AbstractEventLoop) -> None:
    raw = Recording()
    transport = HeadWithBody(raw, loop)  # type: ignore[arg-type]
    transport.write(HEAD)
    assert raw.sent == []
    transport.write(b"{}")
    assert raw.sent == [HEAD + b"{}"]
    _step(loop)
    assert raw.sent == [HEAD + b"{}"]  # the flush finds nothing left


def test_a_head_with_nothing_after_it_goes_at_the_end_of_the_step(
        loop: asyncio.AbstractEventLoop) -> None:
    # A stream whose first event is still on its way: its headers must not wait for it.
    raw = Recording()
    transport = HeadWithBody(raw, loop)  # type: ignore[arg-type]
    transport.write(HEAD)
    _step(loop)
    assert raw.sent == [HEAD]
    transport.write(b"5\r\ndata:\r\n")
    assert raw.sent == [HEAD, b"5\r\ndata:\r\n"]


def test_an_interim_answer_is_sent_at_once(loop: asyncio.AbstractEventLoop) -> None:
    raw = Recording()
    transport = HeadWithBody(raw, loop)  # type: ignore[arg-type]
    transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")
    assert raw.sent == [b"HTTP/1.1 100 Continue\r\n\r\n"]


def test_close_sends_what_is_held_first_and_nothing_after(
        loop: asyncio.AbstractEventLoop) -> None:
    raw = Recording()
    transport = HeadWithBody(raw, loop)  # type: ignore[arg-type]
    transport.write(HEAD)
    transport.close()
    assert raw.sent == [HEAD] and raw.closed
    _step(loop)  # the scheduled flush must not write to the closed transport
    assert raw.sent == [HEAD]


def test_a_held_head_is_dropped_when_the_connection_closed_under_it(
        loop: asyncio.AbstractEventLoop) -> None:
    raw = Recording()
    transport = HeadWithBody(raw, loop)  # type: ignore[arg-type]
    transport.write(HEAD)
    raw.closed = True  # the client went away (connection_lost)
    _step(loop)
    assert raw.sent == []


def test_writelines_is_a_write(loop: asyncio.AbstractEventLoop) -> None:
    raw = Recording()
    transport = HeadWithBody(raw, loop)  # type: ignore[arg-type]
    transport.write(HEAD)
    transport.writelines([b"{", b"}"])
    assert raw.sent == [HEAD + b"{}"]


def test_everything_else_is_the_transport_s(loop: asyncio.AbstractEventLoop) -> None:
    raw = Recording()
    transport = HeadWithBody(raw, loop)  # type: ignore[arg-type]
    transport.pause_reading()
    assert raw.paused
    assert transport.get_extra_info("peername") == ("127.0.0.1", 1234)
    assert not transport.is_closing()


_pieces = st.lists(st.one_of(
    st.just(HEAD),
    st.just(b"HTTP/1.1 101 Switching Protocols\r\n\r\n"),
    st.binary(max_size=12),
    st.sampled_from([b"HTTP/1.1 ", b"\r\n\r\n", b"HTTP/1.1 204 No Content\r\n\r\n"])),
    max_size=12)


@given(_pieces, st.lists(st.booleans(), max_size=12))
def test_bytes_arrive_in_order_and_whole(pieces: list[bytes], steps: list[bool]) -> None:
    """Whatever is written, and wherever the loop's steps end, the client gets the same
    bytes in the same order, in no more sends than there were writes."""
    loop = asyncio.new_event_loop()
    try:
        raw = Recording()
        transport = HeadWithBody(raw, loop)  # type: ignore[arg-type]
        for position, piece in enumerate(pieces):
            transport.write(piece)
            if position < len(steps) and steps[position]:
                _step(loop)
        _step(loop)
        assert b"".join(raw.sent) == b"".join(pieces)
        assert len(raw.sent) <= len(pieces)
    finally:
        loop.close()
