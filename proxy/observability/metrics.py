"""Prometheus collectors for one app: a private registry, bounded labels.

Owns metric names, label sets and label cardinality; never decides what a
request did (telemetry.py reads that off the RequestRecord and observations).
Model names and endpoint paths come from clients, so every free-text label
goes through a `BoundedLabels`: past its limit new values fold into `other`,
and a flood of made-up model names cannot blow up the scrape or the memory.
State that lives elsewhere (capability reloads, upstream queues) is read at
scrape time by `_LiveCollector`, so nothing has to call back into here.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
OTHER = "other"

# Seconds. Local backends answer in milliseconds when warm and take minutes when
# Ollama loads a model on a cold GPU, so the buckets span both.
_LATENCY_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
                    120.0, 300.0, 600.0)
_OVERHEAD_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0)
_UNSAFE = re.compile(r"[^a-z0-9_.:\-/+=]")


class BoundedLabels:
    """The first `limit` distinct values keep their name; later new ones are `other`."""

    def __init__(self, limit: int, max_length: int = 128) -> None:
        self.limit = limit
        self.max_length = max_length
        self._seen: set[str] = set()

    def __call__(self, value: str | None) -> str:
        if not value:
            return "none"
        if len(value) > self.max_length:
            return OTHER
        if value in self._seen:
            return value
        if len(self._seen) >= self.limit:
            return OTHER
        self._seen.add(value)
        return value


def reason_label(reason: object) -> str:
    """A bounded reason: `schema: 'x' is required` -> `schema`; odd characters dropped."""
    text = str(reason or "unknown").strip().lower()
    head = re.split(r"[:\s]", text, maxsplit=1)[0] or "unknown"
    return _UNSAFE.sub("_", head)[:48]


@dataclass(frozen=True)
class LiveState:
    """Values read at scrape time from the objects that own them."""

    capability_loads: int
    capability_reload_errors: int
    capability_error: bool
    upstream_active: dict[str, int]
    upstream_queued: dict[str, int]


class _LiveCollector(Collector):
    def __init__(self, read: Callable[[], LiveState | None]) -> None:
        self.read = read

    def collect(self) -> Iterator[Metric]:
        state = self.read()
        if state is None:
            return
        yield CounterMetricFamily(
            "toolshim_capabilities_loads", "Versions of capabilities.yaml that took effect "
            "(first load, edits, learned-fact writes).", value=state.capability_loads)
        yield CounterMetricFamily(
            "toolshim_capabilities_reload_errors", "Distinct bad versions of capabilities.yaml "
            "seen (the last good one stayed in force).", value=state.capability_reload_errors)
        yield GaugeMetricFamily(
            "toolshim_capabilities_error", "1 while the file on disk is invalid.",
            value=int(state.capability_error))
        yield _per_upstream("toolshim_upstream_active",
                            "Requests holding a slot of the upstream's concurrency bound.",
                            state.upstream_active)
        yield _per_upstream("toolshim_upstream_queued",
                            "Requests waiting for a slot (past the queue bound: 429).",
                            state.upstream_queued)

    def describe(self) -> Iterable[Metric]:
        return ()


def _per_upstream(name: str, doc: str, values: dict[str, int]) -> GaugeMetricFamily:
    family = GaugeMetricFamily(name, doc, labels=["upstream"])
    for upstream, value in sorted(values.items()):
        family.add_metric([upstream], value)
    return family


class Metrics:
    """Every toolshim metric, registered in a registry of its own (never the global one)."""

    def __init__(self, max_models: int = 200, max_endpoints: int = 32) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.model = BoundedLabels(max_models)
        self.endpoint = BoundedLabels(max_endpoints)
        self.reason = BoundedLabels(64)
        reg = self.registry
        self.requests = Counter("toolshim_requests", "Requests answered, by model, endpoint and "
                                "HTTP status.", ["model", "endpoint", "status"], registry=reg)
        self.upstream_latency = Histogram(
            "toolshim_upstream_latency_seconds", "Time spent waiting on the upstream per request "
            "(whole answer).", ["model"], buckets=_LATENCY_BUCKETS, registry=reg)
        self.ttft = Histogram("toolshim_time_to_first_token_seconds", "Time from the request "
                              "to the first streamed bytes sent to the client.", ["model"],
                              buckets=_LATENCY_BUCKETS, registry=reg)
        self.overhead = Histogram("toolshim_overhead_seconds", "Time the proxy itself added "
                                  "to a request, upstream excluded.", buckets=_OVERHEAD_BUCKETS,
                                  registry=reg)
        self.open_streams = Gauge("toolshim_open_streams", "Streaming responses in flight.",
                                  registry=reg)
        self.tools_stripped = Counter("toolshim_tools_stripped", "Tools removed from requests "
                                      "before they went upstream.", ["model"], registry=reg)
        self.retries = Counter("toolshim_retries", "Requests resent one rung down after the "
                               "backend refused tools or tool_choice.", ["model", "rung"],
                               registry=reg)
        self.tool_calls = Counter("toolshim_tool_calls", "Tool calls the proxy dropped, repaired "
                                  "or recovered from text, by reason (recovered: the format).",
                                  ["model", "outcome", "reason"], registry=reg)
        self.facts = Counter("toolshim_learned_facts_written", "Learned facts written to "
                             "capabilities.yaml (not attempts).", registry=reg)
        self.num_ctx = Counter("toolshim_ollama_num_ctx", "Requests sent to Ollama's /api/chat "
                               "by the context window (num_ctx) asked for.",
                               ["model", "num_ctx"], registry=reg)
        self.context_guard = Counter("toolshim_context_guard", "Requests whose prompt did not "
                                     "fit the largest window allowed, by what context_guard "
                                     "did (trim, reject, send).", ["model", "action"],
                                     registry=reg)
        self.corrections = Counter("toolshim_corrections", "Corrections asked of a model under "
                                   "invalid_tool_calls: correct (outcome: tried, succeeded).",
                                   ["model", "outcome"], registry=reg)
        self.server_tool = BoundedLabels(128)
        self.server_tool_calls = Counter(
            "toolshim_server_tool_calls", "Server-tool calls toolshim ran, by tool and outcome "
            "(ok, error).", ["tool", "outcome"], registry=reg)
        self.server_tool_latency = Histogram(
            "toolshim_server_tool_latency_seconds", "Time one server-tool call took.", ["tool"],
            buckets=_LATENCY_BUCKETS, registry=reg)
        self._live: Callable[[], LiveState | None] = lambda: None
        reg.register(_LiveCollector(lambda: self._live()))
        self._children: dict[tuple[object, ...], Any] = {}

    def child(self, metric: Counter | Histogram, *labels: str) -> Any:
        """`metric.labels(*labels)`, kept: prometheus_client checks and locks on every
        call, and the per-request ones are the same few. Labels are bounded (above),
        so this is too."""
        key = (id(metric), *labels)
        found = self._children.get(key)
        if found is None:
            found = self._children[key] = metric.labels(*labels)
        return found

    def read_live(self, read: Callable[[], LiveState | None]) -> None:
        """Set where scrape-time values come from (bound once the app's services exist)."""
        self._live = read

    def render(self) -> bytes:
        return generate_latest(self.registry)
