"""HeadWithBody: a response's head leaves with its first body piece, in one send."""

from __future__ import annotations

import asyncio
from typing import Any

from proxy.asgi.head_with_body import HeadWithBody


class _Transport:
    """Records sends: each `write` or `writelines` call is one send."""

    def __init__(self) -> None:
        self.sends: list[bytes] = []
        self.late: list[bytes] = []
        """sends after the connection closed (an assert would be swallowed by the loop
        when the write runs in a callback)."""
        self.closed = False

    def write(self, data: bytes) -> None:
        (self.late if self.closed else self.sends).append(data)

    def writelines(self, pieces: Any) -> None:
        self.write(b"".join(pieces))

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def get_extra_info(self, name: str) -> str:
        return f"info:{name}"


class _Cycle:
    """What HeadWithBody needs of uvicorn's request-response cycle: its transport."""

    def __init__(self) -> None:
        self.transport: Any = _Transport()


def _view() -> tuple[_Cycle, _Transport]:
    cycle = _Cycle()
    transport = cycle.transport
    HeadWithBody(cycle, asyncio.get_running_loop())
    assert isinstance(cycle.transport, HeadWithBody)
    return cycle, transport


async def test_a_whole_answer_is_one_send_and_then_the_cycle_writes_itself() -> None:
    cycle, transport = _view()
    cycle.transport.write(b"HTTP/1.1 200 OK\r\n\r\n")
    cycle.transport.write(b"{}")
    assert transport.sends == [b"HTTP/1.1 200 OK\r\n\r\n{}"]
    assert cycle.transport is transport  # later writes pay nothing
    await asyncio.sleep(0)  # the head's own turn was cancelled: nothing more
    assert transport.sends == [b"HTTP/1.1 200 OK\r\n\r\n{}"]


async def test_a_head_with_nothing_after_it_goes_out_at_the_next_turn() -> None:
    # A stream's head, before the model has written anything: the client must see it.
    cycle, transport = _view()
    cycle.transport.write(b"HEAD")
    assert transport.sends == []
    await asyncio.sleep(0)
    assert transport.sends == [b"HEAD"]
    assert cycle.transport is transport
    cycle.transport.write(b"data: 1\n\n")
    assert transport.sends == [b"HEAD", b"data: 1\n\n"]


async def test_a_reference_kept_from_before_writes_straight_through_in_order() -> None:
    cycle, transport = _view()
    view = cycle.transport
    view.write(b"HEAD")
    view.write(b"body")
    view.write(b"more")
    assert transport.sends == [b"HEADbody", b"more"]


async def test_closing_sends_a_waiting_head_first() -> None:
    cycle, transport = _view()
    cycle.transport.write(b"HEAD")
    cycle.transport.close()
    assert transport.sends == [b"HEAD"] and transport.closed
    await asyncio.sleep(0)
    assert transport.sends == [b"HEAD"] and transport.late == []


async def test_a_head_for_a_client_gone_meanwhile_is_dropped_quietly() -> None:
    cycle, transport = _view()
    cycle.transport.write(b"HEAD")
    transport.closed = True  # the connection was lost before the loop's next turn
    await asyncio.sleep(0)
    assert transport.sends == [] and transport.late == []


async def test_everything_else_is_the_transport() -> None:
    cycle, _ = _view()
    assert cycle.transport.get_extra_info("peername") == "info:peername"
    assert cycle.transport.is_closing() is False
