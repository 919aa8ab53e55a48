"""Chat completion chunks -> Anthropic Messages stream events and message object. Pure.

`MessageBuilder` is fed the chunks the chat flow hands its client (after every
check, so a tool call appears only once it passed, whole) and yields the
Messages stream's events in the documented order: `message_start`, then per
content block `content_block_start`, its deltas, `content_block_stop`, then
`message_delta` and `message_stop`. A block is always started before its first
delta and stopped before the next one starts (the SDKs' accumulators fail on a
delta for a block they never saw). Text and reasoning stream as they arrive;
the same builder, fed a whole answer's chunks, makes the non-streaming message.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from typing import Any

import orjson

from proxy.api.plain_events import plain_head, text_runs
from proxy.flow.translate import ChunkOut, as_chunks
from proxy.sse import SseFrames
from proxy.types import JSON, Chunk

Event = dict[str, Any]

_STOP_REASONS = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use",
                 "function_call": "tool_use"}


def new_id(prefix: str) -> str:
    """`msg_`, `toolu_`... and 24 random hex digits."""
    return f"{prefix}_{secrets.token_hex(12)}"


def tool_use_id(call_id: str | None, id_factory: Callable[[str], str]) -> str:
    """The tool_use id for a chat call id: `toolu_` + the call's own id, so the id
    a client sends back in tool_result reaches the backend as the id it gave."""
    if not call_id:
        return id_factory("toolu")
    return call_id if call_id.startswith("toolu_") else f"toolu_{call_id}"


class MessageBuilder:
    """feed(chunk) -> events; finish() / fail() -> the closing events."""

    def __init__(self, model: str, *, thinking: bool, input_tokens: int,
                 stop_sequences: tuple[str, ...] = (),
                 id_factory: Callable[[str], str] = new_id) -> None:
        self._new_id = id_factory
        self.thinking = thinking
        """show the model's reasoning as thinking blocks (the request enabled thinking)."""
        self.stop_sequences = stop_sequences
        self.message: JSON = {
            "id": id_factory("msg"), "type": "message", "role": "assistant", "model": model,
            "content": [], "stop_reason": None, "stop_sequence": None,
            "usage": {"input_tokens": input_tokens, "output_tokens": 0}}
        self._open: JSON | None = None
        """the block being written (its text pieces are joined when it closes)."""
        self._pieces: list[str] = []
        self._call_index: int | None = None
        """the chat tool-call index of the open tool_use block."""
        self._finish: str | None = None
        self._stop_sequence: str | None = None
        self._started = False

    def start(self) -> list[Event]:
        self._started = True
        message = {**self.message, "content": [], "usage": dict(self.message["usage"])}
        return [{"type": "message_start", "message": message}]

    def opening(self) -> bytes:
        """`message_start`'s frame the first time, then nothing: a stream writes it with
        its first piece, one write less per stream."""
        return b"" if self._started else frames(self.start())

    def feed(self, chunk: Chunk) -> list[Event]:
        events: list[Event] = []
        usage = chunk.get("usage")
        if usage and isinstance(usage, dict):
            self._take_usage(usage)
        for choice in chunk.get("choices") or ():
            if choice.get("index", 0):
                continue  # n > 1 has no Messages equivalent: the first choice answers
            delta = choice.get("delta") or choice.get("message")
            if delta:
                self._take_delta(delta, events)
            if choice.get("finish_reason"):
                self._finish = choice["finish_reason"]
                stop = choice.get("stop_reason")  # vLLM names the stop string it hit
                if isinstance(stop, str) and stop in self.stop_sequences:
                    self._stop_sequence = stop
        return events

    def feed_all(self, chunks: list[Chunk]) -> list[Event]:
        """`feed` for a batch (one upstream read): neighbouring text-only chunks make one
        text_delta (they arrived together; a client concatenates deltas anyway)."""
        events: list[Event] = []
        for item in text_runs(chunks):
            if isinstance(item, str):
                self._add("text", item, events)
            else:
                events.extend(self.feed(item))
        return events

    def feed_batch(self, batch: list[ChunkOut]) -> list[Event]:
        """`feed_all` for a batch as the flow hands it (dicts, or the upstream's bytes).

        The plain content events that open a whole read in Ollama's shape (most of a
        stream) are read for their texts alone (`plain_head`), without building every
        chunk's dicts; the rest is decoded and fed as usual. Neighbouring texts make one
        text_delta across the batch's items, as `feed_all` makes them of its dicts: the
        events do not depend on how the flow handed the chunks over (whole reads, bytes
        one by one, or dicts with `--no-fast-paths`).
        """
        if len(batch) == 1 and not isinstance(batch[0], SseFrames):
            return self.feed_all(as_chunks(batch))
        events: list[Event] = []
        texts: list[str] = []
        for item in batch:
            if isinstance(item, SseFrames):
                end, head = plain_head(item)
                texts += head
                if end == len(item):
                    continue
                item = SseFrames(item[end:])
            for piece in text_runs(as_chunks([item])):
                if isinstance(piece, str):
                    texts.append(piece)
                else:
                    self._add_texts(texts, events)
                    events += self.feed(piece)
        self._add_texts(texts, events)
        return events

    def _add_texts(self, texts: list[str], events: list[Event]) -> None:
        """The run of texts so far as one text_delta (none if empty); empties the run."""
        text = "".join(texts)
        texts.clear()
        if text:
            self._add("text", text, events)

    def finish(self) -> list[Event]:
        """Close the open block; `message_delta` with the stop reason, `message_stop`."""
        events: list[Event] = []
        self._close(events)
        message = self.message
        has_calls = any(b["type"] == "tool_use" for b in message["content"])
        reason = "tool_use" if has_calls else _STOP_REASONS.get(self._finish or "stop",
                                                                "end_turn")
        if reason == "tool_use" and not has_calls:
            reason = "end_turn"  # every call was dropped: the turn ends as a normal stop
        if self._stop_sequence is not None and not has_calls:
            reason = "stop_sequence"
        message["stop_reason"], message["stop_sequence"] = reason, self._stop_sequence
        events.append({"type": "message_delta",
                       "delta": {"stop_reason": reason, "stop_sequence": self._stop_sequence},
                       "usage": dict(message["usage"])})
        events.append({"type": "message_stop"})
        return events

    def whole(self) -> JSON:
        """The finished message as one answer: thinking, then text, then tool_use blocks,
        as the API orders them (the stages may hand a whole answer's held text on after
        its calls; a stream has already numbered its blocks as they came)."""
        rank = {"thinking": 0, "text": 1, "tool_use": 2}
        self.message["content"].sort(key=lambda block: rank[block["type"]])
        return self.message

    def fail(self, error_type: str, message: str) -> list[Event]:
        """A failure after the stream started: the API's `error` event, no message_stop."""
        return [{"type": "error", "error": {"type": error_type, "message": message}}]

    # --- blocks ------------------------------------------------------------

    def _take_usage(self, usage: JSON) -> None:
        prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
        if isinstance(prompt, int):
            self.message["usage"]["input_tokens"] = prompt
        if isinstance(completion, int):
            self.message["usage"]["output_tokens"] = completion

    def _take_delta(self, delta: JSON, events: list[Event]) -> None:
        reasoning = delta.get("reasoning_content") or delta.get("reasoning")
        if reasoning and isinstance(reasoning, str) and self.thinking:
            self._add("thinking", reasoning, events)
        content = delta.get("content")
        if content and isinstance(content, str):
            self._add("text", content, events)
        for call in delta.get("tool_calls") or ():
            if isinstance(call, dict):
                self._add_call(call, events)

    def _add(self, kind: str, text: str, events: list[Event]) -> None:
        index = self._index_for(kind, events)
        self._pieces.append(text)  # joined once at the close: += would be quadratic
        delta = {"type": "text_delta", "text": text} if kind == "text" else \
            {"type": "thinking_delta", "thinking": text}
        events.append({"type": "content_block_delta", "index": index, "delta": delta})

    def _index_for(self, kind: str, events: list[Event]) -> int:
        """The index of the open block of `kind`, opening one (and closing another)."""
        if self._open is not None and self._open["type"] == kind:
            return len(self.message["content"]) - 1
        self._close(events)
        block: JSON = {"type": "text", "text": ""} if kind == "text" else \
            {"type": "thinking", "thinking": "", "signature": ""}
        return self._start(block, events)

    def _start(self, block: JSON, events: list[Event]) -> int:
        index = len(self.message["content"])
        self.message["content"].append(block)
        self._open = block
        events.append({"type": "content_block_start", "index": index,
                       "content_block": {k: v for k, v in block.items() if k != "signature"}
                       if block["type"] == "thinking" else dict(block)})
        return index

    def _add_call(self, call: JSON, events: list[Event]) -> None:
        function = call.get("function") or {}
        index = call.get("index", 0)
        open_call = self._open is not None and self._open["type"] == "tool_use"
        if not open_call or self._call_index != index:
            if not function.get("name") and open_call:
                return  # a piece of a call already closed: the flow sends calls whole
            self._close(events)
            block: JSON = {"type": "tool_use", "id": tool_use_id(call.get("id"), self._new_id),
                     "name": function.get("name") or "", "input": {}}
            position = self._start(block, events)
            self._call_index = index
        else:
            position = len(self.message["content"]) - 1
        arguments = function.get("arguments")
        if isinstance(arguments, str) and arguments:
            self._pieces.append(arguments)
            events.append({"type": "content_block_delta", "index": position,
                           "delta": {"type": "input_json_delta", "partial_json": arguments}})

    def _close(self, events: list[Event]) -> None:
        block, self._open = self._open, None
        if block is None:
            return
        index = len(self.message["content"]) - 1
        text, self._pieces = "".join(self._pieces), []
        if block["type"] == "text":
            block["text"] = text
        elif block["type"] == "thinking":
            block["thinking"] = text
            # The API signs its thinking so it can check it when sent back; a local
            # model's is never checked (toolshim drops history thinking), yet clients
            # expect the field and its delta.
            block["signature"] = self._new_id("sig")
            events.append({"type": "content_block_delta", "index": index,
                           "delta": {"type": "signature_delta",
                                     "signature": block["signature"]}})
        else:
            block["input"] = _arguments(text)
            self._call_index = None
        events.append({"type": "content_block_stop", "index": index})


def _arguments(text: str) -> JSON:
    """A call's arguments as the object `input` must be (`{}` when there are none)."""
    if not text:
        return {}
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        # Only `invalid_tool_calls: keep` lets broken arguments through; the client
        # still gets an object, with the text the model wrote.
        return {"_raw_arguments": text}
    return value if isinstance(value, dict) else {"_raw_arguments": text}


def frames(events: list[Event]) -> bytes:
    """SSE frames: `event:` the data's own `type`, then `data:` (no `[DONE]` in this API)."""
    parts: list[bytes] = []
    for event in events:
        parts += (b"event: ", event["type"].encode(), b"\ndata: ", orjson.dumps(event), b"\n\n")
    return b"".join(parts)


PING_FRAME = frames([{"type": "ping"}])
