"""Conversion between a non-stream chat.completion and chunks.

Owns: the two directions that let non-streaming responses run through the
same streaming stages (one implementation, two drivers: they cannot drift):
`completion_to_chunks`, then the stages fed and flushed, then
`chunks_to_completion`, which merges deltas the way the OpenAI SDK does.

Must not: decide anything about calls (assembly.py does), mutate inputs, or
do I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from proxy.types import JSON, Chunk

_CHOICE_KEYS = ("index", "message", "delta", "finish_reason")


def completion_to_chunks(completion: JSON) -> list[Chunk]:
    """Equivalent chunks: one with every choice's message as a delta, one
    with the finish reasons (plus choice extras), one with usage if any."""
    top = {k: v for k, v in completion.items() if k not in ("choices", "usage")}
    top["object"] = "chat.completion.chunk"
    choices = [c for c in completion.get("choices") or [] if isinstance(c, dict)]
    deltas, finishes = [], []
    for position, choice in enumerate(choices):
        index = choice.get("index", position)
        deltas.append(
            {"index": index, "delta": _delta(choice.get("message") or {}), "finish_reason": None}
        )
        extras = {k: v for k, v in choice.items() if k not in _CHOICE_KEYS}
        finishes.append(
            {"index": index, "delta": {}, "finish_reason": choice.get("finish_reason"), **extras}
        )
    out = [{**top, "choices": deltas}, {**top, "choices": finishes}]
    if completion.get("usage") is not None:
        out.append({**top, "choices": [], "usage": completion["usage"]})
    return out


def chunks_to_completion(chunks: Sequence[Chunk], template: JSON) -> JSON:
    """Merge chunks into a chat.completion, keeping template's top-level keys."""
    result = dict(template)
    result["object"] = "chat.completion"
    merged: dict[int, _Choice] = {}
    for chunk in chunks:
        if chunk.get("usage") is not None:
            result["usage"] = chunk["usage"]
        if "x_toolshim" in chunk:
            result["x_toolshim"] = chunk["x_toolshim"]
        for choice in chunk.get("choices") or []:
            index = choice.get("index", 0)
            merged.setdefault(index, _Choice()).add(choice)
    result["choices"] = [merged[i].finish(i) for i in sorted(merged)]
    return result


def _delta(message: JSON) -> JSON:
    delta = {k: v for k, v in message.items() if k != "tool_calls"}
    calls = message.get("tool_calls")
    if isinstance(calls, list) and calls:
        delta["tool_calls"] = [
            {**call, "index": i} for i, call in enumerate(calls) if isinstance(call, dict)
        ]
    return delta


class _Choice:
    """Accumulates one choice's deltas like the OpenAI SDK: text fields
    concatenated, tool calls by index (id/type/name first seen, arguments
    concatenated)."""

    def __init__(self) -> None:
        self.message: dict[str, Any] = {"role": "assistant"}
        self.calls: dict[int, dict[str, Any]] = {}
        self.finish_reason: str | None = None
        self.extras: dict[str, Any] = {}

    def add(self, choice: JSON) -> None:
        if choice.get("finish_reason") is not None:
            self.finish_reason = choice["finish_reason"]
        for key, value in choice.items():
            if key not in _CHOICE_KEYS and (value is not None or key not in self.extras):
                self.extras[key] = value
        for key, value in (choice.get("delta") or {}).items():
            if key == "tool_calls":
                for call in value or []:
                    self._add_call(call)
            elif (
                isinstance(value, str) and isinstance(self.message.get(key), str) and key != "role"
            ):
                self.message[key] += value
            elif value is not None or key not in self.message:
                self.message[key] = value

    def _add_call(self, call: JSON) -> None:
        slot = self.calls.setdefault(call.get("index", 0), {"function": {"arguments": ""}})
        fn = call.get("function") or {}
        for key in ("id", "type"):
            if call.get(key) and key not in slot:
                slot[key] = call[key]
        if fn.get("name") and "name" not in slot["function"]:
            slot["function"]["name"] = fn["name"]
        slot["function"]["arguments"] += fn.get("arguments") or ""

    def finish(self, index: int) -> JSON:
        message = dict(self.message)
        # OpenAI always sends `content` (null beside tool calls); a "" that
        # came in stays "" (Ollama).
        message.setdefault("content", None)
        if self.calls:
            message["tool_calls"] = [_wire(self.calls[i]) for i in sorted(self.calls)]
        return {
            "index": index,
            "message": message,
            **self.extras,
            "finish_reason": self.finish_reason,
        }


def _wire(slot: dict[str, Any]) -> JSON:
    fn = slot["function"]
    return {
        "id": slot.get("id"),
        "type": slot.get("type", "function"),
        "function": {"name": fn.get("name", ""), "arguments": fn["arguments"]},
    }
