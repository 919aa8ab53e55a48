"""The proxy under the cyclic garbage collector's eye: ``python bench/gc_probe.py ARGS``.

Runs ``python -m proxy ARGS`` and, when it exits (the bench stops it with SIGTERM),
writes to ``GC_OUT`` (default ``gc.txt`` in the working directory):

- every collection's count and duration per generation (median, 90th percentile,
  max, total): a collection runs on some request's path, so these are its stalls;
- with ``GC_CENSUS=1``, what the collector found unreachable, by type, most first.
  The census keeps that garbage instead of freeing it (``gc.DEBUG_SAVEALL``), so
  run it short. A request should leave none: anything that grows with the number
  of requests is a reference cycle on the request path (tests/e2e/
  test_cyclic_garbage_e2e.py guards the ones found so far).

Use it as the bench's proxy command (bench/README.md, "Cyclic garbage").
"""

from __future__ import annotations

import atexit
import collections
import gc
import os
import runpy
import sys
import time
from typing import Any

_durations: dict[int, list[float]] = collections.defaultdict(list)
_full: list[tuple[float, float]] = []
"""(seconds since start, duration) of each gen-2 collection: start-up, or serving?"""
_started: list[float] = [0.0]
_BORN = time.perf_counter()


def _timed(phase: str, info: dict[str, Any]) -> None:
    if phase == "start":
        _started[0] = time.perf_counter()
        return
    took = time.perf_counter() - _started[0]
    _durations[info["generation"]].append(took)
    if info["generation"] == 2:
        _full.append((_started[0] - _BORN, took))


def _name(obj: object) -> str:
    kind = type(obj)
    name = f"{kind.__module__}.{kind.__qualname__}"
    if kind.__name__ == "function":
        return f"{name} {obj.__qualname__}"  # type: ignore[attr-defined]
    if kind.__name__ == "cell":
        try:
            return f"{name} -> {type(obj.cell_contents).__qualname__}"  # type: ignore[attr-defined]
        except ValueError:  # an empty cell
            return name
    return name


def _report() -> None:
    lines = []
    for generation in sorted(_durations):
        spans = sorted(_durations[generation])
        lines.append(f"gen{generation}: {len(spans)} collections, median "
                     f"{spans[len(spans) // 2] * 1e6:.0f} us, p90 "
                     f"{spans[int(len(spans) * 0.9)] * 1e6:.0f} us, max {spans[-1] * 1e6:.0f} us,"
                     f" total {sum(spans) * 1e3:.1f} ms")
    lines += [f"gen2 at {at:.1f} s: {took * 1e3:.1f} ms" for at, took in _full]
    if os.environ.get("GC_CENSUS") == "1":
        gc.collect()
        counts = collections.Counter(_name(obj) for obj in gc.garbage)
        lines.append(f"unreachable: {len(gc.garbage)} objects")
        lines += [f"{count:9d} {name}" for name, count in counts.most_common(40)]
    with open(os.environ.get("GC_OUT", "gc.txt"), "w") as out:
        out.write("\n".join(lines) + "\n")


def main() -> None:
    gc.callbacks.append(_timed)
    if os.environ.get("GC_CENSUS") == "1":
        gc.set_debug(gc.DEBUG_SAVEALL)
    atexit.register(_report)
    sys.argv = ["proxy", *sys.argv[1:]]
    runpy.run_module("proxy", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
