"""A response's head leaves with its first body piece: one send, not two.

uvicorn writes a response's status line and headers as soon as the app sends
`http.response.start`, and the body with the next message: two writes, so two
system calls, for every answer. On this project's VMs a send costs about as much
as a fifth of a small request's own Python. `HeadWithBody` stands in for the
connection's transport in one request's cycle until the head has gone: the
first write waits, and goes out with the next one in a single `writelines` (one
`writev` under uvloop), or alone at the event loop's next turn if nothing
follows at once (a stream's head, before the model has written anything). Then
the cycle gets the transport itself back: a stream's events pay nothing here.
"""

from __future__ import annotations

import asyncio
from typing import Any


class HeadWithBody:
    """One request's view of its connection's transport until its head has gone."""

    __slots__ = ("_cycle", "_handle", "_head", "_loop", "_transport")

    def __init__(self, cycle: Any, loop: asyncio.AbstractEventLoop) -> None:
        """Take the place of `cycle.transport` (a uvicorn request-response cycle's)."""
        self._cycle = cycle
        self._transport: asyncio.Transport = cycle.transport
        self._loop = loop
        self._head: bytes | None = None
        """the first write, waiting; None before it."""
        self._handle: asyncio.Handle | None = None
        cycle.transport = self

    def write(self, data: bytes) -> None:
        head = self._head
        if head is not None:
            self._step_aside()
            self._transport.writelines((head, data))
        elif self._cycle is not None:  # the first write: the head waits
            self._head = bytes(data)
            self._handle = self._loop.call_soon(self.flush)
        else:  # stepped aside already (a reference kept from before)
            self._transport.write(data)

    def flush(self) -> None:
        """Send a waiting head now (also before the connection closes)."""
        head = self._head
        self._step_aside()
        if head is not None and not self._transport.is_closing():
            self._transport.write(head)  # nobody to tell if the client left meanwhile

    def _step_aside(self) -> None:
        """The head is gone (or going): the cycle writes to the transport itself."""
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        if self._cycle is not None:
            self._cycle.transport = self._transport
            self._cycle = None
        self._head = None

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)
