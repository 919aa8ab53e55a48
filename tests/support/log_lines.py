"""The request lines a test's captured log holds (proxy/observability/telemetry.py)."""

from __future__ import annotations

from typing import Any

import pytest


def request_lines(caplog: pytest.LogCaptureFixture) -> list[dict[str, Any]]:
    """Each request's log line as its record (the fields of the JSON line)."""
    return [r.record for r in caplog.records  # type: ignore[attr-defined]
            if r.getMessage() == "request" and isinstance(getattr(r, "record", None), dict)]
