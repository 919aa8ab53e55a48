"""Upstream answer bytes -> chat chunks, sans-IO: the reference decoder.

Owns: decoding one upstream answer (an SSE stream, or a whole JSON completion
from a backend that ignored `stream`), checking each chunk's shape, running
the response stages, and how the answer ends: normally, or with exactly one
`failure` after everything already received has been handed out. A broken
answer never gets a made-up finish: finish reasons the stages would add at
their flush are removed, so the client sees the content and then the error.

This is the whole behaviour, one event at a time: every chunk decoded, checked
and fed through the stages. The fast paths (`fast_stream`, `fast_answer`)
subclass it and skip work where the stages vouch nothing would change; with
`--no-fast-paths` these classes run alone, and the client must get the same
bytes either way (tests/flow/test_translate_fast_path.py and its siblings),
but where the relay judges events by their bytes, by design: what it relays
keeps the upstream's JSON spelling and is checked for its shape no further
(`plain.relay_as_is`), and a stream that does not open with reasoning keeps a
later `<think>` in its content (`fast_stream`).

Out come chunks: a dict here; on the fast paths also the chunk's JSON `bytes`
as the upstream sent them, or a whole read of such events in their SSE
framing (`SseFrames`). `as_chunks` turns any batch into dicts.

Must not: do I/O, know the client's wire format (SSE framing, JSON
assembly and error frames belong to the route), or read settings.
"""

from __future__ import annotations

from typing import Any, Protocol

import orjson

from proxy.backends.sse_frames import UsageCounter
from proxy.errors import ApiError
from proxy.nesting import depth_exceeds, may_nest_deeper
from proxy.sse import EVENT_JOIN, KEEPALIVE, SseDecoder, SseEvent, SseFrames, event_payloads
from proxy.transforms.response import ResponsePipeline
from proxy.transforms.response.completion import completion_to_chunks
from proxy.types import Chunk

ChunkOut = Chunk | bytes
"""A chunk as a dict, or (fast path) its upstream JSON bytes, unparsed, or `SseFrames`."""


def as_chunks(batch: list[ChunkOut]) -> list[Chunk]:
    """A batch as chunk dicts, for readers that need them: upstream bytes decoded,
    frames split into their events, keep-alives (no chunk) left out."""
    out: list[Chunk] = []
    for item in batch:
        if isinstance(item, SseFrames):
            # Its events are `data: {...}` lines joined by blank lines, nothing else
            # (plain.plain_frames): one JSON array, decoded in one call. Events that are
            # each broken could join into fewer valid ones: then one by one (raises).
            chunks = orjson.loads(b"[" + item[6:-2].replace(EVENT_JOIN, b'},{"') + b"]")
            if len(chunks) != item.count(b"\n\n"):
                chunks = [orjson.loads(data) for data in event_payloads(item)]
            out.extend(chunks)
        elif isinstance(item, bytes):
            if item is not KEEPALIVE:
                out.append(orjson.loads(item))
        else:
            out.append(item)
    return out

MAX_EVENT_BYTES = 8 * 1024 * 1024
"""One SSE event, or a whole JSON answer, larger than this ends the answer."""


class Translator(Protocol):
    """What the driver needs from a translator."""

    finished: bool
    failure: ApiError | None
    verbatim: bytes | None

    def feed(self, data: bytes) -> list[ChunkOut]: ...

    def end(self) -> list[ChunkOut]: ...

    def fail(self, error: ApiError) -> list[ChunkOut]: ...


def invalid(message: str) -> ApiError:
    return ApiError(502, message, code="upstream_invalid")


class Ending:
    """The ending both translators share: flush the stages once, honestly.

    State: `finished` (nothing more is taken), `failure` (how it broke, if it
    did), `verbatim` (the upstream's whole answer as it came, once it ended,
    when the chunks handed out are exactly it: only `fast_answer` sets it)."""

    __slots__ = ("failure", "finished", "pipeline", "verbatim")

    def __init__(self, pipeline: ResponsePipeline) -> None:
        self.pipeline = pipeline
        self.finished = False
        self.failure: ApiError | None = None
        self.verbatim: bytes | None = None

    def fail(self, error: ApiError) -> list[ChunkOut]:
        """The answer broke: what the stages hold, without a finish, then `failure`."""
        if self.finished:
            return []
        self.finished, self.failure = True, error
        return [c for c in (_unfinished(c) for c in self.pipeline.flush()) if c is not None]

    def _close(self) -> list[ChunkOut]:
        self.finished = True
        return list(self.pipeline.flush())


class SseTranslator(Ending):
    """An upstream SSE chat stream -> chunks, every event decoded and staged.

    State, besides the ending's: the SSE decoder's partial event, `_unframed`
    (bytes fed since the last whole event: an event too large ends the
    stream), `saw_finish` (a finish reason came: a close without `[DONE]` is
    then a whole answer), and `usage` (the client asked for usage: counts the
    stream, adds the usage chunk if the upstream sent none).
    """

    __slots__ = ("_decoder", "_unframed", "max_event_bytes", "saw_finish", "usage")

    def __init__(self, pipeline: ResponsePipeline, *, usage: UsageCounter | None = None,
                 max_event_bytes: int = MAX_EVENT_BYTES) -> None:
        super().__init__(pipeline)
        self.usage = usage
        self.max_event_bytes = max_event_bytes
        self.saw_finish = False
        self._decoder = SseDecoder()
        self._unframed = 0

    def feed(self, data: bytes) -> list[ChunkOut]:
        if self.finished:
            return []
        events = self._decoder.feed(data)
        # What follows the last line break is the start of the next event.
        self._unframed = (len(data) - data.rfind(b"\n") - 1) if events \
            else self._unframed + len(data)
        out = self._take(events)
        if not self.finished and self._unframed > self.max_event_bytes:
            out.extend(self.fail(invalid(
                f"upstream sent an event larger than {self.max_event_bytes} bytes")))
        return out

    def end(self) -> list[ChunkOut]:
        """The upstream closed the stream: flush, or fail if it never finished."""
        if self.finished:
            return []
        out = self._take(self._decoder.flush())
        if self.finished:
            return out
        if not self.saw_finish:
            return out + self.fail(ApiError(502, "upstream closed the stream before it finished",
                                            code="upstream_incomplete"))
        return out + self._close()

    def _take(self, events: list[SseEvent]) -> list[ChunkOut]:
        out: list[ChunkOut] = []
        for event in events:
            if self.finished:
                break
            out.extend(self._close() if event.is_done else self._decoded(event.data))
        return out

    def _decoded(self, data: bytes) -> list[ChunkOut]:
        """An event's data through JSON decoding, the usage count and the stages."""
        try:
            chunk = orjson.loads(data)
        except orjson.JSONDecodeError:
            chunk = None
        if self.usage is not None and isinstance(chunk, dict):
            self.usage.observe_chunk(chunk, data)
        return self._staged(chunk)

    def _staged(self, chunk: Any) -> list[ChunkOut]:
        """A decoded event: checked, then the stages."""
        if not isinstance(chunk, dict):
            return self.fail(invalid("upstream sent data that is not a JSON chunk"))
        if "error" in chunk:
            return self.fail(_backend_error(chunk["error"]))
        problem = chunk_problem(chunk)
        if problem:
            return self.fail(invalid(f"upstream sent an invalid chunk: {problem}"))
        if any(choice.get("finish_reason") for choice in chunk["choices"]):
            self.saw_finish = True
        return list(self.pipeline.feed(chunk))

    def _close(self) -> list[ChunkOut]:
        out = super()._close()
        made = self.usage.missing() if self.usage is not None else None
        return out if made is None else [*out, made]


class CompletionTranslator(Ending):
    """A whole upstream chat.completion (JSON) -> the chunks it stands for.

    State, besides the ending's: the body's parts so far and their size."""

    __slots__ = ("_parts", "_size", "max_bytes")

    def __init__(self, pipeline: ResponsePipeline, *,
                 max_bytes: int = MAX_EVENT_BYTES * 8) -> None:
        super().__init__(pipeline)
        self.max_bytes = max_bytes
        self._parts: list[bytes] = []
        self._size = 0

    def feed(self, data: bytes) -> list[ChunkOut]:
        if self.finished:
            return []
        self._size += len(data)
        if self._size > self.max_bytes:
            self._parts = []
            return self.fail(invalid("upstream answer is too large"))
        self._parts.append(data)
        return []

    def end(self) -> list[ChunkOut]:
        if self.finished:
            return []
        raw, self._parts = b"".join(self._parts), []
        try:
            completion = orjson.loads(raw)
        except orjson.JSONDecodeError:
            completion = None
        if not isinstance(completion, dict) or completion_problem(
                completion, walk=may_nest_deeper(raw, 200)):
            return self.fail(invalid("upstream sent an answer that is not a chat completion"))
        return self._translated(completion, raw)

    def _translated(self, completion: dict[str, Any], raw: bytes) -> list[ChunkOut]:
        """A checked completion (`raw` its bytes) as its chunks through the stages."""
        out: list[ChunkOut] = []
        for chunk in completion_to_chunks(completion):
            out.extend(self.pipeline.feed(chunk))
        return out + self._close()


def chunk_problem(chunk: dict[str, Any]) -> str | None:
    """Why a decoded chunk is not a chat.completion.chunk the stages can read, or None."""
    return _choices_problem(chunk.get("choices"), "delta")


def completion_problem(completion: dict[str, Any], walk: bool = True) -> str | None:
    """Why a decoded body is not a chat.completion the stages can read, or None.

    `walk=False`: the caller knows from the raw bytes it cannot nest too deeply."""
    if walk and depth_exceeds(completion, 200):  # orjson.dumps stops at 254 levels
        return "nested too deeply"
    return _choices_problem(completion.get("choices"), "message")


def _choices_problem(choices: Any, field: str) -> str | None:
    """The shape the stages rely on: choices of objects whose `field` (delta or
    message) is an object, with tool_calls a list of objects."""
    if not isinstance(choices, list):
        return "choices is not a list"
    for choice in choices:
        if not isinstance(choice, dict):
            return "a choice is not an object"
        body = choice.get(field)
        if body is not None and not isinstance(body, dict):
            return f"{field} is not an object"
        calls = (body or {}).get("tool_calls")
        if calls is not None and not (isinstance(calls, list)
                                      and all(isinstance(c, dict) for c in calls)):
            return "tool_calls is not a list of objects"
    return None


def _backend_error(err: Any) -> ApiError:
    """A backend's own mid-stream error event (vLLM, Ollama): its message, passed on."""
    message = err.get("message") if isinstance(err, dict) else err
    return ApiError(500, str(message))


def _unfinished(chunk: Chunk) -> Chunk | None:
    """The chunk without finish reasons; None if nothing else is left in it."""
    choices = chunk.get("choices") or []
    if not any(c.get("finish_reason") for c in choices):
        return chunk
    kept = [{**c, "finish_reason": None} for c in choices if c.get("delta")]
    if not kept and chunk.get("usage") is None:
        return None
    return {k: v for k, v in chunk.items() if k != "x_toolshim"} | {"choices": kept}
