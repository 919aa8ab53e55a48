"""Work a request will need once its upstream answers, done while the upstream thinks.

Between writing the upstream request and its answer the proxy's core idles, and
with one client at a time that wait is most of a request's life. Work that does
not depend on the answer (building the response stages) is handed to the event
loop for its next turn, which comes as soon as the request's task waits.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class Ahead(Generic[T]):
    """`make()`, run by the event loop at its next turn; `take()` gives what it made.

    `take()` makes it now instead if that turn has not come yet (nothing waited) or
    `make()` raised there, so its error is raised in the task, where the caller
    handles it. `cancel()` when the result will not be wanted. Must be created on
    the event loop.
    """

    __slots__ = ("_handle", "_made", "_make", "_value")

    def __init__(self, make: Callable[[], T]) -> None:
        self._make = make
        self._made = False
        self._value: T | None = None
        self._handle = asyncio.get_running_loop().call_soon(self._run)

    def _run(self) -> None:
        try:
            self._value = self._make()
        except Exception:  # noqa: BLE001 - made again by take(), which raises it there
            return
        self._made = True

    def take(self) -> T:
        self._handle.cancel()
        if self._made:
            return self._value  # type: ignore[return-value]  # made: a T
        return self._make()

    def cancel(self) -> None:
        self._handle.cancel()
