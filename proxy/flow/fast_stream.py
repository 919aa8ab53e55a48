"""The stream's fast paths: plain events relayed as they came, content judged in runs.

Owns `FastSseTranslator`, the reference `SseTranslator` with work skipped
where nothing would change: a whole read of plain events goes out as it came
(framing included), and content-only chunks are shown to the stages in runs
(`passes_plain_run`) instead of being fed one by one. What the client receives
must be what the reference writes (tests/flow/test_translate_fast_path.py,
test_translate_plain_path.py run both); `--no-fast-paths` leaves this class out.

Must not: do I/O, read settings, or decide anything the stages have not
vouched for: whatever a test here does not pass goes the reference's way.
"""

from __future__ import annotations

import orjson

from proxy.backends.sse_frames import UsageCounter
from proxy.errors import ApiError
from proxy.flow.plain import (
    Plain,
    nothing_for_stages,
    plain_content,
    plain_frames,
    relay_as_is,
    says_finish,
    vouched_end,
)
from proxy.flow.translate import MAX_EVENT_BYTES, ChunkOut, SseTranslator
from proxy.formats.detect import REASONING_TAGS
from proxy.sse import DONE, DONE_FRAME, SseEvent, SseFrames, event_payloads, one_line_event
from proxy.transforms.response import ResponsePipeline


class FastSseTranslator(SseTranslator):
    """An upstream SSE chat stream -> chunks, skipping what no stage would change.

    `decode=False` starts on the relay path: a `data:` event that looks like
    a plain JSON chunk (starts `{"`, ends `}`, no `tool_calls`, no `error`)
    is handed out as bytes; the first one that does not switches to decoding
    for the rest of the stream. Only for a pipeline whose every stage answers
    the fast paths' hooks itself (`ResponsePipeline.knows_plain`): any other
    stage is fed every chunk.

    When the stages split reasoning (`reasoning: move | strip`), the relay
    path first sniffs: events are held, undecoded by the stages, until the
    first one with visible content; content that starts with a reasoning
    marker (after whitespace) sends everything through the stages from the
    start, any other content releases the held events as they came and the
    rest of the stream stays on the relay path. A `<think>` further into a
    plain answer is then left in content (that is what `pass` does).

    Decoding (tools offered, or after the switch): a chunk whose only delta
    is content is decoded and shown to the stages (`pipeline.passes_plain`);
    when none of them would change it (no marker, fence, line-start brace or
    tag in it, nothing held), they note it and its bytes go out as they came,
    neither rebuilt nor re-encoded. Anything else goes through the stages.
    """

    __slots__ = ("_sniffed", "_sniffing", "decode")

    def __init__(self, pipeline: ResponsePipeline, *, decode: bool,
                 usage: UsageCounter | None = None,
                 max_event_bytes: int = MAX_EVENT_BYTES) -> None:
        super().__init__(pipeline, usage=usage, max_event_bytes=max_event_bytes)
        self.decode = decode or not pipeline.knows_plain
        self._sniffing = not self.decode and pipeline.splits_reasoning
        self._sniffed: list[bytes] = []
        """events held while sniffing for a reasoning marker."""

    def feed(self, data: bytes) -> list[ChunkOut]:
        if self.finished:
            return []
        if self._decoder.idle:
            if not self.decode:
                if not self._sniffing and one_line_event(data) and nothing_for_stages(data):
                    # What a slow stream reads: one plain event, fewer scans than
                    # `_whole_read` makes to count and check a read of many.
                    self._unframed = 0
                    return [self._relayed(data, 1)]
                whole = self._whole_read(data)
                if whole is not None:
                    return whole
            elif not self._sniffing and one_line_event(data):
                # What a slow stream reads: one whole event of one `data:` line. Straight
                # to decoding, past the SSE decoder and the run bookkeeping.
                self._unframed = 0
                return self._decoded(data[6:-2], one_line=True)
        return SseTranslator.feed(self, data)

    def end(self) -> list[ChunkOut]:
        if self.finished:
            return []
        out = self._take(self._decoder.flush()) + self._unsniff()
        return out + SseTranslator.end(self)  # the decoder is flushed: only the ending

    def fail(self, error: ApiError) -> list[ChunkOut]:
        return self._unsniff() + super().fail(error)

    def _whole_read(self, data: bytes) -> list[ChunkOut] | None:
        """The relay path for a whole read at once, or None to go event by event.

        A read of whole events that are each one `data: {...}` line with
        nothing for the stages (`plain_frames`) goes out as it came, framing
        included: no split, no per-event work, no re-framing. While sniffing
        for reasoning, the first events are looked at one by one until the
        verdict; what follows a plain verdict goes out whole.
        """
        body, done = (data[:-len(DONE_FRAME)], True) if data.endswith(DONE_FRAME) \
            else (data, False)
        events = plain_frames(body)
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
        """A read of `events` plain events (`plain_frames`), to go out as it came:
        counted for usage, its finish noted."""
        if self.usage is not None:
            self.usage.observe_frames(body, events)
        self.saw_finish = self.saw_finish or says_finish(body)
        return SseFrames(body)

    def _take(self, events: list[SseEvent]) -> list[ChunkOut]:
        out: list[ChunkOut] = []
        run: list[Plain] = []
        """content-only chunks in a row, judged together (`_judged`) at the next other one."""
        for event in events:
            if self.finished:
                break
            data, done = event.data, event.is_done
            # Usage is counted once per event: here from the bytes the relay path and
            # the sniffing hold, in _decoded from the chunk it decodes anyway.
            if self._sniffing:
                if self.usage is not None and not done:
                    self.usage.observe(data)
                out.extend(self._sniff(data, done))
            elif not self.decode and relay_as_is(data):
                # The relay path, inline: this loop runs once per upstream event.
                if self.usage is not None:
                    self.usage.observe(data)
                self.saw_finish = self.saw_finish or says_finish(data)
                out.append(data)
            elif done:
                out.extend(self._judged(run))
                out.extend(self._close())
            else:
                out.extend(self._decoded(data, run=run))
        out.extend(self._judged(run))
        return out

    def _unsniff(self) -> list[ChunkOut]:
        """The answer ended while sniffing: what was held, through the stages."""
        held, self._sniffed, self._sniffing = self._sniffed, [], False
        return [c for item in held for c in self._decoded(item, counted=True)]

    def _sniff(self, data: bytes, is_done: bool) -> list[ChunkOut]:
        """Hold events until the first content says whether the stages are needed."""
        plain = not is_done and relay_as_is(data)
        verdict = _starts_reasoning(data) if plain else None
        if verdict is None and len(self._sniffed) >= _MAX_SNIFFED:
            verdict = True  # no content yet after several events: the stages decide
        if verdict is None and plain:
            self._sniffed.append(data)
            return []
        held, self._sniffed = [*self._sniffed, data], []
        self._sniffing = False
        if verdict is False:  # plain content: the relay path, bytes as they came
            return list(held)
        out: list[ChunkOut] = []
        for item in held[:-1]:
            out.extend(self._decoded(item, counted=True))
        return out + (self._close() if is_done else self._decoded(data, counted=True))

    def _decoded(self, data: bytes, counted: bool = False,
                 run: list[Plain] | None = None, one_line: bool = False) -> list[ChunkOut]:
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
            relayable = "error" not in chunk and (one_line or data.find(b"\n") < 0)
            text = plain_content(chunk) if relayable else None
            if text is not None:
                if run is not None:
                    run.append((data, chunk, text))
                    return []
                if self.pipeline.passes_plain(chunk, text):
                    return [data]
        out = self._judged(run) if run else []
        if relayable and vouched_end(self.pipeline, chunk):
            self.saw_finish = True
            return [*out, data]
        return out + self._staged(chunk)

    def _judged(self, run: list[Plain]) -> list[ChunkOut]:
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
