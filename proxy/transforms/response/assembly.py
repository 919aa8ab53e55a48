"""Streaming tool-call assembly: the last response stage.

Owns: turning whatever tool-call deltas a backend streams (Ollama whole
calls all at index 0 or without index/id, vLLM/OpenAI/llama.cpp incremental
fragments) into checked calls in OpenAI's delta shape, renumbered 0..n-1
with distinct ids, and the finish_reason that matches what survived.

Must not: hold content (it leaves at once), complete a cut-off call, touch
choices other than index 0, or do I/O. Non-streaming is the same class fed
the chunks of `completion.completion_to_chunks`, then flushed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from proxy.formats.jsonish import loads_object, scan_json_value
from proxy.transforms.response.checks import SchemaCache, check_call
from proxy.transforms.response.hooks import PlainHooks
from proxy.types import JSON, Chunk, InvalidPolicy, Observation, ObservationKind

_CUT_OFF = ("length",)


@dataclass(frozen=True)
class CallCounts:
    """What assembly did with the calls of one answer (`x_toolshim` on the wire)."""

    kept: int = 0
    dropped: int = 0
    repaired: int = 0
    kept_invalid: int = 0
    dropped_calls: tuple[tuple[str, str], ...] = ()
    """(name, reason) of each dropped call."""
    rejected: tuple[tuple[str, str, str], ...] = ()
    """(name, raw arguments, reason) of each call the checks refused; only under `correct`,
    whose flow asks the model to fix them (`flow/correct.py`)."""

    def as_wire(self) -> JSON:
        out: JSON = {"kept": self.kept, "dropped": self.dropped, "repaired": self.repaired,
                     "kept_invalid": self.kept_invalid}
        if self.dropped_calls:
            out["dropped_calls"] = [{"name": n, "reason": r} for n, r in self.dropped_calls]
        return out


@dataclass
class _Pending:
    """One call being received; `index` is the backend's (may be None)."""

    index: int | None
    id: str | None = None
    name: str = ""
    fragments: list[str] = field(default_factory=list)

    @property
    def arguments(self) -> str:
        return "".join(self.fragments)

    def whole_object(self) -> bool:
        """The arguments so far are a complete JSON object.

        Parsed only when they end in `}` (a strict object must): a backend that
        sends a call in many fragments would otherwise have everything received
        so far joined and parsed again on each one, quadratic in its length.
        """
        for fragment in reversed(self.fragments):
            tail = fragment.rstrip()
            if tail:
                return tail[-1] == "}" and loads_object(self.arguments) is not None
        return False


class CallAssembly(PlainHooks):
    """Sans-IO stage: `feed(chunk) -> chunks`, `flush() -> chunks`."""

    def __init__(
        self,
        offered: Mapping[str, JSON],
        policy: InvalidPolicy,
        reverse_rename: Mapping[str, str],
        parallel_tool_calls: bool | None,
        cache: SchemaCache,
        id_factory: Callable[[], str],
    ) -> None:
        self._offered = offered
        self._policy: InvalidPolicy = policy
        self._reverse = reverse_rename
        self._single = parallel_tool_calls is False
        self._cache = cache
        self._new_id = id_factory
        self._pending: list[_Pending] = []
        self._ids: set[str] = set()
        self._last: Chunk | None = None
        self._finished = False
        self._counts = {"kept": 0, "dropped": 0, "repaired": 0, "kept_invalid": 0}
        self._dropped: list[dict[str, str]] = []
        self._rejected: list[tuple[str, str, str]] = []
        self.observations: list[Observation] = []

    def counts(self) -> CallCounts:
        c = self._counts
        return CallCounts(c["kept"], c["dropped"], c["repaired"], c["kept_invalid"],
                          tuple((d["name"], d["reason"]) for d in self._dropped),
                          tuple(self._rejected))

    def feed(self, chunk: Chunk) -> list[Chunk]:
        choices = chunk.get("choices")
        first = _choice_zero(choices)
        if self._finished or first is None:
            return [chunk]
        self._last = chunk
        delta = first.get("delta") or {}
        tool_deltas = delta.get("tool_calls")
        if not tool_deltas:
            if first.get("finish_reason") is not None:
                return self._finish(chunk, first)
            return [chunk]
        # Text riding with tool deltas leaves now; the tool part is held.
        rest = {k: v for k, v in delta.items() if k != "tool_calls"}
        out: list[Chunk] = []
        finish = first.get("finish_reason")
        others_sent = bool(rest) or (finish is None and len(chunk["choices"]) > 1)
        if others_sent:
            out.append(_with_choice0(chunk, {**first, "delta": rest, "finish_reason": None}))
        out.extend(self._absorb(tool_deltas, chunk))
        if finish is not None:
            out.extend(self._finish(chunk, {**first, "delta": {}}, skip_others=others_sent))
        return out

    def plain_ok(self, text: str) -> bool:
        return True  # content never waits here

    def plain_run_ok(self, texts: list[str], joined: str) -> int:
        return len(texts)

    def take_plain(self, chunk: Chunk, text: str) -> None:
        if not self._finished:
            self._last = chunk

    def plain_end_ok(self, finish_reason: str) -> bool:
        # `_finish` changes a chunk only with calls seen: it emits them, rewrites
        # stop/tool_calls to what was kept and annotates drops and repairs. Without
        # any, only a "tool_calls" (no call came) becomes "stop".
        return self._finished or (not self._pending and not any(self._counts.values())
                                  and finish_reason != "tool_calls")

    def take_plain_end(self) -> None:
        self._finished = True

    def flush(self) -> list[Chunk]:
        if self._finished or self._last is None:
            return []
        self._finished = True
        template = self._last
        out = self._complete(self._pending, template, cut_off=True)
        self._pending = []
        finish = "tool_calls" if self._counts["kept"] else "stop"
        top = {k: v for k, v in template.items() if k != "choices"}
        top["choices"] = [{"index": 0, "delta": {}, "finish_reason": finish}]
        out.append(self._annotate(top))
        return out

    def _finish(self, chunk: Chunk, first: JSON, skip_others: bool = False) -> list[Chunk]:
        self._finished = True
        upstream = first.get("finish_reason")
        pending, self._pending = self._pending, []
        out = self._complete(pending, chunk, cut_off=upstream in _CUT_OFF)
        reason = upstream
        if upstream in ("stop", "tool_calls"):
            reason = "tool_calls" if self._counts["kept"] else "stop"
        choice = {**first, "finish_reason": reason}
        if out and choice.get("delta"):
            # Text in the finish chunk's delta precedes the calls just emitted.
            out.insert(0, _with_choice0(chunk, {**first, "finish_reason": None}, others=False))
            choice["delta"] = {}
        out.append(self._annotate(_with_choice0(chunk, choice, others=not skip_others)))
        return out

    def _annotate(self, finish_chunk: Chunk) -> Chunk:
        if self._counts["dropped"] or self._counts["repaired"]:
            return {**finish_chunk, "x_toolshim": self.counts().as_wire()}
        return finish_chunk

    def _absorb(self, tool_deltas: Any, chunk: Chunk) -> list[Chunk]:
        """Add deltas to pending calls; emit the calls they show are complete."""
        out: list[Chunk] = []
        for raw in tool_deltas if isinstance(tool_deltas, list) else []:
            if _malformed(raw):
                # Not an empty diff: a broken piece of a call, counted where the client
                # and the metrics can see it rather than skipped without a trace.
                self._drop("", "malformed")
                continue
            delta = _parse_delta(raw)
            if not (delta.name or delta.id or delta.arguments):
                # Empty diffs (llama.cpp) carry nothing and must not open a
                # nameless call after a whole call was already emitted.
                continue
            current = self._current(delta.index)
            if current is None or (delta.name and current.name
                                   and not _continues(delta, current)):
                # A name on an index that already has one is a new call
                # (Ollama reuses index 0 and may repeat or renew ids), which
                # also means every earlier call is complete.
                out.extend(self._complete(self._pending, chunk, cut_off=False))
                current = _Pending(delta.index)
                self._pending = [current]
            current.id = current.id or delta.id
            current.name = current.name or delta.name
            current.fragments.append(delta.arguments)
            if delta.name and delta.whole and current.whole_object():
                # Whole-call style (Ollama /v1): name and complete arguments in
                # one delta; nothing valid can follow, so emit now.
                out.extend(self._complete(self._pending, chunk, cut_off=False))
                self._pending = []
        return out

    def _current(self, index: int | None) -> _Pending | None:
        for call in reversed(self._pending):
            if call.index == index or index is None:
                return call
        return None

    def _complete(self, calls: list[_Pending], template: Chunk, cut_off: bool) -> list[Chunk]:
        out: list[Chunk] = []
        for call in calls:
            if cut_off and _truncated(call.arguments):
                self._drop(call.name, "truncated", call.arguments)
                continue
            verdict = check_call(
                call.name, call.arguments, self._offered, self._policy, self._reverse, self._cache
            )
            if not verdict.ok:
                self._drop(verdict.name, verdict.reason or "invalid", call.arguments)
                continue
            if self._single and self._counts["kept"]:
                self._drop(verdict.name, "parallel_tool_calls=false")
                continue
            if verdict.fixes:
                self._counts["repaired"] += 1
                self._observe("call_repaired", {"name": verdict.name, "fixes": list(verdict.fixes)})
            elif verdict.reason is not None:
                self._counts["kept_invalid"] += 1
            out.append(self._emit(call.id, verdict.name, verdict.arguments, template))
        return out

    def _emit(self, call_id: str | None, name: str, arguments: str, template: Chunk) -> Chunk:
        if call_id is None or call_id in self._ids:
            call_id = self._new_id()
            while call_id in self._ids:
                call_id = self._new_id()
        self._ids.add(call_id)
        wire = {
            "index": self._counts["kept"],
            "id": call_id,
            "type": "function",
            "function": {"name": name, "arguments": arguments},
        }
        self._counts["kept"] += 1
        top = {k: v for k, v in template.items() if k != "choices"}
        top["choices"] = [{"index": 0, "delta": {"tool_calls": [wire]}, "finish_reason": None}]
        return top

    def _drop(self, name: str, reason: str, arguments: str | None = None) -> None:
        if self._policy == "correct" and arguments is not None:
            self._rejected.append((name, arguments, reason))
        self._counts["dropped"] += 1
        self._dropped.append({"name": name, "reason": reason})
        self._observe("call_dropped", {"name": name, "reason": reason})

    def _observe(self, kind: ObservationKind, detail: dict[str, Any]) -> None:
        model = self._last.get("model") if self._last is not None else None
        self.observations.append(Observation(str(model or ""), kind, detail))


@dataclass(frozen=True)
class _Delta:
    index: int | None
    id: str | None
    name: str
    arguments: str
    whole: bool
    """The delta carried an `arguments` key (whole-call candidates)."""


def _malformed(raw: Any) -> bool:
    """A tool-call delta no backend sends: not an object, or a field of the wrong type
    (`{"index": "a", "function": null}`). Missing fields are fine: llama.cpp streams
    empty diffs, Ollama's legacy calls have no index."""
    if not isinstance(raw, dict):
        return True
    fn = raw.get("function")
    if fn is not None and not isinstance(fn, dict):
        return True
    index = raw.get("index")
    if index is not None and (not isinstance(index, int) or isinstance(index, bool)):
        return True
    if not isinstance(raw.get("id") or "", str):
        return True
    return fn is not None and not isinstance(fn.get("name") or "", str)


def _parse_delta(raw: JSON) -> _Delta:
    """A delta `_malformed` let through: missing fields read as empty."""
    index, call_id, fn = raw.get("index"), raw.get("id"), raw.get("function")
    fn = fn if isinstance(fn, dict) else {}
    name = fn.get("name")
    return _Delta(
        index if isinstance(index, int) else None,
        call_id if isinstance(call_id, str) and call_id else None,
        name if isinstance(name, str) else "",
        _text(fn.get("arguments")),
        "arguments" in fn,
    )


def _continues(delta: _Delta, current: _Pending) -> bool:
    """A delta repeating the id (and name) of a call still in progress continues it.

    llama-cpp-python repeats `id` and `name` in every argument fragment of a
    streamed call; a call whose arguments are already a whole object is done,
    so the same id after it is a new call (Ollama may reuse ids).
    """
    return (delta.id is not None and delta.id == current.id
            and delta.name in ("", current.name)
            and not current.whole_object())


def _choice_zero(choices: Any) -> JSON | None:
    if not isinstance(choices, list):
        return None
    for choice in choices:
        if isinstance(choice, dict) and choice.get("index", 0) == 0:
            return choice
    return None


def _with_choice0(chunk: Chunk, choice: JSON, others: bool = True) -> Chunk:
    """A copy of chunk with choice 0 replaced (other choices kept if asked)."""
    kept = [c for c in chunk["choices"] if others and _choice_zero([c]) is None]
    return {**chunk, "choices": [choice, *kept]}


def _text(arguments: Any) -> str:
    if arguments is None:
        return ""
    if isinstance(arguments, str):
        return arguments
    # Ollama's native shape: arguments as an object; OpenAI wants text.
    return orjson.dumps(arguments).decode()


def _truncated(arguments: str) -> bool:
    """Arguments cut off mid-value (or never started) when the output stopped."""
    text = arguments.strip()
    if not text:
        return True
    return text[0] in "{[" and scan_json_value(text, 0) is None
