"""Run an ASGI app under a real uvicorn on a free loopback port, in a thread."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn

from proxy.asgi.client_timeouts import header_timeout_protocol
from support.polling import until


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def serve(app: Any, *, lifespan: str = "on", graceful: float | None = None,
          http: Any = None, tls: tuple[str, str] | None = None) -> Iterator[str]:
    """Yield the base URL (http://127.0.0.1:PORT) while uvicorn serves `app`.

    `http`: the protocol; by default the one the CLI serves with (uvicorn's, with
    the header deadline: proxy/asgi/client_timeouts.py). `tls`: (key file, certificate
    file): serve https (the URL says so)."""
    port = free_port()
    if http is None:
        http = header_timeout_protocol(60.0)
    config = uvicorn.Config(app, host="127.0.0.1", port=port, lifespan=lifespan,
                            log_config=None, access_log=False, ws="none",
                            timeout_graceful_shutdown=graceful, loop="asyncio", http=http,
                            ssl_keyfile=tls[0] if tls else None,
                            ssl_certfile=tls[1] if tls else None)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    def started() -> bool:
        if not server.started and not thread.is_alive():
            raise RuntimeError("uvicorn exited before it started")
        return bool(server.started)
    until(started, within=10, what=f"uvicorn to start on port {port}")
    try:
        yield f"{'https' if tls else 'http'}://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def wait_until_ok(url: str, proc: Any, *, timeout: float = 20.0, what: str = "the server"
                  ) -> bool:
    """Poll `url` until it answers 200: True. False if `proc` (a Popen) exited first;
    past `timeout`, an AssertionError."""
    import httpx

    answered = False

    def answered_or_exited() -> bool:
        nonlocal answered
        if proc.poll() is not None:
            return True
        try:
            answered = httpx.get(url, timeout=2).status_code == 200
        except httpx.HTTPError:
            answered = False
        return answered
    until(answered_or_exited, within=timeout, what=f"{what} to answer {url}")
    return answered
