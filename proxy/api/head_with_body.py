"""A response's head leaves with its first body piece: one send, not two.

uvicorn writes a response's status line and headers as soon as the app sends
`http.response.start`, and the body with the next message: two writes, so two
system calls, for every answer. On this project's VMs a send costs about as much
as a fifth of a small request's own Python. `HeadWithBody` stands in for the
connection's transport for one request: the first write waits, and goes out
with the next one in a single `writelines` (one `writev` under uvloop), or alone
at the event loop's next turn if nothing follows at once (a stream's head,
before the model has written anything). Everything else is the transport's.
"""

from __future__ import annotations

import asyncio
from typing import Any


class HeadWithBody:
    """One request's view of its connection's transport (see the module)."""

    __slots__ = ("_handle", "_head", "_loop", "_transport")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._head: bytes | None = None
        """the first write, waiting; None before it, b"" once it has gone out."""
        self._handle: asyncio.Handle | None = None

    def write(self, data: bytes) -> None:
        head = self._head
        if head is None:
            self._head = bytes(data)
            self._handle = self._loop.call_soon(self.flush)
        elif head:
            self._take_head()
            self._transport.writelines((head, data))
        else:
            self._transport.write(data)

    def flush(self) -> None:
        """Send a waiting head now (also before the connection closes)."""
        if self._head:
            head = self._head
            self._take_head()
            if not self._transport.is_closing():  # a client gone meanwhile: nobody to tell
                self._transport.write(head)

    def _take_head(self) -> None:
        self._head = b""
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)
