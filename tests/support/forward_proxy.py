"""A small HTTP forward proxy on loopback, as companies run one (squid and the like), that
records what passes through it.

Two ways through, as RFC 9110 has them: `CONNECT host:port` opens a tunnel (what an
https upstream gets; TLS stays end to end), and a request whose target is an absolute
URI (`POST http://host:port/v1/... HTTP/1.1`, what a plain http upstream gets) is sent
on in origin form, every request of a kept-alive connection alike. `refuse` answers
every request with that status instead (a proxy that wants credentials: 407).
"""

from __future__ import annotations

import asyncio
import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from urllib.parse import urlsplit


class ForwardProxy:
    def __init__(self) -> None:
        self.seen: list[str] = []
        """`METHOD target` of every request that reached the proxy."""
        self.refuse: int | None = None
        self.lock = threading.Lock()

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            method, target, _ = head.split(b"\r\n", 1)[0].decode("latin-1").split(" ", 2)
            with self.lock:
                self.seen.append(f"{method} {target}")
            if self.refuse is not None:
                writer.write(b"HTTP/1.1 %d Refused\r\ncontent-length: 0\r\n"
                             b"connection: close\r\n\r\n" % self.refuse)
                await writer.drain()
            elif method == "CONNECT":
                await self._tunnel(target, reader, writer)
            else:
                await self._forward(head, reader, writer)
        except (OSError, asyncio.IncompleteReadError, ValueError):
            pass
        finally:
            await _closed(writer)

    async def _tunnel(self, target: str, reader: asyncio.StreamReader,
                      writer: asyncio.StreamWriter) -> None:
        host, _, port = target.rpartition(":")
        up_reader, up_writer = await asyncio.open_connection(host.strip("[]"), int(port))
        writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))

    async def _forward(self, head: bytes, reader: asyncio.StreamReader,
                       writer: asyncio.StreamWriter) -> None:
        url = urlsplit(head.split(b" ", 2)[1].decode("latin-1"))
        up_reader, up_writer = await asyncio.open_connection(url.hostname, url.port or 80)
        back = asyncio.ensure_future(_pipe(up_reader, writer))
        try:
            while True:
                up_writer.write(_origin_form(head) + await reader.readexactly(_length(head)))
                await up_writer.drain()
                head = await reader.readuntil(b"\r\n\r\n")  # the next on this connection
                method, target, _ = head.split(b"\r\n", 1)[0].decode("latin-1").split(" ", 2)
                with self.lock:
                    self.seen.append(f"{method} {target}")
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            await _closed(up_writer)  # the client left: so does the proxy's own request
            with suppress(OSError):
                await back


def _origin_form(head: bytes) -> bytes:
    line, rest = head.split(b"\r\n", 1)
    method, target, version = line.split(b" ", 2)
    url = urlsplit(target.decode("latin-1"))
    path = (url.path or "/") + (f"?{url.query}" if url.query else "")
    return b"%s %s %s\r\n%s" % (method, path.encode("latin-1"), version, rest)


def _length(head: bytes) -> int:
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return int(value)
    return 0


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except OSError:
        pass
    finally:
        await _closed(writer)


async def _closed(writer: asyncio.StreamWriter) -> None:
    """Close and wait until the transport is gone: a transport left closing when the
    proxy's loop stops is collected later, in another test, as an unclosed-transport
    ResourceWarning (an error under `filterwarnings = error`)."""
    writer.close()
    with suppress(Exception):
        await writer.wait_closed()


@contextmanager
def forward_proxy(tls: ssl.SSLContext | None = None) -> Iterator[tuple[str, ForwardProxy]]:
    """Yield (http://127.0.0.1:PORT, the proxy) while it serves, in a thread of its own;
    with `tls` (a server context), an https:// proxy."""
    proxy = ForwardProxy()
    started = threading.Event()
    box: dict[str, object] = {}

    async def main() -> None:
        server = await asyncio.start_server(proxy.handle, "127.0.0.1", 0, ssl=tls)
        loop, stop = asyncio.get_running_loop(), asyncio.Event()
        box["port"] = server.sockets[0].getsockname()[1]
        box["stop"] = lambda: loop.call_soon_threadsafe(stop.set)
        started.set()
        async with server:
            await stop.wait()

    thread = threading.Thread(target=asyncio.run, args=(main(),), daemon=True)
    thread.start()
    assert started.wait(10), "the forward proxy did not start"
    try:
        yield f"{'https' if tls else 'http'}://127.0.0.1:{box['port']}", proxy
    finally:
        stop = box["stop"]
        assert callable(stop)
        stop()
        thread.join(timeout=10)
