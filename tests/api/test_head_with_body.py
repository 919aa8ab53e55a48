"""HeadWithBody: a response's head leaves with its first body piece, in one send."""

from __future__ import annotations

import asyncio
from typing import Any

from proxy.api.head_with_body import HeadWithBody


class _Transport:
    """Records sends: each `write` or `writelines` call is one send."""

    def __init__(self) -> None:
        self.sends: list[bytes] = []
        self.closed = False

    def write(self, data: bytes) -> None:
        assert not self.closed
        self.sends.append(data)

    def writelines(self, pieces: Any) -> None:
        assert not self.closed
        self.sends.append(b"".join(pieces))

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def get_extra_info(self, name: str) -> str:
        return f"info:{name}"


def _view() -> tuple[HeadWithBody, _Transport]:
    transport = _Transport()
    return HeadWithBody(transport, asyncio.get_running_loop()), transport  # type: ignore[arg-type]


async def test_a_whole_answer_is_one_send() -> None:
    view, transport = _view()
    view.write(b"HTTP/1.1 200 OK\r\n\r\n")
    view.write(b"{}")
    assert transport.sends == [b"HTTP/1.1 200 OK\r\n\r\n{}"]
    await asyncio.sleep(0)  # the head's own turn was cancelled: nothing more
    view.write(b"more")
    assert transport.sends == [b"HTTP/1.1 200 OK\r\n\r\n{}", b"more"]


async def test_a_head_with_nothing_after_it_goes_out_at_the_next_turn() -> None:
    # A stream's head, before the model has written anything: the client must see it.
    view, transport = _view()
    view.write(b"HEAD")
    assert transport.sends == []
    await asyncio.sleep(0)
    assert transport.sends == [b"HEAD"]
    view.write(b"data: 1\n\n")
    assert transport.sends == [b"HEAD", b"data: 1\n\n"]


async def test_closing_sends_a_waiting_head_first() -> None:
    view, transport = _view()
    view.write(b"HEAD")
    view.close()
    assert transport.sends == [b"HEAD"] and transport.closed
    await asyncio.sleep(0)
    assert transport.sends == [b"HEAD"]


async def test_a_head_for_a_client_gone_meanwhile_is_dropped_quietly() -> None:
    view, transport = _view()
    view.write(b"HEAD")
    transport.closed = True  # the connection was lost before the loop's next turn
    await asyncio.sleep(0)
    assert transport.sends == []


async def test_everything_else_is_the_transport() -> None:
    view, _ = _view()
    assert view.get_extra_info("peername") == "info:peername"
    assert view.is_closing() is False
