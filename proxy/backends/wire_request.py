"""The bytes of one HTTP/1.1 request for the wire transport (backends/wire.py).

Owns writing the request line, headers and body as one buffer (one write, one
packet): `host` and `content-length` come from the URL and the body, and a
header that would add lines is refused. Must not: do I/O, or add headers of
its own beyond those two.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping

import httpx

_WRITTEN_HERE = frozenset({b"host", b"content-length", b"transfer-encoding"})


def encode_request(method: str, url: httpx.URL, headers: Iterable[tuple[bytes, bytes]],
            body: bytes | None) -> bytes:
    """The request line, headers and body as one buffer (one write, one packet).

    `host` and `content-length` are written here from the URL and the body (the body
    is always whole, so a `transfer-encoding` given is dropped too)."""
    lines = [b"%s: %s\r\n" % (name, value) for name, value in headers
             if name.lower() not in _WRITTEN_HERE]
    # A line break inside a name or value would add lines: one count over them all.
    given = b"".join(lines)
    if given.count(b"\n") != len(lines) or given.count(b"\r") != len(lines):
        raise httpx.LocalProtocolError("header with a line break")
    lines = [b"%s %s HTTP/1.1\r\nhost: %s\r\n" % (method.encode("ascii"), url.raw_path,
                                                    url.netloc), given]
    if body or method in ("POST", "PUT", "PATCH"):
        lines.append(b"content-length: %d\r\n" % len(body or b""))
    lines.append(b"\r\n")
    if body:
        lines.append(body)
    return b"".join(lines)


def as_bytes(headers: Mapping[str, str]) -> Iterator[tuple[bytes, bytes]]:
    """Plain str headers as bytes: latin-1 as HTTP has it, UTF-8 (as httpx does) for
    what latin-1 cannot say."""
    for name, value in headers.items():
        try:
            yield name.encode("latin-1"), value.encode("latin-1")
        except UnicodeEncodeError:
            yield name.encode(), value.encode()
