"""One record per request, and where it goes: the log line and the counters.

Routes fill a `RequestRecord` as they go and hand it over once, at the end;
they never format log lines or touch metrics themselves.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from proxy.types import Observation


@dataclass
class RequestRecord:
    request_id: str
    endpoint: str
    model: str | None = None
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
    error: str | None = None
    changes: list[str] = field(default_factory=list)

    def as_log(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v not in (None, [], 0, 0.0, False)
                or k in ("status", "request_id", "endpoint")}


class Telemetry:
    def __init__(self, logger: logging.Logger | None = None) -> None:
        self.log = logger or logging.getLogger("toolshim")

    def request_done(self, record: RequestRecord,
                     observations: Sequence[Observation] = ()) -> None:
        self.log.info("request", extra={"record": record.as_log()})

    def stream_opened(self) -> None:
        """A stream started (gauge of open streams)."""

    def stream_closed(self) -> None:
        """A stream ended, any way."""

    def facts_written(self, count: int) -> None:
        """Learned facts that reached capabilities.yaml."""
