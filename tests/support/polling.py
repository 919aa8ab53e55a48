"""Waiting for something the proxy does in the background, with a deadline.

Logs are written after the response ended, learned facts by a background writer, an
upstream sees a cancel when the socket closes: a test that asserts at once races them.
Every such wait goes through `until` (or `until_async` on an event loop the proxy shares,
where a blocking sleep would stall the very thing awaited), so a wait that never ends fails
the same way everywhere: an AssertionError naming what was awaited and for how long.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable

_STEP = 0.02


def _expired(what: str, within: float) -> AssertionError:
    return AssertionError(f"waited {within:g} s for {what}; it never happened")


def until(check: Callable[[], object], *, what: str, within: float = 5.0) -> None:
    """Poll `check()` until it is truthy; past `within` seconds, fail naming `what`."""
    deadline = time.monotonic() + within
    while not check():
        if time.monotonic() > deadline:
            raise _expired(what, within)
        time.sleep(_STEP)


async def until_async(check: Callable[[], object | Awaitable[object]], *, what: str,
                      within: float = 5.0) -> None:
    """`until` for a test whose proxy runs on the test's own event loop; `check` may be a
    coroutine function (one that asks the app over HTTP, say)."""
    deadline = time.monotonic() + within
    while not await _checked(check):
        if time.monotonic() > deadline:
            raise _expired(what, within)
        await asyncio.sleep(_STEP)


async def _checked(check: Callable[[], object | Awaitable[object]]) -> object:
    result = check()
    return await result if inspect.isawaitable(result) else result
