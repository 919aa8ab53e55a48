"""Reading an `http` tool's answer body under two caps: bytes on the wire and bytes decoded.

Owns: the body as the tool reads it. The wire is read raw and decoded here
(gzip, deflate or none, the encodings the tool asks for), never more than the
room left: a 200 KB gzip bomb inflates to 200 MB in one step of an ordinary
decoder, while this one stops at the cap.
Must not: hold more than the caps (plus one read) or decode an encoding it
did not ask for.
"""

from __future__ import annotations

import zlib

import httpx

from proxy.server_tools.local import ToolError

ACCEPT_ENCODING = "gzip, deflate"
"""what the tool asks for: the encodings `_Decoder` can bound."""


class _Decoder:
    def __init__(self, encoding: str) -> None:
        encoding = encoding.strip().lower()
        self.raw_deflate = False
        if encoding in ("", "identity"):
            self.inflate = None
        elif encoding in ("gzip", "x-gzip"):
            self.inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif encoding == "deflate":
            # "deflate" is zlib-wrapped by the RFC, raw in some servers: try both.
            self.inflate = zlib.decompressobj()
            self.raw_deflate = True
        else:
            raise ToolError(f"the tool's host answered with Content-Encoding "
                            f"{encoding[:32]!r}, which the tool did not ask for")

    def feed(self, data: bytes, room: int) -> bytes:
        """At most `room` decoded bytes of data (the rest is not decoded: the caller stops)."""
        if self.inflate is None:
            return data[:room]
        try:
            return self.inflate.decompress(data, room)
        except zlib.error:
            if not self.raw_deflate:
                raise ToolError("the tool's host sent a body that does not decode") from None
            self.raw_deflate = False
            self.inflate = zlib.decompressobj(-zlib.MAX_WBITS)
            return self.feed(data, room)


async def read_capped(response: httpx.Response, wire_cap: int, body_cap: int
                      ) -> tuple[bytes, bool]:
    """(the decoded body, cut at a cap?). A cut body is one byte longer than body_cap,
    so the runner's own cap marks the result as cut for the model."""
    decoder = _Decoder(response.headers.get("content-encoding", ""))
    parts: list[bytes] = []
    wire = size = 0
    async for raw in response.aiter_raw():
        wire += len(raw)
        if wire > wire_cap:
            raw = raw[: len(raw) - (wire - wire_cap)]
        piece = decoder.feed(raw, body_cap - size + 1)
        decoder.raw_deflate = False  # only the first bytes tell zlib from raw deflate
        size += len(piece)
        parts.append(piece)
        if size > body_cap or wire > wire_cap:
            return b"".join(parts), True
    return b"".join(parts), False
