"""A response head leaves with the body bytes written after it: one segment, not two.

uvicorn writes a response's status line and headers as soon as the app sends
`http.response.start`, and the body with the next message, a moment later in
the same step. Over TCP with no delay that is two sends: two system calls on
the proxy's core and two wake-ups of the client for one small answer (~1 of
the 5 system calls of a non-streamed request). `HeadWithBody` holds a head
until the next write and sends both at once; the same goes for a stream's head
and its first event when both are at hand. A head with nothing after it in
the same loop step (a stream whose first event is still on its way) is sent
at the end of the step, so headers never wait for the model.

Order is kept: held bytes always go before anything written later, and before
a close. Interim answers (`100 Continue`) are never held: the client waits for
them before it sends the body.
"""

from __future__ import annotations

import asyncio
from typing import Any

_HEAD = b"HTTP/1.1 "
_INTERIM = b"HTTP/1.1 1"
_HEAD_END = b"\r\n\r\n"


class HeadWithBody:
    """Wraps the server's transport for one connection; everything else is delegated."""

    __slots__ = ("_held", "_loop", "_transport")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._held: bytes | None = None

    def write(self, data: bytes) -> None:
        held = self._held
        if held is not None:
            self._held = None
            self._transport.write(held + data)
        elif data[:9] == _HEAD and data[:10] != _INTERIM and data[-4:] == _HEAD_END:
            self._held = data
            self._loop.call_soon(self._flush)
        else:
            self._transport.write(data)

    def _flush(self) -> None:
        """The end of the step the head was written in: whatever is held goes now."""
        held, self._held = self._held, None
        if held is not None and not self._transport.is_closing():
            self._transport.write(held)

    def writelines(self, data: Any) -> None:
        self.write(b"".join(data))

    def write_eof(self) -> None:
        self._flush()
        self._transport.write_eof()

    def close(self) -> None:
        self._flush()
        self._transport.close()

    def is_closing(self) -> bool:
        return self._transport.is_closing()

    def __getattr__(self, name: str) -> Any:
        # get_extra_info, pause_reading, resume_reading, abort, set_protocol, ...
        return getattr(self._transport, name)
