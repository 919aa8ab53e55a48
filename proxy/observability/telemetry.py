"""One record per request, and where it goes: the log line and the counters.

Routes fill a `RequestRecord` as they go and hand it over once, at the end;
they never format log lines or touch metrics themselves. Records hold no
headers and no prompt, so neither a key nor a conversation can reach a log
line from here; upstream URLs lose any `user:password@` before they are shown.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from proxy.observability.metrics import LiveState, Metrics, reason_label
from proxy.settings import redact_url
from proxy.types import Observation


@dataclass
class RequestRecord:
    request_id: str
    endpoint: str
    model: str | None = None
    """the model that served the request (an alias's target)."""
    alias: str | None = None
    """the name the client asked for, when an alias mapped it to `model`."""
    upstream: str | None = None
    status: int = 0
    stream: bool = False
    duration_ms: float = 0.0
    overhead_ms: float = 0.0
    upstream_ms: float = 0.0
    ttft_ms: float | None = None
    rung: str | None = None
    retries: int = 0
    tools_stripped: int = 0
    calls_dropped: int = 0
    calls_repaired: int = 0
    calls_recovered: int = 0
    calls_kept: int = 0
    server_tool_calls: int = 0
    server_tool_iterations: int = 0
    server_tools: list[str] = field(default_factory=list)
    """`name:outcome:ms` per server-tool call (never arguments or results)."""
    error: str | None = None
    changes: list[str] = field(default_factory=list)
    num_ctx: int | None = None
    """The context window asked of Ollama's /api/chat, when one was."""
    context: str | None = None
    """What num_ctx: auto / context_guard did: raise, trim, reject or send."""
    emulated_chars: int = 0
    """characters the emulated tools' description added to the prompt."""

    def as_log(self) -> dict[str, Any]:
        # vars(), not asdict(): no deep copy on the per-request path. Unset fields (None,
        # 0, False, []) are left out; an empty string is a value.
        out = {k: v for k, v in vars(self).items() if v or v == "" or k in _ALWAYS_LOGGED}
        if self.upstream:
            out["upstream"] = redact_url(self.upstream)
        return out


_ALWAYS_LOGGED = frozenset({"status", "request_id", "endpoint"})


class StoreView(Protocol):
    """What telemetry reads off the capability store (proxy/capabilities/store.py)."""

    generation: int

    def last_error(self) -> str | None: ...


class LimiterView(Protocol):
    def snapshot(self) -> dict[str, tuple[int, int]]: ...


class _ReloadWatch:
    """Counts bad versions of the file by watching `last_error()` change.

    Polled on every finished request and every scrape; the store reloads in the
    background once per check interval, so a bad edit fixed again between two
    polls is not counted.
    """

    def __init__(self, store: StoreView) -> None:
        self.store = store
        self.errors = 0
        self._seen: str | None = None

    def poll(self) -> str | None:
        error = self.store.last_error()
        if error is not None and error != self._seen:
            self.errors += 1
        self._seen = error
        return error


class Telemetry:
    def __init__(self, logger: logging.Logger | None = None, *, max_models: int = 200) -> None:
        self.log = logger or logging.getLogger("toolshim")
        self.metrics = Metrics(max_models=max_models)
        self._watch: _ReloadWatch | None = None
        self._limiter: LimiterView | None = None

    def bind(self, store: StoreView, limiter: LimiterView) -> None:
        """Read reloads and upstream queues from these at scrape time (called in the lifespan)."""
        self._watch = _ReloadWatch(store)
        self._limiter = limiter
        self.metrics.read_live(self._live)

    def request_done(self, record: RequestRecord,
                     observations: Sequence[Observation] = ()) -> None:
        if self._watch is not None:
            self._watch.poll()
        self._count(record, observations)
        # An upstream that is unreachable, timed out or answered garbage is worth a look.
        level = logging.WARNING if record.status in (502, 503, 504) else logging.INFO
        self.log.log(level, "request", extra={"record": record.as_log()})

    def stream_opened(self) -> None:
        """A stream started (gauge of open streams)."""
        self.metrics.open_streams.inc()

    def stream_closed(self) -> None:
        """A stream ended, any way."""
        self.metrics.open_streams.dec()

    def facts_written(self, count: int) -> None:
        """Learned facts that reached capabilities.yaml."""
        self.metrics.facts.inc(count)

    def render_metrics(self) -> bytes:
        """The Prometheus text exposition of this app's registry."""
        return self.metrics.render()

    def _count(self, record: RequestRecord, observations: Sequence[Observation]) -> None:
        m = self.metrics
        model = m.model(record.model)
        m.child(m.requests, model, m.endpoint(record.endpoint), str(record.status)).inc()
        m.overhead.observe(record.overhead_ms / 1000)
        if record.upstream_ms:
            m.child(m.upstream_latency, model).observe(record.upstream_ms / 1000)
        if record.ttft_ms is not None:
            m.child(m.ttft, model).observe(record.ttft_ms / 1000)
        if record.tools_stripped:
            m.tools_stripped.labels(model).inc(record.tools_stripped)
        if record.num_ctx:
            m.num_ctx.labels(model, str(record.num_ctx)).inc()
        if record.context in ("trim", "reject", "send"):
            m.context_guard.labels(model, record.context).inc()
        for obs in observations:
            self._observe(model, obs)

    def _observe(self, model: str, obs: Observation) -> None:
        m = self.metrics
        detail = obs.detail
        if obs.kind == "call_dropped":
            m.tool_calls.labels(model, "dropped", m.reason(reason_label(detail.get("reason")))).inc()
        elif obs.kind == "call_repaired":
            fixes = detail.get("fixes") or ["unknown"]
            reason = "+".join(sorted(reason_label(f) for f in fixes))
            m.tool_calls.labels(model, "repaired", m.reason(reason)).inc()
        elif obs.kind == "text_calls_recovered":
            count = detail.get("count", 1)
            m.tool_calls.labels(model, "recovered", m.reason(reason_label(detail.get("format"))))\
                .inc(count if isinstance(count, int) and count > 0 else 1)
        elif obs.kind == "tools_refused":
            m.retries.labels(model, m.reason(reason_label(detail.get("rung")))).inc()
        elif obs.kind == "tool_choice_refused":
            m.retries.labels(model, "native-no-tool-choice").inc()
        elif obs.kind == "correction":
            m.corrections.labels(model, "tried").inc()
            if detail.get("succeeded"):
                m.corrections.labels(model, "succeeded").inc()

    def _live(self) -> LiveState | None:
        if self._watch is None or self._limiter is None:
            return None
        error = self._watch.poll()
        snapshot = self._limiter.snapshot()
        return LiveState(
            capability_loads=self._watch.store.generation,
            capability_reload_errors=self._watch.errors,
            capability_error=error is not None,
            upstream_active={redact_url(k): v[0] for k, v in snapshot.items()},
            upstream_queued={redact_url(k): v[1] for k, v in snapshot.items()})
