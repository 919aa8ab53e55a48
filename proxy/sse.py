"""Incremental server-sent-events decoding and encoding. No I/O.

The upstream's byte stream arrives in TCP-sized pieces that cut lines, and even
a `\\r\\n` pair, anywhere; `SseDecoder` carries the unfinished part over (like
httpx's LineDecoder) and hands out whole events only. Encoding is the OpenAI
framing every SDK expects: `data: <json>\\n\\n`, ended by `data: [DONE]\\n\\n`.
Must not: parse an event's JSON or know what a chunk means (the translator does).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_LINE_BREAK = re.compile(rb"\r\n|\r|\n")

DONE = b"[DONE]"
DONE_FRAME = b"data: [DONE]\n\n"
KEEPALIVE = b": keep-alive"
"""a batch item that is no chunk: the flow's sign of life while it waits (server tools);
writers compare it by identity and send an SSE comment, readers of chunks skip it."""
KEEPALIVE_FRAME = KEEPALIVE + b"\n\n"

EVENT_JOIN = b'}\n\ndata: {"'
"""Where one `data: {...}` event ends and the next begins, in a read of such events."""


class SseFrames(bytes):
    """A whole read of events that are each exactly one `data: <JSON object>` line,
    framing included, as an SSE client gets them (nothing to add or take)."""


def one_line_events(body: bytes) -> int:
    """How many events `body` is if it is whole events that are each one `data: {...}`
    line with LF framing (its only line breaks are the blank-line pairs that end
    events, each after a `}` and before the next `data: {"`), else 0. A few scans."""
    if not (body.startswith(b'data: {"') and body.endswith(b"}\n\n")):
        return 0
    events = body.count(EVENT_JOIN) + 1
    return events if body.count(b"\n") == 2 * events and body.find(b"\r") < 0 else 0


def one_line_event(data: bytes) -> bool:
    """Whether `data` is exactly one whole event of one `data: {...}` line (LF framing):
    `one_line_events(data) == 1`, in fewer scans (a slow stream reads one per event)."""
    return (data.startswith(b'data: {"') and data.endswith(b"}\n\n")
            and data.find(b"\n") == len(data) - 2 and data.find(b"\r") < 0)


def event_payloads(body: bytes) -> list[bytes]:
    """The data of each event of a read `one_line_events` counted."""
    return [event[6:] for event in body.split(b"\n\n")[:-1]]


@dataclass(slots=True)
class SseEvent:
    data: bytes
    event: str | None = None

    @property
    def is_done(self) -> bool:
        data = self.data  # a chunk is long: strip() copies only when [DONE] is in it
        return data.find(DONE) >= 0 and data.strip() == DONE


class SseDecoder:
    """feed(bytes) -> complete events; a partial event waits for its blank line."""

    __slots__ = ("_data", "_event", "_tail")

    def __init__(self) -> None:
        self._tail = b""
        self._data: list[bytes] = []
        self._event: str | None = None

    def feed(self, chunk: bytes) -> list[SseEvent]:
        buf = self._tail + chunk if self._tail else chunk
        # find(), not `in`: CPython 3.11 first tries a bytes needle as an integer,
        # making and dropping a TypeError on every test.
        if not self._data and buf.find(b"\r") < 0:
            return self._feed_lf(buf)
        # A trailing \r may be the first half of \r\n: keep it for the next piece.
        hold = 1 if buf.endswith(b"\r") else 0
        lines = _LINE_BREAK.split(buf[: len(buf) - hold] if hold else buf)
        self._tail = lines.pop() + (b"\r" if hold else b"")
        events: list[SseEvent] = []
        for line in lines:
            self._take_line(line, events)
        return events

    @property
    def idle(self) -> bool:
        """Between events: nothing of an unfinished one is held."""
        return not self._tail and not self._data and self._event is None

    def _feed_lf(self, buf: bytes) -> list[SseEvent]:
        """Fast path for LF-only framing (every backend in docs/backends.md): whole
        events at once, and a lone `data: ` line needs no line-by-line parse."""
        parts = buf.split(b"\n\n")
        self._tail = parts.pop()
        events: list[SseEvent] = []
        for part in parts:
            if part[:6] == b"data: " and part.find(b"\n") < 0:
                events.append(SseEvent(part[6:], self._event))
                self._event = None
                continue
            for line in part.split(b"\n"):
                self._take_line(line, events)
            self._take_line(b"", events)
        return events

    def flush(self) -> list[SseEvent]:
        """End of stream: a held trailing \\r was a line end after all."""
        events: list[SseEvent] = []
        if self._tail.endswith(b"\r"):
            line, self._tail = self._tail[:-1], b""
            self._take_line(line, events)
        return events

    def _take_line(self, line: bytes, events: list[SseEvent]) -> None:
        if not line:
            if self._data:
                events.append(SseEvent(b"\n".join(self._data), self._event))
            self._data = []
            self._event = None
            return
        if line[0] == 0x3A:  # ":" starts a comment (keep-alives)
            return
        field, sep, value = line.partition(b":")
        if sep and value[:1] == b" ":
            value = value[1:]
        if field == b"data":
            self._data.append(value)
        elif field == b"event":
            self._event = value.decode("utf-8", "replace")


def encode_data(payload: bytes) -> bytes:
    return b"data: " + payload + b"\n\n"
