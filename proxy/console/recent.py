"""What the console remembers about finished requests: a ring buffer and per-model counters.

Fed once per request from Exchange.finish; every update is O(1) (a deque append,
a few integer additions, an LRU touch). Sorting for a p50 happens only when the
console reads the counters.
"""

from __future__ import annotations

import secrets
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from cachetools import LRUCache
from starlette.requests import Request

from proxy.console.tap import Capture, Tap
from proxy.telemetry import RequestRecord
from proxy.types import Observation

_OVERHEAD_SAMPLES = 256
"""overheads kept per model for the p50 (the most recent ones)."""
_MAX_MODELS = 1000
_NOTE_KINDS = ("tools_stripped", "call_dropped", "call_repaired", "text_calls_recovered",
               "tools_refused", "tool_choice_refused")
CAPTURE_HEADER = "x-toolshim-capture"


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
        self.recent: deque[dict[str, Any]] = deque(maxlen=max(recent, 0))
        self.counters: LRUCache[str, ModelCounters] = LRUCache(maxsize=_MAX_MODELS)
        self.captures: dict[str, Capture] = {}
        self.keep_prompts = keep_prompts
        self.started = time.time()

    def tap_for(self, request: Request) -> Tap:
        """The request's tap; a capture only for the token the bench registered itself."""
        token = request.headers.get(CAPTURE_HEADER)
        capture = self.captures.pop(token, None) if token else None
        return Tap(self.keep_prompts, capture)

    def new_capture(self) -> tuple[str, Capture]:
        token = secrets.token_urlsafe(18)
        capture = self.captures[token] = Capture()
        return token, capture

    def finished(self, record: RequestRecord, observations: Sequence[Observation],
                 tap: Tap) -> None:
        notes = [_note(o) for o in observations if o.kind in _NOTE_KINDS]
        if self.recent.maxlen:
            entry = {**vars(record), "at": time.time(), "notes": notes}
            entry["changes"] = list(record.changes)
            if tap.prompt is not None:
                entry["prompt"] = tap.prompt
            self.recent.append(entry)
        if record.model is None or record.endpoint != "chat.completions":
            return
        counters = self.counters.get(record.model)
        if counters is None:
            counters = self.counters[record.model] = ModelCounters()
        refusals = sum(1 for o in observations if o.kind.endswith("_refused"))
        passed = record.calls_kept - record.calls_repaired - record.calls_recovered
        counters.add(record, max(0, passed), refusals)

    def find(self, request_id: str) -> dict[str, Any] | None:
        return next((e for e in reversed(self.recent) if e["request_id"] == request_id), None)


def _note(obs: Observation) -> dict[str, Any]:
    detail = {k: v for k, v in obs.detail.items() if isinstance(v, (str, int, float, bool, list))}
    return {"kind": obs.kind, "detail": detail}

