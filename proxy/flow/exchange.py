"""One client request as it moves through the flow, and what is done at its end.

The record filled here is handed to telemetry once; findings (observations)
go to learning.py and, as facts, to the capability store after the response.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace

import anyio
from starlette.requests import Request

from proxy.capabilities.learning import LearnedFact, facts_from
from proxy.capabilities.resolve import normalise_model_name
from proxy.capabilities.store import CapabilityStore, now_iso
from proxy.credentials import owner_digest
from proxy.observability.redact import Redactor
from proxy.observability.tap import Tap
from proxy.observability.telemetry import RequestRecord
from proxy.services import Services
from proxy.types import Observation


@dataclass
class Exchange:
    """One client request as it moves through the flow."""

    svc: Services
    request: Request
    record: RequestRecord
    started: float = field(default_factory=time.perf_counter)
    upstream_s: float = 0.0
    observations: list[Observation] = field(default_factory=list)
    finished: bool = False
    reported: bool = False
    learned: int = 0
    """how many of `observations` went to learning already (at the settling)."""
    tap: Tap = field(init=False)
    """what the console sees of this request (a bench capture, a kept prompt)."""
    _redactor: Redactor | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self.tap = self.svc.console.tap_for(self.request)

    def redactor(self) -> Redactor:
        """Masks every configured secret and the key this client sent: an upstream may
        repeat what it got (the client's own Authorization or X-Api-Key included) in its
        error text. Made once, and only when there is text to mask (error paths)."""
        if self._redactor is None:
            self._redactor = self.svc.redactor.for_request(self.request.headers, self._query())
        return self._redactor

    def owner(self) -> str:
        """Who this client is, for what toolshim keeps per client (credentials.py)."""
        return owner_digest(self.request.headers, self._query())

    def _query(self) -> str:
        query: bytes = self.request.scope.get("query_string", b"")
        return query.decode("latin-1")

    def shown(self, text: str) -> str:
        """`text` as a client, the console or a log line may show it."""
        return self.redactor().mask(text)

    def cancelled(self) -> tuple[int, str]:
        """Status and reason of a request cancelled before it settled: cut by the drain
        at the end of the shutdown grace (503, what its client was sent), else its
        client left (499)."""
        drain = getattr(self.request.app.state, "drain", None)
        if drain is not None and drain.cut:
            return 503, "cut at the end of the shutdown grace period"
        return 499, ("client closed the stream" if self.record.stream
                     else "client closed the connection")

    def overhead_ms(self) -> float:
        return max(0.0, (time.perf_counter() - self.started - self.upstream_s) * 1000)

    def finish(self, status: int, error: str | None = None, *, report: bool = True) -> None:
        """Settle the request's record once (the first ending wins) and report it, or,
        with `report=False`, leave that to `report()` (after the answer is sent)."""
        if not self.finished:
            self.finished = True
            self.record.status = status
            self.record.error = self.shown(error) if error else error
            self.record.duration_ms = round((time.perf_counter() - self.started) * 1000, 3)
            self.record.upstream_ms = round(self.upstream_s * 1000, 3)
            self.record.overhead_ms = round(self.overhead_ms(), 3)
            # Learned facts take effect before the answer leaves: the client's next
            # request (sent as soon as it has this answer) must go straight to them.
            self._learn()
        if report:
            self.report()

    def report(self) -> None:
        """The settled record to telemetry (log line, metrics), the console and learning;
        once, whoever calls first."""
        if self.reported or not self.finished:
            return
        self.reported = True
        self.svc.telemetry.request_done(self.record, self.observations)
        self.svc.console.finished(self.record, self.observations, self.tap)
        if len(self.observations) > self.learned:
            self._learn()  # what was found after the settling

    def _learn(self) -> None:
        new, self.learned = self.observations[self.learned:], len(self.observations)
        learn(self.svc, new, self.record.upstream, self.record.model)


def learn(svc: Services, observations: list[Observation], upstream: str | None,
          asked: str | None = None) -> None:
    """Turn findings into learned facts: in force at once, written to the file after.

    `asked`: the model name the client sent, the key a fact about it gets on an
    upstream that takes names as written."""
    if not observations:
        return
    facts = facts_from(observations, at=now_iso(), upstream=upstream)
    if facts and upstream and asked and not _tags_names(svc, upstream):
        facts = [_as_written(fact, asked) for fact in facts]
    if facts:
        store: CapabilityStore = svc.store
        if store.writes_in_background():
            store.record(facts)  # memory only: the store's keeper thread writes the file
        else:
            svc.spawn(anyio.to_thread.run_sync(store.record, facts))
        svc.spawn(svc.state.share(facts))  # a no-op alone; the fleet learns it with Redis


def _tags_names(svc: Services, upstream: str) -> bool:
    """Ollama reads `name` as `name:latest`; an upstream known to be another server
    (set with --upstream-kind, or found at start) takes names as written."""
    kind = svc.settings.kind_for(upstream) or svc.ollama.kinds.get(upstream, ("unknown", 0))[0]
    return kind != "openai"


def _as_written(fact: LearnedFact, asked: str) -> LearnedFact:
    same = normalise_model_name(fact.model) == normalise_model_name(asked)
    return replace(fact, model=asked.strip() if same else fact.model, tag_default=False)


def toolshim_headers(ex: Exchange) -> dict[str, str]:
    """x-request-id and the x-toolshim-* headers a client gets before the first byte."""
    rec = ex.record
    headers = {"x-request-id": rec.request_id,
               "x-toolshim-overhead-ms": f"{ex.overhead_ms():.2f}"}
    if rec.model:
        headers["x-toolshim-model"] = rec.model  # the served model, an alias's target
    if rec.rung:
        headers["x-toolshim-rung"] = rec.rung
    if rec.retries:
        headers["x-toolshim-retries"] = str(rec.retries)
    if rec.tools_stripped:
        headers["x-toolshim-tools-stripped"] = str(rec.tools_stripped)
    if rec.num_ctx:
        headers["x-toolshim-num-ctx"] = str(rec.num_ctx)
    return headers


def call_headers(ex: Exchange) -> dict[str, str]:
    """What the response stages did to the calls: known once the whole answer was read."""
    rec = ex.record
    pairs = {"x-toolshim-calls-dropped": rec.calls_dropped,
             "x-toolshim-calls-repaired": rec.calls_repaired,
             "x-toolshim-calls-recovered": rec.calls_recovered}
    return {k: str(v) for k, v in pairs.items() if v}
