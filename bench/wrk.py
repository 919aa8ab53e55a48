"""Optional load source for non-streaming workloads: Debian's `wrk`, parsed.

Owns one wrk run (a Lua script that POSTs the same body load.py sends) and turning
its text report into numbers. wrk costs far less CPU per request than aiohttp, so the
W1 rows it produces are limited by the servers, not the client. It cannot check
streams, so it is never used for W2/W3. Absent wrk, run.py simply skips these rows.
"""

from __future__ import annotations

import asyncio
import math
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from load import LoadSpec, WindowProbe, request_body

_UNIT = {"us": 1e-3, "ms": 1.0, "s": 1000.0}


def available() -> bool:
    return shutil.which("wrk") is not None


@dataclass(frozen=True)
class WrkResult:
    """The same read-side interface as load.LoadResult, from wrk's summary."""

    completed: int
    seconds: float
    errors: int
    first_error: str
    p50_ms: float
    p99_ms: float

    @property
    def rate(self) -> float:
        return self.completed / self.seconds if self.seconds > 0 else math.nan

    def latency_ms(self, q: float) -> float:
        return {50.0: self.p50_ms, 99.0: self.p99_ms}.get(q, math.nan)

    def ttfb_ms(self, q: float) -> float:
        return math.nan  # wrk does not report it


def _script(spec: LoadSpec, tmp: Path) -> Path:
    path = tmp / f"wrk-{spec.model}-{int(spec.tools)}.lua"
    body = request_body(spec).decode().replace("\\", "\\\\").replace("'", "\\'")
    path.write_text(f"wrk.method = 'POST'\nwrk.body = '{body}'\n"
                    "wrk.headers['Content-Type'] = 'application/json'\n")
    return path


def parse(report: str) -> WrkResult:
    """Numbers from `wrk --latency` output."""
    done = re.search(r"(\d+) requests in ([\d.]+)(us|ms|s)", report)
    if done is None:
        raise ValueError(f"unexpected wrk output: {report[-300:]!r}")
    pct = {q: float(v) * _UNIT[u] for q, v, u in
           re.findall(r"^\s+(50|99)%\s+([\d.]+)(us|ms|s)\s*$", report, re.MULTILINE)}
    errors = sum(int(n) for n in re.findall(r"(?:connect|read|write|timeout) (\d+)", report))
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", report)
    errors += int(non2xx.group(1)) if non2xx else 0
    return WrkResult(int(done.group(1)), float(done.group(2)) * _UNIT[done.group(3)] / 1000,
                     errors, "wrk reported errors" if errors else "",
                     pct.get("50", math.nan), pct.get("99", math.nan))


async def run_wrk(base_url: str, spec: LoadSpec, tmp: Path,
                  probe: WindowProbe | None = None) -> WrkResult:
    """A short unmeasured warmup run, then the measured one (whole seconds: wrk's unit)."""
    url = base_url.rstrip("/") + "/v1/chat/completions"
    script = _script(spec, tmp)
    argv = ["wrk", "-t1", f"-c{spec.concurrency}", "--latency", "-s", str(script), url]
    await _wrk(argv + ["-d1s"])
    if probe is not None:
        probe.start()
    out = await _wrk(argv + [f"-d{max(1, round(spec.duration))}s"])
    if probe is not None:
        probe.stop()
    return parse(out)


async def _wrk(argv: list[str]) -> str:
    proc = await asyncio.create_subprocess_exec(*argv, stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.STDOUT)
    out, _ = await proc.communicate()
    return out.decode(errors="replace")
