"""A loopback TCP server for answers no HTTP library will give (resets, raw bytes).

`raw_server(handle)` accepts connections on a free port in a thread and calls
`handle(conn)` for each, one at a time; the connection is closed after it.
A handler that fails on the socket (the proxy hung up, or sent nothing in time) just
ends that connection; any other exception (a bug or an assert in the handler) ends
that connection too, the server goes on, and it is raised when the server stops, so
the test fails with it instead of waiting on a server that died.
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
    failures: list[BaseException] = []

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
                try:
                    handle(conn)
                except OSError:
                    pass  # the peer left or went quiet: that connection is over
                except Exception as exc:  # noqa: BLE001 - raised in the test's thread
                    failures.append(exc)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    except BaseException as exc:
        _stop(stop, listener, thread, timeout)
        for failure in failures:  # what the handler met may be why the test failed
            exc.add_note(f"raw_server's handler failed: {failure!r}")
        raise
    _stop(stop, listener, thread, timeout)
    if failures:
        raise failures[0]


def _stop(stop: threading.Event, listener: socket.socket, thread: threading.Thread,
          timeout: float) -> None:
    """Stop accepting and wait for the handler in progress: a socket wait in it ends
    within `timeout`, so its failure, if any, is in by then."""
    stop.set()
    listener.close()
    thread.join(timeout=2 * timeout + 1)
