"""The console's tiny hook into one request: what the send path shows it.

Every Exchange carries a Tap. Normally it does nothing (two attribute checks
per upstream attempt, one method call per streamed piece). With --log-prompts
it keeps the client's messages for the Requests view; for a bench run it also
holds a Capture, filled with each body sent upstream (after every rewrite)
and the upstream's raw answers. Must not: change what is sent or answered, or
keep anything when neither --log-prompts nor a capture asked for it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

_MAX_CAPTURE_BYTES = 2 * 1024 * 1024
"""a bench capture keeps at most this much raw upstream text."""


@dataclass
class Capture:
    sent: list[Any] = field(default_factory=list)
    """each upstream attempt's JSON body, in order."""
    answers: list[dict[str, Any]] = field(default_factory=list)
    """each attempt's answer: {"status", "body"} (raw text; a stream's SSE text whole)."""
    size: int = 0
    fresh: bool = True
    """the next answer piece starts a new answer (a new attempt was sent)."""

    def add_answer(self, status: int, raw: bytes) -> None:
        self.fresh = True
        self.add_piece(raw, status)

    def add_piece(self, raw: bytes, status: int = 200) -> None:
        if self.fresh or not self.answers:
            self.answers.append({"status": status, "body": ""})
            self.fresh = False
        room = _MAX_CAPTURE_BYTES - self.size
        if room > 0:
            self.answers[-1]["body"] += raw[:room].decode("utf-8", errors="replace")
            self.size += len(raw[:room])


class Tap:
    __slots__ = ("capture", "keep_prompt", "prompt")

    def __init__(self, keep_prompt: bool = False, capture: Capture | None = None) -> None:
        self.keep_prompt = keep_prompt
        self.prompt: dict[str, Any] | None = None
        self.capture = capture

    def sent(self, chat: Any, body: Any) -> None:
        """An upstream attempt is about to be sent with `body` (the rewritten request)."""
        if self.keep_prompt and self.prompt is None:
            self.prompt = {"messages": chat.get("messages"), "tools": chat.get("tools") or []}
        if self.capture is not None:
            self.capture.sent.append(body)
            self.capture.fresh = True

    def answered(self, status: int, raw: bytes) -> None:
        """A whole upstream answer (an error, or a non-streaming completion)."""
        if self.capture is not None:
            self.capture.add_answer(status, raw)

    def piece(self, raw: bytes) -> None:
        """A piece of a streamed upstream answer, as received."""
        if self.capture is not None:
            self.capture.add_piece(raw)
