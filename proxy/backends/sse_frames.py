"""SSE bytes a streaming backend would have sent, made by toolshim. Pure, sans-IO.

Two jobs at the upstream edge, so nothing after it knows the backend differs:
`completion_to_sse` turns a whole chat.completion into the event stream of the
same answer (content first, then each call whole, then the finish chunk, usage
when the client asked for it, `[DONE]`); `UsageCounter` watches a real stream
(from the translator) and, when the client asked for
`stream_options.include_usage` and the backend sent no usage chunk, makes one
to add before `[DONE]`, counted.
Must not: change an event the backend sent, or add usage the client did not ask for.
"""

from __future__ import annotations

from typing import Any

import orjson

from proxy.sse import DONE_FRAME, EVENT_JOIN, encode_data, event_payloads
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


def wants_usage(request: JSON) -> bool:
    """A stream whose client asked for the usage chunk (`stream_options.include_usage`)."""
    options = request.get("stream_options")
    return bool(request.get("stream")) and isinstance(options, dict) \
        and bool(options.get("include_usage"))


class UsageCounter:
    """Watches a stream for the usage chunk the client asked for; makes one if none came.

    `observe(data)` sees each event's data as it arrives (the translator calls
    it, so the stream is not decoded twice); `missing()` at the end
    gives the chunk to add before `[DONE]`, or None when the backend sent one.
    Completion tokens are counted as the chunks that carried text or call
    arguments (llama.cpp-style servers send one token a chunk); the prompt is
    estimated from its size.

    Most backends do send usage, so watching costs little: an event is decoded
    only when its bytes do not already say that it carries text (compact
    `"content":"x…`) or when it may hold usage, and the last chunk is kept as
    bytes, decoded only if the usage chunk has to be made.
    """

    def __init__(self, request: JSON) -> None:
        self._request = request
        """what the model read; sized only if the usage chunk has to be made."""
        self._generated = 0
        self._saw_usage = False
        self._last: bytes | None = None
        """the last event that looked like a chunk, undecoded."""
        self._reads: list[tuple[bytes, int]] = []
        """whole reads (`observe_frames`) not looked at yet, in order."""
        self._read_bytes = 0

    def observe(self, data: bytes) -> None:
        if self._reads:
            self.settle()  # what came before is looked at first, as it came
        self._observe(data)

    def _observe(self, data: bytes) -> None:
        if not _may_hold_usage(data) and data.find(b'":""') < 0 and data.find(b'"choices"') >= 0 \
                and any(data.find(key) >= 0 for key in _TEXT_KEYS):
            # A chunk with a non-empty text field and no usage: nothing to decode.
            self._last = data
            self._generated += 1
            return
        try:
            chunk = orjson.loads(data)
        except orjson.JSONDecodeError:
            return
        if isinstance(chunk, dict):
            self._observe_chunk(chunk, data)

    def observe_frames(self, body: bytes, events: int) -> None:
        """`observe` for a whole read of `events` plain events, framing included
        (`data: {...}` lines, no tool calls: flow.plain.plain_frames), looked at later.

        Most backends send the usage chunk themselves, as the last event of the
        stream: then nothing had to be counted, and `missing()` finds it without
        looking at the rest. So reads are kept, in order, and looked at only when
        `missing()` needs their count, when an event comes through `observe`, or
        once they hold `_KEPT_BYTES` (a long answer is not kept whole).
        """
        self._reads.append((body, events))
        self._read_bytes += len(body)
        if self._read_bytes > _KEPT_BYTES:
            self.settle()

    def settle(self) -> None:
        """Look at the reads kept by `observe_frames`, in order."""
        reads, self._reads, self._read_bytes = self._reads, [], 0
        for body, events in reads:
            self._observe_frames(body, events)

    def _observe_frames(self, body: bytes, events: int) -> None:
        """One whole read, looked at now.

        The last event (where a usage chunk comes) is observed on its own. The events
        before it are counted with one scan when each has one `choices` and one
        `delta` (one choice) and none has a `usage` (not even null), reasoning, an
        empty string or a spaced key: then each counts iff it holds a compact
        `"content":"` (once: a key's pattern cannot occur escaped inside a string).
        Otherwise they go event by event too.
        """
        cut = body.rfind(EVENT_JOIN)
        if cut >= 0:
            head = body[:cut + 3]
            before = events - 1
            if (head.find(b'"usage"') >= 0 or head.find(b'":""') >= 0
                    or head.find(b'": ') >= 0 or head.find(b'"reasoning') >= 0
                    or head.count(b'"choices"') != before or head.count(b'"delta"') != before):
                for data in event_payloads(head):
                    self._observe(data)
            else:
                self._generated += head.count(b'"content":"')
                start = head.rfind(EVENT_JOIN, 0, len(head) - 3)
                self._last = head[start + 9 if start >= 0 else 6:-2]  # as observe keeps it
        self._observe(_last_event(body, cut))

    def observe_chunk(self, chunk: JSON, data: bytes) -> None:
        """The same for an event its caller has decoded already (`data` its bytes)."""
        if self._reads:
            self.settle()
        self._observe_chunk(chunk, data)

    def _observe_chunk(self, chunk: JSON, data: bytes) -> None:
        if chunk.get("usage"):
            self._saw_usage = True
        if isinstance(chunk.get("choices"), list):
            self._last = data
            self._generated += any(_generates(c) for c in chunk["choices"])

    def missing(self) -> Chunk | None:
        """The usage chunk the stream lacked (once), shaped like its last chunk."""
        if self._reads and not self._saw_usage:
            body = self._reads[-1][0]
            if _holds_usage(_last_event(body, body.rfind(EVENT_JOIN))):
                self._saw_usage = True  # the usual end: the backend sent it; nothing to count
            else:
                self.settle()
        if self._saw_usage or self._last is None:
            return None
        self._saw_usage = True
        try:
            last = orjson.loads(self._last)
        except orjson.JSONDecodeError:
            return None  # the stream's last "chunk" was not one: no template for usage
        if not isinstance(last, dict):
            return None
        top = {k: v for k, v in last.items() if k not in ("choices", "usage")}
        prompt = estimate_tokens(prompt_chars(self._request))
        usage = {"prompt_tokens": prompt, "completion_tokens": self._generated,
                 "total_tokens": prompt + self._generated}
        return {**top, "choices": [], "usage": usage}


_TEXT_KEYS = (b'"content":"', b'"reasoning_content":"', b'"reasoning":"')
"""a text field opening a string, compact: with no `":""` in the event, a non-empty one."""


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


_KEPT_BYTES = 65536
"""reads `observe_frames` keeps unlooked-at, at most (then they are looked at)."""


def _last_event(body: bytes, cut: int) -> bytes:
    """The data of a read's last event (`cut`: where the last join between events is)."""
    return body[cut + 9:-2] if cut >= 0 else body[6:-2]


def _holds_usage(data: bytes) -> bool:
    """Whether an event's data is a chunk with a usage object (as `observe_chunk` judges)."""
    if not _may_hold_usage(data):
        return False
    try:
        chunk = orjson.loads(data)
    except orjson.JSONDecodeError:
        return False
    return isinstance(chunk, dict) and bool(chunk.get("usage"))


def _may_hold_usage(data: bytes) -> bool:
    """Whether an event may carry a usage object. Backends that follow the OpenAI spec
    for `include_usage` put `"usage": null` on every other chunk: those are judged by
    their bytes like the rest, not decoded one by one."""
    # find(), not `in`: a bytes needle costs `in` a TypeError made and dropped (3.11).
    return (data.find(b'"usage"') >= 0 and data.find(b'"usage":null') < 0
            and data.find(b'"usage": null') < 0)
