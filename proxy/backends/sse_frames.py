"""SSE bytes a streaming backend would have sent, made by toolshim. Pure, sans-IO.

Two jobs at the upstream edge, so nothing after it knows the backend differs:
`completion_to_sse` turns a whole chat.completion into the event stream of the
same answer (content first, then each call whole, then the finish chunk, usage
when the client asked for it, `[DONE]`); `UsageFiller` passes a real stream
through and, when the client asked for `stream_options.include_usage` and the
backend sent no usage chunk, adds one before `[DONE]`, counted.
"""

from __future__ import annotations

from typing import Any

import orjson

from proxy.sse import DONE_FRAME, SseDecoder, SseEvent, encode_data
from proxy.types import JSON, Chunk

CHARS_PER_TOKEN = 4
"""A prompt-size estimate when the backend reports none: the usual ~4 chars a token."""


def completion_to_sse(completion: JSON, include_usage: bool) -> bytes:
    """The event stream of a non-stream completion (choice 0 carries the calls)."""
    top = {k: v for k, v in completion.items() if k not in ("choices", "usage")}
    top["object"] = "chat.completion.chunk"
    frames: list[Chunk] = []
    for position, choice in enumerate(c for c in completion.get("choices") or []
                                      if isinstance(c, dict)):
        index = choice.get("index", position)
        found = choice.get("message")
        message: JSON = found if isinstance(found, dict) else {}
        frames.extend(_deltas(top, index, message))
        frames.append(_chunk(top, index, {}, choice.get("finish_reason") or "stop"))
    usage = completion.get("usage")
    if include_usage and isinstance(usage, dict):
        frames.append({**top, "choices": [], "usage": usage})
    return b"".join(encode_data(orjson.dumps(f)) for f in frames) + DONE_FRAME


def _deltas(top: JSON, index: int, message: JSON) -> list[Chunk]:
    content = message.get("content")
    first: dict[str, Any] = {"role": "assistant", "content": content if content else ""}
    for extra in ("reasoning_content", "reasoning"):
        if isinstance(message.get(extra), str) and message[extra]:
            first[extra] = message[extra]
    out = [_chunk(top, index, first, None)]
    calls = [c for c in message.get("tool_calls") or [] if isinstance(c, dict)]
    # The legacy `function_call` beside tool_calls (llama-cpp-python adds one whose
    # name ends in ':') repeats the first call: the calls alone are the answer.
    for position, call in enumerate(calls):
        out.append(_chunk(top, index, {"tool_calls": [{**call, "index": position}]}, None))
    return out


def _chunk(top: JSON, index: int, delta: JSON, finish: str | None) -> Chunk:
    return {**top, "choices": [{"index": index, "delta": delta, "finish_reason": finish}]}


def estimate_tokens(text_chars: int) -> int:
    return max(1, -(-text_chars // CHARS_PER_TOKEN))


class UsageFiller:
    """feed(bytes) -> bytes, end() -> bytes: a stream plus the usage chunk it lacked.

    Completion tokens are counted as the chunks that carried text or call
    arguments (llama.cpp-style servers send one token a chunk); the prompt is
    estimated from its size. Events are re-framed as `data:` lines; comments
    (keep-alive pings) are dropped.
    """

    def __init__(self, prompt_chars: int) -> None:
        self._decoder = SseDecoder()
        self._prompt_tokens = estimate_tokens(prompt_chars)
        self._generated = 0
        self._saw_usage = False
        self._last: JSON | None = None
        self._done = False

    def feed(self, piece: bytes) -> bytes:
        return b"".join(self._event(e) for e in self._decoder.feed(piece))

    def end(self) -> bytes:
        """End of the upstream bytes: what the decoder held, and usage if none came."""
        tail = b"".join(self._event(e) for e in self._decoder.flush())
        if self._done:
            return tail
        return tail + self._usage_frame()

    def _event(self, event: SseEvent) -> bytes:
        if self._done:
            return b""
        if event.is_done:
            self._done = True
            return self._usage_frame() + DONE_FRAME
        self._observe(event.data)
        return encode_data(event.data)

    def _observe(self, data: bytes) -> None:
        try:
            chunk = orjson.loads(data)
        except orjson.JSONDecodeError:
            return
        if not isinstance(chunk, dict):
            return
        if chunk.get("usage"):
            self._saw_usage = True
        if isinstance(chunk.get("choices"), list):
            self._last = chunk
            self._generated += any(_generates(c) for c in chunk["choices"])

    def _usage_frame(self) -> bytes:
        if self._saw_usage or self._last is None:
            return b""
        self._saw_usage = True
        top = {k: v for k, v in self._last.items() if k not in ("choices", "usage")}
        usage = {"prompt_tokens": self._prompt_tokens, "completion_tokens": self._generated,
                 "total_tokens": self._prompt_tokens + self._generated}
        return encode_data(orjson.dumps({**top, "choices": [], "usage": usage}))


def _generates(choice: Any) -> bool:
    delta = choice.get("delta") if isinstance(choice, dict) else None
    if not isinstance(delta, dict):
        return False
    if any(isinstance(delta.get(k), str) and delta[k] for k in
           ("content", "reasoning_content", "reasoning")):
        return True
    for call in delta.get("tool_calls") or []:
        fn = call.get("function") if isinstance(call, dict) else None
        if isinstance(fn, dict) and fn.get("arguments"):
            return True
    return False


def prompt_chars(request: JSON) -> int:
    """Size of what the model reads: messages and tools as sent."""
    return len(orjson.dumps([request.get("messages"), request.get("tools")]))
