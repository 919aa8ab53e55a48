"""The benchmark's result table: medians over rounds, ratios to direct, target checks.

Owns turning raw samples into text. It runs nothing and measures nothing; the
targets (`_checks`) are the performance issue's, for one worker with every stage on.
Every row also shows the run-to-run spread of its rate and CPU: (max - min) / median
over the rounds, so a difference smaller than the spread is noise.
"""

from __future__ import annotations

import math
import platform
import statistics
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from load import LoadResult
from procs import ServerProbe
from wrk import WrkResult

# Workload names the target checks look up (run.py's WORKLOADS uses them).
W1_C1, W1_C32, W3 = "W1 small c=1", "W1 small c=32", "W3 200 slow streams"
W2, W2N, W2R = "W2 64 chunks c=32", "W2n native c=32", "W2r responses c=32"
W2M = "W2m messages c=32"
W2G = "W2g gemini c=32"
W2T, W5 = "W2t +3 tools c=32", "W5 1000 slow streams"


@dataclass(frozen=True)
class Target:
    name: str
    url: str
    pid: int | None


@dataclass(frozen=True)
class Sample:
    workload: str
    target: str
    round: int
    result: LoadResult | WrkResult
    probe: ServerProbe


@dataclass(frozen=True)
class Row:
    workload: str
    target: str
    rate: float
    p50: float
    p99: float
    ttfb50: float
    ttfb99: float
    cpu: float
    rss: float
    peak: float
    errors: int
    first_error: str
    rate_spread: float  # (max - min) / median over rounds, in %
    cpu_spread: float


def _median(samples: list[Sample], metric: Callable[[Sample], float]) -> float:
    values = [v for v in map(metric, samples) if not math.isnan(v)]
    return statistics.median(values) if values else math.nan


def _spread(samples: list[Sample], metric: Callable[[Sample], float]) -> float:
    values = [v for v in map(metric, samples) if not math.isnan(v)]
    mid = statistics.median(values) if len(values) > 1 else 0.0
    return (max(values) - min(values)) / mid * 100 if mid else math.nan


def _cpu_per_request(s: Sample) -> float:
    if s.probe.pid is None or s.result.completed == 0:
        return math.nan
    return s.probe.cpu / s.result.completed


def aggregate(samples: list[Sample]) -> list[Row]:
    """One row per (workload, target), in first-seen order, medians over rounds."""
    groups: dict[tuple[str, str], list[Sample]] = {}
    for s in samples:
        groups.setdefault((s.workload, s.target), []).append(s)
    rows = []
    for (workload, target), group in groups.items():
        rows.append(Row(
            workload, target, _median(group, lambda s: s.result.rate),
            _median(group, lambda s: s.result.latency_ms(50)),
            _median(group, lambda s: s.result.latency_ms(99)),
            _median(group, lambda s: s.result.ttfb_ms(50)),
            _median(group, lambda s: s.result.ttfb_ms(99)),
            _median(group, _cpu_per_request),
            _median(group, lambda s: s.probe.rss if s.probe.pid else math.nan),
            max((s.probe.hwm for s in group), default=0.0) if group[0].probe.pid else math.nan,
            sum(s.result.errors for s in group),
            next((s.result.first_error for s in group if s.result.first_error), ""),
            _spread(group, lambda s: s.result.rate), _spread(group, _cpu_per_request)))
    return rows


_COLUMNS = (("workload", 20), ("target", 7), ("per s", 8), ("±%", 4), ("ratio", 6),
            ("p50 ms", 7), ("p99 ms", 7), ("+p50", 6), ("+p99", 6), ("ttfb50", 7),
            ("ttfb99", 7), ("cpu ms/req", 10), ("±%", 4), ("rss MB", 7), ("peak MB", 7),
            ("err", 4))


def _fmt(value: float, digits: int = 2) -> str:
    return "-" if math.isnan(value) else f"{value:.{digits}f}"


def _line(row: Row, direct: Row | None) -> str:
    base = direct if direct is not None and row.target != "direct" else None
    ratio = row.rate / base.rate if base else math.nan
    add50 = row.p50 - base.p50 if base else math.nan
    add99 = row.p99 - base.p99 if base else math.nan
    cells = (row.workload, row.target, _fmt(row.rate, 0), _fmt(row.rate_spread, 0),
             _fmt(ratio), _fmt(row.p50), _fmt(row.p99), _fmt(add50), _fmt(add99),
             _fmt(row.ttfb50), _fmt(row.ttfb99), _fmt(row.cpu, 3), _fmt(row.cpu_spread, 0),
             _fmt(row.rss, 0), _fmt(row.peak, 0), str(row.errors))
    return " ".join(c.rjust(w) if i > 1 else c.ljust(w)
                    for i, (c, (_, w)) in enumerate(zip(cells, _COLUMNS)))


def _find(rows: list[Row], workload: str, target: str) -> Row | None:
    return next((r for r in rows if r.workload == workload and r.target == target), None)


Check = tuple[str, float, bool]


def _latency_checks(rows: list[Row], target: str) -> list[Check]:
    c1, d1 = _find(rows, W1_C1, target), _find(rows, W1_C1, "direct")
    c32 = _find(rows, W1_C32, target)
    out: list[Check] = []
    if c1 and d1:
        add50, add99 = c1.p50 - d1.p50, c1.p99 - d1.p99
        out += [("W1 c=1 +p50 <= 0.35 ms", add50, add50 <= 0.35),
                ("+p99 <= 1 ms", add99, add99 <= 1.0)]
    if c32:
        out += [("W1 c=32 >= 3000 req/s", c32.rate, c32.rate >= 3000),
                ("cpu <= 0.33 ms", c32.cpu, c32.cpu <= 0.33)]
    return out


def _stream_checks(rows: list[Row], target: str) -> list[Check]:
    out: list[Check] = []
    w2, w2t = _find(rows, W2, target), _find(rows, W2T, target)
    w2n, w2r = _find(rows, W2N, target), _find(rows, W2R, target)
    w2m, w2g = _find(rows, W2M, target), _find(rows, W2G, target)
    if w2:
        out.append(("W2 cpu <= 0.6 ms", w2.cpu, w2.cpu <= 0.6))
    if w2t:
        out.append(("W2t cpu <= 1.0 ms", w2t.cpu, w2t.cpu <= 1.0))
    if w2 and w2n and w2.cpu > 0:
        # Ollama's native /api/chat costs a decode and an encode per chunk more than /v1.
        out.append(("W2n cpu <= 1.3x W2", w2n.cpu / w2.cpu, w2n.cpu <= 1.3 * w2.cpu))
    if w2 and w2r and w2.cpu > 0:
        out.append(("W2r cpu <= 1.5x W2", w2r.cpu / w2.cpu, w2r.cpu <= 1.5 * w2.cpu))
    if w2 and w2m and w2.cpu > 0:
        out.append(("W2m cpu <= 1.3x W2", w2m.cpu / w2.cpu, w2m.cpu <= 1.3 * w2.cpu))
    if w2 and w2g and w2.cpu > 0:
        out.append(("W2g cpu <= 1.3x W2", w2g.cpu / w2.cpu, w2g.cpu <= 1.3 * w2.cpu))
    return out


def _slow_checks(rows: list[Row], target: str) -> list[Check]:
    w3, w3d = _find(rows, W3, target), _find(rows, W3, "direct")
    w5 = _find(rows, W5, target)
    out: list[Check] = []
    if w3 and w3d:
        ttfb = w3.ttfb50 - w3d.ttfb50
        out += [("W3 >= 95% of direct", w3.rate / w3d.rate, w3.rate >= 0.95 * w3d.rate),
                ("W3 ttfb50 <= direct + 2 ms", ttfb, ttfb <= 2.0)]
    if w3 and not math.isnan(w3.peak):
        out.append(("W3 peak RSS <= 100 MB", w3.peak, w3.peak <= 100))
    if w5:
        out.append(("W5 0 errors", w5.errors, w5.errors == 0))
        if not math.isnan(w5.peak):
            out.append(("W5 peak RSS <= 150 MB", w5.peak, w5.peak <= 150))
    if w5 and w3 and w3.cpu > 0:
        out.append(("W5 cpu/stream <= W3's", w5.cpu / w3.cpu, w5.cpu <= w3.cpu))
    return out


def _checks(rows: list[Row]) -> list[str]:
    """The issue's targets, per server: one worker, every stage on (tools offered)."""
    out = []
    for target in sorted({r.target for r in rows} - {"direct"}):
        checks = [*_latency_checks(rows, target), *_stream_checks(rows, target),
                  *_slow_checks(rows, target)]
        if checks:
            out.append(f"targets ({target}): " + "; ".join(
                f"{name}: {_fmt(v)} {'PASS' if ok else 'FAIL'}" for name, v, ok in checks))
    return out


def _compare(rows: list[Row]) -> list[str]:
    """With --compare: toolshim at this checkout next to toolshim at the other ref."""
    out = []
    for row in rows:
        ref = _find(rows, row.workload, "ref")
        if row.target != "proxy" or ref is None or not ref.cpu or not ref.rate:
            continue
        out.append(f"  {row.workload:20} cpu {row.cpu:.3f} vs ref {ref.cpu:.3f} ms "
                   f"({row.cpu / ref.cpu:.2f}x, spread ±{_fmt(row.cpu_spread, 0)}%"
                   f"/±{_fmt(ref.cpu_spread, 0)}%); per s {row.rate / ref.rate:.2f}x")
    return ["this checkout vs ref (proxy / ref):", *out] if out else []


def _git(root: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True,
                          check=False)
    return done.stdout.strip()


def render(samples: list[Sample], targets: list[Target], notes: list[str], root: Path) -> str:
    """The whole report: header (commit, date, `notes`), table, target checks, errors."""
    rows = aggregate(samples)
    changed = _git(root, "status", "--porcelain", "proxy")
    dirty = " (+ uncommitted changes in proxy/)" if changed else ""
    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    commit = _git(root, "rev-parse", "--short", "HEAD")
    lines = [f"toolshim bench  commit {commit}{dirty}  {now}  python {platform.python_version()}",
             *notes,
             ("per s = req/s (W1) or streams/s; ratio = per s / direct; +p50/+p99 = added"
              " latency ms; cpu = proxy CPU ms per request or stream"),
             "targets: " + ", ".join(f"{t.name}={t.url}" for t in targets), ""]
    lines.append(" ".join(n.rjust(w) if i > 1 else n.ljust(w)
                          for i, (n, w) in enumerate(_COLUMNS)))
    for row in rows:
        lines.append(_line(row, _find(rows, row.workload, "direct")))
    lines += [""] + _checks(rows) + _compare(rows)
    lines += [f"errors {r.workload} / {r.target}: {r.errors}, first: {r.first_error}"
              for r in rows if r.errors]
    return "\n".join(lines)
