"""Ahead: work done at the event loop's next turn, while the task waits."""

from __future__ import annotations

import asyncio

import pytest

from proxy.flow.ahead import Ahead


async def test_it_is_made_while_the_task_waits_and_taken_without_making_it_again() -> None:
    made: list[str] = []
    ahead = Ahead(lambda: made.append("made") or len(made))
    assert made == []  # not in the task's own step
    await asyncio.sleep(0)  # the task waits: the loop's turn
    assert made == ["made"]
    assert ahead.take() == 1
    assert made == ["made"]


async def test_taken_before_the_task_waited_it_is_made_now_and_only_once() -> None:
    made: list[str] = []
    ahead = Ahead(lambda: made.append("made") or len(made))
    assert ahead.take() == 1
    await asyncio.sleep(0)
    assert made == ["made"]  # the loop's turn was cancelled


async def test_an_error_while_waiting_is_raised_by_take_in_the_task() -> None:
    calls: list[int] = []

    def make() -> int:
        calls.append(1)
        raise ValueError(f"bad {len(calls)}")

    ahead = Ahead(make)
    await asyncio.sleep(0)  # raised on the loop's turn: kept out of the loop's handler
    with pytest.raises(ValueError, match="bad 2"):
        ahead.take()


async def test_cancelled_it_is_never_made() -> None:
    made: list[str] = []
    Ahead(lambda: made.append("made")).cancel()
    await asyncio.sleep(0)
    assert made == []
