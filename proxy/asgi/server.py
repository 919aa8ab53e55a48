"""uvicorn's server, told when it stops accepting: the start of the shutdown drain.

Owns the one hook into `uvicorn.Server`: its `shutdown(sockets)` coroutine, run once
the server has stopped listening (SIGTERM, SIGINT), where the drain begins before
uvicorn waits for open connections (tests/asgi/test_compat.py checks the hook).
Must not: decide what the drain does (middleware/drain.py) or change how uvicorn
serves.
"""

from __future__ import annotations

import socket
from collections.abc import Callable

import uvicorn


def draining_server(begin: Callable[[], None]) -> type[uvicorn.Server]:
    """A `uvicorn.Server` class that calls `begin()` as it starts shutting down."""

    class DrainingServer(uvicorn.Server):
        async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
            begin()  # cuts what is still open `grace` seconds from now
            await super().shutdown(sockets)

    return DrainingServer
