"""What the console remembers about finished requests: a ring buffer and per-model counters.

Fed once per request from Exchange.finish; every update is O(1) (a deque append,
a few integer additions, an LRU touch). Sorting for a p50 happens only when the
console reads the counters. The ring is bounded in entries and in bytes: with
--log-prompts an entry holds the client's whole conversation, so a prompt past
_MAX_PROMPT_BYTES is kept as a note of its size, and the oldest entries go once
the ring weighs more than _RECENT_BYTES. Must not: hold a request up (it is fed
after the answer), or keep a prompt the operator did not ask to log.
"""

from __future__ import annotations

import secrets
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import orjson
from cachetools import LRUCache
from starlette.requests import Request

from proxy.observability.tap import Capture, Tap
from proxy.observability.telemetry import RequestRecord
from proxy.settings import redact_url
from proxy.types import Observation

_OVERHEAD_SAMPLES = 256
"""overheads kept per model for the p50 (the most recent ones)."""
_MAX_MODELS = 1000
_RECENT_BYTES = 32 * 1024 * 1024
_MAX_PROMPT_BYTES = 256 * 1024
_ENTRY_BYTES = 1024
"""what an entry weighs besides its strings: the record's fields and the tuple."""
_COUNTED_ENDPOINTS = frozenset({"chat.completions", "responses"})
"""the requests that run a model through the chat flow (Responses is a translation of it)."""
_NOTE_KINDS = ("tools_stripped", "call_dropped", "call_repaired", "text_calls_recovered",
               "tools_refused", "tool_choice_refused", "correction")
_REFUSALS = frozenset({"tools_refused", "tool_choice_refused"})
CAPTURE_HEADER = "x-toolshim-capture"
_QUIET = Tap()
"""the tap of every request while no bench run waits and prompts are not kept (stateless)."""


@dataclass
class ModelCounters:
    requests: int = 0
    errors: int = 0
    calls_passed: int = 0
    calls_repaired: int = 0
    calls_dropped: int = 0
    calls_recovered: int = 0
    refusals: int = 0
    retries: int = 0
    corrections_tried: int = 0
    corrections_succeeded: int = 0
    overheads: deque[float] = field(default_factory=lambda: deque(maxlen=_OVERHEAD_SAMPLES))

    def add(self, record: RequestRecord, passed: int, refusals: int) -> None:
        self.requests += 1
        self.errors += record.status >= 400
        self.calls_passed += passed
        self.calls_repaired += record.calls_repaired
        self.calls_dropped += record.calls_dropped
        self.calls_recovered += record.calls_recovered
        self.refusals += refusals
        self.retries += record.retries
        self.overheads.append(record.overhead_ms)

    def as_json(self) -> dict[str, Any]:
        samples = sorted(self.overheads)
        p50 = samples[len(samples) // 2] if samples else None
        out = {k: v for k, v in vars(self).items() if k != "overheads"}
        out["p50_overhead_ms"] = p50
        return out


class ConsoleState:
    """Recent requests, live counters and pending bench captures, for one process."""

    def __init__(self, recent: int = 200, *, keep_prompts: bool = False) -> None:
        self._recent: deque[_Finished] = deque()
        self._capacity = max(recent, 0)
        self.bytes = 0
        """what the kept entries weigh (`_keep`), held under _RECENT_BYTES."""
        self.counters: LRUCache[str, ModelCounters] = LRUCache(maxsize=_MAX_MODELS)
        self.captures: dict[str, Capture] = {}
        self.keep_prompts = keep_prompts
        self.started = time.time()

    def tap_for(self, request: Request) -> Tap:
        """The request's tap; a capture only for the token the bench registered itself."""
        if not self.captures:
            return Tap(True) if self.keep_prompts else _QUIET
        token = request.headers.get(CAPTURE_HEADER)
        capture = self.captures.pop(token, None) if token else None
        return Tap(self.keep_prompts, capture)

    def new_capture(self) -> tuple[str, Capture]:
        token = secrets.token_urlsafe(18)
        capture = self.captures[token] = Capture()
        return token, capture

    @property
    def capacity(self) -> int:
        return self._capacity

    def recent(self, *, prompts: bool = False) -> list[dict[str, Any]]:
        """The kept requests as JSON-ready dicts, newest first (built only when read);
        kept prompts only when `prompts` (the reader holds an admin key)."""
        return [item.as_json(prompts=prompts) for item in reversed(self._recent)]

    def finished(self, record: RequestRecord, observations: Sequence[Observation],
                 tap: Tap) -> None:
        """Called once per request at its end: an append and a few additions."""
        if self._capacity:
            self._keep(record, observations, tap.prompt)
        if record.model is None or record.endpoint not in _COUNTED_ENDPOINTS:
            return
        # An LRU: a flood of made-up model names pushes out the least recently used.
        counters = self.counters.get(record.model)
        if counters is None:
            counters = self.counters[record.model] = ModelCounters()
        refusals = 0
        for obs in observations:
            refusals += obs.kind in _REFUSALS
            if obs.kind == "correction":  # invalid_tool_calls: correct asked the model again
                counters.corrections_tried += 1
                counters.corrections_succeeded += bool(obs.detail.get("succeeded"))
        passed = record.calls_kept - record.calls_repaired - record.calls_recovered
        counters.add(record, max(0, passed), refusals)

    def _keep(self, record: RequestRecord, observations: Sequence[Observation],
              prompt: dict[str, Any] | None) -> None:
        # The record is not touched after finish(): keep it, serialise on read.
        prompt, weight = _bounded(prompt)
        weight += _ENTRY_BYTES + len(record.endpoint) + len(record.model or "") \
            + len(record.error or "") + sum(map(len, record.server_tools))
        self._recent.append(_Finished(record, time.time(), observations, prompt, weight))
        self.bytes += weight
        while len(self._recent) > self._capacity or (
                self.bytes > _RECENT_BYTES and len(self._recent) > 1):
            self.bytes -= self._recent.popleft().weight

    def find(self, request_id: str) -> dict[str, Any] | None:
        found = next((e for e in reversed(self._recent) if e.record.request_id == request_id),
                     None)
        return found.as_json() if found is not None else None


class _Finished(NamedTuple):
    """One kept request; a tuple because it is made on every request."""

    record: RequestRecord
    at: float
    observations: Sequence[Observation]
    prompt: dict[str, Any] | None
    weight: int

    def as_json(self, *, prompts: bool = True) -> dict[str, Any]:
        entry = {**vars(self.record), "at": self.at, "changes": list(self.record.changes),
                 "notes": [_note(o) for o in self.observations if o.kind in _NOTE_KINDS]}
        if self.upstream_shown is not None:
            entry["upstream"] = self.upstream_shown
        if prompts and self.prompt is not None:
            entry["prompt"] = self.prompt
        return entry

    @property
    def upstream_shown(self) -> str | None:
        return redact_url(self.record.upstream) if self.record.upstream else None


def _bounded(prompt: dict[str, Any] | None) -> tuple[dict[str, Any] | None, int]:
    """The prompt as kept, and its weight: one past _MAX_PROMPT_BYTES becomes a note."""
    if prompt is None:
        return None, 0
    try:
        size = len(orjson.dumps(prompt))
    except (TypeError, orjson.JSONEncodeError):
        size = _MAX_PROMPT_BYTES + 1
    if size <= _MAX_PROMPT_BYTES:
        return prompt, size
    note = {"omitted": f"a prompt of {size} bytes, more than the {_MAX_PROMPT_BYTES} kept"}
    return note, 128


def _note(obs: Observation) -> dict[str, Any]:
    detail = {k: v for k, v in obs.detail.items() if isinstance(v, (str, int, float, bool, list))}
    return {"kind": obs.kind, "detail": detail}

