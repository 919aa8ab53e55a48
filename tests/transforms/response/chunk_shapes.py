"""Test support for the response stages: a chat completion chunk for choice 0."""

from __future__ import annotations

from typing import Any

from proxy.types import Chunk


def choice_chunk(content: str | None = None, finish: str | None = None, **delta: Any) -> Chunk:
    """One streamed chunk whose choice 0 carries delta (plus content if given)."""
    if content is not None:
        delta["content"] = content
    return {
        "id": "c1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
