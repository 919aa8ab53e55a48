"""Run a request's work unless the client hangs up first.

Owns noticing a departed client before the response starts: until then nothing
else reads the connection, and a non-streaming Ollama answer (or a model load)
can keep a GPU busy for minutes after the client is gone.

The watcher is a plain asyncio task and one cancel scope (an anyio task group
costs several times as much), and the task is only made once the work has run for
`WATCH_AFTER`: most answers through a local proxy are done sooner, and for them the
task's creation, first step and cancellation would be all it did
(bench/README.md has the numbers). A client that leaves early is
still noticed, at most `WATCH_AFTER` late: nothing costly has happened by then.
A stream's body is watched from its start (`watch_after=0`): it lasts.
Must not: read the request body (it has been read) or answer the client.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

import anyio
from starlette.types import Receive

from proxy.asgi.scopes import cancel_scope

T = TypeVar("T")

WATCH_AFTER = 0.05
"""Seconds of work before a watcher task starts listening for the client leaving."""


async def unless_client_leaves(receive: Receive, work: Coroutine[Any, Any, T], *,
                               watch_after: float = WATCH_AFTER) -> T | None:
    """`work`'s result; None if the client disconnected first (work is cancelled).

    The cancel goes through an anyio cancel scope, so shielded clean-up inside
    `work` (closing the upstream call) still runs to the end. `work`'s own
    exceptions propagate as they are. `watch_after=0`: the watcher starts at once
    (a stream's body, which lasts: a timer first would only add to it).
    """
    with cancel_scope() as scope:
        watch = _Watch(receive, scope, watch_after)
        try:
            return await work
        finally:
            watch.stop()
    return None  # the scope was cancelled by the watcher: the client left


class _Watch:
    """A task listening on `receive`, started at once or by a timer once `after` is up."""

    __slots__ = ("loop", "receive", "scope", "task", "timer")

    def __init__(self, receive: Receive, scope: anyio.CancelScope, after: float) -> None:
        self.receive, self.scope = receive, scope
        self.loop = asyncio.get_running_loop()
        self.task: asyncio.Task[None] | None = None
        self.timer: asyncio.TimerHandle | None = None
        if after > 0:
            self.timer = self.loop.call_later(after, self._start)
        else:
            self._start()

    def _start(self) -> None:
        # The task gets what it needs, not this object: a task -> self -> task cycle
        # would keep the request's state (uvicorn's cycle, headers, body) alive after
        # the stream until a full collection (+10 MB at 200 open streams).
        self.task = self.loop.create_task(_listen(self.receive, self.scope))

    def stop(self) -> None:
        if self.timer is not None:
            self.timer.cancel()  # also drops its callback, and with it this object
        if self.task is not None:
            self.task.cancel()
            self.task = None


async def _listen(receive: Receive, scope: anyio.CancelScope) -> None:
    try:
        while (await receive())["type"] != "http.disconnect":
            pass
    except Exception:  # noqa: BLE001 - a receive that fails says nothing about the client
        return
    scope.cancel()
