"""Upstream answer bytes -> chat chunks, sans-IO: `feed(bytes)`, `end()`, `fail(error)`.

Owns: decoding one upstream answer (an SSE stream, or a whole JSON completion
from a backend that ignored `stream`), checking each chunk's shape, running
the response stages, and how the answer ends: normally, or with exactly one
`failure` after everything already received has been handed out. A broken
answer never gets a made-up finish: finish reasons the stages would add at
their flush are removed, so the client sees the content and then the error.

Out come chunks: a dict, or, on the fast path, the chunk's JSON `bytes`
exactly as the upstream sent them (never decoded, see `_relay_as_is`), or a
whole read of such events still in their SSE framing (`SseFrames`, see
`_whole_read`). `as_chunks` turns any batch into dicts.

Must not: do I/O, know the client's wire format (SSE framing, JSON
assembly and error frames belong to the route), or read settings.
"""

from __future__ import annotations

from typing import Any, Protocol

import orjson

from proxy.backends.sse_frames import UsageCounter
from proxy.errors import ApiError
from proxy.formats.detect import REASONING_TAGS
from proxy.nesting import depth_exceeds, may_nest_deeper
from proxy.sse import (
    DONE,
    DONE_FRAME,
    EVENT_JOIN,
    KEEPALIVE,
    SseDecoder,
    SseEvent,
    SseFrames,
    event_payloads,
    one_line_event,
    one_line_events,
)
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
            # (_plain_frames): one JSON array, decoded in one call. Events that are
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


class _Ending:
    """The ending both translators share: flush the stages once, honestly."""

    def __init__(self, pipeline: ResponsePipeline) -> None:
        self.pipeline = pipeline
        self.finished = False
        self.failure: ApiError | None = None
        self.verbatim: bytes | None = None
        """the upstream's whole answer as it came, once it ended, when the chunks handed
        out are exactly it (CompletionTranslator: nothing changed by any stage)."""

    def fail(self, error: ApiError) -> list[ChunkOut]:
        """The answer broke: what the stages hold, without a finish, then `failure`."""
        if self.finished:
            return []
        self.finished, self.failure = True, error
        return [c for c in (_unfinished(c) for c in self.pipeline.flush()) if c is not None]

    def _close(self) -> list[ChunkOut]:
        self.finished = True
        return list(self.pipeline.flush())

    def _passes_end(self, chunk: Chunk) -> bool:
        """A chunk that only ends the answer (`bare_finish`) which every stage vouches
        would pass unchanged (`passes_plain_end`): noted by them, to be relayed as it is."""
        reason = bare_finish(chunk)
        return reason is not None and self.pipeline.passes_plain_end(reason)


class SseTranslator(_Ending):
    """An upstream SSE chat stream -> chunks.

    `decode=False` starts on the fast path: a `data:` event that looks like
    a plain JSON chunk (starts `{"`, ends `}`, no `tool_calls`, no
    `error`) is handed out as bytes; the first one that does not switches
    to decoding for the rest of the stream.

    When the stages split reasoning (`reasoning: move | strip`), the fast
    path first sniffs: events are held, undecoded by the stages, until the
    first one with visible content; content that starts with a reasoning
    marker (after whitespace) sends everything through the stages from the
    start, any other content releases the held events as they came and the
    rest of the stream stays on the fast path. A `<think>` further into a
    plain answer is then left in content (that is what `pass` does).

    `plain=True` shortens the decoding path too (tools offered, or after the
    switch): a chunk whose only delta is content is decoded and shown to the
    stages (`pipeline.passes_plain`); when none of them would change it (no
    marker, fence, line-start brace or tag in it, nothing held), they note
    it and its bytes go out as they came, neither rebuilt nor re-encoded.
    Anything else goes through the stages as before.
    """

    def __init__(self, pipeline: ResponsePipeline, *, decode: bool, plain: bool = False,
                 usage: UsageCounter | None = None,
                 max_event_bytes: int = MAX_EVENT_BYTES) -> None:
        super().__init__(pipeline)
        self.decode = decode
        self.plain = plain
        self.usage = usage
        """the client asked for usage: counts the stream, adds the chunk if none came."""
        self.max_event_bytes = max_event_bytes
        self.saw_finish = False
        self._decoder = SseDecoder()
        self._sniffing = not decode and pipeline.splits_reasoning
        self._sniffed: list[bytes] = []
        """events held while sniffing for a reasoning marker."""
        self._unframed = 0
        """bytes fed since the last whole event: an event too large ends the stream."""

    def feed(self, data: bytes) -> list[ChunkOut]:
        if self.finished:
            return []
        if self._decoder.idle:
            if not self.decode:
                if not self._sniffing and one_line_event(data) and _nothing_for_stages(data):
                    # What a slow stream reads: one plain event, fewer scans than
                    # `_whole_read` makes to count and check a read of many.
                    self._unframed = 0
                    return [self._relayed(data, 1)]
                whole = self._whole_read(data)
                if whole is not None:
                    return whole
            elif self.plain and not self._sniffing and one_line_event(data):
                # What a slow stream reads: one whole event of one `data:` line. Straight
                # to decoding, past the SSE decoder and the run bookkeeping.
                self._unframed = 0
                return self._decoded(data[6:-2], one_line=True)
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
        out = self._take(self._decoder.flush()) + self._unsniff()
        if self.finished:
            return out
        if not self.saw_finish:
            return out + self.fail(ApiError(502, "upstream closed the stream before it finished",
                                            code="upstream_incomplete"))
        return out + self._close()

    def _whole_read(self, data: bytes) -> list[ChunkOut] | None:
        """The fast path for a whole read at once, or None to go event by event.

        A read of whole events that are each one `data: {...}` line with
        nothing for the stages (`_plain_frames`) goes out as it came, framing
        included: no split, no per-event work, no re-framing. While sniffing
        for reasoning, the first events are looked at one by one until the
        verdict; what follows a plain verdict goes out whole.
        """
        body, done = (data[:-len(DONE_FRAME)], True) if data.endswith(DONE_FRAME) \
            else (data, False)
        events = _plain_frames(body)
        if not events:
            return None
        self._unframed = 0  # the read ends at an event's end
        out: list[ChunkOut] = []
        while self._sniffing and body:
            end = body.index(b"\n\n")
            out.extend(self._take([SseEvent(body[6:end])]))
            body = body[end + 2:]
            events -= 1
        if body and not self.finished:
            if self.decode:  # the sniffing sent the stream through the stages
                out.extend(self._take([SseEvent(data) for data in event_payloads(body)]))
            else:
                out.append(self._relayed(body, events))
        if done and not self.finished:
            out.extend(self._take([SseEvent(DONE)]))
        return out

    def _relayed(self, body: bytes, events: int) -> SseFrames:
        """A read of `events` plain events (`_plain_frames`), to go out as it came:
        counted for usage, its finish noted."""
        if self.usage is not None:
            self.usage.observe_frames(body, events)
        self.saw_finish = self.saw_finish or _says_finish(body)
        return SseFrames(body)

    def _take(self, events: list[SseEvent]) -> list[ChunkOut]:
        out: list[ChunkOut] = []
        run: list[_Plain] = []
        """content-only chunks in a row, judged together (`_judged`) at the next other one."""
        for event in events:
            if self.finished:
                break
            data, done = event.data, event.is_done
            # Usage is counted once per event: here from the bytes the fast path and
            # the sniffing hold, in _decoded from the chunk it decodes anyway.
            if self._sniffing:
                if self.usage is not None and not done:
                    self.usage.observe(data)
                out.extend(self._sniff(data, done))
            elif not self.decode and _relay_as_is(data):
                # The fast path, inline: this loop runs once per upstream event.
                if self.usage is not None:
                    self.usage.observe(data)
                self.saw_finish = self.saw_finish or _says_finish(data)
                out.append(data)
            elif done:
                out.extend(self._judged(run))
                out.extend(self._close())
            else:
                out.extend(self._decoded(data, run=run))
        out.extend(self._judged(run))
        return out

    def fail(self, error: ApiError) -> list[ChunkOut]:
        return self._unsniff() + super().fail(error)

    def _close(self) -> list[ChunkOut]:
        out = super()._close()
        made = self.usage.missing() if self.usage is not None else None
        return out if made is None else [*out, made]

    def _unsniff(self) -> list[ChunkOut]:
        """The answer ended while sniffing: what was held, through the stages."""
        held, self._sniffed, self._sniffing = self._sniffed, [], False
        return [c for item in held for c in self._decoded(item, counted=True)]

    def _sniff(self, data: bytes, is_done: bool) -> list[ChunkOut]:
        """Hold events until the first content says whether the stages are needed."""
        plain = not is_done and _relay_as_is(data)
        verdict = _starts_reasoning(data) if plain else None
        if verdict is None and len(self._sniffed) >= _MAX_SNIFFED:
            verdict = True  # no content yet after several events: the stages decide
        if verdict is None and plain:
            self._sniffed.append(data)
            return []
        held, self._sniffed = [*self._sniffed, data], []
        self._sniffing = False
        if verdict is False:  # plain content: the fast path, bytes as they came
            return list(held)
        out: list[ChunkOut] = []
        for item in held[:-1]:
            out.extend(self._decoded(item, counted=True))
        return out + (self._close() if is_done else self._decoded(data, counted=True))

    def _decoded(self, data: bytes, counted: bool = False,
                 run: list[_Plain] | None = None, one_line: bool = False) -> list[ChunkOut]:
        """An event through JSON decoding and the stages; from here on, every event.

        `counted`: the usage counter already saw it (it was held while sniffing).
        `run`: a content-only chunk joins it instead of being judged on its own;
        any other event first has the run judged (its chunks came before).
        `one_line`: the caller saw that `data` is one line (`one_line_event`)."""
        self.decode = True
        try:
            chunk = orjson.loads(data)
        except orjson.JSONDecodeError:
            chunk = None
        relayable = False
        if isinstance(chunk, dict):
            if self.usage is not None and not counted:
                self.usage.observe_chunk(chunk, data)
            # Relayed as it came if the stages let it: so one `data:` line, and no error.
            relayable = self.plain and "error" not in chunk \
                and (one_line or data.find(b"\n") < 0)
            text = plain_content(chunk) if relayable else None
            if text is not None:
                if run is not None:
                    run.append((data, chunk, text))
                    return []
                if self.pipeline.passes_plain(chunk, text):
                    return [data]
        out = self._judged(run) if run else []
        if relayable and self._passes_end(chunk):
            self.saw_finish = True
            return [*out, data]
        return out + self._staged(chunk)

    def _judged(self, run: list[_Plain]) -> list[ChunkOut]:
        """Content-only chunks held in a run, in order: as many as the stages pass at
        once (`passes_plain_run`) go out as they came; the one they stop at is asked
        alone (`passes_plain`, else the stages); the rest is a run again once one has
        gone out plain (one that went through the stages may have left them holding).
        Empties the run."""
        items, run[:] = run[:], []
        chunks = [chunk for _, chunk, _ in items]
        texts = [text for _, _, text in items]
        out: list[ChunkOut] = []
        at, quiet = 0, True
        while at < len(items):
            if quiet and len(items) - at > 1:
                passed = self.pipeline.passes_plain_run(chunks[at:] if at else chunks,
                                                        texts[at:] if at else texts)
                out += [data for data, _, _ in items[at:at + passed]]
                at += passed
            if at < len(items):
                data, chunk, text = items[at]
                quiet = self.pipeline.passes_plain(chunk, text)
                out.extend([data] if quiet else self._staged(chunk))
                at += 1
        return out

    def _staged(self, chunk: Any) -> list[ChunkOut]:
        """A decoded event that is not relayed as it came: checked, then the stages."""
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


class CompletionTranslator(_Ending):
    """A whole upstream chat.completion (JSON) -> the chunks it stands for."""

    def __init__(self, pipeline: ResponsePipeline, *,
                 max_bytes: int = MAX_EVENT_BYTES * 8, plain: bool = True) -> None:
        super().__init__(pipeline)
        self.max_bytes = max_bytes
        self.plain = plain
        """a message that is plain content no stage would change skips their rebuilding
        (`pipeline.passes_plain`, as on the SSE path)."""
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
        out: list[ChunkOut] = []
        # The answer can go out as the upstream wrote it if no stage changes or adds a
        # thing, and it is written as the merge of its chunks would write it.
        as_it_came = self.plain and _as_merged(completion)
        for chunk in completion_to_chunks(completion):
            if self.plain and self._passes(chunk):
                out.append(chunk)
            else:
                fed = self.pipeline.feed(chunk)
                as_it_came = as_it_came and len(fed) == 1 and fed[0] is chunk
                out.extend(fed)
        closing = self._close()
        if as_it_came and not closing:
            self.verbatim = raw
        return out + closing

    def _passes(self, chunk: Chunk) -> bool:
        """Plain content, or the answer's end, that no stage would change (noted by them)."""
        text = plain_content(chunk, role_ok=True)
        if text is not None:
            return self.pipeline.passes_plain(chunk, text)
        return self._passes_end(chunk)


def _as_merged(completion: dict[str, Any]) -> bool:
    """Whether merging the answer's chunks back (`chunks_to_completion`) would make this
    same completion: it says what it is, keeps no null usage, and each choice has its
    index, its finish reason and a message that is exactly the assistant's text."""
    return completion.get("object") == "chat.completion" \
        and completion.get("usage", True) is not None \
        and all("index" in choice and "finish_reason" in choice
                and _assistant_text(choice.get("message")) for choice in completion["choices"])


def _assistant_text(message: Any) -> bool:
    return type(message) is dict and len(message) == 2 \
        and message.get("role") == "assistant" and type(message.get("content")) is str


# Byte tests here use find(), not `in`: CPython 3.11 first tries a bytes needle as an
# integer, making and dropping a TypeError (~2,000 instructions) on every test.
def _relay_as_is(data: bytes) -> bool:
    """The fast path's cheap check: shaped like a JSON object, nothing for the stages.

    Byte tests at both ends catch a non-JSON `data:` line (HTML, plain text,
    a cut object) without decoding anything that passes; decoding every chunk
    would cost the fast path most of its advantage. A line that opens like an
    object and closes like one is relayed unread.
    """
    return (data[:2] == b'{"' and data[-1:] == b"}" and _nothing_for_stages(data)
            and data.find(b"\n") < 0)  # one `data:` line out


def _nothing_for_stages(data: bytes) -> bool:
    """Undecoded chunk bytes (or a read of them) with no tool call and no error in them."""
    return data.find(b'"tool_calls"') < 0 and data.find(b'"error"') < 0


def _says_finish(data: bytes) -> bool:
    """Whether undecoded chunk bytes hold a finish reason (a string, not null)."""
    return data.find(b'"finish_reason":"') >= 0 or data.find(b'"finish_reason": "') >= 0


def _plain_frames(body: bytes) -> int:
    """How many whole events a read is, if each is one `data: {...}` line (`sse.
    one_line_events`) that `_relay_as_is` would pass: no tool call, no error. Else 0."""
    events = one_line_events(body)
    return events if events and _nothing_for_stages(body) else 0


_Plain = tuple[bytes, Chunk, str]
"""a content-only chunk: its upstream bytes, decoded, and its text."""

_MAX_SNIFFED = 8
"""events (role, empty content) held at most before the stages take over."""


def _starts_reasoning(data: bytes) -> bool | None:
    """Whether a plain chunk's content opens with a reasoning marker; None: no content yet.

    Only called while sniffing (the first few events of a stream), so decoding is cheap.
    A finish (or anything odd) decides for the stages, which are always right.
    """
    try:
        chunk = orjson.loads(data)
        choice = chunk["choices"][0] if chunk.get("choices") else {}
        if choice.get("finish_reason"):
            return True
        delta = choice.get("delta") or {}
        text = delta.get("content")
        if any(v for k, v in delta.items() if k not in ("role", "content")):
            # Reasoning (or anything else) already in its own field: the backend
            # split it, and what it sent must not wait for content.
            return False
    except (orjson.JSONDecodeError, AttributeError, TypeError, KeyError, IndexError):
        return True
    stripped = text.lstrip() if isinstance(text, str) else ""
    if not stripped:
        return None
    # Every marker starts with "<" or "[": most answers are settled by their first character.
    return stripped[0] in "<[" and any(m.startswith(stripped[:len(m)]) for m in REASONING_TAGS)


def plain_content(chunk: dict[str, Any], role_ok: bool = False) -> str | None:
    """The text of a chunk that is choice 0's content and nothing else, or None.

    `role_ok`: the delta may also say `"role": "assistant"` (a whole answer's message
    as completion_to_chunks makes it). Checks every type it relies on: a chunk it
    accepts needs no `chunk_problem`.
    """
    choice = _sole_choice(chunk)
    if choice is None or choice.get("finish_reason") is not None:
        return None
    delta = choice.get("delta")
    if type(delta) is not dict or len(delta) != 1 + (role_ok and "role" in delta):
        return None
    if role_ok and delta.get("role", "assistant") != "assistant":
        return None
    text = delta.get("content")
    return text if type(text) is str else None


def bare_finish(chunk: dict[str, Any]) -> str | None:
    """The finish reason of a chunk that only ends choice 0 (its delta empty, no usage,
    no other choice; other fields of the choice may ride along), or None."""
    choice = _sole_choice(chunk)
    if choice is None or choice.get("delta") != {}:
        return None
    reason = choice.get("finish_reason")
    return reason if type(reason) is str else None


def _sole_choice(chunk: dict[str, Any]) -> dict[str, Any] | None:
    """Choice 0 of a chunk that has no other choice and no usage, or None."""
    choices = chunk.get("choices")
    if type(choices) is not list or len(choices) != 1 or chunk.get("usage") is not None:
        return None
    choice = choices[0]
    return choice if type(choice) is dict and choice.get("index", 0) == 0 else None


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
