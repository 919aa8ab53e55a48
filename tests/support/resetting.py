"""An upstream that resets connections, at the socket level (no HTTP library can).

`before`: reads the request, then resets with nothing sent. `during`: sends a
200 status line and half of the promised JSON body, then resets. `during-error`:
the same with Ollama's 500 error answer (docs/backends.md: the /v1 error envelope).
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Literal

from support.raw_server import raw_server

# Ollama /v1's 500 for an agent history it cannot template (ollama#18107).
_ERROR = (b'{"error":{"message":"no user query found in messages","type":"api_error",'
          b'"param":null,"code":null}}\n')  # Go's json.Encoder ends the body with a newline
_HALF = {
    "during": b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 400\r\n\r\n"
              b'{"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0,',
    "during-error": b"HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/json\r\n"
                    b"Content-Length: %d\r\n\r\n%s" % (len(_ERROR), _ERROR[:40]),
}


@contextmanager
def resetting_upstream(when: Literal["before", "during", "during-error"]) -> Iterator[str]:
    def handle(conn: socket.socket) -> None:
        _read_head(conn)
        if when in _HALF:
            conn.sendall(_HALF[when])
        # SO_LINGER 0: close() sends RST instead of FIN.
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))

    with raw_server(handle) as url:
        yield url


def _read_head(conn: socket.socket) -> None:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return
        data += chunk
