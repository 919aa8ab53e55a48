"""Run a request's work unless the client hangs up first.

Owns noticing a departed client before the response starts: until then nothing
else reads the connection, and a non-streaming Ollama answer (or a model load)
can keep a GPU busy for minutes after the client is gone.

Costs one plain asyncio task and one cancel scope per request: an anyio task
group here was ~14% of a non-streaming request's CPU in the W1 profile.
Must not: read the request body (it has been read) or answer the client.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

import anyio
from starlette.types import Receive

from proxy.scopes import cancel_scope

T = TypeVar("T")


async def unless_client_leaves(receive: Receive, work: Coroutine[Any, Any, T]) -> T | None:
    """`work`'s result; None if the client disconnected first (work is cancelled).

    The cancel goes through an anyio cancel scope, so shielded clean-up inside
    `work` (closing the upstream call) still runs to the end. `work`'s own
    exceptions propagate as they are.
    """
    with cancel_scope() as scope:
        watcher = asyncio.get_running_loop().create_task(_watch(receive, scope))
        try:
            return await work
        finally:
            watcher.cancel()
    return None  # the scope was cancelled by the watcher: the client left


async def _watch(receive: Receive, scope: anyio.CancelScope) -> None:
    try:
        while (await receive())["type"] != "http.disconnect":
            pass
    except Exception:  # noqa: BLE001 - a receive that fails says nothing about the client
        return
    scope.cancel()
