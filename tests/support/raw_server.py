"""A loopback TCP server for answers no HTTP library will give (resets, raw bytes).

`raw_server(handle)` accepts connections on a free port in a thread and calls
`handle(conn)` for each, one at a time; the connection is closed after it.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager


@contextmanager
def raw_server(handle: Callable[[socket.socket], None], *, timeout: float = 5.0
               ) -> Iterator[str]:
    """Yield the server's base URL (http://127.0.0.1:PORT) while it serves."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    listener.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with conn:
                conn.settimeout(timeout)
                handle(conn)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        listener.close()
        thread.join(timeout=5)
