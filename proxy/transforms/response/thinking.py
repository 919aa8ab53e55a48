"""Reasoning written into content (`<think>…</think>` and every family's equal of it:
formats.detect.REASONING), split out per model setting.

Owns: finding reasoning blocks in choice 0's `delta.content` across chunk
boundaries (holding back only a possible partial tag) and applying the
`reasoning` policy: "pass" leaves content alone, "strip" removes the
reasoning, "move" puts it into `delta.reasoning_content`. Must not: touch
other choices or other delta fields, parse calls, or do I/O.
"""

from __future__ import annotations

from typing import Any

from proxy.formats.detect import (
    REASONING,
    REASONING_TAGS,
    THINK_BREAKERS,
    THINK_CLOSES,
    TagWatch,
    first_tag,
    marker_set,
    think_end,
)
from proxy.transforms.response.choices import choice_zero, replace_choice
from proxy.transforms.response.hooks import PlainHooks
from proxy.types import Chunk, Observation, ReasoningPolicy


class _Splitter:
    """Text in, (content, reasoning) out; split-invariant over any chunking.

    A reply may start inside reasoning (the prompt ended with `<think>`, so only
    `</think>` appears): text before such a close tag is reasoning when nothing
    went out before it (always so for a whole answer; for a stream, only within
    its first piece), and `inside=True` (learned per model) starts a stream there.
    """

    def __init__(self, inside: bool = False) -> None:
        self.inside = inside
        self.closes = THINK_CLOSES
        """what ends the reasoning we are in: its opener's close, any close when the
        reply started inside (the opener was in the prompt)."""
        self.held = ""
        self.channel_name = False
        """just inside Gemma 4's `<|channel>`: its name (`thought` + newline) is markup."""
        self.section: list[str] | None = None
        """inside reasoning, held from a Kimi section marker on: reasoning if a
        close tag follows, the answer's tool section if the reply ends first."""
        self.section_close = TagWatch(THINK_CLOSES)
        self.fresh = True
        """nothing has gone out as content and no tag was seen yet."""
        self.opened_inside = False
        """a reply was found to start inside reasoning (an orphan close at its start)."""

    def push(self, text: str) -> tuple[str, str]:
        if self.section is not None:
            self.section.append(text)
            if not self.section_close.seen(text):
                return "", ""  # joined once a close tag arrives: linear in a long section
            text, self.section = "".join(self.section), None
        buf, self.held = self.held + text, ""
        content: list[str] = []
        reasoning: list[str] = []
        while buf:
            if self.inside:
                if self.channel_name:
                    if _CHANNEL_NAME.startswith(buf):
                        self.held = buf  # the name may still be coming
                        break
                    buf = buf.removeprefix(_CHANNEL_NAME)
                    self.channel_name = False
                end = think_end(buf, 0, self.closes)
                if end is None:
                    keep = len(buf) - marker_set((*self.closes, *THINK_BREAKERS)).partial_suffix(buf)
                    reasoning.append(buf[:keep])
                    self.held = buf[keep:]
                    break
                at, after = end
                reasoning.append(buf[:at])
                if at == after:
                    # Kimi's tool section ends reasoning left unclosed, and is
                    # content (kimi-k2-005); before a close tag it is a thought.
                    self.section = [buf[at:]]
                    self.section_close = TagWatch(self.closes)
                    self.section_close.seen(buf)  # no close in it (think_end): its tail
                    break
                buf = buf[after:]
                self.inside = False
                continue
            found = first_tag(buf)
            if found is None:
                keep = len(buf) - _ANY_PARTIAL.partial_suffix(buf)
                content.append(buf[:keep])
                self.held = buf[keep:]
                break
            at, tag = found
            if tag not in REASONING and self.fresh and not "".join(content).strip():
                # Thinking forced open by the prompt, and nothing went out yet.
                reasoning.append("".join(content) + buf[:at])
                content, self.opened_inside = [], True
            else:
                content.append(buf[:at])
            buf = buf[at + len(tag) :]
            # An orphan close later on is dropped: the reasoning before it has
            # already gone out as content.
            self.inside = tag in REASONING
            if self.inside:
                self.closes = (REASONING[tag],)
                self.channel_name = tag == _CHANNEL
            self.fresh = False
        text = "".join(content)
        if self.fresh and text.strip():
            self.fresh = False
        return text, "".join(reasoning)

    def holds(self) -> bool:
        """Whether end() would release anything."""
        return bool(self.held) or self.section is not None

    def end(self) -> tuple[str, str]:
        held, self.held = self.held, ""
        if self.section is not None:
            # No close tag came: the reasoning was left unclosed before a tool section.
            section, self.section, self.inside = "".join(self.section), None, False
            return section, ""
        return ("", held) if self.inside else (held, "")


class ThinkingSplit(PlainHooks):
    """Sans-IO stage: `feed(chunk) -> chunks`, `flush() -> chunks`."""

    def __init__(self, policy: ReasoningPolicy, *, starts_inside: bool = False) -> None:
        self._policy: ReasoningPolicy = policy
        self._split = _Splitter(inside=starts_inside)
        self._starts_inside = starts_inside
        self._last: Chunk | None = None
        self.observations: list[Observation] = []

    def feed(self, chunk: Chunk) -> list[Chunk]:
        if self._policy == "pass":
            return [chunk]
        index = choice_zero(chunk)
        if index is None:
            return [chunk]
        self._last = chunk
        choice = chunk["choices"][index]
        delta = choice.get("delta") if isinstance(choice.get("delta"), dict) else {}
        text = delta.get("content")
        content, reasoning = self._split.push(text) if isinstance(text, str) else ("", "")
        if self._split.opened_inside and not self._starts_inside:
            self._starts_inside = True  # once per reply: the next streams start inside
            self.observations.append(Observation(str(chunk.get("model") or ""),
                                                 "reasoning_open", {}))
        if choice.get("finish_reason") is not None:
            tail_content, tail_reasoning = self._split.end()
            content, reasoning = content + tail_content, reasoning + tail_reasoning
        if not isinstance(text, str) and not content and not reasoning:
            return [chunk]
        new_delta = self._delta(delta, content, reasoning)
        if (
            not new_delta
            and set(delta) == {"content"}
            and choice.get("finish_reason") is None
            and chunk.get("usage") is None
            and len(chunk["choices"]) == 1
        ):
            # All of it was reasoning (stripped) or a held partial tag.
            return []
        return [replace_choice(chunk, index, {**choice, "delta": new_delta})]

    def plain_ok(self, text: str) -> bool:
        # Every marker starts with "<" or "[": text without either, outside reasoning
        # and with nothing held, is content as it stands (what `_Splitter.push` finds).
        split = self._split
        return self._policy == "pass" or (not split.inside and not split.holds()
                                          and "<" not in text and "[" not in text)

    def plain_run_ok(self, texts: list[str], joined: str) -> int:
        # Up to the first text that may hold a marker: noting one without changes nothing.
        if self.plain_ok(joined):
            return len(texts)
        split = self._split
        if split.inside or split.holds():
            return 0
        return next(i for i, text in enumerate(texts) if "<" in text or "[" in text)

    def take_plain(self, chunk: Chunk, text: str) -> None:
        if self._policy != "pass":
            self._last = chunk
            if text.strip():
                self._split.fresh = False

    def plain_end_ok(self, finish_reason: str) -> bool:
        # Nothing held: the end releases nothing (`_Splitter.end`), inside or not.
        return self._policy == "pass" or not self._split.holds()

    def take_plain_end(self) -> None:
        pass  # feed would note the chunk as the last one; flush, after it, adds nothing

    def flush(self) -> list[Chunk]:
        content, reasoning = self._split.end()
        if self._last is None or not (content or reasoning):
            return []
        template = {k: v for k, v in self._last.items() if k not in ("choices", "usage")}
        delta = self._delta({}, content, reasoning)
        if not delta:
            return []
        return [{**template, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}]

    def _delta(self, delta: dict[str, Any], content: str, reasoning: str) -> dict[str, Any]:
        out = {k: v for k, v in delta.items() if k != "content"}
        if content or (delta.get("content") == "" and not reasoning):
            out["content"] = content
        if reasoning and self._policy == "move":
            out["reasoning_content"] = (out.get("reasoning_content") or "") + reasoning
        return out


_ANY_PARTIAL = marker_set(REASONING_TAGS)
_CHANNEL, _CHANNEL_NAME = "<|channel>", "thought\n"
"""Gemma 4 names its reasoning channel (ollama model/parsers/gemma4.go strips it too)."""

