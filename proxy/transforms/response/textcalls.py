"""Tool calls the model wrote as text in `content`, recovered into `tool_calls` deltas.

Owns: feeding choice 0's content through `StreamRecovery`, sending prose on
as it comes and each recovered call as one whole-call `tool_calls` delta
(indexes from 100 so they never collide with native calls; CallAssembly
renumbers, checks, and sets finish_reason), and the "text_calls_recovered"
observation. Must not: look inside reasoning (kept verbatim when the
reasoning policy is "pass"), validate calls, touch other choices, or do I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import orjson

from proxy.formats.base import ParsedCall
from proxy.formats.stream import Item, StreamRecovery
from proxy.transforms.response.choices import choice_zero, replace_choice
from proxy.transforms.response.hooks import PlainHooks
from proxy.types import JSON, Chunk, Observation

_FIRST_INDEX = 100


class TextCallRecovery(PlainHooks):
    """Sans-IO stage: `feed(chunk) -> chunks`, `flush() -> chunks`."""

    def __init__(
        self,
        offered: Mapping[str, JSON],
        preferred_format: str | None,
        model: str,
        id_factory: Callable[[], str],
    ) -> None:
        self._parser = StreamRecovery(offered, preferred_format, keep_reasoning=True)
        self._model = model
        self._new_id = id_factory
        self._count = 0
        self._last: Chunk | None = None
        self._done = False
        self.observations: list[Observation] = []

    def feed(self, chunk: Chunk) -> list[Chunk]:
        index = choice_zero(chunk)
        if self._done or index is None:
            return [chunk]
        self._last = chunk
        choice = chunk["choices"][index]
        delta = choice.get("delta") if isinstance(choice.get("delta"), dict) else {}
        text = delta.get("content")
        items = self._parser.feed(text) if isinstance(text, str) and text else []
        finish = choice.get("finish_reason")
        if finish is not None:
            # Held text and calls go out before the chunk that ends the turn.
            items += self._parser.flush()
            self._done = True
        # The chunk's other fields (role, native tool_calls, other choices,
        # usage) ride on unchanged; only non-empty content is taken out.
        rest = {k: v for k, v in delta.items() if k != "content"} if text else dict(delta)
        pieces = self._chunks(items, chunk, index)
        if finish is not None:
            self._observe()
            return [*pieces, replace_choice(chunk, index, {**choice, "delta": rest})]
        if rest or chunk.get("usage") is not None or len(chunk["choices"]) > 1:
            return [replace_choice(chunk, index, {**choice, "delta": rest}), *pieces]
        return pieces

    def plain_ok(self, text: str) -> bool:
        return self._done or self._parser.plain_ok(text)

    def plain_run_ok(self, texts: list[str], joined: str) -> int:
        return len(texts) if self._done else self._parser.plain_run_ok(texts, joined)

    def take_plain(self, chunk: Chunk, text: str) -> None:
        if not self._done:
            self._last = chunk
            self._parser.take_plain(text)

    def plain_end_ok(self, finish_reason: str) -> bool:
        return self._done or self._parser.holds_nothing()

    def take_plain_end(self) -> None:
        if not self._done:
            self._done = True
            self._observe()

    def flush(self) -> list[Chunk]:
        if self._done or self._last is None:
            return []
        self._done = True
        index = choice_zero(self._last) or 0
        out = self._chunks(self._parser.flush(), self._last, index)
        self._observe()
        return out

    def _chunks(self, items: list[Item], template: Chunk, index: int) -> list[Chunk]:
        """Consecutive text joined into one content delta; one delta per call."""
        out: list[Chunk] = []
        text: list[str] = []
        for item in [*items, None]:
            if isinstance(item, str):
                text.append(item)
                continue
            if text and "".join(text):
                out.append(_piece(template, index, {"content": "".join(text)}))
            text = []
            if isinstance(item, ParsedCall):
                out.append(_piece(template, index, {"tool_calls": [self._call(item)]}))
        return out

    def _call(self, call: ParsedCall) -> dict[str, Any]:
        delta = {
            "index": _FIRST_INDEX + self._count,
            "id": self._new_id(),
            "type": "function",
            "function": {"name": call.name, "arguments": orjson.dumps(call.arguments).decode()},
        }
        self._count += 1
        return delta

    def _observe(self) -> None:
        if self._count:
            detail = {"format": self._parser.format, "count": self._count}
            self.observations.append(Observation(self._model, "text_calls_recovered", detail))


def _piece(template: Chunk, index: int, delta: dict[str, Any]) -> Chunk:
    """A content-only or call-only chunk shaped like template (choice 0 alone, no usage)."""
    top = {k: v for k, v in template.items() if k not in ("choices", "usage")}
    choice = template["choices"][index] if index < len(template.get("choices") or []) else {}
    return {
        **top,
        "choices": [{"index": choice.get("index", 0), "delta": delta, "finish_reason": None}],
    }
