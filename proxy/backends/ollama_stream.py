"""Ollama's native /api/chat answers -> OpenAI chat chunks and completions.

Sans-IO: `NativeStream.feed(bytes)` takes NDJSON as it arrives (lines cut anywhere)
and returns OpenAI SSE bytes at once; `end()` takes the unterminated rest. Native
shapes (docs/backends.md 1c, R4): content and `thinking` per line, tool calls whole with
`arguments` as an object (on a `done:false` line, or all on the `done:true` line in
the llama-server variant), `done_reason` stop/length, token counts on the last line,
and `{"error": ...}` as a line of its own mid-stream. `native_completion` maps the
non-stream answer with the same delta rules, so the two cannot drift.
Must not: do I/O, check calls against the offered tools (the response stages do),
or hold content back: each line's text goes out as soon as it is read.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

from proxy.errors import ApiError, error_body
from proxy.sse import DONE_FRAME, encode_data
from proxy.types import JSON, Chunk

IdFactory = Callable[[], str]


class NativeStream:
    """NDJSON lines in, `data: <chunk>` frames out; usage kept for the caller.

    A line that is not a JSON object ends the translation: `feed` (or `end`) returns
    the frames of the lines before it and sets `failure`, which the caller raises
    after handing those on. Nothing translated before a bad line is lost, whether it
    came in an earlier read or in the same one.
    """

    def __init__(self, model: str, created: int, completion_id: str, *,
                 include_usage: bool, id_factory: IdFactory) -> None:
        self.base: JSON = {"id": completion_id, "object": "chat.completion.chunk",
                           "created": created, "model": model}
        head = orjson.dumps(self.base)[:-1]
        # Plain content lines (almost all of a stream) are framed without building dicts.
        self._content_head = b"data: " + head + b',"choices":[{"index":0,"delta":{"content":'
        self.include_usage = include_usage
        self.calls = _Calls(id_factory)
        self.role_sent = False
        self.done = False
        self.failure: ApiError | None = None
        self.prompt_eval_count: int | None = None
        self._tail = b""

    def feed(self, data: bytes) -> bytes:
        if self.failure is not None:
            return b""
        buf = self._tail + data if self._tail else data
        lines = buf.split(b"\n")
        self._tail = lines.pop()
        if len(lines) > 1:
            # A read of many lines (a fast stream) is decoded as one JSON array: one
            # call instead of one per line. Lines that are each
            # a JSON value decode to exactly those; broken ones fail to join or join into
            # another count, and are then decoded one by one, which finds the bad one.
            try:
                objs = orjson.loads(b"[" + b",".join(lines) + b"]")
            except orjson.JSONDecodeError:
                objs = None
            if type(objs) is list and len(objs) == len(lines):
                return self._frames(objs)
        return self._frames([line for line in lines if line.strip()])

    def end(self) -> bytes:
        """The last line may come without its newline."""
        tail, self._tail = self._tail, b""
        return self._frames([tail]) if tail.strip() and self.failure is None else b""

    def _frames(self, items: list[Any]) -> bytes:
        """Lines (bytes) or their decoded values, framed until the answer is done or a
        line fails (`failure`)."""
        out: list[bytes] = []
        for item in items:
            if self.done:
                break
            try:
                out.append(self._line(item) if type(item) is bytes else self._object(item))
            except ApiError as exc:
                self.failure = exc
                break
        return b"".join(out)

    def _line(self, line: bytes) -> bytes:
        try:
            obj = orjson.loads(line)
        except orjson.JSONDecodeError:
            obj = None
        return self._object(obj)

    def _object(self, obj: Any) -> bytes:
        if not isinstance(obj, dict):
            raise ApiError(502, "upstream sent a line that is not JSON", code="upstream_invalid")
        if "error" in obj:
            # Ollama's mid-stream failure: handed on as an error event, which ends the stream.
            self.done = True
            return encode_data(orjson.dumps(error_body(str(obj["error"]), 500)))
        found = obj.get("message")
        message: JSON = found if isinstance(found, dict) else {}
        if not obj.get("done"):
            content = message.get("content")
            if self.role_sent and content and len(message) <= 2 and "thinking" not in message \
                    and "tool_calls" not in message:
                return self._content_head + orjson.dumps(content) + b'},"finish_reason":null}]}\n\n'
        frames = b"".join(encode_data(orjson.dumps(c)) for c in self.chunks(obj, message))
        return frames + DONE_FRAME if self.done else frames

    def chunks(self, obj: JSON, message: JSON) -> list[Chunk]:
        """The chunks one native line stands for."""
        out = [self._chunk(delta, None) for delta in _deltas(message, self.calls)]
        if obj.get("done"):
            self.done = True
            self.prompt_eval_count = _count(obj.get("prompt_eval_count"))
            out.append(self._chunk({}, finish_reason(obj.get("done_reason"), self.calls.count)))
            if self.include_usage:
                out.append({**self.base, "choices": [], "usage": usage(obj)})
        return out

    def _chunk(self, delta: JSON, finish: str | None) -> Chunk:
        if not self.role_sent:
            delta = {"role": "assistant", **delta}
            self.role_sent = True
        return {**self.base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


class _Calls:
    """Whole native calls -> OpenAI tool-call deltas, numbered across the answer."""

    def __init__(self, id_factory: IdFactory) -> None:
        self.id_factory = id_factory
        self.count = 0

    def delta(self, call: Any) -> JSON | None:
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            return None
        arguments = function.get("arguments")
        text = arguments if isinstance(arguments, str) else orjson.dumps(
            arguments if arguments is not None else {}).decode()
        call_id = call.get("id")
        out = {"index": self.count,
               "id": call_id if isinstance(call_id, str) and call_id else self.id_factory(),
               "type": "function", "function": {"name": function["name"], "arguments": text}}
        self.count += 1
        return out


def _deltas(message: JSON, calls: _Calls) -> list[JSON]:
    """Reasoning, content and tool calls of one native message, one delta each."""
    out: list[JSON] = []
    thinking = message.get("thinking")
    if isinstance(thinking, str) and thinking:
        out.append({"reasoning_content": thinking})
    content = message.get("content")
    if isinstance(content, str) and content:
        out.append({"content": content})
    raw_calls = message.get("tool_calls")
    if isinstance(raw_calls, list) and raw_calls:
        found = [d for d in (calls.delta(c) for c in raw_calls) if d is not None]
        if found:
            out.append({"tool_calls": found})
    return out


def finish_reason(done_reason: Any, calls: int) -> str:
    """Native never says `tool_calls`; OpenAI clients wait for it after calls."""
    if done_reason == "length":
        return "length"
    return "tool_calls" if calls else "stop"


def usage(obj: JSON) -> JSON:
    prompt = _count(obj.get("prompt_eval_count")) or 0
    completion = _count(obj.get("eval_count")) or 0
    return {"prompt_tokens": prompt, "completion_tokens": completion,
            "total_tokens": prompt + completion}


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def native_completion(obj: Any, *, model: str, created: int, completion_id: str,
                      id_factory: IdFactory) -> Chunk:
    """A whole native answer (`stream: false`) -> an OpenAI chat.completion."""
    if not isinstance(obj, dict) or not isinstance(obj.get("message"), dict):
        raise ApiError(502, "upstream sent an answer that is not a chat response",
                       code="upstream_invalid")
    calls = _Calls(id_factory)
    message: JSON = {"role": "assistant", "content": ""}
    for delta in _deltas(obj["message"], calls):
        message.update(delta)
    return {"id": completion_id, "object": "chat.completion", "created": created,
            "model": model, "choices": [{"index": 0, "message": message,
                                         "finish_reason": finish_reason(obj.get("done_reason"),
                                                                        calls.count)}],
            "usage": usage(obj)}
